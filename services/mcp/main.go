// Command mcp runs gridcrawl's Master Connect Program: the HTTP API, the
// indexer and the recovery sweep.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gridcrawl/gridcrawl/services/internal/mcp"
	"github.com/gridcrawl/gridcrawl/services/internal/svc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

type config struct {
	svc.Common
	MCP mcp.Config
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var cfg config
	code := svc.Main(ctx, "mcp", os.Stderr, &cfg, func() *svc.Common { return &cfg.Common },
		func(set *wire.Set, log *slog.Logger) (svc.Runner, error) {
			if err := cfg.MCP.Validate(set.Embedded); err != nil {
				return nil, err
			}
			group, err := cfg.Frontier.Grouper()
			if err != nil {
				return nil, err
			}
			return mcp.New(cfg.MCP, mcp.Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets, HCF: set.HCF,
				Group: group, Shards: cfg.Frontier.Shards, Embedded: set.Embedded, Logger: log, Gate: set.Gate(true, log), Metrics: set.Metrics, Disk: set.Disk}), nil
		})
	stop()
	os.Exit(code)
}
