// Command bench crawls a simulated web of many hosts on loopback with the
// embedded grid (the grid binary, as a separate process) and reports pages
// per second, CPU seconds per page and the grid's peak memory.
//
//	go run ./scripts/bench -hosts 1000
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
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
	flag.Parse()
	if *gridMode {
		web := websim.NewWeb(websim.WebConfig{Hosts: *hosts, PagesPerHost: *pages, LinksPerPage: *links, CrossHostLinks: *cross, PageBytes: *bytesPer, Latency: *latency, Seed: 1})
		if err := web.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Printf("simulated web: %d hosts x %d pages, %d links/page (%d cross-host), %d B/page, min delay %d ms, depth %d\n",
			*hosts, *pages, *links, *cross, *bytesPer, *delay, *depth)
		err := gridBench(web, *depth, *delay, *loaders, *crawlers, *binDir)
		web.Close()
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
	data, err := os.MkdirTemp("", "gridcrawl-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	urlsFile := filepath.Join(data, "start-urls.txt")
	var b bytes.Buffer
	for _, u := range web.StartURLs() {
		b.WriteString(u + "\n")
	}
	if err := os.WriteFile(urlsFile, b.Bytes(), 0o644); err != nil {
		return err
	}
	args := []string{"crawl", "--json", "--data", filepath.Join(data, "grid"), "--depth", strconv.Itoa(depth),
		"--min-delay-ms", strconv.Itoa(delay), "--urls-file", urlsFile}
	cmd := exec.Command(gridBin, args...)
	cmd.Env = append(os.Environ(), "GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE="+web.Resolve(),
		"GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT=") // the embedded grid
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	var self0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("grid crawl: %w\n%s", err, out.String())
	}
	wall := time.Since(start)
	var self1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	var st contracts.CrawlStatus
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var last []byte
	for sc.Scan() {
		last = append(last[:0], sc.Bytes()...)
	}
	if err := json.Unmarshal(last, &st); err != nil {
		return fmt.Errorf("decode final status: %w", err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := tv(ru.Utime) + tv(ru.Stime)
	webCPU := tv(self1.Utime) + tv(self1.Stime) - tv(self0.Utime) - tv(self0.Stime)
	fetched := st.Counts[contracts.Indexed] + st.Counts[contracts.Failed] + st.Counts[contracts.Redirected]
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
	return nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
