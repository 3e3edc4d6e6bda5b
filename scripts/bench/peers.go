package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// target is a web the crawlers are compared on: a generated web or a corpus
// of real HTML, serving with its request log on.
type target interface {
	Start() error
	Close()
	Port() int
	StartURLs() []string
	Resolve() string
	RequestLog() []websim.Request
	Allowed(host, pathQuery string) bool
}

// peersConfig is one side-by-side comparison.
type peersConfig struct {
	// describe names the web in the table's heading.
	describe string
	// newTarget returns a fresh web of the same configuration for each
	// crawler, so no crawler sees another's warm state.
	newTarget func() (target, error)
	hosts     int
	depth     int
	delay     int // milliseconds
	latency   time.Duration
	crawlers  []string
	gridBin   string
	binDir    string
	peersDir  string
	// floorBackend is the stores of the floor row (-floor-backend).
	floorBackend string
}

// peerRow is one crawler's line of the table.
type peerRow struct {
	name  string
	wall  time.Duration
	cpu   float64 // seconds, user + system, the crawler's process and its children
	rss   int64   // peak resident set, KiB
	stats websim.RequestStats
	note  string
}

// peersBench runs gridcrawl, Colly and Scrapy one at a time on fresh copies
// of the same web and prints one markdown table of what each cost and what
// the server saw.
func peersBench(c peersConfig) error {
	var rows []peerRow
	for _, name := range c.crawlers {
		if name == "scrapy" {
			// Create the venv before any clock starts.
			setup := exec.Command(filepath.Join(c.peersDir, "scrapy", "run.sh"), "--setup")
			setup.Stdout, setup.Stderr = os.Stderr, os.Stderr
			if err := setup.Run(); err != nil {
				return fmt.Errorf("set up the scrapy venv: %w", err)
			}
		}
		if name == "colly" {
			bin, err := filepath.Abs(filepath.Join(c.binDir, "peer-colly"))
			if err != nil {
				return err
			}
			build := exec.Command("go", "build", "-o", bin, ".")
			build.Dir = filepath.Join(c.peersDir, "colly")
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				return fmt.Errorf("build the colly peer: %w", err)
			}
		}
		row, err := runPeer(c, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s done in %.1fs, %d pages\n", name, row.wall.Seconds(), row.stats.Pages)
		rows = append(rows, row)
	}
	fmt.Printf("%s; depth %d, delay %d ms, latency %s", c.describe, c.depth, c.delay, c.latency)
	if c.latency > 0 || c.delay > 0 {
		bound := float64(c.hosts) / (time.Duration(c.delay)*time.Millisecond + c.latency).Seconds()
		fmt.Printf("; politeness bound hosts/(delay+latency) = %.0f pages/s", bound)
	}
	fmt.Println()
	fmt.Println()
	fmt.Println("| crawler | pages | wall s | pages/s | CPU-ms/page | peak RSS MiB | requests | fetched twice | robots-disallowed fetched | overlapping requests | gaps < delay | median gap ms |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		pages := max(r.stats.Pages, 1)
		name := r.name
		if r.note != "" {
			name += " (" + r.note + ")"
		}
		fmt.Printf("| %s | %d | %.1f | %.0f | %.2f | %d | %d | %d | %d | %d | %d | %.1f |\n",
			name, r.stats.Pages, r.wall.Seconds(), float64(r.stats.Pages)/r.wall.Seconds(), 1000*r.cpu/float64(pages),
			r.rss/1024, r.stats.Requests, r.stats.FetchedTwice, r.stats.Disallowed, r.stats.Overlaps, r.stats.ShortGaps, float64(r.stats.MedianGap.Microseconds())/1000)
	}
	fmt.Println()
	fmt.Printf("pages: distinct URLs requested other than robots.txt, as the server saw them; CPU and peak RSS: the crawler's process (and its children) from rusage; gaps < delay: next request to a host started less than delay - %s after the previous one ended; median gap: over every host's consecutive requests, end to next start.\n", websim.GapTolerance)
	return nil
}

// runPeer crawls a fresh web with one crawler and returns its row.
func runPeer(c peersConfig, name string) (peerRow, error) {
	t, err := c.newTarget()
	if err != nil {
		return peerRow{}, err
	}
	if err := t.Start(); err != nil {
		return peerRow{}, err
	}
	defer t.Close()
	row := peerRow{name: name}
	switch name {
	case "gridcrawl":
		g, err := gridCrawl(t.StartURLs(), t.Resolve(), c.depth, c.delay, c.gridBin)
		if err != nil {
			return peerRow{}, err
		}
		row.wall, row.cpu, row.rss = g.wall, tv(g.rusage.Utime)+tv(g.rusage.Stime), g.rusage.Maxrss
		if g.status.State != contracts.CrawlFinished {
			row.note = string(g.status.State)
		}
	case "colly", "scrapy", "floor":
		if err := runExternal(c, name, t, &row); err != nil {
			return peerRow{}, err
		}
	default:
		return peerRow{}, fmt.Errorf("unknown crawler %q (gridcrawl, colly, scrapy, floor)", name)
	}
	row.stats = websim.Stats(t.RequestLog(), time.Duration(c.delay)*time.Millisecond, t.Allowed)
	return row, nil
}

// runExternal runs the Colly or Scrapy peer as a process on t.
func runExternal(c peersConfig, name string, t target, row *peerRow) error {
	dir, err := os.MkdirTemp("", "gridcrawl-peer-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	urls := filepath.Join(dir, "start-urls.txt")
	if err := writeLines(urls, t.StartURLs()); err != nil {
		return err
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	switch name {
	case "colly":
		bin, err := filepath.Abs(filepath.Join(c.binDir, "peer-colly"))
		if err != nil {
			return err
		}
		cmd = exec.CommandContext(ctx, bin, "-urls", urls, "-connect", "127.0.0.1:"+strconv.Itoa(t.Port()),
			"-delay-ms", strconv.Itoa(c.delay), "-depth", strconv.Itoa(c.depth), "-out", out)
	case "floor":
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd = exec.CommandContext(ctx, self, "-floor-run", "-floor-urls", urls, "-floor-connect", "127.0.0.1:"+strconv.Itoa(t.Port()),
			"-depth", strconv.Itoa(c.depth), "-floor-backend", c.floorBackend)
		row.note = "floor, " + c.floorBackend
	case "scrapy":
		cmd = exec.CommandContext(ctx, filepath.Join(c.peersDir, "scrapy", "run.sh"), "--urls", urls,
			"--delay-ms", strconv.Itoa(c.delay), "--depth", strconv.Itoa(c.depth), "--out", out)
	}
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	start := time.Now()
	err = cmd.Run()
	row.wall = time.Since(start)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			row.note = "killed after 30 min"
		} else {
			return fmt.Errorf("run: %w", err)
		}
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	row.cpu, row.rss = tv(ru.Utime)+tv(ru.Stime), ru.Maxrss
	if name == "floor" {
		// The floor extracts every page a second time to show that
		// stage's part; the row counts it once.
		for _, l := range strings.Split(stdout.String(), "\n") {
			if v, ok := strings.CutPrefix(l, "floor-extra-cpu-ms "); ok {
				ms, _ := strconv.ParseFloat(v, 64)
				row.cpu -= ms / 1000
			}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %s says %s", name, stdout.String())
	return nil
}

// scenario is a preset of the -peers comparison.
type scenario struct {
	hosts, pages, pageBytes, delay int
	latency                        time.Duration
	corpus                         bool
}

// scenarios are the presets named by -scenario.
var scenarios = map[string]scenario{
	// Bound by politeness: every host is busy all the time.
	"politeness": {hosts: 500, pages: 20, pageBytes: 4096, delay: 1000, latency: 20 * time.Millisecond},
	// Bound by CPU: the delay allows far more than two cores can parse.
	"cpu": {hosts: 1000, pages: 20, pageBytes: 20 << 10, delay: 10},
	// Real HTML: the books of the installed Rust documentation.
	"corpus": {delay: 10, corpus: true},
}

// peersSetup returns the comparison for a scenario preset, flags given on
// the command line overriding the preset's values.
func peersSetup(name, corpusDir string, hosts, pages, links, cross, pageBytes, depth, delay int, latency time.Duration) (peersConfig, error) {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	sc := scenario{hosts: hosts, pages: pages, pageBytes: pageBytes, delay: delay, latency: latency, corpus: corpusDir != ""}
	if name != "" {
		p, ok := scenarios[name]
		if !ok {
			return peersConfig{}, fmt.Errorf("unknown scenario %q (politeness, cpu, corpus)", name)
		}
		pick := func(flagName string, preset, given int) int {
			if set[flagName] || preset == 0 {
				return given
			}
			return preset
		}
		sc.hosts, sc.pages, sc.pageBytes, sc.delay = pick("hosts", p.hosts, hosts), pick("pages", p.pages, pages), pick("page-bytes", p.pageBytes, pageBytes), pick("min-delay-ms", p.delay, delay)
		if !set["latency"] {
			sc.latency = p.latency
		}
		sc.corpus = sc.corpus || p.corpus
	}
	c := peersConfig{depth: depth, delay: sc.delay, latency: sc.latency}
	if !sc.corpus {
		cfg := websim.WebConfig{Hosts: sc.hosts, PagesPerHost: sc.pages, LinksPerPage: links, CrossHostLinks: cross, PageBytes: sc.pageBytes,
			Latency: sc.latency, Seed: 1, Disallow: "/p/3", RecordRequests: true}
		c.hosts = sc.hosts
		c.describe = fmt.Sprintf("simulated web: %d hosts x %d pages, %d links/page (%d cross-host), %d B/page, robots.txt disallows /p/3*",
			sc.hosts, sc.pages, links, cross, sc.pageBytes)
		c.newTarget = func() (target, error) { return websim.NewWeb(cfg), nil }
		return c, nil
	}
	dir, books := corpusDir, []string(nil)
	if dir == "" {
		var err error
		if dir, err = websim.RustDocDir(); err != nil {
			return peersConfig{}, err
		}
		if books, err = websim.MdBooks(dir); err != nil {
			return peersConfig{}, err
		}
	}
	cfg := websim.CorpusConfig{Dir: dir, Hosts: books, Disallow: "/print.html", Latency: sc.latency, RecordRequests: true}
	first, err := websim.NewCorpus(cfg)
	if err != nil {
		return peersConfig{}, err
	}
	c.hosts = len(first.Hosts())
	c.describe = fmt.Sprintf("real HTML: %s served as %d hosts (%s), robots.txt disallows /print.html", dir, c.hosts, strings.Join(first.Hosts(), " "))
	c.newTarget = func() (target, error) { return websim.NewCorpus(cfg) }
	return c, nil
}
