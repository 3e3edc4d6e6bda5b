// Package outage tells a backend outage from failed work.
//
// When processing a contract fails, either the contract is at fault (or the
// page, or the web) or a backend the service depends on is down. The first
// case counts an attempt, and a contract that keeps failing ends in the
// dead-letter queue. The second case is not the contract's: a Gate probes
// the backends, and while one does not answer the contract is postponed
// without counting an attempt and the service takes no new work, probing
// again with a growing backoff until the backend is back. An outage then
// costs its own duration and nothing more.
package outage

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Backoff bounds between probes while a backend is down.
const (
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 2 * time.Second
	// probeEvery bounds how often Down asks the backends while they answer.
	probeEvery = time.Second
)

// Gate probes a service's backends after failures and holds the service's
// work back while one of them is down. A nil Gate knows of no backend: every
// failure counts as the work's own.
type Gate struct {
	checks []metrics.Check
	log    *slog.Logger
	// notes are told of every failure (see Note).
	notes []func(error) bool
	// watch are checks Wait runs even while every backend answers (see
	// Watch).
	watch []metrics.Check

	mu      sync.Mutex
	probed  time.Time // when the backends were last probed
	failing []string  // backends that did not answer then
	noted   uint64    // failures Note recognised: a probe begun before one is not kept
	watched time.Time // when Wait last ran the watch checks
	since   time.Time // start of the current outage; zero when none
	probing chan struct{}
}

// New returns a gate over checks (see metrics.BackendChecks).
func New(checks []metrics.Check, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{checks: checks, log: log}
}

// Notice adds f to the functions Note tells of a failure: f reports whether
// the failure shows a backend down (a write failed for lack of disk space,
// see diskspace.Watch.Note), which the next probe must then see. Call it
// before the gate is used.
func (g *Gate) Notice(f func(error) bool) {
	if g != nil {
		g.notes = append(g.notes, f)
	}
}

// Note tells the gate of err, a failure of work, before the caller asks
// Down or Failed whether a backend is down. When a Notice function
// recognises err, the last probe's verdict is dropped so that the next Down
// probes again, and Note reports true: err itself shows the outage (a write
// failed for lack of disk space), whatever the next probe finds. A probe
// can find the disk available a moment after such a failure, when writes
// cut back after failing have given their space back; work that failed so
// is the outage's, not its own.
func (g *Gate) Note(err error) bool {
	if g == nil || err == nil {
		return false
	}
	outage := false
	for _, f := range g.notes {
		if f(err) {
			outage = true
			g.mu.Lock()
			g.probed = time.Time{}
			g.noted++
			g.mu.Unlock()
		}
	}
	// A failure right after a probe that found every backend answering
	// may be the first sign of an outage: the next Down probes afresh
	// rather than trust that verdict (a cached "down" stays).
	// A probe in progress may have begun before the failure: its "up" is
	// no verdict on it either (noted makes Down probe once more).
	g.mu.Lock()
	if g.failing == nil {
		g.probed = time.Time{}
		g.noted++
	}
	g.mu.Unlock()
	return outage
}

// Watch adds c, one of the gate's checks, to those Wait runs (at most once
// a second) even while every backend answers, so that the service stops
// taking work before a failure: a disk whose free space fell below its
// floor. c must be cheap. Call it before the gate is used.
func (g *Gate) Watch(c metrics.Check) {
	if g != nil {
		g.watch = append(g.watch, c)
	}
}

// watchFails runs the watch checks when a second has passed since their
// last run, and reports whether one failed; the next Down then probes.
func (g *Gate) watchFails(ctx context.Context) bool {
	g.mu.Lock()
	if len(g.watch) == 0 || time.Since(g.watched) < probeEvery {
		g.mu.Unlock()
		return false
	}
	g.watched = time.Now()
	g.mu.Unlock()
	for _, c := range g.watch {
		if c.Probe(ctx) != nil {
			g.mu.Lock()
			g.probed = time.Time{}
			g.mu.Unlock()
			return true
		}
	}
	return false
}

// Down probes the backends, at most once every second (a probe in progress
// is shared), and returns the names of those that did not answer, or nil.
func (g *Gate) Down(ctx context.Context) []string {
	if g == nil || len(g.checks) == 0 {
		return nil
	}
	g.mu.Lock()
	for {
		if time.Since(g.probed) < probeEvery {
			f := g.failing
			g.mu.Unlock()
			return f
		}
		if g.probing == nil {
			break
		}
		wait := g.probing
		g.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil
		}
		g.mu.Lock()
	}
	done := make(chan struct{})
	g.probing = done
	noted := g.noted
	g.mu.Unlock()

	r := metrics.Ready(ctx, g.checks)

	g.mu.Lock()
	defer g.mu.Unlock()
	g.probing = nil
	close(done)
	if ctx.Err() != nil {
		return nil // no verdict: the caller is shutting down
	}
	g.probed = time.Now()
	if g.noted != noted {
		g.probed = time.Time{} // a failure was noted meanwhile: probe again
	}
	g.failing = nil
	if len(r.Failing) > 0 {
		g.failing = r.Failing
	}
	switch {
	case g.failing != nil && g.since.IsZero():
		g.since = time.Now()
		errs := make([]string, 0, len(g.failing))
		for _, b := range g.failing {
			errs = append(errs, b+": "+r.Backends[b])
		}
		g.log.Warn("backend unavailable: work waits for it", "backends", strings.Join(g.failing, ","), "err", strings.Join(errs, "; "))
	case g.failing == nil && !g.since.IsZero():
		g.log.Info("backends available again: work resumes", "outage_ms", time.Since(g.since).Milliseconds())
		g.since = time.Time{}
	}
	return g.failing
}

// Wait returns once every backend answers, probing with a growing backoff,
// or when ctx ends (then with ctx's error). It returns at once when the last
// probe found every backend answering and the watch checks pass.
func (g *Gate) Wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	up := g.since.IsZero()
	g.mu.Unlock()
	if up && !g.watchFails(ctx) {
		return nil
	}
	backoff := firstBackoff
	for len(g.Down(ctx)) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
	return ctx.Err()
}

// Settle runs op, which settles a delivery (ack, retry, postpone), and
// while it fails with a backend down (the queue's disk is full, its broker
// gone) waits for the backend and runs it again: a delivery whose settle
// failed stays held by the consumer, and would be stranded until the
// service restarts. It returns op's last error.
func (g *Gate) Settle(ctx context.Context, op func(context.Context) error) error {
	err := op(ctx)
	// A delivery the queue took back (queue.ErrSettled) cannot be settled
	// again: it is someone else's now.
	for err != nil && ctx.Err() == nil && g != nil && !errors.Is(err, queue.ErrSettled) {
		g.Note(err)
		if len(g.Down(ctx)) == 0 || g.Wait(ctx) != nil {
			return err
		}
		err = op(ctx)
	}
	return err
}
