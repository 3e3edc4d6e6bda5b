package grid

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics/metricstest"
)

// documentedFamilies are the metric families README documents; an embedded
// grid that has crawled must expose every one of them.
var documentedFamilies = []string{
	"gridcrawl_loader_requests_total",
	"gridcrawl_loader_fetch_duration_seconds",
	"gridcrawl_loader_response_size_bytes",
	"gridcrawl_loader_urls_total",
	"gridcrawl_loader_robots_fetches_total",
	"gridcrawl_loader_politeness_delay_seconds",
	"gridcrawl_loader_host_groups",
	"gridcrawl_loader_queued_urls",
	"gridcrawl_loader_warc_bytes_total", "gridcrawl_loader_dedup_revisits_total", "gridcrawl_loader_dedup_entries", "gridcrawl_loader_dedup_refused_total",
	"gridcrawl_loader_parked_urls_total", "gridcrawl_loader_filed_urls_total", "gridcrawl_loader_rebuilt_urls_total",
	"gridcrawl_loader_rendered_pages_total",
	"gridcrawl_loader_render_duration_seconds",
	"gridcrawl_loader_browser_tabs_in_use",
	"gridcrawl_loader_browser_restarts_total",
	"gridcrawl_loader_browser_memory_bytes",
	"gridcrawl_loader_browser_escaped_requests_total",
	"gridcrawl_crawler_pages_total",
	"gridcrawl_crawler_links_enqueued_total",
	"gridcrawl_mcp_documents_indexed_total",
	"gridcrawl_mcp_documents_stored_total",
	"gridcrawl_mcp_recovered_urls_total",
	"gridcrawl_mcp_due_urls_total",
	"gridcrawl_crawls",
	"gridcrawl_crawl_urls",
	"gridcrawl_crawl_counts_errors_total",
	"gridcrawl_queue_published_total",
	"gridcrawl_queue_consumed_total",
	"gridcrawl_queue_redelivered_total",
	"gridcrawl_queue_acked_total",
	"gridcrawl_queue_retried_total",
	"gridcrawl_queue_postponed_total",
	"gridcrawl_queue_dead_lettered_total",
	"gridcrawl_queue_messages",
	"gridcrawl_backend_operation_duration_seconds",
	"gridcrawl_backend_operation_errors_total",
}

// TestEmbeddedMetrics crawls the test site on an embedded grid and checks
// its /metrics against the site's request log, the oracle and the
// transaction index; and that the Grafana dashboard asks only for metrics
// that a real run exposes.
func TestEmbeddedMetrics(t *testing.T) {
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	const depth = 4
	exp := site.Expect(depth)
	t.Setenv("GRIDCRAWL_METRICS_CACHE", "0s") // every scrape reads the counts
	cfg := testConfig(t, t.TempDir(), site.Resolve())
	g, api := startGrid(t, cfg)

	var created contracts.CreateCrawlResponse
	// Sitemaps off: the oracle is the link graph.
	p := contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey}}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST /api/v1/crawls = %d", code)
	}
	st := waitFinished(t, api, created.CrawlID, 2*time.Minute)
	if st.State != contracts.CrawlFinished {
		t.Fatalf("crawl state = %s, want finished", st.State)
	}
	// Read the crawl log and a report, so that their backend calls are timed.
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID+"/urls?status=failed", nil, nil); code != http.StatusOK {
		t.Fatalf("GET urls = %d", code)
	}
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID+"/reports/hosts", nil, nil); code != http.StatusOK {
		t.Fatalf("GET hosts report = %d", code)
	}
	s := metricstest.Get(t, api+"/metrics", "")

	t.Run("families", func(t *testing.T) {
		fams := s.Families()
		for _, f := range documentedFamilies {
			if !slices.Contains(fams, f) {
				t.Errorf("/metrics has no family %s", f)
			}
		}
		for _, f := range fams {
			if strings.HasPrefix(f, "gridcrawl_") && !slices.Contains(documentedFamilies, f) {
				t.Errorf("/metrics has family %s, which is not documented", f)
			}
		}
	})

	var pageReqs, robotsReqs float64
	for _, r := range site.Requests() {
		if r.Path == "/robots.txt" {
			robotsReqs++
		} else {
			pageReqs++
		}
	}
	sum := func(name string, match map[string]string) float64 {
		v, _ := s.Sum(name, match)
		return v
	}
	counts, err := g.Backends.Tx.Counts(t.Context(), created.CrawlID)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"page requests = the site's log", sum("gridcrawl_loader_requests_total", map[string]string{"kind": "page", "code": "!error"}), pageReqs},
		{"robots.txt requests = the site's log", sum("gridcrawl_loader_requests_total", map[string]string{"kind": "robots", "code": "!error"}), robotsReqs},
		{"page responses timed", sum("gridcrawl_loader_fetch_duration_seconds_count", map[string]string{"kind": "page"}), pageReqs},
		{"page responses sized", sum("gridcrawl_loader_response_size_bytes_count", map[string]string{"kind": "page"}), pageReqs},
		{"URLs fetched, redirected or failed by status = the oracle's fetched",
			sum("gridcrawl_loader_urls_total", map[string]string{"outcome": "fetched"}) +
				sum("gridcrawl_loader_urls_total", map[string]string{"outcome": "redirected"}) +
				sum("gridcrawl_loader_urls_total", map[string]string{"outcome": "http-error"}), float64(len(exp.Fetched))},
		// The loader stores every 3xx answer; the crawler fails the one that closes a loop.
		{"URLs redirected = the oracle's", sum("gridcrawl_loader_urls_total", map[string]string{"outcome": "redirected"}), float64(len(exp.Redirected) + len(exp.RedirectLoops))},
		{"URLs failed by status = the oracle's", sum("gridcrawl_loader_urls_total", map[string]string{"outcome": "http-error"}), float64(len(exp.HTTPFailed))},
		{"URLs disallowed by robots.txt = the oracle's", sum("gridcrawl_loader_urls_total", map[string]string{"outcome": "robots-disallowed"}), float64(len(exp.RobotsDenied))},
		{"crawler redirected = the oracle's", sum("gridcrawl_crawler_pages_total", map[string]string{"status": "redirected"}), float64(len(exp.Redirected))},
		{"documents indexed = indexed records", sum("gridcrawl_mcp_documents_indexed_total", nil), float64(counts[contracts.Indexed])},
		{"contracts dead-lettered", sum("gridcrawl_queue_dead_lettered_total", nil), 0},
		{"finished crawls", sum("gridcrawl_crawls", map[string]string{"state": "finished"}), 1},
		{"scheduler drained", sum("gridcrawl_loader_queued_urls", nil), 0},
		{"dead-letter queues empty", sum("gridcrawl_queue_messages", map[string]string{"queue": contracts.QueueLoader + ".dead"}) +
			sum("gridcrawl_queue_messages", map[string]string{"queue": contracts.QueueCrawler + ".dead"}) +
			sum("gridcrawl_queue_messages", map[string]string{"queue": contracts.QueueIndex + ".dead"}), 0},
	}
	for _, s := range contracts.Statuses {
		checks = append(checks, struct {
			name      string
			got, want float64
		}{"crawl_urls " + string(s) + " = the index's count", sum("gridcrawl_crawl_urls", map[string]string{"crawl_id": created.CrawlID, "status": string(s)}), float64(counts[s])})
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if n := sum("gridcrawl_queue_consumed_total", map[string]string{"queue": contracts.QueueLoader}); n == 0 {
		t.Errorf("no loader contract counted consumed")
	}
	for _, op := range []string{"transition", "find", "hosts-report"} {
		if n := sum("gridcrawl_backend_operation_duration_seconds_count", map[string]string{"backend": "txindex", "operation": op}); n == 0 {
			t.Errorf("no transaction index %s timed", op)
		}
	}

	t.Run("readyz", func(t *testing.T) {
		var rd metrics.Readiness
		if code := apiDo(t, http.MethodGet, api+"/readyz", nil, &rd); code != http.StatusOK || rd.Status != "ready" || len(rd.Failing) != 0 {
			t.Errorf("/readyz = %d %+v, want 200 ready", code, rd)
		}
		for _, b := range []string{"queue", "txindex", "profiles", "assets", "search"} {
			if rd.Backends[b] != "ok" {
				t.Errorf("/readyz backend %s = %q, want ok", b, rd.Backends[b])
			}
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		names := s.Names()
		for _, e := range dashboardExprs(t, "../../../deploy/grafana/dashboards/gridcrawl.json") {
			for _, n := range metricNameRE.FindAllString(e, -1) {
				if !slices.Contains(names, n) {
					t.Errorf("dashboard expression %q asks for %s, which a real run does not expose", e, n)
				}
			}
		}
	})
}

// metricNameRE finds gridcrawl metric names in a PromQL expression.
var metricNameRE = regexp.MustCompile(`\bgridcrawl_[a-z_]+\b`)

// dashboardExprs returns the PromQL expressions of a Grafana dashboard's
// panels, failing when the file is not valid JSON or holds none.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if tg.Expr != "" {
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	if len(exprs) == 0 {
		t.Fatalf("%s has no panel expressions", path)
	}
	return exprs
}
