package grid

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// redirectSite serves redirect chains and loops, and counts the requests
// of each URL:
//
//	/chain?n=1 → /chain?n=2 → … → /chain?n=13 (12 redirects), a page
//	/loop/a → /loop/b → /loop/a
//	/self → /./self? (the same URL once normalized)
//	/ring/1 → /ring/2 → /ring/3 → /ring/4 → /ring/2
//	/into → /loop/a (a start URL already: no loop of its own)
type redirectSite struct {
	mu   sync.Mutex
	seen map[string]int
}

func (s *redirectSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen[r.URL.RequestURI()]++
	s.mu.Unlock()
	redirect := func(to string) { http.Redirect(w, r, to, http.StatusFound) }
	switch p := r.URL.Path; {
	case p == "/chain":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n <= 12 {
			redirect("/chain?n=" + strconv.Itoa(n+1))
			return
		}
		fmt.Fprint(w, "<html><title>end of the chain</title><body>zqxchainend</body></html>")
	case p == "/loop/a":
		redirect("/loop/b")
	case p == "/loop/b":
		redirect("/loop/a")
	case p == "/self":
		w.Header().Set("Location", "/./self?")
		w.WriteHeader(http.StatusMovedPermanently)
	case strings.HasPrefix(p, "/ring/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(p, "/ring/"))
		if n == 4 {
			n = 1
		}
		redirect("/ring/" + strconv.Itoa(n+1))
	case p == "/into":
		redirect("/loop/a")
	default:
		http.NotFound(w, r)
	}
}

// TestRedirectChainsEndFailed crawls a redirect chain longer than
// GRIDCRAWL_MAX_REDIRECTS (10) and redirect loops: each ends in a failed
// record saying why, on the hop whose redirect was not followed, the target
// over the limit is never requested, and the failure reasons report shows
// them.
func TestRedirectChainsEndFailed(t *testing.T) {
	site := &redirectSite{seen: map[string]int{}}
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	cfg := testConfig(t, t.TempDir(), "")
	if cfg.Crawler.MaxRedirects != 10 {
		t.Fatalf("GRIDCRAWL_MAX_REDIRECTS = %d, want the default 10", cfg.Crawler.MaxRedirects)
	}
	g, api := startGrid(t, cfg)
	u := func(path string) string { return srv.URL + path }
	starts := []string{u("/chain?n=1"), u("/loop/a"), u("/self"), u("/ring/1"), u("/into")}
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: starts, MaxDepth: 0, Scope: contracts.ScopeHost,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 0.1, Robots: contracts.RobotsIgnore}}, 2*time.Minute)

	type outcome struct {
		Status contracts.Status
		Error  string
	}
	want := map[string]outcome{
		u("/chain?n=11"): {contracts.Failed, "too many redirects (10)"},
		u("/loop/a"):     {contracts.Redirected, "to " + u("/loop/b")},
		u("/loop/b"):     {contracts.Failed, "redirect loop: back to " + u("/loop/a") + " after 2 hops"},
		u("/self"):       {contracts.Failed, "redirect loop: back to " + u("/self") + " after 1 hop"},
		u("/ring/1"):     {contracts.Redirected, "to " + u("/ring/2")},
		u("/ring/2"):     {contracts.Redirected, "to " + u("/ring/3")},
		u("/ring/3"):     {contracts.Redirected, "to " + u("/ring/4")},
		u("/ring/4"):     {contracts.Failed, "redirect loop: back to " + u("/ring/2") + " after 3 hops"},
		u("/into"):       {contracts.Redirected, "to " + u("/loop/a")},
	}
	for n := 1; n <= 10; n++ {
		want[u("/chain?n="+strconv.Itoa(n))] = outcome{contracts.Redirected, "to " + u("/chain?n="+strconv.Itoa(n+1))}
	}
	got := map[string]outcome{}
	for _, st := range contracts.Statuses {
		rs, err := g.Backends.Tx.List(t.Context(), id, st, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Sitemap == "" {
				got[r.URL] = outcome{r.Status, r.Error}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if n := site.seen["/chain?n=12"]; n != 0 {
		t.Errorf("/chain?n=12, over the limit, was requested %d times, want never", n)
	}
	var st contracts.CrawlStatus
	apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st)
	if st.Counts[contracts.Failed] != 4 || st.Counts[contracts.Redirected] != 15 {
		t.Errorf("crawl status counts %v, want 4 failed and 15 redirected", st.Counts)
	}
	var reasons contracts.Report[contracts.ReasonReportRow]
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/reports/failure-reasons", nil, &reasons); code != http.StatusOK {
		t.Fatalf("GET reports/failure-reasons = %d", code)
	}
	rows := map[string][]string{}
	for _, r := range reasons.Rows {
		if r.Reason != nil {
			rows[*r.Reason] = r.SampleURLs
		}
	}
	if s := rows["too many redirects (10)"]; len(s) != 1 || s[0] != u("/chain?n=11") {
		t.Errorf("failure reasons report %v, want \"too many redirects (10)\" on %s", rows, u("/chain?n=11"))
	}
}
