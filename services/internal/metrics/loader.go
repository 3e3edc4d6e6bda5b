package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is what an HTTP request of the loader asked for.
type Kind uint8

// Request kinds (label kind).
const (
	KindPage   Kind = iota // a page of a crawl
	KindRobots             // an origin's robots.txt
	KindEmbed              // a request of a page rendered in the browser (script, style, image, XHR...)
	numKinds
)

var kindNames = [numKinds]string{"page", "robots", "embed"}

// Outcome is what became of one URL the loader leased (label outcome of
// gridcrawl_loader_urls_total).
type Outcome uint8

// Loader outcomes.
const (
	// OutcomeFetched: a 2xx (or other non-error, non-redirect) response,
	// stored and moved to to-be-parsed.
	OutcomeFetched Outcome = iota
	// OutcomeRedirected: a 3xx response, stored and moved to to-be-parsed
	// (the crawler follows the redirect).
	OutcomeRedirected
	// OutcomeHTTPError: a response with status ≥ 400 (or < 200): the URL failed.
	OutcomeHTTPError
	// OutcomeFetchError: no response after the last attempt (network error, timeout).
	OutcomeFetchError
	// OutcomeRetry: a retryable failure (network error, 429, 503); fetched again later.
	OutcomeRetry
	// OutcomeRobotsDisallowed: robots.txt disallows the URL.
	OutcomeRobotsDisallowed
	// OutcomeRobotsUnreachable: the origin's robots.txt could not be had.
	OutcomeRobotsUnreachable
	// OutcomeRobotsFetch: the lease fetched the origin's robots.txt
	// instead; the URL is scheduled again.
	OutcomeRobotsFetch
	// OutcomeAddressNotAllowed: the host resolves outside GRIDCRAWL_ALLOW_NETS.
	OutcomeAddressNotAllowed
	// OutcomeCancelled: the crawl was cancelled.
	OutcomeCancelled
	// OutcomeInvalidURL: the URL does not parse.
	OutcomeInvalidURL
	// OutcomeOtherFailure: failed for another reason.
	OutcomeOtherFailure
	// OutcomePaused: the crawl is paused; the URL is parked.
	OutcomePaused
	// OutcomeRetired: the crawl host group's budget is spent; the URL is parked as retired.
	OutcomeRetired
	// OutcomeSkipped: the record was no longer to-be-loaded (a duplicate delivery).
	OutcomeSkipped
	// OutcomeRepublished: fetched before; its crawler contract is published again.
	OutcomeRepublished
	// OutcomeAbandoned: no outcome (index error, shutdown); the contract is retried.
	OutcomeAbandoned
	// OutcomeLost: the contract went back to the broker (connection lost).
	OutcomeLost
	// OutcomeUnchanged: a refetch of a continuous crawl found the page
	// unchanged (304, or the same payload digest): stored as a revisit
	// record, not parsed again.
	OutcomeUnchanged
	// OutcomeRenderFailed: the page was fetched but could not be rendered
	// in the browser (none, a crashed or unresponsive tab): the URL failed.
	OutcomeRenderFailed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"fetched", "redirected", "http-error", "fetch-error", "retry", "robots-disallowed", "robots-unreachable",
	"robots-fetch", "address-not-allowed", "cancelled", "invalid-url", "other-failure", "paused", "retired",
	"skipped", "republished", "abandoned", "lost", "unchanged", "render-failed",
}

// String returns the outcome's label value.
func (o Outcome) String() string { return outcomeNames[o] }

// RobotsResult is the result of one robots.txt fetch (label result).
type RobotsResult uint8

// Robots.txt fetch results, as RFC 9309 reads them.
const (
	// RobotsOK: a 2xx response; its rules apply.
	RobotsOK RobotsResult = iota
	// RobotsUnavailable: a 4xx response (or too many redirects): everything is allowed.
	RobotsUnavailable
	// RobotsUnreachable: a 5xx or 429 response: everything is disallowed for a while.
	RobotsUnreachable
	// RobotsError: no response (network error, timeout, address not allowed).
	RobotsError
	numRobotsResults
)

var robotsNames = [numRobotsResults]string{"ok", "unavailable", "unreachable", "error"}

// RobotsResultOf classifies the final status of a robots.txt fetch; 0
// means no response.
func RobotsResultOf(status int) RobotsResult {
	switch {
	case status == 0:
		return RobotsError
	case status == 429 || status >= 500:
		return RobotsUnreachable
	case status >= 200 && status < 300:
		return RobotsOK
	}
	return RobotsUnavailable
}

// Loader holds the loader's families.
type Loader struct {
	requests *prometheus.CounterVec
	// codes caches the request counter of each kind and status code
	// (index code-100; the last slot counts requests without a response).
	codes [numKinds][501]atomic.Pointer[prometheus.Counter]

	duration [numKinds]prometheus.Observer
	size     [numKinds]prometheus.Observer
	outcomes [numOutcomes]prometheus.Counter
	robots   [numRobotsResults]prometheus.Counter
	delay    prometheus.Observer
	warc     prometheus.Counter
	parked   prometheus.Counter
	filed    prometheus.Counter
	rebuilt  prometheus.Counter
	rendered [numRenderResults]prometheus.Counter
	renderT  prometheus.Observer
	// Deduplication across crawls (profile dedupe).
	dedupRevisits prometheus.Counter
	dedupRefused  prometheus.Counter
	dedupEntries  prometheus.Gauge
}

// RenderResult is what rendering one page gave (label result of
// gridcrawl_loader_rendered_pages_total).
type RenderResult uint8

// Render results.
const (
	RenderOK     RenderResult = iota // rendered, nothing cut
	RenderCut                        // rendered, a per-page limit cut something
	RenderFailed                     // not rendered: no browser, the tab crashed or did not answer
	numRenderResults
)

var renderNames = [numRenderResults]string{"ok", "cut", "failed"}

func newLoader(reg prometheus.Registerer) *Loader {
	f := factory{reg}
	l := &Loader{
		requests: f.counterVec("gridcrawl_loader_requests_total",
			"HTTP requests the loader sent (redirects of robots.txt included), by kind (page, robots), status class (2xx…, error) and status code (error: no response).",
			"kind", "class", "code"),
	}
	dur := f.histogramVec("gridcrawl_loader_fetch_duration_seconds",
		"Time from sending a request to the end of its response body, by kind.", fetchBuckets, "kind")
	size := f.histogramVec("gridcrawl_loader_response_size_bytes",
		"Response body bytes received (up to GRIDCRAWL_MAX_BODY_BYTES), by kind.", sizeBuckets, "kind")
	for k := range numKinds {
		l.duration[k] = dur.WithLabelValues(kindNames[k])
		l.size[k] = size.WithLabelValues(kindNames[k])
	}
	out := f.counterVec("gridcrawl_loader_urls_total",
		"URLs the loader took from its schedule, by what became of them.", "outcome")
	for o := range numOutcomes {
		l.outcomes[o] = out.WithLabelValues(outcomeNames[o])
	}
	rob := f.counterVec("gridcrawl_loader_robots_fetches_total",
		"robots.txt fetches, by result: ok (2xx), unavailable (4xx: all allowed), unreachable (5xx, 429: all disallowed for a while), error (no response).", "result")
	for r := range numRobotsResults {
		l.robots[r] = rob.WithLabelValues(robotsNames[r])
	}
	l.delay = f.histogram("gridcrawl_loader_politeness_delay_seconds",
		"Delay the politeness policy set on a crawl host group after each of its requests (delay factor, Crawl-delay, backoff, Retry-After).", delayBuckets)
	l.warc = f.counter("gridcrawl_loader_warc_bytes_total", "WARC bytes the loader stored in the asset store.")
	l.parked = f.counter("gridcrawl_loader_parked_urls_total",
		"URLs the loader parked in the broker (a crawl host group holding more than GRIDCRAWL_LOADER_GROUP_QUEUE, a paused crawl).")
	l.filed = f.counter("gridcrawl_loader_filed_urls_total",
		"URLs the loader filed in its durable frontier (GRIDCRAWL_LOADER_FRONTIER_DIR) from the contracts it took.")
	l.rebuilt = f.counter("gridcrawl_loader_rebuilt_urls_total",
		"URLs the loader filed in its durable frontier from the transaction index, rebuilding a shard it took over.")
	ren := f.counterVec("gridcrawl_loader_rendered_pages_total",
		"Pages the loader rendered in its headless browser, by result: ok, cut (a per-page limit on requests, bytes or time cut something), failed.", "result")
	for r := range numRenderResults {
		l.rendered[r] = ren.WithLabelValues(renderNames[r])
	}
	l.renderT = f.histogram("gridcrawl_loader_render_duration_seconds",
		"Time a rendered page held its tab: from opening it to the DOM taken, its requests included.", fetchBuckets)
	l.dedupRevisits = f.counter("gridcrawl_loader_dedup_revisits_total",
		"Responses the loader stored as revisit records because their payload was stored before in the crawl's dedupe scope (profile dedupe).")
	l.dedupRefused = f.counter("gridcrawl_loader_dedup_refused_total",
		"Payload digests the loader did not add to the digest index because it holds GRIDCRAWL_DEDUP_MAX_ENTRIES entries.")
	l.dedupEntries = prometheus.NewGauge(prometheus.GaugeOpts{Name: "gridcrawl_loader_dedup_entries",
		Help: "Entries of the payload-digest index (all scopes), as the loader last counted them."})
	f.register(l.dedupEntries)
	return l
}

// DedupRevisits counts responses stored as revisit records of an earlier
// payload.
func (l *Loader) DedupRevisits(n int) { l.dedupRevisits.Add(float64(n)) }

// DedupRefused counts digests not added to the full digest index.
func (l *Loader) DedupRefused(n int) { l.dedupRefused.Add(float64(n)) }

// DedupEntries sets the digest index's entry count.
func (l *Loader) DedupEntries(n int64) { l.dedupEntries.Set(float64(n)) }

// Rendered counts a page rendered (or not) in the browser, with the time
// it held its tab.
func (l *Loader) Rendered(r RenderResult, d time.Duration) {
	l.rendered[r].Inc()
	if r != RenderFailed {
		l.renderT.Observe(d.Seconds())
	}
}

// Request counts a request sent; code is its status, 0 when no response came.
func (l *Loader) Request(kind Kind, code int) {
	i := 500
	if code >= 100 && code < 600 {
		i = code - 100
	}
	slot := &l.codes[kind][i]
	c := slot.Load()
	if c == nil {
		class, label := "error", "error"
		if i < 500 {
			label = strconv.Itoa(code)
			class = label[:1] + "xx"
		}
		v := l.requests.WithLabelValues(kindNames[kind], class, label)
		slot.Store(&v)
		c = &v
	}
	(*c).Inc()
}

// Response records the duration and body size of a response.
func (l *Loader) Response(kind Kind, d time.Duration, bytes int) {
	l.duration[kind].Observe(d.Seconds())
	l.size[kind].Observe(float64(bytes))
}

// URL counts the outcome of one leased URL.
func (l *Loader) URL(o Outcome) { l.outcomes[o].Inc() }

// Robots counts a robots.txt fetch.
func (l *Loader) Robots(r RobotsResult) { l.robots[r].Inc() }

// PolitenessDelay records the delay set on a group after a request.
func (l *Loader) PolitenessDelay(d time.Duration) { l.delay.Observe(d.Seconds()) }

// WARCBytes counts stored WARC bytes.
func (l *Loader) WARCBytes(n int64) { l.warc.Add(float64(n)) }

// Parked counts parked URLs.
func (l *Loader) Parked(n int) { l.parked.Add(float64(n)) }

// Filed counts URLs filed in the durable frontier.
func (l *Loader) Filed(n int) { l.filed.Add(float64(n)) }

// Rebuilt counts URLs filed from the transaction index by a shard's new
// owner.
func (l *Loader) Rebuilt(n int) { l.rebuilt.Add(float64(n)) }

// BrowserStats is a snapshot of the loader's headless browser, read at
// scrape time.
type BrowserStats struct {
	TabsInUse int64            // pages loading now
	Restarts  map[string]int64 // by reason: pages, memory, crash
	Memory    int64            // resident bytes of its processes at the last check
	Escaped   int64            // requests that escaped interception, refused
}

// BrowserCollector exposes the browser's tabs, restarts and memory.
func BrowserCollector(snapshot func() BrowserStats) prometheus.Collector {
	return &browserCollector{snapshot: snapshot}
}

var (
	tabsDesc = prometheus.NewDesc("gridcrawl_loader_browser_tabs_in_use",
		"Pages loading in the loader's headless browser now.", nil, nil)
	restartsDesc = prometheus.NewDesc("gridcrawl_loader_browser_restarts_total",
		"Restarts of the loader's headless browser, by reason: pages (GRIDCRAWL_BROWSER_RESTART_PAGES), memory (GRIDCRAWL_BROWSER_MAX_MEMORY), crash, unresponsive (a tab that did not give its DOM).", []string{"reason"}, nil)
	browserMemDesc = prometheus.NewDesc("gridcrawl_loader_browser_memory_bytes",
		"Resident memory of the headless browser's processes at the last check.", nil, nil)
	escapedDesc = prometheus.NewDesc("gridcrawl_loader_browser_escaped_requests_total",
		"Requests of rendered pages that escaped the loader's interception and were refused (WebSockets, workers).", nil, nil)
)

type browserCollector struct{ snapshot func() BrowserStats }

func (c *browserCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tabsDesc
	ch <- restartsDesc
	ch <- browserMemDesc
	ch <- escapedDesc
}

func (c *browserCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	ch <- prometheus.MustNewConstMetric(tabsDesc, prometheus.GaugeValue, float64(s.TabsInUse))
	for _, reason := range []string{"pages", "memory", "crash", "unresponsive"} {
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(s.Restarts[reason]), reason)
	}
	ch <- prometheus.MustNewConstMetric(browserMemDesc, prometheus.GaugeValue, float64(s.Memory))
	ch <- prometheus.MustNewConstMetric(escapedDesc, prometheus.CounterValue, float64(s.Escaped))
}

// GroupStates is a snapshot of the loader's politeness scheduler, read at
// scrape time.
type GroupStates struct {
	// Groups counts crawl host groups by state (ready, waiting, busy,
	// inactive, retired, idle).
	Groups map[string]int
	// Queued is the number of URLs held in the scheduler.
	Queued int
}

// LoaderCollector exposes the scheduler's groups per state and its queued
// URLs, read by snapshot at each scrape (one lock of the scheduler).
func LoaderCollector(snapshot func() GroupStates) prometheus.Collector {
	return &loaderCollector{snapshot: snapshot}
}

var (
	groupsDesc = prometheus.NewDesc("gridcrawl_loader_host_groups",
		"Crawl host groups in the loader's politeness scheduler, by state.", []string{"state"}, nil)
	queuedDesc = prometheus.NewDesc("gridcrawl_loader_queued_urls",
		"URLs held in the loader's politeness scheduler.", nil, nil)
)

type loaderCollector struct{ snapshot func() GroupStates }

func (c *loaderCollector) Describe(ch chan<- *prometheus.Desc) { ch <- groupsDesc; ch <- queuedDesc }

func (c *loaderCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	for state, n := range s.Groups {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(s.Queued))
}

var esReadsDesc = prometheus.NewDesc("gridcrawl_elasticsearch_reads_total",
	"Reads the service sent to Elasticsearch, by index (its name after the prefix) and kind: realtime-get and refreshed-get count documents, search, count and refresh count requests.",
	[]string{"index", "kind"}, nil)

// ESRead is a count of one kind of Elasticsearch read of one index.
type ESRead struct {
	Index, Kind string
	N           int64
}

// ESReadsCollector exposes the Elasticsearch reads that reads returns.
func ESReadsCollector(reads func() []ESRead) prometheus.Collector {
	return esReadsCollector(reads)
}

type esReadsCollector func() []ESRead

func (c esReadsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- esReadsDesc }

func (c esReadsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c() {
		ch <- prometheus.MustNewConstMetric(esReadsDesc, prometheus.CounterValue, float64(r.N), r.Index, r.Kind)
	}
}
