package mcp

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
// before it writes the page's links and moves the page on (seed 004's
// order), so the indexer can be faster than the crawler.
type pendingIndex struct {
	d       queue.Delivery
	crawlID string
	waiting map[string]bool // record keys still to move to indexed
	since   time.Time
}

// runIndexer consumes index_pending. It collects the deliveries that are
// available at once (up to IndexerBatch), stores their documents, moves
// their pages from to-be-indexed to indexed and only then acks. A document
// is therefore searchable before its page counts as indexed, so a crawl is
// never reported finished while a document is missing. It nudges the finish
// check for the crawls of the contracts it settled.
func (m *MCP) runIndexer(ctx context.Context) error {
	deliveries, err := m.deps.Queue.Consume(ctx, contracts.QueueIndex, queue.ConsumeOptions{Prefetch: m.cfg.IndexerPrefetch})
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
			for len(batch) < m.cfg.IndexerBatch {
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
			deferred = append(deferred, m.indexBatch(ctx, batch)...)
		case <-tick.C:
			if len(deferred) > 0 {
				deferred = m.recheck(ctx, deferred)
			}
		}
	}
}

func (m *MCP) indexBatch(ctx context.Context, batch []queue.Delivery) []*pendingIndex {
	var docs []contracts.Document
	var pend []*pendingIndex
	for _, d := range batch {
		var k contracts.IndexContract
		if err := json.Unmarshal(d.Body(), &k); err != nil || k.V != contracts.Version || k.CrawlID == "" {
			reason := fmt.Sprintf("invalid index contract: v=%d crawl_id=%q", k.V, k.CrawlID)
			if err != nil {
				reason = "undecodable index contract: " + err.Error()
			}
			m.log.Warn("dead-letter contract", "queue", contracts.QueueIndex, "reason", reason)
			if err := d.DeadLetter(ctx, reason); err != nil {
				m.log.Error("dead-letter contract", "queue", contracts.QueueIndex, "err", err)
			}
			continue
		}
		p := &pendingIndex{d: d, crawlID: k.CrawlID, waiting: make(map[string]bool, len(k.Docs)), since: time.Now()}
		for _, doc := range k.Docs {
			p.waiting[doc.ID] = true
		}
		docs = append(docs, k.Docs...)
		pend = append(pend, p)
	}
	if len(pend) == 0 {
		return nil
	}
	if err := m.deps.Search.Upsert(ctx, docs); err != nil {
		var refused *search.RefusedError
		if !errors.As(err, &refused) {
			m.fail(ctx, pend, fmt.Errorf("store documents: %w", err))
			return nil
		}
		if err := m.failRefused(ctx, pend, refused); err != nil {
			m.fail(ctx, pend, err)
			return nil
		}
	}
	m.met.Stored(len(docs))
	return m.recheck(ctx, pend)
}

// failRefused records the pages whose documents the search index refused as
// failed, with its reason, and stops waiting for them: their neighbours in
// the batch were stored and go on.
func (m *MCP) failRefused(ctx context.Context, pend []*pendingIndex, refused *search.RefusedError) error {
	var ts []txindex.Transition
	for id, reason := range refused.Reasons {
		m.log.Warn("document refused by the search index", "key", id, "reason", reason)
		ts = append(ts, txindex.Transition{Key: id, From: contracts.ToBeIndexed, To: contracts.Failed,
			Error: contracts.ReasonRefusedByIndex + ": " + clipReason(reason)})
	}
	if _, err := m.deps.Tx.Transition(ctx, ts); err != nil {
		return fmt.Errorf("mark refused pages failed: %w", err)
	}
	for _, p := range pend {
		for id := range refused.Reasons {
			delete(p.waiting, id)
		}
	}
	return nil
}

// clipReason bounds a backend's error text kept in a record.
func clipReason(s string) string {
	const limit = 512
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "…"
}

// recheck moves the waiting pages of pend to indexed, acks the deliveries
// that have none left and returns the others.
func (m *MCP) recheck(ctx context.Context, pend []*pendingIndex) []*pendingIndex {
	var ts []txindex.Transition
	for _, p := range pend {
		for k := range p.waiting {
			ts = append(ts, txindex.Transition{Key: k, From: contracts.ToBeIndexed, To: contracts.Indexed})
		}
	}
	applied, err := m.deps.Tx.Transition(ctx, ts)
	if err != nil {
		m.fail(ctx, pend, fmt.Errorf("mark pages indexed: %w", err))
		return nil
	}
	var unsure []string
	for i, t := range ts {
		if !applied[i] {
			unsure = append(unsure, t.Key)
		}
	}
	m.met.Indexed(len(ts) - len(unsure))
	recs, err := m.deps.Tx.GetMany(ctx, unsure)
	if err != nil {
		m.fail(ctx, pend, fmt.Errorf("get pages: %w", err))
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
			if err := m.deps.Gate.Settle(ctx, p.d.Ack); err != nil && ctx.Err() == nil {
				m.log.Error("ack index contract", "queue", contracts.QueueIndex, "err", err)
			}
			if len(p.waiting) == 0 {
				m.nudgeFinish(p.crawlID) // its last pages may be these
			}
			continue
		}
		keep = append(keep, p)
	}
	return keep
}

func (m *MCP) fail(ctx context.Context, pend []*pendingIndex, err error) {
	if ctx.Err() != nil {
		return
	}
	m.deps.Gate.Note(err)
	down := m.deps.Gate.Down(ctx)
	m.log.Error("index documents", "err", err, "backends_down", strings.Join(down, ","))
	for _, p := range pend {
		var serr error
		if len(down) > 0 { // the outage's failure, not the contract's
			serr = m.deps.Gate.Settle(ctx, func(ctx context.Context) error { return p.d.Postpone(ctx, time.Second) })
		} else {
			serr = m.deps.Gate.Settle(ctx, func(ctx context.Context) error { return p.d.Retry(ctx, queue.RetryDelay(p.d.Attempt())) })
		}
		if serr != nil {
			m.log.Error("retry index contract", "queue", contracts.QueueIndex, "err", serr)
		}
	}
	if len(down) > 0 {
		_ = m.deps.Gate.Wait(ctx) // take no more contracts until it is back
	}
}
