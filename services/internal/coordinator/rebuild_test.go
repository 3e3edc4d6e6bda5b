package coordinator

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/memqueue"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
)

// rebuildEnv is a coordinator on embedded stores with in-memory crawler
// and index queues, as the embedded grid has them.
type rebuildEnv struct {
	co *Coordinator
	tx *sqlitestore.TxIndex
	ps *sqlitestore.Profiles
	q  queue.Queue
}

func newRebuildEnv(t *testing.T) *rebuildEnv {
	t.Helper()
	s := embedtest.Open(t)
	tx, ps := s.Tx, s.Profiles
	q, err := memqueue.New(memqueue.Options{Durable: s.Queue, InMemory: func(n string) bool { return n == contracts.QueueCrawler || n == contracts.QueueIndex }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	cfg := Config{RecoveryLease: time.Hour, RecoveryInterval: time.Second, RecoveryAttempts: 5, FinishCheckInterval: time.Second, DueCheckInterval: time.Second, MaxDuePerCheck: 10}
	co := New(cfg, Deps{Queue: q, Tx: tx, Profiles: ps, QueuesInMemory: true})
	return &rebuildEnv{co: co, tx: tx, ps: ps, q: q}
}

// crawl stores a crawl in state with one record per status in recs
// (URL → status), their status time at.
func (e *rebuildEnv) crawl(t *testing.T, id string, state contracts.CrawlState, at time.Time, recs map[string]contracts.Status) {
	t.Helper()
	ctx := t.Context()
	if err := e.ps.Put(ctx, profiles.Crawl{ID: id, State: state, CreatedAt: at, Profile: contracts.Profile{StartURLs: []string{"http://a.example/"}}}); err != nil {
		t.Fatal(err)
	}
	var rs []txindex.Record
	for u, st := range recs {
		rs = append(rs, txindex.Record{Key: txindex.Key(id, u), CrawlID: id, URL: u, Host: "a.example", Group: "a.example",
			Status: st, StatusTime: at, CreatedAt: at})
	}
	if _, err := e.tx.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
}

// published takes every crawler contract in the queue and returns its
// pages as "crawl parse|reindex url", sorted.
func (e *rebuildEnv) published(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n, err := e.q.Len(ctx, contracts.QueueCrawler)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	if n == 0 {
		return out
	}
	ch, err := e.q.Consume(ctx, contracts.QueueCrawler, queue.ConsumeOptions{Prefetch: n})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		d := <-ch
		var c contracts.CrawlerContract
		if err := json.Unmarshal(d.Body(), &c); err != nil {
			t.Fatal(err)
		}
		kind := "parse"
		if c.Reindex {
			kind = "reindex"
		} else if len(c.Pages) != 1 {
			// See rebuildPublish: a page to parse is alone in its contract.
			t.Errorf("crawler contract to parse %d pages, want 1", len(c.Pages))
		}
		for _, p := range c.Pages {
			out = append(out, c.CrawlID+" "+kind+" "+p.URL)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(out)
	return out
}

// TestRebuildQueues: at start-up the work of the to-be-parsed and
// to-be-indexed records of running crawls is republished at once, with no
// attempt counted and the lease renewed, so that neither a second rebuild
// nor the sweep republishes it again; records moved since the start, and
// to-be-loaded ones (their queue is durable), are left alone; a paused
// crawl's work is republished when it resumes, once.
func TestRebuildQueues(t *testing.T) {
	e := newRebuildEnv(t)
	ctx := t.Context()
	old := time.Now().Add(-2 * time.Hour).UTC()
	e.crawl(t, "run", contracts.CrawlRunning, old, map[string]contracts.Status{
		"http://a.example/parse":  contracts.ToBeParsed,
		"http://a.example/parse2": contracts.ToBeParsed,
		"http://a.example/index":  contracts.ToBeIndexed,
		"http://a.example/load":   contracts.ToBeLoaded,
		"http://a.example/done":   contracts.Indexed,
		"http://a.example/failed": contracts.Failed,
	})
	e.crawl(t, "paused", contracts.CrawlPaused, old, map[string]contracts.Status{"http://a.example/p": contracts.ToBeParsed})
	e.crawl(t, "cancelled", contracts.CrawlCancelled, old, map[string]contracts.Status{"http://a.example/c": contracts.ToBeParsed})
	start := time.Now()
	// Moved to to-be-parsed after the start: this process published its
	// contract.
	e.crawl(t, "new", contracts.CrawlRunning, start.Add(time.Second), map[string]contracts.Status{"http://a.example/n": contracts.ToBeParsed})

	n, err := e.co.RebuildQueues(ctx, start)
	if err != nil {
		t.Fatalf("RebuildQueues() = %v", err)
	}
	want := []string{"run parse http://a.example/parse", "run parse http://a.example/parse2", "run reindex http://a.example/index"}
	if diff := cmp.Diff(want, e.published(t)); diff != "" {
		t.Errorf("contracts after RebuildQueues (-want +got):\n%s", diff)
	}
	if n != len(want) {
		t.Errorf("RebuildQueues() = %d, want %d", n, len(want))
	}
	for _, u := range []string{"http://a.example/parse", "http://a.example/parse2", "http://a.example/index"} {
		r, err := e.tx.Get(ctx, txindex.Key("run", u))
		if err != nil {
			t.Fatal(err)
		}
		if r.Attempts != 0 || !r.StatusTime.After(old) {
			t.Errorf("record %s after RebuildQueues: attempts %d, status time %v, want 0 and a renewed lease", u, r.Attempts, r.StatusTime)
		}
	}
	// Renewed: the sweep republishes none of them (it takes care of the
	// stale to-be-loaded record and the cancelled crawl's), a second
	// rebuild has nothing to do.
	if _, err := e.co.Sweep(ctx); err != nil {
		t.Errorf("Sweep() after RebuildQueues = %v", err)
	}
	if n, err := e.co.RebuildQueues(ctx, start); err != nil || n != 0 {
		t.Errorf("second RebuildQueues() = %d, %v, want 0, nil", n, err)
	}
	if diff := cmp.Diff([]string{}, e.published(t)); diff != "" {
		t.Errorf("contracts after a second rebuild and a sweep (-want +got):\n%s", diff)
	}

	// The paused crawl's work comes back with its resume, once.
	if err := e.co.SetPaused(ctx, "paused", false); err != nil {
		t.Fatalf("SetPaused(resume) = %v", err)
	}
	if diff := cmp.Diff([]string{"paused parse http://a.example/p"}, e.published(t)); diff != "" {
		t.Errorf("contracts after resume (-want +got):\n%s", diff)
	}
	if err := e.co.SetPaused(ctx, "paused", true); err != nil {
		t.Fatal(err)
	}
	if err := e.co.SetPaused(ctx, "paused", false); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{}, e.published(t)); diff != "" {
		t.Errorf("contracts after a second resume (-want +got):\n%s", diff)
	}
}
