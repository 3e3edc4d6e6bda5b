package grid

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// TestSitemapsEndToEnd crawls websim's sitemap site through the grid with
// sitemaps on (the default): pages reachable only through the start host's
// /sitemap.xml and through a gzipped sitemap index named by robots.txt are
// crawled, an oversized sitemap is cut at 50,000 entries with the reason on
// its record, sitemaps and entries on another host are not fetched (host
// scope), a robots-disallowed entry is recorded but never fetched, lastmod
// is on the records (and in the URL record API), and nothing is fetched
// twice. The expectations come from websim's oracle, not from the crawl.
func TestSitemapsEndToEnd(t *testing.T) {
	site := websim.NewSitemapSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	exp := site.Expect()
	g, api := startGrid(t, testConfig(t, t.TempDir(), site.Resolve()))

	profile := contracts.Profile{
		StartURLs: []string{site.StartURL()}, MaxDepth: 1, Scope: contracts.ScopeHost,
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey},
	}
	id := crawlToEnd(t, api, profile, 3*time.Minute)

	ctx := t.Context()
	get := func(u string) txindex.Record {
		t.Helper()
		r, err := g.Backends.Tx.Get(ctx, txindex.Key(id, u))
		if err != nil {
			t.Errorf("record of %s: %v", u, err)
		}
		return r
	}
	for _, u := range exp.Indexed {
		if r := get(u); r.Status != contracts.Indexed || r.Sitemap != "" {
			t.Errorf("record %s = %s (sitemap %q, reason %q), want indexed page", u, r.Status, r.Sitemap, r.Error)
		}
	}
	for _, u := range exp.Sitemaps {
		wantKind := txindex.SitemapFile
		if strings.HasSuffix(u, "/sitemap.xml") {
			wantKind = txindex.SitemapProbe
		}
		if r := get(u); r.Status != contracts.Sitemap || r.Sitemap != wantKind || r.HTTPStatus != http.StatusOK {
			t.Errorf("record %s = %s (sitemap %q, http %d, reason %q), want sitemap %q read with 200", u, r.Status, r.Sitemap, r.HTTPStatus, r.Error, wantKind)
		}
	}
	for _, u := range exp.RobotsDenied {
		if r := get(u); r.Status != contracts.Failed || r.Error != "robots.txt disallowed" {
			t.Errorf("record %s = %s (%q), want failed: robots.txt disallowed", u, r.Status, r.Error)
		}
	}
	if r := get(exp.Cut); !strings.Contains(r.Error, "cut: lists more than 50000 entries: the first 50000 kept") {
		t.Errorf("record of the oversized sitemap %s has reason %q, want the 50,000-entry cut", exp.Cut, r.Error)
	}
	for u, want := range exp.Lastmod {
		if r := get(u); r.Lastmod == nil || !r.Lastmod.Equal(want) {
			t.Errorf("record %s lastmod = %v, want %v", u, r.Lastmod, want)
		}
		var rec struct {
			Lastmod *time.Time `json:"lastmod"`
		}
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/urls?url="+url.QueryEscape(u), nil, &rec); code != http.StatusOK || rec.Lastmod == nil || !rec.Lastmod.Equal(want) {
			t.Errorf("URL record API of %s = %d, lastmod %v; want 200, %v", u, code, rec.Lastmod, want)
		}
	}

	var st contracts.CrawlStatus
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
		t.Fatalf("GET crawl = %d", code)
	}
	want := map[contracts.Status]int64{contracts.Indexed: int64(len(exp.Indexed)), contracts.Sitemap: int64(len(exp.Sitemaps)),
		contracts.Failed: int64(len(exp.RobotsDenied))}
	for s, n := range st.Counts {
		if n != want[s] {
			t.Errorf("crawl counts %s = %d, want %d (all counts %v)", s, n, want[s], st.Counts)
		}
	}
	if st.Documents != int64(len(exp.Indexed)) {
		t.Errorf("documents = %d, want %d", st.Documents, len(exp.Indexed))
	}

	requested := map[string]int{}
	for _, r := range site.Requests() {
		if r.Path != "/robots.txt" {
			requested[r.URL]++
		}
	}
	for _, u := range exp.Fetched {
		if requested[u] != 1 {
			t.Errorf("%s fetched %d times, want once", u, requested[u])
		}
		delete(requested, u)
	}
	for _, u := range exp.NeverFetched {
		if requested[u] > 0 {
			t.Errorf("%s fetched %d times, must never be", u, requested[u])
		}
	}
	for u, n := range requested {
		t.Errorf("%s fetched %d times, not expected at all", u, n)
	}
}

// TestMissingSitemapIsNoFailure crawls a site without sitemap: its
// /sitemap.xml answers 404, and the probe ends in status sitemap with the
// reason, so the crawl finishes with no failed record; with sitemaps off
// nothing but the page is requested.
func TestMissingSitemapIsNoFailure(t *testing.T) {
	mux := http.NewServeMux()
	var mu sync.Mutex
	requested := map[string]int{}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requested[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><head><title>home</title></head><body>home</body></html>"))
		default:
			http.NotFound(w, r)
		}
	})
	start := serveSite(t, "nomap.example.test", mux)
	g, api := startGrid(t, testConfig(t, t.TempDir(), "nomap.example.test=127.0.0.1"))
	for _, tc := range []struct {
		name     string
		sitemaps *bool
		want     map[contracts.Status]int64
		probe    bool
	}{
		{"on by default", nil, map[contracts.Status]int64{contracts.Indexed: 1, contracts.Sitemap: 1}, true},
		{"off", new(bool), map[contracts.Status]int64{contracts.Indexed: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			clear(requested)
			mu.Unlock()
			p := contracts.Profile{StartURLs: []string{start}, MaxDepth: 1, Sitemaps: tc.sitemaps,
				Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey}}
			id := crawlToEnd(t, api, p, time.Minute)
			var st contracts.CrawlStatus
			if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
				t.Fatalf("GET crawl = %d", code)
			}
			for s, n := range st.Counts {
				if n != tc.want[s] {
					t.Errorf("crawl counts %s = %d, want %d (all counts %v)", s, n, tc.want[s], st.Counts)
				}
			}
			probe := strings.TrimSuffix(start, "/") + "/sitemap.xml"
			r, err := g.Backends.Tx.Get(t.Context(), txindex.Key(id, probe))
			switch {
			case !tc.probe && err == nil:
				t.Errorf("sitemaps off: %s has a record (%s)", probe, r.Status)
			case tc.probe && (err != nil || r.Status != contracts.Sitemap || r.HTTPStatus != http.StatusNotFound ||
				r.Error != "no sitemap at this address (http 404)"):
				t.Errorf("probe %s = %s, http %d, reason %q (%v); want sitemap, 404, no sitemap at this address", probe, r.Status, r.HTTPStatus, r.Error, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if n := requested["/sitemap.xml"]; tc.probe && n != 1 || !tc.probe && n != 0 {
				t.Errorf("/sitemap.xml requested %d times, want %v", n, tc.probe)
			}
		})
	}
}

// TestBrokenSitemapProbeStillReadsRobotsSitemaps: a start host whose
// /sitemap.xml answers 500 has its probe failed with the status, and the
// sitemap its robots.txt names is read all the same.
func TestBrokenSitemapProbeStillReadsRobotsSitemaps(t *testing.T) {
	const host = "brokenmap.example.test"
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			_, _ = w.Write([]byte("User-agent: *\nAllow: /\nSitemap: " + base + "real.xml\n"))
		case "/", "/only-listed":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><head><title>page</title></head><body>page</body></html>"))
		case "/sitemap.xml":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/real.xml":
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte(`<urlset><url><loc>` + base + `only-listed</loc></url></urlset>`))
		default:
			http.NotFound(w, r)
		}
	})
	base = serveSite(t, host, mux)
	g, api := startGrid(t, testConfig(t, t.TempDir(), host+"=127.0.0.1"))
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{base}, MaxDepth: 1,
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey}}, time.Minute)
	for _, tc := range []struct {
		path   string
		status contracts.Status
		reason string
	}{
		{"sitemap.xml", contracts.Failed, "http 500"},
		{"real.xml", contracts.Sitemap, "sitemap: 1 entries, 1 followed"},
		{"only-listed", contracts.Indexed, ""},
	} {
		r, err := g.Backends.Tx.Get(t.Context(), txindex.Key(id, base+tc.path))
		if err != nil || r.Status != tc.status || r.Error != tc.reason {
			t.Errorf("record %s = %s %q (%v), want %s %q", tc.path, r.Status, r.Error, err, tc.status, tc.reason)
		}
	}
}
