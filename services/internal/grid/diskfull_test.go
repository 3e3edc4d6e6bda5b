package grid

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// smallDisk mounts a tmpfs of size (mount's syntax: "16m") on a new
// directory and returns it; the test grows it with growDisk. Without the
// right to mount, the test fails when backends are required and skips
// otherwise.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := "cannot mount a tmpfs (needs root): " + strings.TrimSpace(string(out)) + ": " + err.Error()
		if os.Getenv("GRIDCRAWL_REQUIRE_BACKENDS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// growDisk gives the tmpfs at dir a new size: space is freed.
func growDisk(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s: %v: %s", dir, err, out)
	}
}

// lockedBuffer is a log sink for a test that reads it while the grid logs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEmbeddedDiskFull crawls a simulated web of 20 KB pages into a data
// directory on a small tmpfs that it fills: the grid stops taking work and
// says why (/readyz names the disk, new crawls are refused with 507, the
// log says so), nothing fails or is dead-lettered for it, and once the
// file system is grown the crawl finishes with every page indexed once,
// fetched once, and every WARC segment readable to its end. In "write
// failures" no floor is set: only the writes' ENOSPC and SQLITE_FULL tell
// the grid that the disk is full; in "floor" the free-space floor stops it
// first.
func TestEmbeddedDiskFull(t *testing.T) {
	cases := []struct {
		name  string
		floor string
	}{
		{"write failures", "0"},
		{"floor", "3MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			web, starts, want := startWeb(t, websim.WebConfig{Hosts: 8, PagesPerHost: 80, LinksPerPage: 6, CrossHostLinks: 2,
				PageBytes: 20 << 10, Seed: 21, RecordRequests: true}, 3)
			dir := smallDisk(t, "16m")
			cfg := testConfig(t, dir, web.Resolve())
			cfg.Backends.MinFreeDisk = tc.floor
			cfg.Loader.Gzip = false // whole 20 KB records: appends fill the disk too

			logs := &lockedBuffer{}
			log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g, err := Open(cfg, log, ln)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("grid run: %v", err)
				}
				if t.Failed() {
					t.Logf("grid log:\n%s", logs.String())
				}
			})
			api := "http://" + ln.Addr().String()
			p := contracts.Profile{StartURLs: starts, MaxDepth: contracts.MaxDepthLimit, Scope: contracts.ScopeDomain, Sitemaps: new(bool), // the oracle is the link graph
				Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 5, DelayFactor: 1}}
			var created contracts.CreateCrawlResponse
			if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
				t.Fatalf("POST crawl = %d", code)
			}
			id := created.CrawlID

			// The disk fills: /readyz names it, and the grid's services
			// wait for it (the log says so).
			const warning = "msg=\"backend unavailable: work waits for it\" backends=disk"
			var rd metrics.Readiness
			var st contracts.CrawlStatus
			for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
				rd = metrics.Readiness{}
				code := apiDo(t, http.MethodGet, api+"/readyz", nil, &rd)
				if code == http.StatusServiceUnavailable && strings.Join(rd.Failing, ",") == "disk" && strings.Contains(logs.String(), warning) {
					break
				}
				apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st)
				if st.State != contracts.CrawlRunning {
					t.Fatalf("crawl %s before the disk filled: the web is too small for the disk (%v)", st.State, st.Counts)
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz never named the disk (%d %+v); crawl at %v", code, rd, st.Counts)
				}
			}
			if msg := rd.Backends["disk"]; !strings.Contains(msg, "disk full") || !strings.Contains(msg, dir) {
				t.Errorf("/readyz disk = %q, want it to say the disk is full and name %s", msg, dir)
			}
			apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st)
			t.Logf("disk full at %v: %s", st.Counts, rd.Backends["disk"])
			if st.Counts[contracts.Failed] != 0 {
				t.Errorf("%d pages failed on the full disk, want 0", st.Counts[contracts.Failed])
			}

			// New crawls are refused, naming the disk.
			var refused contracts.ErrorResponse
			if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &refused); code != http.StatusInsufficientStorage ||
				!strings.Contains(refused.Error, dir) {
				t.Errorf("POST crawl on a full disk = %d %q, want 507 naming %s", code, refused.Error, dir)
			}

			// grid status says why the crawl does not move.
			if _, _, errOut := runCLI(t.Context(), "status", "--api", api, id); !strings.Contains(errOut, "disk full") || !strings.Contains(errOut, dir) {
				t.Errorf("grid status on a full disk said %q, want the disk full and %s", errOut, dir)
			}

			// Space is freed: the crawl finishes.
			growDisk(t, dir, "512m")
			st = waitFinished(t, api, id, 4*time.Minute)
			if st.State != contracts.CrawlFinished {
				t.Fatalf("crawl %s, want finished: %v", st.State, st.Counts)
			}
			if code := apiDo(t, http.MethodGet, api+"/readyz", nil, &rd); code != http.StatusOK {
				t.Errorf("/readyz after space was freed = %d %+v", code, rd)
			}
			allIndexed(t, g.Backends.Tx, id, want, nil)
			if n, err := g.Backends.Search.Count(t.Context(), id); err != nil || n != int64(len(want)) {
				t.Errorf("documents = %d (%v), want %d", n, err, len(want))
			}
			for _, q := range []string{contracts.QueueLoader, contracts.QueueCrawler, contracts.QueueIndex} {
				if n, err := g.Backends.Queue.Len(t.Context(), queue.DeadLetterQueue(q)); err != nil || n != 0 {
					t.Errorf("dead-letter queue of %s holds %d (%v), want 0", q, n, err)
				}
			}
			requested := map[string]int{}
			for _, r := range web.RequestLog() {
				requested[r.URL]++
			}
			for u, n := range requested {
				if n > 1 && !strings.HasSuffix(u, "/robots.txt") {
					t.Errorf("%s fetched %d times", u, n)
				}
			}

			// Every WARC segment reads to its end: a record cut short by
			// the full disk was cut away.
			responses := 0
			eachWARCRecord(t, g.Backends.Assets, func(rec warc.Record) {
				if rec.Header.Get(warc.FieldType) == warc.TypeResponse {
					responses++
				}
			})
			if responses < len(want) {
				t.Errorf("WARC segments hold %d responses, want at least %d", responses, len(want))
			}

			// The log said so once per outage rather than once per page.
			n := strings.Count(logs.String(), warning)
			t.Logf("%d outage warnings naming the disk; %d log lines at warn or above", n, strings.Count(logs.String(), "\n"))
		})
	}
}
