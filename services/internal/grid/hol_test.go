package grid

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestHugeBacklogDoesNotHoldUpOtherGroups crawls, through a single loader
// shard with a prefetch of two contracts, a host that allows one fetch per
// second and keeps linking to new pages, next to four fast hosts. The fast
// hosts must finish while the slow host has done only a fraction of its
// backlog, and the loader must hold only a bounded part of that backlog:
// the rest filed in its frontier store (the default), or parked in the
// broker without one.
func TestHugeBacklogDoesNotHoldUpOtherGroups(t *testing.T) {
	t.Run("filed", func(t *testing.T) { testHugeBacklog(t, true) })
	t.Run("parked", func(t *testing.T) {
		t.Setenv("GRIDCRAWL_LOADER_FRONTIER_DIR", "off")
		testHugeBacklog(t, false)
	})
}

func testHugeBacklog(t *testing.T, filed bool) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		if r.URL.Path == "/robots.txt" {
			if host == "slow.hol.test" {
				io.WriteString(w, "User-agent: *\nCrawl-delay: 1\n")
				return
			}
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>")
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p"))
		switch {
		case host == "slow.hol.test" && r.URL.Path == "/":
			for i := range 300 {
				fmt.Fprintf(w, `<a href="/p%d">p</a> `, i)
			}
		case host == "slow.hol.test":
			fmt.Fprintf(w, `<a href="/p%d">more</a> <a href="/p%d">more</a>`, n+1000, n+2000)
		case host == "hub.hol.test":
			// A chain of hub pages, each found only after the one before was
			// fetched and parsed, leads to the fast hosts one by one: they are
			// discovered while the slow host's backlog is already queued.
			if n < 4 {
				fmt.Fprintf(w, `<a href="/p%d">next</a> <a href="http://fast%d.hol.test:%s/">fast</a>`, n+1, n+1, strings.TrimPrefix(r.Host, host+":"))
			}
		case r.URL.Path == "/":
			for i := range 10 {
				fmt.Fprintf(w, `<a href="/p%d">p</a> `, i)
			}
		}
		io.WriteString(w, "</body></html>")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	t.Setenv("GRIDCRAWL_LOADER_SHARDS", "1")
	t.Setenv("GRIDCRAWL_LOADER_PREFETCH", "2")
	g, api := startGrid(t, testConfig(t, t.TempDir(), "*.hol.test=127.0.0.1"))
	var starts []string
	for _, host := range []string{"slow"} {
		starts = append(starts, fmt.Sprintf("http://%s.hol.test:%d/", host, port))
	}
	p := contracts.Profile{StartURLs: starts, MaxDepth: 20, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1}}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	// Once the slow host's backlog fills the loader, a second crawl starts at
	// a hub whose chain of pages leads to the fast hosts one by one: each step
	// needs a loader contract through the same shard and prefetch.
	for hostCounts(t, g, created.CrawlID, "slow.hol.test")[contracts.Indexed] < 3 {
		time.Sleep(50 * time.Millisecond)
	}
	slowID := created.CrawlID
	p.StartURLs = []string{fmt.Sprintf("http://hub.hol.test:%d/p0", port)}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST second crawl = %d", code)
	}
	start := time.Now()
	for {
		done := 0
		for _, host := range []string{"fast1", "fast2", "fast3", "fast4"} {
			done += hostCounts(t, g, created.CrawlID, host+".hol.test")[contracts.Indexed]
		}
		if done == 4*11 {
			break
		}
		if time.Since(start) > 60*time.Second {
			// Where the hub's chain stopped: a page fetched, its links not.
			for _, host := range []string{"hub", "fast1", "fast2", "fast3", "fast4"} {
				t.Logf("%s: %v", host, hostCounts(t, g, created.CrawlID, host+".hol.test"))
			}
			t.Fatalf("fast hosts indexed %d of %d pages after %v: held up by the slow host", done, 4*11, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	slow := hostCounts(t, g, slowID, "slow.hol.test")
	t.Logf("fast hosts done after %v; slow host then: %v; parked %d", time.Since(start).Round(time.Millisecond), slow, g.Loader.Parked())
	if slow[contracts.Indexed] > 60 {
		t.Errorf("slow host indexed %d pages: it was not the bottleneck, the test proves nothing", slow[contracts.Indexed])
	}
	if filed && g.Loader.Parked() != 0 {
		t.Errorf("%d URLs parked, want none: the frontier store holds the backlog", g.Loader.Parked())
	}
	if !filed && g.Loader.Parked() == 0 {
		t.Errorf("no URL was parked")
	}
	if q, _ := g.Loader.QueuedOf("slow.hol.test"); q > 100 {
		t.Errorf("loader holds %d URLs of the slow group, want at most GRIDCRAWL_LOADER_GROUP_QUEUE (100)", q)
	}
	var st contracts.CrawlStatus
	apiDo(t, http.MethodDelete, api+"/api/v1/crawls/"+slowID, nil, &st)
}
