package grid

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// buildGrid builds the grid binary once per test binary run.
func buildGrid(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "grid")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/gridcrawl/gridcrawl/services/grid")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build grid: %v\n%s", err, out)
	}
	return bin
}

// expectedWeb walks the web's link graph breadth first from starts to depth.
func expectedWeb(w *websim.Web, starts []string, depth int) []string {
	index := map[string][2]int{}
	cfg := w.Config()
	for h := range cfg.Hosts {
		for p := range cfg.PagesPerHost {
			index[w.URL(h, p)] = [2]int{h, p}
		}
	}
	seen := map[string]bool{}
	frontier := starts
	for _, s := range starts {
		seen[s] = true
	}
	for d := 0; d < depth && len(frontier) > 0; d++ {
		var next []string
		for _, u := range frontier {
			hp := index[u]
			for _, l := range w.Links(hp[0], hp[1]) {
				if !seen[l] {
					seen[l] = true
					next = append(next, l)
				}
			}
		}
		frontier = next
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

type gridProc struct {
	cmd  *exec.Cmd
	data string
	api  string
}

func startGridProc(t *testing.T, bin, data string, env []string) *gridProc {
	t.Helper()
	addr := filepath.Join(data, "grid.addr")
	_ = os.Remove(addr) // a killed grid leaves its address behind
	cmd := exec.Command(bin, "up", "--data", data, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.OpenFile(filepath.Join(t.TempDir(), "grid.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gridProc{cmd: cmd, data: data}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(addr)
		if err == nil && strings.HasPrefix(string(b), "http://") {
			p.api = strings.TrimSpace(string(b))
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("grid did not write %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartMidCrawl kills the grid process (SIGKILL) in the middle of a
// crawl, restarts it on the same data directory and checks that the crawl
// finishes with every page indexed exactly once.
func TestRestartMidCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the grid binary")
	}
	web := websim.NewWeb(websim.WebConfig{Hosts: 12, PagesPerHost: 40, LinksPerPage: 6, CrossHostLinks: 2, Seed: 7})
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	// Depth assigned by discovery order can exceed the shortest-path depth
	// on this cross-linked web, so the crawl is bounded by the web itself,
	// not by a depth that concurrency could make bind differently.
	const depth = contracts.MaxDepthLimit
	starts := web.StartURLs()[:4]
	want := expectedWeb(web, starts, depth)

	bin := buildGrid(t)
	data := t.TempDir()
	env := []string{
		"GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT=",
		"GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE=" + web.Resolve(),
		"GRIDCRAWL_RECOVERY_LEASE=3s", "GRIDCRAWL_RECOVERY_INTERVAL=500ms", "GRIDCRAWL_WARC_FLUSH_INTERVAL=50ms",
		"GRIDCRAWL_LOG_LEVEL=debug",
	}
	p := startGridProc(t, bin, data, env)
	profile := contracts.Profile{StartURLs: starts, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 60, MaxDelayMS: 60, DelayFactor: 1}}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, p.api+"/api/v1/crawls", profile, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	// Kill once a quarter of the pages are indexed.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st contracts.CrawlStatus
		apiDo(t, http.MethodGet, p.api+"/api/v1/crawls/"+created.CrawlID, nil, &st)
		if st.State != contracts.CrawlRunning {
			t.Fatalf("crawl ended (%s) before the kill; make the web slower", st.State)
		}
		if st.Counts[contracts.Indexed] >= int64(len(want)/4) {
			t.Logf("killing the grid at %v", st.Counts)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl made no progress: %v", st.Counts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()

	p = startGridProc(t, bin, data, env)
	st := waitFinished(t, p.api, created.CrawlID, 3*time.Minute)
	if st.State != contracts.CrawlFinished {
		t.Fatalf("crawl after restart = %s", st.State)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("grid exit after SIGTERM: %v", err)
	}

	// Open the data directory and compare with the link graph.
	cfg := testConfig(t, data, web.Resolve())
	g, err := Open(cfg, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Backends.Close()
	ctx := context.Background()
	var got []string
	after := ""
	for {
		recs, err := g.Backends.Tx.List(ctx, created.CrawlID, "", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Status != contracts.Indexed {
				t.Errorf("record %s = %s (%s), want indexed", r.URL, r.Status, r.Error)
			}
			if _, err := g.Backends.Search.Get(ctx, txindex.Key(created.CrawlID, r.URL)); err != nil {
				t.Errorf("document of %s: %v", r.URL, err)
			}
			got = append(got, r.URL)
		}
		after = recs[len(recs)-1].Key
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("crawled URLs differ from the link graph (-want +got):\n%s", diff)
	}
	n, err := g.Backends.Search.Count(ctx, created.CrawlID)
	if err != nil || n != int64(len(want)) {
		t.Errorf("documents = %d (%v), want %d: each page indexed exactly once", n, err, len(want))
	}
}
