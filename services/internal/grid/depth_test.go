package grid

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// depthSite is a small web whose shortest path to some pages is found after
// a longer one: the short route starts with a page whose answer is held
// back until the pages at the end of the long route have been parsed.
type depthSite struct {
	links     map[string][]string // page → links, as absolute URLs
	redirects map[string]string   // page → Location
	held      string              // the page whose answer waits
	waitFor   []string            // pages held waits for
	port      string

	mu      sync.Mutex
	settled func(url string) bool // set once the crawl runs
}

const depthZone = ".depth.test"

// newDepthSite serves this graph (every host in depthZone; MaxDepth 4):
//
//	www/ → a/1 → a/2 → a/3 → x/x, x/x2      (x/x and x/x2 found at depth 4)
//	www/ → s/slow → x/x, r/go ⇒ x/x2         (found at depth 2; ⇒ redirect)
//	x/x → x/y → x/z → x/w;  x/x2 → x/y2 → x/z2 → x/w2
//
// s/slow answers only after x/x and x/x2 were fetched and parsed at depth 4,
// where their links are too deep to follow: the shorter path must lower
// pages already parsed and have their links followed.
func newDepthSite(t *testing.T) *depthSite {
	t.Helper()
	s := &depthSite{links: map[string][]string{}, redirects: map[string]string{}}
	srv := httptest.NewUnstartedServer(s)
	srv.Start()
	t.Cleanup(srv.Close)
	_, s.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	u := s.url
	s.links = map[string][]string{
		u("www", "/"):   {u("a", "/1"), u("s", "/slow")},
		u("a", "/1"):    {u("a", "/2")},
		u("a", "/2"):    {u("a", "/3")},
		u("a", "/3"):    {u("x", "/x"), u("x", "/x2")},
		u("s", "/slow"): {u("x", "/x"), u("r", "/go")},
		u("x", "/x"):    {u("x", "/y")},
		u("x", "/y"):    {u("x", "/z")},
		u("x", "/z"):    {u("x", "/w")},
		u("x", "/w"):    nil,
		u("x", "/x2"):   {u("x", "/y2")},
		u("x", "/y2"):   {u("x", "/z2")},
		u("x", "/z2"):   {u("x", "/w2")},
		u("x", "/w2"):   nil,
	}
	s.redirects[u("r", "/go")] = u("x", "/x2")
	s.held = u("s", "/slow")
	s.waitFor = []string{u("x", "/x"), u("x", "/x2")}
	return s
}

func (s *depthSite) url(host, path string) string {
	return "http://" + host + depthZone + ":" + s.port + path
}

func (s *depthSite) resolve() string { return "*" + depthZone + "=127.0.0.1" }

func (s *depthSite) start() string { return s.url("www", "/") }

// waitSettled waits until the pages held waits for are settled (parsed to a
// terminal status), or 20 seconds (a broken crawl must not hang the test);
// it reports false when the request is gone.
func (s *depthSite) waitSettled(ctx context.Context) bool {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		settled := s.settled
		s.mu.Unlock()
		done := settled != nil
		for _, p := range s.waitFor {
			done = done && settled(p)
		}
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

func (s *depthSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u := "http://" + r.Host + r.URL.Path
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	if u == s.held && !s.waitSettled(r.Context()) {
		return
	}
	if loc, ok := s.redirects[u]; ok {
		http.Redirect(w, r, loc, http.StatusMovedPermanently)
		return
	}
	links, ok := s.links[u]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s</title></head><body><p>page %s</p>", r.URL.Path, r.URL.Path)
	for _, l := range links {
		fmt.Fprintf(&b, `<a href="%s">%s</a> `, l, l)
	}
	b.WriteString("</body></html>")
	_, _ = w.Write([]byte(b.String()))
}

// place is where a URL lies from the start: its depth and the redirects
// at the end of its path.
type place struct{ Depth, Hops int }

// expect computes, independently of the crawler, where every URL a crawl to
// maxDepth records lies on its shortest path: breadth first over the link
// graph, a redirect target keeping the depth of the URL that redirected to
// it with one hop more.
func (s *depthSite) expect(maxDepth int) map[string]place {
	at := map[string]place{s.start(): {}}
	queue := []string{s.start()}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		from := at[u]
		next, to := s.links[u], place{Depth: from.Depth + 1}
		if loc, ok := s.redirects[u]; ok {
			next, to = []string{loc}, place{Depth: from.Depth, Hops: from.Hops + 1}
		}
		for _, l := range next {
			if _, seen := at[l]; seen || to.Depth > maxDepth {
				continue
			}
			at[l] = to
			if to.Depth == from.Depth {
				queue = append([]string{l}, queue...) // same depth: before deeper ones
			} else {
				queue = append(queue, l)
			}
		}
	}
	return at
}

// TestDepthIsShortestPath crawls a site where the shortest path to two
// pages (one behind a redirect) is found after a longer one, and checks
// every record's depth against a breadth-first walk of the site, so that
// the links of those pages are followed to the depth limit.
func TestDepthIsShortestPath(t *testing.T) {
	const maxDepth = 4
	site := newDepthSite(t)
	want := site.expect(maxDepth)
	g, api := startGrid(t, testConfig(t, t.TempDir(), site.resolve()))
	// Sitemaps off: the oracle is the link graph.
	p := contracts.Profile{StartURLs: []string{site.start()}, MaxDepth: maxDepth, Scope: contracts.ScopeDomain, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 0.01}}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	ctx := context.Background()
	site.mu.Lock()
	site.settled = func(u string) bool {
		r, err := g.Backends.Tx.Get(ctx, txindex.Key(created.CrawlID, u))
		return err == nil && r.Status.Terminal()
	}
	site.mu.Unlock()
	st := waitFinished(t, api, created.CrawlID, time.Minute)
	if st.State != contracts.CrawlFinished {
		t.Fatalf("crawl = %s, want finished", st.State)
	}
	got := map[string]place{}
	for _, r := range crawlRecords(t, g.Backends.Tx, created.CrawlID, "") {
		got[r.URL] = place{r.Depth, r.Hops}
		wantStatus := contracts.Indexed
		if _, ok := site.redirects[r.URL]; ok {
			wantStatus = contracts.Redirected
		}
		if r.Status != wantStatus {
			t.Errorf("record %s = %s (%s), want %s", r.URL, r.Status, r.Error, wantStatus)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record depths differ from the shortest paths (-want +got):\n%s", diff)
	}
	// Lowering a page's depth relinks it without indexing it again: every
	// page's document is written once.
	var urls []string
	for u := range want {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	for _, u := range urls {
		if _, ok := site.redirects[u]; ok {
			continue
		}
		key := txindex.Key(created.CrawlID, u)
		if _, err := g.Backends.Search.Get(ctx, key); err != nil {
			t.Errorf("document of %s: %v", u, err)
		}
		if n, err := g.Backends.Search.Writes(ctx, key); err != nil || n != 1 {
			t.Errorf("document of %s written %d times (%v), want once", u, n, err)
		}
	}
}
