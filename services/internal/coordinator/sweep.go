package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
)

// runSweep periodically republishes the work of records that have sat in a
// non-terminal status for longer than the recovery lease: the transaction
// index is the source of truth, so a contract lost with a killed process is
// found here. A record is republished at most RecoveryAttempts times, then
// it fails; either way it cannot be stranded. Paused crawls are left alone,
// and no pass runs while one of MCP's backends is down.
func (co *Coordinator) runSweep(ctx context.Context) {
	t := time.NewTicker(co.cfg.RecoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if len(co.deps.Gate.Down(ctx)) > 0 {
			// The work of stale records is most likely held by a service
			// waiting for the same backend: republishing it would count
			// attempts the outage caused, and fail URLs nobody lost.
			continue
		}
		n, err := co.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			co.deps.Gate.Note(err)
			co.log.Error("recovery sweep", "err", err)
		}
		if n > 0 {
			co.met.Recovered(n)
			co.log.Info("recovery sweep republished work", "records", n)
		}
	}
}

// Sweep runs one recovery pass and returns the number of records it
// republished or failed. It leaves alone the to-be-loaded records of the
// loader shards with a live owner (ownedShards): those URLs are filed in
// the owner's frontier, not lost. What it does with a stale record depends on its
// crawl's state, read once per crawl and pass:
//   - running (and finished, which has none): the record's lease is renewed
//     with one more attempt and its work republished; past RecoveryAttempts
//     it fails as stalled.
//   - paused: nothing is counted, failed or republished, the crawl's URLs
//     wait for resume. Only the lease is renewed (no attempt), so that a
//     paused crawl's old records do not hide other crawls' stale ones from
//     the next query.
//   - cancelled: the record fails as cancelled.
//
// A to-be-indexed record whose lease ran out while MCP's own index queue
// holds messages is left alone (see indexBacklog) until the queue is empty
// or the record has waited RecoveryAttempts leases.
func (co *Coordinator) Sweep(ctx context.Context) (int, error) {
	total := 0
	crawls := map[string]crawlOf{}
	backlog, err := co.indexBacklog(ctx)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	owned, err := co.ownedShards(ctx, now)
	if err != nil {
		return 0, err
	}
	for {
		recs, err := co.deps.Tx.Stale(ctx, now.Add(-co.cfg.RecoveryLease), 500, owned)
		if err != nil {
			return total, fmt.Errorf("find stale records: %w", err)
		}
		if len(recs) == 0 {
			return total, nil
		}
		act := recs
		if backlog {
			act = recs[:0:0]
			for _, r := range recs {
				if !co.queuedForIndex(r, now) {
					act = append(act, r)
				}
			}
		}
		if len(act) > 0 {
			n, err := co.recover(ctx, act, crawls)
			total += n
			if err != nil {
				return total, err
			}
		}
		// Records left alone stay the oldest stale ones: the next query
		// would return them again, so the pass ends here.
		if len(recs) < 500 || len(act) < len(recs) {
			return total, nil
		}
	}
}

// ownedShards returns the loader shards with a live owner: their
// to-be-loaded records wait in the owner's frontier store (see
// txindex.Owners), and the sweep leaves them alone. A lease is taken as
// live until it has been expired for a recovery lease, so that an owner
// whose renewal is late by less than that is not swept behind its back.
func (co *Coordinator) ownedShards(ctx context.Context, now time.Time) ([]string, error) {
	ls, err := co.deps.Tx.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("read loader shard leases: %w", err)
	}
	var owned []string
	for _, l := range ls {
		if !l.Released && now.Before(l.Expires.Add(co.cfg.RecoveryLease)) {
			owned = append(owned, l.Shard)
		}
	}
	return owned, nil
}

// indexBacklog reports whether MCP's index queue holds messages. Then the
// indexer, which runs in this process, is working through them, and a
// to-be-indexed record past its lease is most likely one of them, waiting
// its turn rather than lost. Republishing it would have the crawler parse
// the page again and the indexer store its document twice: when the
// indexer lags by more than a lease, as it does late in a large crawl, the
// recovery would add to the very backlog that made the records stale.
func (co *Coordinator) indexBacklog(ctx context.Context) (bool, error) {
	n, err := co.deps.Queue.Len(ctx, contracts.QueueIndex)
	if err != nil {
		return false, fmt.Errorf("length of %s: %w", contracts.QueueIndex, err)
	}
	return n > 0, nil
}

// queuedForIndex reports whether the sweep leaves stale record r alone
// while the index queue holds messages: r is to-be-indexed and has waited
// fewer than RecoveryAttempts leases, so that a document whose index
// contract was lost is still recovered, later, however long the backlog.
func (co *Coordinator) queuedForIndex(r txindex.Record, now time.Time) bool {
	return r.Status == contracts.ToBeIndexed && now.Sub(r.StatusTime) < time.Duration(co.cfg.RecoveryAttempts)*co.cfg.RecoveryLease
}

// crawlOf is a crawl as one sweep pass sees it; found is false for records
// whose crawl is not stored.
type crawlOf struct {
	profiles.Crawl
	found bool
}

func (co *Coordinator) recover(ctx context.Context, recs []txindex.Record, crawls map[string]crawlOf) (int, error) {
	ts := make([]txindex.Transition, 0, len(recs))
	var acted []txindex.Record
	for _, r := range recs {
		c, ok := crawls[r.CrawlID]
		if !ok {
			got, err := co.deps.Profiles.Get(ctx, r.CrawlID)
			switch {
			case errors.Is(err, profiles.ErrNotFound):
				co.log.Warn("recovery: records of an unknown crawl", "crawl_id", r.CrawlID)
			case err != nil:
				return 0, fmt.Errorf("get crawl of stale records: %w", err)
			}
			c = crawlOf{Crawl: got, found: err == nil}
			crawls[r.CrawlID] = c
		}
		t := txindex.Transition{Key: r.Key, From: r.Status, To: r.Status}
		switch {
		case c.State == contracts.CrawlPaused:
			// Renew the lease only: no attempt, no failure, no republish.
		case c.State == contracts.CrawlCancelled:
			t.To, t.Error = contracts.Failed, "cancelled"
		case r.Attempts >= co.cfg.RecoveryAttempts:
			t.To, t.Error, t.AddAttempt = contracts.Failed, "stalled: recovery attempts exhausted", true
		default:
			t.AddAttempt = true
		}
		if t.To != r.Status || t.AddAttempt {
			acted = append(acted, r)
		}
		ts = append(ts, t)
	}
	applied, err := co.deps.Tx.Transition(ctx, ts)
	if err != nil {
		return 0, fmt.Errorf("renew stale records: %w", err)
	}
	byCrawl := map[string][]txindex.Record{}
	for i, r := range recs {
		c := crawls[r.CrawlID]
		if applied[i] && ts[i].AddAttempt && ts[i].To == r.Status && c.found {
			byCrawl[r.CrawlID] = append(byCrawl[r.CrawlID], r)
		}
	}
	for id, rs := range byCrawl {
		if err := co.republish(ctx, id, crawls[id].Profile, rs); err != nil {
			return len(acted), err
		}
	}
	return len(acted), nil
}

func (co *Coordinator) republish(ctx context.Context, crawlID string, p contracts.Profile, rs []txindex.Record) error {
	var load []txindex.Record
	var parse, reindex []contracts.CrawlerPage
	for _, r := range rs {
		page := contracts.CrawlerPage{URL: r.URL, Depth: r.Depth, Hops: r.Hops, Asset: r.Asset, StatusCode: r.HTTPStatus, FetchedAt: r.StatusTime}
		switch r.Status {
		case contracts.ToBeLoaded:
			load = append(load, r)
		case contracts.ToBeParsed:
			parse = append(parse, page)
		case contracts.ToBeIndexed:
			reindex = append(reindex, page)
		}
	}
	if err := co.enq.Publish(ctx, crawlID, p, load); err != nil {
		return err
	}
	inline := contracts.InlineProfile(p)
	msgs, err := contractmsg.Crawler(crawlID, inline, parse, false)
	if err != nil {
		return err
	}
	more, err := contractmsg.Crawler(crawlID, inline, reindex, true)
	if err != nil {
		return err
	}
	msgs = append(msgs, more...)
	if len(msgs) > 0 {
		if err := co.deps.Queue.Publish(ctx, contracts.QueueCrawler, msgs...); err != nil {
			return fmt.Errorf("republish crawler contracts: %w", err)
		}
	}
	return nil
}
