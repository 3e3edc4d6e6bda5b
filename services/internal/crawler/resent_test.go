package crawler

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
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
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
)

// watchedDelivery is a delivery of the embedded queue as a test sees it:
// resent marks a copy its publisher sent again, not knowing whether the
// broker had taken the first (what amqpqueue marks with its resent
// header); loseAck makes its ack fail without reaching the queue, as when
// the broker node of the consumer's connection dies, so that the message
// stays held until the consumer stops and is then delivered again. tried
// receives the delivery on every ack tried.
type watchedDelivery struct {
	queue.Delivery
	resent, loseAck bool
	tried           chan<- queue.Delivery
}

var errAckLost = errors.New("delivery already settled: the connection's node died")

func (d *watchedDelivery) Resent() bool { return d.resent }

func (d *watchedDelivery) Ack(ctx context.Context) error {
	defer func() { d.tried <- d }()
	if d.loseAck {
		return errAckLost
	}
	return d.Delivery.Ack(ctx)
}

// countingAssets is the real asset store counting the reads of objects.
type countingAssets struct {
	assets.Store
	gets atomic.Int64
}

func (c *countingAssets) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key, offset, length)
}

// TestContractSeenBeforeNotParsedAgain: a loader publishes a crawler
// contract whose page carries its record's snapshot (to be parsed), and
// crawler A parses the page. The contract then comes again, to crawler B:
// resent, because the loader's connection died before the broker's confirm
// reached it and it published the contract again; or redelivered, because
// A's ack was lost and the queue gave the contract back when A stopped. B
// knows nothing of A's writes: it must read the page's record instead of
// trusting the contract's snapshot (queue.SeenBefore), find it parsed, and
// neither read its WARC record again nor publish its document a second
// time.
func TestContractSeenBeforeNotParsedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// redeliver: A's ack is lost and the queue delivers the contract
		// again; otherwise A acks and the loader publishes a resent copy.
		redeliver bool
	}{
		{name: "resent"},
		{name: "redelivered", redeliver: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "gctest-" + strings.ToLower(rand.Text()[:12])
			esA, esB := openTxView(t, prefix), openTxView(t, prefix)
			t.Cleanup(func() {
				if err := esA.DeleteIndices(context.Background()); err != nil {
					t.Errorf("delete indices: %v", err)
				}
			})
			ctx := t.Context()
			base := embedtest.Open(t)
			const crawlID = "seen"
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
			const segKey = "warc/seen-test.warc"
			if err := base.Assets.Put(ctx, segKey, bytes.NewReader(seg.Bytes()), int64(seg.Len()), "application/warc"); err != nil {
				t.Fatal(err)
			}
			ref := contracts.AssetRef{Key: segKey, Offset: off, Length: n}
			key := txindex.Key(crawlID, page)
			// The page as loader A left it, its snapshot as the loader
			// knows it.
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
			if err := base.Queue.Publish(ctx, contracts.QueueCrawler, queue.Message{Body: body}); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Workers: 1, Prefetch: 1, MaxBodyBytes: 1 << 20, DecodeBudget: 1 << 20, MaxTextBytes: 1 << 20, MaxLinks: 100, MaxRedirects: 10}
			// run runs a crawler on tx and assets until it tried to ack a
			// contract, then stops it and returns that delivery.
			run := func(who string, tx *esindex.Client, a assets.Store, wrap func(queue.Delivery, chan<- queue.Delivery) queue.Delivery) queue.Delivery {
				t.Helper()
				tried := make(chan queue.Delivery, 4)
				q := queuetest.Wrap(base.Queue, func(d queue.Delivery) queue.Delivery { return wrap(d, tried) })
				c := New(cfg, Deps{Queue: q, Tx: tx.TxIndex(), Assets: a, Profiles: base.Profiles})
				runCtx, stop := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Run(runCtx) }()
				var d queue.Delivery
				select {
				case d = <-tried:
				case <-time.After(time.Minute):
					t.Errorf("crawler %s acked no contract", who)
				}
				stop()
				if err := <-done; err != nil {
					t.Errorf("crawler %s: Run: %v", who, err)
				}
				return d
			}

			run("A", esA, base.Assets, func(d queue.Delivery, tried chan<- queue.Delivery) queue.Delivery {
				return &watchedDelivery{Delivery: d, loseAck: tc.redeliver, tried: tried}
			})
			if r, err := esA.TxIndex().Get(ctx, key); err != nil || r.Status != contracts.ToBeIndexed {
				t.Fatalf("page after crawler A = %s, %v; want %s", r.Status, err, contracts.ToBeIndexed)
			}
			if n, err := base.Queue.Len(ctx, contracts.QueueIndex); err != nil || n != 1 {
				t.Fatalf("Len(index_pending) after crawler A = %d, %v; want 1", n, err)
			}
			if !tc.redeliver {
				copied := queue.Message{Body: body, Headers: map[string]string{"copy": "resent"}}
				if err := base.Queue.Publish(ctx, contracts.QueueCrawler, copied); err != nil {
					t.Fatal(err)
				}
			}

			counted := &countingAssets{Store: base.Assets}
			d := run("B", esB, counted, func(d queue.Delivery, tried chan<- queue.Delivery) queue.Delivery {
				return &watchedDelivery{Delivery: d, resent: d.Headers()["copy"] == "resent", tried: tried}
			})
			if d == nil {
				t.FailNow()
			}
			if !queue.SeenBefore(d) || d.Redelivered() != tc.redeliver {
				t.Fatalf("crawler B's delivery: SeenBefore %v, Redelivered %v; want true, %v", queue.SeenBefore(d), d.Redelivered(), tc.redeliver)
			}
			if n := counted.gets.Load(); n != 0 {
				t.Errorf("crawler B read %d WARC records for the contract seen before, want 0: it trusted the contract's snapshot and parsed the page again", n)
			}
			if n, err := base.Queue.Len(ctx, contracts.QueueIndex); err != nil || n != 1 {
				t.Errorf("Len(index_pending) after the contract seen before = %d, %v; want 1: the page's document went to the indexer twice", n, err)
			}
			if n, err := base.Queue.Len(ctx, contracts.QueueCrawler); err != nil || n != 0 {
				t.Errorf("Len(crawler_pending) after crawler B = %d, %v; want 0", n, err)
			}
			if r, err := esA.TxIndex().Get(ctx, key); err != nil || r.Status != contracts.ToBeIndexed {
				t.Errorf("page after the contract seen before = %s, %v; want %s", r.Status, err, contracts.ToBeIndexed)
			}
		})
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
