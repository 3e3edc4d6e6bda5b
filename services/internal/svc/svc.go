// Package svc holds the start-up steps every service binary shares: parse
// the environment, build a logger, open the backends, run, close.
package svc

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/gridcrawl/gridcrawl/services/internal/routing"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// Common is the configuration every service reads.
type Common struct {
	Backends wire.Backends
	Frontier routing.Config
	LogLevel string `env:"GRIDCRAWL_LOG_LEVEL" envDefault:"info"`
}

// Runner is a service built on opened backends.
type Runner interface {
	Run(ctx context.Context) error
}

// Main parses the environment into cfg (which must embed Common and may add
// service sections), validates it, opens the backends, builds the service
// and runs it until ctx is done. It returns the process exit code.
func Main(ctx context.Context, name string, stderr io.Writer, cfg any, common func() *Common,
	build func(set *wire.Set, log *slog.Logger) (Runner, error)) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("service", name)
	if err := ParseEnv(cfg); err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	c := common()
	lvl, err := ParseLogLevel(c.LogLevel)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	log = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: lvl})).With("service", name)
	if err := errors.Join(c.Backends.Validate(), c.Frontier.Validate()); err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	if c.Backends.AMQPConnectionName == "" {
		c.Backends.AMQPConnectionName = "gridcrawl-" + name
	}
	set, err := wire.Open(ctx, c.Backends, log)
	if err != nil {
		log.Error("open backends", "err", err)
		return 1
	}
	r, err := build(set, log)
	if err == nil {
		log.Info("service starting")
		err = r.Run(ctx)
	}
	published := set.Published()
	err = errors.Join(err, set.Close())
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("service stopped", "published", published, "err", err)
		return 1
	}
	log.Info("service stopped", "published", published)
	return 0
}
