// Package metrics defines gridcrawl's Prometheus metrics, one family set
// per service, and serves them.
//
// A Registry belongs to one process (or to one embedded grid, which runs
// every service in one process, or to one test): it is never the global
// default registry, so that tests can run several services side by side.
// Each family set is created and registered the first time it is asked for
// (Registry.Loader, Registry.Crawler, ...), so a registry shared by the
// services of an embedded grid holds every family exactly once, and a
// loader process exposes no crawler families.
//
// Names follow the Prometheus conventions: the gridcrawl_ prefix, _total
// for counters, base units (_seconds, _bytes), and labels of low
// cardinality only (never a URL or a host). Hot paths only increment
// counters and observe histograms through label handles resolved in
// advance; whatever needs a count from a backend is read at scrape time by
// a collector with a short cache (see CachedCollector).
package metrics

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Registry holds the metrics of one process. A nil *Registry is valid: its
// family sets work but are registered nowhere, for services built without
// metrics (tests, tools).
type Registry struct {
	reg *prometheus.Registry

	loaderOnce, crawlerOnce, mcpOnce, queueOnce, backendOnce sync.Once

	loader  *Loader
	crawler *Crawler
	mcp     *MCP
	queue   *Queue
	backend *Backend
}

// New returns a registry holding the Go runtime and process collectors.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{reg: reg}
}

// Handler serves the registry in the Prometheus text (or negotiated)
// exposition format.
func (r *Registry) Handler() http.Handler {
	if r == nil {
		return promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
	}
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg, ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer returns the registry as a prometheus.Gatherer (for tests and
// for pushing).
func (r *Registry) Gatherer() prometheus.Gatherer {
	if r == nil {
		return prometheus.NewRegistry()
	}
	return r.reg
}

// Register adds a collector (a scrape-time collector of a service). It
// fails if the collector's descriptors are registered already.
func (r *Registry) Register(c prometheus.Collector) error {
	if r == nil {
		return nil
	}
	return r.reg.Register(c)
}

// once returns the family set made by build, creating and registering it
// on the first call.
func once[T any](r *Registry, o *sync.Once, p **T, build func(prometheus.Registerer) *T) *T {
	o.Do(func() { *p = build(r.reg) })
	return *p
}

// Loader returns the loader's families.
func (r *Registry) Loader() *Loader {
	if r == nil {
		return newLoader(nil)
	}
	return once(r, &r.loaderOnce, &r.loader, newLoader)
}

// Crawler returns the crawler's families.
func (r *Registry) Crawler() *Crawler {
	if r == nil {
		return newCrawler(nil)
	}
	return once(r, &r.crawlerOnce, &r.crawler, newCrawler)
}

// MCP returns MCP's families.
func (r *Registry) MCP() *MCP {
	if r == nil {
		return newMCP(nil)
	}
	return once(r, &r.mcpOnce, &r.mcp, newMCP)
}

// Queue returns the queue families.
func (r *Registry) Queue() *Queue {
	if r == nil {
		return newQueue(nil)
	}
	return once(r, &r.queueOnce, &r.queue, newQueue)
}

// Backend returns the backend operation families.
func (r *Registry) Backend() *Backend {
	if r == nil {
		return newBackend(nil)
	}
	return once(r, &r.backendOnce, &r.backend, newBackend)
}

// factory registers what it creates with reg, when reg is not nil.
type factory struct{ reg prometheus.Registerer }

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.register(c)
	return c
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.register(c)
	return c
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.register(h)
	return h
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.register(h)
	return h
}

func (f factory) register(c prometheus.Collector) {
	if f.reg != nil {
		f.reg.MustRegister(c) // each family set is registered once (sync.Once)
	}
}

// Buckets shared by several families.
var (
	// latencyBuckets span a fast local call to a slow remote one.
	latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	// fetchBuckets span a fast local server to the fetch timeout.
	fetchBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}
	// sizeBuckets span 256 bytes to the default body limit (8 MiB), ×4.
	sizeBuckets = prometheus.ExponentialBuckets(256, 4, 9)
	// delayBuckets span no delay to the longest Crawl-delay honoured by default.
	delayBuckets = []float64{0, .01, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300}
)

// WriteFile writes every metric of r to the file name in Prometheus' text
// exposition format, replacing it.
func (r *Registry) WriteFile(name string) error {
	fams, err := r.Gatherer().Gather()
	if err != nil {
		return fmt.Errorf("gather metrics: %w", err)
	}
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			return fmt.Errorf("encode metrics: %w", err)
		}
	}
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}
