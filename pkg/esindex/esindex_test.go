package esindex

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/digests/digeststest"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/profiles/profilestest"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/search/searchtest"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/txindex/txindextest"
)

// esURL returns the Elasticsearch of the tests, from GRIDCRAWL_ES_URL. Without
// it the test is skipped, or fails in CI (CI=true) and when
// GRIDCRAWL_REQUIRE_BACKENDS=1.
func esURL(t testing.TB) string {
	t.Helper()
	raw := testenv.Backend(t, "GRIDCRAWL_ES_URL")[0]
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("GRIDCRAWL_ES_URL %q: %v", raw, err)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
		t.Fatalf("GRIDCRAWL_ES_URL %q is not on loopback; tests only talk to loopback", raw)
	}
	return raw
}

// testPrefix returns an index prefix no other test or run uses.
func testPrefix() string { return "gctest-" + strings.ToLower(rand.Text()[:12]) }

// open opens a client on a fresh prefix whose indices are deleted when t
// ends.
func open(t testing.TB, refresh Refresh) *Client {
	t.Helper()
	return openPrefix(t, Options{URL: esURL(t), Prefix: testPrefix(), Refresh: refresh}, true)
}

// openPrefix opens a client with opts, closed when t ends; with cleanup the
// indices are deleted then too.
func openPrefix(t testing.TB, opts Options, cleanup bool) *Client {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	c, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open(%q, prefix %q) error: %v", opts.URL, opts.Prefix, err)
	}
	t.Cleanup(func() {
		if cleanup {
			if err := c.DeleteIndices(context.Background()); err != nil {
				t.Errorf("DeleteIndices: %v", err)
			}
		}
		c.Close()
	})
	return c
}

// policies are the refresh policies the conformance suites run with: the
// default, and the one that refreshes on write. RefreshWaitFor makes every
// write wait for the scheduled refresh, which is slow, so only the
// transaction suite runs with it (TestTxIndexConformanceWaitFor).
var policies = []Refresh{RefreshOnRead, RefreshOnWrite}

func TestTxIndexConformance(t *testing.T) {
	for _, p := range policies {
		t.Run(string(p), func(t *testing.T) { runTxSuite(t, p) })
	}
}

// TestTxIndexConformanceWaitFor runs the transaction suite with writes that
// wait for the scheduled refresh instead of forcing one.
func TestTxIndexConformanceWaitFor(t *testing.T) {
	if testing.Short() {
		t.Skip("each write waits for a scheduled refresh")
	}
	runTxSuite(t, RefreshWaitFor)
}

func runTxSuite(t *testing.T, p Refresh) {
	c := open(t, p)
	txindextest.Run(t, txindextest.Harness[txindex.Index]{
		New: func(t *testing.T) txindex.Index { return c.TxIndex() },
		Reopen: func(t *testing.T, x txindex.Index) txindex.Index {
			old := x.(*TxIndex).c
			return openPrefix(t, Options{URL: esURL(t), Prefix: strings.TrimSuffix(old.txIndex, "-transactions"), Refresh: p}, false).TxIndex()
		},
	})
}

func TestProfilesConformance(t *testing.T) {
	for _, p := range policies {
		t.Run(string(p), func(t *testing.T) {
			c := open(t, p)
			profilestest.Run(t, profilestest.Harness{
				New: func(t *testing.T) profiles.Store { return c.Profiles() },
				Reopen: func(t *testing.T, x profiles.Store) profiles.Store {
					old := x.(*Profiles).c
					return openPrefix(t, Options{URL: esURL(t), Prefix: strings.TrimSuffix(old.profilesIndex, "-profiles"), Refresh: p}, false).Profiles()
				},
			})
		})
	}
}

func TestSearchConformance(t *testing.T) {
	for _, p := range policies {
		t.Run(string(p), func(t *testing.T) {
			c := open(t, p)
			searchtest.Run(t, searchtest.Harness{
				New: func(t *testing.T) search.Index { return c.Search() },
				Reopen: func(t *testing.T, x search.Index) search.Index {
					old := x.(*Search).c
					return openPrefix(t, Options{URL: esURL(t), Prefix: strings.TrimSuffix(old.docsIndex, "-web"), Refresh: p}, false).Search()
				},
			})
		})
	}
}

// raw sends one HTTP request to Elasticsearch, as curl would, and returns
// the status and body.
func raw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(esURL(t), "/")+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return res.StatusCode, string(b)
}

func TestOpenIdempotent(t *testing.T) {
	url := esURL(t)
	prefix := testPrefix()
	// Concurrent first opens race to create the indices; all must succeed.
	const n = 4
	errs := make([]error, n)
	clients := make([]*Client, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			clients[i], errs[i] = Open(t.Context(), Options{URL: url, Prefix: prefix, Logger: slog.New(slog.DiscardHandler)})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range clients {
			if c != nil {
				_ = c.DeleteIndices(context.Background())
				c.Close()
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open %d of prefix %q error: %v", i, prefix, err)
		}
	}
	// Data survives another Open.
	rec := txindex.Record{Key: "k1", CrawlID: "c1", URL: "http://a.example/", Host: "a.example",
		Status: contracts.ToBeLoaded, StatusTime: time.Now().UTC().Truncate(time.Millisecond), CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if _, err := clients[0].TxIndex().Create(t.Context(), []txindex.Record{rec}); err != nil {
		t.Fatalf("Create error: %v", err)
	}
	rec.History = txindex.StartHistory(rec) // what Create stores
	again := openPrefix(t, Options{URL: url, Prefix: prefix}, false)
	got, err := again.TxIndex().Get(t.Context(), rec.Key)
	if err != nil {
		t.Fatalf("Get(%q) after a second Open error: %v", rec.Key, err)
	}
	if diff := cmp.Diff(rec, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Get(%q) after a second Open (-want +got):\n%s", rec.Key, diff)
	}

	tx, prof, docs := again.IndexNames()
	for _, tc := range []struct {
		index string
		props map[string]any
	}{{tx, txMapping}, {prof, profilesMapping}, {docs, webMapping()}, {again.ownersIndex, ownersMapping}} {
		status, body := raw(t, http.MethodGet, "/"+tc.index+"/_mapping", "")
		if status != http.StatusOK {
			t.Fatalf("GET %s/_mapping = %d %s", tc.index, status, body)
		}
		var m map[string]struct {
			Mappings struct {
				Dynamic    string         `json:"dynamic"`
				Properties map[string]any `json:"properties"`
			} `json:"mappings"`
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("decode mapping of %s: %v", tc.index, err)
		}
		got := m[tc.index].Mappings
		if got.Dynamic != "strict" {
			t.Errorf("mapping of %s: dynamic = %q, want strict", tc.index, got.Dynamic)
		}
		var gotFields, wantFields []string
		for f := range got.Properties {
			gotFields = append(gotFields, f)
		}
		for f := range tc.props {
			wantFields = append(wantFields, f)
		}
		slices.Sort(gotFields)
		slices.Sort(wantFields)
		if diff := cmp.Diff(wantFields, gotFields); diff != "" {
			t.Errorf("mapped fields of %s (-want +got):\n%s", tc.index, diff)
		}
	}

	// Strict: a document with an unmapped field is refused.
	status, body := raw(t, http.MethodPut, "/"+tx+"/_doc/x?refresh=false", `{"key":"x","surprise":1}`)
	if status != http.StatusBadRequest || !strings.Contains(body, "strict_dynamic_mapping_exception") {
		t.Errorf("PUT of an unmapped field = %d %s, want 400 strict_dynamic_mapping_exception", status, body)
	}
}

func TestOpenConflictingMapping(t *testing.T) {
	url := esURL(t)
	prefix := testPrefix()
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, strings.TrimSuffix(url, "/")+"/"+prefix+"-*", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	})
	// An index of the same name whose status is a number.
	status, body := raw(t, http.MethodPut, "/"+prefix+"-transactions", `{"mappings":{"properties":{"status":{"type":"long"}}}}`)
	if status != http.StatusOK {
		t.Fatalf("create index = %d %s", status, body)
	}
	c, err := Open(t.Context(), Options{URL: url, Prefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		c.Close()
		t.Fatalf("Open over an index with a conflicting mapping = nil error, want an error")
	}
}

func TestOpenInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no url", Options{}},
		{"upper case prefix", Options{URL: "http://127.0.0.1:9", Prefix: "Grid"}},
		{"prefix with a comma", Options{URL: "http://127.0.0.1:9", Prefix: "a,b"}},
		{"unknown refresh", Options{URL: "http://127.0.0.1:9", Refresh: "sometimes"}},
		{"negative replicas", Options{URL: "http://127.0.0.1:9", Replicas: -1}},
	} {
		if c, err := Open(t.Context(), tc.opts); err == nil {
			c.Close()
			t.Errorf("%s: Open(%+v) = nil error, want an error", tc.name, tc.opts)
		}
	}
}

// TestTransitionConcurrent checks the optimistic concurrency of Transition
// beyond the suite: many callers on one record, with moves and with lease
// renewals, which must all apply one after the other without lost updates.
func TestTransitionConcurrent(t *testing.T) {
	x := open(t, RefreshOnRead).TxIndex()
	now := time.Now().UTC().Truncate(time.Millisecond)
	crawl := "tc-" + rand.Text()
	const n = 8
	for _, tc := range []struct {
		name        string
		from, to    contracts.Status
		wantApplied int
	}{
		{"move", contracts.ToBeParsed, contracts.ToBeIndexed, 1},
		{"renew", contracts.ToBeLoaded, contracts.ToBeLoaded, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := txindex.Record{Key: txindex.Key(crawl, tc.name), CrawlID: crawl, URL: "http://a.example/" + tc.name,
				Host: "a.example", Status: tc.from, StatusTime: now, CreatedAt: now}
			if _, err := x.Create(t.Context(), []txindex.Record{r}); err != nil {
				t.Fatalf("Create error: %v", err)
			}
			applied := make([]bool, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					got, err := x.Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: tc.from, To: tc.to, AddAttempt: true}})
					errs[i] = err
					if err == nil {
						applied[i] = got[0]
					}
				})
			}
			wg.Wait()
			count := 0
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("Transition in goroutine %d error: %v", i, errs[i])
				}
				if applied[i] {
					count++
				}
			}
			if count != tc.wantApplied {
				t.Errorf("%d concurrent Transitions %s→%s: %d applied, want %d", n, tc.from, tc.to, count, tc.wantApplied)
			}
			got, err := x.Get(t.Context(), r.Key)
			if err != nil {
				t.Fatalf("Get error: %v", err)
			}
			if got.Status != tc.to || got.Attempts != tc.wantApplied {
				t.Errorf("Get(%q) = status %q attempts %d, want %q %d", r.Key, got.Status, got.Attempts, tc.to, tc.wantApplied)
			}
		})
	}
}

func TestTerminationQuery(t *testing.T) {
	c := open(t, RefreshOnRead)
	x := c.TxIndex()
	txName, _, _ := c.IndexNames()
	now := time.Now().UTC().Truncate(time.Millisecond)
	// A crawl id that needs escaping in JSON, and a neighbour that must not
	// count.
	crawl, other := `tq-"quoted" \ `+rand.Text(), "tq-"+rand.Text()
	var recs []txindex.Record
	for i, s := range contracts.Statuses {
		for _, id := range []string{crawl, other} {
			u := fmt.Sprintf("http://h.example/%d", i)
			recs = append(recs, txindex.Record{Key: txindex.Key(id, u), CrawlID: id, URL: u, Host: "h.example",
				Status: s, StatusTime: now, CreatedAt: now})
		}
	}
	if _, err := x.Create(t.Context(), recs); err != nil {
		t.Fatalf("Create error: %v", err)
	}
	count := func() int64 {
		t.Helper()
		if status, body := raw(t, http.MethodPost, "/"+txName+"/_refresh", ""); status != http.StatusOK {
			t.Fatalf("POST _refresh = %d %s", status, body)
		}
		status, body := raw(t, http.MethodPost, "/"+txName+"/_count", TerminationQuery(crawl))
		if status != http.StatusOK {
			t.Fatalf("POST _count %s = %d %s", TerminationQuery(crawl), status, body)
		}
		var res struct {
			Count int64 `json:"count"`
		}
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatalf("decode _count answer %q: %v", body, err)
		}
		return res.Count
	}
	if got := count(); got != 3 {
		t.Errorf("termination count with one record in each status = %d, want 3", got)
	}
	var ts []txindex.Transition
	for _, r := range recs {
		if r.CrawlID == crawl && r.Status.Pending() {
			ts = append(ts, txindex.Transition{Key: r.Key, From: r.Status, To: contracts.Indexed})
		}
	}
	for i, tr := range ts {
		if _, err := x.Transition(t.Context(), []txindex.Transition{tr}); err != nil {
			t.Fatalf("Transition error: %v", err)
		}
		if got, want := count(), int64(len(ts)-i-1); got != want {
			t.Errorf("termination count after %d transitions = %d, want %d", i+1, got, want)
		}
	}
	// The other crawl is not finished.
	status, body := raw(t, http.MethodPost, "/"+txName+"/_count", TerminationQuery(other))
	if status != http.StatusOK || !strings.Contains(body, `"count":3`) {
		t.Errorf("termination count of the other crawl = %d %s, want count 3", status, body)
	}
}

func TestTerminationQueryJSON(t *testing.T) {
	for _, id := range []string{"", "c1", `a"b\c`, "\x00\u2028ü"} {
		var q struct {
			Query struct {
				Bool struct {
					Filter []map[string]map[string]any `json:"filter"`
				} `json:"bool"`
			} `json:"query"`
		}
		if err := json.Unmarshal([]byte(TerminationQuery(id)), &q); err != nil {
			t.Fatalf("TerminationQuery(%q) is not JSON: %v", id, err)
		}
		got := q.Query.Bool.Filter
		want := []map[string]map[string]any{
			{"term": {"crawl_id": id}},
			{"terms": {"status": []any{"to-be-loaded", "to-be-parsed", "to-be-indexed"}}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("TerminationQuery(%q) filters (-want +got):\n%s", id, diff)
		}
	}
}

// benchRecords returns n records of a fresh crawl.
func benchRecords(n int, status contracts.Status) []txindex.Record {
	crawl := "bench-" + rand.Text()
	now := time.Now().UTC().Truncate(time.Millisecond)
	recs := make([]txindex.Record, n)
	for i := range recs {
		u := fmt.Sprintf("http://h%d.example/page/%d", i%10, i)
		recs[i] = txindex.Record{Key: txindex.Key(crawl, u), CrawlID: crawl, URL: u, Host: fmt.Sprintf("h%d.example", i%10),
			Group: fmt.Sprintf("h%d.example", i%10), Depth: 2, Status: status, StatusTime: now, CreatedAt: now,
			Referrer: "http://h0.example/"}
	}
	return recs
}

// benchPolicies are the refresh policies the benchmarks compare.
var benchPolicies = []Refresh{RefreshOnRead, RefreshOnWrite, RefreshWaitFor}

// BenchmarkCreate creates batches of 100 new records.
func BenchmarkCreate(b *testing.B) {
	for _, p := range benchPolicies {
		b.Run(string(p), func(b *testing.B) {
			x := open(b, p).TxIndex()
			for b.Loop() {
				if _, err := x.Create(b.Context(), benchRecords(100, contracts.ToBeLoaded)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkTransition moves batches of 100 records from to-be-loaded to
// to-be-parsed.
func BenchmarkTransition(b *testing.B) {
	for _, p := range benchPolicies {
		b.Run(string(p), func(b *testing.B) {
			x := open(b, p).TxIndex()
			var batches [][]txindex.Transition
			for range b.N {
				recs := benchRecords(100, contracts.ToBeLoaded)
				if _, err := x.Create(b.Context(), recs); err != nil {
					b.Fatal(err)
				}
				ts := make([]txindex.Transition, len(recs))
				for i, r := range recs {
					ts[i] = txindex.Transition{Key: r.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed, HTTPStatus: 200,
						Asset: &contracts.AssetRef{Key: "warc/x.warc.gz", Offset: int64(i) * 1000, Length: 1000}}
				}
				batches = append(batches, ts)
			}
			b.ResetTimer()
			for i := range b.N {
				applied, err := x.Transition(b.Context(), batches[i])
				if err != nil {
					b.Fatal(err)
				}
				if !applied[0] {
					b.Fatal("transition not applied")
				}
			}
			b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkUpsert stores batches of 50 documents of about 5 kB of text.
func BenchmarkUpsert(b *testing.B) {
	words := strings.Fields("the quick brown fox jumps over the lazy dog while crawler fetches pages politely from many hosts across web")
	var text bytes.Buffer
	for i := 0; text.Len() < 5000; i++ {
		text.WriteString(words[(i*7)%len(words)])
		text.WriteByte(' ')
	}
	for _, p := range benchPolicies {
		b.Run(string(p), func(b *testing.B) {
			s := open(b, p).Search()
			crawl := "bench-" + rand.Text()
			n := 0
			for b.Loop() {
				docs := make([]contracts.Document, 50)
				for i := range docs {
					n++
					docs[i] = contracts.Document{ID: fmt.Sprintf("d%d", n), CrawlID: crawl, URL: fmt.Sprintf("https://example.com/%d", n),
						Host: "example.com", Title: []string{"Page " + words[n%len(words)]}, H1: []string{"One"}, H2: []string{"Two"},
						Text: text.String(), ContentType: []string{"text/html"}, HTTPStatus: 200, LoadDate: time.Now(), LastModified: time.Now(),
						InboundLinks: []string{"https://example.com/a", "https://example.com/b"}, InboundAnchorText: []string{"", ""},
						OutboundLinks: []string{}, OutboundAnchorText: []string{}, Images: []string{}}
				}
				if err := s.Upsert(b.Context(), docs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(50*b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchmarkPage does the transaction-index work of one crawled page from
// several goroutines at once, as loader and crawler replicas do: the loader
// moves the page to to-be-parsed, the crawler creates its 10 outlinks and
// moves it to to-be-indexed, the indexer moves it to indexed, and the
// frontier reads the crawl's counts (as it does for crawls with a page
// limit). The pages are outlinks created by earlier pages.
func BenchmarkPage(b *testing.B) {
	for _, p := range benchPolicies {
		b.Run(string(p), func(b *testing.B) {
			x := open(b, p).TxIndex()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				queue := benchRecords(1, contracts.ToBeLoaded)
				if _, err := x.Create(b.Context(), queue); err != nil {
					b.Fatal(err)
				}
				for pb.Next() {
					page := queue[0]
					queue = queue[1:]
					steps := [][2]contracts.Status{{contracts.ToBeLoaded, contracts.ToBeParsed}, {contracts.ToBeParsed, contracts.ToBeIndexed}, {contracts.ToBeIndexed, contracts.Indexed}}
					for i, st := range steps {
						if i == 1 {
							links := benchRecords(10, contracts.ToBeLoaded)
							if _, err := x.Create(b.Context(), links); err != nil {
								b.Fatal(err)
							}
							queue = append(queue, links...)
						}
						applied, err := x.Transition(b.Context(), []txindex.Transition{{Key: page.Key, From: st[0], To: st[1]}})
						if err != nil || !applied[0] {
							b.Fatalf("Transition = %v, %v", applied, err)
						}
					}
					if _, err := x.Counts(b.Context(), page.CrawlID); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}

// TestIDsNoDocumentCanHave checks that keys Elasticsearch refuses as ids
// read as absent instead of failing the request.
func TestIDsNoDocumentCanHave(t *testing.T) {
	c := open(t, RefreshOnRead)
	x := c.TxIndex()
	for _, key := range []string{"", strings.Repeat("k", maxIDBytes+1)} {
		if _, err := x.Get(t.Context(), key); !errors.Is(err, txindex.ErrNotFound) {
			t.Errorf("Get(%.10q…) error = %v, want ErrNotFound", key, err)
		}
		got, err := x.GetMany(t.Context(), []string{key})
		if err != nil || len(got) != 0 {
			t.Errorf("GetMany(%.10q…) = %v, %v, want empty, nil", key, got, err)
		}
		applied, err := x.Transition(t.Context(), []txindex.Transition{{Key: key, From: contracts.ToBeLoaded, To: contracts.Failed}})
		if err != nil || !slices.Equal(applied, []bool{false}) {
			t.Errorf("Transition(%.10q…) = %v, %v, want [false], nil", key, applied, err)
		}
		if _, err := c.Profiles().Get(t.Context(), key); !errors.Is(err, profiles.ErrNotFound) {
			t.Errorf("Profiles.Get(%.10q…) error = %v, want ErrNotFound", key, err)
		}
		if _, err := c.Search().Get(t.Context(), key); !errors.Is(err, search.ErrNotFound) {
			t.Errorf("Search.Get(%.10q…) error = %v, want ErrNotFound", key, err)
		}
	}
}

// legacyTxMapping is the mapping of the transactions index as gridcrawl
// created it before the fields that no query uses were kept in _source
// only.
const legacyTxMapping = `{"settings":{"index":{"number_of_shards":1,"number_of_replicas":0}},
"mappings":{"dynamic":"strict","properties":{
"key":{"type":"keyword"},"crawl_id":{"type":"keyword"},"url":{"type":"keyword","ignore_above":8191},
"host":{"type":"keyword"},"chg":{"type":"keyword"},"depth":{"type":"integer"},"hops":{"type":"integer"},
"referrer":{"type":"keyword","ignore_above":8191},"status":{"type":"keyword"},"status_time":{"type":"date"},
"attempts":{"type":"integer"},
"error":{"type":"keyword","ignore_above":1024,"fields":{"text":{"type":"text"}}},
"http_status":{"type":"integer"},
"asset":{"properties":{"key":{"type":"keyword","ignore_above":1024},"offset":{"type":"long"},"length":{"type":"long"}}},
"created_at":{"type":"date"}}}}`

// TestOpenLegacyTxIndex opens a transactions index created with the older
// mapping, which indexes every field: Open keeps its mapping, and the index
// passes the conformance suite.
func TestOpenLegacyTxIndex(t *testing.T) {
	url := esURL(t)
	prefix := testPrefix()
	status, body := raw(t, http.MethodPut, "/"+prefix+"-transactions", legacyTxMapping)
	if status != http.StatusOK {
		t.Fatalf("create legacy index = %d %s", status, body)
	}
	c := openPrefix(t, Options{URL: url, Prefix: prefix}, true)
	status, body = raw(t, http.MethodGet, "/"+prefix+"-transactions/_mapping/field/url", "")
	if status != http.StatusOK || !strings.Contains(body, `"ignore_above":8191`) {
		t.Errorf("mapping of url after Open = %d %s, want the legacy mapping kept", status, body)
	}
	txindextest.Run(t, txindextest.Harness[txindex.Index]{
		New: func(t *testing.T) txindex.Index { return c.TxIndex() },
		Reopen: func(t *testing.T, x txindex.Index) txindex.Index {
			return openPrefix(t, Options{URL: url, Prefix: prefix}, false).TxIndex()
		},
	})
}

// TestTransitionStaleCache has two clients on one index: one caches a
// record (by creating or reading it), the other changes it behind its back,
// and then the first transitions it. Its cached version is stale, so its
// transition must be judged on the record as it is: applied exactly when
// the record is in the From status now, never on the stale copy.
func TestTransitionStaleCache(t *testing.T) {
	a := open(t, RefreshOnRead)
	b := openPrefix(t, Options{URL: esURL(t), Prefix: strings.TrimSuffix(a.txIndex, "-transactions")}, false)
	now := time.Now().UTC().Truncate(time.Millisecond)
	crawl := "sc-" + rand.Text()
	for _, tc := range []struct {
		name string
		// behind is the change b makes after a cached the record.
		behind txindex.Transition
		// then is a's transition.
		then        txindex.Transition
		wantApplied bool
		wantStatus  contracts.Status
		wantAttempt int
	}{
		// a's cache says to-be-loaded, which its transition would apply
		// to; the record is to-be-parsed.
		{"cache would apply", txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeParsed},
			txindex.Transition{From: contracts.ToBeLoaded, To: contracts.Failed, AddAttempt: true},
			false, contracts.ToBeParsed, 0},
		// a's cache says to-be-loaded, which its transition would not
		// apply to; the record is to-be-parsed, which it applies to.
		{"cache would not apply", txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeParsed},
			txindex.Transition{From: contracts.ToBeParsed, To: contracts.ToBeIndexed, AddAttempt: true},
			true, contracts.ToBeIndexed, 1},
		// Renewals from both: a's write must not overwrite b's attempt.
		{"renewal", txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeLoaded, AddAttempt: true},
			txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeLoaded, AddAttempt: true},
			true, contracts.ToBeLoaded, 2},
	} {
		for _, cacheBy := range []string{"create", "get"} {
			t.Run(tc.name+"/"+cacheBy, func(t *testing.T) {
				r := txindex.Record{Key: txindex.Key(crawl, tc.name+cacheBy), CrawlID: crawl, URL: "http://a.example/" + cacheBy,
					Host: "a.example", Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now}
				creator := a.TxIndex()
				if cacheBy == "get" {
					creator = b.TxIndex()
				}
				if _, err := creator.Create(t.Context(), []txindex.Record{r}); err != nil {
					t.Fatalf("Create error: %v", err)
				}
				if cacheBy == "get" {
					if _, err := a.TxIndex().Get(t.Context(), r.Key); err != nil {
						t.Fatalf("Get error: %v", err)
					}
				}
				behind, then := tc.behind, tc.then
				behind.Key, then.Key = r.Key, r.Key
				if got, err := b.TxIndex().Transition(t.Context(), []txindex.Transition{behind}); err != nil || !got[0] {
					t.Fatalf("Transition behind the cache = %v, %v, want applied", got, err)
				}
				got, err := a.TxIndex().Transition(t.Context(), []txindex.Transition{then})
				if err != nil {
					t.Fatalf("Transition error: %v", err)
				}
				if got[0] != tc.wantApplied {
					t.Errorf("Transition %s→%s over a stale cache applied = %v, want %v", then.From, then.To, got[0], tc.wantApplied)
				}
				rec, err := b.TxIndex().Get(t.Context(), r.Key)
				if err != nil {
					t.Fatalf("Get error: %v", err)
				}
				if rec.Status != tc.wantStatus || rec.Attempts != tc.wantAttempt {
					t.Errorf("record after = status %q attempts %d, want %q %d", rec.Status, rec.Attempts, tc.wantStatus, tc.wantAttempt)
				}
			})
		}
	}
}

// issue10TxMapping is the transactions mapping before the reports: error
// and http_status in _source only, no mime_type, bytes or history.
const issue10TxMapping = `{"settings":{"index":{"number_of_shards":1,"number_of_replicas":0}},
"mappings":{"dynamic":"strict","properties":{
"key":{"type":"keyword"},"crawl_id":{"type":"keyword"},"url":{"type":"keyword","index":false,"doc_values":false},
"host":{"type":"keyword"},"chg":{"type":"keyword","index":false,"doc_values":false},
"depth":{"type":"integer","index":false,"doc_values":false},"hops":{"type":"integer","index":false,"doc_values":false},
"referrer":{"type":"keyword","index":false,"doc_values":false},"status":{"type":"keyword"},"status_time":{"type":"date"},
"attempts":{"type":"integer","index":false,"doc_values":false},
"error":{"type":"keyword","index":false,"doc_values":false},
"http_status":{"type":"integer","index":false,"doc_values":false},
"asset":{"type":"object","enabled":false},
"created_at":{"type":"date","index":false,"doc_values":false}}}}`

// TestReportsOnOlderRecords opens a transactions index made before the
// reports, holding a failed record written then: Open adds the new fields
// (a new record keeps its render reason), the reports count the old record as unknown (no status code, no reason)
// instead of failing, and a new record is reported in full.
func TestReportsOnOlderRecords(t *testing.T) {
	url := esURL(t)
	prefix := testPrefix()
	index := prefix + "-transactions"
	if status, body := raw(t, http.MethodPut, "/"+index, issue10TxMapping); status != http.StatusOK {
		t.Fatalf("create old index = %d %s", status, body)
	}
	old := `{"key":"old1","crawl_id":"c1","url":"http://a.test/old","host":"a.test","chg":"a.test","depth":0,"hops":0,` +
		`"status":"failed","status_time":"2026-11-20T10:00:00Z","attempts":1,"error":"http 404","http_status":404,` +
		`"asset":{"key":"","offset":0,"length":0},"created_at":"2026-11-20T10:00:00Z"}`
	if status, body := raw(t, http.MethodPut, "/"+index+"/_doc/old1?refresh=true", old); status != http.StatusCreated {
		t.Fatalf("index old record = %d %s", status, body)
	}
	x := openPrefix(t, Options{URL: url, Prefix: prefix}, true).TxIndex()
	r := txindex.Record{Key: "new1", CrawlID: "c1", URL: "http://a.test/new", Host: "a.test", Status: contracts.ToBeLoaded,
		StatusTime: time.Now(), CreatedAt: time.Now()}
	if _, err := x.Create(t.Context(), []txindex.Record{r}); err != nil {
		t.Fatal(err)
	}
	n := int64(512)
	if _, err := x.Transition(t.Context(), []txindex.Transition{{Key: "new1", From: contracts.ToBeLoaded, To: contracts.Failed,
		Error: "http 410", HTTPStatus: 410, MIMEType: "text/html", Bytes: &n, Render: "always"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := x.Get(t.Context(), "new1"); err != nil || got.Render != "always" {
		t.Errorf("Get(new record).Render = %q, %v; want %q (a field Open mapped on the old index)", got.Render, err, "always")
	}
	codes, err := x.StatusCodesReport(t.Context(), "c1")
	if err != nil {
		t.Fatalf("StatusCodesReport: %v", err)
	}
	if diff := cmp.Diff([]txindex.StatusCodeRow{{StatusCode: 0, Count: 1}, {StatusCode: 410, Count: 1}}, codes); diff != "" {
		t.Errorf("StatusCodesReport (-want +got):\n%s", diff)
	}
	reasons, err := x.FailureReasonsReport(t.Context(), "c1", 10)
	if err != nil {
		t.Fatalf("FailureReasonsReport: %v", err)
	}
	want := []txindex.ReasonRow{
		{Reason: "", Count: 1, SampleURLs: []string{"http://a.test/old"}},
		{Reason: "http 410", Count: 1, SampleURLs: []string{"http://a.test/new"}},
	}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("FailureReasonsReport (-want +got):\n%s", diff)
	}
	got, err := x.Get(t.Context(), "old1")
	if err != nil || got.Error != "http 404" || got.Bytes != nil || len(got.History) != 0 {
		t.Errorf("Get(old record) = %+v, %v; want it as written, without size or history", got, err)
	}
}

// TestUpsertRefusedDocumentSparesItsBatch: a document Elasticsearch refuses
// is reported alone, by id, and the other documents of its bulk are stored.
// The web index here is one whose content_type keyword has no ignore_above
// (made by hand or by an older version), so that a 40 KiB content type is
// an immense term Lucene refuses.
func TestUpsertRefusedDocumentSparesItsBatch(t *testing.T) {
	s := open(t, RefreshWaitFor).Search()
	index := s.c.docsIndex
	if code, body := raw(t, http.MethodDelete, "/"+index, ""); code != http.StatusOK {
		t.Fatalf("delete %s = %d %s", index, code, body)
	}
	if code, body := raw(t, http.MethodPut, "/"+index, `{"mappings":{"properties":{"content_type":{"type":"keyword"}}}}`); code != http.StatusOK {
		t.Fatalf("create %s = %d %s", index, code, body)
	}
	doc := func(id, ctype string) contracts.Document {
		return contracts.Document{ID: id, CrawlID: "c", URL: "https://example.com/" + id, Host: "example.com",
			Title: []string{"t"}, Text: "text", ContentType: []string{ctype}, HTTPStatus: 200, LoadDate: time.Now(),
			InboundLinks: []string{}, InboundAnchorText: []string{}, OutboundLinks: []string{}, OutboundAnchorText: []string{}, Images: []string{}}
	}
	docs := []contracts.Document{doc("a", "text/html"), doc("immense", "text/"+strings.Repeat("x", 40<<10)), doc("b", "text/plain")}
	err := s.Upsert(t.Context(), docs)
	var refused *search.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Upsert = %v, want a *search.RefusedError", err)
	}
	if len(refused.Reasons) != 1 || !strings.Contains(refused.Reasons["immense"], "immense") {
		t.Errorf("refused = %v, want only the document with the immense content type", refused.Reasons)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Get(t.Context(), id); err != nil {
			t.Errorf("neighbour %s of the refused document: %v, want it stored", id, err)
		}
	}
}

func TestDigestsConformance(t *testing.T) {
	digeststest.Run(t, digeststest.Harness{
		New: func(t *testing.T) digests.Index { return open(t, RefreshOnRead).Digests() },
		Settle: func(t *testing.T, x digests.Index) {
			if err := x.(*Digests).Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
	})
}
