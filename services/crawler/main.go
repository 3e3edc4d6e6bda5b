// Command crawler runs gridcrawl's crawler service: it consumes
// crawler_pending, parses fetched pages, publishes documents and new URLs.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gridcrawl/gridcrawl/services/internal/crawler"
	"github.com/gridcrawl/gridcrawl/services/internal/svc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

type config struct {
	svc.Common
	Crawler crawler.Config
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var cfg config
	code := svc.Main(ctx, "crawler", os.Stderr, &cfg, func() *svc.Common { return &cfg.Common },
		func(set *wire.Set, log *slog.Logger) (svc.Runner, error) {
			if err := cfg.Crawler.Validate(); err != nil {
				return nil, err
			}
			group, err := cfg.Routing.Grouper()
			if err != nil {
				return nil, err
			}
			return crawler.New(cfg.Crawler, crawler.Deps{Queue: set.Queue, Tx: set.Tx, Assets: set.Assets, Digests: set.Digests, Profiles: set.Profiles,
				Group: group, Shards: cfg.Routing.ShardCount(set.Embedded), Logger: log, Gate: set.Gate(false, log), Metrics: set.Metrics}), nil
		})
	stop()
	os.Exit(code)
}
