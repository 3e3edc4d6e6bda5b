package grid

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// timedSite serves live.test: a home page linking to n pages, and logs the
// time of every page request (robots.txt apart) by path.
type timedSite struct {
	port int
	mu   sync.Mutex
	at   []time.Time
	hits map[string]int
}

func newTimedSite(t *testing.T, n int) *timedSite {
	t.Helper()
	s := &timedSite{hits: map[string]int{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.at = append(s.at, time.Now())
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>")
		if r.URL.Path == "/" {
			for i := range n {
				fmt.Fprintf(w, `<a href="/p%d">p%d</a> `, i, i)
			}
		}
		io.WriteString(w, "</body></html>")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.port = ln.Addr().(*net.TCPAddr).Port
	return s
}

// since counts the requests at or after t.
func (s *timedSite) since(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.at {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// waitRequests waits until the site has had n requests at or after t, for
// up to d, and returns when the n-th came (zero: it did not).
func (s *timedSite) waitRequests(t time.Time, n int, d time.Duration) time.Time {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		var got []time.Time
		for _, at := range s.at {
			if !at.Before(t) {
				got = append(got, at)
			}
		}
		s.mu.Unlock()
		if len(got) >= n {
			return got[n-1]
		}
	}
	return time.Time{}
}

// startCrawl starts a crawl of the site at depth 1 with politeness pol on
// the grid at api, and returns its id once 3 pages were requested.
func (s *timedSite) startCrawl(t *testing.T, api string, pol contracts.Politeness) string {
	t.Helper()
	p := contracts.Profile{
		StartURLs:  []string{fmt.Sprintf("http://live.test:%d/", s.port)},
		MaxDepth:   1,
		Sitemaps:   new(bool),
		Politeness: pol,
	}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	if s.waitRequests(time.Time{}, 3, time.Minute).IsZero() {
		t.Fatal("the crawl did not fetch 3 pages in a minute")
	}
	return created.CrawlID
}

// TestPatchedPolitenessTakesEffect lowers a running crawl's delay from
// 500ms to 50ms: the group the crawl uses fetches at the new pace within a
// second or two, and the frontier report names the profile version it
// runs. Before, the URLs the loader held (here all 80) kept the old delay
// until they drained, 40 s later.
func TestPatchedPolitenessTakesEffect(t *testing.T) {
	site := newTimedSite(t, 80)
	_, api := startGrid(t, testConfig(t, t.TempDir(), "live.test=127.0.0.1"))
	id := site.startCrawl(t, api, contracts.Politeness{MinDelayMS: 500, MaxDelayMS: 10000, DelayFactor: 2})
	var st contracts.CrawlStatus
	patch := map[string]any{"politeness": map[string]any{"min_delay_ms": 50, "delay_factor": 0}}
	if code := apiDo(t, http.MethodPatch, api+"/api/v1/crawls/"+id, patch, &st); code != http.StatusOK {
		t.Fatalf("PATCH = %d", code)
	}
	patched := time.Now()
	// At 500ms the group makes at most 5 requests in 2 s; at 50ms it makes
	// tens. The change must have reached the group 1.5 s after the answer.
	from := patched.Add(1500 * time.Millisecond)
	time.Sleep(time.Until(from.Add(2 * time.Second)))
	if n := site.since(from) - site.since(from.Add(2*time.Second)); n < 10 {
		t.Errorf("%d requests in the 2 s from 1.5 s after the PATCH to 50ms, want at least 10 (at most 5 at the old 500ms)", n)
	}
	// The frontier report says which profile version the group runs.
	found := false
	for deadline := time.Now().Add(10 * time.Second); !found && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, gr := range frontierGroups(t, api) {
			if gr.CrawlID != nil && *gr.CrawlID == id && gr.ProfileVersion != nil && *gr.ProfileVersion == 1 && gr.DelayMS != nil && *gr.DelayMS == 50 {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no frontier group of crawl %s runs profile version 1 at 50ms: %+v", id, frontierGroups(t, api))
	}
	waitState(t, api, id, contracts.CrawlFinished)
}

// TestResumeFetchesAtOnce pauses a crawl until its URLs are parked, resumes
// it, and wants the next request within a few seconds, well before the
// parked copies come due (GRIDCRAWL_LOADER_PAUSED_DELAY, 10 s here); when
// they do come, nothing is fetched twice.
func TestResumeFetchesAtOnce(t *testing.T) {
	site := newTimedSite(t, 40)
	cfg := testConfig(t, t.TempDir(), "live.test=127.0.0.1")
	cfg.Loader.PausedDelay = 10 * time.Second
	_, api := startGrid(t, cfg)
	id := site.startCrawl(t, api, contracts.Politeness{MinDelayMS: 200, MaxDelayMS: 10000, DelayFactor: 0})
	var st contracts.CrawlStatus
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls/"+id+"/pause", nil, &st); code != http.StatusOK {
		t.Fatalf("pause = %d", code)
	}
	paused := time.Now()
	// The loader sees the pause within a second and parks what it holds.
	time.Sleep(1500 * time.Millisecond)
	quiet := time.Now()
	time.Sleep(500 * time.Millisecond)
	if n := site.since(quiet); n != 0 {
		t.Fatalf("%d requests 1.5 s after the pause, want none", n)
	}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls/"+id+"/resume", nil, &st); code != http.StatusOK {
		t.Fatalf("resume = %d", code)
	}
	resumed := time.Now()
	if at := site.waitRequests(resumed, 1, 5*time.Second); at.IsZero() {
		t.Errorf("no request in the 5 s after the resume (the parked URLs come due %v after the pause)", cfg.Loader.PausedDelay)
	} else {
		t.Logf("first request %v after the resume", at.Sub(resumed).Round(time.Millisecond))
	}
	waitState(t, api, id, contracts.CrawlFinished)
	// The parked copies come back after the crawl finished: they must be
	// skipped, not fetched again.
	time.Sleep(time.Until(paused.Add(cfg.Loader.PausedDelay + 3*time.Second)))
	site.mu.Lock()
	defer site.mu.Unlock()
	if len(site.hits) != 41 {
		t.Errorf("%d pages requested, want 41", len(site.hits))
	}
	for path, n := range site.hits {
		if n != 1 {
			t.Errorf("%s requested %d times, want once", path, n)
		}
	}
}
