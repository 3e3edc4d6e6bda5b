package main

import (
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// perSecond returns the pages fetched (requests other than robots.txt, by
// the time they started) in each second from t0 to the last request.
func perSecond(log []websim.Request, t0 time.Time) []int {
	var out []int
	for _, r := range log {
		if r.Path == "/robots.txt" {
			continue
		}
		s := int(r.Start.Sub(t0) / time.Second)
		if s < 0 {
			continue
		}
		for len(out) <= s {
			out = append(out, 0)
		}
		out[s]++
	}
	return out
}

// Recovery windows: the rate is the mean over rateWindow; the baseline is
// the mean over baseWindow before the kill; the rate has recovered once it
// stays at least recoveredShare of the baseline for holdWindow.
const (
	rateWindow     = 10
	baseWindow     = 30
	holdWindow     = 30
	recoveredShare = 0.8
)

// dip is how the page rate went through one kill.
type dip struct {
	baseline  float64 // pages/s over the baseWindow seconds before the kill
	lowest    float64 // the lowest rateWindow mean from the kill until it recovered
	recovered int     // seconds from the kill until the rate recovered; -1: not before the crawl ended
}

// rateDip measures the rate around a kill at second k of the series.
func rateDip(series []int, k int) dip {
	mean := func(from, n int) float64 {
		sum, cnt := 0, 0
		for i := max(from, 0); i < from+n && i < len(series); i++ {
			sum += series[i]
			cnt++
		}
		if cnt == 0 {
			return 0
		}
		return float64(sum) / float64(cnt)
	}
	d := dip{baseline: mean(k-baseWindow, baseWindow), recovered: -1}
	d.lowest = d.baseline
	ok := func(t int) bool { return mean(t, rateWindow) >= recoveredShare*d.baseline }
	for t := k; t+rateWindow <= len(series); t++ {
		d.lowest = min(d.lowest, mean(t, rateWindow))
		if !ok(t) {
			continue
		}
		held := true
		for u := t; u <= t+holdWindow && u+rateWindow <= len(series); u++ {
			if !ok(u) {
				held = false
				break
			}
		}
		if held {
			d.recovered = t - k
			break
		}
	}
	return d
}
