package loader

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// resentDelivery is a delivery of a message its publisher sent again,
// not knowing whether the broker had taken the first copy (what amqpqueue
// marks with its resent header); acked is closed once it is acked.
type resentDelivery struct {
	queue.Delivery
	acked chan struct{}
}

func (d *resentDelivery) Resent() bool { return true }

func (d *resentDelivery) Ack(ctx context.Context) error {
	err := d.Delivery.Ack(ctx)
	if err == nil {
		close(d.acked)
	}
	return err
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

// TestResentContractNotFetchedAgain is the cluster test's double fetch at a
// RabbitMQ node kill: a crawler publishes a loader contract whose URL
// carries its record's snapshot (to be loaded); loader A fetches the page;
// the crawler's connection dies before the broker's confirm reached it, so
// it publishes the contract again (amqpqueue marks that copy as resent),
// and the copy goes to loader B, which knows nothing of A's record. B must
// read the record instead of trusting the snapshot, find the page fetched,
// and publish its crawler contract again rather than fetch it a second
// time.
func TestResentContractNotFetchedAgain(t *testing.T) {
	prefix := "gctest-" + strings.ToLower(rand.Text()[:12])
	crawler, esA, esB := openTxView(t, prefix), openTxView(t, prefix), openTxView(t, prefix)
	t.Cleanup(func() {
		if err := crawler.DeleteIndices(context.Background()); err != nil {
			t.Errorf("delete indices: %v", err)
		}
	})
	s := newSite(t, "")
	u := s.pages(1)[0]
	b := newBackends(t)
	b.shards = 1
	const id = "c"
	p := profile(u)
	ctx := t.Context()
	if err := b.prof.Put(ctx, profiles.Crawl{ID: id, Profile: p, State: contracts.CrawlRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// The crawler creates the record and publishes its contract with the
	// snapshot of what it wrote, as the enqueuer does.
	host := strings.TrimPrefix(s.URL, "http://")
	host, _, _ = strings.Cut(host, ":")
	now := time.Now().UTC()
	rec := txindex.Record{Key: txindex.Key(id, u), CrawlID: id, URL: u, Host: host, Group: host,
		Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now}
	if _, err := crawler.TxIndex().Create(ctx, []txindex.Record{rec}); err != nil {
		t.Fatal(err)
	}
	msgs, err := contractmsg.LoaderWithSnapshots(id, p, []txindex.Record{rec}, func(key string) *contracts.Snapshot {
		return txindex.Snapshot(crawler.TxIndex(), key)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("%d loader contracts, want 1", len(msgs))
	}
	shard := routing.ShardQueue(0, 1)
	if err := b.q.Publish(ctx, shard, msgs...); err != nil {
		t.Fatal(err)
	}

	// Loader A fetches the page and records it.
	cfg := config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "10ms"})
	_, stopA := b.runLoaderWith(t, cfg, func(d *Deps) { d.Tx = esA.TxIndex() })
	waitFor(t, "the page recorded by loader A", func() bool {
		r, err := crawler.TxIndex().Get(ctx, rec.Key)
		return err == nil && r.Status == contracts.ToBeParsed
	})
	stopA()

	// The copy the crawler sent again goes to loader B.
	copied := queue.Message{Body: msgs[0].Body, Headers: map[string]string{"copy": "resent"}}
	if err := b.q.Publish(ctx, shard, copied); err != nil {
		t.Fatal(err)
	}
	acked := make(chan struct{})
	q := queuetest.Wrap(b.q, func(d queue.Delivery) queue.Delivery {
		if d.Headers()["copy"] == "resent" {
			return &resentDelivery{Delivery: d, acked: acked}
		}
		return d
	})
	_, stopB := b.runLoaderWith(t, cfg, func(d *Deps) { d.Tx, d.Queue, d.Logger = esB.TxIndex(), q, testLogger(t, "B") })
	select {
	case <-acked:
	case <-time.After(time.Minute):
		t.Fatal("loader B did not settle the copy")
	}
	stopB()

	if n := len(s.pageHits()); n != 1 {
		t.Errorf("page fetched %d times, want 1 (the copy sent again must not be fetched)", n)
	}
	if r, err := crawler.TxIndex().Get(ctx, rec.Key); err != nil || r.Status != contracts.ToBeParsed {
		t.Errorf("record: %v, %v; want %s", r.Status, err, contracts.ToBeParsed)
	}
	// B published the page's crawler contract again (its first one may
	// have been lost with the contract): two in all.
	if n, err := b.q.Len(ctx, contracts.QueueCrawler); err != nil || n != 2 {
		t.Errorf("crawler contracts: %d (%v), want 2", n, err)
	}
}
