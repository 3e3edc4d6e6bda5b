package outage

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

var errFull = errors.New("no room")

// disk is a readiness check whose verdict the test sets; when freeAfter
// is positive, the disk is freed at that probe.
type disk struct {
	full      atomic.Bool
	probes    atomic.Int32
	freeAfter atomic.Int32
}

func (d *disk) check() metrics.Check {
	return metrics.Check{Backend: "disk", Probe: func(context.Context) error {
		if n := d.probes.Add(1); d.freeAfter.Load() > 0 && n >= d.freeAfter.Load() {
			d.full.Store(false)
		}
		if d.full.Load() {
			return errFull
		}
		return nil
	}}
}

// TestNoteDropsTheCachedVerdict checks that a failure makes the next Down
// probe again instead of answering "up" with the verdict of a probe less
// than a second old (an outage that starts within that second is seen at
// its first failure), and that no failure keeps the verdict.
func TestNoteDropsTheCachedVerdict(t *testing.T) {
	tests := []struct {
		name string
		err  error
		down bool
	}{
		{"recognised failure", errFull, true},
		{"other failure", errors.New("bad page"), true},
		{"no failure", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &disk{}
			g := New([]metrics.Check{d.check()}, nil)
			g.Notice(func(err error) bool { return errors.Is(err, errFull) })
			if down := g.Down(t.Context()); down != nil {
				t.Fatalf("Down() = %v with every backend up", down)
			}
			d.full.Store(true) // the disk fills within the second
			g.Note(tt.err)
			if down := g.Down(t.Context()); (len(down) > 0) != tt.down {
				t.Errorf("Down() after Note(%v) = %v, want down %v", tt.err, down, tt.down)
			}
		})
	}
}

// TestNoteReportsAnOutage checks that Note reports a failure a Notice
// function recognises as the outage's, even when the backends answer again
// by the next probe (a write cut back after failing gave its space back),
// and no other failure.
func TestNoteReportsAnOutage(t *testing.T) {
	d := &disk{}
	g := New([]metrics.Check{d.check()}, nil)
	g.Notice(func(err error) bool { return errors.Is(err, errFull) })
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("store segment: %w", errFull), true},
		{errors.New("bad page"), false},
		{nil, false},
	} {
		if got := g.Note(tt.err); got != tt.want {
			t.Errorf("Note(%v) = %v, want %v", tt.err, got, tt.want)
		}
		if down := g.Down(t.Context()); down != nil {
			t.Errorf("Down() after Note(%v) = %v with every backend up", tt.err, down)
		}
	}
	var nilGate *Gate
	if nilGate.Note(errFull) {
		t.Error("a nil gate's Note reported an outage")
	}
}

// TestWaitRunsWatchChecks checks that Wait holds work back while a watched
// check fails although no failure was seen, and returns once it passes.
func TestWaitRunsWatchChecks(t *testing.T) {
	d := &disk{}
	d.freeAfter.Store(3) // space is freed at the third probe
	g := New([]metrics.Check{d.check()}, nil)
	g.Watch(d.check())
	d.full.Store(true)
	if err := g.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d.full.Load() || d.probes.Load() < 3 {
		t.Errorf("Wait returned after %d probes with the disk full %v, want it to wait until it was freed", d.probes.Load(), d.full.Load())
	}
	// Without a watch, Wait trusts the last verdict (no failure seen).
	d2 := &disk{}
	d2.full.Store(true)
	if err := New([]metrics.Check{d2.check()}, nil).Wait(t.Context()); err != nil || d2.probes.Load() != 0 {
		t.Errorf("Wait without a watch = %v after %d probes, want nil at once", err, d2.probes.Load())
	}
}

// TestSettleWaitsForTheBackend checks that a settle failing while a
// backend is down is run again once it is back, and that a settle failing
// for another reason is run once.
func TestSettleWaitsForTheBackend(t *testing.T) {
	tests := []struct {
		name  string
		err   error // of the first runs of the settle
		calls int32
		ok    bool
	}{
		{"disk full, then freed", errFull, 3, true},
		{"other failure", errors.New("not held"), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &disk{}
			g := New([]metrics.Check{d.check()}, nil)
			g.Notice(func(err error) bool {
				if errors.Is(err, errFull) { // full for the next two probes
					d.freeAfter.Store(d.probes.Load() + 2)
					d.full.Store(true)
					return true
				}
				return false
			})
			var calls atomic.Int32
			err := g.Settle(t.Context(), func(context.Context) error {
				if calls.Add(1) < 3 {
					return tt.err
				}
				return nil
			})
			if calls.Load() != tt.calls || (err == nil) != tt.ok {
				t.Errorf("Settle = %v after %d runs, want ok %v after %d", err, calls.Load(), tt.ok, tt.calls)
			}
		})
	}
}

// TestNoteDuringAProbe: a probe that began before a failure and found every
// backend answering is no verdict on the failure. Down, asked after the
// failure while that probe is still in progress, probes again and sees the
// outage (a MinIO outage's first failed store was otherwise settled as the
// work's own failure, and its pages fetched again).
func TestNoteDuringAProbe(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var probes atomic.Int32
	down := atomic.Bool{}
	check := metrics.Check{Backend: "assets", Probe: func(context.Context) error {
		if probes.Add(1) == 1 {
			close(started)
			<-release // the first probe answers "up", late
			return nil
		}
		if down.Load() {
			return errFull
		}
		return nil
	}}
	g := New([]metrics.Check{check}, nil)
	first := make(chan []string)
	go func() { first <- g.Down(t.Context()) }()
	<-started
	// The outage begins and a store fails while the first probe runs.
	down.Store(true)
	g.Note(errors.New("store segment: connection reset"))
	got := make(chan []string)
	go func() { got <- g.Down(t.Context()) }()
	close(release)
	<-first
	if d := <-got; len(d) != 1 || d[0] != "assets" {
		t.Errorf("Down after a failure noted during a probe = %v, want [assets] (probes: %d)", d, probes.Load())
	}
}
