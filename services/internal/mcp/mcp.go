// Package mcp is the Master Connect Program: the coordinator of the grid. It
// serves the HTTP API (crawl profiles, status and termination, search), owns
// each crawl's state machine (lifecycle.go), runs the indexer that consumes
// index_pending, the finish check that ends crawls out of work, and the
// recovery sweep that republishes work whose record sat in a non-terminal
// status past its lease.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/diskspace"
	"github.com/gridcrawl/gridcrawl/services/internal/frontier"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Config configures MCP. Every field is an environment variable.
type Config struct {
	Listen string `env:"GRIDCRAWL_LISTEN" envDefault:"127.0.0.1:8080"`
	Token  string `env:"GRIDCRAWL_API_TOKEN"`
	// AllowedOrigins are browser origins besides MCP's own that may send
	// state-changing requests (a dashboard behind a proxy that rewrites
	// Host), such as https://crawl.example.org.
	AllowedOrigins   []string      `env:"GRIDCRAWL_ALLOWED_ORIGINS" envSeparator:","`
	RecoveryLease    time.Duration `env:"GRIDCRAWL_RECOVERY_LEASE" envDefault:"10m"`
	RecoveryInterval time.Duration `env:"GRIDCRAWL_RECOVERY_INTERVAL" envDefault:"30s"`
	RecoveryAttempts int           `env:"GRIDCRAWL_RECOVERY_ATTEMPTS" envDefault:"5"`
	// FinishCheckInterval is how often the running crawls are checked for
	// being out of work; the indexer also nudges the check for the crawls it
	// just indexed.
	FinishCheckInterval time.Duration `env:"GRIDCRAWL_FINISH_CHECK_INTERVAL" envDefault:"1s"`
	IndexerPrefetch     int           `env:"GRIDCRAWL_INDEXER_PREFETCH" envDefault:"64"`
	IndexerBatch        int           `env:"GRIDCRAWL_INDEXER_BATCH" envDefault:"256"`
	MaxRedirects        int           `env:"GRIDCRAWL_MAX_REDIRECTS" envDefault:"10"`
	// DueCheckInterval is how often the continuous crawls are checked for
	// due URLs, and MaxDuePerCheck how many URLs of one crawl one check
	// takes at most (the rest wait for the next).
	DueCheckInterval time.Duration `env:"GRIDCRAWL_DUE_CHECK_INTERVAL" envDefault:"1s"`
	MaxDuePerCheck   int           `env:"GRIDCRAWL_MAX_DUE_PER_CHECK" envDefault:"10000"`
	// TimelineInterval is how often the counts of each running crawl are
	// sampled for its timeline.
	TimelineInterval time.Duration `env:"GRIDCRAWL_TIMELINE_INTERVAL" envDefault:"5s"`
	// MetricsCache is how long the crawl counts of /metrics
	// (gridcrawl_crawl_urls, gridcrawl_crawls) are reused before they are
	// read from the backends again, whatever the scrape rate.
	MetricsCache time.Duration `env:"GRIDCRAWL_METRICS_CACHE" envDefault:"10s"`
}

// Validate checks c.
func (c *Config) Validate(embedded bool) error {
	switch {
	case c.RecoveryLease < time.Second:
		return errors.New("GRIDCRAWL_RECOVERY_LEASE must be at least 1s")
	case c.RecoveryInterval < 100*time.Millisecond:
		return errors.New("GRIDCRAWL_RECOVERY_INTERVAL must be at least 100ms")
	case c.RecoveryAttempts < 1:
		return errors.New("GRIDCRAWL_RECOVERY_ATTEMPTS must be at least 1")
	case c.FinishCheckInterval < 10*time.Millisecond:
		return errors.New("GRIDCRAWL_FINISH_CHECK_INTERVAL must be at least 10ms")
	case c.TimelineInterval != 0 && c.TimelineInterval < 10*time.Millisecond:
		return errors.New("GRIDCRAWL_TIMELINE_INTERVAL must be at least 10ms")
	case c.IndexerPrefetch < 1 || c.IndexerBatch < 1:
		return errors.New("GRIDCRAWL_INDEXER_PREFETCH and GRIDCRAWL_INDEXER_BATCH must be at least 1")
	case c.DueCheckInterval < 10*time.Millisecond:
		return errors.New("GRIDCRAWL_DUE_CHECK_INTERVAL must be at least 10ms")
	case c.MaxDuePerCheck < 1:
		return errors.New("GRIDCRAWL_MAX_DUE_PER_CHECK must be at least 1")
	case c.MetricsCache < 0:
		return errors.New("GRIDCRAWL_METRICS_CACHE must not be negative")
	case !embedded && c.Token == "":
		return errors.New("GRIDCRAWL_API_TOKEN is required in grid mode (real backends)")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("GRIDCRAWL_LISTEN %q: %w", c.Listen, err)
	}
	return nil
}

// Deps are MCP's backends.
type Deps struct {
	Queue    queue.Queue
	Tx       txindex.Index
	Profiles profiles.Store
	Search   search.Index
	// Assets holds the loaders' frontier reports.
	Assets assets.Store
	Group  routing.Grouper
	// HCF is the store of the Hub Crawl Frontier API (/hcf/).
	HCF hcf.Store
	// Shards is the number of loader queue shards; 0 means 1.
	Shards int
	// Embedded lets loopback clients use the API without a token.
	Embedded bool
	Logger   *slog.Logger
	// Listener, when set, is used instead of listening on Config.Listen.
	Listener net.Listener
	// Gate tells backend outages from failed work (nil: every failure
	// counts as the work's): index contracts that failed while a backend
	// is down are postponed without counting an attempt, and the indexer
	// waits for the backend before it takes more.
	Gate *outage.Gate
	// Metrics is served at /metrics and receives MCP's metrics; nil: MCP
	// makes a registry of its own.
	Metrics *metrics.Registry
	// Disk watches the data directory of embedded backends (nil: none):
	// /readyz reports it and new crawls are refused with 507 while it is
	// full.
	Disk *diskspace.Watch
}

// MCP is the coordinator service.
type MCP struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	frontier *frontier.Frontier
	met      *metrics.MCP
	ready    []metrics.Check

	mu   sync.Mutex
	addr net.Addr
	// listening is closed once the HTTP listener is bound.
	listening chan struct{}

	locks sync.Map // crawl id → *sync.Mutex, see crawlLock
	// nudged holds the crawls the indexer asks the finish check to look at;
	// nudge wakes the check.
	nudgeMu sync.Mutex
	nudged  map[string]struct{}
	nudge   chan struct{}

	tl timelines
}

// New returns MCP; cfg must have been validated.
func New(cfg Config, deps Deps) *MCP {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.New()
	}
	m := &MCP{
		cfg: cfg, deps: deps, log: log,
		frontier:  &frontier.Frontier{Tx: deps.Tx, Queue: deps.Queue, Group: deps.Group, Shards: deps.Shards},
		met:       deps.Metrics.MCP(),
		ready:     metrics.BackendChecks(deps.Queue, deps.Tx, deps.Profiles, deps.Assets, deps.Search),
		listening: make(chan struct{}),
		nudged:    map[string]struct{}{},
		nudge:     make(chan struct{}, 1),
		tl:        timelines{byID: map[string]*Timeline{}},
	}
	if deps.Disk != nil {
		m.ready = append(m.ready, deps.Disk.Check())
	}
	counts := &crawlCounts{m: m, final: map[string]map[string]int64{}}
	if err := deps.Metrics.Register(metrics.MCPCollector(counts.read, cfg.MetricsCache, 10*time.Second)); err != nil {
		log.Warn("register crawl metrics", "err", err) // a second MCP on one registry
	}
	return m
}

// Addr waits until the API listens and returns its address.
func (m *MCP) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-m.listening:
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.addr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run serves the API and runs the indexer, the finish check and the
// recovery sweep until ctx is cancelled or one of them fails.
func (m *MCP) Run(ctx context.Context) error {
	ln := m.deps.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", m.cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", m.cfg.Listen, err)
		}
	}
	m.mu.Lock()
	m.addr = ln.Addr()
	m.mu.Unlock()
	close(m.listening)
	m.log.Info("api listening", "addr", ln.Addr().String())

	srv := &http.Server{
		Handler:           m.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serve api: %w", err)
		}
	})
	wg.Go(func() {
		if err := m.runIndexer(ctx); err != nil {
			errs <- err
		}
	})
	wg.Go(func() { m.runSweep(ctx) })
	wg.Go(func() { m.runFinishCheck(ctx) })
	wg.Go(func() { m.runDueCheck(ctx) })
	wg.Go(func() { m.runTimeline(ctx) })
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	cancel()
	m.log.Info("shutdown started", "err", err)
	shutCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer done()
	_ = srv.Shutdown(shutCtx)
	wg.Wait()
	m.log.Info("shutdown complete")
	return err
}
