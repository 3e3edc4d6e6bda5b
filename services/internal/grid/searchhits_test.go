package grid

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestSearchOneHitPerURL: after two crawls of one site, the API search,
// yacysearch.rss and grid search answer each URL once, with the second
// crawl's copy, and count URLs; all_crawls (--all-crawls) lists both
// crawls' copies. "/" and "/index.html" are two URLs, and two hits.
func TestSearchOneHitPerURL(t *testing.T) {
	const word = "zebrafishmarker"
	page := func(links ...string) cliPage {
		return cliPage{200, strings.Replace(html(links...), "some words", word+" words", 1), ""}
	}
	site := newCLISite(t, map[string]cliPage{
		"/":           page("/index.html", "/a.html"),
		"/index.html": page("/index.html", "/a.html"),
		"/a.html":     page("/"),
	})
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	profile := contracts.Profile{StartURLs: []string{site.url("/")}, MaxDepth: 1, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 1}}
	first := crawlToEnd(t, api, profile, time.Minute)
	second := crawlToEnd(t, api, profile, time.Minute)
	urls := []string{site.url("/"), site.url("/a.html"), site.url("/index.html")}

	// hitsOf maps each URL of hits to the crawls of its hits.
	hitsOf := func(hits []contracts.SearchHit) map[string][]string {
		m := map[string][]string{}
		for _, h := range hits {
			m[h.URL] = append(m[h.URL], h.CrawlID)
			slices.Sort(m[h.URL])
		}
		return m
	}
	newest, both := map[string][]string{}, map[string][]string{}
	for _, u := range urls {
		newest[u] = []string{second}
		both[u] = []string{first, second}
		slices.Sort(both[u])
	}

	var res contracts.SearchResponse
	if code := apiDo(t, http.MethodGet, api+"/api/v1/search?q="+word, nil, &res); code != http.StatusOK {
		t.Fatalf("GET /api/v1/search = %d", code)
	}
	if diff := cmp.Diff(newest, hitsOf(res.Hits)); diff != "" || res.Total != 3 {
		t.Errorf("GET /api/v1/search?q=%s: total %d, crawls by URL (-want +got):\n%s", word, res.Total, diff)
	}
	var paged []contracts.SearchHit
	for off := range 3 {
		var r contracts.SearchResponse
		apiDo(t, http.MethodGet, fmt.Sprintf("%s/api/v1/search?q=%s&limit=1&offset=%d", api, word, off), nil, &r)
		if r.Total != 3 {
			t.Errorf("GET /api/v1/search offset %d limit 1: total %d, want 3", off, r.Total)
		}
		paged = append(paged, r.Hits...)
	}
	if diff := cmp.Diff(newest, hitsOf(paged)); diff != "" {
		t.Errorf("GET /api/v1/search one hit a page: crawls by URL (-want +got):\n%s", diff)
	}
	res = contracts.SearchResponse{}
	if code := apiDo(t, http.MethodGet, api+"/api/v1/search?all_crawls=true&q="+word, nil, &res); code != http.StatusOK {
		t.Fatalf("GET /api/v1/search?all_crawls=true = %d", code)
	}
	if diff := cmp.Diff(both, hitsOf(res.Hits)); diff != "" || res.Total != 6 {
		t.Errorf("GET /api/v1/search?all_crawls=true&q=%s: total %d, crawls by URL (-want +got):\n%s", word, res.Total, diff)
	}
	var bad contracts.ErrorResponse
	if code := apiDo(t, http.MethodGet, api+"/api/v1/search?all_crawls=maybe&q="+word, nil, &bad); code != http.StatusBadRequest || bad.Field != "all_crawls" {
		t.Errorf("GET /api/v1/search?all_crawls=maybe = %d %+v, want 400 naming all_crawls", code, bad)
	}

	rss := func(query string) (int64, []string) {
		t.Helper()
		resp, err := http.Get(api + "/yacysearch.rss?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			Channel struct {
				Total int64 `xml:"totalResults"`
				Items []struct {
					Link string `xml:"link"`
				} `xml:"item"`
			} `xml:"channel"`
		}
		if err := xml.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatalf("GET /yacysearch.rss?%s: %v", query, err)
		}
		var links []string
		for _, it := range doc.Channel.Items {
			links = append(links, it.Link)
		}
		slices.Sort(links)
		return doc.Channel.Total, links
	}
	if total, links := rss("query=" + word); total != 3 || !slices.Equal(links, urls) {
		t.Errorf("yacysearch.rss: total %d, links %v; want 3, %v", total, links, urls)
	}
	if total, links := rss(url.Values{"query": {word}, "all_crawls": {"true"}}.Encode()); total != 6 || len(links) != 6 {
		t.Errorf("yacysearch.rss with all_crawls: total %d, links %v; want 6, each of %v twice", total, links, urls)
	}

	code, stdout, stderr := runCLI(t.Context(), "search", "--api", api, word)
	if code != 0 || !strings.HasPrefix(stdout, fmt.Sprintf("3 results for %q\n", word)) {
		t.Fatalf("grid search = %d, stdout %q, stderr %q; want 3 results", code, stdout, stderr)
	}
	for _, u := range urls {
		if n := strings.Count(stdout, "    "+u+"\n"); n != 1 {
			t.Errorf("grid search lists %s %d times, want once:\n%s", u, n, stdout)
		}
	}
	code, stdout, stderr = runCLI(t.Context(), "search", "--api", api, "--all-crawls", word)
	if code != 0 || !strings.HasPrefix(stdout, fmt.Sprintf("6 results for %q\n", word)) {
		t.Fatalf("grid search --all-crawls = %d, stdout %q, stderr %q; want 6 results", code, stdout, stderr)
	}
	for _, u := range urls {
		if n := strings.Count(stdout, "    "+u+"\n"); n != 2 {
			t.Errorf("grid search --all-crawls lists %s %d times, want twice:\n%s", u, n, stdout)
		}
	}
	for _, id := range []string{first, second} {
		if n := strings.Count(stdout, "    crawl "+id+", fetched "); n != 3 {
			t.Errorf("grid search --all-crawls names crawl %s %d times, want 3:\n%s", id, n, stdout)
		}
	}
	code, stdout, stderr = runCLI(t.Context(), "search", "-h")
	if help := stdout + stderr; code != 0 || !strings.Contains(help, "-all-crawls") || !strings.Contains(help, "one hit per URL, the newest copy") {
		t.Errorf("grid search -h = %d, output %q; want the --all-crawls flag and what the default is", code, help)
	}
	code, stdout, _ = runCLI(t.Context(), "help")
	if !strings.Contains(stdout, "[--all-crawls]") {
		t.Errorf("grid help = %d, %q; want search's --all-crawls", code, stdout)
	}
}

// countingSite serves pages (as a cliSite does, without /block) and
// returns its base URL and a function that lists the paths requested so far,
// sorted.
func countingSite(t *testing.T, pages map[string]cliPage) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(p.status)
		fmt.Fprint(w, p.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(paths))
	}
}

// TestScopeHostKeepsToItsPort: scope "host" is the start URL's host and
// port, so a depth-2 crawl of a site on one port of 127.0.0.1 fetches
// nothing of a site on another port it links to; the hosts report (API and
// grid report) lists the two servers of a crawl of both apart.
func TestScopeHostKeepsToItsPort(t *testing.T) {
	b, bPaths := countingSite(t, map[string]cliPage{
		"/":  {200, html("/y"), ""},
		"/x": {200, html(), ""},
		"/y": {200, html(), ""},
	})
	a, aPaths := countingSite(t, map[string]cliPage{
		"/":  {200, html("/a", b+"/", b+"/x"), ""},
		"/a": {200, html("/"), ""},
	})
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	pol := contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 1, Robots: contracts.RobotsIgnore}
	crawlToEnd(t, api, contracts.Profile{StartURLs: []string{a + "/"}, MaxDepth: 2, Sitemaps: new(bool), Politeness: pol}, time.Minute)
	if got := bPaths(); len(got) != 0 {
		t.Errorf("a host-scope crawl of %s fetched %v from %s, want nothing", a+"/", got, b+"/")
	}
	if got, want := aPaths(), []string{"/", "/a"}; !slices.Equal(got, want) {
		t.Errorf("a host-scope crawl of %s fetched %v from it, want %v", a+"/", got, want)
	}

	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{a + "/", b + "/"}, MaxDepth: 1, Sitemaps: new(bool), Politeness: pol}, time.Minute)
	hostPort := func(base string) string { return strings.TrimPrefix(base, "http://") }
	// A: / and /a; B: / (a start URL), /x (linked from A's /), /y.
	want := []hostRowView{{hostPort(b), 3, 3}, {hostPort(a), 2, 2}}
	var rep struct {
		Rows []struct {
			Host    string `json:"host"`
			URLs    int64  `json:"urls"`
			Fetched int64  `json:"fetched"`
		} `json:"rows"`
	}
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/reports/hosts", nil, &rep); code != http.StatusOK {
		t.Fatalf("GET hosts report = %d", code)
	}
	var got []hostRowView
	for _, r := range rep.Rows {
		got = append(got, hostRowView{r.Host, r.URLs, r.Fetched})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hosts report of a crawl of %s and %s (-want +got):\n%s", a+"/", b+"/", diff)
	}
	code, stdout, stderr := runCLI(t.Context(), "report", "--api", api, "hosts", id)
	if code != 0 {
		t.Fatalf("grid report hosts = %d, stderr %q", code, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stdout, "\n"+w.Host+" ") {
			t.Errorf("grid report hosts has no row of %s:\n%s", w.Host, stdout)
		}
	}
}

// hostRowView is the part of a hosts report row the scope test compares.
type hostRowView struct {
	Host          string
	URLs, Fetched int64
}
