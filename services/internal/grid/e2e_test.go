package grid

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// testConfig returns a grid configuration for crawling loopback test sites.
// embeddedEnv clears the real backends' variables (scripts/test.sh exports
// them) so that a grid runs on embedded backends.
var embeddedEnv = []string{"GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT="}

func testConfig(t testing.TB, dataDir, resolve string) Config {
	t.Helper()
	for _, kv := range embeddedEnv {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("GRIDCRAWL_DATA", dataDir)
	t.Setenv("GRIDCRAWL_ALLOW_NETS", "127.0.0.0/8")
	t.Setenv("GRIDCRAWL_RESOLVE", resolve)
	t.Setenv("GRIDCRAWL_WARC_FLUSH_INTERVAL", "20ms")
	t.Setenv("GRIDCRAWL_FRONTIER_REPORT_INTERVAL", "200ms")
	// A refused or failing fetch is tried again after 10 s, then 20 s by
	// default: tests count the attempts, not the wait.
	t.Setenv("GRIDCRAWL_FETCH_RETRY_DELAY", "100ms")
	// A contract delivered again after a restart waits 30 s by default for
	// a loader that may still record it; here the loader before was stopped
	// (its records are in). The grace has its own test in the loader.
	t.Setenv("GRIDCRAWL_LOADER_REDELIVERY_GRACE", "1s")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startGrid runs an in-process grid and returns it with its API base URL.
func startGrid(t testing.TB, cfg Config) (*Grid, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The grid's log is kept (its last logTail bytes) and printed when the
	// test fails, so that a failure seen once under load says what the grid
	// did; with -v it goes to stderr as it is written.
	tail := &logTail{}
	var w io.Writer = tail
	if testing.Verbose() {
		w = io.MultiWriter(tail, os.Stderr)
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	g, err := Open(cfg, log, ln)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("grid run: %v", err)
		}
		if t.Failed() && !testing.Verbose() {
			t.Logf("the grid's log (its last %d KiB):\n%s", logTailBytes>>10, tail.String())
		}
	})
	return g, "http://" + ln.Addr().String()
}

// logTailBytes is how much of a grid's log a test keeps.
const logTailBytes = 1 << 20

// logTail keeps the last logTailBytes written to it.
type logTail struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - logTailBytes; over > 0 {
		// Drop whole lines from the front.
		cut := over
		if i := bytes.IndexByte(l.buf[over:], '\n'); i >= 0 {
			cut = over + i + 1
		}
		l.buf = append(l.buf[:0], l.buf[cut:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// apiTimeout bounds one request of apiDo, the answer included.
const apiTimeout = 2 * time.Minute

func apiDo(t testing.TB, method, u string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	// A request that gets no answer fails the test instead of holding the
	// package until its timeout (seen once in make test: a poll of a
	// running grid's API never answered, cause unknown).
	ctx, cancel := context.WithTimeout(t.Context(), apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, u, err)
		}
	}
	return resp.StatusCode
}

// waitFinished polls a crawl until it is no longer running. At every poll it
// checks that the documents already searchable are at least the records
// already counted indexed: a crawl can never look finished before its last
// document is searchable.
func waitFinished(t *testing.T, api, id string, limit time.Duration) contracts.CrawlStatus {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var st contracts.CrawlStatus
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
			t.Fatalf("GET crawl %s = %d", id, code)
		}
		if st.Documents < st.Counts[contracts.Indexed] {
			t.Fatalf("crawl %s: %d records indexed but only %d documents searchable", id, st.Counts[contracts.Indexed], st.Documents)
		}
		if st.State != contracts.CrawlRunning {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl %s not finished after %v: %+v", id, limit, st.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEndToEndTestSite crawls the awkward test site to the end with the
// crawler taking pages from the loader in memory (the default), with a
// handoff too small to hold any page, and without one: every path from the
// loader to the crawler gives the oracle's crawl.
func TestEndToEndTestSite(t *testing.T) {
	tests := []struct {
		name, handoffBytes string
		handed             bool // pages must have been taken from the handoff
	}{
		{"handoff", "", true},
		{"handoff too small", "1024", false},
		{"no handoff", "0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.handoffBytes != "" {
				t.Setenv("GRIDCRAWL_HANDOFF_BYTES", tt.handoffBytes)
			}
			g := testEndToEndTestSite(t)
			if taken, _ := g.Handoff.Counts(); tt.handed && taken == 0 {
				t.Errorf("no page was taken from the handoff, want the crawler to take them")
			}
		})
	}
}

func testEndToEndTestSite(t *testing.T) *Grid {
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	const depth = 4
	exp := site.Expect(depth)

	cfg := testConfig(t, t.TempDir(), site.Resolve())
	g, api := startGrid(t, cfg)

	profile := contracts.Profile{
		StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey},
		Collection: e2eCollections,
	}
	crawlStart := time.Now()
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", profile, &created); code != http.StatusCreated {
		t.Fatalf("POST /api/v1/crawls = %d", code)
	}
	st := waitFinished(t, api, created.CrawlID, 2*time.Minute)
	if st.State != contracts.CrawlFinished {
		t.Fatalf("crawl state = %s, want finished", st.State)
	}
	if st.Pending != 0 {
		t.Errorf("finished crawl has %d pending records", st.Pending)
	}

	ctx := t.Context()
	id := created.CrawlID
	statusOf := func(u string) (txindex.Record, bool) {
		r, err := g.Backends.Tx.Get(ctx, txindex.Key(id, u))
		if err != nil {
			return r, false
		}
		return r, true
	}
	for _, u := range exp.Indexed {
		r, ok := statusOf(u)
		if !ok || r.Status != contracts.Indexed {
			t.Errorf("record %s = %q (found %v, err %q), want indexed", u, r.Status, ok, r.Error)
			continue
		}
		doc, err := g.Backends.Search.Get(ctx, r.Key)
		if err != nil {
			t.Errorf("document of %s: %v", u, err)
			continue
		}
		checkDocument(t, u, doc, exp, r, crawlStart)
	}
	if got, want := st.Counts[contracts.Indexed], int64(len(exp.Indexed)); got != want {
		t.Errorf("indexed records = %d, want %d", got, want)
	}
	if got, want := st.Documents, int64(len(exp.Indexed)); got != want {
		t.Errorf("documents = %d, want %d (each indexed page exactly once)", got, want)
	}
	for _, u := range exp.Redirected {
		if r, ok := statusOf(u); !ok || r.Status != contracts.Redirected {
			t.Errorf("record %s = %q (found %v), want redirected", u, r.Status, ok)
		}
	}
	for _, u := range exp.Failed {
		if r, ok := statusOf(u); !ok || r.Status != contracts.Failed {
			t.Errorf("record %s = %q (found %v), want failed", u, r.Status, ok)
		}
	}
	for u, reason := range exp.RedirectLoops {
		if r, ok := statusOf(u); !ok || r.Error != reason {
			t.Errorf("record %s says %q (found %v), want %q", u, r.Error, ok, reason)
		}
	}
	for _, u := range exp.NoIndex {
		if r, ok := statusOf(u); !ok || r.Status != contracts.Failed {
			t.Errorf("noindex record %s = %q (found %v), want failed (excluded)", u, r.Status, ok)
		}
		if _, err := g.Backends.Search.Get(ctx, txindex.Key(id, u)); err == nil {
			t.Errorf("noindex page %s is in the search index", u)
		}
	}
	requested := map[string]int{}
	for _, r := range site.Requests() {
		requested[r.URL]++
	}
	for _, u := range exp.NeverFetched {
		if requested[u] > 0 {
			t.Errorf("%s was fetched %d times, must never be", u, requested[u])
		}
	}
	for _, u := range exp.Fetched {
		if requested[u] != 1 {
			t.Errorf("%s fetched %d times, want once", u, requested[u])
		}
	}
	// The start host's /sitemap.xml, which its robots.txt names too, is
	// tried once, and its 404 is no failure.
	for _, u := range exp.SitemapProbes {
		if r, ok := statusOf(u); !ok || r.Status != contracts.Sitemap || requested[u] != 1 {
			t.Errorf("sitemap probe %s = %q (found %v), fetched %d times; want status sitemap, fetched once", u, r.Status, ok, requested[u])
		}
	}
	for _, w := range exp.Words {
		if w.Field == "anchor" {
			continue // anchor text is indexed with the linking page's links, not its text
		}
		res, err := g.Backends.Search.Search(ctx, search.Query{Q: w.Word, CrawlID: id, Limit: 10})
		if err != nil {
			t.Fatalf("search %q: %v", w.Word, err)
		}
		var urls []string
		for _, h := range res.Hits {
			urls = append(urls, h.URL)
		}
		if !slices.Contains(urls, w.URL) {
			t.Errorf("search %q = %v, want it to find %s", w.Word, urls, w.URL)
		}
	}
	for _, w := range exp.Absent {
		res, err := g.Backends.Search.Search(ctx, search.Query{Q: w.Word, CrawlID: id, Limit: 10})
		if err != nil {
			t.Fatalf("search %q: %v", w.Word, err)
		}
		if res.Total != 0 {
			t.Errorf("search %q found %d hits, want none (page %s is not indexed)", w.Word, res.Total, w.URL)
		}
	}

	// The search API answers too.
	if len(exp.Words) > 0 {
		var sr contracts.SearchResponse
		q := url.Values{"q": {exp.Words[0].Word}, "crawl": {id}}
		if code := apiDo(t, http.MethodGet, api+"/api/v1/search?"+q.Encode(), nil, &sr); code != http.StatusOK || sr.Total == 0 {
			t.Errorf("GET /api/v1/search?%s = %d, %d hits", q.Encode(), code, sr.Total)
		}
	}
	// Every WARC segment holds many records.
	keys, err := g.Backends.Assets.List(ctx, "warc/")
	if err != nil || len(keys) == 0 {
		t.Errorf("asset list = %v, %v; want WARC segments", keys, err)
	}
	// The frontier report shows the loader's groups with their politeness.
	var rep contracts.FrontierReport
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code := apiDo(t, http.MethodGet, api+"/api/v1/frontier", nil, &rep); code != http.StatusOK {
			t.Fatalf("GET /api/v1/frontier = %d", code)
		}
		if len(rep.Loaders) == 1 && rep.Totals.Groups >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("frontier report = %+v, want one loader with the site's groups", rep.Totals)
		}
	}
	var groups struct {
		Groups []struct {
			Group   string   `json:"chg"`
			Fetches int64    `json:"fetches"`
			DelayMS *float64 `json:"delay_ms"`
			Why     string   `json:"why"`
			Budget  struct {
				TotalBudget *int64 `json:"total_budget"`
			} `json:"budget"`
			NextEligible *string  `json:"next_eligible"`
			LastFetchMS  *float64 `json:"last_fetch_ms"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(rep.Loaders[0].Report, &groups); err != nil {
		t.Fatal(err)
	}
	fetched := map[string]int64{}
	for _, g := range groups.Groups {
		fetched[g.Group] = g.Fetches
		if g.Fetches > 0 && g.Why == "" {
			t.Errorf("group %s reports no reason for its delay", g.Group)
		}
		// Human units: milliseconds, null for never and no limit. The
		// profile's politeness bounds the delay to 5..50 ms.
		if g.Fetches > 0 && (g.DelayMS == nil || *g.DelayMS < 5 || *g.DelayMS > 50 || g.LastFetchMS == nil) {
			t.Errorf("group %s: delay_ms %v, last_fetch_ms %v; want a delay of 5 to 50 ms and the last fetch's", g.Group, g.DelayMS, g.LastFetchMS)
		}
		if g.Budget.TotalBudget != nil {
			t.Errorf("group %s: total_budget %d, want null (no limit)", g.Group, *g.Budget.TotalBudget)
		}
		if g.NextEligible != nil && strings.HasPrefix(*g.NextEligible, "0001") {
			t.Errorf("group %s: next_eligible %s, want null for never", g.Group, *g.NextEligible)
		}
	}
	if fetched["www.example.test"] == 0 || fetched["other.test"] != 0 {
		t.Errorf("frontier report fetches = %v, want www.example.test > 0 and no other.test", fetched)
	}
	var list contracts.CrawlList
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls", nil, &list); code != http.StatusOK || len(list.Crawls) != 1 {
		t.Errorf("GET /api/v1/crawls = %d with %d crawls, want 1", code, len(list.Crawls))
	}
	return g
}

func TestInvalidProfilesAreRejectedWithTheField(t *testing.T) {
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	cases := []struct {
		name, body, field string
	}{
		{"no start urls", `{"max_depth":1}`, "start_urls"},
		{"ftp start url", `{"start_urls":["ftp://x.test/"]}`, "start_urls[0]"},
		{"second url bad", `{"start_urls":["http://a.test/","no thing"]}`, "start_urls[1]"},
		{"negative depth", `{"start_urls":["http://a.test/"],"max_depth":-1}`, "max_depth"},
		{"bad scope", `{"start_urls":["http://a.test/"],"scope":"planet"}`, "scope"},
		{"bad regex", `{"start_urls":["http://a.test/"],"crawl_must_match":"("}`, "crawl_must_match"},
		{"unknown field", `{"start_urls":["http://a.test/"],"depth":3}`, "depth"},
		{"wrong type", `{"start_urls":["http://a.test/"],"max_depth":"three"}`, "max_depth"},
		{"delays", `{"start_urls":["http://a.test/"],"politeness":{"min_delay_ms":500,"max_delay_ms":10,"delay_factor":1}}`, "politeness.max_delay_ms"},
		{"robots", `{"start_urls":["http://a.test/"],"politeness":{"robots":"sometimes"}}`, "politeness.robots"},
		{"priority", `{"start_urls":["http://a.test/"],"priority":12}`, "priority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(api+"/api/v1/crawls", "application/json", bytes.NewBufferString(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e contracts.ErrorResponse
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != http.StatusBadRequest || e.Field != tc.field {
				t.Errorf("POST %s = %d field %q (%s), want 400 field %q", tc.body, resp.StatusCode, e.Field, e.Error, tc.field)
			}
		})
	}
}

func TestUndecodableContractsAreDeadLetteredAndServicesKeepRunning(t *testing.T) {
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	cfg := testConfig(t, t.TempDir(), site.Resolve())
	g, api := startGrid(t, cfg)
	ctx := t.Context()
	n := cfg.Routing.ShardCount(cfg.Backends.Embedded())
	loaderQueue := routing.ShardQueue(3%n, n)
	for _, q := range []string{loaderQueue, contracts.QueueCrawler, contracts.QueueIndex} {
		bad := []queue.Message{{Body: []byte("{not json")}, {Body: []byte(`{"v":99}`)}}
		if err := g.Backends.Queue.Publish(ctx, q, bad...); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{loaderQueue, contracts.QueueCrawler, contracts.QueueIndex} {
		dlq := queue.DeadLetterQueue(q)
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := g.Backends.Queue.Len(ctx, dlq)
			if err != nil {
				t.Fatal(err)
			}
			if n == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s holds %d messages, want 2", dlq, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The services still crawl.
	var created contracts.CreateCrawlResponse
	p := contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: 1, Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 1}}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	if st := waitFinished(t, api, created.CrawlID, time.Minute); st.State != contracts.CrawlFinished || st.Documents == 0 {
		t.Fatalf("crawl after poison = %s with %d documents", st.State, st.Documents)
	}
	// Dead letters keep the reason.
	ch, err := g.Backends.Queue.Consume(ctx, queue.DeadLetterQueue(loaderQueue), queue.ConsumeOptions{Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	d := <-ch
	if d.Headers()[queue.HeaderReason] == "" {
		t.Errorf("dead letter without reason: %v", d.Headers())
	}
	_ = d.Ack(ctx)
}

func TestCancelCrawl(t *testing.T) {
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	_, api := startGrid(t, testConfig(t, t.TempDir(), site.Resolve()))
	var created contracts.CreateCrawlResponse
	p := contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: 6, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 300, MaxDelayMS: 300, DelayFactor: 1}}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	var st contracts.CrawlStatus
	if code := apiDo(t, http.MethodDelete, api+"/api/v1/crawls/"+created.CrawlID, nil, &st); code != http.StatusOK {
		t.Fatalf("DELETE crawl = %d", code)
	}
	if st.State != contracts.CrawlCancelled {
		t.Errorf("cancelled crawl = %s, want cancelled", st.State)
	}
	// Work already in flight settles as failed; nothing stays pending.
	deadline := time.Now().Add(20 * time.Second)
	for st.Pending != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("cancelled crawl still has %d pending records", st.Pending)
		}
		time.Sleep(50 * time.Millisecond)
		apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID, nil, &st)
	}
	if st.State != contracts.CrawlCancelled {
		t.Errorf("cancelled crawl became %s", st.State)
	}
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("GET unknown crawl = %d, want 404", code)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// recordLister is what crawlRecords needs of a transaction index.
type recordLister interface {
	List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]txindex.Record, error)
}

// crawlRecords returns every record of crawl id in status ("": any), in
// key order.
func crawlRecords(t testing.TB, tx recordLister, id string, status contracts.Status) []txindex.Record {
	t.Helper()
	var out []txindex.Record
	for after := ""; ; {
		recs, err := tx.List(t.Context(), id, status, after, 1000)
		if err != nil {
			t.Fatalf("list the records of %s: %v", id, err)
		}
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
		after = recs[len(recs)-1].Key
	}
}
