package loader

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/frontier"
)

// A loader keeps only the work it can do soon: a crawl host group holds at
// most as many URLs as it can fetch within parkHorizon (and at most
// Config.GroupQueue). Further URLs of the group are parked: published back
// to the group's shard as a delayed contract, and settled. So a group with
// a huge backlog holds neither memory nor the prefetch slots of its shard,
// and never holds up the other groups (no head-of-line blocking).
const (
	parkHorizon  = 2 * time.Minute
	minParkDelay = time.Second
	maxParkDelay = 5 * time.Minute // below the recovery lease, which parking renews
	// holdWait: a second contract's URLs of a group are held only when the
	// group's queue drains within it; slower groups park them.
	holdWait = 5 * time.Second
)

// groupLimit returns how many URLs a group with the given delay may hold.
func (l *Loader) groupLimit(delay time.Duration) int {
	if delay <= 0 {
		return l.cfg.GroupQueue
	}
	return max(1, min(l.cfg.GroupQueue, int(parkHorizon/delay)))
}

// parked collects the URLs of one contract that are parked.
type parked struct {
	c     *contracts.LoaderContract
	tasks []*task
	delay time.Duration
}

func (p *parked) add(t *task, queued int, delay time.Duration) {
	p.tasks = append(p.tasks, t)
	wait := time.Duration(queued) * max(delay, 100*time.Millisecond)
	p.delay = max(p.delay, min(max(wait, minParkDelay), maxParkDelay))
}

// park publishes the parked URLs to their shard with a delay and renews
// their records' lease, so that the recovery sweep does not republish them
// meanwhile. It reports whether the URLs are parked; if not, the caller
// keeps them.
func (l *Loader) park(ctx context.Context, p *parked) bool {
	if len(p.tasks) == 0 {
		return true
	}
	n := max(l.deps.Shards, 1)
	byShard := map[string][]contracts.LoaderURL{}
	var ts []txindex.Transition
	for _, t := range p.tasks {
		q := frontier.ShardQueue(frontier.ShardOf(t.group, n), n)
		byShard[q] = append(byShard[q], contracts.LoaderURL{URL: t.url, Depth: t.depth, Hops: t.hops, Group: t.group})
		ts = append(ts, txindex.Transition{Key: txindex.Key(p.c.CrawlID, t.url), From: contracts.ToBeLoaded, To: contracts.ToBeLoaded})
	}
	for q, urls := range byShard {
		body, err := json.Marshal(contracts.LoaderContract{V: contracts.Version, CrawlID: p.c.CrawlID, Profile: p.c.Profile, URLs: urls})
		if err == nil {
			err = l.deps.Queue.Publish(ctx, q, queue.Message{Body: body, Delay: p.delay})
		}
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("park urls", "queue", q, "urls", len(urls), "err", fmt.Errorf("publish: %w", err))
			}
			return false // the URLs published to other shards are duplicates, which is harmless
		}
	}
	if _, err := l.deps.Tx.Transition(ctx, ts); err != nil && ctx.Err() == nil {
		l.log.Warn("renew lease of parked urls", "urls", len(ts), "err", err)
	}
	l.parkedURLs.Add(int64(len(p.tasks)))
	return true
}

// QueuedOf returns how many URLs of group the loader holds, and the group's
// last delay.
func (l *Loader) QueuedOf(group string) (int, time.Duration) { return l.sched.Queued(group) }
