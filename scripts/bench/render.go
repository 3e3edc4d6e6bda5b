package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// renderConfig is what -render and -render-soak crawl.
type renderConfig struct {
	pages   int    // pages of the scripted web, about
	sites   int    // ScriptSites, each on a loopback port of its own
	delay   int    // politeness: least milliseconds between fetches of one site
	seed    string // "all": every page is a start URL; "home": each site's / only
	gridBin string
	out     string        // -render-soak: directory of the samples and the grid's log
	sample  time.Duration // memory sampling interval
	limit   time.Duration // longest one crawl may take
}

// renderWeb is the scripted web of a render run: ScriptSites on loopback,
// one port and one host name each (siteNN.render.test, resolved to
// 127.0.0.1 by the grid), so that each is a host group of its own and they
// load in parallel under politeness: ports alone make one group.
type renderWeb struct {
	sites []*websim.ScriptSite
	bases []string // http://siteNN.render.test:port
	srvs  []*http.Server
}

// startRenderWeb starts sites ScriptSites whose pages add up to about
// pages.
func startRenderWeb(sites, pages int) (*renderWeb, error) {
	w := &renderWeb{}
	// A site has its static pages, /app/, its items and /app/hidden.
	fixed := len(websim.NewScriptSite(1).StaticPages()) + 2
	items := max(1, pages/sites-fixed)
	for i := range sites {
		site := websim.NewScriptSite(items)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			w.close()
			return nil, fmt.Errorf("listen: %w", err)
		}
		srv := &http.Server{Handler: site, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		w.sites = append(w.sites, site)
		w.srvs = append(w.srvs, srv)
		w.bases = append(w.bases, fmt.Sprintf("http://site%02d%s:%d", i, renderZone, ln.Addr().(*net.TCPAddr).Port))
	}
	return w, nil
}

// renderZone is the domain of the render web's host names; renderResolve
// maps them to loopback (GRIDCRAWL_RESOLVE).
const (
	renderZone    = ".render.test"
	renderResolve = "*" + renderZone + "=127.0.0.1"
)

func (w *renderWeb) close() {
	for _, s := range w.srvs {
		_ = s.Close()
	}
}

// pages returns the URL of every page of every site (the static pages,
// /app/, the items and /app/hidden), each site's home first.
func (w *renderWeb) pages() []string {
	var out []string
	for i, s := range w.sites {
		for _, p := range append(s.StaticPages(), s.ScriptPages()...) {
			out = append(out, w.bases[i]+p)
		}
	}
	return out
}

// requests returns how many requests the sites have answered.
func (w *renderWeb) requests() int64 {
	var n int64
	for _, s := range w.sites {
		for _, c := range s.Requests() {
			n += int64(c)
		}
	}
	return n
}

// profile returns the crawl of the web in render mode.
func (w *renderWeb) profile(mode, seed string, delay int) contracts.Profile {
	starts := w.bases
	if seed == "all" {
		starts = w.pages()
	} else {
		starts = make([]string, len(w.bases))
		for i, b := range w.bases {
			starts[i] = b + "/"
		}
	}
	off := false
	return contracts.Profile{
		StartURLs: starts, MaxDepth: 20, Render: mode, Sitemaps: &off,
		Politeness: contracts.Politeness{MinDelayMS: delay, MaxDelayMS: max(delay, 1), DelayFactor: 1, Robots: contracts.RobotsObey},
	}
}

// renderRow is one mode's line of the -render table.
type renderRow struct {
	mode     string
	pages    int64 // settled: indexed, failed or redirected
	indexed  int64
	rendered int64 // tried in the browser, by the loader's count
	requests int64 // answered by the sites
	run      treeRun
	siteCPU  float64 // seconds: the sites' servers (the bench process)
}

// renderBench crawls the same scripted web with render never, always and
// auto in turn and prints one table of what each cost.
func renderBench(c renderConfig) error {
	if err := becomeSubreaper(); err != nil {
		return err
	}
	total := 0
	var rows []renderRow
	for _, mode := range []string{contracts.RenderNever, contracts.RenderAlways, contracts.RenderAuto} {
		web, err := startRenderWeb(c.sites, c.pages)
		if err != nil {
			return err
		}
		total = len(web.pages())
		var self0, self1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
		run, err := runRenderCrawl(renderCrawlOpts{gridBin: c.gridBin, profile: web.profile(mode, c.seed, c.delay),
			sample: c.sample, limit: c.limit, name: "grid-" + mode})
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
		web.close()
		if err != nil {
			return fmt.Errorf("render %s: %w", mode, err)
		}
		r := renderRow{mode: mode, run: run, requests: web.requests(),
			pages:   run.status.Counts[contracts.Indexed] + run.status.Counts[contracts.Failed] + run.status.Counts[contracts.Redirected],
			indexed: run.status.Counts[contracts.Indexed], rendered: int64(run.metric("gridcrawl_loader_rendered_pages_total")),
			siteCPU: tv(self1.Utime) + tv(self1.Stime) - tv(self0.Utime) - tv(self0.Stime)}
		fmt.Fprintf(os.Stderr, "bench: render %s: %s in %.1fs, %d pages, %d rendered\n", mode, run.status.State, run.wall.Seconds(), r.pages, r.rendered)
		if len(run.leftover) > 0 {
			fmt.Fprintf(os.Stderr, "bench: render %s: %d processes were left behind after the grid exited (killed): %s\n",
				mode, len(run.leftover), procList(run.leftover))
		}
		rows = append(rows, r)
	}
	seeded := "every page a start URL"
	if c.seed != "all" {
		seeded = "each site's / the only start URL"
	}
	fmt.Printf("scripted web: %d ScriptSites on loopback ports, %d pages (%s), min delay %d ms; embedded grid, %s render tabs\n\n",
		c.sites, total, seeded, c.delay, envOr("GRIDCRAWL_RENDER_TABS", "2"))
	fmt.Println("| render | pages | indexed | rendered | wall s | pages/s | CPU-ms/page all | CPU-ms/page Chromium | CPU-ms/page grid | requests/page | peak RSS grid MiB | peak RSS browser MiB | site servers CPU-ms/page |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		n := float64(max(r.pages, 1))
		fmt.Printf("| %s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %d | %d | %.2f |\n",
			r.mode, r.pages, r.indexed, r.rendered, r.run.wall.Seconds(), float64(r.pages)/r.run.wall.Seconds(),
			1000*r.run.cpuAll/n, 1000*(r.run.cpuAll-r.run.cpuGrid)/n, 1000*r.run.cpuGrid/n,
			float64(r.requests)/n, r.run.gridPeak>>20, r.run.browserPeak()>>20, 1000*r.siteCPU/n)
	}
	fmt.Println()
	fmt.Println("pages: settled by the crawl (indexed, failed or redirected); rendered: pages the loader loaded in the browser; " +
		"wall: from submitting the crawl to its end (the grid's start and stop not counted); CPU all: the grid process and every " +
		"process under it, Chromium's included (orphans adopted by the bench as subreaper), user + system, start to stop; " +
		"Chromium: all less the grid process's own; requests: answered by the sites, robots.txt and subresources included; " +
		"peak RSS grid: the grid process's VmHWM; browser: the largest sum of the Chromium processes' proportional set sizes " +
		"(shared pages counted once) sampled every " + c.sample.String() + "; site servers: the bench process, not counted in the rest.")
	return nil
}

// procList describes processes on one line.
func procList(ps []procInfo) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		cmd := p.Cmd
		if len(cmd) > 80 {
			cmd = cmd[:80] + "..."
		}
		fmt.Fprintf(&b, "%d %s", p.PID, cmd)
	}
	return b.String()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// validate checks the render modes' flags.
func (c renderConfig) validate() error {
	switch {
	case c.sites < 1:
		return errors.New("-render-sites must be at least 1")
	case c.seed != "all" && c.seed != "home":
		return fmt.Errorf("-render-seed %q: all or home", c.seed)
	case c.pages < c.sites*7:
		return fmt.Errorf("-render-pages %d: want at least %d (7 per site)", c.pages, c.sites*7)
	}
	if _, err := os.Stat(c.gridBin); err != nil {
		return fmt.Errorf("grid binary: %w (go build -o bin/ ./services/...)", err)
	}
	return nil
}
