package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// leaseOverTx is the real embedded transaction index seen an hour later by
// the recovery sweep: every pending record is past its lease at every
// sweep, the lease renewal of the sweep before included, without a test
// that waits for leases to run out.
type leaseOverTx struct{ txindex.Index }

func (x leaseOverTx) Stale(ctx context.Context, before time.Time, limit int, owned []string) ([]txindex.Record, error) {
	return x.Index.Stale(ctx, before.Add(time.Hour), limit, owned)
}

// TestSweepLeavesPausedCrawlAlone checks that the recovery sweep publishes
// nothing for a paused crawl: its records in every pending status are past
// their lease at each of several sweeps, and still the lengths of the
// loader and crawler queues do not grow, and no record counts an attempt or
// fails. Once the crawl is resumed the same sweep republishes the work of
// each record, which shows that the records were the sweep's to take.
func TestSweepLeavesPausedCrawlAlone(t *testing.T) {
	ctx := t.Context()
	s := embedtest.Open(t)
	tx, q := s.Tx, s.Queue
	const attempts = 5
	co := New(Config{RecoveryLease: time.Minute, RecoveryInterval: time.Minute, RecoveryAttempts: attempts},
		Deps{Queue: q, Tx: leaseOverTx{tx}, Profiles: s.Profiles, Search: s.Search, Assets: s.Assets})

	no := false
	p, err := CheckProfile(contracts.Profile{StartURLs: []string{"http://a.test/load", "http://a.test/parse", "http://a.test/index"}, Sitemaps: &no})
	if err != nil {
		t.Fatal(err)
	}
	id, err := co.CreateCrawl(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	// One record in each pending status.
	moves := map[string][]contracts.Status{
		"http://a.test/parse": {contracts.ToBeLoaded, contracts.ToBeParsed},
		"http://a.test/index": {contracts.ToBeLoaded, contracts.ToBeParsed, contracts.ToBeIndexed},
	}
	for u, path := range moves {
		for i := 1; i < len(path); i++ {
			applied, err := tx.Transition(ctx, []txindex.Transition{{Key: txindex.Key(id, u), From: path[i-1], To: path[i]}})
			if err != nil || !applied[0] {
				t.Fatalf("Transition(%s to %s) = %v, %v", u, path[i], applied, err)
			}
		}
	}
	if err := co.SetPaused(ctx, id, true); err != nil {
		t.Fatal(err)
	}

	lengths := func() map[string]int {
		out := map[string]int{}
		for _, name := range []string{routing.ShardQueue(0, 1), contracts.QueueCrawler, contracts.QueueIndex} {
			n, err := q.Len(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = n
		}
		return out
	}
	want := map[contracts.Status]bool{contracts.ToBeLoaded: true, contracts.ToBeParsed: true, contracts.ToBeIndexed: true}
	checkRecords := func(when string) {
		t.Helper()
		seen := map[contracts.Status]bool{}
		for _, u := range p.StartURLs {
			r, err := tx.Get(ctx, txindex.Key(id, u))
			if err != nil {
				t.Fatal(err)
			}
			seen[r.Status] = true
			if r.Attempts != 0 || !want[r.Status] {
				t.Errorf("%s: record %s = %s attempts %d, want pending with no attempt", when, u, r.Status, r.Attempts)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("%s: records in %v, want one in each of %v", when, seen, want)
		}
	}

	before := lengths()
	for i := range 3 {
		n, err := co.Sweep(ctx)
		if err != nil {
			t.Fatalf("Sweep %d: %v", i+1, err)
		}
		if n != 0 {
			t.Errorf("Sweep %d of a paused crawl = %d records, want 0", i+1, n)
		}
		after := lengths()
		for name, was := range before {
			if after[name] != was {
				t.Errorf("after sweep %d of a paused crawl, %s holds %d messages, want %d as before", i+1, name, after[name], was)
			}
		}
		checkRecords(fmt.Sprintf("paused crawl after sweep %d", i+1))
	}

	// Resumed, the same records are republished: one loader contract, and
	// one crawler contract each for the page to parse and the one to index
	// again.
	if err := co.SetPaused(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	before = lengths()
	if n, err := co.Sweep(ctx); err != nil || n != len(p.StartURLs) {
		t.Fatalf("Sweep of the resumed crawl = %d, %v, want %d records", n, err, len(p.StartURLs))
	}
	after := lengths()
	for name, grow := range map[string]int{routing.ShardQueue(0, 1): 1, contracts.QueueCrawler: 2, contracts.QueueIndex: 0} {
		if after[name] != before[name]+grow {
			t.Errorf("after the sweep of the resumed crawl, %s holds %d messages, want %d", name, after[name], before[name]+grow)
		}
	}
}

// TestSweepWaitsForBackends runs the recovery sweep's loop while one of
// MCP's backends does not answer: the work of stale records is most likely
// held by a service waiting for the same backend, so no pass runs, no
// attempt is counted and nothing is republished, however many intervals
// pass. Once the backend answers, the next pass republishes the work.
func TestSweepWaitsForBackends(t *testing.T) {
	e := newRebuildEnv(t)
	var down atomic.Bool
	down.Store(true)
	gate := outage.New([]metrics.Check{{Backend: "assets", Probe: func(context.Context) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}}}, nil)
	co := New(Config{RecoveryLease: time.Minute, RecoveryInterval: 20 * time.Millisecond, RecoveryAttempts: 2},
		Deps{Queue: e.q, Tx: e.tx, Profiles: e.ps, QueuesInMemory: true, Gate: gate})
	const u = "http://a.example/parse"
	e.crawl(t, "c1", contracts.CrawlRunning, time.Now().Add(-time.Hour), map[string]contracts.Status{u: contracts.ToBeParsed})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); co.runSweep(ctx) }()
	defer func() { cancel(); <-done }()

	time.Sleep(50 * co.cfg.RecoveryInterval)
	r, err := e.tx.Get(t.Context(), txindex.Key("c1", u))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != contracts.ToBeParsed || r.Attempts != 0 {
		t.Errorf("during the outage the record is %s after %d attempts, want to-be-parsed after none", r.Status, r.Attempts)
	}
	if got := e.published(t); len(got) != 0 {
		t.Errorf("during the outage the sweep published %v, want nothing", got)
	}

	down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for r.Attempts == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if r, err = e.tx.Get(t.Context(), txindex.Key("c1", u)); err != nil {
			t.Fatal(err)
		}
	}
	if r.Status != contracts.ToBeParsed || r.Attempts != 1 {
		t.Fatalf("after the outage the record is %s after %d attempts, want to-be-parsed after 1", r.Status, r.Attempts)
	}
	cancel()
	<-done
	if got, want := e.published(t), []string{"c1 parse " + u}; !slices.Equal(got, want) {
		t.Errorf("after the outage the sweep published %v, want %v", got, want)
	}
}

// TestSweepLeavesFiledURLsAlone: a to-be-loaded record of a loader shard
// with a live owner (a lease, txindex.Owners) waits in the owner's frontier
// store: the recovery sweep leaves it alone, however many leases it waits
// (no republish, no attempt, never failed as stalled), and recovers the
// crawl's other pending records as before. Once the owner is gone (its
// lease released), the sweep publishes the record again.
func TestSweepLeavesFiledURLsAlone(t *testing.T) {
	ctx := t.Context()
	s := embedtest.Open(t)
	tx, q := s.Tx, s.Queue
	const attempts = 2
	co := New(Config{RecoveryLease: time.Minute, RecoveryInterval: time.Minute, RecoveryAttempts: attempts},
		Deps{Queue: q, Tx: leaseOverTx{tx}, Profiles: s.Profiles, Search: s.Search, Assets: s.Assets})
	no := false
	p, err := CheckProfile(contracts.Profile{StartURLs: []string{"http://a.test/filed", "http://a.test/parse"}, Sitemaps: &no})
	if err != nil {
		t.Fatal(err)
	}
	id, err := co.CreateCrawl(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	filed, err := tx.Get(ctx, txindex.Key(id, "http://a.test/filed"))
	if err != nil || filed.Shard != txindex.ShardID(0, 1) {
		t.Fatalf("record's loader shard = %q (%v), want %q", filed.Shard, err, txindex.ShardID(0, 1))
	}
	lease, ok, err := tx.Claim(ctx, filed.Shard, "loader-a", time.Hour)
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if applied, err := tx.Transition(ctx, []txindex.Transition{{Key: txindex.Key(id, "http://a.test/parse"),
		From: contracts.ToBeLoaded, To: contracts.ToBeParsed}}); err != nil || !applied[0] {
		t.Fatalf("Transition to to-be-parsed = %v, %v", applied, err)
	}
	loaderQueue := routing.ShardQueue(0, 1)
	before, err := q.Len(ctx, loaderQueue)
	if err != nil {
		t.Fatal(err)
	}
	for i := range attempts + 2 {
		if _, err := co.Sweep(ctx); err != nil {
			t.Fatalf("sweep %d: %v", i, err)
		}
	}
	if n, err := q.Len(ctx, loaderQueue); err != nil || n != before {
		t.Errorf("loader queue holds %d contracts after the sweeps, %d before (%v): the filed URL was published again", n, before, err)
	}
	r, err := tx.Get(ctx, filed.Key)
	if err != nil || r.Status != contracts.ToBeLoaded || r.Attempts != 0 {
		t.Errorf("filed record after %d sweeps = %s, %d attempts (%v); want %s, 0 attempts", attempts+2, r.Status, r.Attempts, err, contracts.ToBeLoaded)
	}
	if r, err := tx.Get(ctx, txindex.Key(id, "http://a.test/parse")); err != nil || r.Status != contracts.Failed {
		t.Errorf("the to-be-parsed record after %d sweeps = %s (%v), want %s: the sweep still recovers what is not filed", attempts+2, r.Status, err, contracts.Failed)
	}
	if err := tx.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := co.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Len(ctx, loaderQueue); err != nil || n != before+1 {
		t.Errorf("loader queue holds %d contracts after the owner left, want %d (%v): the sweep did not recover the owner's URL", n, before+1, err)
	}
}
