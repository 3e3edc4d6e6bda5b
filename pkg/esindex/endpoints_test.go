package esindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// esHost returns the test Elasticsearch's host:port.
func esHost(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(esURL(t))
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// records returns n new to-be-loaded records of crawl.
func records(crawl string, n int) []txindex.Record {
	now := time.Now().UTC()
	recs := make([]txindex.Record, n)
	for i := range recs {
		u := fmt.Sprintf("http://h%d.test/p%d", i%7, i)
		recs[i] = txindex.Record{Key: txindex.Key(crawl, u), CrawlID: crawl, URL: u, Host: fmt.Sprintf("h%d.test", i%7),
			Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now}
	}
	return recs
}

// step returns the transition of rec from from to to, counting an attempt:
// a record's attempts count the transitions applied to it.
func step(rec txindex.Record, from, to contracts.Status) txindex.Transition {
	return txindex.Transition{Key: rec.Key, From: from, To: to, AddAttempt: true}
}

// checkApplied checks that every record of crawl is in status want with
// attempts attempts: each of its transitions applied once.
func checkApplied(t *testing.T, x *TxIndex, recs []txindex.Record, want contracts.Status, attempts int) {
	t.Helper()
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	got, err := x.GetMany(t.Context(), keys)
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	if len(got) != len(recs) {
		t.Errorf("GetMany found %d records, want %d", len(got), len(recs))
	}
	bad := 0
	for _, r := range got {
		if r.Status != want || r.Attempts != attempts {
			if bad++; bad <= 3 {
				t.Errorf("record %s: status %s, attempts %d, want %s, %d", r.URL, r.Status, r.Attempts, want, attempts)
			}
		}
	}
	counts, err := x.Counts(t.Context(), recs[0].CrawlID)
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	if counts[want] != int64(len(recs)) {
		t.Errorf("Counts = %v, want %d %s", counts, len(recs), want)
	}
}

// TestSeveralEndpoints gives Open a list of three addresses of the test
// Elasticsearch: one where nothing listens and two loopback proxies. Open
// works past the dead one; a run of creates and transitions from several
// goroutines goes on when proxy A is closed in the middle (its connections
// cut), every transition reported applied and applied once (the attempts
// of each record count them); with every proxy closed the readiness probe
// (a get) fails, and once proxy B listens again work resumes.
func TestSeveralEndpoints(t *testing.T) {
	target := esHost(t)
	a, b := testenv.StartProxy(t, target), testenv.StartProxy(t, target)
	list := "http://" + testenv.DeadAddr(t) + ", http://" + a.Addr() + ",http://" + b.Addr()
	c := openPrefix(t, Options{URL: list, Prefix: testPrefix()}, true)
	x := c.TxIndex()
	ctx := t.Context()

	const n, workers = 400, 4
	recs := records("several-endpoints", n)
	var applied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var killA sync.Once
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bi := w; bi*10 < n; bi += workers {
				batch := recs[bi*10 : min(bi*10+10, n)]
				if bi*10 >= n/2 {
					killA.Do(a.Close) // mid-run, with requests in flight on A
				}
				created, err := x.Create(ctx, batch)
				if err != nil {
					errs <- fmt.Errorf("Create: %w", err)
					return
				}
				var ts []txindex.Transition
				for j, ok := range created {
					if !ok {
						errs <- fmt.Errorf("Create reported %s not created", batch[j].URL)
						return
					}
					ts = append(ts, step(batch[j], contracts.ToBeLoaded, contracts.ToBeParsed))
				}
				for _, from := range []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed} {
					if from == contracts.ToBeParsed {
						for j := range ts {
							ts[j] = step(batch[j], contracts.ToBeParsed, contracts.ToBeIndexed)
						}
					}
					ok, err := x.Transition(ctx, ts)
					if err != nil {
						errs <- fmt.Errorf("Transition from %s: %w", from, err)
						return
					}
					for j, a := range ok {
						if !a {
							errs <- fmt.Errorf("Transition of %s from %s reported not applied", batch[j].URL, from)
							return
						}
						applied.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if applied.Load() != 2*n {
		t.Errorf("%d transitions reported applied, want %d", applied.Load(), 2*n)
	}
	checkApplied(t, x, recs, contracts.ToBeIndexed, 2)

	// Both proxies carried requests: the client used the list.
	if a.Accepted() == 0 || b.Accepted() == 0 {
		t.Errorf("proxy A accepted %d connections, B %d: want both used", a.Accepted(), b.Accepted())
	}
	// Every endpoint down: the readiness probe fails.
	b.Close()
	probe := func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := x.Get(pctx, "readyz-probe")
		if err != nil && !strings.Contains(err.Error(), txindex.ErrNotFound.Error()) {
			return err
		}
		return nil
	}
	if err := probe(); err == nil {
		t.Fatal("the probe succeeded with every endpoint down")
	}
	// One comes back: work resumes.
	if err := b.Start(); err != nil {
		t.Fatalf("restart proxy B: %v", err)
	}
	var err error
	for range 20 {
		if err = probe(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the probe still fails with proxy B back: %v", err)
	}
	more := records("several-endpoints-after", 20)
	if created, err := x.Create(ctx, more); err != nil || !allTrue(created) {
		t.Fatalf("Create after proxy B came back = %v, %v", created, err)
	}
	checkApplied(t, x, more, contracts.ToBeLoaded, 0)
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return len(bs) > 0
}

// loseAnswers is a transport that sends every request but drops the
// answer of every other write (bulk, index, create), failing it as a reset
// connection does: Elasticsearch applied the writes, the client cannot
// know.
type loseAnswers struct {
	rt   http.RoundTripper
	n    atomic.Int64
	lost atomic.Int64
}

func (l *loseAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := l.rt.RoundTrip(req)
	write := strings.HasSuffix(req.URL.Path, "/_bulk") || strings.Contains(req.URL.Path, "/_doc/") || strings.Contains(req.URL.Path, "/_create/")
	if err != nil || !write || l.n.Add(1)%2 == 0 {
		return res, err
	}
	res.Body.Close()
	l.lost.Add(1)
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestRetriedWritesApplyOnce loses the answer of every other bulk request
// after Elasticsearch applied it: the client sends it again, where each
// create and conditional write fails with a conflict because its first
// application succeeded. Create and Transition must report those writes
// as theirs (by their write id), and each transition must have applied
// once; so must the writes of shard leases.
func TestRetriedWritesApplyOnce(t *testing.T) {
	lose := &loseAnswers{rt: &http.Transport{}}
	c := openPrefix(t, Options{URL: esURL(t), Prefix: testPrefix(), Transport: lose}, true)
	x := c.TxIndex()
	ctx := t.Context()
	recs := records("retried-writes", 50)
	next := map[contracts.Status]contracts.Status{contracts.ToBeLoaded: contracts.ToBeParsed, contracts.ToBeParsed: contracts.ToBeIndexed}
	for i := 0; i < len(recs); i += 10 {
		batch := recs[i : i+10]
		created, err := x.Create(ctx, batch)
		if err != nil || !allTrue(created) {
			t.Fatalf("Create = %v, %v; want every record created", created, err)
		}
		for _, from := range []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed} {
			var ts []txindex.Transition
			for _, r := range batch {
				ts = append(ts, step(r, from, next[from]))
			}
			ok, err := x.Transition(ctx, ts)
			if err != nil || !allTrue(ok) {
				t.Fatalf("Transition from %s = %v, %v; want every transition applied", from, ok, err)
			}
		}
	}
	if lose.lost.Load() == 0 {
		t.Fatal("no answer was lost: the test tested nothing")
	}
	checkApplied(t, x, recs, contracts.ToBeIndexed, 2)
	// The same for crawl profiles: a Put and state changes.
	ps := c.Profiles()
	for i := range 3 {
		id := fmt.Sprintf("retried-%d", i)
		if err := ps.Put(ctx, profiles.Crawl{ID: id, State: contracts.CrawlRunning, CreatedAt: time.Now().UTC()}); err != nil {
			t.Fatalf("profiles Put(%s) = %v", id, err)
		}
		if err := ps.Transition(ctx, id, contracts.CrawlRunning, contracts.CrawlFinished, time.Now().UTC()); err != nil {
			t.Fatalf("profiles Transition(%s) = %v", id, err)
		}
		if err := ps.Put(ctx, profiles.Crawl{ID: id, State: contracts.CrawlRunning, CreatedAt: time.Now().UTC()}); !errors.Is(err, profiles.ErrExists) {
			t.Errorf("profiles Put of existing %s = %v, want ErrExists", id, err)
		}
	}
	// The same for shard leases: a claim (a create), a renewal, a
	// release and claims of a released shard (conditional writes).
	for i := range 3 {
		shard := txindex.ShardID(i, 3)
		l, ok, err := x.Claim(ctx, shard, "a", time.Hour)
		if err != nil || !ok {
			t.Fatalf("Claim(%s) = %v, %v; want claimed", shard, ok, err)
		}
		if l, ok, err = x.Renew(ctx, l, time.Hour); err != nil || !ok {
			t.Fatalf("Renew(%s) = %v, %v; want renewed", shard, ok, err)
		}
		if err := x.Release(ctx, l); err != nil {
			t.Fatalf("Release(%s) = %v", shard, err)
		}
		if l, ok, err = x.Claim(ctx, shard, "b", time.Hour); err != nil || !ok || l.Epoch != 2 {
			t.Fatalf("Claim(%s) of the released shard = %+v, %v, %v; want claimed at epoch 2", shard, l, ok, err)
		}
		if l, ok, err = x.Claim(ctx, shard, "b", time.Hour); err != nil || !ok || l.Epoch != 2 {
			t.Fatalf("Claim(%s) again by its owner = %+v, %v, %v; want claimed at epoch 2", shard, l, ok, err)
		}
	}
	leases, err := x.Leases(ctx)
	if err != nil || len(leases) != 3 {
		t.Fatalf("Leases = %+v, %v; want 3", leases, err)
	}
	for _, l := range leases {
		if l.Owner != "b" || l.Epoch != 2 || l.Released {
			t.Errorf("lease %+v, want b's at epoch 2", l)
		}
	}
	// A record created by another writer is still reported not created,
	// also when the request was sent again.
	created, err := x.Create(ctx, recs[:10])
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range created {
		if ok {
			t.Errorf("Create of existing record %s reported it created", recs[i].URL)
		}
	}
}

// TestOpenUpdatesReplicas opens existing indices with another number of
// replicas and of shards: with UpdateReplicas the replicas of every index
// change (a dynamic setting) and each change is logged; the shards cannot
// change, and a warning names the index. Without UpdateReplicas the
// indices keep theirs.
func TestOpenUpdatesReplicas(t *testing.T) {
	prefix := testPrefix()
	first := openPrefix(t, Options{URL: esURL(t), Prefix: prefix}, true)
	hcf := first.HCF()
	if _, err := hcf.Frontiers(t.Context(), "p"); err != nil { // creates its index
		t.Fatalf("HCF Frontiers: %v", err)
	}
	t.Cleanup(func() {
		if err := hcf.DeleteIndices(context.Background()); err != nil {
			t.Errorf("delete the HCF index: %v", err)
		}
	})
	indices := []string{prefix + "-transactions", prefix + "-profiles", prefix + "-web", prefix + "-digests", prefix + "-owners", hcf.IndexName()}
	replicas := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, ix := range indices {
			_, body := raw(t, "GET", "/"+ix+"/_settings/index.number_of_replicas", "")
			var res map[string]struct {
				Settings struct {
					Index struct {
						Replicas string `json:"number_of_replicas"`
					} `json:"index"`
				} `json:"settings"`
			}
			if err := json.Unmarshal([]byte(body), &res); err != nil {
				t.Fatalf("settings of %s: %v: %s", ix, err, body)
			}
			out[ix] = res[ix].Settings.Index.Replicas
		}
		return out
	}
	for ix, r := range replicas() {
		if r != "0" {
			t.Errorf("new index %s has %s replicas, want 0", ix, r)
		}
	}

	var logs bytes.Buffer
	open := func(opts Options) {
		t.Helper()
		opts.URL, opts.Prefix, opts.Logger = esURL(t), prefix, slog.New(slog.NewTextHandler(&logs, nil))
		c, err := Open(t.Context(), opts)
		if err != nil {
			t.Fatalf("Open(%+v): %v", opts, err)
		}
		defer c.Close()
		if _, err := c.HCF().Frontiers(t.Context(), "p"); err != nil {
			t.Fatalf("HCF Frontiers: %v", err)
		}
	}
	open(Options{Replicas: 1, Shards: 2})
	for ix, r := range replicas() {
		if r != "0" {
			t.Errorf("without UpdateReplicas index %s has %s replicas, want 0 still", ix, r)
		}
	}
	open(Options{Replicas: 1, UpdateReplicas: true, Shards: 2, WaitForActiveShards: "1"})
	for ix, r := range replicas() {
		if r != "1" {
			t.Errorf("index %s has %s replicas, want 1", ix, r)
		}
		if !strings.Contains(logs.String(), `changed the number of replicas of an elasticsearch index" index=`+ix+" ") {
			t.Errorf("no log of the change of %s's replicas in:\n%s", ix, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"elasticsearch index has another number of primary shards than configured; it cannot change (reindex to change it)\" index="+prefix+"-web shards=1 configured=2") {
		t.Errorf("no warning about the shards of %s-web in:\n%s", prefix, logs.String())
	}
	// A write waits for one active copy: the primary (the replica of a
	// single node stays unassigned).
	created, err := first.TxIndex().Create(t.Context(), records("replicas", 3))
	if err != nil || !allTrue(created) {
		t.Errorf("Create with an unassigned replica = %v, %v", created, err)
	}
}

func TestCheckWaitForActiveShards(t *testing.T) {
	for _, tc := range []struct {
		v        string
		replicas int
		ok       bool
	}{
		{"", 0, true}, {"all", 1, true}, {"1", 0, true}, {"2", 1, true},
		{"2", 0, false}, {"0", 1, false}, {"-1", 1, false}, {"any", 1, false}, {"3", 1, false},
	} {
		if err := CheckWaitForActiveShards(tc.v, tc.replicas); (err == nil) != tc.ok {
			t.Errorf("CheckWaitForActiveShards(%q, %d) = %v, want ok %v", tc.v, tc.replicas, err, tc.ok)
		}
	}
	if c, err := Open(t.Context(), Options{URL: "http://127.0.0.1:9", Replicas: 1, WaitForActiveShards: "3"}); err == nil {
		c.Close()
		t.Error("Open with wait_for_active_shards 3 of 2 copies succeeded")
	}
}

// TestOpenAddressList checks the parsing of address lists.
func TestOpenAddressList(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []string
	}{
		{"http://a:9200", []string{"http://a:9200"}},
		{" http://a:9200 , https://u:p@b:9200/es ,", []string{"http://a:9200", "https://u:p@b:9200/es"}},
	} {
		got, err := parseAddresses(tc.list)
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("parseAddresses(%q) = %q, %v, want %q", tc.list, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", " , ", "a:9200", "ftp://a", "http://a:9200,http://a:9200", "http://u:s3cret@a:9200,%zz", "http://u:s3cret@b?x=1"} {
		_, err := parseAddresses(bad)
		if err == nil {
			t.Errorf("parseAddresses(%q) = nil error", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("parseAddresses(%q) error shows the password: %v", bad, err)
		}
	}
}
