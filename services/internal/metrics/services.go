package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// Crawler holds the crawler's families.
type Crawler struct {
	pages  *prometheus.CounterVec
	byName map[contracts.Status]prometheus.Counter
	links  prometheus.Counter
}

func newCrawler(reg prometheus.Registerer) *Crawler {
	f := factory{reg}
	c := &Crawler{
		pages: f.counterVec("gridcrawl_crawler_pages_total",
			"Pages the crawler settled, by the status it moved them to (to-be-indexed, indexed for a relink, redirected, failed).", "status"),
		links: f.counter("gridcrawl_crawler_links_enqueued_total",
			"New URLs the crawler wrote as to-be-loaded (links, redirect targets) and published to the loaders."),
	}
	c.byName = map[contracts.Status]prometheus.Counter{}
	for _, s := range []contracts.Status{contracts.ToBeIndexed, contracts.Indexed, contracts.Redirected, contracts.Failed} {
		c.byName[s] = c.pages.WithLabelValues(string(s))
	}
	return c
}

// Page counts a page moved to status.
func (c *Crawler) Page(status contracts.Status) {
	if n, ok := c.byName[status]; ok {
		n.Inc()
		return
	}
	c.pages.WithLabelValues(string(status)).Inc()
}

// Links counts new URLs enqueued.
func (c *Crawler) Links(n int) { c.links.Add(float64(n)) }

// MCP holds MCP's families.
type MCP struct {
	indexed   prometheus.Counter
	stored    prometheus.Counter
	recovered prometheus.Counter
	due       prometheus.Counter
}

func newMCP(reg prometheus.Registerer) *MCP {
	f := factory{reg}
	return &MCP{
		indexed: f.counter("gridcrawl_mcp_documents_indexed_total",
			"Pages the indexer moved to indexed once their documents were stored in the search index."),
		stored: f.counter("gridcrawl_mcp_documents_stored_total",
			"Documents the indexer wrote to the search index (an upsert; a redelivered contract writes its documents again)."),
		recovered: f.counter("gridcrawl_mcp_recovered_urls_total",
			"URLs the recovery sweep republished after their record sat past GRIDCRAWL_RECOVERY_LEASE."),
		due: f.counter("gridcrawl_mcp_due_urls_total",
			"URLs of continuous crawls the due check took back into the pipeline for a refetch."),
	}
}

// Indexed counts pages moved to indexed.
func (m *MCP) Indexed(n int) { m.indexed.Add(float64(n)) }

// Stored counts documents written to the search index.
func (m *MCP) Stored(n int) { m.stored.Add(float64(n)) }

// Recovered counts URLs republished by the recovery sweep.
func (m *MCP) Recovered(n int) { m.recovered.Add(float64(n)) }

// DueTaken counts URLs the due check took back into the pipeline.
func (m *MCP) DueTaken(n int) { m.due.Add(float64(n)) }

// Queue holds the families of the message queue, as one process uses it.
type Queue struct {
	published, consumed, redelivered, acked, retried, postponed, deadLettered *prometheus.CounterVec
	known                                                                     map[string]*QueueCounters
}

// QueueCounters are the counters of one queue label.
type QueueCounters struct {
	Published, Consumed, Redelivered, Acked, Retried, Postponed, DeadLettered prometheus.Counter
}

// Queue label values: the three work queues (every loader shard counts as
// loader_pending), and other for any other queue.
var queueLabels = []string{"loader_pending", "crawler_pending", "index_pending", "other"}

func newQueue(reg prometheus.Registerer) *Queue {
	f := factory{reg}
	q := &Queue{
		published: f.counterVec("gridcrawl_queue_published_total",
			"Contracts (messages) this process published, by queue (loader shards count as loader_pending).", "queue"),
		consumed: f.counterVec("gridcrawl_queue_consumed_total",
			"Contracts delivered to this process, redeliveries included, by queue.", "queue"),
		redelivered: f.counterVec("gridcrawl_queue_redelivered_total",
			"Contracts delivered again after a consumer stopped without settling them, by queue.", "queue"),
		acked: f.counterVec("gridcrawl_queue_acked_total",
			"Contracts this process acknowledged (done), by queue.", "queue"),
		retried: f.counterVec("gridcrawl_queue_retried_total",
			"Contracts this process returned for a later attempt (nack with delay), by queue.", "queue"),
		postponed: f.counterVec("gridcrawl_queue_postponed_total",
			"Contracts this process returned for later without counting an attempt, because a backend was down, by queue.", "queue"),
		deadLettered: f.counterVec("gridcrawl_queue_dead_lettered_total",
			"Contracts this process moved to the queue's dead-letter queue (undecodable, or out of attempts), by queue.", "queue"),
		known: map[string]*QueueCounters{},
	}
	for _, name := range queueLabels {
		q.known[name] = &QueueCounters{
			Published: q.published.WithLabelValues(name), Consumed: q.consumed.WithLabelValues(name),
			Redelivered: q.redelivered.WithLabelValues(name), Acked: q.acked.WithLabelValues(name),
			Retried: q.retried.WithLabelValues(name), Postponed: q.postponed.WithLabelValues(name), DeadLettered: q.deadLettered.WithLabelValues(name),
		}
	}
	return q
}

// For returns the counters of queue name (a loader shard counts as
// loader_pending; an unknown queue as other).
func (q *Queue) For(name string) *QueueCounters {
	if c := q.known[name]; c != nil {
		return c
	}
	if strings.HasPrefix(name, "loader_pending.") && !strings.HasSuffix(name, ".dead") {
		return q.known["loader_pending"]
	}
	return q.known["other"]
}

// Backend holds the families of backend operations.
type Backend struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

func newBackend(reg prometheus.Registerer) *Backend {
	f := factory{reg}
	return &Backend{
		duration: f.histogramVec("gridcrawl_backend_operation_duration_seconds",
			"Latency of backend operations, by backend (queue, txindex, assets, search) and operation.", latencyBuckets, "backend", "operation"),
		errors: f.counterVec("gridcrawl_backend_operation_errors_total",
			"Backend operations that returned an error, by backend and operation.", "backend", "operation"),
	}
}

// Op is the instrumentation of one backend operation.
type Op struct {
	duration prometheus.Observer
	errors   prometheus.Counter
}

// Op returns the instrumentation of operation op of backend b; callers
// resolve it once and keep it.
func (b *Backend) Op(backend, op string) Op {
	return Op{duration: b.duration.WithLabelValues(backend, op), errors: b.errors.WithLabelValues(backend, op)}
}

// Done records an operation that started at start and returned err.
func (o Op) Done(start time.Time, err error) {
	o.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		o.errors.Inc()
	}
}
