// Command indexer runs gridcrawl's indexer stage on its own: it consumes
// index_pending, stores documents in the search index and moves their pages
// to indexed. MCP runs the same stage in its process by default; run this
// (with GRIDCRAWL_MCP_INDEXER=false for MCP) to scale indexing apart from
// MCP.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gridcrawl/gridcrawl/services/internal/indexer"
	"github.com/gridcrawl/gridcrawl/services/internal/svc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

type config struct {
	svc.Common
	Indexer indexer.Config
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var cfg config
	code := svc.Main(ctx, "indexer", os.Stderr, &cfg, func() *svc.Common { return &cfg.Common },
		func(set *wire.Set, log *slog.Logger) (svc.Runner, error) {
			if err := cfg.Indexer.Validate(); err != nil {
				return nil, err
			}
			return indexer.New(cfg.Indexer, indexer.Deps{Queue: set.Queue, Tx: set.Tx, Search: set.Search,
				Gate: set.Gate(true, log), Metrics: set.Metrics, Logger: log}), nil
		})
	stop()
	os.Exit(code)
}
