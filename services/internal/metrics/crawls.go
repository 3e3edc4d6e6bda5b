package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
	crawlErrDesc = prometheus.NewDesc("gridcrawl_crawl_counts_errors_total",
		"Scrapes whose crawl counts could not be read from the backends (the last good ones are exposed).", nil, nil)
)

// CrawlsCollector exposes gridcrawl_crawls and gridcrawl_crawl_urls. It
// calls read at most once per ttl, whatever the scrape rate, and keeps
// exposing the last good reading while read fails; timeout bounds one read.
func CrawlsCollector(read func(ctx context.Context) ([]CrawlCounts, error), ttl, timeout time.Duration) prometheus.Collector {
	return &crawlsCollector{read: read, ttl: ttl, timeout: timeout}
}

type crawlsCollector struct {
	read         func(ctx context.Context) ([]CrawlCounts, error)
	ttl, timeout time.Duration

	mu     sync.Mutex // one read at a time; concurrent scrapes share it
	at     time.Time
	last   []CrawlCounts
	errors int
}

func (c *crawlsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- crawlsDesc
	ch <- crawlURLsDesc
	ch <- crawlErrDesc
}

func (c *crawlsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.at.IsZero() || time.Since(c.at) >= c.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		cs, err := c.read(ctx)
		cancel()
		if err != nil {
			c.errors++
		} else {
			c.last = cs
		}
		c.at = time.Now() // a failing backend is asked again after ttl, not at every scrape
	}
	cs, errs := c.last, c.errors
	c.mu.Unlock()
	states := map[string]int{}
	for _, cr := range cs {
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
