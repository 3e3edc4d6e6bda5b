package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
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

// verdict judges a quantity by two signs of a leak, each beyond a tenth of
// the level and beyond floor (noise of a healthy service: a garbage
// collection, a burst of connections): the slope within incarnations over
// the second half adds more than that over span, and the peak of the last
// third exceeds the peak before it by more than that. Both: GROWING; one:
// "check" (a load that moved between services after a restart raises one
// process's level without a leak); neither: flat; a span under minSpan
// seconds: too short. It returns the verdict
// and the growth by the slope over span.
func verdict(perSec, span, median, earlyMax, lateMax, floor float64) (string, float64) {
	growth := perSec * span
	if span < minSpan {
		return "too short", growth
	}
	bySlope := growth > math.Max(0.1*median, floor)
	byPeak := lateMax > earlyMax+math.Max(0.1*earlyMax, floor)
	switch {
	case bySlope && byPeak:
		return "GROWING", growth
	case bySlope || byPeak:
		return "check", growth
	default:
		return "flat", growth
	}
}

// minSpan is the shortest second half the verdict judges: in a few minutes
// a restart or a crawl's start moves the levels more than any leak would.
const minSpan = 300

// series summarizes one quantity of one service over the run.
type series struct {
	first, last, max  float64
	median            float64
	earlyMax, lateMax float64 // peaks before and in the last third of the run
	perHour           float64 // slope over the second half, per hour
	growth            float64 // over the second half
	verdict           string
	n                 int
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
		if p.t < end*2/3 {
			s.earlyMax = math.Max(s.earlyMax, p.v)
		} else {
			s.lateMax = math.Max(s.lateMax, p.v)
		}
	}
	if len(tail) > 0 {
		sort.Float64s(tail)
		s.median = tail[len(tail)/2]
	}
	perSec, n := slope(ps, from, warm)
	s.n, s.perHour = n, perSec*3600
	s.verdict, s.growth = verdict(perSec, end-from, s.median, s.earlyMax, s.lateMax, floor)
	if n < 3 {
		s.verdict = fmt.Sprintf("too few samples (%d)", n)
	}
	return s
}

// reportFile prints the per-service summary of dir/samples.tsv. An
// incarnation's start is taken as its first sample.
func reportFile(dir string, step time.Duration) error {
	f, err := os.Open(filepath.Join(dir, "samples.tsv"))
	if err != nil {
		return err
	}
	defer f.Close()
	var samples []sample
	starts := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) < 7 || c[0] == "t_s" {
			continue
		}
		var s sample
		var errs [6]error
		s.t, errs[0] = strconv.ParseFloat(c[0], 64)
		s.service = c[1]
		s.incarnation, errs[1] = strconv.Atoi(c[2])
		s.pid, errs[2] = strconv.Atoi(c[3])
		s.rssKiB, errs[3] = strconv.ParseInt(c[4], 10, 64)
		s.goroutines, errs[4] = strconv.Atoi(c[5])
		s.fds, errs[5] = strconv.Atoi(c[6])
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("samples.tsv line %q: %w", sc.Text(), err)
			}
		}
		k := s.service + "/" + c[2]
		if _, ok := starts[k]; !ok {
			starts[k] = s.t
		}
		s.start = starts[k]
		samples = append(samples, s)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(samples) == 0 {
		return fmt.Errorf("no samples in %s", dir)
	}
	report(os.Stdout, samples, samples[len(samples)-1].t, step.Seconds())
	return nil
}
