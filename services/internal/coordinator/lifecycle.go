package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// A crawl's state is one state machine owned by the coordinator:
//
//	running ──finish──────────▶ finished
//	running ──pause at finish─▶ paused    (out of work, budget.pause_at_finish)
//	running ──pause───────────▶ paused
//	paused  ──resume──────────▶ running
//	running, paused ──cancel──▶ cancelled
//
// A continuous crawl (profile recrawl) never finishes; out of work, it is
// up to date until its next URL is due:
//
//	running    ──catch up──▶ up_to_date   (out of work)
//	up_to_date ──due───────▶ running      (the due check took due URLs)
//	up_to_date ──pause─────▶ paused
//	up_to_date ──cancel────▶ cancelled
//
// finished and cancelled are final. Only these named transitions change the
// state, each as a compare-and-set in the profile store (so that concurrent
// changes cannot both apply) and each logged. Finish and pause at finish are
// decided by the work (the finish check, nudged by the indexer), never by
// reading a crawl's status.

// transition is a named change of a crawl's state.
type transition struct {
	name string
	from []contracts.CrawlState
	to   contracts.CrawlState
}

var (
	finishing       = transition{"finish", []contracts.CrawlState{contracts.CrawlRunning}, contracts.CrawlFinished}
	pausingAtFinish = transition{"pause at finish", []contracts.CrawlState{contracts.CrawlRunning}, contracts.CrawlPaused}
	pausing         = transition{"pause", []contracts.CrawlState{contracts.CrawlRunning, contracts.CrawlUpToDate}, contracts.CrawlPaused}
	resuming        = transition{"resume", []contracts.CrawlState{contracts.CrawlPaused}, contracts.CrawlRunning}
	cancelling      = transition{"cancel", []contracts.CrawlState{contracts.CrawlRunning, contracts.CrawlPaused, contracts.CrawlUpToDate}, contracts.CrawlCancelled}
	catchingUp      = transition{"catch up", []contracts.CrawlState{contracts.CrawlRunning}, contracts.CrawlUpToDate}
	dueAgain        = transition{"due", []contracts.CrawlState{contracts.CrawlUpToDate}, contracts.CrawlRunning}
)

// verb is an API request on one crawl that depends on its state.
type verb string

const (
	verbCancel verb = "cancel" // DELETE /api/v1/crawls/{id}
	verbPatch  verb = "patch"  // PATCH /api/v1/crawls/{id}
	verbPause  verb = "pause"  // POST /api/v1/crawls/{id}/pause
	verbResume verb = "resume" // POST /api/v1/crawls/{id}/resume
)

// verbRule is what a verb does: in the from states of its transition it
// applies the transition, in its accept states it succeeds without changing
// the state, and in every other state it is refused with 409 Conflict. GET
// answers in every state and changes nothing.
type verbRule struct {
	t      *transition
	accept []contracts.CrawlState
}

var verbRules = map[verb]verbRule{
	// DELETE of a cancelled crawl is idempotent (and fails what is still
	// pending); a finished crawl has nothing left to cancel.
	verbCancel: {t: &cancelling, accept: []contracts.CrawlState{contracts.CrawlCancelled}},
	// Settings change while the crawl can still use them.
	verbPatch:  {accept: []contracts.CrawlState{contracts.CrawlRunning, contracts.CrawlPaused, contracts.CrawlUpToDate}},
	verbPause:  {t: &pausing, accept: []contracts.CrawlState{contracts.CrawlPaused}},
	verbResume: {t: &resuming, accept: []contracts.CrawlState{contracts.CrawlRunning, contracts.CrawlUpToDate}},
}

// ErrConflict is wrapped by the errors of verbs refused in the crawl's
// state; the API answers them with 409.
var ErrConflict = errors.New("not allowed in this state")

// conflictRounds bounds how often a verb re-reads a crawl whose state
// changed between its read and its compare-and-set.
const conflictRounds = 8

// apply runs verb v on crawl id and returns the crawl as it was when the
// verb was decided, and the state it is in now. It fails with ErrConflict
// when v is refused in the crawl's state, and with profiles.ErrNotFound.
func (co *Coordinator) apply(ctx context.Context, id string, v verb, reason string) (profiles.Crawl, contracts.CrawlState, error) {
	rule := verbRules[v]
	for range conflictRounds {
		c, err := co.deps.Profiles.Get(ctx, id)
		if err != nil {
			return c, "", err
		}
		if slices.Contains(rule.accept, c.State) {
			return c, c.State, nil
		}
		if rule.t == nil || !slices.Contains(rule.t.from, c.State) {
			return c, c.State, fmt.Errorf("%s crawl %s: it is %s: %w", v, id, c.State, ErrConflict)
		}
		err = co.transition(ctx, c, *rule.t, reason)
		if errors.Is(err, profiles.ErrConflict) {
			continue // changed meanwhile: decide again on the new state
		}
		return c, rule.t.to, err
	}
	return profiles.Crawl{}, "", fmt.Errorf("%s crawl %s: its state keeps changing: %w", v, id, ErrConflict)
}

// transition applies t to c, which must be in one of t's from states, as a
// compare-and-set on c's state, and logs it. It fails with
// profiles.ErrConflict when the stored state is no longer c's.
func (co *Coordinator) transition(ctx context.Context, c profiles.Crawl, t transition, reason string) error {
	if !slices.Contains(t.from, c.State) {
		return fmt.Errorf("%s crawl %s: it is %s: %w", t.name, c.ID, c.State, profiles.ErrConflict)
	}
	if err := co.deps.Profiles.Transition(ctx, c.ID, c.State, t.to, time.Now().UTC()); err != nil {
		return fmt.Errorf("%s crawl: %w", t.name, err)
	}
	co.log.Info("crawl state changed", "crawl_id", c.ID, "from", c.State, "to", t.to, "transition", t.name, "reason", reason)
	return nil
}

// OutOfWork is the termination rule over a crawl's record counts: a crawl is
// out of work when it has records and every one of them is in a terminal
// status (indexed, redirected, failed) or retired (parked by a spent budget,
// counted apart). Any other status, to-be-loaded, to-be-parsed and
// to-be-indexed as well as one this rule does not know, keeps it running.
func OutOfWork(counts map[contracts.Status]int64) bool {
	var total int64
	for s, n := range counts {
		if n == 0 {
			continue
		}
		if !s.Terminal() && s != contracts.Retired {
			return false
		}
		total += n
	}
	return total > 0
}

// CheckFinished ends every running crawl that is out of work: finished, or
// paused when its profile asks to pause at finish (so that budgets can be
// raised and retired URLs crawled). It returns how many crawls it ended.
func (co *Coordinator) CheckFinished(ctx context.Context) (int, error) {
	cs, err := co.deps.Profiles.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("list crawls: %w", err)
	}
	ended := 0
	var errs []error
	for _, c := range cs {
		if c.State != contracts.CrawlRunning {
			continue
		}
		ok, err := co.checkFinished(ctx, c)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			ended++
		}
	}
	return ended, errors.Join(errs...)
}

// checkFinished ends c when it is running and out of work, and reports
// whether it did. A crawl whose settings are being changed (PATCH puts
// retired URLs back) is left to the next check.
func (co *Coordinator) checkFinished(ctx context.Context, c profiles.Crawl) (bool, error) {
	mu := co.crawlLock(c.ID)
	if !mu.TryLock() {
		return false, nil
	}
	defer mu.Unlock()
	// The lagging count first: a crawl at work (nearly every check, the
	// indexer nudges one per batch) costs the index no refresh. A crawl
	// whose last pages the lagging view does not show yet is seen out of
	// work by a later check (FinishCheckInterval). Out of work is only
	// ever decided on the exact count.
	counts, err := co.deps.Tx.PeekCounts(ctx, c.ID)
	if err != nil {
		return false, fmt.Errorf("count records of crawl %s: %w", c.ID, err)
	}
	if !OutOfWork(counts) {
		return false, nil
	}
	if counts, err = co.deps.Tx.Counts(ctx, c.ID); err != nil {
		return false, fmt.Errorf("count records of crawl %s: %w", c.ID, err)
	}
	if !OutOfWork(counts) {
		return false, nil
	}
	t := finishing
	switch {
	case c.Profile.Recrawl != nil:
		t = catchingUp // a continuous crawl never finishes
	case c.Profile.Budget != nil && c.Profile.Budget.PauseAtFinish:
		t = pausingAtFinish
	}
	err = co.transition(ctx, c, t, fmt.Sprintf("no record pending (%d retired)", counts[contracts.Retired]))
	if errors.Is(err, profiles.ErrConflict) {
		return false, nil // paused or cancelled meanwhile
	}
	if err == nil {
		// Once: only the process whose compare-and-set applied gets here.
		msg := "crawl finished"
		switch t.to {
		case contracts.CrawlPaused:
			msg = "crawl paused at finish"
		case contracts.CrawlUpToDate:
			msg = "crawl up to date"
		}
		co.log.Info(msg, "crawl_id", c.ID, "counts", countsAttr(counts), "elapsed_ms", time.Since(c.CreatedAt).Milliseconds())
	}
	return err == nil, err
}

// crawlLock returns the lock that serializes, within this process, the
// finish check of crawl id with the changes that put its records back to
// work (PATCH): the check must not count a crawl out of work between the
// new settings and the URLs they bring back. Transitions themselves need
// no lock: they are compare-and-set in the store.
func (co *Coordinator) crawlLock(id string) *sync.Mutex {
	mu, _ := co.locks.LoadOrStore(id, new(sync.Mutex))
	return mu.(*sync.Mutex)
}

// NudgeFinish asks the finish check to look at crawl id soon: the indexer
// calls it for the crawls whose pages it just indexed, so that a crawl
// finishes right after its last page rather than at the next tick.
func (co *Coordinator) NudgeFinish(id string) {
	co.nudgeMu.Lock()
	co.nudged[id] = struct{}{}
	co.nudgeMu.Unlock()
	select {
	case co.nudge <- struct{}{}:
	default:
	}
}

// runFinishCheck checks the running crawls every FinishCheckInterval, and
// the nudged ones at once, until ctx is cancelled.
func (co *Coordinator) runFinishCheck(ctx context.Context) {
	tick := time.NewTicker(co.cfg.FinishCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := co.CheckFinished(ctx); err != nil && ctx.Err() == nil {
				co.log.Error("finish check", "err", err)
			}
		case <-co.nudge:
			// Gather the nudges of a short while: an indexer busy with a
			// crawl nudges for every contract, and one check serves them all.
			if !sleepCtx(ctx, min(nudgeGather, co.cfg.FinishCheckInterval)) {
				return
			}
			co.nudgeMu.Lock()
			ids := co.nudged
			co.nudged = map[string]struct{}{}
			co.nudgeMu.Unlock()
			for id := range ids {
				c, err := co.deps.Profiles.Get(ctx, id)
				if err == nil && c.State == contracts.CrawlRunning {
					_, err = co.checkFinished(ctx, c)
				}
				if err != nil && !errors.Is(err, profiles.ErrNotFound) && ctx.Err() == nil {
					co.log.Error("finish check", "crawl_id", id, "err", err)
				}
			}
		}
	}
}

// nudgeGather is how long the finish check gathers the indexer's nudges
// before it looks at the nudged crawls.
const nudgeGather = 100 * time.Millisecond

// sleepCtx waits d; it returns false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// countsAttr is a log attribute of record counts per status, with every
// terminal and pending status named (zero included) so that log lines of
// finished crawls have one shape.
func countsAttr(counts map[contracts.Status]int64) slog.Value {
	attrs := make([]slog.Attr, 0, len(contracts.Statuses)+1)
	var total int64
	for _, s := range contracts.Statuses {
		attrs = append(attrs, slog.Int64(string(s), counts[s]))
		total += counts[s]
	}
	attrs = append(attrs, slog.Int64("total", total))
	return slog.GroupValue(attrs...)
}
