package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// TestReadyzAndMetricsAuth checks MCP's /readyz and /metrics with a
// token: /readyz answers everyone but tells the backends' errors only to
// authorized clients; /metrics needs the token.
func TestReadyzAndMetricsAuth(t *testing.T) {
	set, err := wire.Open(t.Context(), wire.Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	const token = "secret"
	m := New(Config{Token: token, MetricsCache: time.Second}, Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets, HCF: set.HCF})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, path, token string
		closeQueue        bool
		code              int
		body              string // the body must contain it
	}{
		{"metrics without token", "/metrics", "", false, http.StatusUnauthorized, "API token"},
		{"metrics with token", "/metrics", token, false, http.StatusOK, "gridcrawl_crawl_counts_errors_total 0"},
		{"ready without token", "/readyz", "", false, http.StatusOK, `"status":"ready"`},
		{"unready without token", "/readyz", "", true, http.StatusServiceUnavailable, `"queue":"unreachable"`},
		{"unready with token", "/readyz", token, true, http.StatusServiceUnavailable, `closed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.closeQueue {
				set.Queue.Close()
			}
			code, body := get(tt.path, tt.token)
			if code != tt.code || !strings.Contains(body, tt.body) {
				t.Errorf("GET %s = %d %q, want %d with %q", tt.path, code, body, tt.code, tt.body)
			}
		})
	}
}

// TestFinishLoggedOnceWithCounts runs the finish check of a crawl out of
// work from several goroutines and several times: one "crawl finished"
// line, with the crawl's counts.
func TestFinishLoggedOnceWithCounts(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	// Sitemaps off: settle makes every record indexed, the /sitemap.xml
	// probe too, and the counts below are the pages'.
	id := l.create(t, contracts.Profile{StartURLs: []string{"http://a.test/1", "http://a.test/2"}, Sitemaps: new(bool)})
	l.settle(t, id)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := l.co.CheckFinished(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := l.co.CheckFinished(t.Context()); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	l.log.mu.Lock()
	sc := bufio.NewScanner(bytes.NewReader(l.log.b.Bytes()))
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil && e["msg"] == "crawl finished" && e["crawl_id"] == id {
			lines = append(lines, e)
		}
	}
	l.log.mu.Unlock()
	if len(lines) != 1 {
		t.Fatalf("%d \"crawl finished\" lines, want 1", len(lines))
	}
	counts, _ := lines[0]["counts"].(map[string]any)
	if counts["indexed"] != float64(2) || counts["total"] != float64(2) || counts["failed"] != float64(0) {
		t.Errorf("logged counts = %v, want indexed 2, failed 0, total 2", counts)
	}
}
