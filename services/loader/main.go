// Command loader runs gridcrawl's loader service: it consumes loader_pending,
// fetches politely and writes WARC records to the asset store.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/loader"
	"github.com/gridcrawl/gridcrawl/services/internal/svc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

type config struct {
	svc.Common
	Loader loader.Config
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var cfg config
	code := svc.Main(ctx, "loader", os.Stderr, &cfg, func() *svc.Common { return &cfg.Common },
		func(set *wire.Set, log *slog.Logger) (svc.Runner, error) {
			if err := cfg.Loader.Validate(); err != nil {
				return nil, err
			}
			group, err := cfg.Routing.Grouper()
			if err != nil {
				return nil, err
			}
			cfg.Loader.ResolveFrontier(cfg.Backends.DataDir, set.Embedded)
			return loader.New(cfg.Loader, loader.Deps{Queue: set.Queue, Tx: set.Tx, Owners: set.Tx, Assets: set.Assets, Digests: set.Digests, Profiles: set.Profiles,
				Group: group, Shards: cfg.Routing.ShardCount(set.Embedded), Stagger: stagger(set.Embedded), Logger: log, Gate: set.Gate(false, log), Metrics: set.Metrics})
		})
	stop()
	os.Exit(code)
}

// stagger spreads the loader shards over loaders that start together; an
// embedded queue has one loader, which takes every shard at once.
func stagger(embedded bool) time.Duration {
	if embedded {
		return 0
	}
	return 2 * time.Second
}
