// Package indexer is the third stage of the pipeline, after the loader and
// the crawler: it consumes index_pending, stores each contract's documents in
// the search index and only then moves their pages from to-be-indexed to
// indexed. The consumer shell (services/internal/consume) decodes and checks
// the contracts, batches them and settles them by the indexer's verdict. It
// runs inside MCP's process by default (services/mcp), or as a
// binary of its own (services/indexer) so that indexing scales apart from
// MCP.
package indexer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
)

// Timing of documents that arrive before their page is to-be-indexed.
const (
	deferCheck = 50 * time.Millisecond
	deferLimit = time.Minute
)

// pendingIndex is an index contract whose documents are stored but some of
// whose pages are still to-be-parsed: the crawler publishes documents
// before it writes the page's links and moves the page on (the order of YaCy Grid's crawler loop,
// https://github.com/yacy/yacy_grid_crawler), so the indexer can be faster than the crawler.
type pendingIndex struct {
	d       queue.Delivery
	crawlID string
	// waiting maps the record keys still to move on to "", for indexed, or
	// to the error of a page whose document the search index refused, for
	// failed.
	waiting map[string]string
	since   time.Time
}

// Run consumes index_pending. The consumer shell hands it the valid
// contracts available at once (up to IndexerBatch); it stores their
// documents, moves their pages from to-be-indexed to indexed and only then
// acks. A document is therefore searchable before its page counts as
// indexed, so a crawl is never reported finished while a document is
// missing. Contracts whose pages are still to be parsed are held and
// checked again every deferCheck. It nudges the finish check for the crawls
// of the contracts it settled.
func (x *Indexer) Run(ctx context.Context) error {
	var deferred []*pendingIndex // only touched in the shell's goroutine
	return x.shell.RunBatch(ctx, consume.Batch[contracts.IndexContract]{
		Max: x.cfg.Batch,
		Handle: func(ctx context.Context, batch []consume.Message[contracts.IndexContract]) consume.Verdict {
			held, v := x.indexBatch(ctx, batch)
			deferred = append(deferred, held...)
			return v
		},
		Every: deferCheck,
		Tick: func(ctx context.Context) {
			if len(deferred) > 0 {
				deferred = x.recheck(ctx, deferred)
			}
		},
	})
}

// validContract checks the fields every index contract needs.
func validContract(k *contracts.IndexContract) error {
	if k.CrawlID == "" {
		return errors.New("no crawl_id")
	}
	return nil
}

// indexBatch stores the documents of batch and moves their pages on. It
// returns the verdict on the batch when it failed as a whole; otherwise it
// holds every delivery, settles those whose pages have all moved on, and
// returns the others, whose pages are still to be parsed.
func (x *Indexer) indexBatch(ctx context.Context, batch []consume.Message[contracts.IndexContract]) ([]*pendingIndex, consume.Verdict) {
	var docs []contracts.Document
	pend := make([]*pendingIndex, 0, len(batch))
	for _, m := range batch {
		k := m.Contract
		p := &pendingIndex{d: m.Delivery, crawlID: k.CrawlID, waiting: make(map[string]string, len(k.Docs)), since: time.Now()}
		for _, doc := range k.Docs {
			p.waiting[doc.ID] = ""
		}
		// The crawler's snapshots of the pages spare the transition to
		// indexed a read (txindex.Revisions); a contract delivered before
		// (or a copy sent again) may carry stale ones, which cost a read all
		// the same.
		if !queue.SeenBefore(m.Delivery) {
			for i := range k.Snapshots {
				// A snapshot of a page the contract has no document of is
				// learned all the same: a guess like any other.
				txindex.Learn(x.deps.Tx, "", &k.Snapshots[i])
			}
		}
		docs = append(docs, k.Docs...)
		pend = append(pend, p)
	}
	docs, err := x.notDone(ctx, batch, docs)
	if err != nil {
		err = fmt.Errorf("read pages of contracts delivered again: %w", err)
		if ctx.Err() == nil {
			x.log.Error("index documents", "err", err)
		}
		return nil, consume.Retry(err)
	}
	stored := len(docs)
	if err := x.deps.Search.Upsert(ctx, docs); err != nil {
		var refused *search.RefusedError
		if !errors.As(err, &refused) {
			err = fmt.Errorf("store documents: %w", err)
			if ctx.Err() == nil {
				x.log.Error("index documents", "err", err)
			}
			return nil, consume.Retry(err)
		}
		x.failRefused(pend, refused)
		stored -= len(refused.Reasons)
	}
	x.met.Stored(stored)
	return x.recheck(ctx, pend), consume.Hold()
}

// notDone returns docs without the documents of contracts delivered
// before whose pages are final already: the contract was handled (its
// documents stored, its pages moved on) but its ack did not reach the
// queue, as when the broker node of the indexer's connection dies. Storing
// them again would write each document twice. Only contracts delivered
// again cost the read.
func (x *Indexer) notDone(ctx context.Context, batch []consume.Message[contracts.IndexContract], docs []contracts.Document) ([]contracts.Document, error) {
	again := map[string]bool{}
	var keys []string
	for _, m := range batch {
		if !queue.SeenBefore(m.Delivery) {
			continue
		}
		for _, doc := range m.Contract.Docs {
			if !again[doc.ID] {
				again[doc.ID] = true
				keys = append(keys, doc.ID)
			}
		}
	}
	if len(keys) == 0 {
		return docs, nil
	}
	recs, err := x.deps.Tx.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	kept := docs[:0:0]
	for _, doc := range docs {
		if r, ok := recs[doc.ID]; again[doc.ID] && ok && r.Status.Terminal() {
			continue
		}
		kept = append(kept, doc)
	}
	if skipped := len(docs) - len(kept); skipped > 0 {
		x.log.Info("documents of contracts delivered again already stored", "skipped", skipped)
	}
	return kept, nil
}

// failRefused has recheck move the pages whose documents the search index
// refused to failed, with its reason, instead of indexed: their neighbours
// in the batch were stored and go on. A refused page still to be parsed
// (the crawler publishes documents before it moves their pages on) fails
// once it is to be indexed, as its neighbours would be indexed.
func (x *Indexer) failRefused(pend []*pendingIndex, refused *search.RefusedError) {
	for id, reason := range refused.Reasons {
		x.log.Warn("document refused by the search index", "key", id, "reason", reason)
		for _, p := range pend {
			if _, ok := p.waiting[id]; ok {
				p.waiting[id] = contracts.ReasonRefusedByIndex + ": " + clipReason(reason)
			}
		}
	}
}

// clipReason bounds a backend's error text kept in a record.
func clipReason(s string) string {
	const limit = 512
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "…"
}

// recheck moves the waiting pages of pend to indexed (or failed, see
// failRefused), acks the deliveries that have none left and returns the
// others.
func (x *Indexer) recheck(ctx context.Context, pend []*pendingIndex) []*pendingIndex {
	var ts []txindex.Transition
	for _, p := range pend {
		for k, reason := range p.waiting {
			t := txindex.Transition{Key: k, From: contracts.ToBeIndexed, To: contracts.Indexed}
			if reason != "" {
				t.To, t.Error = contracts.Failed, reason
			}
			ts = append(ts, t)
		}
	}
	applied, err := x.deps.Tx.Transition(ctx, ts)
	if err != nil {
		x.fail(ctx, pend, fmt.Errorf("mark pages indexed: %w", err))
		return nil
	}
	var unsure []string
	indexed := 0
	for i, t := range ts {
		switch {
		case !applied[i]:
			unsure = append(unsure, t.Key)
		case t.To == contracts.Indexed:
			indexed++
		}
	}
	x.met.Indexed(indexed)
	recs, err := x.deps.Tx.GetMany(ctx, unsure)
	if err != nil {
		x.fail(ctx, pend, fmt.Errorf("get pages: %w", err))
		return nil
	}
	still := map[string]bool{}
	for _, k := range unsure {
		if r, ok := recs[k]; ok && (r.Status == contracts.ToBeParsed || r.Status == contracts.ToBeIndexed) {
			still[k] = true
		}
	}
	var keep []*pendingIndex
	for _, p := range pend {
		for k := range p.waiting {
			if !still[k] {
				delete(p.waiting, k)
			}
		}
		// After deferLimit the crawler that published these documents has
		// stalled or died; its redelivered contract publishes them again.
		if len(p.waiting) == 0 || time.Since(p.since) > deferLimit {
			x.shell.Settle(ctx, consume.Ack(), p.d)
			if len(p.waiting) == 0 {
				x.nudge(p.crawlID) // its last pages may be these
			}
			continue
		}
		keep = append(keep, p)
	}
	return keep
}

// fail settles the held deliveries of pend, whose pages could not be moved
// on: retried, or postponed while a backend is down.
func (x *Indexer) fail(ctx context.Context, pend []*pendingIndex, err error) {
	if ctx.Err() != nil {
		return // shutting down: the deliveries go back to the queue
	}
	x.log.Error("index documents", "err", err)
	ds := make([]queue.Delivery, len(pend))
	for i, p := range pend {
		ds[i] = p.d
	}
	x.shell.Settle(ctx, consume.Retry(err), ds...)
}
