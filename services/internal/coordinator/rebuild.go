package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
)

// rebuildPage is how many records one rebuild step lists, renews and
// republishes.
const rebuildPage = 500

// RebuildQueues republishes the work of every to-be-parsed and
// to-be-indexed record, of every crawl that is neither paused nor
// cancelled, whose status time is before before: a crawler contract for a
// page to parse, a crawler contract with Reindex for a page whose document
// must be indexed (the crawler parses the stored page again). It returns
// how many records it republished.
//
// It exists because the embedded grid keeps its crawler and index queues in
// memory (Deps.QueuesInMemory): after the process is killed those contracts
// are gone, while the transaction index still says which pages were
// waiting for them. Run calls it once at start-up, before the recovery
// sweep begins, so that the work goes on at once instead of a recovery
// lease later, and without spending one of the record's recovery
// attempts: the record was not stuck, its queue was lost. Each record's
// lease is renewed (no attempt counted), so the sweep does not republish it
// a second time. Records of to-be-loaded need nothing: the loader queue is
// durable. A paused crawl's records wait for resume (see SetPaused), and a
// cancelled crawl's are failed by the sweep.
func (co *Coordinator) RebuildQueues(ctx context.Context, before time.Time) (int, error) {
	cs, err := co.deps.Profiles.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("list crawls: %w", err)
	}
	total := 0
	for _, c := range cs {
		switch c.State {
		case contracts.CrawlCancelled, contracts.CrawlFinished:
			continue
		case contracts.CrawlPaused:
			co.unbuilt.Store(c.ID, struct{}{})
			continue
		}
		n, err := co.rebuildCrawl(ctx, c, before)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// rebuildCrawl republishes the work of c's to-be-parsed and to-be-indexed
// records whose status time is before before; see RebuildQueues.
func (co *Coordinator) rebuildCrawl(ctx context.Context, c profiles.Crawl, before time.Time) (int, error) {
	total := 0
	for _, status := range []contracts.Status{contracts.ToBeParsed, contracts.ToBeIndexed} {
		after := ""
		for {
			recs, err := co.deps.Tx.List(ctx, c.ID, status, after, rebuildPage)
			if err != nil {
				return total, fmt.Errorf("list %s records of crawl %s: %w", status, c.ID, err)
			}
			if len(recs) == 0 {
				break
			}
			after = recs[len(recs)-1].Key
			var old []txindex.Record
			var ts []txindex.Transition
			for _, r := range recs {
				// A record moved since before has a contract of this
				// process already.
				if r.Status == status && r.StatusTime.Before(before) {
					old = append(old, r)
					ts = append(ts, txindex.Transition{Key: r.Key, From: r.Status, To: r.Status})
				}
			}
			if len(ts) == 0 {
				continue
			}
			applied, err := co.deps.Tx.Transition(ctx, ts)
			if err != nil {
				return total, fmt.Errorf("renew records to rebuild: %w", err)
			}
			var back []txindex.Record
			for i, r := range old {
				if applied[i] {
					back = append(back, r)
				}
			}
			if err := co.rebuildPublish(ctx, c.ID, c.Profile, status, back); err != nil {
				return total, fmt.Errorf("rebuild crawl %s: %w", c.ID, err)
			}
			total += len(back)
		}
	}
	return total, nil
}

// rebuildPublish publishes the crawler contracts of rs, all in status: one
// contract per page to parse, several pages per contract to index again.
//
// A page to parse gets a contract of its own because the crawler's
// enqueuer republishes the loader contract of a link it finds already
// to-be-loaded only when the page that found it is the record's referrer
// (the redelivery of a page whose follow-up contracts may not have been
// published), and of one link found by several pages of one contract at the
// same depth, the first counts as the finder. The rebuilt contracts do not
// group pages as the lost ones did: a link created by the lost contract's
// first parse, whose loader contract was lost with the process, could be
// found first by another page of a rebuilt contract and never be published
// again. Alone in its contract, each page finds its own links.
func (co *Coordinator) rebuildPublish(ctx context.Context, crawlID string, p contracts.Profile, status contracts.Status, rs []txindex.Record) error {
	inline := contracts.InlineProfile(p)
	var msgs []queue.Message
	var pages []contracts.CrawlerPage
	for _, r := range rs {
		pages = append(pages, contracts.CrawlerPage{URL: r.URL, Depth: r.Depth, Hops: r.Hops, Asset: r.Asset, StatusCode: r.HTTPStatus, FetchedAt: r.StatusTime})
	}
	if status == contracts.ToBeIndexed {
		m, err := contractmsg.Crawler(crawlID, inline, pages, true)
		if err != nil {
			return err
		}
		msgs = m
	} else {
		for i := range pages {
			m, err := contractmsg.Crawler(crawlID, inline, pages[i:i+1], false)
			if err != nil {
				return err
			}
			msgs = append(msgs, m...)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := co.deps.Queue.Publish(ctx, contracts.QueueCrawler, msgs...); err != nil {
		return fmt.Errorf("publish crawler contracts: %w", err)
	}
	return nil
}

// runRebuild runs RebuildQueues once, when the queues are in memory, again
// every recovery interval until it succeeds (a backend may be down at
// start-up), and returns when it has or when ctx is done.
func (co *Coordinator) runRebuild(ctx context.Context) {
	if !co.deps.QueuesInMemory {
		return
	}
	start := time.Now()
	for {
		n, err := co.RebuildQueues(ctx, start)
		if n > 0 {
			co.log.Info("rebuilt in-memory queues from the transaction index", "records", n)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		co.log.Error("rebuild in-memory queues", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(co.cfg.RecoveryInterval):
		}
	}
}

// rebuildResumed republishes the work of crawl id, just resumed, if it was
// paused when RebuildQueues ran: its to-be-parsed and to-be-indexed records
// have had no contract since, whatever their status time (the sweep renews
// a paused crawl's leases), up to before, the moment of resume.
func (co *Coordinator) rebuildResumed(ctx context.Context, id string, before time.Time) {
	if _, ok := co.unbuilt.Load(id); !ok {
		return
	}
	c, err := co.deps.Profiles.Get(ctx, id)
	if err == nil {
		var n int
		n, err = co.rebuildCrawl(ctx, c, before)
		if n > 0 {
			co.log.Info("rebuilt in-memory queues of a resumed crawl", "crawl_id", id, "records", n)
		}
	}
	if err != nil {
		// The sweep republishes what is left once its lease runs out.
		co.log.Error("rebuild in-memory queues of a resumed crawl", "crawl_id", id, "err", err)
		return
	}
	co.unbuilt.Delete(id)
}
