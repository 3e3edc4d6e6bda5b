// Package svc holds the start-up steps every service binary shares: parse
// the environment, build a logger, open the backends, run, close.
package svc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"

	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// Common is the configuration every service reads.
type Common struct {
	Backends wire.Backends
	Routing  routing.Config
	LogLevel string `env:"GRIDCRAWL_LOG_LEVEL" envDefault:"info"`
	// MetricsListen is the address of the service's metrics listener
	// (/metrics, /healthz, /readyz, no token); empty: none. MCP also serves
	// them on its API listener.
	MetricsListen string `env:"GRIDCRAWL_METRICS_LISTEN"`
	// CPUProfile names a file to write a CPU profile of the whole run to,
	// suffixed with the service's name and process id (go tool pprof reads
	// it); empty: none. The benchmark's grid mode profiles each process
	// with it. The grid binary writes its profile to the name as given.
	CPUProfile string `env:"GRIDCRAWL_CPU_PROFILE"`
	// MetricsDump names a file the service writes its metrics to when it
	// stops (Prometheus' text format), suffixed like CPUProfile: the
	// benchmark's grid mode reads each service's backend calls from it.
	MetricsDump string `env:"GRIDCRAWL_METRICS_DUMP"`
	// GCPercent is the garbage collector's target, as GOGC sets it, for a
	// service started without GOGC (which wins when set): the heap may grow
	// by this percentage of what is live before the next collection. The
	// default of 400 cost the grid-mode services 15% less CPU per page than
	// Go's 100 for about twice the resident memory (docs/benchmarks.md); a
	// memory limit (GOMEMLIMIT) makes the collector work harder near it
	// instead of growing past it.
	GCPercent int `env:"GRIDCRAWL_GC_PERCENT" envDefault:"400"`
}

// setGCPercent applies c.GCPercent unless the environment sets GOGC, and
// reports whether it did.
func setGCPercent(c *Common, getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(c.GCPercent)
	return true
}

// validGCPercent checks GRIDCRAWL_GC_PERCENT: at least 25 (a collection
// for every quarter of the live heap allocated); turning the collector off
// is GOGC=off, which the variable does not offer.
func validGCPercent(p int) error {
	if p < 25 {
		return fmt.Errorf("GRIDCRAWL_GC_PERCENT must be at least 25, got %d", p)
	}
	return nil
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
	if err := errors.Join(c.Backends.Validate(), c.Routing.Validate(), validListen(c.MetricsListen), validGCPercent(c.GCPercent)); err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	setGCPercent(c, os.Getenv)
	if c.Backends.AMQPConnectionName == "" {
		c.Backends.AMQPConnectionName = "gridcrawl-" + name
	}
	if c.CPUProfile != "" {
		stop, err := startCPUProfile(fmt.Sprintf("%s.%s.%d", c.CPUProfile, name, os.Getpid()))
		if err != nil {
			log.Error("invalid configuration", "err", err)
			return 2
		}
		defer stop()
	}
	set, err := wire.Open(ctx, c.Backends, log)
	if err != nil {
		log.Error("open backends", "err", err)
		return 1
	}
	set.Instrument(metrics.New())
	r, err := build(set, log)
	if err == nil {
		err = run(ctx, name, c.MetricsListen, set, r, log)
	}
	published := set.Published()
	if c.MetricsDump != "" {
		err = errors.Join(err, set.Metrics.WriteFile(fmt.Sprintf("%s.%s.%d", c.MetricsDump, name, os.Getpid())))
	}
	err = errors.Join(err, set.Close())
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("service stopped", "published", published, "err", err)
		return 1
	}
	log.Info("service stopped", "published", published)
	return 0
}

// run runs r, with the metrics listener when listen is set.
func run(ctx context.Context, name, listen string, set *wire.Set, r Runner, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if listen != "" {
		checks := set.Checks(name == "mcp" || name == "indexer") // the loader and the crawler do not use search
		_, done, err := metrics.Serve(ctx, listen, metrics.Mux(set.Metrics, checks), log)
		if err != nil {
			return err
		}
		defer func() { cancel(); <-done }()
	}
	log.Info("service starting")
	return r.Run(ctx)
}

// validListen checks GRIDCRAWL_METRICS_LISTEN.
func validListen(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("GRIDCRAWL_METRICS_LISTEN %q: %w", addr, err)
	}
	return nil
}

// Together returns a Runner that runs rs at once until ctx is done or one of
// them returns, then stops the others and returns their errors joined: the
// parts of one service (MCP's API, coordinator and indexer) live and die
// together.
func Together(rs ...Runner) Runner { return together(rs) }

type together []Runner

func (t together) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(t))
	var wg sync.WaitGroup
	for i, r := range t {
		wg.Go(func() {
			errs[i] = r.Run(ctx)
			cancel()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startCPUProfile starts a CPU profile written to name; stop ends it.
func startCPUProfile(name string) (stop func(), err error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("GRIDCRAWL_CPU_PROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("GRIDCRAWL_CPU_PROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
