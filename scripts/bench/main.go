// Command bench crawls a simulated web of many hosts on loopback with the
// embedded grid (the grid binary, as a separate process) and reports pages
// per second, CPU seconds per page and the grid's peak memory.
//
//	go run ./scripts/bench -hosts 1000
//
// With -peers it runs gridcrawl, Colly and Scrapy (scripts/peers) one at a
// time on the same web, a generated one or a corpus of real HTML, and
// prints one table of their cost and of the politeness the server saw:
//
//	go build -o bin/ ./services/... && go run ./scripts/bench -peers -scenario cpu
//
// With -curve it runs crawls of growing size and prints the cost per page
// of each and, per slice of pages, as each crawl grows, so that a cost that
// grows with the crawl shows (-grid-mode for the grid-mode services):
//
//	go run ./scripts/bench -curve 20000,200000,1000000 -hosts 1000 -min-delay-ms 10
//
// With -hostile it crawls a web of ordinary pages and the same web with
// hostile pages mixed in (websim's HostileEvery: link amplification, huge
// headers, compression bombs, endless bodies...), in turn, and fails when
// the hostile web's peak memory of a service or stored bytes per page
// exceed -max-ratio (1.5) times the ordinary web's (-grid-mode for the
// grid-mode services):
//
//	go build -o bin/ ./services/... && go run ./scripts/bench -hostile
//
// With -render it crawls a web of websim ScriptSites (single-page apps
// built by scripts from JSON; -render-sites sites of about -render-pages
// pages in all, each on a loopback port of its own) three times, in turn,
// with the embedded grid (bin/grid up, a process of its own): with render
// never, always and auto, and prints one table of pages, wall time,
// CPU-ms per page of the grid and every process under it (Chromium's
// included: the bench adopts the browser's orphaned processes as child
// subreaper) and of Chromium alone, requests per page at the sites, and
// the peak memory of the grid and of the browser. By default every page is
// a start URL, so that the three modes load the same pages
// (-render-seed home: each site's / only, so that what each mode finds
// shows). GRIDCRAWL_CHROMIUM names the browser:
//
//	go build -o bin/ ./services/... && go run ./scripts/bench -render [-render-pages 500] [-render-sites 4]
//
// With -render-soak it crawls at least 5,000 pages with render always from
// each site's /, samples the grid's and the browser's memory every 5 s, and
// fails unless the crawl finished with every page of the sites indexed,
// no page or JSON answer requested twice, no browser crash, no process
// left behind, and the peak memory of the last third of the run within 20%
// of the middle third's, for the grid and for the browser (make
// soak-render):
//
//	go build -o bin/ ./services/... && go run ./scripts/bench -render-soak [-render-out DIR]
//
// With -wacz it writes a crawl of -wacz-pages pages of a generated web
// (about -wacz-page-bytes a page) straight into the embedded backends of a
// grid data directory (WARC segments of -wacz-segment-pages responses with
// their CDXJ indexes in arrival order, transaction records with their
// asset references, search documents), starts `grid up` on it, downloads
// the crawl's WACZ (with -cdxj its /cdxj instead) over loopback HTTP, and
// prints the export's MB/s and the grid process's RSS and Go heap at 25,
// 50, 75 and 100% of the bytes, with their peaks (a -wacz-dir keeps the
// crawl for the next run). With -wacz-share K, K other crawls of as many
// pages share every segment, exchange by exchange in turn, written as a
// loader writes them (warcinfo, request records, each index line naming
// its crawl), and the export, of the first crawl only, filters them out:
//
//	go build -o bin/ ./services/... && go run ./scripts/bench -wacz -wacz-pages 100000 [-wacz-share 1] [-cdxj] [-wacz-dir DIR] [-wacz-out crawl.wacz]
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

func main() {
	hosts := flag.Int("hosts", 1000, "hosts in the simulated web")
	pages := flag.Int("pages", 30, "pages per host")
	links := flag.Int("links", 8, "links per page")
	cross := flag.Int("cross", 2, "links per page to other hosts")
	bytesPer := flag.Int("page-bytes", 4096, "bytes per page")
	depth := flag.Int("depth", 4, "crawl depth")
	delay := flag.Int("min-delay-ms", 100, "politeness: least milliseconds between fetches of one host")
	latency := flag.Duration("latency", 0, "simulated server latency per response")
	gridBin := flag.String("grid", "bin/grid", "grid binary (embedded mode)")
	gridMode := flag.Bool("grid-mode", false, "run mcp, loaders and crawlers as processes on the real backends of the environment")
	binDir := flag.String("bin", "bin", "directory of the mcp, loader and crawler binaries (grid mode)")
	loaders := flag.Int("loaders", 2, "loader processes (grid mode)")
	crawlers := flag.Int("crawlers", 2, "crawler processes (grid mode)")
	keep := flag.Bool("keep", false, "grid mode: leave the crawl's Elasticsearch indices and MinIO bucket for inspection (default: print their size per page, then delete them)")
	peers := flag.Bool("peers", false, "run gridcrawl, Colly and Scrapy one at a time on the same web and print one table")
	scenarioName := flag.String("scenario", "", "with -peers, a preset: politeness, cpu or corpus (flags given explicitly win)")
	corpusDir := flag.String("corpus", "", "with -peers, a directory of real HTML whose subdirectories are hosts (default: the rustup books)")
	peerList := flag.String("peer-list", "gridcrawl,colly,scrapy", "with -peers, the crawlers to run, in order (gridcrawl, colly, scrapy, floor: the least gridcrawl's design and components can cost per page, see -floor-backend)")
	peersDir := flag.String("peers-dir", "scripts/peers", "with -peers, the directory of the colly and scrapy peers")
	curve := flag.String("curve", "", "crawl sizes in pages, such as 20000,200000,1000000: one crawl each over -hosts hosts, printing the cost per -slice pages as it grows and one table")
	slice := flag.Int("slice", 20000, "with -curve, pages per slice of the per-slice cost")
	killAt := flag.Int64("kill-at", 0, "with -curve, kill -9 the embedded grid once this many pages have settled, start it again with --resume and print how long it took to go on and, counted at the web server, the pages lost and fetched twice; with -grid-mode, kill -9 loader-1 and leave its shards to the other loaders")
	frontierFlag := flag.Bool("frontier", false, "grid mode: give every loader a frontier store (GRIDCRAWL_LOADER_FRONTIER_DIR) instead of parking in the broker")
	hostile := flag.Bool("hostile", false, "crawl the web plain and with hostile pages mixed in, in turn, and compare peak memory and stored bytes per page (default web: 100 hosts x 100 pages of 20 KB)")
	hostileEvery := flag.Int("hostile-every", 10, "with -hostile, one page in this many of each host is hostile")
	rounds := flag.Int("rounds", 1, "with -hostile, how many times to crawl each web, in turn")
	maxRatio := flag.Float64("max-ratio", 1.5, "with -hostile, the most hostile/ordinary may be for peak memory and stored bytes per page; over it the command fails")
	ff := registerFloorFlags()
	var rc renderConfig
	render := flag.Bool("render", false, "crawl a scripted web with render never, always and auto, in turn, and print one table of their cost")
	soak := flag.Bool("render-soak", false, "crawl at least 5,000 pages with render always, sampling memory, and check the crawl (every page once, memory flat)")
	flag.IntVar(&rc.pages, "render-pages", 0, "with -render or -render-soak, pages of the scripted web, about (default 500, with -render-soak 5000)")
	flag.IntVar(&rc.sites, "render-sites", 0, "with -render or -render-soak, ScriptSites, each on a loopback port of its own (default 4, with -render-soak 8)")
	flag.StringVar(&rc.seed, "render-seed", "all", "with -render, the start URLs: all (every page of the sites) or home (each site's /)")
	flag.StringVar(&rc.out, "render-out", "", "with -render-soak, the directory of samples.tsv and the grid's log (default: a new temporary directory)")
	flag.DurationVar(&rc.limit, "render-limit", 60*time.Minute, "with -render or -render-soak, the longest one crawl may take")
	dedup := flag.Bool("dedup", false, "crawl the web twice into one collection of an embedded grid and print the bytes each crawl stored per page (default web: 50 hosts x 100 pages of 48 KiB)")
	dedupChange := flag.Int("dedup-change", 0, "with -dedup, change one page in this many of each host between the crawls (0: none)")
	var wc waczConfig
	waczRun := flag.Bool("wacz", false, "write a crawl of -wacz-pages pages into a grid data directory, export it as one WACZ through a grid's API (GET /api/v1/crawls/ID/wacz over loopback) and print MB/s and the grid's memory through the export")
	flag.BoolVar(&wc.cdxj, "cdxj", false, "with -wacz, download the crawl's /cdxj instead of its WACZ")
	flag.IntVar(&wc.pages, "wacz-pages", 100000, "with -wacz, pages of the crawl")
	flag.IntVar(&wc.perSegment, "wacz-segment-pages", 10000, "with -wacz, responses per WARC segment")
	flag.IntVar(&wc.bytes, "wacz-page-bytes", 20000, "with -wacz, body bytes per page, about (pkg/websim's pages)")
	flag.StringVar(&wc.dir, "wacz-dir", "", "with -wacz, the directory of the crawl's grid data directory (DIR/grid), its log and the index runs; a crawl built there before is exported again (default: a new temporary directory, removed after)")
	flag.StringVar(&wc.out, "wacz-out", "", "with -wacz, write the WACZ to this file (default: count and discard it)")
	flag.BoolVar(&wc.text, "wacz-text", false, "with -wacz, put each page's text in pages.jsonl")
	flag.IntVar(&wc.share, "wacz-share", 0, "with -wacz, write this many other crawls of as many pages into the same segments, in turn exchange by exchange as a loader writes them, so that every segment is shared and the export of the first crawl filters it (0: the crawl alone in its segments)")
	flag.Parse()
	if *dedup {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		c := dedupConfig{hosts: *hosts, pages: *pages, links: *links, cross: *cross, bytes: *bytesPer, depth: *depth,
			delay: *delay, change: *dedupChange, gridBin: *gridBin}
		if !set["hosts"] {
			c.hosts = 50
		}
		if !set["pages"] {
			c.pages = 100
		}
		if !set["page-bytes"] {
			c.bytes = 48 << 10
		}
		if !set["depth"] {
			for c.depth = 1; 1<<c.depth < c.pages+1; c.depth++ {
			}
		}
		if err := dedupBench(c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *waczRun {
		if wc.pages < 1 || wc.perSegment < 1 || wc.bytes < 0 || wc.share < 0 {
			fmt.Fprintln(os.Stderr, "bench: -wacz-pages and -wacz-segment-pages must be positive, -wacz-page-bytes and -wacz-share not negative")
			os.Exit(2)
		}
		wc.gridBin = *gridBin
		if err := waczBench(wc); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *render || *soak {
		run, pages, sites := renderBench, 500, 4
		if *soak {
			run, pages, sites, rc.seed = renderSoak, 5000, 8, "home"
		}
		rc.gridBin, rc.pages, rc.sites, rc.delay, rc.sample = *gridBin, cmp.Or(rc.pages, pages), cmp.Or(rc.sites, sites), 10, time.Second
		if *soak {
			rc.sample = 5 * time.Second
		}
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "min-delay-ms" {
				rc.delay = *delay
			}
		})
		err := rc.validate()
		if err == nil {
			err = run(rc)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *ff.run {
		if err := floorRun(ff, *depth); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			os.Exit(1)
		}
		return
	}
	if *hostile {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]*int{"hosts": hosts, "pages": pages} {
			if !set[name] {
				*v = 100
			}
		}
		if !set["page-bytes"] {
			*bytesPer = 20 << 10
		}
		if !set["depth"] {
			// Page n links to 2n+1 and 2n+2: every page is within
			// log2(pages)+1 links of its root.
			for *depth = 1; 1<<*depth < *pages+1; *depth++ {
			}
		}
		err := hostileBench(hostileConfig{hosts: *hosts, pages: *pages, links: *links, cross: *cross, bytes: *bytesPer,
			depth: *depth, delay: *delay, every: *hostileEvery, rounds: max(*rounds, 1), latency: *latency, maxRatio: *maxRatio,
			gridMode: *gridMode, gridBin: *gridBin, binDir: *binDir, loaders: *loaders, crawlers: *crawlers})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *curve != "" {
		sizes, err := parseSizes(*curve)
		if err == nil {
			err = curveBench(curveConfig{sizes: sizes, hosts: *hosts, links: *links, cross: *cross, bytes: *bytesPer,
				delay: *delay, slice: *slice, gridMode: *gridMode, gridBin: *gridBin, binDir: *binDir,
				loaders: *loaders, crawlers: *crawlers, latency: *latency, killAt: *killAt, frontier: *frontierFlag})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *peers {
		c, err := peersSetup(*scenarioName, *corpusDir, *hosts, *pages, *links, *cross, *bytesPer, *depth, *delay, *latency)
		if err == nil {
			c.crawlers, c.gridBin, c.binDir, c.peersDir = strings.Split(*peerList, ","), *gridBin, *binDir, *peersDir
			c.floorBackend = *ff.backend
			err = peersBench(c)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *gridMode {
		web := websim.NewWeb(websim.WebConfig{Hosts: *hosts, PagesPerHost: *pages, LinksPerPage: *links, CrossHostLinks: *cross, PageBytes: *bytesPer, Latency: *latency, Seed: 1})
		if err := web.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Printf("simulated web: %d hosts x %d pages, %d links/page (%d cross-host), %d B/page, min delay %d ms, depth %d\n",
			*hosts, *pages, *links, *cross, *bytesPer, *delay, *depth)
		var res gridResult
		err := gridBench(web, *depth, *delay, *loaders, *crawlers, *binDir, nil, &res, gridOptions{frontier: *frontierFlag})
		web.Close()
		if err == nil && !*keep {
			err = dropGridData(res)
		} else if err == nil {
			fmt.Printf("(indices %s-*, bucket %s are left for inspection)\n", res.prefix, res.bucket)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*hosts, *pages, *links, *cross, *bytesPer, *depth, *delay, *latency, *gridBin); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(hosts, pages, links, cross, pageBytes, depth, delay int, latency time.Duration, gridBin string) error {
	web := websim.NewWeb(websim.WebConfig{Hosts: hosts, PagesPerHost: pages, LinksPerPage: links, CrossHostLinks: cross, PageBytes: pageBytes, Latency: latency, Seed: 1})
	if err := web.Start(); err != nil {
		return fmt.Errorf("start simulated web: %w", err)
	}
	defer web.Close()
	var self0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	g, err := gridCrawl(web.StartURLs(), web.Resolve(), depth, delay, gridBin)
	if err != nil {
		return err
	}
	var self1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	st, wall, ru := g.status, g.wall, g.rusage
	cpu := tv(ru.Utime) + tv(ru.Stime)
	webCPU := tv(self1.Utime) + tv(self1.Stime) - tv(self0.Utime) - tv(self0.Stime)
	fetched := g.fetched()
	fmt.Printf("simulated web: %d hosts x %d pages, %d links/page (%d cross-host), %d B/page, min delay %d ms, depth %d\n",
		hosts, pages, links, cross, pageBytes, delay, depth)
	fmt.Printf("crawl %s: %s, %d records, %d indexed, %d failed, %d documents, %d http requests served\n",
		st.CrawlID, st.State, st.Total, st.Counts[contracts.Indexed], st.Counts[contracts.Failed], st.Documents, web.Requests())
	rate := float64(fetched) / wall.Seconds()
	fmt.Printf("wall %.2fs  pages/s %.0f\n", wall.Seconds(), rate)
	// With every host busy all the time, politeness allows at most one fetch
	// per host every delay + latency.
	bound := float64(hosts) / (time.Duration(delay)*time.Millisecond + latency).Seconds()
	fmt.Printf("politeness bound hosts/(delay+latency) = %.0f pages/s; achieved %.1f%% of it\n", bound, 100*rate/bound)
	fmt.Printf("grid cpu %.2fs  cpu-ms/page %.3f  peak rss %d MiB\n", cpu, 1000*cpu/float64(fetched), ru.Maxrss/1024)
	fmt.Printf("web server cpu %.2fs (same machine, not counted above)\n", webCPU)
	g.ops.print(fetched, ru)
	return nil
}

// gridRun is the outcome of one embedded grid crawl.
type gridRun struct {
	status contracts.CrawlStatus
	wall   time.Duration
	rusage *syscall.Rusage
	stored map[string]int64 // bytes of the data directory when the crawl ended, by part
	ops    ops              // the grid's backend operations and queue messages
}

// ops counts what the grid asked of its backends in a run, from the
// metrics it wrote when it stopped (GRIDCRAWL_METRICS_DUMP): calls per
// backend and operation, and messages published per queue.
type ops struct {
	calls     map[string]int64 // "backend operation"
	published map[string]int64 // by queue
	moved     map[string]int64 // URLs filed, parked, swept and messages postponed, by counter
}

// movedCounters name the counters of ops.moved: what the frontier did with
// the URLs besides fetching them.
var movedCounters = map[string]string{
	"gridcrawl_loader_filed_urls_total":   "filed",
	"gridcrawl_loader_rebuilt_urls_total": "rebuilt",
	"gridcrawl_loader_parked_urls_total":  "parked",
	"gridcrawl_mcp_recovered_urls_total":  "swept",
	"gridcrawl_queue_postponed_total":     "postponed",
}

// parseOps reads the counts of ops from a Prometheus text dump.
func parseOps(b []byte) ops {
	o := ops{calls: map[string]int64{}, published: map[string]int64{}, moved: map[string]int64{}}
	label := func(line, name string) string {
		_, v, ok := strings.Cut(line, name+`="`)
		if !ok {
			return ""
		}
		v, _, _ = strings.Cut(v, `"`)
		return v
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "gridcrawl_backend_operation_duration_seconds_count{"):
			o.calls[label(line, "backend")+" "+label(line, "operation")] += int64(n)
		case strings.HasPrefix(line, "gridcrawl_queue_published_total{"):
			o.published[label(line, "queue")] += int64(n)
		default:
			name, _, _ := strings.Cut(f[0], "{")
			if k, ok := movedCounters[name]; ok {
				o.moved[k] += int64(n)
			}
		}
	}
	return o
}

// print writes the counts per page, and the bytes written to disk
// (rusage's block output), on one line each.
func (o ops) print(pages int64, ru *syscall.Rusage) {
	if pages <= 0 {
		return
	}
	per := func(m map[string]int64) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			if m[k] > 0 {
				fmt.Fprintf(&b, "  %s %.3f", k, float64(m[k])/float64(pages))
			}
		}
		return b.String()
	}
	if len(o.calls) > 0 {
		fmt.Printf("backend calls per page:%s\n", per(o.calls))
	}
	o.printFrontier(pages)
	if ru != nil {
		fmt.Printf("bytes written to disk per page: %.0f (block output of the grid process)\n", float64(ru.Oublock)*512/float64(pages))
	}
}

// printFrontier writes the queue messages published per page, in all and
// per queue, and the URLs filed, parked, swept and postponed per page.
func (o ops) printFrontier(pages int64) {
	if pages <= 0 || (len(o.published) == 0 && len(o.moved) == 0) {
		return
	}
	var all int64
	keys := make([]string, 0, len(o.published))
	for k, n := range o.published {
		all += n
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if o.published[k] > 0 {
			fmt.Fprintf(&b, "  %s %.3f", k, float64(o.published[k])/float64(pages))
		}
	}
	fmt.Printf("queue messages published per page: %.3f in all;%s\n", float64(all)/float64(pages), b.String())
	fmt.Printf("URLs per page fetched: filed %.3f  rebuilt %.3f  parked %.3f  swept %.3f  postponed %.3f\n",
		float64(o.moved["filed"])/float64(pages), float64(o.moved["rebuilt"])/float64(pages), float64(o.moved["parked"])/float64(pages),
		float64(o.moved["swept"])/float64(pages), float64(o.moved["postponed"])/float64(pages))
}

// fetched returns the pages the grid fetched by its own count.
func (g gridRun) fetched() int64 {
	return g.status.Counts[contracts.Indexed] + g.status.Counts[contracts.Failed] + g.status.Counts[contracts.Redirected]
}

// gridCrawl crawls from starts with the embedded grid (gridBin crawl, a
// process of its own), resolving hosts through resolve, and returns its
// final status, wall time and resource usage.
func gridCrawl(starts []string, resolve string, depth, delay int, gridBin string) (gridRun, error) {
	return gridCrawlWatched(starts, resolve, depth, delay, gridBin, nil, nil)
}

// watchFunc follows a crawl while it runs: pids returns the processes that
// do the crawl, progress the pages settled so far (false when it cannot
// tell), and stop closes when the crawl has ended.
type watchFunc func(pids func() []int, progress func() (int64, bool), stop <-chan struct{})

// killPlan is a kill -9 of the embedded grid in the middle of its crawl:
// once at pages have settled, the grid is killed and started again on its
// data directory (grid crawl --resume), which resumes the crawl.
type killPlan struct {
	at int64
	// addCPU is told the CPU seconds the killed process used, before the
	// new process is watched.
	addCPU func(float64)

	// served returns the pages the web server has served (GETs).
	served func() int64

	killedAt  int64         // pages settled when SIGKILL was sent
	cpu       float64       // CPU seconds of the killed process
	maxRSS    int64         // its peak resident KiB
	restarted time.Duration // from the restart to the first page settled past killedAt
	// inFlight is what the killed grid fetched and did not record: the
	// pages served until it died less its records past to-be-loaded.
	inFlight int64
}

// gridCrawlWatched is gridCrawl that, when watch is not nil, runs watch
// while the crawl runs, and kills the grid on the way when kill is not nil.
func gridCrawlWatched(starts []string, resolve string, depth, delay int, gridBin string,
	watch watchFunc, kill *killPlan) (gridRun, error) {
	data, err := os.MkdirTemp("", "gridcrawl-bench-")
	if err != nil {
		return gridRun{}, err
	}
	defer os.RemoveAll(data)
	urlsFile := filepath.Join(data, "start-urls.txt")
	if err := writeLines(urlsFile, starts); err != nil {
		return gridRun{}, err
	}
	args := []string{"crawl", "--json", "--data", filepath.Join(data, "grid"), "--depth", strconv.Itoa(depth),
		"--min-delay-ms", strconv.Itoa(delay), "--urls-file", urlsFile}
	dump := filepath.Join(data, "metrics.txt")
	var out bytes.Buffer
	start1 := func(args []string) (*exec.Cmd, error) {
		cmd := exec.Command(gridBin, args...)
		cmd.Env = append(os.Environ(), "GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE="+resolve,
			"GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT=", // the embedded grid
			"GRIDCRAWL_METRICS_DUMP="+dump)
		out.Reset()
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start grid crawl: %w", err)
		}
		return cmd, nil
	}
	start := time.Now()
	cmd, err := start1(args)
	if err != nil {
		return gridRun{}, err
	}
	var pid atomic.Int64
	pid.Store(int64(cmd.Process.Pid))
	addr := filepath.Join(data, "grid", "grid.addr")
	progress := crawlProgress(func() string {
		b, _ := os.ReadFile(addr)
		return strings.TrimSpace(string(b))
	}, os.Getenv("GRIDCRAWL_API_TOKEN"))
	if watch != nil {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			watch(func() []int { return []int{int(pid.Load())} }, progress, stop)
		}()
		defer func() { close(stop); <-done }()
	}
	if kill != nil {
		if cmd, err = kill.run(cmd, progress, func() (*exec.Cmd, error) {
			_ = os.Remove(addr) // the killed grid's
			recorded, err := recordedPages(filepath.Join(data, "grid"))
			if err != nil {
				return nil, err
			}
			kill.inFlight = kill.served() - recorded
			c, err := start1(append(args, "--resume"))
			if err == nil {
				pid.Store(int64(c.Process.Pid))
			}
			return c, err
		}); err != nil {
			return gridRun{}, err
		}
	}
	if err := cmd.Wait(); err != nil {
		return gridRun{}, fmt.Errorf("grid crawl: %w\n%s", err, out.String())
	}
	g := gridRun{wall: time.Since(start), rusage: cmd.ProcessState.SysUsage().(*syscall.Rusage)}
	if g.stored, err = dataBytes(filepath.Join(data, "grid")); err != nil {
		return gridRun{}, err
	}
	if b, err := os.ReadFile(dump); err == nil {
		g.ops = parseOps(b)
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var last []byte
	for sc.Scan() {
		last = append(last[:0], sc.Bytes()...)
	}
	if err := json.Unmarshal(last, &g.status); err != nil {
		return gridRun{}, fmt.Errorf("decode final status: %w", err)
	}
	return g, nil
}

// run waits until k.at pages of cmd's crawl have settled, kills cmd with
// SIGKILL, starts the grid again with restart and waits until the crawl
// has settled a page more; it returns the running grid.
func (k *killPlan) run(cmd *exec.Cmd, progress func() (int64, bool), restart func() (*exec.Cmd, error)) (*exec.Cmd, error) {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for k.killedAt == 0 {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("grid crawl ended (%v) before %d pages, where it was to be killed", err, k.at)
		case <-t.C:
		}
		if n, ok := progress(); ok && n >= k.at {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				return nil, err
			}
			k.killedAt = n
		}
	}
	<-exited // signal: killed; it serves nothing more
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	k.cpu, k.maxRSS = tv(ru.Utime)+tv(ru.Stime), ru.Maxrss
	if k.addCPU != nil {
		k.addCPU(k.cpu)
	}
	fmt.Printf("  killed the grid (SIGKILL) at %d pages settled; starting it again with --resume\n", k.killedAt)
	began := time.Now()
	cmd, err := restart()
	if err != nil {
		return nil, err
	}
	for time.Since(began) < 30*time.Minute { // or it is stuck: the rest of the run tells
		if n, ok := progress(); ok && n > k.killedAt {
			k.restarted = time.Since(began)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cmd, nil
}

// recordedPages counts the pages an embedded grid's data directory holds
// as fetched and recorded: records past to-be-loaded (sitemap probes and
// retired URLs left out), over every crawl.
func recordedPages(dir string) (int64, error) {
	ctx := context.Background()
	ps, err := sqlitestore.OpenProfiles(filepath.Join(dir, "profiles.db"))
	if err != nil {
		return 0, err
	}
	defer ps.Close()
	crawls, err := ps.List(ctx)
	if err != nil {
		return 0, err
	}
	tx, err := sqlitestore.OpenTxIndex(filepath.Join(dir, "transactions.db"))
	if err != nil {
		return 0, err
	}
	defer tx.Close()
	var n int64
	for _, c := range crawls {
		counts, err := tx.Counts(ctx, c.ID)
		if err != nil {
			return 0, err
		}
		for _, st := range []contracts.Status{contracts.ToBeParsed, contracts.ToBeIndexed, contracts.Indexed, contracts.Redirected, contracts.Failed} {
			n += counts[st]
		}
	}
	return n, nil
}

// writeLines writes lines to a file, one a line.
func writeLines(name string, lines []string) error {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
