package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// runIndexer consumes index_pending. It collects the deliveries that are
// available at once (up to IndexerBatch documents), stores their documents,
// moves their pages from to-be-indexed to indexed and only then acks. A
// document is therefore searchable before its page counts as indexed, so a
// crawl is never reported finished while a document is missing.
func (m *MCP) runIndexer(ctx context.Context) error {
	deliveries, err := m.deps.Queue.Consume(ctx, contracts.QueueIndex, queue.ConsumeOptions{Prefetch: m.cfg.IndexerPrefetch})
	if err != nil {
		return fmt.Errorf("consume %s: %w", contracts.QueueIndex, err)
	}
	for d := range deliveries {
		batch := []queue.Delivery{d}
		n := 0
	drain:
		for n < m.cfg.IndexerBatch {
			select {
			case d, ok := <-deliveries:
				if !ok {
					break drain
				}
				batch = append(batch, d)
				n++
			default:
				break drain
			}
		}
		m.indexBatch(ctx, batch)
	}
	return nil
}

func (m *MCP) indexBatch(ctx context.Context, batch []queue.Delivery) {
	var docs []contracts.Document
	var good []queue.Delivery
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
		docs = append(docs, k.Docs...)
		good = append(good, d)
	}
	if len(good) == 0 {
		return
	}
	err := m.deps.Search.Upsert(ctx, docs)
	if err == nil {
		ts := make([]txindex.Transition, len(docs))
		for i, doc := range docs {
			ts[i] = txindex.Transition{Key: doc.ID, From: contracts.ToBeIndexed, To: contracts.Indexed}
		}
		_, err = m.deps.Tx.Transition(ctx, ts)
	}
	for _, d := range good {
		var serr error
		if err != nil {
			serr = d.Retry(ctx, min(time.Duration(d.Attempt())*2*time.Second, 30*time.Second))
		} else {
			serr = d.Ack(ctx)
		}
		if serr != nil && ctx.Err() == nil {
			m.log.Error("settle index contract", "queue", contracts.QueueIndex, "err", serr)
		}
	}
	if err != nil && ctx.Err() == nil {
		m.log.Error("index documents", "docs", len(docs), "err", err)
	}
}
