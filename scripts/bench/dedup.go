package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// dedupConfig is what -dedup measures: a generated web crawled twice into
// one collection of one embedded grid (grid crawl --collection), with one
// page in every change of each host changed between the crawls (0: none).
type dedupConfig struct {
	hosts, pages, links, cross, bytes int
	depth, delay, change              int
	gridBin                           string
}

// dedupBench crawls the web twice into one collection and prints what each
// crawl stored, per page: the second crawl stores revisit records for the
// pages that did not change.
func dedupBench(c dedupConfig) error {
	web := websim.NewWeb(websim.WebConfig{Hosts: c.hosts, PagesPerHost: c.pages, LinksPerPage: c.links, CrossHostLinks: c.cross,
		PageBytes: c.bytes, Seed: 1})
	if err := web.Start(); err != nil {
		return fmt.Errorf("start simulated web: %w", err)
	}
	defer web.Close()
	data, err := os.MkdirTemp("", "gridcrawl-bench-dedup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	urlsFile := filepath.Join(data, "start-urls.txt")
	if err := writeLines(urlsFile, web.StartURLs()); err != nil {
		return err
	}
	dir := filepath.Join(data, "grid")
	fmt.Printf("simulated web: %d hosts x %d pages, %d links/page (%d cross-host), %d B/page, min delay %d ms, depth %d\n",
		c.hosts, c.pages, c.links, c.cross, c.bytes, c.delay, c.depth)
	type row struct {
		name    string
		st      contracts.CrawlStatus
		wall    time.Duration
		stored  int64 // growth of the asset store (WARC segments, CDXJ)
		digests int64 // size of the digest index after the crawl
	}
	var rows []row
	var last int64
	for i, name := range []string{"first crawl", "second crawl"} {
		if i == 1 && c.change > 0 {
			name = fmt.Sprintf("second crawl, %d pages changed", len(web.ChangeEvery(c.change)))
		}
		start := time.Now()
		st, err := dedupCrawl(c, dir, urlsFile)
		if err != nil {
			return err
		}
		parts, err := dataBytes(dir)
		if err != nil {
			return err
		}
		rows = append(rows, row{name: name, st: st, wall: time.Since(start), stored: parts["warc"] - last, digests: parts["digests"]})
		last = parts["warc"]
	}
	fmt.Printf("%-34s %8s %8s %12s %10s %9s %12s\n", "crawl", "pages", "wall", "stored B", "B/page", "of first", "digests.db")
	for _, r := range rows {
		pages := r.st.Counts[contracts.Indexed] + r.st.Counts[contracts.Redirected] + r.st.Counts[contracts.Failed]
		per := r.stored / max(pages, 1)
		fmt.Printf("%-34s %8d %7.1fs %12d %10d %8.1f%% %12d\n", r.name, pages, r.wall.Seconds(), r.stored, per,
			100*float64(r.stored)/float64(max(rows[0].stored, 1)), r.digests)
	}
	fmt.Println("stored: growth of the asset store (WARC segments and their CDXJ indexes) during the crawl")
	return nil
}

// dedupCrawl runs grid crawl into the collection "bench" on the data
// directory dir and returns the crawl's final status.
func dedupCrawl(c dedupConfig, dir, urlsFile string) (contracts.CrawlStatus, error) {
	var st contracts.CrawlStatus
	cmd := exec.Command(c.gridBin, "crawl", "--json", "--new", "--data", dir, "--depth", strconv.Itoa(c.depth),
		"--min-delay-ms", strconv.Itoa(c.delay), "--sitemaps=false", "--collection", "bench", "--urls-file", urlsFile)
	cmd.Env = append(os.Environ(), "GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE=*."+websim.WebZone+"=127.0.0.1",
		"GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT=") // the embedded grid
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return st, fmt.Errorf("grid crawl: %w\n%s", err, out.String())
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var lastLine []byte
	for sc.Scan() {
		lastLine = append(lastLine[:0], sc.Bytes()...)
	}
	if err := json.Unmarshal(lastLine, &st); err != nil {
		return st, fmt.Errorf("decode final status: %w", err)
	}
	return st, nil
}
