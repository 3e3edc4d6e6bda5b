// Package loader is the loader service: it consumes loader contracts, applies
// per-host politeness and robots.txt, fetches, writes every exchange as WARC
// records into segment objects in the asset store, moves each URL to
// to-be-parsed (or failed) and publishes crawler contracts.
//
// A URL goes through five stages, in the order data flows, in three
// packages below this one; each imports only the ones below it, and this
// one wires them and runs the workers. The worker (Loader.work) takes one
// task at a time from the frontier, fetches it, and routes the outcome to
// the stage that owns it; no stage calls back into an earlier one:
//
//	loader_pending                                                     crawler_pending
//	     |                                                                    ^
//	     v                                                                    |
//	  intake ----> schedule ----> fetch ----> worker ----> record ----> publish
//	     |           ^    |                     |   fetched, failed,
//	     | park      |    | park (paused)       |   retired, skip, republish
//	     v           |    v                     |
//	loader_pending   +--------------------------+
//	  (delayed)        retry, again, paused, abandon
//
// The packages:
//
//   - queueing, the frontier (intake and schedule): decodes a contract in
//     the consumer shell, groups its URLs by crawl host group, and holds
//     them in pkg/politeness, parks them (publishes them back, delayed, to
//     their shard) or files them in a store of the shard; maps each crawl's
//     profile onto politeness' delays and budgets; keeps the holders of
//     each group's prefetch slots, the per-shard politeness state that
//     survives a failover, and the shard leases of a loader with a durable
//     frontier. It takes back the tasks whose lease ended without an
//     outcome to record, and ends every task: its contract is settled
//     through the consumer shell (consume.Parts) once each URL has an
//     outcome.
//   - fetcher: turns one leased task into exactly one outcome: fetched,
//     failed (with a true reason), retry, again (robots.txt was fetched:
//     that lease's one request), paused, skip, republish, abandon or lost;
//     HTTP through the network guard, robots.txt, rendering in a browser.
//   - recorder: writes the WARC records into the segment, stores it and
//     applies the transitions in batches, one per flush; then publishes
//     each recorded batch's crawler contracts, and only then ends its
//     tasks.
//
// The recorder and the fetcher hold neither the loader nor the frontier:
// they get narrow dependencies, and the recorder ends a task through the
// frontier's Settle, given as a function value, which releases the task's
// claim (taken at admission, so that a duplicate is not fetched meanwhile)
// once its record is durable.
//
// A contract is acked only when every URL it carries has a durable outcome:
// the WARC segment is stored, the transaction index updated and the crawler
// contracts confirmed. On shutdown the loader stops intake, lets in-flight
// fetches finish (bounded by ShutdownTimeout), flushes their outcomes and
// settles their contracts; the rest go back to the queue.
package loader

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/gcnudge"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/crawlcache"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/fetcher"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/recorder"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Config configures a loader. Every field is an environment variable.
type Config struct {
	// ID names the loader in WARC metadata and its frontier report. WARC
	// segment keys add a per-process component, so a fixed ID never makes
	// a restarted loader overwrite a segment.
	ID           string `env:"GRIDCRAWL_LOADER_ID"`
	Workers      int    `env:"GRIDCRAWL_LOADER_WORKERS" envDefault:"32"`
	Prefetch     int    `env:"GRIDCRAWL_LOADER_PREFETCH" envDefault:"2048"`
	MaxBodyBytes int64  `env:"GRIDCRAWL_MAX_BODY_BYTES" envDefault:"8388608"`
	// RecoveryLease is the coordinator's (the same variable): a URL whose
	// record has waited that long may have been published again by the
	// recovery sweep, and a copy of it fetched already, so the loader
	// trusts a contract's record snapshot only while it is younger than
	// half of it, and reads the record otherwise.
	RecoveryLease time.Duration `env:"GRIDCRAWL_RECOVERY_LEASE" envDefault:"10m"`
	// BodyBudget bounds the page body bytes the workers hold together
	// beyond the first 256 KiB of each body, from the read until the body
	// is in the WARC segment, counting the room allocated ahead of the
	// bytes (raised to the largest body a page fetch may keep; sitemaps,
	// up to 50 MiB, are not counted): a web that sends every worker a body
	// at the cap at once makes them take turns instead of multiplying the
	// memory. The default, one body at the cap at a time (bodies under
	// 1.25 MiB take an eighth of it at most), keeps a loader's peak memory on
	// a hostile web near 1.5 times an ordinary web's; raise it for webs of
	// many large bodies (archives, PDFs) when memory allows.
	BodyBudget int64 `env:"GRIDCRAWL_LOADER_BODY_BUDGET" envDefault:"8388608"`
	// RecordBytes bounds the response bytes (as read, room included) the
	// loader has fetched and not yet flushed: past half of it a flush starts
	// at once, and past all of it the workers take no new URL until a flush
	// has taken them. A flush waits for room in the handoff of a crawler in
	// the same process (GRIDCRAWL_HANDOFF_BYTES) before it hands over its
	// responses, so with this bound a crawler that falls behind (or waits
	// for its indexer) holds the loader back, instead of the loader
	// fetching ahead with its responses in memory.
	RecordBytes int64 `env:"GRIDCRAWL_LOADER_RECORD_BYTES" envDefault:"8388608"`
	// RedeliveryGrace delays the URLs of a contract the broker delivered
	// again (its consumer's channel closed: a loader stopped, or its broker
	// node died) by this much before the loader reads their records and
	// fetches them. The loader that had the contract may still be fetching
	// and recording it (its fetches run on after the broker took the
	// contract back, and its records can lag under load: over 10 s in the
	// cluster test's RabbitMQ node kill, where both loaders lost their
	// contracts and each took over shards of the other); a loader that
	// reads a record before that one lands fetches the page a second time.
	// 0 reads at once.
	RedeliveryGrace time.Duration `env:"GRIDCRAWL_LOADER_REDELIVERY_GRACE" envDefault:"30s"`
	FetchTimeout    time.Duration `env:"GRIDCRAWL_FETCH_TIMEOUT" envDefault:"30s"`
	FetchAttempts   int           `env:"GRIDCRAWL_FETCH_ATTEMPTS" envDefault:"3"`
	RetryDelay      time.Duration `env:"GRIDCRAWL_FETCH_RETRY_DELAY" envDefault:"10s"`
	CrawlDelayCap   time.Duration `env:"GRIDCRAWL_CRAWL_DELAY_CAP" envDefault:"30s"`
	AllowNets       string        `env:"GRIDCRAWL_ALLOW_NETS"`
	Resolve         string        `env:"GRIDCRAWL_RESOLVE"`
	// SegmentBytes and SegmentAge rotate WARC segments: a segment takes no
	// more records once it is this large or this old. Only stores that can
	// append (the embedded one) keep a segment open across flushes; on the
	// others every flush stores one object.
	SegmentBytes  int64         `env:"GRIDCRAWL_WARC_SEGMENT_BYTES" envDefault:"33554432"`
	SegmentAge    time.Duration `env:"GRIDCRAWL_WARC_SEGMENT_AGE" envDefault:"10m"`
	FlushInterval time.Duration `env:"GRIDCRAWL_WARC_FLUSH_INTERVAL" envDefault:"250ms"`
	Gzip          bool          `env:"GRIDCRAWL_WARC_GZIP" envDefault:"true"`
	RobotsTTL     time.Duration `env:"GRIDCRAWL_ROBOTS_TTL" envDefault:"24h"`
	// GroupQueue bounds the URLs one crawl host group holds in the loader;
	// more are parked in the broker (see queueing/intake.go).
	GroupQueue int `env:"GRIDCRAWL_LOADER_GROUP_QUEUE" envDefault:"100"`
	// FrontierDir, when set, is where the loader files the URLs of its
	// shards (pkg/frontier, a store per shard) instead of parking them in
	// the broker: a contract is acknowledged once its URLs are filed, and
	// each group takes from the store what it can fetch soon. A loader
	// works on the shards whose lease it holds (ShardLease); a shard that
	// fails over is rebuilt from the transaction index. Empty: DATA/frontier
	// on the embedded backends, none on the real ones; "off": none.
	FrontierDir string `env:"GRIDCRAWL_LOADER_FRONTIER_DIR"`
	// ShardLease is the time to live of the lease by which a loader with a
	// durable frontier owns a shard (see queueing/owners.go): a dead loader's
	// shards are taken over by another after at most this long. The lease
	// is renewed every sixth of it.
	ShardLease time.Duration `env:"GRIDCRAWL_LOADER_SHARD_LEASE" envDefault:"30s"`
	// PausedDelay is how long the URLs of a paused crawl are parked in the
	// broker before the loader looks at them again: a paused crawl holds no
	// unsettled contract.
	PausedDelay time.Duration `env:"GRIDCRAWL_LOADER_PAUSED_DELAY" envDefault:"30s"`
	// ShutdownTimeout bounds how long a stopping loader finishes in-flight
	// fetches and flushes their outcomes.
	ShutdownTimeout time.Duration `env:"GRIDCRAWL_LOADER_SHUTDOWN_TIMEOUT" envDefault:"15s"`
	// ReportInterval is how often the loader stores its frontier report.
	ReportInterval time.Duration `env:"GRIDCRAWL_FRONTIER_REPORT_INTERVAL" envDefault:"5s"`
	// Chromium is the browser that renders the pages of crawls whose
	// profile says render ("" looks up chromium on PATH). A loader without
	// one fails such pages with the reason; it never falls back to the
	// HTTP answer alone.
	Chromium string `env:"GRIDCRAWL_CHROMIUM"`
	// RenderTabs bounds the pages rendering at once.
	RenderTabs int `env:"GRIDCRAWL_RENDER_TABS" envDefault:"2"`
	// RenderTimeout bounds a page's time in its tab: then its scripts are
	// stopped and its DOM is taken as it is (the cut is recorded).
	RenderTimeout time.Duration `env:"GRIDCRAWL_RENDER_TIMEOUT" envDefault:"20s"`
	// RenderIdle is how long a rendered page's network must be quiet after
	// its load event for the page to be done.
	RenderIdle time.Duration `env:"GRIDCRAWL_RENDER_IDLE" envDefault:"500ms"`
	// RenderMaxRequests bounds the requests of one rendered page (scripts,
	// styles, images, XHR); more are refused and the cut recorded.
	RenderMaxRequests int `env:"GRIDCRAWL_RENDER_MAX_REQUESTS" envDefault:"300"`
	// RenderMaxBytes bounds the body bytes of one rendered page's requests.
	RenderMaxBytes int64 `env:"GRIDCRAWL_RENDER_MAX_BYTES" envDefault:"20971520"`
	// RenderGroupRequests bounds one rendered page's requests to each other
	// crawl host group (a CDN, an API host): they are counted in that
	// group's frontier report.
	RenderGroupRequests int `env:"GRIDCRAWL_RENDER_GROUP_REQUESTS" envDefault:"100"`
	// RenderCacheBytes bounds the answers to rendered pages' requests the
	// loader keeps for ten minutes, per crawl, so that what every page of
	// a site loads (its scripts, styles) is requested and archived once: a
	// browser's cache. One answer takes at most a sixteenth; 0 keeps none.
	RenderCacheBytes int64 `env:"GRIDCRAWL_RENDER_CACHE_BYTES" envDefault:"33554432"`
	// BrowserRestartPages restarts the browser after this many pages.
	BrowserRestartPages int `env:"GRIDCRAWL_BROWSER_RESTART_PAGES" envDefault:"500"`
	// BrowserMaxMemory restarts the browser, between pages, once its
	// processes together hold more resident memory (bytes).
	BrowserMaxMemory int64 `env:"GRIDCRAWL_BROWSER_MAX_MEMORY" envDefault:"1073741824"`
	// BrowserNoSandbox runs the browser without Chromium's sandbox, which
	// needs user namespaces a container may not have (it is off for root
	// in any case, which Chromium requires).
	BrowserNoSandbox bool `env:"GRIDCRAWL_BROWSER_NO_SANDBOX"`
	// BrowserJSHeapMB bounds the JavaScript heap of each page, in MiB: a
	// page that allocates without end kills its tab there.
	BrowserJSHeapMB int `env:"GRIDCRAWL_BROWSER_JS_HEAP_MB" envDefault:"512"`
	// DedupMaxEntries bounds the payload-digest index of deduplication
	// across crawls (profile dedupe), all scopes together: once it holds
	// this many entries no new payload is added (the entries there keep
	// deduplicating; new payloads are stored in full every time). The
	// loader counts the entries every 10 seconds, so several loaders may
	// overshoot the bound by what they add meanwhile. An entry takes about
	// 300 bytes in the embedded store.
	DedupMaxEntries int64 `env:"GRIDCRAWL_DEDUP_MAX_ENTRIES" envDefault:"10000000"`
	// DedupCheckTTL is how long the loader trusts a segment object it
	// found holding an original (one Stat per object, not per page):
	// segments deleted while a loader runs may be referred to by new
	// revisits for that long. 0 checks at every flush.
	DedupCheckTTL time.Duration `env:"GRIDCRAWL_DEDUP_CHECK_TTL" envDefault:"1m"`
}

// ResolveFrontier sets FrontierDir's default: dataDir/frontier on the
// embedded backends (embedded), none on the real ones; "off" is none.
func (c *Config) ResolveFrontier(dataDir string, embedded bool) {
	switch {
	case c.FrontierDir == "off":
		c.FrontierDir = ""
	case c.FrontierDir == "" && embedded:
		c.FrontierDir = filepath.Join(dataDir, "frontier")
	}
}

// Validate checks c and fills in derived defaults.
func (c *Config) Validate() error {
	switch {
	case c.Workers < 1:
		return errors.New("GRIDCRAWL_LOADER_WORKERS must be at least 1")
	case c.Prefetch < 1:
		return errors.New("GRIDCRAWL_LOADER_PREFETCH must be at least 1")
	case c.MaxBodyBytes < 1024:
		return errors.New("GRIDCRAWL_MAX_BODY_BYTES must be at least 1024")
	case c.BodyBudget < 1<<20:
		return errors.New("GRIDCRAWL_LOADER_BODY_BUDGET must be at least 1048576")
	case c.RecordBytes < 1<<20:
		return errors.New("GRIDCRAWL_LOADER_RECORD_BYTES must be at least 1048576")
	case c.RedeliveryGrace < 0:
		return errors.New("GRIDCRAWL_LOADER_REDELIVERY_GRACE must not be negative")
	case c.FetchTimeout <= 0:
		return errors.New("GRIDCRAWL_FETCH_TIMEOUT must be positive")
	case c.ShardLease < time.Second:
		return errors.New("GRIDCRAWL_LOADER_SHARD_LEASE must be at least 1s")
	case c.FetchAttempts < 1:
		return errors.New("GRIDCRAWL_FETCH_ATTEMPTS must be at least 1")
	case c.SegmentBytes < 1<<16:
		return errors.New("GRIDCRAWL_WARC_SEGMENT_BYTES must be at least 65536")
	case c.SegmentAge <= 0:
		return errors.New("GRIDCRAWL_WARC_SEGMENT_AGE must be positive")
	case c.FlushInterval <= 0:
		return errors.New("GRIDCRAWL_WARC_FLUSH_INTERVAL must be positive")
	case c.GroupQueue < 1:
		return errors.New("GRIDCRAWL_LOADER_GROUP_QUEUE must be at least 1")
	case c.PausedDelay < time.Second:
		return errors.New("GRIDCRAWL_LOADER_PAUSED_DELAY must be at least 1s")
	case c.ShutdownTimeout <= 0:
		return errors.New("GRIDCRAWL_LOADER_SHUTDOWN_TIMEOUT must be positive")
	case c.ReportInterval < 100*time.Millisecond:
		return errors.New("GRIDCRAWL_FRONTIER_REPORT_INTERVAL must be at least 100ms")
	case c.RenderTabs < 1:
		return errors.New("GRIDCRAWL_RENDER_TABS must be at least 1")
	case c.RenderTimeout < time.Second:
		return errors.New("GRIDCRAWL_RENDER_TIMEOUT must be at least 1s")
	case c.RenderIdle <= 0:
		return errors.New("GRIDCRAWL_RENDER_IDLE must be positive")
	case c.RenderMaxRequests < 1:
		return errors.New("GRIDCRAWL_RENDER_MAX_REQUESTS must be at least 1")
	case c.RenderMaxBytes < 1<<16:
		return errors.New("GRIDCRAWL_RENDER_MAX_BYTES must be at least 65536")
	case c.RenderCacheBytes < 0:
		return errors.New("GRIDCRAWL_RENDER_CACHE_BYTES must not be negative")
	case c.RenderGroupRequests < 1:
		return errors.New("GRIDCRAWL_RENDER_GROUP_REQUESTS must be at least 1")
	case c.BrowserRestartPages < 1:
		return errors.New("GRIDCRAWL_BROWSER_RESTART_PAGES must be at least 1")
	case c.BrowserMaxMemory < 64<<20:
		return errors.New("GRIDCRAWL_BROWSER_MAX_MEMORY must be at least 67108864")
	case c.BrowserJSHeapMB < 16:
		return errors.New("GRIDCRAWL_BROWSER_JS_HEAP_MB must be at least 16")
	case c.DedupMaxEntries < 0:
		return errors.New("GRIDCRAWL_DEDUP_MAX_ENTRIES must not be negative")
	case c.DedupCheckTTL < 0:
		return errors.New("GRIDCRAWL_DEDUP_CHECK_TTL must not be negative")
	}
	if _, err := netguard.ParseNets(c.AllowNets); err != nil {
		return fmt.Errorf("GRIDCRAWL_ALLOW_NETS=%q: %w", c.AllowNets, err)
	}
	if _, err := netguard.ParseOverrides(c.Resolve); err != nil {
		return fmt.Errorf("GRIDCRAWL_RESOLVE: %w", err)
	}
	if c.ID == "" {
		h, _ := os.Hostname()
		c.ID = fmt.Sprintf("loader-%s-%d", h, os.Getpid())
	}
	return nil
}

// Deps are the loader's backends and frontier settings.
type Deps struct {
	Queue queue.Queue
	Tx    txindex.Pipeline
	// Owners keeps the leases by which loaders with a durable frontier
	// (Config.FrontierDir) own shards, and rebuilds a shard's frontier;
	// required with FrontierDir.
	Owners txindex.Owners
	Assets assets.Store
	// Digests is the payload-digest index of deduplication across crawls
	// (profile dedupe); nil: every response is stored in full.
	Digests digests.Index
	// Profiles resolves crawls whose contracts carry no profile, and tells
	// whether a crawl is paused or cancelled.
	Profiles profiles.Store
	// Group computes the crawl host group of URLs whose contract names none.
	Group routing.Grouper
	// Shards is the number of loader queue shards to consume (see
	// routing.Config); 0 means 1.
	Shards int
	// Stagger delays the subscription to a random half of the shards. On a
	// broker that gives a single-active-consumer queue to its first
	// subscriber, loaders started together then share the shards instead of
	// the first one owning them all; the others stay standbys for failover.
	Stagger time.Duration
	// Handoff, when not nil, is given the response of every page moved to
	// to-be-parsed, once its record is stored and before its crawler
	// contract is published: a crawler in the same process takes it there
	// instead of reading the record back.
	Handoff Handoff
	Logger  *slog.Logger
	// Gate tells backend outages from failed work (nil: every failure
	// counts as the work's): while a backend is down the loader takes no
	// new work, keeps what it fetched until it can be stored, and
	// postpones contracts without counting an attempt.
	Gate *outage.Gate
	// Metrics receives the loader's metrics; nil: registered nowhere.
	Metrics *metrics.Registry
}

// Handoff receives stored responses for a crawler in the same process
// (see recorder.Handoff).
type Handoff = recorder.Handoff

// Loader is the loader service: its frontier, fetcher and recorder, and
// the workers that take a task from the first, fetch it with the second and
// hand its outcome on.
type Loader struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	met  *metrics.Loader

	front *queueing.Frontier
	fetch *fetcher.Fetcher
	rec   *recorder.Recorder
	// active counts the workers between a lease and the hand-over of its
	// outcome: when it drops to zero the loader has nothing else to do and
	// flushes (within the recorder's idle gap of the last flush), so a chain
	// of newly found links advances at the politeness delay, not at
	// FlushInterval.
	active atomic.Int32
}

// New returns a loader; cfg must have been validated.
func New(cfg Config, deps Deps) (*Loader, error) {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	met := deps.Metrics.Loader()
	shards := max(deps.Shards, 1)
	l := &Loader{cfg: cfg, deps: deps, log: log, met: met}
	// One cache of crawl states for the frontier and the fetcher, as when
	// they were one.
	states := crawlcache.NewStates(deps.Profiles)
	front, err := queueing.New(queueing.Config{
		Prefetch: cfg.Prefetch, GroupQueue: cfg.GroupQueue, PausedDelay: cfg.PausedDelay,
		RedeliveryGrace: cfg.RedeliveryGrace, RetryDelay: cfg.RetryDelay, CrawlDelayCap: cfg.CrawlDelayCap,
		// A group is busy for one request: a page or its robots.txt, and
		// the page's rendering (its wait for a tab, at most two pages'
		// time, its time in the tab, and the DOM's snapshot).
		BusyTimeout: cfg.FetchTimeout + 3*cfg.RenderTimeout + time.Minute,
		FrontierDir: cfg.FrontierDir, ShardLease: cfg.ShardLease,
	}, queueing.Deps{
		Queue: deps.Queue, Tx: deps.Tx, Owners: deps.Owners, Assets: deps.Assets, Profiles: deps.Profiles,
		States: states, Group: deps.Group, Shards: shards, Stagger: deps.Stagger, Gate: deps.Gate,
		Logger: log, Metrics: met, Retired: l.retired,
	})
	if err != nil {
		return nil, err
	}
	l.front = front
	l.rec = recorder.New(recorder.Config{
		Loader: cfg.ID,
		// Names this process in WARC segment keys (start time and random
		// text), so that no two processes ever write one key.
		Run:  time.Now().UTC().Format("20060102150405") + "-" + strings.ToLower(rand.Text()[:8]),
		Gzip: cfg.Gzip, SegmentBytes: cfg.SegmentBytes, SegmentAge: cfg.SegmentAge, FlushInterval: cfg.FlushInterval,
		RecordBytes: cfg.RecordBytes, RecoveryLease: cfg.RecoveryLease,
		DedupMaxEntries: cfg.DedupMaxEntries, DedupCheckTTL: cfg.DedupCheckTTL, Shards: shards,
	}, recorder.Deps{
		Queue: deps.Queue, Assets: deps.Assets, Tx: deps.Tx, Digests: deps.Digests, Handoff: deps.Handoff,
		Gate: deps.Gate, Logger: log, Metrics: met, Settle: front.Settle,
	})
	l.fetch, err = fetcher.New(fetcher.Config{
		MaxBodyBytes: cfg.MaxBodyBytes, BodyBudget: cfg.BodyBudget, RecoveryLease: cfg.RecoveryLease,
		FetchTimeout: cfg.FetchTimeout, FetchAttempts: cfg.FetchAttempts, AllowNets: cfg.AllowNets, Resolve: cfg.Resolve,
		RobotsTTL: cfg.RobotsTTL, Chromium: cfg.Chromium, RenderTabs: cfg.RenderTabs, RenderTimeout: cfg.RenderTimeout,
		RenderIdle: cfg.RenderIdle, RenderMaxRequests: cfg.RenderMaxRequests, RenderMaxBytes: cfg.RenderMaxBytes,
		RenderGroupRequests: cfg.RenderGroupRequests, RenderCacheBytes: cfg.RenderCacheBytes,
		BrowserRestartPages: cfg.BrowserRestartPages, BrowserMaxMemory: cfg.BrowserMaxMemory,
		BrowserNoSandbox: cfg.BrowserNoSandbox, BrowserJSHeapMB: cfg.BrowserJSHeapMB,
	}, fetcher.Deps{
		Tx: deps.Tx, Assets: deps.Assets, States: states, Tasks: front, Archive: l.rec.Archive, Metrics: met, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if err := deps.Metrics.Register(metrics.LoaderCollector(front.GroupStates)); err != nil {
		return nil, fmt.Errorf("register loader metrics: %w", err)
	}
	if err := deps.Metrics.Register(metrics.BrowserCollector(l.fetch.BrowserStats)); err != nil {
		return nil, fmt.Errorf("register browser metrics: %w", err)
	}
	return l, nil
}

// Fetched returns the number of requests made so far, robots.txt included.
func (l *Loader) Fetched() int64 { return l.fetch.Fetched() }

// Parked returns the number of URLs parked in the broker so far.
func (l *Loader) Parked() int64 { return l.front.Parked() }

// QueuedOf returns how many URLs of group the loader holds, and the group's
// last delay.
func (l *Loader) QueuedOf(group string) (int, time.Duration) { return l.front.QueuedOf(group) }

// StateWrites returns how many times the loader stored a shard's politeness
// state.
func (l *Loader) StateWrites() int64 { return l.front.StateWrites() }

// Run consumes the loader queue shards until ctx is cancelled. It then stops
// taking deliveries, lets in-flight fetches finish, stores and records their
// outcomes and settles their contracts (within ShutdownTimeout), and
// returns; contracts it has not settled go back to the queue.
func (l *Loader) Run(ctx context.Context) error {
	// Work stops at ctx's end, or when every consumer has stopped (the queue
	// was closed).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// Consumers outlive ctx until the final flush: a consumer that stops
	// hands its unsettled deliveries back, and then they could not be acked.
	consumeCtx, stopConsuming := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsuming()
	// drain is the context of work already taken: it ends ShutdownTimeout
	// after ctx.
	drain, stopDrain := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDrain()
	stopTimer := context.AfterFunc(ctx, func() { time.AfterFunc(l.cfg.ShutdownTimeout, stopDrain) })
	defer stopTimer()

	var intake sync.WaitGroup
	owning := make(chan struct{})
	if l.cfg.FrontierDir != "" {
		if err := l.front.Open(ctx); err != nil {
			l.fetch.Close()
			return err
		}
		defer l.front.Close()
		go func() {
			defer close(owning)
			l.front.Own(ctx, consumeCtx, &intake)
		}()
	} else {
		close(owning)
		if err := l.front.Consume(ctx, consumeCtx, &intake); err != nil {
			stop()
			intake.Wait()
			l.fetch.Close()
			return err
		}
	}
	var wg sync.WaitGroup
	for range l.cfg.Workers {
		wg.Go(func() { l.work(ctx, drain) })
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		l.rec.FlushLoop(ctx, drain)
	}()
	go l.rec.Publish(drain)
	var loops sync.WaitGroup
	loops.Go(func() { l.reportLoop(ctx) })
	loops.Go(func() { l.front.Loops(ctx) })

	<-owning      // the owner of shards subscribes until ctx is done
	intake.Wait() // returns once ctx is done or every consumer stopped
	l.log.Info("shutdown started", "in_flight", l.active.Load(), "timeout_ms", l.cfg.ShutdownTimeout.Milliseconds())
	stop()
	wg.Wait()
	l.fetch.Close() // no worker renders any more
	<-flushed
	l.rec.Flush(drain, true) // what the workers finished after the last tick
	l.rec.StopPublishing()   // and its publishing
	l.rec.Close(drain)       // and seal the open segment's index
	loops.Wait()
	l.front.ReleaseShards(drain) // every outcome is recorded
	l.log.Info("shutdown complete", "requests", l.fetch.Fetched(), "parked", l.front.Parked(), "filed", l.front.Filed(), "rebuilt", l.front.Rebuilt(),
		"drain_expired", drain.Err() != nil)
	return nil
}

// work runs one worker: lease a task, fetch it (one outcome), release its
// group with that outcome, and route the outcome to the stage that owns it.
// It takes no lease once ctx is done; the task in hand finishes under drain.
func (l *Loader) work(ctx, drain context.Context) {
	for {
		if l.deps.Gate.Wait(ctx) != nil {
			return
		}
		// Before a new URL, never with a body in hand: the flush that
		// makes room waits for nothing a worker holds.
		l.rec.WaitRoom(ctx)
		lease, t, err := l.front.Next(ctx)
		if err != nil {
			return
		}
		l.active.Add(1)
		o := l.fetch.Fetch(drain, t)
		share := t.BodyShare
		t.BodyShare = nil // t may be scheduled again
		l.met.URL(o.Metric())
		l.front.Release(drain, lease, t, o.Pol)
		l.route(drain, t, o)
		share.Release()                           // the body is in the segment (or dropped)
		if o.Ex != nil && l.deps.Handoff == nil { // else the handoff holds the body
			gcnudge.Dropped(int64(cap(o.Ex.Response)))
		}
		if l.active.Add(-1) == 0 {
			l.rec.Idle()
		}
	}
}

// route hands the outcome of t to the stage that owns it. A robots.txt
// exchange the lease made goes to the recorder (it is archived whatever the
// verdict); an outcome that puts t back in line (retry, again, paused,
// abandon) goes to the frontier; one to record (fetched, failed, retired)
// or that only settles (skip, republish) goes to the recorder; a task whose
// contract went back to the queue (lost) is dropped by the frontier.
func (l *Loader) route(ctx context.Context, t *queueing.Task, o fetcher.Outcome) {
	if o.Robots != nil {
		l.rec.Archive(o.Robots, t.CrawlID)
	}
	switch o.Verdict {
	case fetcher.Again:
		l.front.Again(ctx, t)
	case fetcher.Retry:
		l.front.Retry(ctx, t)
	case fetcher.Paused:
		l.front.Pause(ctx, t)
	case fetcher.Abandon:
		l.front.Abandon(ctx, t, o.Err)
	case fetcher.Fetched, fetcher.Failed, fetcher.Retired, fetcher.Skip, fetcher.Republish:
		l.rec.Take(t, o)
	case fetcher.Lost:
		l.front.Drop(t)
	}
}

// retired records t, whose group's budget is spent, as retired: the
// frontier hands such URLs on here.
func (l *Loader) retired(ctx context.Context, t *queueing.Task, reason string) {
	l.route(ctx, t, fetcher.Outcome{Verdict: fetcher.Retired, Reason: reason})
}

// reportGroups bounds the groups of one report.
const reportGroups = 200

// reportLoop stores the scheduler's report every ReportInterval.
func (l *Loader) reportLoop(ctx context.Context) {
	t := time.NewTicker(l.cfg.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := l.writeReport(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("write frontier report", "err", err)
		}
	}
}

func (l *Loader) writeReport(ctx context.Context) error {
	rep, err := json.Marshal(l.front.Snapshot(reportGroups))
	if err != nil {
		return err
	}
	filed, filedURLs := l.front.FiledReport(ctx, reportGroups)
	body, err := json.Marshal(contracts.FrontierLoader{LoaderID: l.cfg.ID, Time: time.Now().UTC(),
		IntervalMS: l.cfg.ReportInterval.Milliseconds(), Report: rep, Browser: l.fetch.FrontierBrowser(), Dedup: l.rec.DedupReport(),
		Filed: filed, FiledURLs: filedURLs})
	if err != nil {
		return err
	}
	return l.deps.Assets.Put(ctx, contracts.FrontierReportPrefix+l.cfg.ID+".json", bytes.NewReader(body), int64(len(body)), "application/json")
}
