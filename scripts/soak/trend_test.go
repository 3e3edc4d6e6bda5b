package main

import (
	"math"
	"testing"
)

// line returns samples every 10 s from t0 to t1 of v = a + b·(t - start),
// of an incarnation that started at start.
func line(t0, t1, start, a, b float64) []point {
	var ps []point
	for t := t0; t <= t1; t += 10 {
		ps = append(ps, point{t: t, start: start, v: a + b*(t-start)})
	}
	return ps
}

func TestSlope(t *testing.T) {
	tests := []struct {
		name       string
		ps         []point
		from, warm float64
		want       float64
	}{
		{"flat", line(0, 600, 0, 100, 0), 300, 0, 0},
		{"steady growth", line(0, 600, 0, 100, 0.5), 300, 0, 0.5},
		// A restart starts again from a low value: a per-incarnation
		// intercept keeps the drop from reading as a fall.
		{"restart of a flat service", append(line(0, 400, 0, 200, 0), line(410, 900, 410, 50, 0)...), 300, 0, 0},
		{"growth across a restart", append(line(0, 400, 0, 100, 1), line(410, 900, 410, 100, 1)...), 300, 0, 1},
		// Start-up ramps are left out by warm.
		{"start-up ramp then flat", append(line(410, 440, 410, 0, 3), line(450, 900, 410, 120, 0)...), 300, 40, 0},
		{"too few samples", line(0, 10, 0, 0, 5), 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := slope(tt.ps, tt.from, tt.warm)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("slope = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		name                     string
		perSec, span, median     float64
		earlyMax, lateMax, floor float64
		want                     string
	}{
		{"flat", 0, 900, 100, 110, 110, 16, "flat"},
		{"noise under the floor", 0.01, 900, 100, 110, 120, 16, "flat"},
		{"slope and peak over a tenth and the floor", 0.05, 900, 100, 110, 160, 16, "GROWING"},
		{"slope only: a climb back to the old peak", 0.05, 900, 100, 160, 160, 16, "check"},
		{"peak only: a load that moved here", 0, 900, 100, 110, 400, 16, "check"},
		{"over the floor, under a tenth of a large level", 0.05, 900, 1000, 1000, 1040, 16, "flat"},
		{"falling", -1, 900, 100, 200, 100, 16, "flat"},
		{"no span", 1, 0, 100, 100, 200, 16, "too short"},
		{"a short run", 0.05, 120, 100, 110, 400, 16, "too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := verdict(tt.perSec, tt.span, tt.median, tt.earlyMax, tt.lateMax, tt.floor); got != tt.want {
				t.Errorf("verdict(%v, %v, %v, %v, %v, %v) = %q, want %q", tt.perSec, tt.span, tt.median, tt.earlyMax, tt.lateMax, tt.floor, got, tt.want)
			}
		})
	}
}
