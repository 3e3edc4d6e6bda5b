// Package mcp is the HTTP face of the Master Connect Program (YaCy Grid's
// coordinator service): the API (crawl profiles, status and termination,
// search, the crawl log, reports and archives), the dashboard, the metrics
// and health endpoints. It holds handlers only: crawl operations are the
// coordinator's (package coordinator), the YaCy and HCF surfaces are
// packages of their own mounted on its router.
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

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/diskspace"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Config configures MCP. Every field is an environment variable.
type Config struct {
	Listen string `env:"GRIDCRAWL_LISTEN" envDefault:"127.0.0.1:8080"`
	Token  string `env:"GRIDCRAWL_API_TOKEN"`
	// AllowedOrigins are browser origins besides MCP's own that may send
	// state-changing requests (a dashboard behind a proxy that rewrites
	// Host), such as https://crawl.example.org.
	AllowedOrigins []string `env:"GRIDCRAWL_ALLOWED_ORIGINS" envSeparator:","`
	// MetricsCache is how long the crawl counts of /metrics
	// (gridcrawl_crawl_urls, gridcrawl_crawls) are reused before they are
	// read from the backends again, whatever the scrape rate.
	MetricsCache time.Duration `env:"GRIDCRAWL_METRICS_CACHE" envDefault:"10s"`
	// WET files extract page text with the crawler's limits (those of
	// crawler.Config, read here too), so that their text is the indexed
	// text.

	MaxBodyBytes int64 `env:"GRIDCRAWL_MAX_BODY_BYTES" envDefault:"8388608"`
	MaxTextBytes int   `env:"GRIDCRAWL_MAX_TEXT_BYTES" envDefault:"1048576"`
	MaxLinks     int   `env:"GRIDCRAWL_MAX_LINKS" envDefault:"5000"`
}

// Validate checks c.
func (c *Config) Validate(embedded bool) error {
	switch {
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

// Crawls are the crawl operations the API calls (the coordinator's): the
// only way the API changes a crawl's state.
type Crawls interface {
	CreateCrawl(ctx context.Context, p contracts.Profile) (string, error)
	Status(ctx context.Context, id string) (contracts.CrawlStatus, error)
	Statuses(ctx context.Context) ([]contracts.CrawlStatus, error)
	Cancel(ctx context.Context, id string) error
	Patch(ctx context.Context, id string, patch contracts.ProfilePatch) (contracts.Profile, int, error)
	SetPaused(ctx context.Context, id string, paused bool) error
	Timeline(ctx context.Context, id string) (contracts.Timeline, error)
}

// Records is what the API reads of the transaction index: the reads for
// people (listings, the crawl log, reports), one record, and a crawl's
// counts per status.
type Records interface {
	txindex.Reads
	Get(ctx context.Context, key string) (txindex.Record, error)
	GetMany(ctx context.Context, keys []string) (map[string]txindex.Record, error)
	Counts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error)
}

// Deps are MCP's backends.
type Deps struct {
	// Crawls applies the crawl operations.
	Crawls   Crawls
	Queue    queue.Queue
	Tx       Records
	Profiles profiles.Store
	Search   search.Index
	// Digests is the payload-digest index of deduplication across crawls:
	// a crawl's WACZ takes the originals its revisits refer to (nil: it
	// takes none).
	Digests digests.Index
	// Assets holds the loaders' frontier reports.
	Assets assets.Store
	// HCF is the store of the Hub Crawl Frontier API (/hcf/).
	HCF hcf.Store
	// Shards is the number of loader queue shards; 0 means 1.
	Shards int
	// Embedded lets loopback clients use the API without a token.
	Embedded bool
	Logger   *slog.Logger
	// Listener, when set, is used instead of listening on Config.Listen.
	Listener net.Listener
	// Metrics is served at /metrics and receives MCP's metrics; nil: MCP
	// makes a registry of its own.
	Metrics *metrics.Registry
	// Disk watches the data directory of embedded backends (nil: none):
	// /readyz reports it and new crawls are refused with 507 while it is
	// full.
	Disk *diskspace.Watch
}

// MCP serves the HTTP API and the dashboard.
type MCP struct {
	cfg    Config
	deps   Deps
	crawls Crawls
	log    *slog.Logger
	ready  []metrics.Check

	mu   sync.Mutex
	addr net.Addr
	// creating holds the Idempotency-Keys of the POSTs under way (under mu).
	creating map[string]bool
	// listening is closed once the HTTP listener is bound.
	listening chan struct{}
	// cdxjRunBytes bounds the index lines /cdxj sorts in memory at once
	// (0: cdxjsort.RunBytes); tests make it small to merge many runs.
	cdxjRunBytes int
	// sortScanLimit bounds the records a crawl log page in time or URL
	// order scans (0: maxSortScan); tests make it small.
	sortScanLimit int
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
		cfg: cfg, deps: deps, crawls: deps.Crawls, log: log,
		ready:     metrics.BackendChecks(deps.Queue, deps.Tx, deps.Profiles, deps.Assets, deps.Search),
		listening: make(chan struct{}),
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

// Run serves the API until ctx is cancelled or serving fails.
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
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serve api: %w", err)
		}
	})
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
