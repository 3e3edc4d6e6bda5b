package websim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

func startWeb(t testing.TB, cfg WebConfig) *Web {
	t.Helper()
	w := NewWeb(cfg)
	if err := w.Start(); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(w.Close)
	return w
}

// get fetches u from w over HTTP.
func webGet(t *testing.T, c *http.Client, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatalf("NewRequest(%q): %v", u, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %q: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %q: %v", u, err)
	}
	return resp.StatusCode, body
}

// serve runs one request through the handler without a network.
func serve(w *Web, host, path string) *httptest.ResponseRecorder {
	r := &http.Request{Method: http.MethodGet, Host: host, URL: &url.URL{Path: path}, Header: http.Header{}}
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, r)
	return rec
}

// pageLinks returns the href of every <a> of body.
func pageLinks(t *testing.T, body []byte) []string {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(body))
	var out []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.StartTagToken:
			name, hasAttr := z.TagName()
			if atom.Lookup(name) != atom.A {
				continue
			}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if string(k) == "href" {
					out = append(out, string(v))
				}
			}
		}
	}
}

func TestWebConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   WebConfig
		want WebConfig
	}{
		{"zero", WebConfig{}, WebConfig{Hosts: 10, PagesPerHost: 100, LinksPerPage: 10, PageBytes: 4096}},
		{"cross clamped", WebConfig{Hosts: 2, PagesPerHost: 5, LinksPerPage: 3, CrossHostLinks: 9, PageBytes: 100, Seed: 4},
			WebConfig{Hosts: 2, PagesPerHost: 5, LinksPerPage: 3, CrossHostLinks: 3, PageBytes: 100, Seed: 4}},
		{"negatives", WebConfig{Hosts: -1, CrossHostLinks: -2, Latency: -time.Second, PageBytes: 1 << 30},
			WebConfig{Hosts: 10, PagesPerHost: 100, LinksPerPage: 10, PageBytes: 8 << 20}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, NewWeb(tt.in).Config()); diff != "" {
			t.Errorf("%s: NewWeb(%+v).Config() (-want +got):\n%s", tt.name, tt.in, diff)
		}
	}
}

func TestWebNames(t *testing.T) {
	w := startWeb(t, WebConfig{Hosts: 3, PagesPerHost: 4})
	p := strconv.Itoa(w.Port())
	want := []string{"http://h0000.sim.test:" + p + "/", "http://h0001.sim.test:" + p + "/", "http://h0002.sim.test:" + p + "/"}
	if diff := cmp.Diff(want, w.StartURLs()); diff != "" {
		t.Errorf("StartURLs() (-want +got):\n%s", diff)
	}
	if got, want := w.URL(2, 3), "http://h0002.sim.test:"+p+"/p/3.html"; got != want {
		t.Errorf("URL(2, 3) = %q, want %q", got, want)
	}
	if got := w.Pages(); got != 12 {
		t.Errorf("Pages() = %d, want 12", got)
	}
	if !overrideCovers(w.Resolve(), w.Host(2)) {
		t.Errorf("Resolve() = %q does not cover %q", w.Resolve(), w.Host(2))
	}
	if got := NewWeb(WebConfig{Hosts: 20000}).Host(7); got != "h00007.sim.test" {
		t.Errorf("Host(7) of 20000 hosts = %q, want h00007.sim.test", got)
	}
}

func TestWebDeterministic(t *testing.T) {
	cfg := WebConfig{Hosts: 4, PagesPerHost: 50, LinksPerPage: 6, CrossHostLinks: 2, PageBytes: 3000, Seed: 42}
	a, b := startWeb(t, cfg), startWeb(t, cfg)
	other := cfg
	other.Seed = 43
	c := startWeb(t, other)
	ca, cb, cc := a.Client(), b.Client(), c.Client()
	for _, cl := range []*http.Client{ca, cb, cc} {
		t.Cleanup(cl.CloseIdleConnections)
	}
	strip := func(w *Web, body []byte) string {
		return strings.ReplaceAll(string(body), ":"+strconv.Itoa(w.Port()), ":PORT")
	}
	differ := 0
	for _, pg := range [][2]int{{0, 0}, {1, 7}, {3, 49}, {2, 25}} {
		_, a1 := webGet(t, ca, a.URL(pg[0], pg[1]))
		_, a2 := webGet(t, ca, a.URL(pg[0], pg[1]))
		_, b1 := webGet(t, cb, b.URL(pg[0], pg[1]))
		_, c1 := webGet(t, cc, c.URL(pg[0], pg[1]))
		if !bytes.Equal(a1, a2) {
			t.Errorf("page %v served twice differs", pg)
		}
		if strip(a, a1) != strip(b, b1) {
			t.Errorf("page %v differs between two webs of seed %d", pg, cfg.Seed)
		}
		if strip(a, a1) != strip(c, c1) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("seeds %d and %d gave the same pages", cfg.Seed, other.Seed)
	}
}

func TestWebLinks(t *testing.T) {
	tests := []struct {
		name string
		cfg  WebConfig
	}{
		{"same host only", WebConfig{Hosts: 3, PagesPerHost: 40, LinksPerPage: 5, PageBytes: 1000}},
		{"cross host", WebConfig{Hosts: 5, PagesPerHost: 40, LinksPerPage: 8, CrossHostLinks: 3, PageBytes: 1000, Seed: 9}},
		{"all cross", WebConfig{Hosts: 5, PagesPerHost: 10, LinksPerPage: 4, CrossHostLinks: 4, PageBytes: 500}},
		{"one host with cross links", WebConfig{Hosts: 1, PagesPerHost: 10, LinksPerPage: 4, CrossHostLinks: 2, PageBytes: 500}},
		{"single link", WebConfig{Hosts: 2, PagesPerHost: 10, LinksPerPage: 1, PageBytes: 500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startWeb(t, tt.cfg)
			cl := w.Client()
			t.Cleanup(cl.CloseIdleConnections)
			cfg := w.Config()
			for h := range cfg.Hosts {
				for _, pg := range []int{0, 1, cfg.PagesPerHost - 1} {
					u := w.URL(h, pg)
					status, body := webGet(t, cl, u)
					if status != http.StatusOK {
						t.Fatalf("GET %q = %d", u, status)
					}
					hrefs := pageLinks(t, body)
					if len(hrefs) != cfg.LinksPerPage {
						t.Errorf("GET %q has %d links, want %d", u, len(hrefs), cfg.LinksPerPage)
					}
					base := mustParse(t, u)
					cross := 0
					var resolved []string
					for _, href := range hrefs {
						tu := base.ResolveReference(mustParse(t, href))
						resolved = append(resolved, tu.String())
						if tu.Hostname() != w.Host(h) {
							cross++
						}
						if _, ok := w.parsePage(tu.Path); !ok {
							t.Errorf("GET %q links to %q, not a page", u, tu)
						}
					}
					if cfg.Hosts > 1 && cross != cfg.CrossHostLinks {
						t.Errorf("GET %q has %d cross-host links, want %d", u, cross, cfg.CrossHostLinks)
					}
					if diff := cmp.Diff(w.Links(h, pg), resolved); diff != "" {
						t.Errorf("Links(%d, %d) differs from the served page (-Links +served):\n%s", h, pg, diff)
					}
				}
			}
		})
	}
}

// TestWebReachable walks every host from its root over served HTML and
// checks every page is reachable.
func TestWebReachable(t *testing.T) {
	for _, cfg := range []WebConfig{
		{Hosts: 3, PagesPerHost: 60, LinksPerPage: 3, CrossHostLinks: 1, PageBytes: 300},
		{Hosts: 2, PagesPerHost: 15, LinksPerPage: 2, CrossHostLinks: 1, PageBytes: 300},
	} {
		w := NewWeb(cfg)
		seen := map[string]bool{}
		queue := []*url.URL{}
		for _, s := range w.StartURLs() {
			u := mustParse(t, s)
			seen[u.String()] = true
			queue = append(queue, u)
		}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			rec := serve(w, u.Host, u.Path)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %q = %d", u, rec.Code)
			}
			for _, href := range pageLinks(t, rec.Body.Bytes()) {
				tu := u.ResolveReference(mustParse(t, href))
				if tu.Hostname() != u.Hostname() {
					continue // every host is walked from its own root
				}
				if !seen[tu.String()] {
					seen[tu.String()] = true
					queue = append(queue, tu)
				}
			}
		}
		if len(seen) != w.Pages() {
			t.Errorf("%+v: %d pages reachable, want %d", cfg, len(seen), w.Pages())
		}
	}
}

func TestWebPageSize(t *testing.T) {
	for _, size := range []int{1000, 4096, 20000, 200000} {
		w := NewWeb(WebConfig{Hosts: 2, PagesPerHost: 10, PageBytes: size})
		for pg := range 10 {
			n := serve(w, w.Host(1), pathOf(pg)).Body.Len()
			if n < size*9/10 || n > size*11/10+64 {
				t.Errorf("PageBytes %d: page %d is %d bytes", size, pg, n)
			}
		}
	}
}

func pathOf(pg int) string { return string(appendPagePath(nil, pg)) }

func TestWebText(t *testing.T) {
	w := NewWeb(WebConfig{Seed: 3})
	body := serve(w, w.Host(4), "/p/17.html").Body.String()
	vocab := map[string]bool{}
	for _, v := range w.Vocabulary() {
		vocab[v] = true
	}
	if len(vocab) != 1024 {
		t.Errorf("Vocabulary() has %d distinct words, want 1024", len(vocab))
	}
	_, text, _ := strings.Cut(body, "</nav>\n<p>")
	text, _, _ = strings.Cut(text, "</p>")
	words := strings.Fields(text)
	if len(words) < 100 {
		t.Fatalf("page text has %d words, want at least 100", len(words))
	}
	for _, wd := range words {
		if !vocab[wd] {
			t.Errorf("page text word %q is not in the vocabulary (cut word?)", wd)
		}
	}
	if !strings.Contains(body, "<title>h0004.sim.test page 17 ") {
		t.Errorf("page has no title naming host and page:\n%.200s", body)
	}
}

func TestWebAnswers(t *testing.T) {
	w := startWeb(t, WebConfig{Hosts: 3, PagesPerHost: 100})
	cl := w.Client()
	t.Cleanup(cl.CloseIdleConnections)
	p := ":" + strconv.Itoa(w.Port())
	tests := []struct {
		name, url string
		status    int
	}{
		{"root", "http://h0000.sim.test" + p + "/", 200},
		{"last page", "http://h0002.sim.test" + p + "/p/99.html", 200},
		{"robots", "http://h0001.sim.test" + p + "/robots.txt", 200},
		{"upper-case host", "http://H0001.SIM.TEST" + p + "/p/3.html", 200},
		{"page past the end", "http://h0002.sim.test" + p + "/p/100.html", 404},
		{"page 0 by number", "http://h0000.sim.test" + p + "/p/0.html", 404},
		{"leading zero", "http://h0000.sim.test" + p + "/p/01.html", 404},
		{"query", "http://h0000.sim.test" + p + "/?x=1", 404},
		{"host past the end", "http://h0003.sim.test" + p + "/", 404},
		{"short host name", "http://h1.sim.test" + p + "/", 404},
		{"other domain", "http://h0001.example.test" + p + "/", 404},
		{"other path", "http://h0001.sim.test" + p + "/index.html", 404},
	}
	before := w.Requests()
	for _, tt := range tests {
		if status, _ := webGet(t, cl, tt.url); status != tt.status {
			t.Errorf("%s: GET %q = %d, want %d", tt.name, tt.url, status, tt.status)
		}
	}
	if got := w.Requests() - before; got != int64(len(tests)) {
		t.Errorf("Requests() grew by %d, want %d", got, len(tests))
	}
	_, robots := webGet(t, cl, "http://h0001.sim.test"+p+"/robots.txt")
	rb := parseTestRobots(200, robots, "gridcrawl")
	for _, path := range []string{"/", "/p/5.html"} {
		if !rb.allowed(path) {
			t.Errorf("robots.txt disallows %q:\n%s", path, robots)
		}
	}
}

// TestWebFetchCounts fetches some pages once, one twice and one not at
// all, plus robots.txt and a missing page, which are not pages.
func TestWebFetchCounts(t *testing.T) {
	w := startWeb(t, WebConfig{Hosts: 2, PagesPerHost: 3, CountFetches: true})
	cl := w.Client()
	t.Cleanup(cl.CloseIdleConnections)
	urls := []string{w.URL(0, 0), w.URL(0, 1), w.URL(0, 2), w.URL(1, 0), w.URL(1, 0), w.URL(1, 1),
		"http://" + w.Host(1) + ":" + strconv.Itoa(w.Port()) + "/robots.txt", "http://" + w.Host(1) + ":" + strconv.Itoa(w.Port()) + "/p/9.html"}
	for _, u := range urls {
		webGet(t, cl, u)
	}
	never, twice, most := w.FetchCounts()
	if never != 1 || twice != 1 || most != 2 {
		t.Errorf("FetchCounts() = %d never, %d twice, most %d; want 1, 1, 2", never, twice, most)
	}
	if got := w.Served(); got != 6 {
		t.Errorf("Served() = %d, want 6", got)
	}
	if got := w.Twice(5); len(got) != 1 || got[0] != w.URL(1, 0) {
		t.Errorf("Twice(5) = %v, want [%s]", got, w.URL(1, 0))
	}
}

func TestWebLatency(t *testing.T) {
	w := NewWeb(WebConfig{Hosts: 1, PagesPerHost: 2, Latency: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := (&http.Request{Method: http.MethodGet, Host: w.Host(0), URL: &url.URL{Path: "/"}, Header: http.Header{}}).WithContext(ctx)
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, r)
	if rec.Body.Len() != 0 {
		t.Errorf("cancelled request during latency wrote %d bytes", rec.Body.Len())
	}
	if w.Requests() != 1 {
		t.Errorf("Requests() = %d, want 1", w.Requests())
	}
}

func FuzzWebHandler(f *testing.F) {
	w := NewWeb(WebConfig{Hosts: 12, PagesPerHost: 30, LinksPerPage: 4, CrossHostLinks: 2, PageBytes: 600})
	f.Add("h0003.sim.test:80", "/p/7.html")
	f.Add("h0011.sim.test", "/")
	f.Add("h0012.sim.test", "/")
	f.Add("h00a1.sim.test", "/p/1.html")
	f.Add("h0001.sim.test", "/p/99999999999999999999.html")
	f.Add("h0001.sim.test", "/robots.txt")
	f.Fuzz(func(t *testing.T, host, path string) {
		rec := serve(w, host, path)
		switch rec.Code {
		case http.StatusOK:
			if path != "/robots.txt" && !strings.Contains(rec.Body.String(), "<title>") {
				t.Errorf("GET %q %q: 200 without a title", host, path)
			}
		case http.StatusNotFound:
		default:
			t.Errorf("GET %q %q = %d", host, path, rec.Code)
		}
	})
}

// discardWriter is the cheapest ResponseWriter, so the benchmark measures
// the handler.
type discardWriter struct {
	h http.Header
	n int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(b []byte) (int, error) { d.n += len(b); return len(b), nil }

// BenchmarkWebServeHTTP measures the handler alone, per page served.
func BenchmarkWebServeHTTP(b *testing.B) {
	for _, size := range []int{4096, 32768} {
		b.Run("bytes="+strconv.Itoa(size), func(b *testing.B) {
			w := NewWeb(WebConfig{Hosts: 100, PagesPerHost: 1000, LinksPerPage: 20, CrossHostLinks: 5, PageBytes: size})
			hosts, paths := make([]string, 100), make([]string, 1000)
			for i := range hosts {
				hosts[i] = w.Host(i)
			}
			for i := range paths {
				paths[i] = pathOf(i)
			}
			r := &http.Request{Method: http.MethodGet, URL: &url.URL{}, Header: http.Header{}}
			d := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				r.Host = hosts[i%len(hosts)]
				r.URL.Path = paths[(i*7)%len(paths)]
				w.ServeHTTP(d, r)
				i++
			}
		})
	}
}

// BenchmarkWebLoopback measures a page served over loopback HTTP, client
// included.
func BenchmarkWebLoopback(b *testing.B) {
	w := startWeb(b, WebConfig{Hosts: 10, PagesPerHost: 1000, PageBytes: 4096})
	cl := w.Client()
	b.Cleanup(cl.CloseIdleConnections)
	urls := make([]string, 1000)
	for i := range urls {
		urls[i] = w.URL(i%10, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		resp, err := cl.Get(urls[i%len(urls)])
		if err != nil {
			b.Fatalf("GET: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		i++
	}
}
