package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// maxGrowth is how much more the memory of the last third of a render soak
// may peak at than the middle third's before the soak fails.
const maxGrowth = 1.20

// renderSoak crawls the scripted web from each site's home with render
// always, sampling memory, and checks the crawl against the sites' own
// page tables: every page indexed, none requested twice, memory flat.
func renderSoak(c renderConfig) error {
	if err := becomeSubreaper(); err != nil {
		return err
	}
	out := c.out
	if out == "" {
		var err error
		if out, err = os.MkdirTemp("", "gridcrawl-render-soak-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	web, err := startRenderWeb(c.sites, c.pages)
	if err != nil {
		return err
	}
	defer web.close()
	want := web.pages()
	fmt.Printf("render soak: %d ScriptSites, %d pages, render always from each site's /, min delay %d ms, samples every %s; output in %s\n",
		c.sites, len(want), c.delay, c.sample, out)
	var indexed, failed map[string]string
	run, err := runRenderCrawl(renderCrawlOpts{gridBin: c.gridBin, profile: web.profile(contracts.RenderAlways, "home", c.delay),
		sample: c.sample, limit: c.limit, logDir: out, name: "grid", verbose: true,
		atEnd: func(api *apiCaller, id string) error {
			var err error
			indexed, failed, err = crawlURLs(api, id)
			return err
		}})
	if werr := writeSamples(filepath.Join(out, "samples.tsv"), run.samples); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	var problems []string
	check := func(ok bool, format string, args ...any) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
			problems = append(problems, fmt.Sprintf(format, args...))
		}
		fmt.Printf("%s %s\n", mark, fmt.Sprintf(format, args...))
	}
	st := run.status
	fmt.Printf("\ncrawl %s: %s in %.0fs, %d records: %d indexed, %d failed, %d redirected; %.1f pages/s\n",
		st.CrawlID, st.State, run.wall.Seconds(), st.Total, st.Counts[contracts.Indexed], st.Counts[contracts.Failed],
		st.Counts[contracts.Redirected], float64(st.Counts[contracts.Indexed])/run.wall.Seconds())
	fmt.Printf("cpu: %.0fs in all, %.0fs the grid process, %.0fs Chromium (%.1f / %.1f / %.1f ms per page)\n",
		run.cpuAll, run.cpuGrid, run.cpuAll-run.cpuGrid, 1000*run.cpuAll/float64(len(want)),
		1000*run.cpuGrid/float64(len(want)), 1000*(run.cpuAll-run.cpuGrid)/float64(len(want)))
	fmt.Printf("browser: %.0f pages rendered (%s), restarts: %s\n", run.metric("gridcrawl_loader_rendered_pages_total"),
		metricLabels(run.metrics, "gridcrawl_loader_rendered_pages_total"), metricLabels(run.metrics, "gridcrawl_loader_browser_restarts_total"))
	check(st.State == contracts.CrawlFinished, "crawl finished (state %s)", st.State)
	var lost []string
	for _, u := range want {
		if _, ok := indexed[u]; !ok {
			lost = append(lost, u)
		}
	}
	wantSet := map[string]bool{}
	for _, u := range want {
		wantSet[u] = true
	}
	var extra []string
	for u := range indexed {
		if !wantSet[u] {
			extra = append(extra, u)
		}
	}
	slices.Sort(extra)
	check(len(indexed) == len(want) && len(lost) == 0 && len(extra) == 0,
		"indexed %d pages, expected %d: %d lost, %d not expected", len(indexed), len(want), len(lost), len(extra))
	for _, u := range first(lost, 20) {
		fmt.Printf("     lost %s (%s)\n", u, failed[u])
	}
	for _, u := range first(extra, 20) {
		fmt.Printf("     not expected %s\n", u)
	}
	var twice, missing, unexpected []string
	for i, site := range web.sites {
		t, m, u := siteRequests(site)
		for _, s := range t {
			twice = append(twice, web.bases[i]+s)
		}
		for _, s := range m {
			missing = append(missing, web.bases[i]+s)
		}
		for _, s := range u {
			unexpected = append(unexpected, web.bases[i]+s)
		}
	}
	check(len(twice) == 0 && len(missing) == 0 && len(unexpected) == 0,
		"every page and JSON answer requested once: %d more than once, %d never, %d requests for other paths", len(twice), len(missing), len(unexpected))
	for _, l := range [][]string{first(twice, 20), first(missing, 20), first(unexpected, 20)} {
		for _, s := range l {
			fmt.Printf("     %s\n", s)
		}
	}
	crashes := run.metric(`gridcrawl_loader_browser_restarts_total{reason="crash"}`)
	check(crashes == 0, "browser crashes: %.0f", crashes)
	check(len(run.leftover) == 0, "processes left after the grid exited: %d %s", len(run.leftover), procList(run.leftover))
	grid, browser := thirds(run.samples, run.wall.Seconds(), func(s memSample) int64 { return s.gridRSS }),
		thirds(run.samples, run.wall.Seconds(), func(s memSample) int64 { return s.browserRSS })
	heap := thirds(run.samples, run.wall.Seconds(), func(s memSample) int64 { return s.gridHeap })
	// The services' own memory is the grid's Go heap; its resident size also
	// holds the embedded SQLite stores' page caches (outside the Go heap,
	// up to 32 MB per connection), which fill as the stores grow.
	check(heap[1] > 0 && float64(heap[2]) <= maxGrowth*float64(heap[1]),
		"grid memory flat: max Go heap in use by third of the run %d / %d / %d MiB (last/middle %.2f, at most %.2f)",
		heap[0]>>20, heap[1]>>20, heap[2]>>20, ratio(heap[2], heap[1]), maxGrowth)
	fmt.Printf("     the grid's resident size by third: %d / %d / %d MiB (last/middle %.2f; SQLite's page caches included)\n",
		grid[0]>>20, grid[1]>>20, grid[2]>>20, ratio(grid[2], grid[1]))
	check(browser[1] > 0 && float64(browser[2]) <= maxGrowth*float64(browser[1]),
		"browser memory flat: max RSS by third of the run %d / %d / %d MiB (last/middle %.2f, at most %.2f)",
		browser[0]>>20, browser[1]>>20, browser[2]>>20, ratio(browser[2], browser[1]), maxGrowth)
	fmt.Printf("peak RSS: grid %d MiB (VmHWM), browser %d MiB (sampled); grid log %s\n", run.gridPeak>>20, run.browserPeak()>>20, run.log)
	if len(problems) > 0 {
		return fmt.Errorf("%d checks failed", len(problems))
	}
	fmt.Println("render soak passed")
	return nil
}

// crawlURLs returns the crawl's indexed URLs and its failed ones with their
// reason, from the crawl log.
func crawlURLs(api *apiCaller, id string) (indexed, failed map[string]string, err error) {
	indexed, failed = map[string]string{}, map[string]string{}
	cursor := ""
	for {
		path := "/api/v1/crawls/" + url.PathEscape(id) + "/urls?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page contracts.CrawlLog
		if _, err := api.call(http.MethodGet, path, nil, &page); err != nil {
			return nil, nil, fmt.Errorf("crawl log: %w", err)
		}
		for _, r := range page.URLs {
			switch r.Status {
			case contracts.Indexed:
				indexed[r.URL] = ""
			default:
				why := string(r.Status)
				if r.Reason != nil {
					why += ": " + *r.Reason
				}
				failed[r.URL] = why
			}
		}
		if page.NextCursor == nil {
			return indexed, failed, nil
		}
		cursor = *page.NextCursor
	}
}

// siteRequests compares what a site was asked for with what a crawl that
// renders every page once asks: each page once, and the JSON each script
// page loads once; robots.txt and the shared subresources as often as they
// come. It returns the paths asked more than once, never, and not expected.
func siteRequests(site *websim.ScriptSite) (twice, missing, unexpected []string) {
	want := map[string]bool{"/api/items.json": true, "/api/hidden.json": true}
	pages := append(site.StaticPages(), site.ScriptPages()...)
	for _, p := range pages {
		want[p] = true
	}
	items := len(site.ScriptPages()) - 2
	for i := 1; i <= items; i++ {
		want["/api/item/"+strconv.Itoa(i)+".json"] = true
	}
	shared := map[string]bool{"/robots.txt": true, "/app/app.js": true, "/app/app.css": true,
		"/static/site.css": true, "/static/logo.png": true, "/favicon.ico": true}
	got := site.Requests()
	for p := range want {
		switch n := got[p]; {
		case n == 0:
			missing = append(missing, p+" never")
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s %d times", p, n))
		}
	}
	for p, n := range got {
		if !want[p] && !shared[p] {
			unexpected = append(unexpected, fmt.Sprintf("%s %d times (not expected)", p, n))
		}
	}
	slices.Sort(twice)
	slices.Sort(missing)
	slices.Sort(unexpected)
	return twice, missing, unexpected
}

// thirds returns the largest value of each third of a run of wall seconds.
func thirds(samples []memSample, wall float64, v func(memSample) int64) [3]int64 {
	var out [3]int64
	for _, s := range samples {
		i := min(int(3*s.t.Seconds()/wall), 2)
		out[i] = max(out[i], v(s))
	}
	return out
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func first(l []string, n int) []string { return l[:min(len(l), n)] }

// metricLabels returns the label sets and values of a metric in a dump, on
// one line.
func metricLabels(dump, name string) string {
	var parts []string
	for line := range strings.Lines(dump) {
		if rest, ok := strings.CutPrefix(line, name+"{"); ok {
			labels, value, _ := strings.Cut(rest, "} ")
			parts = append(parts, labels+" "+strings.TrimSpace(value))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// writeSamples writes the memory samples as TSV.
func writeSamples(name string, samples []memSample) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "t_s\tindexed\tgrid_rss_kib\tgrid_go_heap_kib\tbrowser_pss_kib\tbrowser_processes")
	for _, s := range samples {
		fmt.Fprintf(w, "%.1f\t%d\t%d\t%d\t%d\t%d\n", s.t.Seconds(), s.indexed, s.gridRSS>>10, s.gridHeap>>10, s.browserRSS>>10, s.browsers)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
