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

// startGridUp runs grid up on dir, as make run does, until the test ends
// or stop is called, and returns its API address once it serves.
func startGridUp(t *testing.T, dir string) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	up := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(ctx, "up", "--data", dir, "--listen", "127.0.0.1:0")
		up <- code
	}()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if code := <-up; code != 0 {
			t.Errorf("grid up = %d, want 0", code)
		}
	}
	t.Cleanup(stop)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, addrFile)); err == nil && strings.HasPrefix(string(b), "http://") {
			return strings.TrimSpace(string(b)), stop
		}
		select {
		case code := <-up:
			t.Fatalf("grid up = %d before it served", code)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestCrawlAllowNetOnRunningGrid: --allow-net cannot change a grid that
// runs already. grid crawl on a grid that grid up runs without the
// network allowed (make run, then grid crawl --allow-net loopback) exits
// 2 before creating a crawl and names the setting to restart it with
// (GRIDCRAWL_ALLOW_NETS=loopback make run); so does grid crawl --api on a
// grid that does not tell its networks. On a grid that allows the
// network, the crawl runs and grid crawl says the flag changes nothing.
func TestCrawlAllowNetOnRunningGrid(t *testing.T) {
	site := newCLISite(t, map[string]cliPage{"/": {200, html("/a"), ""}, "/a": {200, html(), ""}})
	dir := cliEnv(t)
	t.Setenv("GRIDCRAWL_ALLOW_NETS", "")
	base, stop := startGridUp(t, dir)
	// The same grid by another name: not the one grid.addr names, so it
	// does not tell which networks it allows.
	other := strings.Replace(base, "127.0.0.1", "localhost", 1)
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"on the data directory", []string{"--data", dir},
			[]string{"--allow-net loopback applies only to a grid this command starts, and the grid running on " + dir + " at " + base +
				" allows none (GRIDCRAWL_ALLOW_NETS is not set there), not 127.0.0.0/8, ::1/128: its loader refuses those addresses; no crawl was created.\n",
				"GRIDCRAWL_ALLOW_NETS=loopback make run", "GRIDCRAWL_ALLOW_NETS=loopback grid up --data " + dir}},
		{"at its address", []string{"--api", base}, []string{"the grid running on " + dir + " at " + base + " allows none", "GRIDCRAWL_ALLOW_NETS=loopback make run"}},
		{"at an address that does not tell", []string{"--api", other},
			[]string{"the grid at " + other + " does not tell which networks its loaders allow; no crawl was created.\n",
				"start that grid (its loaders in grid mode) with GRIDCRAWL_ALLOW_NETS=loopback; if it allows them already, run grid crawl without --allow-net"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"crawl", "--min-delay-ms", "0", "--allow-net", "loopback"}, tt.args...), site.url("/"))
			code, stdout, stderr := runCLI(t.Context(), args...)
			if code != 2 {
				t.Errorf("grid %v = %d, want 2\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("grid %v: stderr = %q, want %q in it", args, stderr, w)
				}
			}
			if n := len(crawlList(t, dir).Crawls); n != 0 {
				t.Errorf("grid %v: %d crawls on the grid, want none created", args, n)
			}
		})
	}
	stop()

	t.Setenv("GRIDCRAWL_ALLOW_NETS", "127.0.0.0/8,::1")
	base, _ = startGridUp(t, dir)
	code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", "--allow-net", "loopback", site.url("/"))
	if code != 0 || !strings.Contains(stdout, ": 2 indexed,") ||
		!strings.Contains(stderr, "grid crawl: the grid at "+base+" allows loopback already (GRIDCRAWL_ALLOW_NETS=127.0.0.0/8,::1): --allow-net changes nothing there\n") {
		t.Errorf("grid crawl --allow-net loopback on a grid that allows it = %d, want 0 with 2 indexed and a note\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestReadsOnRunningGrid: grid search --crawl of a crawl the grid does not
// have says so and exits 1 (the search API answers no hits for it); grid
// urls lists the crawl log by time (when each URL reached its status, the
// default), by URL or by key, as --sort says, or says that the grid did
// not list it in that order; it refuses another order.
func TestReadsOnRunningGrid(t *testing.T) {
	site := newCLISite(t, map[string]cliPage{
		"/":  {200, html("/m", "/b", "/z", "/a"), ""},
		"/m": {200, html("/c"), ""},
		"/b": {200, html(), ""},
		"/z": {404, "", ""},
		"/a": {200, html(), ""},
		"/c": {200, html(), ""},
	})
	dir := cliEnv(t)
	base, _ := startGridUp(t, dir)
	code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", "--json", site.url("/"))
	if code != 0 {
		t.Fatalf("grid crawl = %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	id := crawlIDOf(t, stdout)

	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout string // in stdout
		stderr string // stderr, whole
	}{
		{"unknown crawl", []string{"search", "--data", dir, "--crawl", "nosuch", "words"}, 1, "",
			"grid search: no crawl \"nosuch\" (grid status lists the crawls)\n"},
		{"unknown crawl, JSON", []string{"search", "--api", base, "--json", "--crawl", "nosuch", "words"}, 1, "",
			"grid search: no crawl \"nosuch\" (grid status lists the crawls)\n"},
		{"known crawl", []string{"search", "--data", dir, "--crawl", id, "words"}, 0, "5 results for \"words\"", ""},
		{"bad sort", []string{"urls", "--data", dir, "--sort", "size", id}, 2, "",
			"grid urls: invalid --sort \"size\": want time, url or key\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t.Context(), tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || stderr != tt.stderr {
				t.Errorf("grid %v = %d, stdout %q, stderr %q; want %d, %q in stdout, stderr %q", tt.args, code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}

	for _, tt := range []struct {
		name string
		args []string
		by   string
		less func(a, b contracts.URLRecord) bool // a must not come after b
	}{
		// The API's order (time; key for a crawl too large to sort): not checked.
		{"default", nil, "", func(contracts.URLRecord, contracts.URLRecord) bool { return true }},
		{"time", []string{"--sort", "time"}, "time", func(a, b contracts.URLRecord) bool { return !b.StatusTime.Before(a.StatusTime) }},
		{"url", []string{"--sort", "url"}, "url", func(a, b contracts.URLRecord) bool { return a.URL <= b.URL }},
		{"url, limited", []string{"--sort=url", "--limit", "5"}, "url", func(a, b contracts.URLRecord) bool { return a.URL <= b.URL }},
		{"key", []string{"--sort", "key"}, "key", func(a, b contracts.URLRecord) bool { return a.Key <= b.Key }},
	} {
		t.Run("urls "+tt.name, func(t *testing.T) {
			args := append([]string{"urls", "--data", dir, "--json", id}, tt.args...)
			code, stdout, stderr := runCLI(t.Context(), args...)
			var recs []contracts.URLRecord
			dec := json.NewDecoder(strings.NewReader(stdout))
			for dec.More() {
				var r contracts.URLRecord
				if err := dec.Decode(&r); err != nil {
					t.Fatalf("grid %v: %v in stdout %q", args, err, stdout)
				}
				recs = append(recs, r)
			}
			if code != 0 || len(recs) < 5 {
				t.Fatalf("grid %v = %d, %d records, stderr %q; want 0 and the crawl's URLs", args, code, len(recs), stderr)
			}
			sorted := true
			for i := 1; i < len(recs); i++ {
				sorted = sorted && tt.less(recs[i-1], recs[i])
			}
			note := "grid urls: the grid at " + base + " did not list its crawl log by " + tt.by + ": the URLs are in its own order\n"
			switch {
			case sorted && stderr != "":
				t.Errorf("grid %v: in %s order, stderr %q; want nothing on stderr", args, tt.by, stderr)
			case !sorted && stderr != note:
				var urls []string
				for _, r := range recs {
					urls = append(urls, r.StatusTime.Format(time.RFC3339Nano)+" "+r.URL)
				}
				t.Errorf("grid %v: not in %s order:\n%s\nand stderr %q; want the order, or stderr %q", args, tt.by, strings.Join(urls, "\n"), stderr, note)
			}
		})
	}
}

// TestNetListNotIn: the networks of --allow-net that a grid's
// GRIDCRAWL_ALLOW_NETS does not cover, network by network (loopback is
// 127.0.0.0/8 and ::1/128; a prefix is covered by a shorter one that holds
// it).
func TestNetListNotIn(t *testing.T) {
	tests := []struct {
		flag, grid string
		want       string
	}{
		{"loopback", "", "127.0.0.0/8 ::1/128"},
		{"loopback", "127.0.0.0/8", "::1/128"},
		{"loopback", "127.0.0.0/8,::1", ""},
		{"loopback", "loopback,private", ""},
		{"192.168.1.0/24", "private", ""},
		{"10.0.0.0/8", "10.1.0.0/16", "10.0.0.0/8"},
		{"127.0.0.1", "127.0.0.0/8", ""},
		{"private", "192.168.0.0/16", "10.0.0.0/8 172.16.0.0/12 fc00::/7"},
	}
	for _, tt := range tests {
		var l netList
		if err := l.Set(tt.flag); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(l.notIn(tt.grid), " "); got != tt.want {
			t.Errorf("netList(%q).notIn(%q) = %q, want %q", tt.flag, tt.grid, got, tt.want)
		}
	}
}
