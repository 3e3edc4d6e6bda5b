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
// With -backend-kills it is the cluster test (scripts/cluster-test.sh, make
// test-cluster): on the RabbitMQ, Elasticsearch and MinIO clusters of
// scripts/cluster/cluster.sh it kills -9 one node of each cluster in turn
// while the crawl is under way (the RabbitMQ node holding the most queue
// leaders, the Elasticsearch node holding the most of the run's primaries,
// the first MinIO node) and starts it again after -restart-after, or never
// with -no-restart; no service is killed unless -kill-every is given.
//
// Every run checks, besides pages lost and work done twice: that no service
// exited on its own, that no host was fetched twice within the politeness
// delay (the web server's log), that every dead-letter queue is empty, that
// the documented termination query (_count of the crawl's records not in a
// final state, docs/operations.md) says 0 once MCP says finished, that every
// WARC segment in the bucket passes warcio check and that every line of the
// crawl's CDXJ reads back from MinIO as the record it names.
//
// With -capacity (scripts/capacity.sh) a run without kills ends with what one
// page cost: Elasticsearch bytes per document of each index, before and after
// a force merge, documents written, gets and queries per page, transaction
// records per page, WARC and CDXJ bytes per page in MinIO, and the services'
// broker publishes and backend operations per page (docs/scaling.md).
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
	"path/filepath"
	"strconv"
	"strings"
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

	backendKills []string  // clusters (rabbitmq, elasticsearch, minio) or node names, killed in turn
	killAt       []float64 // fractions of the reachable pages fetched at which each backend kill happens
	noRestart    bool      // killed backend nodes stay down
	clusterSh    string    // scripts/cluster/cluster.sh: kill, start, leader-node, primary-node
	rabbitmqctl  []string  // command (and leading arguments) running rabbitmqctl against the broker
	archiveCheck bool      // warcio check of every segment, every CDXJ line read back
	warcio       string    // the warcio executable
	capacity     bool      // print the per-page sizes and counts (scripts/capacity.sh)
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
	backendKills := flag.String("backend-kills", "", "kill -9 one backend node of each of these in turn mid-crawl, through -cluster-script: rabbitmq (the node holding the most queue leaders), elasticsearch (the node holding the most of the run's primaries), minio (minio1, the first endpoint), or node names such as rabbit2; no service is killed unless -kill-every is given")
	killAt := flag.String("kill-at", "0.15,0.45,0.75", "with -backend-kills: the fractions of the reachable pages fetched (the web server's count) at which each kill happens, in order")
	flag.BoolVar(&c.noRestart, "no-restart", false, "with -backend-kills: the killed nodes stay down (one node per cluster at most)")
	flag.StringVar(&c.clusterSh, "cluster-script", "scripts/cluster/cluster.sh", "the cluster script whose kill, start, leader-node and primary-node subcommands -backend-kills uses")
	ctl := flag.String("rabbitmqctl", "scripts/services/rabbitmq.sh ctl rabbitmqctl", "command (split on spaces) that runs rabbitmqctl against the broker of GRIDCRAWL_AMQP_URL, for the run's virtual host and the dead-letter check; \"-n NODE1,NODE2,...\" in it tries each node in turn (a cluster with a node down)")
	flag.BoolVar(&c.archiveCheck, "archive-check", true, "at the end, run warcio check on every WARC segment in the bucket and read back the record of every CDXJ line from MinIO")
	flag.StringVar(&c.warcio, "warcio", "", "the warcio executable for -archive-check (default: $GRIDCRAWL_PYWB_VENV/bin/warcio, the venv of scripts/services/pywb.sh)")
	flag.BoolVar(&c.capacity, "capacity", false, "at the end, print per page fetched: Elasticsearch bytes per document of each index (after a refresh, before and after a force merge to one segment), writes, queries and gets per page, transaction records per page, MinIO bytes per page (WARC, CDXJ), and the services' broker publishes and backend operations per page (scripts/capacity.sh); meant for a run without kills")
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
		if err := cleanUp(*clean, strings.Fields(*ctl)); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
		return
	}
	var err error
	if c.backendKills, err = splitList(*backendKills); err == nil {
		c.killAt, err = fractions(*killAt)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	c.rabbitmqctl = strings.Fields(*ctl)
	if c.warcio == "" {
		venv := os.Getenv("GRIDCRAWL_PYWB_VENV")
		if venv == "" {
			home, _ := os.UserHomeDir()
			venv = filepath.Join(home, ".cache", "gridcrawl-services", "pywb-venv")
		}
		c.warcio = filepath.Join(venv, "bin", "warcio")
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(c.backendKills) > 0 {
		// The cluster test: backend nodes die, services only when asked;
		// one crawl, which the kills are scheduled in.
		if !set["kill-every"] {
			c.killEvery = 0
		}
		if !set["recrawl"] {
			c.recrawl = false
		}
	}
	if *short {
		preset := map[string]func(){
			"duration":     func() { c.duration = 2 * time.Minute },
			"drain":        func() { c.drain = 10 * time.Minute },
			"pages":        func() { c.pages = 5000 },
			"hosts":        func() { c.hosts = 50 },
			"min-delay-ms": func() { c.delayMS = 500 },
			"kill-every": func() {
				if len(c.backendKills) == 0 {
					c.killEvery = 45 * time.Second
				}
			},
			"max-kills": func() { c.maxKills = 1 },
			"sample":    func() { c.sample = 5 * time.Second },
			"recrawl":   func() { c.recrawl = false },
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
	case len(c.killAt) < len(c.backendKills):
		return fmt.Errorf("-kill-at has %d fractions for %d -backend-kills", len(c.killAt), len(c.backendKills))
	case len(c.rabbitmqctl) == 0:
		return fmt.Errorf("-rabbitmqctl is empty")
	}
	seen := map[string]string{}
	for _, k := range c.backendKills {
		cl := nodeCluster(k)
		if cl == "" {
			return fmt.Errorf("-backend-kills %q: want rabbitmq, elasticsearch, minio or a node name (rabbit1-3, es1-3, minio1-4)", k)
		}
		if c.noRestart && seen[cl] != "" {
			return fmt.Errorf("-backend-kills %s and %s with -no-restart: at most one node of each cluster may stay down", seen[cl], k)
		}
		seen[cl] = k
	}
	if len(c.backendKills) > 0 {
		if _, err := os.Stat(c.clusterSh); err != nil {
			return fmt.Errorf("-cluster-script: %w", err)
		}
	}
	if c.archiveCheck {
		if _, err := os.Stat(c.warcio); err != nil {
			return fmt.Errorf("no warcio for -archive-check (%w): install it with scripts/services/pywb.sh install, set GRIDCRAWL_PYWB_VENV or -warcio, or give -archive-check=false", err)
		}
	}
	for _, k := range []string{"GRIDCRAWL_AMQP_URL", "GRIDCRAWL_ES_URL", "GRIDCRAWL_S3_ENDPOINT"} {
		if os.Getenv(k) == "" {
			return fmt.Errorf("%s is not set: run eval \"$(scripts/services/up.sh)\" first, or scripts/soak.sh", k)
		}
	}
	return nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out, nil
}

// fractions parses a comma-separated list of increasing fractions in (0, 1).
func fractions(s string) ([]float64, error) {
	fs, _ := splitList(s)
	out := make([]float64, 0, len(fs))
	for _, f := range fs {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 || v >= 1 {
			return nil, fmt.Errorf("-kill-at %q: %q is not a fraction between 0 and 1", s, f)
		}
		if len(out) > 0 && v <= out[len(out)-1] {
			return nil, fmt.Errorf("-kill-at %q: fractions must increase", s)
		}
		out = append(out, v)
	}
	return out, nil
}
