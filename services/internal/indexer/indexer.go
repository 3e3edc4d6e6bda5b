// Package indexer is the third stage of the pipeline, after the loader and
// the crawler: it consumes index_pending, stores each contract's documents in
// the search index and only then moves their pages from to-be-indexed to
// indexed. It runs inside MCP's process by default (services/mcp), or as a
// binary of its own (services/indexer) so that indexing scales apart from
// MCP.
package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
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

// Run consumes index_pending. It collects the deliveries that are
// available at once (up to IndexerBatch), stores their documents, moves
// their pages from to-be-indexed to indexed and only then acks. A document
// is therefore searchable before its page counts as indexed, so a crawl is
// never reported finished while a document is missing. It nudges the finish
// check for the crawls of the contracts it settled.
func (x *Indexer) Run(ctx context.Context) error {
	deliveries, err := x.deps.Queue.Consume(ctx, contracts.QueueIndex, queue.ConsumeOptions{Prefetch: x.cfg.Prefetch})
	if err != nil {
		return fmt.Errorf("consume %s: %w", contracts.QueueIndex, err)
	}
	tick := time.NewTicker(deferCheck)
	defer tick.Stop()
	var deferred []*pendingIndex
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return nil // unsettled deferred deliveries go back to the queue
			}
			batch := []queue.Delivery{d}
		drain:
			for len(batch) < x.cfg.Batch {
				select {
				case d, ok := <-deliveries:
					if !ok {
						break drain
					}
					batch = append(batch, d)
				default:
					break drain
				}
			}
			deferred = append(deferred, x.indexBatch(ctx, batch)...)
		case <-tick.C:
			if len(deferred) > 0 {
				deferred = x.recheck(ctx, deferred)
			}
		}
	}
}

func (x *Indexer) indexBatch(ctx context.Context, batch []queue.Delivery) []*pendingIndex {
	var docs []contracts.Document
	var pend []*pendingIndex
	for _, d := range batch {
		var k contracts.IndexContract
		if err := json.Unmarshal(d.Body(), &k); err != nil || k.V != contracts.Version || k.CrawlID == "" {
			reason := fmt.Sprintf("invalid index contract: v=%d crawl_id=%q", k.V, k.CrawlID)
			if err != nil {
				reason = "undecodable index contract: " + err.Error()
			}
			x.log.Warn("dead-letter contract", "queue", contracts.QueueIndex, "reason", reason)
			if err := d.DeadLetter(ctx, reason); err != nil {
				x.log.Error("dead-letter contract", "queue", contracts.QueueIndex, "err", err)
			}
			continue
		}
		p := &pendingIndex{d: d, crawlID: k.CrawlID, waiting: make(map[string]string, len(k.Docs)), since: time.Now()}
		for _, doc := range k.Docs {
			p.waiting[doc.ID] = ""
		}
		docs = append(docs, k.Docs...)
		pend = append(pend, p)
	}
	if len(pend) == 0 {
		return nil
	}
	stored := len(docs)
	if err := x.deps.Search.Upsert(ctx, docs); err != nil {
		var refused *search.RefusedError
		if !errors.As(err, &refused) {
			x.fail(ctx, pend, fmt.Errorf("store documents: %w", err))
			return nil
		}
		x.failRefused(pend, refused)
		stored -= len(refused.Reasons)
	}
	x.met.Stored(stored)
	return x.recheck(ctx, pend)
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
			if err := x.deps.Gate.Settle(ctx, p.d.Ack); err != nil && ctx.Err() == nil {
				x.log.Error("ack index contract", "queue", contracts.QueueIndex, "err", err)
			}
			if len(p.waiting) == 0 {
				x.nudge(p.crawlID) // its last pages may be these
			}
			continue
		}
		keep = append(keep, p)
	}
	return keep
}

func (x *Indexer) fail(ctx context.Context, pend []*pendingIndex, err error) {
	if ctx.Err() != nil {
		return
	}
	x.deps.Gate.Note(err)
	down := x.deps.Gate.Down(ctx)
	x.log.Error("index documents", "err", err, "backends_down", strings.Join(down, ","))
	for _, p := range pend {
		var serr error
		if len(down) > 0 { // the outage's failure, not the contract's
			serr = x.deps.Gate.Settle(ctx, func(ctx context.Context) error { return p.d.Postpone(ctx, time.Second) })
		} else {
			serr = x.deps.Gate.Settle(ctx, func(ctx context.Context) error { return p.d.Retry(ctx, queue.RetryDelay(p.d.Attempt())) })
		}
		if serr != nil {
			x.log.Error("retry index contract", "queue", contracts.QueueIndex, "err", serr)
		}
	}
	if len(down) > 0 {
		_ = x.deps.Gate.Wait(ctx) // take no more contracts until it is back
	}
}
