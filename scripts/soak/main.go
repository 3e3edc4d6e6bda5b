// Command soak runs the grid-mode services (MCP, loaders, crawlers as
// processes on the real RabbitMQ, Elasticsearch and MinIO named by the
// environment) for a long time over a large simulated web, kills a random
// service with SIGKILL every few minutes and restarts it, and samples every
// service's resident memory, goroutines and open files meanwhile. At the end
// it checks every crawl against the web's own link graph: pages lost
// (reachable but not indexed), pages fetched twice (the web server's request
// log) and documents indexed twice (Elasticsearch's _version of each
// document, which every index operation on it raises).
//
//	scripts/soak.sh                      # 30 minutes, 100,000 pages
//	scripts/soak.sh -short               # about 3 minutes, 5,000 pages, one kill
//	go run ./scripts/soak -duration 10m  # backends already up, binaries in bin/
//
// Each run has its own RabbitMQ virtual host, Elasticsearch index prefix and
// MinIO bucket, all deleted at the end (-keep keeps them), so a run's disk
// use is bounded by one crawl's indices and WARC objects.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config is what one soak run does.
type config struct {
	duration     time.Duration // kills happen within it; a crawl still running at its end drains
	drain        time.Duration // longest wait for the last crawl to finish after duration
	pages        int           // pages of the simulated web (hosts × pages per host)
	hosts        int
	links, cross int
	pageBytes    int
	delayMS      int           // politeness: least milliseconds between fetches of one host
	killEvery    time.Duration // a random service is killed this often (0: never)
	maxKills     int           // at most this many kills (0: no limit)
	victims      string        // comma-separated services that may be killed (empty: any)
	restartAfter time.Duration // a killed service is started again after this
	sample       time.Duration
	loaders      int
	crawlers     int
	recrawl      bool  // a crawl that finishes before duration is followed by one over a new web
	maxDiskMiB   int64 // no new crawl once the run's indices and objects exceed this
	binDir       string
	out          string // directory of the samples, the summary and the services' logs
	logLevel     string
	keep         bool // keep the vhost, indices and bucket
	seed         int64
}

func main() {
	var c config
	short := flag.Bool("short", false, "a short soak: 2 minutes, 5,000 pages on 50 hosts, one kill (flags given explicitly win)")
	flag.DurationVar(&c.duration, "duration", 30*time.Minute, "how long services are killed and restarted; a crawl still running then is waited for (-drain)")
	flag.DurationVar(&c.drain, "drain", 20*time.Minute, "longest wait for the last crawl to finish after -duration")
	flag.IntVar(&c.pages, "pages", 100_000, "pages in the simulated web")
	flag.IntVar(&c.hosts, "hosts", 200, "hosts in the simulated web (pages are spread evenly)")
	flag.IntVar(&c.links, "links", 8, "links per page")
	flag.IntVar(&c.cross, "cross", 2, "links per page to other hosts")
	flag.IntVar(&c.pageBytes, "page-bytes", 20<<10, "bytes per page")
	flag.IntVar(&c.delayMS, "min-delay-ms", 4000, "politeness: least milliseconds between fetches of one host; hosts×1000/delay bounds the page rate")
	flag.DurationVar(&c.killEvery, "kill-every", 3*time.Minute, "kill -9 a random service this often (0: never); services are drawn in shuffled rounds, so each is killed as often as the others")
	flag.StringVar(&c.victims, "victims", "", "comma-separated services that may be killed, such as mcp,loader-1 (default: any)")
	flag.IntVar(&c.maxKills, "max-kills", 0, "at most this many kills (0: no limit)")
	flag.DurationVar(&c.restartAfter, "restart-after", 5*time.Second, "restart a killed service after this")
	flag.DurationVar(&c.sample, "sample", 10*time.Second, "sample every service this often")
	flag.IntVar(&c.loaders, "loaders", 2, "loader processes")
	flag.IntVar(&c.crawlers, "crawlers", 2, "crawler processes")
	flag.BoolVar(&c.recrawl, "recrawl", true, "when a crawl finishes before -duration, crawl a new web (another seed and port) to keep the load")
	flag.Int64Var(&c.maxDiskMiB, "max-disk-mib", 6144, "start no further crawl (-recrawl) once this run's Elasticsearch indices and MinIO objects exceed this many MiB (a 100,000-page crawl of 20 KB pages takes about 3 GiB)")
	flag.StringVar(&c.binDir, "bin", "bin", "directory of the mcp, loader and crawler binaries")
	flag.StringVar(&c.out, "out", "", "directory for samples.tsv, events.tsv, summary.txt and the services' logs (default: a new temporary directory)")
	flag.StringVar(&c.logLevel, "log-level", "warn", "GRIDCRAWL_LOG_LEVEL of the services (info logs grow with the pages)")
	flag.BoolVar(&c.keep, "keep", false, "keep the RabbitMQ virtual host, Elasticsearch indices and MinIO bucket for inspection")
	flag.Int64Var(&c.seed, "seed", 1, "seed of the first web and of the kill schedule")
	clean := flag.String("clean", "", "delete what a -keep run left (its name, gridsoak-XXXXXXXX: virtual host, indices, bucket) and exit")
	reportDir := flag.String("report", "", "print the per-service summary of the samples.tsv in this directory (of an earlier run) and exit")
	flag.Parse()
	if *reportDir != "" {
		if err := reportFile(*reportDir, c.sample); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
		return
	}
	if *clean != "" {
		if err := cleanUp(*clean); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
		return
	}
	if *short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		preset := map[string]func(){
			"duration":     func() { c.duration = 2 * time.Minute },
			"drain":        func() { c.drain = 10 * time.Minute },
			"pages":        func() { c.pages = 5000 },
			"hosts":        func() { c.hosts = 50 },
			"min-delay-ms": func() { c.delayMS = 500 },
			"kill-every":   func() { c.killEvery = 45 * time.Second },
			"max-kills":    func() { c.maxKills = 1 },
			"sample":       func() { c.sample = 5 * time.Second },
			"recrawl":      func() { c.recrawl = false },
		}
		for name, apply := range preset {
			if !set[name] {
				apply()
			}
		}
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	// An interrupt stops the run: the services are killed and the virtual
	// host, indices and bucket deleted all the same.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func (c config) validate() error {
	switch {
	case c.hosts < 1 || c.pages < c.hosts:
		return fmt.Errorf("-hosts %d, -pages %d: want at least one page per host", c.hosts, c.pages)
	case c.duration <= 0 || c.sample <= 0:
		return fmt.Errorf("-duration and -sample must be positive")
	case c.loaders < 1 || c.crawlers < 1:
		return fmt.Errorf("want at least one loader and one crawler")
	case c.cross > c.links:
		return fmt.Errorf("-cross %d exceeds -links %d", c.cross, c.links)
	}
	for _, k := range []string{"GRIDCRAWL_AMQP_URL", "GRIDCRAWL_ES_URL", "GRIDCRAWL_S3_ENDPOINT"} {
		if os.Getenv(k) == "" {
			return fmt.Errorf("%s is not set: run eval \"$(scripts/services/up.sh)\" first, or scripts/soak.sh", k)
		}
	}
	return nil
}
