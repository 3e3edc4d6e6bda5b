package crawler

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
)

// delivery is a delivery handed to the crawler's handler directly; resent
// marks a copy its publisher sent again (queue.Resendable).
type delivery struct {
	body   []byte
	resent bool
}

func (d *delivery) Body() []byte                                  { return d.body }
func (d *delivery) Headers() map[string]string                    { return nil }
func (d *delivery) Attempt() int                                  { return 1 }
func (d *delivery) Redelivered() bool                             { return false }
func (d *delivery) Ack(context.Context) error                     { return nil }
func (d *delivery) Retry(context.Context, time.Duration) error    { return nil }
func (d *delivery) Postpone(context.Context, time.Duration) error { return nil }
func (d *delivery) DeadLetter(context.Context, string) error      { return nil }
func (d *delivery) Resent() bool                                  { return d.resent }

// countingAssets is the real asset store counting the reads of objects.
type countingAssets struct {
	assets.Store
	gets atomic.Int64
}

func (c *countingAssets) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key, offset, length)
}

// TestResentContractNotParsedAgain: a loader publishes a crawler contract
// whose page carries its record's snapshot (to be parsed); crawler A parses
// the page; the loader's connection died before the broker's confirm reached
// it, so it publishes the contract again (a resent copy), which goes to
// crawler B. B knows nothing of A's writes: it must read the page's record
// instead of trusting the copy's snapshot, find it parsed, and neither read
// its WARC record again nor publish its document a second time.
func TestResentContractNotParsedAgain(t *testing.T) {
	prefix := "gctest-" + strings.ToLower(rand.Text()[:12])
	esA, esB := openTxView(t, prefix), openTxView(t, prefix)
	t.Cleanup(func() {
		if err := esA.DeleteIndices(context.Background()); err != nil {
			t.Errorf("delete indices: %v", err)
		}
	})
	ctx := t.Context()
	base := embedtest.Open(t)
	const crawlID = "resent"
	page := "http://site.test/"
	p := contracts.Profile{StartURLs: []string{page}, MaxDepth: 2}.WithDefaults()
	if err := base.Profiles.Put(ctx, profiles.Crawl{ID: crawlID, Profile: p, State: contracts.CrawlRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	resp := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><head><title>start</title></head><body><a href=\"/a\">a</a></body></html>"
	seg := warc.NewSegment(false)
	off, n, err := seg.Append(warc.NewResponseRecord(page, now, "192.0.2.1", []byte(resp), false, ""))
	if err != nil {
		t.Fatal(err)
	}
	const segKey = "warc/resent-test.warc"
	if err := base.Assets.Put(ctx, segKey, bytes.NewReader(seg.Bytes()), int64(seg.Len()), "application/warc"); err != nil {
		t.Fatal(err)
	}
	ref := contracts.AssetRef{Key: segKey, Offset: off, Length: n}
	key := txindex.Key(crawlID, page)
	// The page as loader A left it, its snapshot as the loader knows it.
	if _, err := esA.TxIndex().Create(ctx, []txindex.Record{{Key: key, CrawlID: crawlID, URL: page, Host: "site.test", Group: "site.test",
		Status: contracts.ToBeParsed, StatusTime: now, CreatedAt: now, Asset: ref, HTTPStatus: 200}}); err != nil {
		t.Fatal(err)
	}
	snap := txindex.Snapshot(esA.TxIndex(), key)
	if snap == nil {
		t.Fatal("no snapshot of the record just written")
	}
	body, err := json.Marshal(contracts.CrawlerContract{V: contracts.Version, CrawlID: crawlID, Profile: contracts.InlineProfile(p),
		Pages: []contracts.CrawlerPage{{URL: page, Asset: ref, StatusCode: 200, ContentType: "text/html", FetchedAt: now, Snapshot: snap}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workers: 1, Prefetch: 1, MaxBodyBytes: 1 << 20, DecodeBudget: 1 << 20, MaxTextBytes: 1 << 20, MaxLinks: 100, MaxRedirects: 10}
	handle := func(c *Crawler, d *delivery) {
		t.Helper()
		var k contracts.CrawlerContract
		if err := json.Unmarshal(d.body, &k); err != nil {
			t.Fatal(err)
		}
		if v := c.handle(ctx, d, &k); v != consume.Ack() {
			t.Fatalf("verdict on the contract = %+v, want ack", v)
		}
	}

	a := New(cfg, Deps{Queue: base.Queue, Tx: esA.TxIndex(), Assets: base.Assets, Profiles: base.Profiles})
	handle(a, &delivery{body: body})
	if r, err := esA.TxIndex().Get(ctx, key); err != nil || r.Status != contracts.ToBeIndexed {
		t.Fatalf("page after crawler A = %s, %v; want %s", r.Status, err, contracts.ToBeIndexed)
	}
	if n, err := base.Queue.Len(ctx, contracts.QueueIndex); err != nil || n != 1 {
		t.Fatalf("Len(index_pending) after crawler A = %d, %v; want 1", n, err)
	}

	counted := &countingAssets{Store: base.Assets}
	b := New(cfg, Deps{Queue: base.Queue, Tx: esB.TxIndex(), Assets: counted, Profiles: base.Profiles})
	handle(b, &delivery{body: body, resent: true})
	if n := counted.gets.Load(); n != 0 {
		t.Errorf("crawler B read %d WARC records for the resent copy, want 0: it trusted the copy's snapshot and parsed the page again", n)
	}
	if n, err := base.Queue.Len(ctx, contracts.QueueIndex); err != nil || n != 1 {
		t.Errorf("Len(index_pending) after the resent copy = %d, %v; want 1: the page's document went to the indexer twice", n, err)
	}
	if r, err := esA.TxIndex().Get(ctx, key); err != nil || r.Status != contracts.ToBeIndexed {
		t.Errorf("page after the resent copy = %s, %v; want %s", r.Status, err, contracts.ToBeIndexed)
	}
}

// openTxView opens the transaction index of prefix on the Elasticsearch
// of GRIDCRAWL_ES_URL as one process sees it: each view has a store of its
// own, which knows the record versions it read or wrote (txindex.Revisions).
func openTxView(t *testing.T, prefix string) *esindex.Client {
	t.Helper()
	es, err := esindex.Open(t.Context(), esindex.Options{URL: testenv.LoopbackURL(t, "GRIDCRAWL_ES_URL"), Prefix: prefix,
		Refresh: esindex.RefreshOnRead, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open elasticsearch: %v", err)
	}
	t.Cleanup(es.Close)
	return es
}
