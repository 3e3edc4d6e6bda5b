package browser

import (
	"github.com/gridcrawl/gridcrawl/pkg/proctree"

	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// newBrowser returns a Browser on the machine's Chromium, or skips (fails
// with GRIDCRAWL_REQUIRE_BROWSER=1) when there is none.
func newBrowser(t testing.TB, cfg Config) *Browser {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = os.Getenv("GRIDCRAWL_CHROMIUM")
	}
	b, err := New(cfg)
	if errors.Is(err, ErrNoBrowser) {
		if os.Getenv("GRIDCRAWL_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GRIDCRAWL_REQUIRE_BROWSER=1 but: %v", err)
		}
		t.Skipf("no browser: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// site serves the test pages and counts every request it sees.
type site struct {
	mu   sync.Mutex
	seen map[string]int
}

func (s *site) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, c := range s.seen {
		if strings.HasPrefix(p, prefix) {
			n += c
		}
	}
	return n
}

var pages = map[string]string{
	"/app":   `<!doctype html><html><head><title>shell</title><script src="/app.js"></script></head><body><div id="root"></div></body></html>`,
	"/loop":  `<!doctype html><html><body><p>before the loop</p><script>while (true) {}</script></body></html>`,
	"/flood": `<!doctype html><html><body><p>flood</p><script>for (let i = 0; i < 10000; i++) fetch('/r/' + i).catch(() => {});</script></body></html>`,
	"/oom":   `<!doctype html><html><body><p>oom</p><script>const keep = []; for (;;) keep.push(new Array(1 << 20).fill(Math.random()));</script></body></html>`,
	// Each task holds the renderer for a minute, so stopping the script
	// that runs only lets the next one start: the DOM is never given.
	"/busy": "<!doctype html><html><head><meta charset=\"windows-1252\"></head><body><p>zqxbusy caf\xe9</p>" +
		"<script>setInterval(() => { const t = Date.now(); while (Date.now() - t < 60000) {} }, 0);</script></body></html>",
	"/leave": `<!doctype html><html><body><p>leaving</p><script>location.href = 'http://10.255.255.1/secret';</script></body></html>`,
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen[r.URL.Path]++
	s.mu.Unlock()
	switch p := r.URL.Path; {
	case p == "/app.js":
		w.Header().Set("Content-Type", "text/javascript")
		io.WriteString(w, `addEventListener('DOMContentLoaded', async () => {
  const d = await (await fetch('/data.json')).json();
  document.title = d.title;
  const root = document.getElementById('root');
  root.innerHTML = '<p>' + d.text + '</p><a href="/' + 'made' + '-by-script">next</a>';
});`)
	case p == "/data.json":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"title":"rendered title","text":"zqxscripttext"}`)
	case strings.HasPrefix(p, "/r/"):
		io.WriteString(w, "r")
	default:
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, pages[p])
	}
}

// fetcher answers the browser's requests with a plain client, noting the
// URLs, and refuses addresses outside loopback.
type fetcher struct {
	mu   sync.Mutex
	urls []string
}

func (f *fetcher) fetch(ctx context.Context, r *Request) (*Response, error) {
	f.mu.Lock()
	f.urls = append(f.urls, r.URL)
	f.mu.Unlock()
	if !strings.HasPrefix(r.URL, "http://127.0.0.1:") {
		return nil, &Refusal{Reason: "address not allowed"}
	}
	req, _ := http.NewRequestWithContext(ctx, r.Method, r.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

func (f *fetcher) fetched(sub string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.urls {
		if strings.Contains(u, sub) {
			return true
		}
	}
	return false
}

func render(t *testing.T, b *Browser, srv *httptest.Server, path string, f *fetcher, tweak func(*Page)) (*Result, error) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := Page{URL: srv.URL + path, UserAgent: "gridcrawl-test", Main: &Response{Status: 200, Header: resp.Header, Body: body},
		Fetch: f.fetch, Timeout: 5 * time.Second}
	if tweak != nil {
		tweak(&p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return b.Render(ctx, p)
}

func TestRenderRunsScriptsThroughFetch(t *testing.T) {
	b := newBrowser(t, Config{Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	s := &site{seen: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	f := &fetcher{}
	res, err := render(t, b, srv, "/app", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	dom := string(res.DOM)
	if !strings.Contains(dom, "zqxscripttext") || !strings.Contains(dom, `href="/made-by-script"`) {
		t.Errorf("DOM lacks what the script made:\n%s", dom)
	}
	if res.Title != "rendered title" {
		t.Errorf("title %q, want the script's", res.Title)
	}
	if res.Requests < 2 || !f.fetched("/app.js") || !f.fetched("/data.json") {
		t.Errorf("requests %d (%v), want app.js and data.json through Fetch", res.Requests, f.urls)
	}
	if n := s.seen["/app"]; n != 1 { // the test's own GET; the browser got the page from Main
		t.Errorf("the page was requested %d times, want once (by the test)", n)
	}
	if got := b.Stats().Escaped; got != 0 {
		t.Errorf("%d requests escaped interception", got)
	}
}

func TestRenderHostilePages(t *testing.T) {
	b := newBrowser(t, Config{JSHeapMB: 64})
	s := &site{seen: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()

	t.Run("loop", func(t *testing.T) {
		res, err := render(t, b, srv, "/loop", &fetcher{}, func(p *Page) { p.Timeout = 2 * time.Second })
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.DOM), "before the loop") || !strings.Contains(strings.Join(res.Cut, "; "), "time:") {
			t.Errorf("loop: DOM %q, cut %q", res.DOM, res.Cut)
		}
	})
	t.Run("flood", func(t *testing.T) {
		res, err := render(t, b, srv, "/flood", &fetcher{}, func(p *Page) { p.MaxRequests = 50 })
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 50 || s.count("/r/") != 50 || !strings.Contains(strings.Join(res.Cut, "; "), "requests: the page's limit of 50") {
			t.Errorf("flood: %d requests made, server saw %d, cut %q", res.Requests, s.count("/r/"), res.Cut)
		}
	})
	t.Run("flood-slow", func(t *testing.T) {
		// The requests are made one at a time and none is answered before
		// the page's time is up: the page is still cut at the first request
		// over its limit, counted as asked for, and no more are made.
		var made atomic.Int64
		hold := func(ctx context.Context, r *Request) (*Response, error) {
			made.Add(1)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		res, err := render(t, b, srv, "/flood", &fetcher{}, func(p *Page) {
			p.MaxRequests, p.Fetchers, p.Fetch, p.Timeout = 5, 1, hold, 2*time.Second
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("slow flood: cut %q", res.Cut) // a "dom:" line when the tab did not give its DOM in time
		if n := made.Load(); n > 5 || !strings.Contains(strings.Join(res.Cut, "; "), "requests: the page's limit of 5") {
			t.Errorf("slow flood: %d requests made, cut %q", n, res.Cut)
		}
	})
	t.Run("oom", func(t *testing.T) {
		_, err := render(t, b, srv, "/oom", &fetcher{}, func(p *Page) { p.Timeout = 30 * time.Second })
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("oom: err %v, want %v", err, ErrCrashed)
		}
	})
	t.Run("busy", func(t *testing.T) {
		// The tab does not answer once the page's time is up: the page
		// keeps its own answer, in UTF-8, cut, and the browser is replaced.
		res, err := render(t, b, srv, "/busy", &fetcher{}, func(p *Page) {
			p.Timeout = 2 * time.Second
			p.Main.Header.Set("Content-Type", "text/html; charset=windows-1252")
		})
		if err != nil {
			t.Fatal(err)
		}
		cut := strings.Join(res.Cut, "; ")
		if !strings.Contains(string(res.DOM), "zqxbusy café") || !strings.Contains(cut, "dom: the tab did not answer") || !strings.Contains(cut, "time:") {
			t.Errorf("busy: DOM %q, cut %q", res.DOM, res.Cut)
		}
		if n := b.Stats().Restarts[RestartUnresponsive]; n != 1 {
			t.Errorf("busy: %d restarts for an unresponsive tab, want 1", n)
		}
	})
	t.Run("leave", func(t *testing.T) {
		f := &fetcher{}
		res, err := render(t, b, srv, "/leave", f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.fetched("10.255.255.1") || len(res.Navigations) != 1 || res.Navigations[0] != "http://10.255.255.1/secret" {
			t.Errorf("leave: fetched %v, navigations %v", f.urls, res.Navigations)
		}
		if !strings.Contains(string(res.DOM), "leaving") {
			t.Errorf("leave: DOM %q, want the page's", res.DOM)
		}
	})
	// The browser still works after all that.
	res, err := render(t, b, srv, "/app", &fetcher{}, nil)
	if err != nil || !strings.Contains(string(res.DOM), "zqxscripttext") {
		t.Errorf("after the hostile pages: %v, %+v", err, res)
	}
	if got := b.Stats().Escaped; got != 0 {
		t.Errorf("%d requests escaped interception", got)
	}
}

func TestRestartAfterPages(t *testing.T) {
	b := newBrowser(t, Config{RestartPages: 2, Tabs: 2})
	s := &site{seen: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := render(t, b, srv, "/app", &fetcher{}, nil); err == nil && strings.Contains(string(res.DOM), "zqxscripttext") {
				ok.Add(1)
			} else {
				t.Errorf("render: %v", err)
			}
		}()
	}
	wg.Wait()
	st := b.Stats()
	if ok.Load() != 6 || st.Restarts[RestartPages] < 2 {
		t.Errorf("%d of 6 rendered, restarts %v", ok.Load(), st.Restarts)
	}
}

// TestMemoryCountsSharedPagesOnce: the browser's memory as checked is its
// processes' proportional share, well under the sum of their resident
// sizes (which counts the shared code once per process).
func TestMemoryCountsSharedPagesOnce(t *testing.T) {
	b := newBrowser(t, Config{})
	s := &site{seen: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	if _, err := render(t, b, srv, "/app", &fetcher{}, nil); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	inst := b.cur
	b.mu.Unlock()
	pid := chromedp.FromContext(inst.ctx).Browser.Process().Pid
	table := proctree.Table(false)
	procs := append(proctree.Descendants(table, pid), table[pid])
	var rss int64
	for _, p := range procs {
		rss += p.RSS
	}
	mem := proctree.TreeMemory(pid)
	if mem <= 0 || mem >= rss {
		t.Errorf("browser memory %d bytes, resident sizes summed %d: want the proportional sum, smaller", mem, rss)
	}
	t.Logf("browser: %d MiB proportional, %d MiB resident summed, %d processes", mem>>20, rss>>20, len(procs))
}

// TestTabWaitBounded: a page that finds every tab busy for longer than its
// TabWait gets ErrNoTab instead of waiting on.
func TestTabWaitBounded(t *testing.T) {
	b := newBrowser(t, Config{Tabs: 1})
	s := &site{seen: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	busy := make(chan error, 1)
	go func() {
		_, err := render(t, b, srv, "/loop", &fetcher{}, func(p *Page) { p.Timeout = 3 * time.Second })
		busy <- err
	}()
	for b.Stats().TabsInUse == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	_, err := render(t, b, srv, "/app", &fetcher{}, func(p *Page) { p.TabWait = 200 * time.Millisecond })
	if !errors.Is(err, ErrNoTab) || time.Since(start) > 2*time.Second {
		t.Errorf("with the only tab busy: %v after %v, want %v after about 200ms", err, time.Since(start), ErrNoTab)
	}
	if err := <-busy; err != nil {
		t.Errorf("the busy page: %v", err)
	}
}

// TestRestartAfterCrashAndOnMemory: a browser killed between pages is
// started again for the next page, and one over its memory limit is
// restarted between pages.
func TestRestartAfterCrashAndOnMemory(t *testing.T) {
	s := &site{seen: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	b := newBrowser(t, Config{})
	if _, err := render(t, b, srv, "/app", &fetcher{}, nil); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	proc := chromedp.FromContext(b.cur.ctx).Browser.Process()
	ctx := b.cur.ctx
	b.mu.Unlock()
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // chromedp sees the connection go
	res, err := render(t, b, srv, "/app", &fetcher{}, nil)
	if err != nil || !strings.Contains(string(res.DOM), "zqxscripttext") || b.Stats().Restarts[RestartCrash] != 1 {
		t.Errorf("after a crash: %v, restarts %v", err, b.Stats().Restarts)
	}

	small := newBrowser(t, Config{MaxMemory: 1 << 20}) // any browser is over it
	for deadline := time.Now().Add(30 * time.Second); small.Stats().Restarts[RestartMemory] == 0 && time.Now().Before(deadline); {
		if _, err := render(t, small, srv, "/app", &fetcher{}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if small.Stats().Restarts[RestartMemory] == 0 || small.Stats().Memory <= 1<<20 {
		t.Errorf("over its memory limit: restarts %v, memory %d", small.Stats().Restarts, small.Stats().Memory)
	}
}
