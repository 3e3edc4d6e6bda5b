package indexer

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
)

// TestIndexerRefusedDocument runs one indexer batch on Elasticsearch in
// which the index refuses one document (a size over the integer range of
// size_i): its page ends failed with the index's reason, its neighbours,
// in its own contract and in another, are stored and indexed, and every
// contract is acked, none retried or dead-lettered. The refused page may
// still be to be parsed when its document arrives (the crawler publishes
// documents before it moves their pages on): it fails once it is to be
// indexed.
func TestIndexerRefusedDocument(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status contracts.Status // of the refused page when its document arrives
	}{
		{"page to be indexed", contracts.ToBeIndexed},
		{"page still to be parsed", contracts.ToBeParsed},
	} {
		t.Run(tc.name, func(t *testing.T) { testIndexerRefusedDocument(t, tc.status) })
	}
}

func testIndexerRefusedDocument(t *testing.T, status contracts.Status) {
	ctx := t.Context()
	es, err := esindex.Open(ctx, esindex.Options{URL: testenv.LoopbackURL(t, "GRIDCRAWL_ES_URL"), Prefix: "gctest-" + strings.ToLower(rand.Text()[:12]),
		Refresh: esindex.RefreshOnRead, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open elasticsearch: %v", err)
	}
	t.Cleanup(func() {
		if err := es.DeleteIndices(context.Background()); err != nil {
			t.Errorf("delete indices: %v", err)
		}
		es.Close()
	})
	q, err := sqlitequeue.Open(filepath.Join(t.TempDir(), "queue.db"), sqlitequeue.Options{MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	m := New(Config{Prefetch: 8, Batch: 8}, Deps{Queue: q, Tx: es.TxIndex(), Search: es.Search()})

	const crawlID = "refused"
	now := time.Now().UTC()
	doc := func(path string, size int) contracts.Document {
		u := "https://example.com/" + path
		return contracts.Document{ID: txindex.Key(crawlID, u), CrawlID: crawlID, URL: u, Host: "example.com",
			Title: []string{path}, Text: "text of " + path, ContentType: []string{"text/html"}, HTTPStatus: 200, Size: size,
			LoadDate: now, InboundLinks: []string{}, InboundAnchorText: []string{}, OutboundLinks: []string{},
			OutboundAnchorText: []string{}, Images: []string{}}
	}
	a, refused, b := doc("a", 100), doc("huge", 1<<40), doc("b", 200)
	var recs []txindex.Record
	for _, d := range []contracts.Document{a, refused, b} {
		st := contracts.ToBeIndexed
		if d.ID == refused.ID {
			st = status
		}
		recs = append(recs, txindex.Record{Key: d.ID, CrawlID: crawlID, URL: d.URL, Host: d.Host, Group: d.Host,
			Status: st, StatusTime: now, CreatedAt: now})
	}
	if _, err := es.TxIndex().Create(ctx, recs); err != nil {
		t.Fatal(err)
	}
	// The refused document shares its contract with a, and its batch with b.
	for _, k := range []contracts.IndexContract{
		{V: contracts.Version, CrawlID: crawlID, Docs: []contracts.Document{a, refused}},
		{V: contracts.Version, CrawlID: crawlID, Docs: []contracts.Document{b}},
	} {
		body, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Publish(ctx, contracts.QueueIndex, queue.Message{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	deliveries, err := q.Consume(cctx, contracts.QueueIndex, queue.ConsumeOptions{Prefetch: 8})
	if err != nil {
		t.Fatal(err)
	}
	var batch []consume.Message[contracts.IndexContract]
	for range 2 {
		d := <-deliveries
		k := new(contracts.IndexContract)
		if err := json.Unmarshal(d.Body(), k); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, consume.Message[contracts.IndexContract]{Delivery: d, Contract: k})
	}
	left, v := m.indexBatch(ctx, batch)
	if v != consume.Hold() {
		t.Fatalf("indexBatch verdict %+v, want Hold: the indexer settles each contract itself", v)
	}
	if status == contracts.ToBeParsed {
		if len(left) != 1 {
			t.Fatalf("indexBatch left %d contracts waiting, want 1, that of the page to be parsed", len(left))
		}
		// The crawler moves the page on.
		ts := []txindex.Transition{{Key: refused.ID, From: contracts.ToBeParsed, To: contracts.ToBeIndexed}}
		if applied, err := es.TxIndex().Transition(ctx, ts); err != nil || !applied[0] {
			t.Fatalf("Transition(to be indexed) = %v, %v", applied, err)
		}
		left = m.recheck(ctx, left)
	}
	if len(left) != 0 {
		t.Errorf("indexer left %d contracts waiting, want none", len(left))
	}
	// Deliveries still unsettled go back to the queue now.
	cancel()
	for range deliveries {
	}

	got, err := es.TxIndex().GetMany(ctx, []string{a.ID, refused.ID, b.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []contracts.Document{a, b} {
		if r := got[d.ID]; r.Status != contracts.Indexed {
			t.Errorf("page %s = %s (%q), want indexed", d.URL, r.Status, r.Error)
		}
		if _, err := es.Search().Get(ctx, d.ID); err != nil {
			t.Errorf("document %s: %v, want it stored", d.URL, err)
		}
	}
	r := got[refused.ID]
	if r.Status != contracts.Failed || !strings.HasPrefix(r.Error, contracts.ReasonRefusedByIndex+": ") || !strings.Contains(r.Error, "size_i") {
		t.Errorf("refused page = %s (%q), want failed, %q and the index's reason naming size_i", r.Status, r.Error, contracts.ReasonRefusedByIndex)
	}
	if _, err := es.Search().Get(ctx, refused.ID); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("refused document: %v, want %v", err, search.ErrNotFound)
	}
	for _, name := range []string{contracts.QueueIndex, queue.DeadLetterQueue(contracts.QueueIndex)} {
		if n, err := q.Len(ctx, name); err != nil || n != 0 {
			t.Errorf("Len(%s) = %d, %v, want 0: every contract acked, none retried or dead-lettered", name, n, err)
		}
	}
}
