package grid

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestOfflineReadsAsRunningGrid: every read command prints the same on a
// data directory no grid runs on (MCP's handler served in process) as
// through the grid that grid up then runs there, and a full disk of the
// directory is reported by grid status offline in the disk's own words.
func TestOfflineReadsAsRunningGrid(t *testing.T) {
	site := newCLISite(t, map[string]cliPage{
		"/":        {200, html("/a", "/missing"), ""},
		"/a":       {200, html(), ""},
		"/missing": {404, "gone", ""},
	})
	site.unblock()
	dir := cliEnv(t)
	code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", "--json", site.url("/"))
	if code != 0 {
		t.Fatalf("grid crawl = %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	id := crawlIDOf(t, stdout)
	commands := [][]string{
		{"status"},
		{"status", "--json", id},
		{"search", "words"},
		{"search", "--json", "--crawl", id, "words"},
		{"urls", id},
		{"urls", "--json", "--failed", id},
		{"report", "hosts", id},
		{"report", "--json", "status-codes", id},
		{"export", "segments", id},
		{"export", "cdxj", id},
	}
	read := func(args []string) string {
		t.Helper()
		code, stdout, stderr := runCLI(t.Context(), append(append([]string{}, args...), "--data", dir)...)
		if code != 0 || stderr != "" {
			t.Fatalf("grid %v = %d, stderr %q", args, code, stderr)
		}
		return stdout
	}
	offline := map[int]string{}
	for i, args := range commands {
		offline[i] = read(args)
	}
	for _, want := range []string{"finished", "2 results", "404", "127.0.0.1"} {
		if !strings.Contains(strings.Join([]string{offline[0], offline[2], offline[5], offline[6]}, "\n"), want) {
			t.Errorf("offline reads say nothing of %q:\n%s", want, strings.Join([]string{offline[0], offline[2], offline[5], offline[6]}, "\n"))
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	up := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(ctx, "up", "--data", dir, "--listen", "127.0.0.1:0")
		up <- code
	}()
	for _, err := os.Stat(filepath.Join(dir, addrFile)); err != nil; _, err = os.Stat(filepath.Join(dir, addrFile)) {
		select {
		case code := <-up:
			t.Fatalf("grid up = %d before it listened", code)
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i, args := range commands {
		if got := read(args); got != offline[i] {
			t.Errorf("grid %v through the running grid:\n%s\nwant what it printed offline:\n%s", args, got, offline[i])
		}
	}
	cancel()
	if code := <-up; code != 0 {
		t.Errorf("grid up = %d, want 0", code)
	}

	t.Setenv("GRIDCRAWL_MIN_FREE_DISK", "99.99%")
	code, _, stderr = runCLI(t.Context(), "status", "--data", dir)
	if code != 0 || strings.Count(stderr, "grid status: ") != 1 || !strings.Contains(stderr, "data directory "+dir) ||
		!strings.Contains(stderr, "GRIDCRAWL_MIN_FREE_DISK") || strings.Contains(stderr, "waits for its backends") {
		t.Errorf("grid status offline on a full disk = %d, stderr %q; want the disk's error once", code, stderr)
	}
}

// crawlIDOf returns the crawl id of the status grid crawl --json printed on
// the last line of stdout.
func crawlIDOf(t *testing.T, stdout string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var st contracts.CrawlStatus
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &st); err != nil || st.CrawlID == "" {
		t.Fatalf("grid crawl --json stdout %q: no crawl status on the last line (%v)", stdout, err)
	}
	return st.CrawlID
}
