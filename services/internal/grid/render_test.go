package grid

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// renderCrawl crawls a new ScriptSite of items item pages with render mode
// and returns the site, its base URL and the crawl's id.
func renderCrawl(t *testing.T, g *Grid, api, mode string, items int) (*websim.ScriptSite, string, string) {
	t.Helper()
	site := websim.NewScriptSite(items)
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	p := contracts.Profile{
		StartURLs: []string{srv.URL + "/"}, MaxDepth: 20, Render: mode,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 20, DelayFactor: 0.1, Robots: contracts.RobotsObey},
	}
	return site, srv.URL, crawlToEnd(t, api, p, 3*time.Minute)
}

// indexedPaths returns the paths of the crawl's indexed URLs under base.
func indexedPaths(t *testing.T, g *Grid, id, base string) map[string]txindex.Record {
	t.Helper()
	out := map[string]txindex.Record{}
	recs, err := g.Backends.Tx.List(t.Context(), id, contracts.Indexed, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		out[strings.TrimPrefix(r.URL, base)] = r
	}
	return out
}

// found reports whether the crawl's search index finds token on the page
// at url.
func found(t *testing.T, g *Grid, id, token, url string) bool {
	t.Helper()
	res, err := g.Backends.Search.Search(t.Context(), search.Query{Q: token, CrawlID: id, Limit: 10})
	if err != nil {
		t.Fatalf("search %q: %v", token, err)
	}
	for _, h := range res.Hits {
		if h.URL == url {
			return true
		}
	}
	return false
}

// TestRenderModes crawls a site whose app pages exist only after scripts
// run (a JSON endpoint read by fetch(), links put into the DOM, a page
// reached only through a link a script makes) with render never, always
// and auto: always finds and indexes every page, never only the shell,
// auto the same as always while rendering no static page.
func TestRenderModes(t *testing.T) {
	t.Setenv("GRIDCRAWL_CHROMIUM", chromiumPath(t))
	cfg := testConfig(t, t.TempDir(), "")
	g, api := startGrid(t, cfg)
	const items = 6

	for _, mode := range []string{contracts.RenderNever, contracts.RenderAlways, contracts.RenderAuto} {
		t.Run(mode, func(t *testing.T) {
			site, base, id := renderCrawl(t, g, api, mode, items)
			got := indexedPaths(t, g, id, base)
			var want []string
			switch mode {
			case contracts.RenderNever:
				want = append(site.StaticPages(), site.ShellPages()...)
			default:
				want = append(site.StaticPages(), site.ScriptPages()...)
			}
			slices.Sort(want)
			have := make([]string, 0, len(got))
			for p := range got {
				have = append(have, p)
			}
			slices.Sort(have)
			if !slices.Equal(have, want) {
				t.Errorf("indexed %v, want %v", have, want)
			}
			// Each record says whether its page was rendered, and why.
			for p, r := range got {
				isScript := slices.Contains(site.ScriptPages(), p)
				var ok bool
				switch mode {
				case contracts.RenderNever:
					ok = r.Render == ""
				case contracts.RenderAlways:
					ok = r.Render == "always"
				case contracts.RenderAuto:
					ok = isScript == strings.HasPrefix(r.Render, "auto: ") && (isScript || r.Render == "")
				}
				if !ok {
					t.Errorf("%s: record's render %q with render %s", p, r.Render, mode)
				}
			}
			for _, p := range append(site.StaticPages(), site.ScriptPages()...) {
				isScript := slices.Contains(site.ScriptPages(), p)
				wantFound := !isScript || mode != contracts.RenderNever
				if f := found(t, g, id, site.Token(p), base+p); f != wantFound {
					t.Errorf("search %s for %s: found %v, want %v", p, site.Token(p), f, wantFound)
				}
			}
			// Auto renders the script pages only: the static pages'
			// stylesheet and logo, which only a browser asks for, are never
			// requested; always asks for them.
			switch css := site.Seen("/static/site.css"); mode {
			case contracts.RenderAuto, contracts.RenderNever:
				if css != 0 {
					t.Errorf("static stylesheet requested %d times: a static page was rendered", css)
				}
			case contracts.RenderAlways:
				if css == 0 {
					t.Error("static stylesheet never requested: the static pages were not rendered")
				}
			}
			if mode != contracts.RenderNever && site.Seen("/api/items.json") == 0 {
				t.Error("the app's JSON was never requested")
			}
			// Every path once: no page fetched twice, and what every page
			// loads (app.js, the stylesheets, the favicon) requested once
			// for the crawl, not once per page.
			for path, n := range site.Requests() {
				if n > 1 {
					t.Errorf("%s requested %d times", path, n)
				}
			}
			checkRenderedRecords(t, g, id, base, site, mode)
		})
	}
}

// checkRenderedRecords checks the WARC records of the crawl: every
// rendered page has its response, a conversion record of its DOM with the
// token, and a metadata record; the subresources have responses.
func checkRenderedRecords(t *testing.T, g *Grid, id, base string, site *websim.ScriptSite, mode string) {
	t.Helper()
	conversions := map[string]string{}
	responses := map[string]bool{}
	eachWARCRecord(t, g.Backends.Assets, func(rec warc.Record) {
		u := rec.Header.Get(warc.FieldTargetURI)
		if !strings.HasPrefix(u, base) {
			return
		}
		switch rec.Header.Get(warc.FieldType) {
		case warc.TypeConversion:
			conversions[strings.TrimPrefix(u, base)] = string(rec.Block)
		case warc.TypeResponse:
			responses[strings.TrimPrefix(u, base)] = true
		}
	})
	for _, p := range site.ScriptPages() {
		dom, ok := conversions[p]
		switch {
		case mode == contracts.RenderNever && ok:
			t.Errorf("%s has a rendered DOM with render never", p)
		case mode != contracts.RenderNever && !ok:
			t.Errorf("%s has no rendered DOM", p)
		case ok && !strings.Contains(dom, site.Token(p)):
			t.Errorf("%s: the rendered DOM lacks %s", p, site.Token(p))
		}
	}
	if mode != contracts.RenderNever {
		for _, p := range []string{"/app/app.js", "/api/items.json", "/app/app.css"} {
			if !responses[p] {
				t.Errorf("no response record of the subresource %s", p)
			}
		}
	}
}

// TestRenderWithoutBrowser: a loader that must render and has no browser
// fails the page with the reason, keeps its HTTP answer, and never falls
// back to indexing the answer unrendered.
func TestRenderWithoutBrowser(t *testing.T) {
	t.Setenv("GRIDCRAWL_CHROMIUM", "/nonexistent/chromium")
	cfg := testConfig(t, t.TempDir(), "")
	g, api := startGrid(t, cfg)
	site := websim.NewScriptSite(2)
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{srv.URL + "/app/", srv.URL + "/static/a.html"}, MaxDepth: 0,
		Render: contracts.RenderAuto}, time.Minute)
	failed, err := g.Backends.Tx.List(t.Context(), id, contracts.Failed, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].URL != srv.URL+"/app/" || !strings.HasPrefix(failed[0].Error, "render: no browser: ") ||
		failed[0].HTTPStatus != 200 {
		t.Errorf("failed records %+v, want /app/ alone, failed with render: no browser", failed)
	}
	// The static page needs no rendering under auto: indexed.
	if got := indexedPaths(t, g, id, srv.URL); len(got) != 1 || got["/static/a.html"].URL == "" {
		t.Errorf("indexed %v, want /static/a.html alone", got)
	}
}

// TestRenderedDOMFromWARC: without the in-process handoff the crawler reads
// a rendered page's DOM back from its conversion record.
func TestRenderedDOMFromWARC(t *testing.T) {
	t.Setenv("GRIDCRAWL_CHROMIUM", chromiumPath(t))
	t.Setenv("GRIDCRAWL_HANDOFF_BYTES", "0")
	cfg := testConfig(t, t.TempDir(), "")
	g, api := startGrid(t, cfg)
	site, base, id := renderCrawl(t, g, api, contracts.RenderAlways, 2)
	for _, p := range site.ScriptPages() {
		if !found(t, g, id, site.Token(p), base+p) {
			t.Errorf("%s: %s not found: the DOM was not parsed", p, site.Token(p))
		}
	}
}
