package grid

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// politeSite serves several hosts from one listener and records when every
// request started and ended, to check politeness per crawl host group.
type politeSite struct {
	port    int
	hosts   []string
	robots  map[string]string
	mu      sync.Mutex
	records []fetchRecord
}

type fetchRecord struct {
	host, path string
	start, end time.Time
}

const politePages = 8

func newPoliteSite(t *testing.T, hosts []string, robots map[string]string) *politeSite {
	t.Helper()
	s := &politeSite{hosts: hosts, robots: robots}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: s}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *politeSite) url(host, path string) string {
	return fmt.Sprintf("http://%s:%d%s", host, s.port, path)
}

func (s *politeSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, _ := strings.Cut(r.Host, ":")
	rec := fetchRecord{host: host, path: r.URL.Path, start: time.Now()}
	defer func() {
		rec.end = time.Now()
		s.mu.Lock()
		s.records = append(s.records, rec)
		s.mu.Unlock()
	}()
	if r.URL.Path == "/robots.txt" {
		if txt, ok := s.robots[host]; ok {
			io.WriteString(w, txt)
			return
		}
		http.NotFound(w, r)
		return
	}
	time.Sleep(15 * time.Millisecond) // a fetch takes time, so overlaps would show
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, "<html><title>%s %s</title><body>", host, r.URL.Path)
	if r.URL.Path == "/" {
		for i := range politePages {
			fmt.Fprintf(w, `<a href="/p%d.html">page %d</a> `, i, i)
		}
		for _, h := range s.hosts {
			fmt.Fprintf(w, `<a href="%s">%s</a> `, s.url(h, "/"), h)
		}
	}
	io.WriteString(w, "</body></html>")
}

// TestPolitenessAcrossLoaderProcesses crawls with three loader processes and
// checks that no crawl host group is ever fetched twice at once and that no
// two fetches of a group are closer than the group's delay, for plain
// hosts, two hosts aliased into one group, and a host with a robots.txt
// Crawl-delay.
func TestPolitenessAcrossLoaderProcesses(t *testing.T) {
	env := realBackends(t)
	hosts := []string{"a1.polite.test", "a2.polite.test", "slow.polite.test", "p1.polite.test", "p2.polite.test", "p3.polite.test"}
	site := newPoliteSite(t, hosts, map[string]string{"slow.polite.test": "User-agent: *\nCrawl-delay: 1\n"})
	groupOf := map[string]string{"a1.polite.test": "kommune", "a2.polite.test": "kommune"}
	const minDelay = 150 * time.Millisecond
	delayOf := map[string]time.Duration{"slow.polite.test": time.Second}

	c := newCluster(t, env, "*.polite.test=127.0.0.1")
	c.env = append(c.env, "GRIDCRAWL_CHG_ALIASES=kommune=a1.polite.test|a2.polite.test")
	c.start("mcp", "mcp")
	for i := range 3 {
		c.start(fmt.Sprintf("loader-%d", i+1), "loader")
	}
	c.start("crawler-1", "crawler")

	var starts []string
	for _, h := range hosts {
		starts = append(starts, site.url(h, "/"))
	}
	p := contracts.Profile{StartURLs: starts, MaxDepth: 2, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: int(minDelay / time.Millisecond), MaxDelayMS: int(minDelay / time.Millisecond), DelayFactor: 1}}
	var created contracts.CreateCrawlResponse
	if code := c.do(http.MethodPost, "/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	var st contracts.CrawlStatus
	for deadline := time.Now().Add(3 * time.Minute); st.State != contracts.CrawlFinished; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished: %v", st.Counts)
		}
		c.do(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st)
	}
	if want := int64(len(hosts) * (politePages + 1)); st.Counts[contracts.Indexed] != want {
		t.Errorf("indexed = %d, want %d", st.Counts[contracts.Indexed], want)
	}

	site.mu.Lock()
	recs := append([]fetchRecord(nil), site.records...)
	site.mu.Unlock()
	byGroup := map[string][]fetchRecord{}
	for _, r := range recs {
		g := r.host
		if a, ok := groupOf[r.host]; ok {
			g = a
		}
		byGroup[g] = append(byGroup[g], r)
	}
	if n := len(byGroup["kommune"]); n < 2*(politePages+1) {
		t.Fatalf("alias group saw %d requests, want at least %d", n, 2*(politePages+1))
	}
	for g, rs := range byGroup {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
		delay := minDelay
		if d, ok := delayOf[g]; ok {
			delay = d
		}
		var lastPage *fetchRecord
		for i := range rs {
			if i > 0 && rs[i].start.Before(rs[i-1].end) {
				t.Errorf("group %s: %s%s started %v before %s%s ended", g, rs[i].host, rs[i].path, rs[i-1].end.Sub(rs[i].start), rs[i-1].host, rs[i-1].path)
			}
			if rs[i].path == "/robots.txt" {
				continue // fetched within the lease of the page that needs it
			}
			if lastPage != nil {
				if gap := rs[i].start.Sub(lastPage.end); gap < delay {
					t.Errorf("group %s: %s%s came %v after %s%s, want at least %v", g, rs[i].host, rs[i].path, gap, lastPage.host, lastPage.path, delay)
				}
			}
			lastPage = &rs[i]
		}
	}
	t.Logf("%d requests over %d groups", len(recs), len(byGroup))
}
