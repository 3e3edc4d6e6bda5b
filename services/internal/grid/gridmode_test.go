package grid

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics/metricstest"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// realBackends returns the environment of the real backends, or skips (or,
// in CI, fails) when they are not configured. scripts/test.sh starts them.
func realBackends(t *testing.T) []string {
	t.Helper()
	vars := []string{"GRIDCRAWL_AMQP_URL", "GRIDCRAWL_ES_URL", "GRIDCRAWL_S3_ENDPOINT", "GRIDCRAWL_S3_ACCESS_KEY", "GRIDCRAWL_S3_SECRET_KEY"}
	var env []string
	for i, v := range testenv.Backend(t, vars...) {
		env = append(env, vars[i]+"="+v)
	}
	if testing.Short() {
		t.Skip("starts the grid as separate processes")
	}
	return env
}

func randSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// gridCluster is MCP, loaders and crawlers as separate processes.
type gridCluster struct {
	t     *testing.T
	bins  string
	env   []string
	api   string
	token string
	procs map[string]*clusterProc
	logs  string
	// metrics maps each process name to the address of its metrics
	// listener (GRIDCRAWL_METRICS_LISTEN).
	metrics map[string]string
}

type clusterProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for
}

func newCluster(t *testing.T, backendEnv []string, resolve string) *gridCluster {
	t.Helper()
	addr := freeAddr(t) // never one a metrics listener is handed too
	suffix := randSuffix()
	c := &gridCluster{t: t, bins: builtBinaries(t), token: "test-token-" + suffix, procs: map[string]*clusterProc{}, logs: t.TempDir(), api: "http://" + addr,
		metrics: map[string]string{}}
	c.env = append(append([]string{}, backendEnv...),
		"GRIDCRAWL_ES_PREFIX=gridtest-"+suffix, "GRIDCRAWL_S3_BUCKET=gridtest-"+suffix,
		"GRIDCRAWL_API_TOKEN="+c.token, "GRIDCRAWL_LISTEN="+addr,
		"GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE="+resolve,
		"GRIDCRAWL_RECOVERY_LEASE=5s", "GRIDCRAWL_RECOVERY_INTERVAL=1s", "GRIDCRAWL_WARC_FLUSH_INTERVAL=50ms", "GRIDCRAWL_FETCH_RETRY_DELAY=100ms",
		"GRIDCRAWL_LOADER_REDELIVERY_GRACE=1s", // 30 s by default; the grace has its own test in the loader
		"GRIDCRAWL_DATA="+t.TempDir(), "GRIDCRAWL_LOG_LEVEL=debug")
	t.Cleanup(func() { deleteESIndices(t, "gridtest-"+suffix) }) // after the processes stopped
	t.Cleanup(func() {
		for name := range c.procs {
			c.stop(name, syscall.SIGKILL)
		}
		if dir := os.Getenv("GRIDCRAWL_TEST_LOGS"); t.Failed() && dir != "" {
			// Keep every process's log for a look after the run.
			dst := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
			if err := os.CopyFS(dst, os.DirFS(c.logs)); err != nil {
				t.Logf("keep logs: %v", err)
			} else {
				t.Logf("process logs kept in %s", dst)
			}
		}
		if t.Failed() {
			for _, f := range []string{"mcp", "loader-1", "crawler-1"} {
				b, _ := os.ReadFile(filepath.Join(c.logs, f+".log"))
				lines := strings.Split(string(b), "\n")
				t.Logf("last lines of %s:\n%s", f, strings.Join(lines[max(0, len(lines)-15):], "\n"))
			}
		}
	})
	return c
}

// start runs service (mcp, loader, crawler) under name.
func (c *gridCluster) start(name, service string) {
	c.t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(c.bins, service))
	cmd.Env = append(os.Environ(), c.env...)
	if c.metrics[name] == "" {
		c.metrics[name] = freeAddr(c.t)
	}
	cmd.Env = append(cmd.Env, "GRIDCRAWL_METRICS_LISTEN="+c.metrics[name])
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &clusterProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs[name] = p
	if service == "mcp" {
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get(c.api + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("mcp did not answer /healthz")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// freeAddr returns a loopback address with a port free at the time.
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		// The kernel may hand a closed port out again: two processes given
		// one metrics address would have one answer for both (a test saw
		// the loaders' requests counted twice).
		if _, seen := handedAddrs.LoadOrStore(addr, true); !seen {
			return addr
		}
	}
}

// handedAddrs are the addresses freeAddr returned in this test process.
var handedAddrs sync.Map

func (c *gridCluster) stop(name string, sig syscall.Signal) {
	p := c.procs[name]
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	delete(c.procs, name)
}

func (c *gridCluster) startAll() {
	c.start("mcp", "mcp")
	c.start("loader-1", "loader")
	c.start("loader-2", "loader")
	c.start("crawler-1", "crawler")
	c.start("crawler-2", "crawler")
}

func (c *gridCluster) do(method, path string, body, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.api+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0 // MCP may be down during a fault test
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// esPendingCount runs the plain termination query of README.md.
func esPendingCount(t *testing.T, esURL, prefix, crawlID string) int64 {
	t.Helper()
	return esCount(t, esURL, prefix, fmt.Sprintf(`{"query":{"bool":{"filter":[{"term":{"crawl_id":%q}},{"terms":{"status":["to-be-loaded","to-be-parsed","to-be-indexed"]}}]}}}`, crawlID))
}

// esRecordCount is the number of records of crawlID the transaction index
// shows without a refresh.
func esRecordCount(t *testing.T, esURL, prefix, crawlID string) int64 {
	t.Helper()
	return esCount(t, esURL, prefix, fmt.Sprintf(`{"query":{"term":{"crawl_id":%q}}}`, crawlID))
}

// esCount runs the _count query q on the transaction index, without a
// refresh.
func esCount(t *testing.T, esURL, prefix, q string) int64 {
	t.Helper()
	resp, err := http.Post(esURL+"/"+prefix+"-transactions/_count", "application/json", strings.NewReader(q))
	if err != nil {
		t.Fatalf("es _count: %v", err)
	}
	defer resp.Body.Close()
	var r struct {
		Count int64 `json:"count"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&r) != nil {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("es _count = %d: %s", resp.StatusCode, b)
	}
	return r.Count
}

// esDocument reads the document id from Elasticsearch's web index as
// stored (_source), checks that it holds YaCy's mandatory fields and
// nothing but Document's fields, and decodes it.
func esDocument(t *testing.T, esURL, prefix, id string) contracts.Document {
	t.Helper()
	resp, err := http.Get(esURL + "/" + prefix + "-web/_doc/" + url.PathEscape(id))
	if err != nil {
		t.Fatalf("es get document %s: %v", id, err)
	}
	defer resp.Body.Close()
	var got struct {
		Source json.RawMessage `json:"_source"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&got) != nil {
		t.Fatalf("es get document %s = %d", id, resp.StatusCode)
	}
	var fields map[string]any
	if err := json.Unmarshal(got.Source, &fields); err != nil {
		t.Fatalf("es document %s: %v", id, err)
	}
	for _, f := range yacyMandatory {
		if _, ok := fields[f]; !ok {
			t.Errorf("es document %s has no field %s", id, f)
		}
	}
	// write_id_s is the index's own (the write id of the store, see
	// esindex.Search.Upsert), not a field of the document.
	if _, ok := fields["write_id_s"]; !ok {
		t.Errorf("es document %s has no write_id_s", id)
	}
	delete(fields, "write_id_s")
	source, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	var d contracts.Document
	dec := json.NewDecoder(bytes.NewReader(source))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("es document %s is not a Document: %v", id, err)
	}
	return d
}

func (c *gridCluster) envValue(k string) string {
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// openBackends opens the cluster's real backends in the test process.
func (c *gridCluster) openBackends(t *testing.T) *wire.Set {
	t.Helper()
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	set, err := wire.Open(t.Context(), cfg.Backends, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

func TestGridModeEndToEnd(t *testing.T) {
	// A vhost of its own: contracts other tests leave in the default one
	// would be consumed here, and dead-lettered (checkMetrics counts them).
	env, _ := ownVhost(t, realBackends(t))
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	const depth = 4
	exp := site.Expect(depth)
	c := newCluster(t, env, site.Resolve())
	c.startAll()

	p := contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1}, Collection: e2eCollections}
	crawlStart := time.Now()
	var created contracts.CreateCrawlResponse
	if code := c.do(http.MethodPost, "/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	esURL, prefix := c.envValue("GRIDCRAWL_ES_URL"), c.envValue("GRIDCRAWL_ES_PREFIX")
	var st contracts.CrawlStatus
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c.do(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st)
		pending := esPendingCount(t, esURL, prefix, created.CrawlID)
		// Until a refresh shows the crawl's first records, there is
		// nothing to count: zero pending means something only then.
		seen := esRecordCount(t, esURL, prefix, created.CrawlID) > 0
		if st.Documents < st.Counts[contracts.Indexed] {
			t.Fatalf("%d indexed but %d documents", st.Counts[contracts.Indexed], st.Documents)
		}
		if st.State == contracts.CrawlFinished {
			if pending != 0 {
				t.Fatalf("MCP reports finished while the _count query finds %d pending records", pending)
			}
			break
		}
		if pending == 0 && seen {
			// Zero pending is final: MCP's finish check (nudged by the
			// indexer) marks the crawl finished, and nothing becomes pending
			// again meanwhile.
			for st.State != contracts.CrawlFinished {
				if n := esPendingCount(t, esURL, prefix, created.CrawlID); n != 0 {
					t.Fatalf("_count query found 0 pending records, then %d", n)
				}
				if time.Now().After(deadline) {
					t.Fatalf("_count query finds 0 pending while MCP reports %s: %v", st.State, st.Counts)
				}
				time.Sleep(20 * time.Millisecond)
				c.do(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished: %v", st.Counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	set := c.openBackends(t)
	ctx := t.Context()
	id := created.CrawlID
	if got, want := st.Counts[contracts.Indexed], int64(len(exp.Indexed)); got != want {
		t.Errorf("indexed = %d, want %d", got, want)
	}
	if got, want := st.Documents, int64(len(exp.Indexed)); got != want {
		t.Errorf("documents = %d, want %d", got, want)
	}
	for _, u := range exp.Indexed {
		r, err := set.Tx.Get(ctx, txindex.Key(id, u))
		if err != nil || r.Status != contracts.Indexed {
			t.Errorf("record %s = %q, %v; want indexed", u, r.Status, err)
			continue
		}
		rc, err := set.Assets.Get(ctx, r.Asset.Key, r.Asset.Offset, r.Asset.Length)
		if err != nil {
			t.Errorf("WARC record of %s: %v", u, err)
			continue
		}
		rec, err := warc.ReadRecord(rc, 64<<20)
		rc.Close()
		if err != nil || rec.Header.Get("WARC-Type") != "response" || rec.Header.Get("WARC-Target-URI") != u {
			t.Errorf("WARC record of %s: type %q uri %q err %v", u, rec.Header.Get("WARC-Type"), rec.Header.Get("WARC-Target-URI"), err)
			continue
		}
		if code, _, _, err := warc.ParseHTTPResponse(rec.Block); err != nil || code != http.StatusOK {
			t.Errorf("HTTP response in WARC record of %s: %d, %v", u, code, err)
		}
		checkDocument(t, u, esDocument(t, esURL, prefix, r.Key), exp, r, crawlStart)
	}
	for _, u := range exp.Redirected {
		if r, err := set.Tx.Get(ctx, txindex.Key(id, u)); err != nil || r.Status != contracts.Redirected {
			t.Errorf("record %s = %q, %v; want redirected", u, r.Status, err)
		}
	}
	for _, u := range exp.Failed {
		if r, err := set.Tx.Get(ctx, txindex.Key(id, u)); err != nil || r.Status != contracts.Failed {
			t.Errorf("record %s = %q, %v; want failed", u, r.Status, err)
		}
	}
	// The start host's /sitemap.xml probe, read back from Elasticsearch
	// with its sitemap kind, and archived like any fetch.
	for _, u := range exp.SitemapProbes {
		if r, err := set.Tx.Get(ctx, txindex.Key(id, u)); err != nil || r.Status != contracts.Sitemap || r.Sitemap != txindex.SitemapProbe ||
			r.HTTPStatus != http.StatusNotFound || r.Asset.Key == "" {
			t.Errorf("sitemap probe %s = %q kind %q http %d asset %q, %v; want sitemap, probe, 404, archived", u, r.Status, r.Sitemap, r.HTTPStatus, r.Asset.Key, err)
		}
	}
	requested := map[string]int{}
	for _, r := range site.Requests() {
		requested[r.URL]++
	}
	for _, u := range exp.NeverFetched {
		if requested[u] > 0 {
			t.Errorf("%s fetched %d times, must never be", u, requested[u])
		}
	}
	c.checkMetrics(t, site.Requests(), st)
}

// checkMetrics scrapes every process of the cluster: the loaders' request
// counters add up to the requests in the web server's log, no contract was
// dead-lettered, MCP's /metrics (behind the token) counts the crawl's
// indexed pages, and every process is ready.
func (c *gridCluster) checkMetrics(t *testing.T, log []websim.Request, st contracts.CrawlStatus) {
	t.Helper()
	var pages, robots float64
	for _, r := range log {
		if r.Path == "/robots.txt" {
			robots++
		} else {
			pages++
		}
	}
	var gotPages, gotRobots, dead float64
	for _, name := range slices.Sorted(maps.Keys(c.procs)) {
		addr := c.metrics[name]
		s := metricstest.Get(t, "http://"+addr+"/metrics", "")
		if strings.HasPrefix(name, "loader") {
			n, _ := s.Sum("gridcrawl_loader_requests_total", map[string]string{"kind": "page", "code": "!error"})
			r, _ := s.Sum("gridcrawl_loader_requests_total", map[string]string{"kind": "robots", "code": "!error"})
			gotPages, gotRobots = gotPages+n, gotRobots+r
		}
		d, ok := s.Sum("gridcrawl_queue_dead_lettered_total", nil)
		if !ok {
			t.Errorf("%s: /metrics has no gridcrawl_queue_dead_lettered_total", name)
		}
		dead += d
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Errorf("%s /readyz: %v", name, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s /readyz = %d, want 200", name, resp.StatusCode)
		}
	}
	if gotPages != pages || gotRobots != robots {
		t.Errorf("loaders counted %v page and %v robots.txt requests; the web server's log has %v and %v", gotPages, gotRobots, pages, robots)
	}
	if dead != 0 {
		t.Errorf("%v contracts dead-lettered, want 0", dead)
	}
	if resp, err := http.Get(c.api + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("MCP /metrics without the token = %d, want 401", resp.StatusCode)
		}
	}
	s := metricstest.Get(t, c.api+"/metrics", c.token)
	if n, _ := s.Sum("gridcrawl_mcp_documents_indexed_total", nil); n != float64(st.Counts[contracts.Indexed]) {
		t.Errorf("MCP counted %v pages indexed, the crawl %d", n, st.Counts[contracts.Indexed])
	}
	for _, q := range []string{contracts.QueueLoader, contracts.QueueCrawler, contracts.QueueIndex} {
		if n, ok := s.Sum("gridcrawl_queue_messages", map[string]string{"queue": q + ".dead"}); !ok || n != 0 {
			t.Errorf("MCP reports %v messages (present %v) in the dead-letter queues of %s, want 0", n, ok, q)
		}
	}
}

// TestGridModeFaults kills one process at a time with SIGKILL mid-crawl
// (a loader, a crawler, MCP), restarts it, and checks that each crawl still
// finishes with every page of the web indexed exactly once.
func TestGridModeFaults(t *testing.T) {
	env := realBackends(t)
	for _, victim := range []string{"loader-1", "crawler-1", "mcp"} {
		t.Run(victim, func(t *testing.T) {
			faultCrawl(t, env, func(c *gridCluster) {
				service := strings.TrimSuffix(strings.TrimSuffix(victim, "-1"), "-2")
				c.stop(victim, syscall.SIGKILL)
				c.start(victim, service)
			})
		})
	}
}

// TestGridModeBrokerRestart restarts RabbitMQ mid-crawl. It disrupts every
// other user of the broker, so scripts/test.sh runs it on its own.
func TestGridModeBrokerRestart(t *testing.T) {
	env := realBackends(t)
	if os.Getenv("GRIDCRAWL_RESTART_BROKER") != "1" {
		t.Skip("set GRIDCRAWL_RESTART_BROKER=1 (scripts/test.sh runs it alone)")
	}
	script, err := filepath.Abs("../../../scripts/services/rabbitmq.sh")
	if err != nil {
		t.Fatal(err)
	}
	faultCrawl(t, env, func(c *gridCluster) {
		for _, step := range []string{"stop", "start", "check"} {
			out, err := exec.Command(script, step).CombinedOutput()
			if err != nil {
				t.Fatalf("rabbitmq.sh %s: %v\n%s", step, err, out)
			}
		}
	})
}

func faultCrawl(t *testing.T, env []string, fault func(*gridCluster)) {
	t.Helper()
	web, starts, want := startWeb(t, websim.WebConfig{Hosts: 10, PagesPerHost: 30, LinksPerPage: 6, CrossHostLinks: 2, Seed: 11}, 3)
	c := newCluster(t, env, web.Resolve())
	c.startAll()
	p := contracts.Profile{StartURLs: starts, MaxDepth: contracts.MaxDepthLimit, Scope: contracts.ScopeDomain, Sitemaps: new(bool), // the oracle is the link graph
		Politeness: contracts.Politeness{MinDelayMS: 80, MaxDelayMS: 80, DelayFactor: 1}}
	var created contracts.CreateCrawlResponse
	if code := c.do(http.MethodPost, "/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st contracts.CrawlStatus
		c.do(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st)
		if st.State == contracts.CrawlFinished {
			t.Fatalf("crawl finished before the fault; make the web slower")
		}
		if st.Counts[contracts.Indexed] >= int64(len(want)/4) {
			t.Logf("fault at %v", st.Counts)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %v", st.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fault(c)
	var st contracts.CrawlStatus
	deadline = time.Now().Add(4 * time.Minute)
	for st.State != contracts.CrawlFinished {
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished after the fault: %v", st.Counts)
		}
		time.Sleep(100 * time.Millisecond)
		c.do(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st)
	}
	set := c.openBackends(t)
	ctx := context.Background()
	allIndexed(t, set.Tx, created.CrawlID, want, nil)
	if n, err := set.Search.Count(ctx, created.CrawlID); err != nil || n != int64(len(want)) {
		t.Errorf("documents = %d (%v), want %d", n, err, len(want))
	}
}

// startCrawl submits p to the cluster's MCP and returns the crawl id.
func (c *gridCluster) startCrawl(p contracts.Profile) string {
	c.t.Helper()
	var created contracts.CreateCrawlResponse
	if code := c.do(http.MethodPost, "/api/v1/crawls", p, &created); code != http.StatusCreated {
		c.t.Fatalf("POST crawl = %d", code)
	}
	return created.CrawlID
}

// waitFetched polls crawl id until at least n of its records are past
// to-be-loaded and returns its status then. It fails if the crawl stops
// running first (the web is too fast for what comes next, named by before)
// or makes no such progress within a minute.
func (c *gridCluster) waitFetched(id string, n int64, before string) contracts.CrawlStatus {
	c.t.Helper()
	var st contracts.CrawlStatus
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
		if st.State != contracts.CrawlRunning {
			c.t.Fatalf("crawl %s before %s; make the web slower", st.State, before)
		}
		if fetchedRecords(st) >= n {
			return st
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no progress: %v", st.Counts)
		}
	}
}

// allIndexed checks that every record of crawl id is indexed, calls each
// (when not nil) with it, and compares the crawled URLs with want, sorted.
func allIndexed(t *testing.T, tx txindex.Index, id string, want []string, each func(txindex.Record)) {
	t.Helper()
	var got []string
	for after := ""; ; {
		recs, err := tx.List(t.Context(), id, "", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			after = r.Key
			got = append(got, r.URL)
			if r.Status != contracts.Indexed {
				t.Errorf("record %s = %s (%s), want indexed", r.URL, r.Status, r.Error)
				continue
			}
			if each != nil {
				each(r)
			}
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("crawled URLs differ from the web (-want +got):\n%s", diff)
	}
}

// startWeb serves a simulated web of cfg for the test and returns it, its
// first starts start URLs and the URLs a crawl of any depth from them must
// index (the oracle).
func startWeb(t *testing.T, cfg websim.WebConfig, starts int) (*websim.Web, []string, []string) {
	t.Helper()
	web := websim.NewWeb(cfg)
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	s := web.StartURLs()[:starts]
	return web, s, expectedWeb(web, s, contracts.MaxDepthLimit)
}
