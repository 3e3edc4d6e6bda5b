package loader

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// redelivered is a delivery the broker took back from another consumer;
// acked is closed once the loader acks it.
type redelivered struct {
	queue.Delivery
	acked chan struct{}
}

func (d *redelivered) Redelivered() bool { return true }

func (d *redelivered) Ack(ctx context.Context) error {
	err := d.Delivery.Ack(ctx)
	if err == nil {
		close(d.acked)
	}
	return err
}

// TestRedeliveredContractWaitsForOldOwner is the cluster test's double
// fetches at a RabbitMQ node kill: both loaders lost their contracts, each
// took over shards of the other, and the old owner recorded pages it had
// fetched seconds before the kill only after the new owner had read their
// records. Here the old owner's record lands a second after the new owner
// receives the contract again: within the grace, the new owner must read
// the record after it and not fetch the page.
func TestRedeliveredContractWaitsForOldOwner(t *testing.T) {
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
	host, _, _ := strings.Cut(strings.TrimPrefix(s.URL, "http://"), ":")
	now := time.Now().UTC()
	rec := txindex.Record{Key: txindex.Key(id, u), CrawlID: id, URL: u, Host: host, Group: host,
		Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now}
	if _, err := b.tx.Create(ctx, []txindex.Record{rec}); err != nil {
		t.Fatal(err)
	}
	msgs, err := contractmsg.Loader(id, p, []txindex.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.q.Publish(ctx, routing.ShardQueue(0, 1), msgs...); err != nil {
		t.Fatal(err)
	}

	got, acked := make(chan struct{}, 1), make(chan struct{})
	q := queuetest.Wrap(b.q, func(d queue.Delivery) queue.Delivery {
		select {
		case got <- struct{}{}:
		default:
		}
		return &redelivered{Delivery: d, acked: acked}
	})
	cfg := config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "10ms", "GRIDCRAWL_LOADER_REDELIVERY_GRACE": "3s"})
	_, stop := b.runLoaderWith(t, cfg, func(d *Deps) { d.Queue = q })
	defer stop()
	select {
	case <-got:
	case <-time.After(time.Minute):
		t.Fatal("the loader did not receive the contract")
	}
	// The old owner records the page it fetched.
	time.Sleep(time.Second)
	applied, err := b.tx.Transition(context.Background(), []txindex.Transition{{Key: rec.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed}})
	if err != nil || len(applied) != 1 || !applied[0] {
		t.Fatalf("old owner's transition: %v, %v (false: the new owner had moved the record, fetching the page within the grace)", applied, err)
	}
	select {
	case <-acked:
	case <-time.After(time.Minute):
		t.Fatal("the loader did not settle the contract")
	}
	for _, h := range s.pageHits() {
		t.Errorf("page fetched at %s by the new owner, whose record the old owner had moved within the grace", h.path)
	}
}
