package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
)

// countingSearch is the real search index counting the stores of each
// document.
type countingSearch struct {
	search.Index
	mu     sync.Mutex
	stores map[string]int
}

func (c *countingSearch) Upsert(ctx context.Context, docs []contracts.Document) error {
	if err := c.Index.Upsert(ctx, docs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range docs {
		c.stores[d.ID]++
	}
	return nil
}

func (c *countingSearch) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stores[id]
}

// lostAcks makes the deliveries of a queue lose their first ack, as when
// the broker node of the consumer's connection dies before the ack reaches
// it: the ack fails and the message stays held until the consumer stops,
// then is delivered again.
type lostAcks struct {
	lost  atomic.Bool
	acked chan struct{} // receives on every ack tried
}

var errAckLost = errors.New("delivery already settled: the connection's node died")

type lostAckDelivery struct {
	queue.Delivery
	q *lostAcks
}

func (d *lostAckDelivery) Ack(ctx context.Context) error {
	defer func() { d.q.acked <- struct{}{} }()
	if d.q.lost.CompareAndSwap(false, true) {
		return errAckLost
	}
	return d.Delivery.Ack(ctx)
}

// TestRedeliveredContractNotStoredAgain checks that an index contract
// handled once but delivered again, because its ack was lost, is acked
// without storing its documents a second time: the page is indexed
// already.
func TestRedeliveredContractNotStoredAgain(t *testing.T) {
	ctx := t.Context()
	base := embedtest.Open(t)
	srch := &countingSearch{Index: base.Search, stores: map[string]int{}}
	acks := &lostAcks{acked: make(chan struct{}, 4)}
	q := queuetest.Wrap(base.Queue, func(d queue.Delivery) queue.Delivery { return &lostAckDelivery{Delivery: d, q: acks} })

	doc, body := pageToIndex(t, base.Tx, "again")
	if err := base.Queue.Publish(ctx, contracts.QueueIndex, queue.Message{Body: body}); err != nil {
		t.Fatal(err)
	}
	run := func() {
		x := New(Config{Prefetch: 4, Batch: 4}, Deps{Queue: q, Tx: base.Tx, Search: srch})
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- x.Run(runCtx) }()
		select {
		case <-acks.acked:
		case <-time.After(time.Minute):
			t.Error("the contract was not acked")
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	run() // stores, moves the page to indexed, loses the ack; stopping gives the contract back
	if r, err := base.Tx.Get(ctx, doc.ID); err != nil || r.Status != contracts.Indexed {
		t.Fatalf("page after the first delivery = %s, %v, want %s", r.Status, err, contracts.Indexed)
	}
	run() // delivered again (the second ack tried is its): acked, not stored again
	if n := srch.count(doc.ID); n != 1 {
		t.Errorf("document stored %d times, want 1", n)
	}
	if _, err := base.Search.Get(ctx, doc.ID); err != nil {
		t.Errorf("document: %v, want it stored", err)
	}
	if n, err := base.Queue.Len(ctx, contracts.QueueIndex); err != nil || n != 0 {
		t.Errorf("Len(index_pending) = %d, %v, want 0", n, err)
	}
}

// resentDelivery is a delivery of a message its publisher may have sent
// again, not knowing whether the broker had taken the first copy (what
// amqpqueue marks with its resent header); acked receives once it is
// acked.
type resentDelivery struct {
	queue.Delivery
	resent bool
	acked  chan struct{}
}

func (d *resentDelivery) Resent() bool { return d.resent }

func (d *resentDelivery) Ack(ctx context.Context) error {
	err := d.Delivery.Ack(ctx)
	if err == nil {
		d.acked <- struct{}{}
	}
	return err
}

// TestResentContractNotStoredAgain: the crawler publishes an index
// contract, the indexer stores its document and moves the page to indexed;
// the crawler's connection died before the broker's confirm reached it, so
// it publishes the contract again. The copy is neither redelivered nor
// retried, only resent (queue.SeenBefore): the indexer must read the page's
// record, find it indexed, and ack the copy without storing the document a
// second time.
func TestResentContractNotStoredAgain(t *testing.T) {
	ctx := t.Context()
	base := embedtest.Open(t)
	srch := &countingSearch{Index: base.Search, stores: map[string]int{}}
	acked := make(chan struct{}, 4)
	q := queuetest.Wrap(base.Queue, func(d queue.Delivery) queue.Delivery {
		return &resentDelivery{Delivery: d, resent: d.Headers()["copy"] == "resent", acked: acked}
	})

	doc, body := pageToIndex(t, base.Tx, "resent")
	run := func(headers map[string]string) {
		t.Helper()
		if err := base.Queue.Publish(ctx, contracts.QueueIndex, queue.Message{Body: body, Headers: headers}); err != nil {
			t.Fatal(err)
		}
		x := New(Config{Prefetch: 4, Batch: 4}, Deps{Queue: q, Tx: base.Tx, Search: srch})
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- x.Run(runCtx) }()
		select {
		case <-acked:
		case <-time.After(time.Minute):
			t.Error("the contract was not acked")
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	run(nil) // the first copy: stored, the page indexed, acked
	if r, err := base.Tx.Get(ctx, doc.ID); err != nil || r.Status != contracts.Indexed {
		t.Fatalf("page after the first copy = %s, %v, want %s", r.Status, err, contracts.Indexed)
	}
	run(map[string]string{"copy": "resent"}) // the copy sent again
	if n := srch.count(doc.ID); n != 1 {
		t.Errorf("document stored %d times, want 1: the indexer trusted the resent copy", n)
	}
	if n, err := base.Queue.Len(ctx, contracts.QueueIndex); err != nil || n != 0 {
		t.Errorf("Len(index_pending) = %d, %v, want 0", n, err)
	}
}

// pageToIndex writes the record of a page of crawlID to-be-indexed and
// returns its document and the body of its index contract.
func pageToIndex(t *testing.T, tx txindex.Index, crawlID string) (contracts.Document, []byte) {
	t.Helper()
	u := "https://example.com/page"
	now := time.Now().UTC()
	doc := contracts.Document{ID: txindex.Key(crawlID, u), CrawlID: crawlID, URL: u, Host: "example.com",
		Title: []string{"page"}, Text: "the text of the page", ContentType: []string{"text/html"}, HTTPStatus: 200, Size: 100,
		LoadDate: now, InboundLinks: []string{}, InboundAnchorText: []string{}, OutboundLinks: []string{},
		OutboundAnchorText: []string{}, Images: []string{}}
	if _, err := tx.Create(t.Context(), []txindex.Record{{Key: doc.ID, CrawlID: crawlID, URL: u, Host: doc.Host, Group: doc.Host,
		Status: contracts.ToBeIndexed, StatusTime: now, CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(contracts.IndexContract{V: contracts.Version, CrawlID: crawlID, Docs: []contracts.Document{doc}})
	if err != nil {
		t.Fatal(err)
	}
	return doc, body
}
