package coordinator

import (
	"context"
	"fmt"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// A paused crawl's URLs wait parked in the broker, for the loaders'
// PausedDelay (30 s by default), since a paused crawl must hold neither the
// loaders' memory nor their prefetch slots. A resume therefore publishes the
// crawl's to-be-loaded records again at once, so that fetching restarts
// within a second of the answer instead of when the parked copies come
// due. The parked copies, when they come back, carry no snapshot: the
// loader reads their records and skips what the resumed copies fetched
// (and one loader owns a shard, so a copy of a URL being fetched is held
// back by its claim).

// resumeRepublish queues crawl id's to-be-loaded records to be published
// again by the resume loop.
func (co *Coordinator) resumeRepublish(id string) {
	co.resumeMu.Lock()
	co.resumed[id] = struct{}{}
	co.resumeMu.Unlock()
	select {
	case co.resume <- struct{}{}:
	default:
	}
}

// runResume publishes the to-be-loaded records of resumed crawls until ctx
// is cancelled.
func (co *Coordinator) runResume(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-co.resume:
		}
		co.resumeMu.Lock()
		ids := co.resumed
		co.resumed = map[string]struct{}{}
		co.resumeMu.Unlock()
		for id := range ids {
			n, err := co.republishResumed(ctx, id)
			if err != nil && ctx.Err() == nil {
				// The parked copies come due anyway; the sweep covers the rest.
				co.log.Warn("publish urls of a resumed crawl", "crawl_id", id, "urls", n, "err", err)
				continue
			}
			co.log.Info("published urls of a resumed crawl", "crawl_id", id, "urls", n)
		}
	}
}

// republishResumed publishes crawl id's to-be-loaded records while it is
// running, and returns how many it published.
func (co *Coordinator) republishResumed(ctx context.Context, id string) (int, error) {
	n, after := 0, ""
	for {
		c, err := co.deps.Profiles.Get(ctx, id)
		if err != nil {
			return n, fmt.Errorf("get crawl: %w", err)
		}
		if c.State != contracts.CrawlRunning {
			return n, nil // paused again, or ended
		}
		recs, err := co.deps.Tx.List(ctx, id, contracts.ToBeLoaded, after, rebuildPage)
		if err != nil {
			return n, fmt.Errorf("list to-be-loaded records: %w", err)
		}
		if len(recs) == 0 {
			return n, nil
		}
		after = recs[len(recs)-1].Key
		if err := co.enq.PublishResumed(ctx, id, c.Profile, recs); err != nil {
			return n, err
		}
		n += len(recs)
	}
}
