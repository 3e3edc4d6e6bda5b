// Command mcp runs gridcrawl's Master Connect Program: the HTTP API and
// dashboard, the coordinator (crawl states, finish and due checks, recovery
// sweep) and, unless GRIDCRAWL_MCP_INDEXER is false, the indexer stage.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gridcrawl/gridcrawl/services/internal/coordinator"
	"github.com/gridcrawl/gridcrawl/services/internal/indexer"
	"github.com/gridcrawl/gridcrawl/services/internal/mcp"
	"github.com/gridcrawl/gridcrawl/services/internal/svc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

type config struct {
	svc.Common
	Coordinator coordinator.Config
	Indexer     indexer.Config
	MCP         mcp.Config
	// RunIndexer runs the indexer stage in MCP's process; set it to false
	// when index_pending is consumed by indexer processes of their own
	// (services/indexer).
	RunIndexer bool `env:"GRIDCRAWL_MCP_INDEXER" envDefault:"true"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var cfg config
	code := svc.Main(ctx, "mcp", os.Stderr, &cfg, func() *svc.Common { return &cfg.Common },
		func(set *wire.Set, log *slog.Logger) (svc.Runner, error) {
			if err := errors.Join(cfg.Coordinator.Validate(), cfg.Indexer.Validate(), cfg.MCP.Validate(set.Embedded)); err != nil {
				return nil, err
			}
			group, err := cfg.Routing.Grouper()
			if err != nil {
				return nil, err
			}
			gate := set.Gate(true, log)
			co := coordinator.New(cfg.Coordinator, coordinator.Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search,
				Assets: set.Assets, Group: group, Shards: cfg.Routing.ShardCount(set.Embedded), Logger: log, Gate: gate, Metrics: set.Metrics, Disk: set.Disk})
			api := mcp.New(cfg.MCP, mcp.Deps{Crawls: co, Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets, Digests: set.Digests,
				HCF: set.HCF, Shards: cfg.Routing.ShardCount(set.Embedded), Embedded: set.Embedded, Logger: log, Metrics: set.Metrics, Disk: set.Disk})
			parts := []svc.Runner{co, api}
			if cfg.RunIndexer {
				parts = append(parts, indexer.New(cfg.Indexer, indexer.Deps{Queue: set.Queue, Tx: set.Tx, Search: set.Search,
					Gate: gate, Metrics: set.Metrics, Logger: log, Nudge: co.NudgeFinish}))
			}
			return svc.Together(parts...), nil
		})
	stop()
	os.Exit(code)
}
