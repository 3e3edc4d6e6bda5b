// Package grid runs MCP (with the coordinator and the indexer), the loader
// and the crawler in one process on one set of backends, and implements the
// grid command-line client.
package grid

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/gridcrawl/gridcrawl/services/internal/coordinator"
	"github.com/gridcrawl/gridcrawl/services/internal/crawler"
	"github.com/gridcrawl/gridcrawl/services/internal/indexer"
	"github.com/gridcrawl/gridcrawl/services/internal/loader"
	"github.com/gridcrawl/gridcrawl/services/internal/mcp"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
	"github.com/gridcrawl/gridcrawl/services/internal/svc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// Config is the configuration of the whole grid, read from GRIDCRAWL_*
// environment variables.
type Config struct {
	Backends    wire.Backends
	Routing     routing.Config
	Coordinator coordinator.Config
	Indexer     indexer.Config
	MCP         mcp.Config
	Loader      loader.Config
	Crawler     crawler.Config
	// HandoffBytes bounds the responses the loader hands to the crawler in
	// memory (crawler.Handoff), and with them how far the loader fetches
	// ahead of the crawler: a loader whose responses would not fit waits
	// for the crawler to take some. 0 turns the handoff off (and that
	// bound), and the crawler reads every page back from its WARC record.
	HandoffBytes int64  `env:"GRIDCRAWL_HANDOFF_BYTES" envDefault:"16777216"`
	LogLevel     string `env:"GRIDCRAWL_LOG_LEVEL" envDefault:"info"`
	// MetricsDump names a file the grid writes its metrics to when it
	// stops, in Prometheus' text format: the count of every backend
	// operation and queue message of the whole run, which the benchmark
	// reports per page. Empty: none.
	MetricsDump string `env:"GRIDCRAWL_METRICS_DUMP"`
}

// LoadConfig parses the environment into a Config.
func LoadConfig() (Config, error) {
	var c Config
	err := svc.ParseEnv(&c)
	return c, err
}

// Validate checks every part of c.
func (c *Config) Validate() error {
	var handoff error
	if c.HandoffBytes < 0 {
		handoff = errors.New("GRIDCRAWL_HANDOFF_BYTES must not be negative")
	}
	_, level := svc.ParseLogLevel(c.LogLevel)
	return errors.Join(handoff, level, c.Backends.Validate(), c.Routing.Validate(), c.Coordinator.Validate(), c.Indexer.Validate(), c.MCP.Validate(c.Backends.Embedded()), c.Loader.Validate(), c.Crawler.Validate())
}

// Grid is a running all-in-one grid.
type Grid struct {
	Backends    *wire.Set
	Coordinator *coordinator.Coordinator
	Indexer     *indexer.Indexer
	MCP         *mcp.MCP
	Loader      *loader.Loader
	Crawler     *crawler.Crawler
	// Handoff carries responses from the loader to the crawler; nil when
	// GRIDCRAWL_HANDOFF_BYTES is 0.
	Handoff *crawler.Handoff

	metricsDump string // Config.MetricsDump
}

// Open opens the backends and builds the services. ln, when not nil, is the
// listener of the API.
func Open(cfg Config, log *slog.Logger, ln net.Listener) (*Grid, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	group, err := cfg.Routing.Grouper()
	if err != nil {
		return nil, err
	}
	shards := cfg.Routing.ShardCount(cfg.Backends.Embedded())
	set, err := wire.Open(context.Background(), cfg.Backends, log)
	if err != nil {
		return nil, err
	}
	// One registry for the three services: each family once, served by MCP.
	set.Instrument(metrics.New())
	// The loader and the crawler share a process: the crawler takes the
	// responses the loader has just stored from memory.
	handoff := crawler.NewHandoff(cfg.HandoffBytes)
	// One outage gate for the three services: they share the backends.
	gate := set.Gate(true, log)
	ld := loader.Deps{Queue: set.Queue, Tx: set.Tx, Owners: set.Tx, Assets: set.Assets, Digests: set.Digests, Profiles: set.Profiles,
		Group: group, Shards: shards, Logger: log.With("service", "loader"), Gate: gate, Metrics: set.Metrics}
	if handoff != nil {
		ld.Handoff = handoff
	}
	cfg.Loader.ResolveFrontier(cfg.Backends.DataDir, cfg.Backends.Embedded())
	l, err := loader.New(cfg.Loader, ld)
	if err != nil {
		_ = set.Close()
		return nil, err
	}
	mlog := log.With("service", "mcp")
	co := coordinator.New(cfg.Coordinator, coordinator.Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search,
		Assets: set.Assets, Group: group, Shards: shards, Logger: mlog, Gate: gate, Metrics: set.Metrics, Disk: set.Disk, QueuesInMemory: set.MemoryQueues})
	return &Grid{
		Backends:    set,
		Coordinator: co,
		Indexer: indexer.New(cfg.Indexer, indexer.Deps{Queue: set.Queue, Tx: set.Tx, Search: set.Search, Gate: gate,
			Metrics: set.Metrics, Logger: log.With("service", "indexer"), Nudge: co.NudgeFinish}),
		MCP: mcp.New(cfg.MCP, mcp.Deps{Crawls: co, Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets, Digests: set.Digests,
			HCF: set.HCF, Shards: shards, Embedded: set.Embedded, Logger: mlog, Listener: ln, Metrics: set.Metrics, Disk: set.Disk}),
		Loader: l,
		Crawler: crawler.New(cfg.Crawler, crawler.Deps{Queue: set.Queue, Tx: set.Tx, Assets: set.Assets, Digests: set.Digests, Profiles: set.Profiles,
			Group: group, Shards: shards, Handoff: handoff, Logger: log.With("service", "crawler"), Gate: gate, Metrics: set.Metrics}),
		Handoff:     handoff,
		metricsDump: cfg.MetricsDump,
	}, nil
}

// Run runs the services until ctx is cancelled or one fails, then stops
// the others and closes the backends.
func (g *Grid) Run(ctx context.Context) error {
	err := svc.Together(g.Coordinator, g.MCP, g.Loader, g.Crawler, g.Indexer).Run(ctx)
	if g.metricsDump != "" {
		err = errors.Join(err, g.Backends.Metrics.WriteFile(g.metricsDump))
	}
	return errors.Join(err, g.Backends.Close())
}
