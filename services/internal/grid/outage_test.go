package grid

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// outageProxy stands between the services and one backend. Down makes the
// backend unreachable as a stopped server is: open connections are reset
// and new ones refused (nothing listens on the port); Up listens again on
// the same port and forwards to the backend.
type outageProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newOutageProxy(t *testing.T, target string) *outageProxy {
	t.Helper()
	p := &outageProxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

func (p *outageProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *outageProxy) forward(c net.Conn) {
	b, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		c.Close()
		b.Close()
		return
	}
	p.conns[c], p.conns[b] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, b)
	p.mu.Unlock()
	c.Close()
	b.Close()
}

// Down stops listening and resets every open connection.
func (p *outageProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as from a killed server
		}
		c.Close()
		delete(p.conns, c)
	}
}

// Up listens on the proxy's port again.
func (p *outageProxy) Up() {
	p.t.Helper()
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("listen again on %s: %v", p.addr, err)
}

// outageDuration is how long each backend is down: 30 s as in issue 12,
// GRIDCRAWL_OUTAGE (a Go duration) to change it.
func outageDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("GRIDCRAWL_OUTAGE")
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("GRIDCRAWL_OUTAGE: %v", err)
	}
	return d
}

// TestGridModeBackendOutage stops each backend for 30 s in the middle of a
// grid-mode crawl (MCP, two loaders, two crawlers as separate processes):
// every process keeps running and reports the outage on /readyz, the crawl
// resumes once the backend is back and finishes with every page of the web
// indexed exactly once, and no contract is dead-lettered. The services
// reach the backend through a proxy that the test takes down: to them it
// is a backend that stopped (connections reset, then refused).
func TestGridModeBackendOutage(t *testing.T) {
	base := realBackends(t)
	down := outageDuration(t)
	cases := []struct {
		name    string
		env     string // the variable that points at the backend
		backend string // the readiness check that must fail
	}{
		{"elasticsearch", "GRIDCRAWL_ES_URL", "txindex"},
		{"minio", "GRIDCRAWL_S3_ENDPOINT", "assets"},
		{"rabbitmq", "GRIDCRAWL_AMQP_URL", "queue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := ownVhost(t, base)
			var proxy *outageProxy
			for i, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				if k != tc.env {
					continue
				}
				u, err := url.Parse(v)
				if err != nil || u.Host == "" {
					u = &url.URL{Host: v} // S3 endpoint: host:port
				}
				proxy = newOutageProxy(t, u.Host)
				if u.Scheme == "" {
					env[i] = k + "=" + proxy.addr
				} else {
					u.Host = proxy.addr
					env[i] = k + "=" + u.String()
				}
			}
			outageCrawl(t, env, proxy, tc.backend, down)
		})
	}
}

func outageCrawl(t *testing.T, env []string, proxy *outageProxy, backend string, down time.Duration) {
	web, starts, want := startWeb(t, websim.WebConfig{Hosts: 10, PagesPerHost: 60, LinksPerPage: 6, CrossHostLinks: 2, Seed: 12, RecordRequests: true}, 3)
	c := newCluster(t, env, web.Resolve())
	c.startAll()
	id := c.startCrawl(contracts.Profile{StartURLs: starts, MaxDepth: contracts.MaxDepthLimit, Scope: contracts.ScopeDomain, Sitemaps: new(bool), // the oracle is the link graph
		Politeness: contracts.Politeness{MinDelayMS: 60, MaxDelayMS: 60, DelayFactor: 1}})
	before := c.waitFetched(id, int64(len(want)/6), "the outage")
	t.Logf("backend %s down at %v", backend, before.Counts)
	proxy.Down()
	outageEnd := time.Now().Add(down)
	reported := map[string]bool{}
	for time.Now().Before(outageEnd) {
		for name, p := range c.procs {
			select {
			case <-p.done:
				t.Fatalf("%s exited during the %s outage", name, backend)
			default:
			}
			if reported[name] || (name != "mcp" && backend == "search") {
				continue
			}
			if r, ok := readiness(c.metrics[name]); ok && slices.Contains(r.Failing, backend) {
				reported[name] = true
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	for name := range c.procs {
		if !reported[name] {
			t.Errorf("%s /readyz never named %s during the outage", name, backend)
		}
	}
	during := before
	c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &during) // MCP may not answer during the outage
	proxy.Up()
	back := time.Now()
	t.Logf("backend %s up again at %v", backend, during.Counts)
	var st contracts.CrawlStatus
	resumed := time.Duration(0)
	for deadline := time.Now().Add(4 * time.Minute); st.State != contracts.CrawlFinished; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished %v after the %s outage: %v", time.Since(back), backend, st.Counts)
		}
		if c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st) == http.StatusOK && resumed == 0 &&
			st.Counts[contracts.Indexed] > during.Counts[contracts.Indexed] {
			resumed = time.Since(back)
		}
	}
	t.Logf("after the %s outage: first page indexed %v after its return, crawl finished %v after it", backend, resumed, time.Since(back))
	set := c.openBackends(t)
	allIndexed(t, set.Tx, id, want, nil)
	if n, err := set.Search.Count(t.Context(), id); err != nil || n != int64(len(want)) {
		t.Errorf("documents = %d (%v), want %d", n, err, len(want))
	}
	for _, q := range []string{contracts.QueueLoader, contracts.QueueCrawler, contracts.QueueIndex} {
		if n, err := set.Queue.Len(t.Context(), queue.DeadLetterQueue(q)); err != nil || n != 0 {
			t.Errorf("dead-letter queue of %s holds %d (%v), want 0", q, n, err)
		}
	}
	requested := map[string]int{}
	for _, r := range web.RequestLog() {
		requested[r.URL]++
	}
	twice := 0
	for u, n := range requested {
		if n > 1 && !strings.HasSuffix(u, "/robots.txt") {
			t.Errorf("%s fetched %d times", u, n)
			if twice++; twice <= 2 {
				c.logLinesWith(u)
			}
		}
	}
}

// readiness reads the /readyz of a metrics listener.
func readiness(addr string) (metrics.Readiness, bool) {
	var r metrics.Readiness
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/readyz")
	if err != nil {
		return r, false
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, false
	}
	return r, true
}

// deleteESIndices deletes the Elasticsearch indices named prefix-* from
// the node of GRIDCRAWL_ES_URL, if any: the local node has a shard limit
// that the indices of many test runs would reach. Names are listed first,
// since a node may refuse to delete by wildcard.
func deleteESIndices(t *testing.T, prefix string) {
	esURL := os.Getenv("GRIDCRAWL_ES_URL")
	if esURL == "" {
		return
	}
	resp, err := http.Get(esURL + "/_cat/indices/" + prefix + "-*?h=index")
	if err != nil {
		t.Logf("list indices %s-*: %v", prefix, err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	names := strings.Fields(string(b))
	if resp.StatusCode != http.StatusOK || len(names) == 0 {
		return
	}
	req, _ := http.NewRequest(http.MethodDelete, esURL+"/"+strings.Join(names, ","), nil)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Logf("delete indices %v: %v", names, err)
		return
	}
	resp.Body.Close()
}

// logLinesWith logs the lines of every process's log that mention s.
func (c *gridCluster) logLinesWith(s string) {
	c.t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.logs, "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, s) {
				c.t.Logf("%s: %s", filepath.Base(f), line)
			}
		}
	}
}
