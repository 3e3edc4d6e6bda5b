package main

import (
	"fmt"
	"math"
	"sort"
)

// point is one sample of one quantity of one service: at t seconds into the
// run, of the process incarnation that started at start seconds.
type point struct {
	t, start float64
	v        float64
}

// slope returns the growth per second of the samples taken at or after
// from, leaving out the first warm seconds of every incarnation (start-up),
// as the least-squares slope with one intercept per incarnation: a restart
// that begins again from a low value is not taken for a fall, nor the climb
// after it for growth. n is the number of samples used; with fewer than
// three, or all at one time in each incarnation, the slope is 0.
func slope(ps []point, from, warm float64) (perSec float64, n int) {
	type acc struct{ n, st, sv float64 }
	groups := map[float64]*acc{}
	var used []point
	for _, p := range ps {
		if p.t < from || p.t < p.start+warm {
			continue
		}
		g := groups[p.start]
		if g == nil {
			g = &acc{}
			groups[p.start] = g
		}
		g.n++
		g.st += p.t
		g.sv += p.v
		used = append(used, p)
	}
	var sxy, sxx float64
	for _, p := range used {
		g := groups[p.start]
		dt := p.t - g.st/g.n
		sxy += dt * (p.v - g.sv/g.n)
		sxx += dt * dt
	}
	if len(used) < 3 || sxx == 0 {
		return 0, len(used)
	}
	return sxy / sxx, len(used)
}

// verdict calls a trend growing when the slope over span seconds adds more
// than a tenth of the median level and more than floor (noise of a healthy
// service: a garbage collection, a burst of connections), and flat
// otherwise. It returns the verdict and the growth over span.
func verdict(perSec, span, median, floor float64) (string, float64) {
	growth := perSec * span
	switch {
	case span <= 0:
		return "too short", 0
	case growth > math.Max(0.1*median, floor):
		return "GROWING", growth
	default:
		return "flat", growth
	}
}

// series summarizes one quantity of one service over the run.
type series struct {
	first, last, max float64
	median           float64
	perHour          float64 // slope over the second half, per hour
	growth           float64 // over the second half
	verdict          string
	n                int
}

// summarize returns the first, last and largest value of ps (in time order)
// and the trend over [from, end] with the given noise floor.
func summarize(ps []point, from, end, warm, floor float64) series {
	if len(ps) == 0 {
		return series{verdict: "no samples"}
	}
	s := series{first: ps[0].v, last: ps[len(ps)-1].v}
	var tail []float64
	for _, p := range ps {
		s.max = math.Max(s.max, p.v)
		if p.t >= from {
			tail = append(tail, p.v)
		}
	}
	if len(tail) > 0 {
		sort.Float64s(tail)
		s.median = tail[len(tail)/2]
	}
	perSec, n := slope(ps, from, warm)
	s.n, s.perHour = n, perSec*3600
	s.verdict, s.growth = verdict(perSec, end-from, s.median, floor)
	if n < 3 {
		s.verdict = fmt.Sprintf("too few samples (%d)", n)
	}
	return s
}
