package grid

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// changingSite is a site whose pages change on a schedule of their own
// fetches: /a at every fetch, /d at its second only, /, /b and /c never; /c
// answers a request that carries its ETag with 304. It logs each request.
type changingSite struct {
	mu       sync.Mutex
	fetches  map[string]int
	requests []siteRequest
}

type siteRequest struct {
	path, ifNoneMatch string
	status            int
	at                time.Time
}

// filler pads the pages to a realistic size (about 20 KB of words, which
// compress like text), the same at every fetch.
var filler = func() string {
	words := strings.Fields("crawl archive page record index search host group delay budget segment revisit " +
		"digest schedule change fetch politeness frontier loader crawler document link text title summary " +
		"news report river mountain city garden music history science market weather travel kitchen")
	rnd := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < 20000 {
		b.WriteString("<p>")
		for range 12 {
			b.WriteString(words[rnd.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteString("</p>\n")
	}
	return b.String()
}()

var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}

func (s *changingSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.fetches[r.URL.Path]++
	n := s.fetches[r.URL.Path]
	s.mu.Unlock()
	status := http.StatusOK
	var body string
	switch r.URL.Path {
	case "/":
		body = `<a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a> <a href="/d">d</a> indexpage`
	case "/a":
		body = "alpha" + numberWords[min(n, 9)]
	case "/b":
		body = "bravostatic"
	case "/c":
		w.Header().Set("ETag", `"c1"`)
		body = "charliecached"
		if r.Header.Get("If-None-Match") == `"c1"` {
			status = http.StatusNotModified
		}
	case "/d":
		body = "deltaold"
		if n >= 2 {
			body = "deltanew"
		}
	default:
		status = http.StatusNotFound
	}
	s.mu.Lock()
	s.requests = append(s.requests, siteRequest{r.URL.Path, r.Header.Get("If-None-Match"), status, time.Now()})
	s.mu.Unlock()
	if status == http.StatusNotModified {
		w.WriteHeader(status)
		return
	}
	if status != http.StatusOK {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// A common header set: the revisit record keeps the response header.
	w.Header().Set("Server", "nginx/1.24.0")
	w.Header().Set("Cache-Control", "max-age=0, must-revalidate")
	w.Header().Set("Vary", "Accept-Encoding")
	fmt.Fprintf(w, "<html><head><title>%s</title></head><body><h1>%s</h1>%s%s</body></html>", r.URL.Path, body, body, filler)
}

// TestRecrawlContinuousCrawl runs a continuous crawl (a fixed 2 s interval)
// over the changing site for three rounds: the changed pages are re-indexed
// with their new text, the unchanged ones are stored as revisit records
// (identical payload digest, or server-not-modified for the 304) and are
// neither parsed nor indexed again, politeness holds across rounds, the
// crawl is up to date between rounds and never finishes, and search answers
// with the newest text.
func TestRecrawlContinuousCrawl(t *testing.T) {
	site := &changingSite{fetches: map[string]int{}}
	start := serveSite(t, "recrawl.test", site)
	cfg := testConfig(t, t.TempDir(), "recrawl.test=127.0.0.1")
	t.Setenv("GRIDCRAWL_DUE_CHECK_INTERVAL", "100ms")
	g, api := startGrid(t, cfg)
	do := func(method, path string, body, out any) int { return apiDo(t, method, api+path, body, out) }
	testRecrawl(t, site, start, do, g.Backends.Assets)
}

// TestGridModeRecrawl is TestRecrawlContinuousCrawl in grid mode: MCP, two
// loaders and two crawlers as processes on RabbitMQ, Elasticsearch (the due
// index) and MinIO.
func TestGridModeRecrawl(t *testing.T) {
	env, _ := ownVhost(t, realBackends(t))
	site := &changingSite{fetches: map[string]int{}}
	start := serveSite(t, "recrawl.test", site)
	c := newCluster(t, env, "recrawl.test=127.0.0.1")
	c.env = append(c.env, "GRIDCRAWL_DUE_CHECK_INTERVAL=100ms")
	c.startAll()
	set := c.openBackends(t)
	testRecrawl(t, site, start, c.do, set.Assets)
}

// testRecrawl runs the continuous crawl of TestRecrawlContinuousCrawl on the
// site served at start, through the API that do calls (paths from
// /api/v1), and reads the WARC segments from store.
func testRecrawl(t *testing.T, site *changingSite, start string, do func(method, path string, body, out any) int, store assets.Store) {
	base := strings.TrimSuffix(start, "/")
	const minDelay = 150 * time.Millisecond
	p := contracts.Profile{StartURLs: []string{start}, MaxDepth: 2, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: int(minDelay.Milliseconds()), MaxDelayMS: int(minDelay.Milliseconds()), DelayFactor: 0},
		Recrawl:    &contracts.Recrawl{Interval: "2s"}}
	var created contracts.CreateCrawlResponse
	if code := do(http.MethodPost, "/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	id := created.CrawlID
	pages := []string{"/", "/a", "/b", "/c", "/d"}

	// record returns the record of the page at path (zero while unknown).
	record := func(path string) contracts.URLRecord {
		var rec contracts.URLRecord
		q := url.Values{"url": {base + path}}
		if code := do(http.MethodGet, "/api/v1/crawls/"+id+"/urls?"+q.Encode(), nil, &rec); code != http.StatusOK {
			return contracts.URLRecord{}
		}
		return rec
	}
	// Three rounds: every page fetched three times and settled again.
	sawUpToDate := false
	deadline := time.Now().Add(90 * time.Second)
	for {
		var st contracts.CrawlStatus
		if code := do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
			t.Fatalf("GET crawl = %d", code)
		}
		switch st.State {
		case contracts.CrawlUpToDate:
			if st.Pending != 0 || st.Recrawl == nil || st.Recrawl.NextDue == nil {
				t.Errorf("up to date crawl: pending %d, recrawl %+v; want 0 pending and a next due time", st.Pending, st.Recrawl)
			}
			sawUpToDate = true
		case contracts.CrawlRunning:
		default:
			t.Fatalf("continuous crawl is %s", st.State)
		}
		done := st.State == contracts.CrawlUpToDate
		for _, path := range pages {
			rc := record(path).Recrawl
			done = done && rc != nil && rc.Changes+rc.Revisits >= 2
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range pages {
				t.Logf("%s: %+v, recrawl %+v", p, record(p), record(p).Recrawl)
			}
			t.Fatalf("three rounds not done after 90 s: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sawUpToDate {
		t.Error("the crawl was never seen up_to_date")
	}
	// Stop the rounds here, so that what follows reads a still site.
	if code := do(http.MethodPost, "/api/v1/crawls/"+id+"/pause", nil, nil); code != http.StatusOK && code != http.StatusNoContent {
		t.Fatalf("pause = %d", code)
	}

	// Per page: changes and revisits, and how often it was parsed.
	want := map[string]struct{ changes, revisits int }{
		"/": {0, 2}, "/a": {2, 0}, "/b": {0, 2}, "/c": {0, 2}, "/d": {1, 1},
	}
	for _, path := range pages {
		rec := record(path)
		rc := rec.Recrawl
		w := want[path]
		// A fourth round may have begun before the pause: count at least.
		if rc.Changes < w.changes || rc.Revisits < w.revisits || (w.changes == 0 && rc.Changes != 0) || (w.revisits == 0 && rc.Revisits != 0) {
			t.Errorf("%s: %d changes, %d revisits; want %d, %d", path, rc.Changes, rc.Revisits, w.changes, w.revisits)
		}
		parsed := 0
		for _, e := range rec.History {
			if e.Status == contracts.ToBeParsed {
				parsed++
			}
		}
		// A full history keeps its creation and the latest changes only: a
		// slow machine's extra rounds push the first ones out.
		if full := len(rec.History) >= txindex.MaxHistory; full && parsed > 1+rc.Changes || !full && parsed != 1+rc.Changes {
			t.Errorf("%s went to-be-parsed %d times with %d changes; want once plus once per change (history %v)", path, parsed, rc.Changes, rec.History)
		}
		if rec.Status != contracts.Indexed && rec.Status != contracts.ToBeLoaded {
			t.Errorf("%s is %s", path, rec.Status)
		}
		if rc.Digest == "" || rc.RecordID == "" {
			t.Errorf("%s: recrawl state without the stored response: %+v", path, rc)
		}
	}
	if rc := record("/c").Recrawl; rc.ETag != `"c1"` {
		t.Errorf("/c: etag %q, want \"c1\"", rc.ETag)
	}

	// The site saw conditional requests for /c after the first, answered 304.
	site.mu.Lock()
	requests := slices.Clone(site.requests)
	site.mu.Unlock()
	var cReqs []siteRequest
	for _, r := range requests {
		if r.path == "/c" {
			cReqs = append(cReqs, r)
		}
	}
	for i, r := range cReqs {
		if i > 0 && (r.ifNoneMatch != `"c1"` || r.status != http.StatusNotModified) {
			t.Errorf("request %d of /c: If-None-Match %q, status %d; want \"c1\", 304", i+1, r.ifNoneMatch, r.status)
		}
	}
	// Politeness across rounds: one host, one request at a time, at least
	// the minimum delay apart (robots.txt included).
	for i := 1; i < len(requests); i++ {
		if gap := requests[i].at.Sub(requests[i-1].at); gap < minDelay-20*time.Millisecond {
			t.Errorf("requests %s and %s only %v apart, want at least %v", requests[i-1].path, requests[i].path, gap, minDelay)
		}
	}

	// Search answers with the newest text, and only with it.
	search := func(word string) int64 {
		var sr contracts.SearchResponse
		q := url.Values{"q": {word}, "crawl": {id}}
		if code := do(http.MethodGet, "/api/v1/search?"+q.Encode(), nil, &sr); code != http.StatusOK {
			t.Fatalf("search %q = %d", word, code)
		}
		return sr.Total
	}
	aWord := "alpha" + numberWords[record("/a").Recrawl.Changes+1]
	for word, n := range map[string]int64{aWord: 1, "alphaone": 0, "deltanew": 1, "deltaold": 0, "bravostatic": 1, "charliecached": 1} {
		if got := search(word); got != n {
			t.Errorf("search %q: %d hits, want %d", word, got, n)
		}
	}

	// The WARC segments: one response per content, a revisit per unchanged
	// fetch, referring to the stored response.
	responses := map[string][]string{} // path → record ids
	type rv struct{ profile, refersTo, block string }
	revisits := map[string][]rv{}
	// stored sums the bytes the unchanged fetches cost in the segments:
	// each revisit record with its request record, gzipped member by
	// member as the loader stores them.
	var stored, unchanged, full, fetched int
	var lastRequest warc.Record
	// pair returns the gzipped size of a request and its response or
	// revisit record, stored as the loader stores them.
	pair := func(req, rec warc.Record) int {
		seg := warc.NewSegment(true)
		for _, r := range []warc.Record{req, rec} {
			if _, _, err := seg.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		return int(seg.Len())
	}
	eachWARCRecord(t, store, func(rec warc.Record) {
		path := strings.TrimPrefix(rec.Header.Get(warc.FieldTargetURI), base)
		switch rec.Header.Get(warc.FieldType) {
		case warc.TypeRequest:
			lastRequest = rec
		case warc.TypeResponse:
			responses[path] = append(responses[path], warc.RecordID(rec))
			full += pair(lastRequest, rec)
			fetched++
		case warc.TypeRevisit:
			revisits[path] = append(revisits[path], rv{rec.Header.Get(warc.FieldProfile), rec.Header.Get(warc.FieldRefersTo), string(rec.Block)})
			if rec.Header.Get(warc.FieldConcurrentTo) != warc.RecordID(lastRequest) {
				t.Errorf("%s: revisit record not after its request record", path)
			}
			stored += pair(lastRequest, rec)
			unchanged++
		}
	})
	// The figure: bytes stored per unchanged page (target under
	// 1 KB), against a stored page (pages of about 20 KB). Asserted
	// relative to the page, which is what revisits are for; the absolute
	// figure depends on the URL and the server's header, which the revisit
	// keeps.
	if unchanged == 0 || fetched == 0 || stored/unchanged*5 > full/fetched {
		t.Errorf("unchanged fetches store %d bytes each, a fetched page %d; want under a fifth", stored/max(unchanged, 1), full/max(fetched, 1))
	}
	t.Logf("bytes stored per unchanged page: %d (%d unchanged fetches, request and revisit records, gzipped); per fetched page: %d",
		stored/unchanged, unchanged, full/fetched)
	for _, path := range pages {
		rec := record(path)
		if got, w := len(responses[path]), 1+rec.Recrawl.Changes; got != w {
			t.Errorf("%s: %d response records, want %d", path, got, w)
		}
		if got, w := len(revisits[path]), rec.Recrawl.Revisits; got != w {
			t.Errorf("%s: %d revisit records, want %d", path, got, w)
		}
		for _, v := range revisits[path] {
			wantProfile := warc.ProfileIdenticalPayloadDigest
			if path == "/c" {
				wantProfile = warc.ProfileServerNotModified
				if !strings.HasPrefix(v.block, "HTTP/1.1 200") || !strings.Contains(v.block, "text/html") {
					t.Errorf("/c revisit block is not the stored header freshened: %q", v.block)
				}
			}
			if v.profile != wantProfile || !slices.Contains(responses[path], v.refersTo) {
				t.Errorf("%s revisit: profile %s, refers to %s; want %s, one of %v", path, v.profile, v.refersTo, wantProfile, responses[path])
			}
		}
	}
}
