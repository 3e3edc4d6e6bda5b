package metrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics/metricstest"
)

func scrape(t *testing.T, reg *metrics.Registry) *metricstest.Scrape {
	t.Helper()
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	return metricstest.Get(t, srv.URL, "")
}

func TestRequestLabels(t *testing.T) {
	reg := metrics.New()
	l := reg.Loader()
	l.Request(metrics.KindPage, 200)
	l.Request(metrics.KindPage, 200)
	l.Request(metrics.KindPage, 0)
	l.Request(metrics.KindRobots, 404)
	l.Request(metrics.KindPage, 999) // not a status code: no response worth a label
	s := scrape(t, reg)
	tests := []struct {
		kind, class, code string
		want              float64
	}{
		{"page", "2xx", "200", 2},
		{"page", "error", "error", 2},
		{"robots", "4xx", "404", 1},
		{"robots", "2xx", "200", 0},
	}
	for _, tt := range tests {
		got, _ := s.Sum("gridcrawl_loader_requests_total", map[string]string{"kind": tt.kind, "class": tt.class, "code": tt.code})
		if got != tt.want {
			t.Errorf("requests{kind=%s,class=%s,code=%s} = %v, want %v", tt.kind, tt.class, tt.code, got, tt.want)
		}
	}
}

func TestRobotsResultOf(t *testing.T) {
	tests := []struct {
		status int
		want   metrics.RobotsResult
	}{
		{0, metrics.RobotsError},
		{200, metrics.RobotsOK},
		{204, metrics.RobotsOK},
		{301, metrics.RobotsUnavailable}, // a redirect left after five hops
		{404, metrics.RobotsUnavailable},
		{429, metrics.RobotsUnreachable},
		{500, metrics.RobotsUnreachable},
		{503, metrics.RobotsUnreachable},
	}
	for _, tt := range tests {
		if got := metrics.RobotsResultOf(tt.status); got != tt.want {
			t.Errorf("RobotsResultOf(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestQueueLabels(t *testing.T) {
	reg := metrics.New()
	q := reg.Queue()
	for _, name := range []string{"loader_pending", "loader_pending.07", "loader_pending.07.dead", "crawler_pending", "index_pending", "something"} {
		q.For(name).Published.Inc()
	}
	s := scrape(t, reg)
	for queue, want := range map[string]float64{"loader_pending": 2, "crawler_pending": 1, "index_pending": 1, "other": 2} {
		if got, _ := s.Sum("gridcrawl_queue_published_total", map[string]string{"queue": queue}); got != want {
			t.Errorf("published{queue=%s} = %v, want %v", queue, got, want)
		}
	}
	if got, ok := s.Sum("gridcrawl_queue_dead_lettered_total", map[string]string{"queue": "index_pending"}); !ok || got != 0 {
		t.Errorf("dead_lettered{queue=index_pending} = %v (present %v), want a 0 series before any dead letter", got, ok)
	}
}

// TestRegistrySharedByServices is the embedded grid's case: every service
// asks the one registry for its families, some twice, and each family is
// registered once.
func TestRegistrySharedByServices(t *testing.T) {
	reg := metrics.New()
	if reg.Loader() != reg.Loader() || reg.Queue() != reg.Queue() || reg.MCP() != reg.MCP() {
		t.Fatal("a family set asked for twice is not the same")
	}
	reg.Crawler()
	reg.Backend().Op("txindex", "get")
	var nilReg *metrics.Registry
	nilReg.Loader().URL(metrics.OutcomeFetched) // registered nowhere, and no panic
	if err := nilReg.Register(metrics.LoaderCollector(func() metrics.GroupStates { return metrics.GroupStates{} })); err != nil {
		t.Errorf("nil registry Register = %v", err)
	}
	fams := scrape(t, reg).Families()
	for _, f := range []string{"gridcrawl_loader_urls_total", "gridcrawl_crawler_pages_total", "gridcrawl_mcp_documents_indexed_total",
		"gridcrawl_queue_consumed_total", "gridcrawl_backend_operation_errors_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !slices.Contains(fams, f) {
			t.Errorf("scrape has no family %s", f)
		}
	}
}

func TestMCPCollectorReadsOncePerTTL(t *testing.T) {
	tests := []struct {
		name  string
		ttl   time.Duration
		reads int
	}{
		{"cached", time.Hour, 1},
		{"no cache", 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reads := 0
			read := func(context.Context) (metrics.Snapshot, error) {
				reads++
				return metrics.Snapshot{Crawls: []metrics.CrawlCounts{
					{ID: "a", State: "running", Counts: map[string]int64{"indexed": 3, "to-be-loaded": 2}},
					{ID: "b", State: "finished"},
				}, Queues: map[string]int64{"loader_pending": 7}}, nil
			}
			reg := metrics.New()
			if err := reg.Register(metrics.MCPCollector(read, tt.ttl, time.Minute)); err != nil {
				t.Fatal(err)
			}
			var s *metricstest.Scrape
			for range 3 {
				s = scrape(t, reg)
			}
			if reads != tt.reads {
				t.Errorf("3 scrapes read the crawls %d times, want %d", reads, tt.reads)
			}
			if got, _ := s.Sum("gridcrawl_crawl_urls", map[string]string{"crawl_id": "a", "status": "indexed"}); got != 3 {
				t.Errorf("crawl_urls{a, indexed} = %v, want 3", got)
			}
			if _, ok := s.Sum("gridcrawl_crawl_urls", map[string]string{"crawl_id": "b"}); ok {
				t.Errorf("crawl b without counts has crawl_urls series")
			}
			if got, _ := s.Sum("gridcrawl_queue_messages", map[string]string{"queue": "loader_pending"}); got != 7 {
				t.Errorf("queue_messages{loader_pending} = %v, want 7", got)
			}
			if got, _ := s.Sum("gridcrawl_crawls", map[string]string{"state": "finished"}); got != 1 {
				t.Errorf("crawls{finished} = %v, want 1", got)
			}
		})
	}
}

// TestReadyNamesFailingBackends checks /readyz on real embedded backends:
// ready while they are open, 503 naming those closed.
func TestReadyNamesFailingBackends(t *testing.T) {
	dir := t.TempDir()
	q, err := sqlitequeue.Open(filepath.Join(dir, "queue.db"), sqlitequeue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := sqlitestore.OpenTxIndex(filepath.Join(dir, "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := sqlitestore.OpenProfiles(filepath.Join(dir, "profiles.db"))
	if err != nil {
		t.Fatal(err)
	}
	si, err := sqlitestore.OpenSearch(filepath.Join(dir, "search.db"))
	if err != nil {
		t.Fatal(err)
	}
	as, err := fsassets.Open(filepath.Join(dir, "assets"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close(); si.Close(); as.Close() })
	srv := httptest.NewServer(metrics.ReadyHandler(metrics.BackendChecks(q, tx, ps, as, si)))
	defer srv.Close()
	get := func() (int, metrics.Readiness) {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rd metrics.Readiness
		if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, rd
	}
	code, rd := get()
	if code != http.StatusOK || rd.Status != "ready" || len(rd.Backends) != 5 {
		t.Fatalf("/readyz = %d %+v, want 200 ready with 5 backends", code, rd)
	}
	q.Close()
	tx.Close()
	code, rd = get()
	if code != http.StatusServiceUnavailable || rd.Status != "unready" {
		t.Errorf("/readyz with closed backends = %d %s, want 503 unready", code, rd.Status)
	}
	if diff := cmp.Diff([]string{"queue", "txindex"}, rd.Failing); diff != "" {
		t.Errorf("failing backends (-want +got):\n%s", diff)
	}
	if rd.Backends["search"] != "ok" || rd.Backends["queue"] == "ok" || !strings.Contains(rd.Backends["queue"], "closed") {
		t.Errorf("backends = %v, want search ok and queue's error", rd.Backends)
	}
}
