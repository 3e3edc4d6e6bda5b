package grid

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// holdSite serves hosts h0..h<hosts-1>.hold.test, each with pages /p0..,
// without links, and logs the host of every page request in order. The
// first request of any kind blocks until release is closed, so that a test
// can let the loader queue every start URL before the order is decided.
type holdSite struct {
	port    int
	release chan struct{}

	once sync.Once
	mu   sync.Mutex
	log  []string
}

func newHoldSite(t *testing.T) *holdSite {
	t.Helper()
	s := &holdSite{release: make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		s.once.Do(func() { first = true })
		if first {
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		}
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		host, _, _ := strings.Cut(r.Host, ":")
		s.mu.Lock()
		s.log = append(s.log, strings.TrimSuffix(host, ".hold.test"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body>page %s of %s</body></html>", r.URL.Path, host)
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

func (s *holdSite) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// switches counts the places in seq where the host changes: hosts-1 when
// the hosts are crawled one after another, about len(seq) when they are
// interleaved.
func switches(seq []string) int {
	n := 0
	for i := 1; i < len(seq); i++ {
		if seq[i] != seq[i-1] {
			n++
		}
	}
	return n
}

// crawlHoldSite crawls every page of hosts hosts with pages pages each, as
// start URLs (depth 0), with one loader worker and no politeness delay, so
// that the single fetcher is the bottleneck and the scheduler alone decides
// the order. It returns the hosts of the page requests in order.
func crawlHoldSite(t *testing.T, holdQueues bool, hosts, pages int) []string {
	t.Helper()
	site := newHoldSite(t)
	t.Setenv("GRIDCRAWL_LOADER_WORKERS", "1")
	_, api := startGrid(t, testConfig(t, t.TempDir(), "*.hold.test=127.0.0.1"))
	// Sitemaps off: the order below is the pages'.
	p := contracts.Profile{MaxDepth: 0, Sitemaps: new(bool), Politeness: contracts.Politeness{Robots: contracts.RobotsObey}}
	for h := range hosts {
		for i := range pages {
			p.StartURLs = append(p.StartURLs, fmt.Sprintf("http://h%d.hold.test:%d/p%d", h, site.port, i))
		}
	}
	if holdQueues {
		p.Budget = &contracts.Budget{HoldQueues: true}
	}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	// The first request is held until the loader has every URL queued (or
	// leased): from then on only the scheduler decides the order.
	total := hosts * pages
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var fr contracts.FrontierReport
		apiDo(t, http.MethodGet, api+"/api/v1/frontier", nil, &fr)
		if fr.Totals.Queued+fr.Totals.Busy >= total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("frontier totals = %+v, want %d URLs queued or leased", fr.Totals, total)
		}
	}
	close(site.release)
	st := waitState(t, api, created.CrawlID, contracts.CrawlFinished)
	if st.Counts[contracts.Indexed] != int64(total) {
		t.Fatalf("crawl counts = %v, want %d indexed", st.Counts, total)
	}
	seq := site.requests()
	if len(seq) != total {
		t.Fatalf("server saw %d page requests, want %d: %v", len(seq), total, seq)
	}
	return seq
}

// TestHoldQueuesSiteFirst: a crawl with budget.hold_queues fetches its
// hosts one after another (site-first, seed 003), while the same crawl
// without it interleaves them. The measure is the number of host switches
// in the server's request log: hosts-1 for a strictly site-first order,
// about one per request for an interleaved one.
func TestHoldQueuesSiteFirst(t *testing.T) {
	const hosts, pages = 5, 8
	var held, interleaved []string
	// Subtests, so that each grid is stopped before the next starts.
	t.Run("hold_queues", func(t *testing.T) { held = crawlHoldSite(t, true, hosts, pages) })
	t.Run("without", func(t *testing.T) { interleaved = crawlHoldSite(t, false, hosts, pages) })
	if held == nil || interleaved == nil {
		t.FailNow()
	}
	sh, si := switches(held), switches(interleaved)
	t.Logf("host switches: %d with hold_queues, %d without", sh, si)
	// A little slack for a URL whose contract reached the loader late.
	if sh > 2*(hosts-1) {
		t.Errorf("with hold_queues: %d host switches, want at most %d (site-first); requests %v", sh, 2*(hosts-1), held)
	}
	if si < hosts*pages/2 {
		t.Errorf("without hold_queues: %d host switches, want at least %d (interleaved); requests %v", si, hosts*pages/2, interleaved)
	}
}
