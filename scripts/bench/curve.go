package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// curveConfig is what -curve measures: crawls of the given sizes on a
// generated web of hosts hosts, each crawl's cost reported per slice of
// slice pages as it grows.
type curveConfig struct {
	sizes                      []int
	hosts, links, cross, bytes int
	delay                      int
	slice                      int
	gridMode                   bool
	gridBin, binDir            string
	loaders, crawlers          int
	latency                    time.Duration
	killAt                     int64 // kill -9 the embedded grid, or grid mode's loader-1, once this many pages have settled (0: never)
	frontier                   bool  // grid mode: loaders with frontier stores
}

// gridResult is the cost of a grid-mode crawl to our services (the
// backends not counted).
type gridResult struct {
	pages    int64
	wall     time.Duration
	cpu      float64 // seconds, all our services
	rssMiB   int64   // the largest peak of one service
	services []serviceUsage
	status   contracts.CrawlStatus
	prefix   string              // of the crawl's Elasticsearch indices
	bucket   string              // of its assets
	reads    map[[2]string]int64 // Elasticsearch reads the services sent, by index and kind
}

// serviceUsage is what one service process of a grid-mode crawl cost.
type serviceUsage struct {
	name   string // mcp, loader-1, crawler-2...
	cpu    float64
	rssMiB int64
}

// curveRow is one crawl of the curve.
type curveRow struct {
	pages  int64
	wall   time.Duration
	cpu    float64 // seconds, our processes only
	rssMiB int64   // peak
	slices []sliceRow
}

// sliceRow is the cost of one slice of a crawl: the pages fetched while it
// lasted and the CPU our processes used meanwhile.
type sliceRow struct {
	upTo   int64   // pages fetched at the end of the slice
	cpuMS  float64 // CPU-ms per page over the slice
	rssMiB int64   // resident memory at the end of the slice
	rate   float64 // pages per second over the slice
	tail   bool    // the pages fetched last and the work that trailed them
}

// label marks the tail slice in tables.
func (s sliceRow) label() string {
	if s.tail {
		return "  (to the end of the crawl)"
	}
	return ""
}

// parseSizes parses "20000,200000,1000000".
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad crawl size %q in -curve", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// curveBench runs one crawl per size, smallest first, and prints the
// per-slice cost of each as it goes and one table at the end.
func curveBench(c curveConfig) error {
	mode := "embedded (bin/grid crawl)"
	if c.gridMode {
		mode = fmt.Sprintf("grid mode (mcp, %d loaders, %d crawlers on the real backends)", c.loaders, c.crawlers)
	}
	fmt.Printf("cost curve, %s: %d hosts, %d B/page, %d links/page (%d cross-host), min delay %d ms; slices of %d pages\n",
		mode, c.hosts, c.bytes, c.links, c.cross, c.delay, c.slice)
	var rows []curveRow
	for _, size := range c.sizes {
		pages := max(1, (size+c.hosts-1)/c.hosts)
		// Page n links to 2n+1 and 2n+2, so every page of a host is within
		// log2(pages)+1 links of its root.
		depth := 1
		for 1<<depth < pages+1 {
			depth++
		}
		web := websim.NewWeb(websim.WebConfig{Hosts: c.hosts, PagesPerHost: pages, LinksPerPage: c.links, CrossHostLinks: c.cross,
			PageBytes: c.bytes, Latency: c.latency, Seed: 1, CountFetches: true})
		if err := web.Start(); err != nil {
			return fmt.Errorf("start simulated web: %w", err)
		}
		fmt.Printf("\n%d pages: %d hosts x %d pages, depth %d\n", c.hosts*pages, c.hosts, pages, depth)
		fmt.Printf("  %10s %9s %12s %9s\n", "pages", "pages/s", "cpu-ms/page", "rss MiB")
		w := newWatcher(int64(c.slice))
		var row curveRow
		var err error
		if c.gridMode {
			row, err = curveGridCrawl(web, depth, c, w)
		} else {
			row, err = curveEmbeddedCrawl(web, depth, c, w)
		}
		if err == nil {
			// Counted at the web server: every page is within the depth.
			never, twice, most := web.FetchCounts()
			fmt.Printf("at the web server: %d pages never fetched, %d fetched more than once (at most %d times)\n", never, twice, most)
			if twice > 0 {
				fmt.Println("  such as", strings.Join(web.Twice(3), " "))
			}
		}
		web.Close()
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	fmt.Printf("\n%10s %9s %12s %9s %8s\n", "pages", "pages/s", "cpu-ms/page", "peak rss", "ratio")
	for _, r := range rows {
		per := 1000 * r.cpu / float64(r.pages)
		base := 1000 * rows[0].cpu / float64(rows[0].pages)
		fmt.Printf("%10d %9.0f %12.3f %5d MiB %8.2f\n", r.pages, float64(r.pages)/r.wall.Seconds(), per, r.rssMiB, per/base)
	}
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		if len(last.slices) > 1 {
			first := last.slices[0].cpuMS
			fmt.Printf("\nlargest crawl, per slice of %d pages (ratio to the first slice):\n", c.slice)
			fmt.Printf("%10s %9s %12s %8s %9s\n", "pages", "pages/s", "cpu-ms/page", "ratio", "rss MiB")
			for _, s := range last.slices {
				fmt.Printf("%10d %9.0f %12.3f %8.2f %9d%s\n", s.upTo, s.rate, s.cpuMS, s.cpuMS/first, s.rssMiB, s.label())
			}
		}
	}
	return nil
}

// curveEmbeddedCrawl crawls web with bin/grid crawl, watching it.
func curveEmbeddedCrawl(web *websim.Web, depth int, c curveConfig, w *watcher) (curveRow, error) {
	var kill *killPlan
	if c.killAt > 0 && c.killAt < int64(web.Pages()) {
		kill = &killPlan{at: c.killAt, addCPU: w.addCPU, served: web.Served}
	}
	g, err := gridCrawlWatched(web.StartURLs(), web.Resolve(), depth, c.delay, c.gridBin, w.watch, kill)
	if err != nil {
		return curveRow{}, err
	}
	cpu := tv(g.rusage.Utime) + tv(g.rusage.Stime)
	rss := g.rusage.Maxrss
	if kill != nil {
		cpu += kill.cpu
		rss = max(rss, kill.maxRSS)
		fmt.Printf("kill -9 at %d pages settled: %d pages were in flight (served to the killed grid, not recorded); the restarted grid settled its next page after %.1f s\n",
			kill.killedAt, kill.inFlight, kill.restarted.Seconds())
		fmt.Println("(the queue and frontier counts below are the restarted grid's only: 'rebuilt' is what its restart rebuilt)")
	}
	g.ops.printFrontier(g.fetched())
	return curveRow{pages: g.fetched(), wall: g.wall, cpu: cpu, rssMiB: rss / 1024, slices: w.finish(g.fetched(), cpu)}, nil
}

// curveGridCrawl crawls web with the grid-mode services, watching them.
func curveGridCrawl(web *websim.Web, depth int, c curveConfig, w *watcher) (curveRow, error) {
	var r gridResult
	if err := gridBench(web, depth, c.delay, c.loaders, c.crawlers, c.binDir, w.watch, &r, gridOptions{frontier: c.frontier, killLoaderAt: c.killAt, addCPU: w.addCPU}); err != nil {
		return curveRow{}, err
	}
	return curveRow{pages: r.pages, wall: r.wall, cpu: r.cpu, rssMiB: r.rssMiB, slices: w.finish(r.pages, r.cpu)}, nil
}

// watcher samples the CPU time and resident memory of the crawl's
// processes once a second and closes a slice each time the crawl has settled
// (indexed, redirected or failed) another slice of pages, as its status API
// reports.
type watcher struct {
	slice int64

	mu      sync.Mutex
	slices  []sliceRow
	lastN   int64
	lastCPU float64
	lastT   time.Time
	lastRSS int64
	n       int64   // pages settled at the last sample
	extra   float64 // CPU seconds of processes watched before and gone (a killed grid)
}

// addCPU counts the CPU seconds of a process that is gone in every later
// sample.
func (w *watcher) addCPU(sec float64) {
	w.mu.Lock()
	w.extra += sec
	w.mu.Unlock()
}

func newWatcher(slice int64) *watcher {
	return &watcher{slice: slice}
}

// watch samples pids and the crawl's progress until stop is closed.
// progress returns the pages settled so far, or false when it cannot tell.
func (w *watcher) watch(pids func() []int, progress func() (int64, bool), stop <-chan struct{}) {
	usage := func() (cpu float64, rss int64) {
		for _, pid := range pids() {
			c, r := procUsage(pid)
			cpu += c
			rss += r
		}
		if cpu == 0 {
			return 0, 0 // between a kill of the embedded grid and its restart
		}
		w.mu.Lock()
		cpu += w.extra
		w.mu.Unlock()
		return cpu, rss
	}
	// The slices count from here: the CPU of starting up is not the crawl's.
	cpu0, _ := usage()
	w.mu.Lock()
	w.lastT, w.lastCPU = time.Now(), cpu0
	w.mu.Unlock()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		n, ok := progress()
		if !ok {
			continue
		}
		cpu, rss := usage()
		w.mu.Lock()
		w.n = n
		if rss > 0 {
			w.lastRSS = rss
		}
		if n-w.lastN >= w.slice && cpu > 0 {
			w.close(n, cpu, rss, false)
		}
		w.mu.Unlock()
	}
}

// crawlProgress returns a progress function for watch that reads the
// settled pages of every crawl from the MCP API at base (the first argument
// gives base when it is known, "" until then).
func crawlProgress(base func() string, token string) func() (int64, bool) {
	client := &http.Client{Timeout: 5 * time.Second}
	return func() (int64, bool) {
		b := base()
		if b == "" {
			return 0, false
		}
		req, err := http.NewRequest(http.MethodGet, b+"/api/v1/crawls", nil)
		if err != nil {
			return 0, false
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var list contracts.CrawlList
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
			return 0, false
		}
		var n int64
		for _, st := range list.Crawls {
			n += st.Counts[contracts.Indexed] + st.Counts[contracts.Failed] + st.Counts[contracts.Redirected]
		}
		return n, true
	}
}

// close ends a slice at n pages and cpu seconds; the tail is the last one,
// which also holds the work done after the last fetch. Callers hold w.mu.
func (w *watcher) close(n int64, cpu float64, rss int64, tail bool) {
	now := time.Now()
	s := sliceRow{upTo: n, cpuMS: 1000 * (cpu - w.lastCPU) / float64(n-w.lastN), rssMiB: rss >> 20,
		rate: float64(n-w.lastN) / now.Sub(w.lastT).Seconds(), tail: tail}
	w.slices = append(w.slices, s)
	fmt.Printf("  %10d %9.0f %12.3f %9d%s\n", s.upTo, s.rate, s.cpuMS, s.rssMiB, s.label())
	w.lastN, w.lastCPU, w.lastT = n, cpu, now
}

// finish closes the last slice with the processes' final CPU time and
// returns the slices.
func (w *watcher) finish(pages int64, cpu float64) []sliceRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pages > w.lastN {
		w.close(pages, cpu, w.lastRSS, true)
	}
	return w.slices
}

// procUsage returns the CPU seconds and resident bytes of a process, or
// zeros when it is gone.
func procUsage(pid int) (cpu float64, rss int64) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, 0
	}
	// Fields after the parenthesised command: utime and stime are 14 and 15,
	// rss (in pages) is 24.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 > len(stat) {
		return 0, 0
	}
	f := strings.Fields(string(stat[i+2:]))
	if len(f) < 22 {
		return 0, 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	pages, _ := strconv.ParseInt(f[21], 10, 64)
	return (ut + st) / 100, pages * int64(os.Getpagesize()) // clock ticks: USER_HZ = 100 on Linux
}
