package indexer

import (
	"context"
	"errors"
	"log/slog"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

// Config configures the indexer. Every field is an environment variable.
type Config struct {
	// Prefetch is how many index contracts the indexer holds unacked. Each
	// carries its pages' documents: 16 kept the embedded grid's peak RSS at
	// 590 MiB where 64 took 820 MiB (1,000 hosts of 20 KB pages), with the
	// same pages/s and CPU per page in both modes (2026-11-27).
	Prefetch int `env:"GRIDCRAWL_INDEXER_PREFETCH" envDefault:"16"`
	// Batch is how many index contracts are stored in one write to the
	// search index.
	Batch int `env:"GRIDCRAWL_INDEXER_BATCH" envDefault:"256"`
}

// Validate checks c.
func (c *Config) Validate() error {
	if c.Prefetch < 1 || c.Batch < 1 {
		return errors.New("GRIDCRAWL_INDEXER_PREFETCH and GRIDCRAWL_INDEXER_BATCH must be at least 1")
	}
	return nil
}

// Pages is what the indexer needs of the transaction index: it moves pages
// on, and reads those whose move did not apply.
type Pages interface {
	Transition(ctx context.Context, ts []txindex.Transition) (applied []bool, err error)
	GetMany(ctx context.Context, keys []string) (map[string]txindex.Record, error)
}

// Deps are the indexer's backends.
type Deps struct {
	Queue  queue.Queue
	Tx     Pages
	Search search.Index
	// Gate tells backend outages from failed work (nil: every failure
	// counts as the contract's): a contract that failed while a backend is
	// down is postponed without counting an attempt, and the indexer takes
	// no more until the backend is back.
	Gate    *outage.Gate
	Metrics *metrics.Registry
	Logger  *slog.Logger
	// Nudge, when set, is told the crawl of each contract whose pages are
	// all settled, so that the coordinator's finish check looks at it at
	// once instead of at its next tick.
	Nudge func(crawlID string)
}

// Indexer is the index stage.
type Indexer struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	met   *metrics.MCP
	shell *consume.Shell[contracts.IndexContract]
}

// New returns an indexer; cfg must have been validated.
func New(cfg Config, deps Deps) *Indexer {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.New()
	}
	shell := consume.New(consume.Config[contracts.IndexContract]{Queue: deps.Queue, QueueName: contracts.QueueIndex,
		Kind: "index", Prefetch: cfg.Prefetch, Validate: validContract,
		Version: func(k *contracts.IndexContract) int { return k.V }, Gate: deps.Gate, Logger: log})
	return &Indexer{cfg: cfg, deps: deps, log: log, met: deps.Metrics.MCP(), shell: shell}
}

func (x *Indexer) nudge(crawlID string) {
	if x.deps.Nudge != nil {
		x.deps.Nudge(crawlID)
	}
}
