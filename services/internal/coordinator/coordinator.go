// Package coordinator owns the state of every crawl: the crawl operations
// (create, cancel, patch, pause and resume), the state machine they apply
// (lifecycle.go) and the loops that move crawls on by themselves: the finish
// check that ends crawls out of work, the due check that takes a continuous
// crawl's due URLs back (due.go), the recovery sweep that republishes work
// whose record sat in a non-terminal status past its lease (sweep.go), and
// the timeline sampling. Nothing else changes a crawl's state; MCP's HTTP
// layer calls it.
package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/diskspace"
	"github.com/gridcrawl/gridcrawl/services/internal/enqueue"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Config configures the coordinator. Every field is an environment
// variable.
type Config struct {
	// RecoveryLease is how long a record may sit in a non-terminal status
	// before the recovery sweep republishes its work.
	RecoveryLease    time.Duration `env:"GRIDCRAWL_RECOVERY_LEASE" envDefault:"10m"`
	RecoveryInterval time.Duration `env:"GRIDCRAWL_RECOVERY_INTERVAL" envDefault:"30s"`
	RecoveryAttempts int           `env:"GRIDCRAWL_RECOVERY_ATTEMPTS" envDefault:"5"`
	// FinishCheckInterval is how often the running crawls are checked for
	// being out of work; the indexer also nudges the check for the crawls it
	// just indexed.
	FinishCheckInterval time.Duration `env:"GRIDCRAWL_FINISH_CHECK_INTERVAL" envDefault:"1s"`
	// DueCheckInterval is how often the continuous crawls are checked for
	// due URLs, and MaxDuePerCheck how many URLs of one crawl one check
	// takes at most (the rest wait for the next).
	DueCheckInterval time.Duration `env:"GRIDCRAWL_DUE_CHECK_INTERVAL" envDefault:"1s"`
	MaxDuePerCheck   int           `env:"GRIDCRAWL_MAX_DUE_PER_CHECK" envDefault:"10000"`
	// TimelineInterval is how often the counts of each running crawl are
	// sampled for its timeline.
	TimelineInterval time.Duration `env:"GRIDCRAWL_TIMELINE_INTERVAL" envDefault:"5s"`
}

// Validate checks c.
func (c *Config) Validate() error {
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
	case c.DueCheckInterval < 10*time.Millisecond:
		return errors.New("GRIDCRAWL_DUE_CHECK_INTERVAL must be at least 10ms")
	case c.MaxDuePerCheck < 1:
		return errors.New("GRIDCRAWL_MAX_DUE_PER_CHECK must be at least 1")
	}
	return nil
}

// Deps are the coordinator's backends.
type Deps struct {
	Queue    queue.Queue
	Tx       txindex.Index
	Profiles profiles.Store
	// Search counts a crawl's documents for its status.
	Search search.Index
	// Assets keeps the crawls' timelines.
	Assets assets.Store
	Group  routing.Grouper
	// Shards is the number of loader queue shards; 0 means 1.
	Shards int
	Logger *slog.Logger
	// Gate tells backend outages from failed work (nil: every failure
	// counts as the work's).
	Gate    *outage.Gate
	Metrics *metrics.Registry
	// Disk watches the data directory of embedded backends (nil: none):
	// new crawls are refused while it is full.
	Disk *diskspace.Watch
	// QueuesInMemory tells that the crawler and index queues are lost with
	// the process (wire.Set.MemoryQueues): Run rebuilds their work from
	// the transaction index at start-up (RebuildQueues).
	QueuesInMemory bool
}

// Coordinator owns the crawls' states and runs their loops.
type Coordinator struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	enq  *enqueue.Enqueuer
	met  *metrics.MCP

	locks sync.Map // crawl id → *sync.Mutex, see crawlLock
	// refetched counts, per crawl id (*atomic.Int64), the URLs the due
	// check took back into the pipeline, for the timeline's rate.
	refetched sync.Map
	// nudged holds the crawls the indexer asks the finish check to look at;
	// nudge wakes the check.
	nudgeMu sync.Mutex
	nudged  map[string]struct{}
	nudge   chan struct{}

	tl timelines
	// unbuilt holds the ids of the crawls RebuildQueues left alone because
	// they were paused: their work is rebuilt when they resume.
	unbuilt sync.Map
	// resumed holds the crawls just resumed whose to-be-loaded records the
	// resume loop publishes again; resume wakes it (see resume.go).
	resumeMu sync.Mutex
	resumed  map[string]struct{}
	resume   chan struct{}
}

// New returns a coordinator; cfg must have been validated.
func New(cfg Config, deps Deps) *Coordinator {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.New()
	}
	return &Coordinator{
		cfg: cfg, deps: deps, log: log,
		enq:     &enqueue.Enqueuer{Tx: deps.Tx, Queue: deps.Queue, Group: deps.Group, Shards: deps.Shards},
		met:     deps.Metrics.MCP(),
		nudged:  map[string]struct{}{},
		nudge:   make(chan struct{}, 1),
		resumed: map[string]struct{}{},
		resume:  make(chan struct{}, 1),
		tl:      timelines{byID: map[string]*contracts.Timeline{}},
	}
}

// Run runs the finish check, the due check, the recovery sweep and the
// timeline sampling until ctx is cancelled. With queues in memory the
// sweep starts once their work is rebuilt (RebuildQueues), so that it does
// not republish the same records.
func (co *Coordinator) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		co.runRebuild(ctx)
		co.runSweep(ctx)
	})
	wg.Go(func() { co.runFinishCheck(ctx) })
	wg.Go(func() { co.runDueCheck(ctx) })
	wg.Go(func() { co.runTimeline(ctx) })
	wg.Go(func() { co.runResume(ctx) })
	wg.Wait()
	return nil
}
