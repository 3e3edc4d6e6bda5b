package queueing

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/frontier"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// The durable frontier (Config.FrontierDir, see docs/architecture.md): a
// contract's URLs are filed in the store of its shard (pkg/frontier) and the
// contract is acknowledged at once. Each crawl host group takes from the
// store what it can fetch within parkHorizon (its window), the earliest due
// first, and takes more as that drains; a URL leaves the store once its
// outcome is recorded. Nothing is parked: a URL crosses loader_pending once,
// a paused crawl's URLs stay filed, and a retry waits in memory as before.

// fronts are the frontier stores of a loader's shards, and the groups
// whose windows are to be filled again.
type fronts struct {
	stores []*frontier.Store // by shard

	mu      sync.Mutex
	pending map[shardGroup]struct{}
	wake    chan struct{}
}

type shardGroup struct {
	Shard int
	Group string
}

// FeedInterval is how often every group's window is looked at: a resumed
// crawl's URLs, and URLs that no fetch of their group called for, are taken
// within it.
const FeedInterval = 500 * time.Millisecond

// openFronts opens the store of every shard under dir.
func openFronts(ctx context.Context, dir string, shards int) (*fronts, error) {
	f := &fronts{pending: map[shardGroup]struct{}{}, wake: make(chan struct{}, 1)}
	for i := range shards {
		d := filepath.Join(dir, fmt.Sprintf("shard-%02d", i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			f.close()
			return nil, fmt.Errorf("frontier of shard %d: %w", i, err)
		}
		s, err := frontier.Open(ctx, d)
		if err != nil {
			f.close()
			return nil, err
		}
		f.stores = append(f.stores, s)
	}
	return f, nil
}

func (f *fronts) close() {
	for _, s := range f.stores {
		_ = s.Close()
	}
}

// want asks for group's window to be filled again.
func (f *fronts) want(shard int, group string) {
	f.mu.Lock()
	f.pending[shardGroup{shard, group}] = struct{}{}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// file files c's URLs in the store of shard and acknowledges the contract:
// its URLs are durable there.
func (fr *Frontier) file(ctx context.Context, shard int, d queue.Delivery, c *contracts.LoaderContract) consume.Verdict {
	if !fr.own.owns(shard) {
		// The shard was lost since the delivery came: its new owner files it.
		return consume.Retry(fmt.Errorf("%s is no longer this loader's", routing.ShardQueue(shard, fr.shards)))
	}
	// A snapshot is kept only for a store that learns from it.
	_, learns := fr.deps.Tx.(txindex.Revisions)
	trusted := learns && !queue.SeenBefore(d)
	es := make([]frontier.Entry, 0, len(c.URLs))
	groups := map[string]bool{}
	for _, u := range c.URLs {
		_, g := fr.placeOf(c, u)
		e := frontier.Entry{Group: g, Crawl: c.CrawlID, URL: u.URL, Depth: u.Depth, Hops: u.Hops}
		// The entry's data is the snapshot of its record the contract
		// carried, when the contract can be trusted.
		if trusted && u.Snapshot != nil {
			if b, err := json.Marshal(u.Snapshot); err == nil {
				e.Data = b
			}
		}
		es = append(es, e)
		groups[g] = true
	}
	n, err := fr.fronts.stores[shard].File(ctx, es)
	if err != nil {
		fr.log.Warn("file urls", "crawl_id", c.CrawlID, "urls", len(es), "err", err)
		return consume.Retry(err)
	}
	fr.filedURLs.Add(int64(n))
	fr.met.Filed(n)
	for g := range groups {
		fr.fronts.want(shard, g)
	}
	return consume.Ack()
}

// feedLoop fills the windows of the groups asked for, and every
// FeedInterval those of every group with URLs to take, until ctx is done.
func (fr *Frontier) feedLoop(ctx context.Context) {
	t := time.NewTicker(FeedInterval)
	defer t.Stop()
	for {
		all := false
		select {
		case <-ctx.Done():
			return
		case <-fr.fronts.wake:
		case <-t.C:
			all = true
		}
		fr.fronts.mu.Lock()
		todo := fr.fronts.pending
		fr.fronts.pending = map[shardGroup]struct{}{}
		fr.fronts.mu.Unlock()
		if all {
			for shard, s := range fr.fronts.stores {
				for _, q := range s.Queues() {
					if q.Filed > q.Taken {
						todo[shardGroup{shard, q.Group}] = struct{}{}
					}
				}
			}
		}
		for sg := range todo {
			if ctx.Err() != nil {
				return
			}
			fr.feed(ctx, sg.Shard, sg.Group)
		}
	}
}

// feed fills group's window from the store of shard: up to what the group
// can fetch within parkHorizon, once it has drained to half of that, from
// the queues of its crawls that are not paused.
func (fr *Frontier) feed(ctx context.Context, shard int, group string) {
	if !fr.own.owns(shard) {
		return
	}
	queued, delay := fr.sched.Backlog(group)
	limit := fr.groupLimit(delay)
	if queued > limit/2 {
		return
	}
	want := limit - queued
	s := fr.fronts.stores[shard]
	now := time.Now()
	for _, q := range s.QueuesOf(group) {
		if want <= 0 {
			return
		}
		if q.Filed <= q.Taken || fr.cancels.State(ctx, q.Crawl) == contracts.CrawlPaused {
			continue
		}
		es, err := s.Take(ctx, q.QueueID, want, now)
		if err != nil {
			fr.log.Warn("take filed urls", "chg", group, "crawl_id", q.Crawl, "err", err)
			return
		}
		want -= len(es)
		for _, e := range es {
			t, err := fr.filedTask(ctx, shard, e)
			if err != nil {
				if ctx.Err() == nil {
					fr.log.Warn("filed url", "crawl_id", e.Crawl, "url", e.URL, "err", err)
				}
				_ = s.Release([]frontier.Entry{e})
				continue
			}
			fr.applyBudget(t)
			fr.schedule(ctx, t)
		}
	}
}

// filedTask makes the task of entry e of shard's store.
func (fr *Frontier) filedTask(ctx context.Context, shard int, e frontier.Entry) (*Task, error) {
	p, err := fr.profs.Resolve(ctx, e.Crawl, nil)
	if err != nil {
		return nil, fmt.Errorf("resolve profile: %w", err)
	}
	p = fr.pol.current(e.Crawl, p)
	dl := &delivery{gate: fr.deps.Gate, front: fr.fronts.stores[shard], entry: e, refill: func() { fr.fronts.want(shard, e.Group) }}
	t := &Task{dl: dl, CrawlID: e.Crawl, Profile: p, Group: e.Group, Shard: shard, URL: e.URL, Host: hostOf(e.URL), Depth: e.Depth, Hops: e.Hops}
	// The snapshot filed with the URL is trusted unless the entry survived
	// a crash: its outcome may be recorded and its removal lost, and this
	// process's store does not know the later version (the fetcher's admit).
	if len(e.Data) > 0 && !e.Recovered {
		var snap contracts.Snapshot
		if json.Unmarshal(e.Data, &snap) == nil {
			if r, ok := txindex.Learn(fr.deps.Tx, txindex.Key(e.Crawl, e.URL), &snap); ok {
				t.Known = &r
			}
		}
	}
	return t, nil
}

// settleFiled ends the filed entry of dl: removed once its outcome is
// durable (err nil), otherwise filed again a little later (a second later
// while a backend is down, else five).
func (dl *delivery) settleFiled(ctx context.Context, log *slog.Logger, err error) {
	var serr error
	switch {
	case err == nil:
		serr = dl.front.Done(ctx, []frontier.Entry{dl.entry})
	case len(dl.gate.Down(ctx)) > 0:
		serr = dl.front.Refile(ctx, dl.entry, time.Now().Add(time.Second))
	default:
		serr = dl.front.Refile(ctx, dl.entry, time.Now().Add(5*time.Second))
	}
	if serr != nil && ctx.Err() == nil {
		log.Warn("settle filed url", "url", dl.entry.URL, "err", serr)
	}
	dl.refill()
}

// FiledReport returns the queues of the loader's frontier stores, the
// earliest due first, at most limit of them, and the URLs filed in
// all; nil and 0 without stores.
func (fr *Frontier) FiledReport(ctx context.Context, limit int) ([]contracts.FrontierFiled, int) {
	if fr.fronts == nil {
		return nil, 0
	}
	var out []contracts.FrontierFiled
	total := 0
	for _, s := range fr.fronts.stores {
		for _, q := range s.Queues() {
			total += q.Filed
			due, ok, err := s.Oldest(ctx, q.QueueID)
			if err != nil || !ok {
				continue // emptied meanwhile, or the store is closing
			}
			out = append(out, contracts.FrontierFiled{Group: q.Group, CrawlID: q.Crawl, Filed: q.Filed, Taken: q.Taken, OldestDue: due.UTC()})
		}
	}
	slices.SortFunc(out, func(a, b contracts.FrontierFiled) int {
		return cmp.Or(a.OldestDue.Compare(b.OldestDue), cmp.Compare(a.Group, b.Group), cmp.Compare(a.CrawlID, b.CrawlID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, total
}
