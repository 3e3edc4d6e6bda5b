package queueing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Intake: a contract's URLs are decoded, grouped, and then held in the
// scheduler or parked in the broker.
//
// A loader keeps only the work it can do soon: a crawl host group holds at
// most as many URLs as it can fetch within parkHorizon (and at most
// Config.GroupQueue). Further URLs of the group are parked: published back
// to the group's shard as a delayed contract, and settled. So a group with
// a huge backlog holds neither memory nor the prefetch slots of its shard,
// and never holds up the other groups (no head-of-line blocking). The URLs
// of a paused crawl are parked the same way, for Config.PausedDelay.
const (
	parkHorizon  = 2 * time.Minute
	minParkDelay = time.Second
	// parkFloor is the least time a parked URL is expected to wait per URL
	// queued before it: a group's politeness delay, but not less, so that a
	// group without delay does not take its parked URLs back at once.
	parkFloor    = 10 * time.Millisecond
	maxParkDelay = 5 * time.Minute // below the recovery lease, which parking renews
	// holdWait: a second contract's URLs of a group are held only when the
	// group's queue drains within it; slower groups park them.
	holdWait = 5 * time.Second
)

// intake takes the deliveries of one shard until ctx is done. Deliveries
// still in the channel then stay unsettled and go back to the queue when
// the loader stops consuming. The consumer shell dead-letters deliveries
// without a valid contract; accept holds each valid one until its URLs
// have an outcome (see delivery).
func (fr *Frontier) intake(ctx context.Context, shard int, deliveries <-chan queue.Delivery) {
	shell := consume.New(consume.Config[contracts.LoaderContract]{QueueName: routing.ShardQueue(shard, fr.shards),
		Kind: "loader", Validate: validContract, Version: func(c *contracts.LoaderContract) int { return c.V },
		Gate: fr.deps.Gate, Logger: fr.log})
	shell.Serve(ctx, deliveries, func(ctx context.Context, d queue.Delivery, c *contracts.LoaderContract) consume.Verdict {
		// The shard may just have failed over to this loader: know its
		// groups' delays before scheduling any of them. (An owner of
		// shards knew them when it took the shard: takeShard.)
		if fr.own == nil {
			fr.state.activate(ctx, shard, d.Redelivered())
		}
		return fr.accept(ctx, shell, shard, d, c)
	})
}

// validContract checks the fields every loader contract needs.
func validContract(c *contracts.LoaderContract) error {
	switch {
	case c.CrawlID == "":
		return fmt.Errorf("chg=%q: no crawl_id", c.Group)
	case len(c.URLs) == 0:
		return fmt.Errorf("crawl_id=%q chg=%q: no urls", c.CrawlID, c.Group)
	}
	return nil
}

// accept resolves the profile of c's crawl and holds or parks c's URLs.
// The delivery is settled through shell once every URL has an outcome.
func (fr *Frontier) accept(ctx context.Context, shell *consume.Shell[contracts.LoaderContract], shard int, d queue.Delivery, c *contracts.LoaderContract) consume.Verdict {
	p, err := fr.profs.Resolve(ctx, c.CrawlID, c.Profile)
	if errors.Is(err, profiles.ErrNotFound) {
		return consume.DeadLetter("loader contract of unknown crawl " + c.CrawlID)
	}
	if err != nil {
		fr.log.Warn("resolve profile", "crawl_id", c.CrawlID, "err", err)
		return consume.Retry(err)
	}
	// A contract built before a PATCH gets the newer profile; one built
	// after it (a resume's, after a raised budget) makes its profile the
	// crawl's newest, also for the URLs it files.
	p = fr.pol.current(c.CrawlID, p)
	if fr.fronts != nil {
		return fr.file(ctx, shard, d, c)
	}
	dl := &delivery{d: d, parts: shell.Parts(d, len(c.URLs))}
	tasks := fr.tasks(c, p, dl, shard)
	// The contracts a resume publishes (contractmsg.HeaderResumed) may come
	// while the state cache still reads paused: they ask the store, so
	// that they are not parked for PausedDelay.
	if fr.paused(ctx, d, c.CrawlID) {
		fr.parkAll(ctx, dl, tasks, fr.cfg.PausedDelay)
		return consume.Hold()
	}
	keep, park := fr.split(dl, tasks)
	if err := fr.park(ctx, park.tasks, park.delay); err != nil {
		keep = append(keep, park.tasks...) // could not park: hold them after all
		park.tasks = nil
	}
	for _, t := range keep {
		fr.schedule(ctx, t)
	}
	for range park.tasks {
		dl.done(ctx, fr.log, nil)
	}
	return consume.Hold()
}

// paused reports whether crawlID is paused, as the store says when d was
// published by a resume.
func (fr *Frontier) paused(ctx context.Context, d queue.Delivery, crawlID string) bool {
	if fr.cancels.State(ctx, crawlID) != contracts.CrawlPaused {
		return false
	}
	return d.Headers()[contractmsg.HeaderResumed] == "" || fr.cancels.Fresh(ctx, crawlID) == contracts.CrawlPaused
}

// tasks makes one task per URL of c, grouped and priced.
func (fr *Frontier) tasks(c *contracts.LoaderContract, p *contracts.Profile, dl *delivery, shard int) []*Task {
	ts := make([]*Task, 0, len(c.URLs))
	now := time.Now()
	for _, u := range c.URLs {
		host, g := fr.placeOf(c, u)
		t := &Task{dl: dl, CrawlID: c.CrawlID, Profile: p, Inline: c.Profile, Group: g, Shard: shard,
			URL: u.URL, Host: host, Depth: u.Depth, Hops: u.Hops}
		// A contract delivered before may have been worked on: its
		// snapshots may be of records fetched since, so they are read.
		// So are those of a copy its publisher sent again (a confirm lost
		// when a broker node died): the first copy may have been fetched
		// by another loader, whose record this loader's store does not
		// know (the cluster test's double fetch at a RabbitMQ node kill).
		if !queue.SeenBefore(dl.d) {
			if r, ok := txindex.Learn(fr.deps.Tx, txindex.Key(c.CrawlID, u.URL), u.Snapshot); ok {
				t.Known = &r
			}
		}
		// A contract the broker took back from another consumer may still
		// be worked on there: its records are read after the grace.
		if dl.d.Redelivered() && fr.cfg.RedeliveryGrace > 0 {
			t.notBefore = now.Add(fr.cfg.RedeliveryGrace)
		}
		ts = append(ts, t)
	}
	return ts
}

// placeOf returns the host of u, a URL of c, and its crawl host group: the
// one c names, or the loader's grouping of the host.
func (fr *Frontier) placeOf(c *contracts.LoaderContract, u contracts.LoaderURL) (host, group string) {
	host = hostOf(u.URL)
	if group = c.GroupOf(u); group == "" {
		group = fr.Group(host)
	}
	return host, group
}

// hostOf returns the host of raw (raw itself when it does not parse).
func hostOf(raw string) string {
	if pu, err := url.Parse(raw); err == nil {
		return urlnorm.Host(pu)
	}
	return raw
}

// Group returns the crawl host group of host: Deps.Group's, or routing's own.
func (fr *Frontier) Group(host string) string {
	if fr.deps.Group != nil {
		return fr.deps.Group(host)
	}
	return routing.HostGrouper(host)
}

// parkSet collects the URLs of one contract to park, and their delay.
type parkSet struct {
	tasks []*Task
	delay time.Duration
}

// split decides, URL by URL, which tasks of a contract the loader holds and
// which it parks. A contract holds its prefetch slot until its last URL is
// fetched. A group keeps at most groupLimit URLs. While other contracts
// hold URLs of the group, a contract's URLs of it are parked unless the
// group's queue drains within holdWait and the group has fewer than
// maxHolders holders; such a contract then keeps them whole, up to
// groupLimit, and becomes the group's next long holder (cut at holdWait,
// its rest would come back every few seconds). Without the bound on
// holders a slow group fed by a stream of small contracts would hold every
// slot of its shard while the other groups' contracts wait unread in the
// queue. It makes dl a holder of the groups it keeps URLs of.
func (fr *Frontier) split(dl *delivery, tasks []*Task) (keep []*Task, park parkSet) {
	added := map[string]int{}
	for _, t := range tasks {
		fr.applyBudget(t)
		queued, delay := fr.sched.Backlog(t.Group)
		fr.holdMu.Lock()
		others := len(fr.holders[t.Group])
		fr.holdMu.Unlock()
		n := queued + added[t.Group]
		if n >= fr.groupLimit(delay) || (others > 0 && (others >= fr.maxHolders || time.Duration(queued)*delay > holdWait)) {
			park.tasks = append(park.tasks, t)
			wait := time.Duration(n) * max(delay, parkFloor)
			park.delay = max(park.delay, min(max(wait, minParkDelay), maxParkDelay))
			continue
		}
		added[t.Group]++
		keep = append(keep, t)
	}
	if len(added) == 0 {
		return keep, park
	}
	fr.holdMu.Lock()
	for g := range added {
		hs := fr.holders[g]
		if hs == nil {
			hs = map[*delivery]struct{}{}
			fr.holders[g] = hs
		}
		hs[dl] = struct{}{}
	}
	fr.holdMu.Unlock()
	dl.parts.OnSettled(func() {
		fr.holdMu.Lock()
		for g := range added {
			if hs := fr.holders[g]; hs != nil {
				delete(hs, dl)
				if len(hs) == 0 {
					delete(fr.holders, g)
				}
			}
		}
		fr.holdMu.Unlock()
	})
	return keep, park
}

// groupLimit returns how many URLs a group with the given delay may hold.
func (fr *Frontier) groupLimit(delay time.Duration) int {
	if delay <= 0 {
		return fr.cfg.GroupQueue
	}
	return max(1, min(fr.cfg.GroupQueue, int(parkHorizon/delay)))
}

// parkAll parks every task of one delivery and settles them; the ones that
// cannot be parked fail the delivery, which is then retried.
func (fr *Frontier) parkAll(ctx context.Context, dl *delivery, tasks []*Task, delay time.Duration) {
	err := fr.park(ctx, tasks, delay)
	for range tasks {
		dl.done(ctx, fr.log, err)
	}
}

// park publishes tasks (of one crawl) to their groups' shards with a delay,
// encoded and routed as the frontier does, and renews their records' lease
// so that the recovery sweep does not republish them meanwhile. It does not
// settle them.
func (fr *Frontier) park(ctx context.Context, tasks []*Task, delay time.Duration) error {
	if len(tasks) == 0 {
		return nil
	}
	t0 := tasks[0]
	byShard := map[int][]txindex.Record{}
	ts := make([]txindex.Transition, 0, len(tasks))
	for _, t := range tasks {
		s := routing.ShardOf(t.Group, fr.shards)
		byShard[s] = append(byShard[s], txindex.Record{URL: t.URL, Depth: t.Depth, Hops: t.Hops, Group: t.Group})
		ts = append(ts, txindex.Transition{Key: txindex.Key(t.CrawlID, t.URL), From: contracts.ToBeLoaded, To: contracts.ToBeLoaded})
	}
	for s, recs := range byShard {
		q := routing.ShardQueue(s, fr.shards)
		msgs, err := contractmsg.Loader(t0.CrawlID, *t0.Profile, recs)
		if err == nil {
			for i := range msgs {
				msgs[i].Delay = delay
			}
			err = fr.deps.Queue.Publish(ctx, q, msgs...)
		}
		if err != nil {
			// URLs published to other shards are duplicates, which is harmless.
			if ctx.Err() == nil {
				fr.log.Warn("park urls", "queue", q, "crawl_id", t0.CrawlID, "urls", len(recs), "err", err)
			}
			return fmt.Errorf("park urls on %s: %w", q, err)
		}
	}
	if _, err := fr.deps.Tx.Transition(ctx, ts); err != nil && ctx.Err() == nil {
		fr.log.Warn("renew lease of parked urls", "crawl_id", t0.CrawlID, "urls", len(ts), "err", err)
	}
	fr.parkedURLs.Add(int64(len(tasks)))
	fr.met.Parked(len(tasks))
	return nil
}
