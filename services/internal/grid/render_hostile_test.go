package grid

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics/metricstest"
)

// TestRenderHostilePages renders pages that attack the browser: one that
// loops forever, one that starts 10,000 requests, one that allocates until
// its tab dies, and pages whose scripts reach for an address outside the
// allowed networks (a navigation, a fetch, an image, a frame). The private
// address is this machine's 127.0.0.2, outside GRIDCRAWL_ALLOW_NETS
// (127.0.0.1/32), served by the test: it must see no request. Each page
// ends failed or cut with a true reason, and the loader goes on to crawl
// an ordinary page after them.
func TestRenderHostilePages(t *testing.T) {
	t.Setenv("GRIDCRAWL_CHROMIUM", chromiumPath(t))
	var private atomic.Int64
	pln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	psrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		private.Add(1)
		io.WriteString(w, "private")
	})}
	go psrv.Serve(pln)
	t.Cleanup(func() { psrv.Close() })
	privURL := "http://" + pln.Addr().String()

	site := websim.NewScriptSite(2)
	mux := http.NewServeMux()
	mux.Handle("/", site)
	reach := map[string]string{
		"/reach/navigate": `<script>location.href = '` + privURL + `/navigated';</script>`,
		"/reach/embed": `<img src="` + privURL + `/img.png"><script>fetch('` + privURL + `/fetched').catch(() => {});` +
			`fetch('http://169.254.169.254/latest/meta-data/').catch(() => {});</script>`,
		"/reach/frame": `<iframe src="` + privURL + `/framed"></iframe>`,
	}
	for path, body := range reach {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<!doctype html><html><head><title>reach</title></head><body><p>zqxreachx %s</p>%s</body></html>", path, body)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	t.Setenv("GRIDCRAWL_RENDER_TIMEOUT", "4s")
	t.Setenv("GRIDCRAWL_RENDER_MAX_REQUESTS", "50")
	t.Setenv("GRIDCRAWL_BROWSER_JS_HEAP_MB", "128")
	cfg := testConfig(t, t.TempDir(), "")
	cfg.Loader.AllowNets = "127.0.0.1/32"
	g, api := startGrid(t, cfg)

	var starts []string
	for _, p := range site.HostilePages() {
		starts = append(starts, srv.URL+p)
	}
	for p := range reach {
		starts = append(starts, srv.URL+p)
	}
	// The ordinary page last: the loader still works after the others.
	starts = append(starts, srv.URL+"/static/a.html")
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: starts, MaxDepth: 0, Scope: contracts.ScopeAny, Render: contracts.RenderAlways,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 0.1, Robots: contracts.RobotsObey}}, 4*time.Minute)

	recs := map[string]string{} // path (or URL off the site) -> status, render, error
	for _, st := range []contracts.Status{contracts.Indexed, contracts.Failed} {
		rs, err := g.Backends.Tx.List(t.Context(), id, st, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			recs[strings.TrimPrefix(r.URL, srv.URL)] = string(r.Status) + " | " + r.Render + " | " + r.Error
		}
	}
	want := map[string][]string{
		"/hostile/loop":     {"indexed", "cut: time: still loading after 4s"},
		"/hostile/flood":    {"indexed", "cut: requests: the page's limit of 50 reached"},
		"/hostile/oom":      {"failed", "render: the tab crashed"},
		"/hostile/private":  {"indexed", "cut: navigation: scripts tried to leave the page"},
		"/hostile/private2": {"indexed", "refused: address not allowed"},
		"/reach/navigate":   {"indexed", "cut: navigation: scripts tried to leave the page"},
		"/reach/embed":      {"indexed", "refused: address not allowed"},
		"/reach/frame":      {"indexed", "refused: address not allowed"},
		"/static/a.html":    {"indexed", "| always |"},
		// Script redirects are followed like redirects, and refused there.
		privURL + "/navigated":       {"failed", "address not allowed"},
		"http://10.255.255.1/secret": {"failed", "address not allowed"},
	}
	for path, parts := range want {
		got, ok := recs[path]
		if !ok {
			t.Errorf("%s: no indexed or failed record", path)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(got, p) {
				t.Errorf("%s: record %q, want it to say %q", path, got, p)
			}
		}
	}
	if n := private.Load(); n != 0 {
		t.Errorf("the address outside the allowed networks got %d requests", n)
	}
	if n := site.Seen("/hostile/flood/r/"); n > 50 {
		t.Errorf("the flood page made %d requests, over the page's limit of 50", n)
	}
	// The cuts are in the WARC metadata records too.
	cuts := 0
	eachWARCRecord(t, g.Backends.Assets, func(rec warc.Record) {
		if rec.Header.Get(warc.FieldType) == warc.TypeMetadata && strings.Contains(string(rec.Block), "render-cut: ") {
			cuts++
		}
	})
	if cuts < 6 {
		t.Errorf("%d metadata records with a render-cut, want one per cut page (6)", cuts)
	}
	s := metricstest.Get(t, api+"/metrics", "")
	if n, _ := s.Sum("gridcrawl_loader_browser_escaped_requests_total", nil); n != 0 {
		t.Errorf("%v requests escaped the loader's interception", n)
	}
	if n, _ := s.Sum("gridcrawl_loader_rendered_pages_total", map[string]string{"result": "failed"}); n != 1 {
		t.Errorf("rendered_pages_total{failed} = %v, want 1 (the page that allocates)", n)
	}
}
