package crawler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
	"github.com/gridcrawl/gridcrawl/services/internal/scope"
)

// errInjected is the failure the order guard's stores answer once.
var errInjected = errors.New("injected failure")

// failOnceTx is the real embedded transaction index, whose next Create of
// records fails once it is armed: before anything is written (before), or
// after the records are written, as when the answer of a write that
// succeeded is lost (after).
type failOnceTx struct {
	txindex.Index
	before, after atomic.Bool
}

func (f *failOnceTx) Create(ctx context.Context, recs []txindex.Record) ([]bool, error) {
	if f.before.CompareAndSwap(true, false) {
		return nil, errInjected
	}
	created, err := f.Index.Create(ctx, recs)
	if err == nil && f.after.CompareAndSwap(true, false) {
		return nil, errInjected
	}
	return created, err
}

// failOnceQueue is the real embedded queue, whose next publish to a loader
// shard fails, with nothing published, once it is armed.
type failOnceQueue struct {
	queue.Queue
	loader atomic.Bool
}

func (f *failOnceQueue) Publish(ctx context.Context, name string, msgs ...queue.Message) error {
	if strings.HasPrefix(name, contracts.QueueLoader) && f.loader.CompareAndSwap(true, false) {
		return errInjected
	}
	return f.Queue.Publish(ctx, name, msgs...)
}

// TestLinksWrittenBeforePageMovesOn checks the crawler's order (YaCy Grid's
// crawler loop, https://github.com/yacy/yacy_grid_crawler): a page's new
// links are written and their loader contracts published before the page
// leaves to-be-parsed. When writing a link or publishing its contract fails
// once, the contract fails and the page stays to-be-parsed; the contract
// delivered again writes the links, publishes their loader contracts and
// only then moves the page to to-be-indexed. A crawler that moved the page
// first would lose the links: the redelivered contract finds the page no
// longer to be parsed and skips it.
func TestLinksWrittenBeforePageMovesOn(t *testing.T) {
	tests := []struct {
		name string
		arm  func(*failOnceTx, *failOnceQueue)
	}{
		{"link create fails", func(tx *failOnceTx, _ *failOnceQueue) { tx.before.Store(true) }},
		{"link create fails after writing", func(tx *failOnceTx, _ *failOnceQueue) { tx.after.Store(true) }},
		{"loader contract publish fails", func(_ *failOnceTx, q *failOnceQueue) { q.loader.Store(true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { testLinksBeforePage(t, tc.arm) })
	}
}

func testLinksBeforePage(t *testing.T, arm func(*failOnceTx, *failOnceQueue)) {
	ctx := t.Context()
	base := embedtest.Open(t)
	profs, store := base.Profiles, base.Assets
	tx, q := &failOnceTx{Index: base.Tx}, &failOnceQueue{Queue: base.Queue}

	const crawlID = "order"
	page := "http://site.test/"
	links := []string{"http://site.test/a", "http://site.test/b"}
	p := contracts.Profile{StartURLs: []string{page}, MaxDepth: 2}.WithDefaults()
	if err := profs.Put(ctx, profiles.Crawl{ID: crawlID, Profile: p, State: contracts.CrawlRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rules, err := scope.New(p, 10)
	if err != nil {
		t.Fatal(err)
	}

	// The page as the loader leaves it: its response in a WARC segment and
	// its record to-be-parsed.
	now := time.Now().UTC()
	html := `<html><head><title>start</title></head><body><a href="/a">a</a> <a href="/b">b</a></body></html>`
	resp := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + html
	seg := warc.NewSegment(false)
	off, n, err := seg.Append(warc.NewResponseRecord(page, now, "192.0.2.1", []byte(resp), false, ""))
	if err != nil {
		t.Fatal(err)
	}
	const segKey = "warc/order-test.warc"
	if err := store.Put(ctx, segKey, bytes.NewReader(seg.Bytes()), int64(seg.Len()), "application/warc"); err != nil {
		t.Fatal(err)
	}
	ref := contracts.AssetRef{Key: segKey, Offset: off, Length: n}
	pageKey := txindex.Key(crawlID, page)
	if _, err := base.Tx.Create(ctx, []txindex.Record{{Key: pageKey, CrawlID: crawlID, URL: page, Host: "site.test", Group: "site.test",
		Status: contracts.ToBeParsed, StatusTime: now, CreatedAt: now, Asset: ref, HTTPStatus: 200}}); err != nil {
		t.Fatal(err)
	}
	k := contracts.CrawlerContract{V: contracts.Version, CrawlID: crawlID, Profile: contracts.InlineProfile(p),
		Pages: []contracts.CrawlerPage{{URL: page, Asset: ref, StatusCode: 200, ContentType: "text/html", FetchedAt: now}}}

	c := New(Config{Workers: 1, Prefetch: 1, MaxBodyBytes: 1 << 20, DecodeBudget: 1 << 20, MaxTextBytes: 1 << 20, MaxLinks: 100, MaxRedirects: 10},
		Deps{Queue: q, Tx: tx, Assets: store, Profiles: profs})

	arm(tx, q)
	if err := c.Process(ctx, k, p, rules); !errors.Is(err, errInjected) {
		t.Fatalf("Process with a failing store = %v, want the store's failure", err)
	}
	if r := getRecord(t, base.Tx, pageKey); r.Status != contracts.ToBeParsed {
		t.Fatalf("page after the failed delivery = %s, want %s: it left to-be-parsed before its links were written and published",
			r.Status, contracts.ToBeParsed)
	}

	// The contract delivered again.
	if err := c.Process(ctx, k, p, rules); err != nil {
		t.Fatalf("Process of the redelivered contract: %v", err)
	}
	if r := getRecord(t, base.Tx, pageKey); r.Status != contracts.ToBeIndexed {
		t.Errorf("page after the redelivered contract = %s, want %s", r.Status, contracts.ToBeIndexed)
	}
	for _, u := range links {
		r, err := base.Tx.Get(ctx, txindex.Key(crawlID, u))
		if err != nil {
			t.Errorf("link %s after the redelivered contract: %v, want its record", u, err)
			continue
		}
		if r.Status != contracts.ToBeLoaded || r.Depth != 1 || r.Referrer != page {
			t.Errorf("link %s = %s depth %d referrer %q, want %s depth 1 referrer %q", u, r.Status, r.Depth, r.Referrer, contracts.ToBeLoaded, page)
		}
	}
	published := loaderURLs(t, base.Queue)
	for _, u := range links {
		if !slices.Contains(published, u) {
			t.Errorf("loader contracts published carry %v, want %s among them", published, u)
		}
	}
}

func getRecord(t *testing.T, tx txindex.Pipeline, key string) txindex.Record {
	t.Helper()
	r, err := tx.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

// loaderURLs takes every loader contract out of the loader queue and
// returns the URLs they carry.
func loaderURLs(t *testing.T, q queue.Queue) []string {
	t.Helper()
	ctx := t.Context()
	name := routing.ShardQueue(0, 1)
	n, err := q.Len(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return nil
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ds, err := q.Consume(cctx, name, queue.ConsumeOptions{Prefetch: n})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for range n {
		d := <-ds
		var k contracts.LoaderContract
		if err := json.Unmarshal(d.Body(), &k); err != nil {
			t.Fatal(err)
		}
		for _, u := range k.URLs {
			urls = append(urls, u.URL)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return urls
}
