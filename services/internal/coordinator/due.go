package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The due check: every DueCheckInterval, each continuous crawl that is
// running or up to date has its due URLs (txindex.Index.Due, an index on
// the due time) moved back to to-be-loaded and published to the loaders,
// which fetch them under the crawl's politeness and budgets like any URL,
// conditionally on what the last fetch stored (see the loader). An up to
// date crawl with due URLs is running again; the finish check makes it up
// to date when they are settled.

// dueBatch is how many due URLs one query of the due check takes.
const dueBatch = 1000

// runDueCheck runs CheckDue every DueCheckInterval until ctx is cancelled.
func (co *Coordinator) runDueCheck(ctx context.Context) {
	tick := time.NewTicker(co.cfg.DueCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if len(co.deps.Gate.Down(ctx)) > 0 {
			continue // the next tick finds the same URLs due
		}
		if _, err := co.CheckDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			co.deps.Gate.Note(err)
			co.log.Error("due check", "err", err)
		}
	}
}

// CheckDue takes the URLs due at now of every continuous crawl that is
// running or up to date back into the pipeline, and returns how many it
// took.
func (co *Coordinator) CheckDue(ctx context.Context, now time.Time) (int, error) {
	cs, err := co.deps.Profiles.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("list crawls: %w", err)
	}
	total := 0
	var errs []error
	for _, c := range cs {
		if c.Profile.Recrawl == nil || (c.State != contracts.CrawlRunning && c.State != contracts.CrawlUpToDate) {
			continue
		}
		n, err := co.takeDue(ctx, c, now)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// takeDue moves up to MaxDuePerCheck due URLs of c to to-be-loaded and
// publishes them, making an up to date crawl running first. It holds the
// crawl's lock, so that no finish check counts the crawl out of work
// between the state change and the records' moves.
func (co *Coordinator) takeDue(ctx context.Context, c profiles.Crawl, now time.Time) (int, error) {
	mu := co.crawlLock(c.ID)
	mu.Lock()
	defer mu.Unlock()
	// The state may have changed since the list was read (the finish
	// check, a pause): decide on the state under the lock.
	c, err := co.deps.Profiles.Get(ctx, c.ID)
	if err != nil {
		return 0, fmt.Errorf("read crawl %s: %w", c.ID, err)
	}
	if c.State != contracts.CrawlRunning && c.State != contracts.CrawlUpToDate {
		return 0, nil
	}
	taken := 0
	for taken < co.cfg.MaxDuePerCheck {
		recs, err := co.deps.Tx.Due(ctx, c.ID, now, min(dueBatch, co.cfg.MaxDuePerCheck-taken))
		if err != nil {
			return taken, fmt.Errorf("due urls of crawl %s: %w", c.ID, err)
		}
		if len(recs) == 0 {
			return taken, nil
		}
		if c.State == contracts.CrawlUpToDate {
			err := co.transition(ctx, c, dueAgain, fmt.Sprintf("%d or more urls due", len(recs)))
			if err != nil {
				if errors.Is(err, profiles.ErrConflict) {
					return taken, nil // paused or cancelled meanwhile
				}
				return taken, err
			}
			c.State = contracts.CrawlRunning
		}
		ts := make([]txindex.Transition, len(recs))
		for i, r := range recs {
			ts[i] = txindex.Transition{Key: r.Key, From: r.Status, To: contracts.ToBeLoaded, ResetAttempts: true}
		}
		applied, err := co.deps.Tx.Transition(ctx, ts)
		if err != nil {
			return taken, fmt.Errorf("take due urls of crawl %s: %w", c.ID, err)
		}
		var back []txindex.Record
		for i, r := range recs {
			if applied[i] {
				back = append(back, r)
			}
		}
		// Records moved but not published are republished by the
		// recovery sweep after its lease.
		if err := co.enq.Publish(ctx, c.ID, c.Profile, back); err != nil {
			return taken, fmt.Errorf("publish due urls of crawl %s: %w", c.ID, err)
		}
		taken += len(back)
		co.met.DueTaken(len(back))
		co.refetchedOf(c.ID).Add(int64(len(back)))
		if len(recs) < dueBatch {
			return taken, nil
		}
	}
	return taken, nil
}

// recrawlStatus returns the schedule figures of continuous crawl c.
func (co *Coordinator) recrawlStatus(ctx context.Context, c profiles.Crawl) (*contracts.RecrawlStatus, error) {
	due, next, err := co.deps.Tx.DueStats(ctx, c.ID, time.Now())
	if err != nil {
		return nil, fmt.Errorf("due urls: %w", err)
	}
	return &contracts.RecrawlStatus{Due: due, NextDue: next}, nil
}
