package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot is what MCP's collector exposes: the crawls and the depth of
// the work queues.
type Snapshot struct {
	Crawls []CrawlCounts
	// Queues maps a queue label (loader_pending for every shard,
	// crawler_pending, index_pending, and each with ".dead" for its
	// dead-letter queues) to the messages waiting in it.
	Queues map[string]int64
}

// CrawlCounts is one crawl as the crawls collector exposes it.
type CrawlCounts struct {
	ID    string
	State string
	// Counts holds the crawl's records per status; nil leaves the crawl
	// out of gridcrawl_crawl_urls (only gridcrawl_crawls counts it).
	Counts map[string]int64
}

var (
	crawlsDesc = prometheus.NewDesc("gridcrawl_crawls",
		"Crawls known to MCP, by state.", []string{"state"}, nil)
	crawlURLsDesc = prometheus.NewDesc("gridcrawl_crawl_urls",
		"Records of a crawl per status (running and paused crawls, and final ones that ended less than an hour ago), read from the transaction index at most every GRIDCRAWL_METRICS_CACHE.",
		[]string{"crawl_id", "status"}, nil)
	queueDepthDesc = prometheus.NewDesc("gridcrawl_queue_messages",
		"Messages waiting in a work queue (every loader shard counts as loader_pending) or in its dead-letter queues (.dead), ready or delayed, not counting unsettled deliveries; read by MCP at most every GRIDCRAWL_METRICS_CACHE.",
		[]string{"queue"}, nil)
	crawlErrDesc = prometheus.NewDesc("gridcrawl_crawl_counts_errors_total",
		"Scrapes whose crawl counts or queue depths could not be read from the backends (the last good ones are exposed).", nil, nil)
)

// MCPCollector exposes gridcrawl_crawls, gridcrawl_crawl_urls and
// gridcrawl_queue_messages. It calls read at most once per ttl, whatever
// the scrape rate, and keeps exposing the last good reading while read
// fails; timeout bounds one read.
func MCPCollector(read func(ctx context.Context) (Snapshot, error), ttl, timeout time.Duration) prometheus.Collector {
	return &crawlsCollector{read: read, ttl: ttl, timeout: timeout}
}

type crawlsCollector struct {
	read         func(ctx context.Context) (Snapshot, error)
	ttl, timeout time.Duration

	mu     sync.Mutex // one read at a time; concurrent scrapes share it
	at     time.Time
	last   Snapshot
	errors int
}

func (c *crawlsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- crawlsDesc
	ch <- crawlURLsDesc
	ch <- queueDepthDesc
	ch <- crawlErrDesc
}

func (c *crawlsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.at.IsZero() || time.Since(c.at) >= c.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		snap, err := c.read(ctx)
		cancel()
		if err != nil {
			c.errors++
		} else {
			c.last = snap
		}
		c.at = time.Now() // a failing backend is asked again after ttl, not at every scrape
	}
	snap, errs := c.last, c.errors
	c.mu.Unlock()
	for q, n := range snap.Queues {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(n), q)
	}
	states := map[string]int{}
	for _, cr := range snap.Crawls {
		states[cr.State]++
		for status, n := range cr.Counts {
			ch <- prometheus.MustNewConstMetric(crawlURLsDesc, prometheus.GaugeValue, float64(n), cr.ID, status)
		}
	}
	for state, n := range states {
		ch <- prometheus.MustNewConstMetric(crawlsDesc, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(crawlErrDesc, prometheus.CounterValue, float64(errs))
}
