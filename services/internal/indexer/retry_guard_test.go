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

// errSearchDown is the plain failure of the search write in the retry
// guard: not a search.RefusedError, so nothing says the document is bad.
var errSearchDown = errors.New("search index unavailable")

// failFirstSearch is the real embedded search index whose first Upsert
// fails with a plain error, storing nothing.
type failFirstSearch struct {
	search.Index
	calls atomic.Int32
}

func (f *failFirstSearch) Upsert(ctx context.Context, docs []contracts.Document) error {
	if f.calls.Add(1) == 1 {
		return errSearchDown
	}
	return f.Index.Upsert(ctx, docs)
}

// settled is how one delivery was settled. The settle waits, not yet
// applied, until the test closes proceed: the test looks at the page
// before a retried contract can be delivered again. applied receives the
// settle's result once the queue has it, so the test stops the indexer
// only after that (a consumer that stops gives unsettled deliveries back).
type settled struct {
	how     string // "ack", "retry", "postpone" or "dead-letter"
	attempt int
	proceed chan struct{}
	applied chan error
}

// spyDelivery is a delivery that reports how it is settled on settles.
type spyDelivery struct {
	queue.Delivery
	settles chan settled
}

// report tells the test how the delivery is being settled, waits for the
// test to let it proceed, applies it, and reports the result.
func (d *spyDelivery) report(ctx context.Context, how string, apply func() error) error {
	s := settled{how: how, attempt: d.Attempt(), proceed: make(chan struct{}), applied: make(chan error, 1)}
	select {
	case d.settles <- s:
		select {
		case <-s.proceed:
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	err := apply()
	s.applied <- err
	return err
}

func (d *spyDelivery) Ack(ctx context.Context) error {
	return d.report(ctx, "ack", func() error { return d.Delivery.Ack(ctx) })
}

func (d *spyDelivery) Retry(ctx context.Context, delay time.Duration) error {
	return d.report(ctx, "retry", func() error { return d.Delivery.Retry(ctx, delay) })
}

func (d *spyDelivery) Postpone(ctx context.Context, delay time.Duration) error {
	return d.report(ctx, "postpone", func() error { return d.Delivery.Postpone(ctx, delay) })
}

func (d *spyDelivery) DeadLetter(ctx context.Context, reason string) error {
	return d.report(ctx, "dead-letter", func() error { return d.Delivery.DeadLetter(ctx, reason) })
}

// TestSearchWriteFailureRetriesContract checks that the indexer acks a
// contract only once its documents are stored: when the search write fails
// with a plain error (the index is unreachable, not refusing a document),
// the contract is retried, not acked, and its page stays to-be-indexed;
// the contract delivered again stores the document, moves the page to
// indexed, and only then is acked.
func TestSearchWriteFailureRetriesContract(t *testing.T) {
	ctx := t.Context()
	base := embedtest.Open(t) // the queue dead-letters at the fifth delivery
	tx, realSearch := base.Tx, base.Search
	settles := make(chan settled)
	q := queuetest.Wrap(base.Queue, func(d queue.Delivery) queue.Delivery { return &spyDelivery{Delivery: d, settles: settles} })
	srch := &failFirstSearch{Index: realSearch}

	const crawlID = "retry"
	u := "https://example.com/page"
	now := time.Now().UTC()
	doc := contracts.Document{ID: txindex.Key(crawlID, u), CrawlID: crawlID, URL: u, Host: "example.com",
		Title: []string{"page"}, Text: "the text of the page", ContentType: []string{"text/html"}, HTTPStatus: 200, Size: 100,
		LoadDate: now, InboundLinks: []string{}, InboundAnchorText: []string{}, OutboundLinks: []string{},
		OutboundAnchorText: []string{}, Images: []string{}}
	if _, err := tx.Create(ctx, []txindex.Record{{Key: doc.ID, CrawlID: crawlID, URL: u, Host: doc.Host, Group: doc.Host,
		Status: contracts.ToBeIndexed, StatusTime: now, CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(contracts.IndexContract{V: contracts.Version, CrawlID: crawlID, Docs: []contracts.Document{doc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := base.Queue.Publish(ctx, contracts.QueueIndex, queue.Message{Body: body}); err != nil {
		t.Fatal(err)
	}

	x := New(Config{Prefetch: 4, Batch: 4}, Deps{Queue: q, Tx: tx, Search: srch})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(runCtx) }()
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(shutdown)
	next := func(what string) settled {
		t.Helper()
		select {
		case s := <-settles:
			return s
		case <-time.After(time.Minute): // a retry is due after seconds; only a hung indexer takes this long
			t.Fatalf("no settle of the contract %s", what)
			return settled{}
		}
	}
	page := func() txindex.Record {
		t.Helper()
		r, err := tx.Get(ctx, doc.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	first := next("after the failed search write")
	if r := page(); r.Status != contracts.ToBeIndexed {
		t.Errorf("page after the failed search write = %s (%q), want %s", r.Status, r.Error, contracts.ToBeIndexed)
	}
	if _, err := realSearch.Get(ctx, doc.ID); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("document after the failed search write: %v, want %v", err, search.ErrNotFound)
	}
	close(first.proceed)
	if first.how != "retry" || first.attempt != 1 {
		t.Fatalf("first delivery (attempt %d) settled by %s, want retry after the search write failed", first.attempt, first.how)
	}

	second := next("delivered again")
	close(second.proceed)
	select {
	case err := <-second.applied:
		if err != nil {
			t.Errorf("applying the %s of the second delivery: %v", second.how, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the %s of the second delivery was not applied", second.how)
	}
	if second.how != "ack" || second.attempt != 2 {
		t.Errorf("second delivery (attempt %d) settled by %s, want ack", second.attempt, second.how)
	}
	if r := page(); r.Status != contracts.Indexed {
		t.Errorf("page after the contract delivered again = %s (%q), want %s", r.Status, r.Error, contracts.Indexed)
	}
	if _, err := realSearch.Get(ctx, doc.ID); err != nil {
		t.Errorf("document after the contract delivered again: %v, want it stored", err)
	}
	if n := srch.calls.Load(); n != 2 {
		t.Errorf("search writes = %d, want 2 (the failed one and the retry)", n)
	}
	shutdown()
	for _, name := range []string{contracts.QueueIndex, queue.DeadLetterQueue(contracts.QueueIndex)} {
		if n, err := base.Queue.Len(ctx, name); err != nil || n != 0 {
			t.Errorf("Len(%s) = %d, %v, want 0: the contract acked", name, n, err)
		}
	}
}
