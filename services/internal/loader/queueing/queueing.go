// Package queueing is the loader's frontier: the intake of loader
// contracts (decoded and grouped by crawl host group, held or parked in the
// broker, or filed in a durable store of the shard), the per-group queues
// of pkg/politeness with each crawl's delays and budgets, the holders of
// each group's prefetch slots, the politeness state that survives a
// failover, the shard leases of a loader with a durable frontier, and the
// end of every task: its contract settled through the consumer shell
// (consume.Parts) once each of its URLs has an outcome.
//
// It hands out one task at a time (Next) and takes back what became of it:
// a lease's politeness outcome (Release), a task to schedule again or park
// (Again, Retry, Pause, Abandon), one whose contract went back to the queue
// (Drop), and one recorded (Settle). It knows nothing of fetching or
// recording: the URLs of retired groups go on through Deps.Retired.
package queueing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/frontier"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/crawlcache"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Config is what the frontier takes of the loader's configuration (the
// loader's Config documents each setting).
type Config struct {
	Prefetch        int
	GroupQueue      int
	PausedDelay     time.Duration
	RedeliveryGrace time.Duration
	RetryDelay      time.Duration
	CrawlDelayCap   time.Duration
	// BusyTimeout bounds one lease of a group (politeness.Config).
	BusyTimeout time.Duration
	// FrontierDir is where the shards' stores are; "": none, URLs are
	// parked in the broker.
	FrontierDir string
	ShardLease  time.Duration
}

// Deps are the frontier's backends and the stage it hands retired URLs to.
type Deps struct {
	Queue queue.Queue
	Tx    txindex.Pipeline
	// Owners keeps the shard leases; required with Config.FrontierDir.
	Owners   txindex.Owners
	Assets   assets.Store
	Profiles profiles.Store
	// States tells whether a crawl is paused or cancelled (shared with the
	// fetcher).
	States *crawlcache.States
	Group  routing.Grouper
	Shards int
	// Stagger delays the subscription to (or the claim of) half the shards.
	Stagger time.Duration
	Gate    *outage.Gate
	Logger  *slog.Logger
	Metrics *metrics.Loader
	// Retired takes the URLs of groups whose budget is spent, to be
	// recorded as retired with reason.
	Retired func(ctx context.Context, t *Task, reason string)
}

// Frontier is the loader's frontier; see the package doc.
type Frontier struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	shards int
	met    *metrics.Loader

	cancels *crawlcache.States
	profs   *crawlcache.Profiles
	// claims: the task whose fetch of a URL is not recorded yet, by record
	// key, so that a duplicate of it (a republished or redelivered
	// contract) is not fetched again meanwhile.
	claims *claims

	sched *politeness.Scheduler
	pol   policies
	state *politenessState

	// holders maps a crawl host group to the unsettled contracts whose URLs
	// of the group the loader holds. A contract holds its prefetch slot
	// until its last URL is fetched: a group may be held by a second
	// contract only when its queue drains soon, and by at most
	// maxHolders contracts, so that the other groups of the shard keep
	// slots (see split).
	holdMu     sync.Mutex
	holders    map[string]map[*delivery]struct{}
	maxHolders int

	parkedURLs atomic.Int64
	// fronts are the frontier stores (Config.FrontierDir); nil: URLs are
	// parked in the broker.
	fronts    *fronts
	filedURLs atomic.Int64
	// own keeps the leases of the shards the loader owns (with fronts).
	own         *owners
	rebuiltURLs atomic.Int64
}

// New returns a frontier.
func New(cfg Config, deps Deps) (*Frontier, error) {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sched, err := politeness.New(politeness.Config{BusyTimeout: cfg.BusyTimeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("create politeness scheduler: %w", err)
	}
	fr := &Frontier{
		cfg: cfg, deps: deps, log: log, shards: max(deps.Shards, 1), met: deps.Metrics,
		cancels: deps.States,
		profs:   crawlcache.NewProfiles(deps.Profiles),
		sched:   sched,
		pol:     newPolicies(cfg.CrawlDelayCap),
		holders: map[string]map[*delivery]struct{}{},
		claims:  newClaims(),
	}
	if fr.cancels == nil {
		fr.cancels = crawlcache.NewStates(deps.Profiles)
	}
	if cfg.FrontierDir != "" {
		if deps.Owners == nil {
			return nil, errors.New("a loader with a frontier directory needs the shard leases of the transaction index (Deps.Owners)")
		}
		fr.own = &owners{tx: deps.Owners, id: ownerName(cfg.FrontierDir), ttl: cfg.ShardLease, shards: make([]ownedShard, fr.shards)}
	}
	// A group holds at most half of its shard's prefetch slots (at least
	// one): the other groups of the shard always have the rest.
	fr.maxHolders = max(1, fr.prefetch()/2)
	fr.state = newPolitenessState(deps.Assets, fr.shards, log)
	return fr, nil
}

// Open opens the shards' frontier stores (Config.FrontierDir; none without
// it). Close closes them.
func (fr *Frontier) Open(ctx context.Context) error {
	if fr.cfg.FrontierDir == "" {
		return nil
	}
	f, err := openFronts(ctx, fr.cfg.FrontierDir, fr.shards)
	if err != nil {
		return err
	}
	fr.fronts = f
	return nil
}

// Close closes the frontier stores opened by Open.
func (fr *Frontier) Close() {
	if fr.fronts != nil {
		fr.fronts.close()
	}
}

// Own claims shards and consumes the queues of those it owns until ctx is
// done (Config.FrontierDir; see owners.go). Subscriptions run under
// consumeCtx; intake counts their goroutines.
func (fr *Frontier) Own(ctx, consumeCtx context.Context, intake *sync.WaitGroup) {
	fr.ownLoop(ctx, consumeCtx, intake)
}

// ReleaseShards gives up the shard leases held (with Config.FrontierDir).
func (fr *Frontier) ReleaseShards(ctx context.Context) {
	if fr.own != nil {
		fr.releaseShards(ctx)
	}
}

// Loops runs the frontier's loops until ctx is done: retired groups' URLs
// handed on, crawls' settings watched, and (with stores) groups' windows
// filled.
func (fr *Frontier) Loops(ctx context.Context) {
	var loops sync.WaitGroup
	loops.Go(func() { fr.retireLoop(ctx) })
	loops.Go(func() { fr.watchLoop(ctx) })
	if fr.fronts != nil {
		loops.Go(func() { fr.feedLoop(ctx) })
	}
	loops.Wait()
}

// Next leases the next task, waiting for one until ctx is done. The task
// runs under the newest profile seen of its crawl (a PATCH since it was
// taken).
func (fr *Frontier) Next(ctx context.Context) (politeness.Lease, *Task, error) {
	lease, err := fr.sched.Next(ctx)
	if err != nil {
		return lease, nil, err
	}
	t := lease.Item.Payload.(*Task)
	t.Profile = fr.pol.current(t.CrawlID, t.Profile)
	return lease, t, nil
}

// Lost reports whether t's contract went back to the queue, or its shard
// to another loader, which fetches it: t is then dropped (Drop).
func (fr *Frontier) Lost(t *Task) bool {
	return queue.Lost(t.dl.d) || t.dl.front != nil && !fr.own.owns(t.Shard)
}

// Claim makes t the task that fetches its URL, unless another task does
// and its outcome is not recorded yet.
func (fr *Frontier) Claim(t *Task) bool { return fr.claims.claim(t) }

// Drop ends t without an outcome: its contract went back to the queue.
func (fr *Frontier) Drop(t *Task) {
	fr.claims.release(t)
	t.dl.drop()
}

// Embedded counts a rendered page's request of bytes to group in the
// group's report.
func (fr *Frontier) Embedded(group string, bytes int64) { fr.sched.Embedded(group, bytes) }

// Snapshot is the scheduler's report of at most n groups.
func (fr *Frontier) Snapshot(n int) politeness.Report { return fr.sched.Snapshot(n) }

// Parked returns the number of URLs parked in the broker so far.
func (fr *Frontier) Parked() int64 { return fr.parkedURLs.Load() }

// Filed returns the number of URLs filed in the stores so far.
func (fr *Frontier) Filed() int64 { return fr.filedURLs.Load() }

// Rebuilt returns the number of URLs filed by rebuilds so far.
func (fr *Frontier) Rebuilt() int64 { return fr.rebuiltURLs.Load() }

// QueuedOf returns how many URLs of group the frontier holds, and the
// group's last delay.
func (fr *Frontier) QueuedOf(group string) (int, time.Duration) { return fr.sched.Queued(group) }

// StateWrites returns how many times a shard's politeness state was stored.
func (fr *Frontier) StateWrites() int64 { return fr.state.writes.Load() }

// prefetch returns how many unsettled contracts the loader takes from each
// shard: its prefetch slots.
func (fr *Frontier) prefetch() int { return max(1, fr.cfg.Prefetch/fr.shards) }

// Consume subscribes to every shard (a random half after Stagger) and runs
// one intake goroutine per shard, which stops at ctx's end.
func (fr *Frontier) Consume(ctx, consumeCtx context.Context, intake *sync.WaitGroup) error {
	shards := make([]int, fr.shards)
	for i := range shards {
		shards[i] = i
	}
	mrand.Shuffle(len(shards), func(i, j int) { shards[i], shards[j] = shards[j], shards[i] })
	prefetch := fr.prefetch()
	subscribe := func(shard int) error {
		name := routing.ShardQueue(shard, fr.shards)
		deliveries, err := fr.deps.Queue.Consume(consumeCtx, name, queue.ConsumeOptions{Prefetch: prefetch})
		if err != nil {
			return fmt.Errorf("consume %s: %w", name, err)
		}
		intake.Go(func() { fr.intake(ctx, shard, deliveries) })
		return nil
	}
	first, later := shards, []int(nil)
	if fr.deps.Stagger > 0 && len(shards) > 1 {
		first, later = shards[:len(shards)/2], shards[len(shards)/2:]
	}
	for _, s := range first {
		if err := subscribe(s); err != nil {
			return err
		}
	}
	if len(later) == 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(fr.deps.Stagger):
	}
	for _, s := range later {
		if err := subscribe(s); err != nil {
			return err
		}
	}
	return nil
}

// Settle ends t once the recorder or the publisher is done with it: its
// claim (taken at admission) ends, and its contract learns its outcome (err
// nil: durable). The recorder and the publisher have it as a function
// value, so that they never hold the frontier.
func (fr *Frontier) Settle(ctx context.Context, t *Task, err error) {
	fr.claims.release(t) // recorded, or its contract is retried
	t.dl.done(ctx, fr.log, err)
}

// GroupStates is the scheduler's snapshot for the metrics.
func (fr *Frontier) GroupStates() metrics.GroupStates {
	c := fr.sched.Counts()
	return metrics.GroupStates{Queued: c.Queued, Groups: map[string]int{
		"ready": c.Ready, "waiting": c.Waiting, "busy": c.Busy, "inactive": c.Inactive, "retired": c.Retired, "idle": c.Idle,
	}}
}

// Owns reports whether the loader owns shard and may take its work now
// (false without Config.FrontierDir).
func (fr *Frontier) Owns(shard int) bool { return fr.own != nil && fr.own.owns(shard) }

// Shards returns the number of loader queue shards.
func (fr *Frontier) Shards() int { return fr.shards }

// FiledQueues returns the queues with filed URLs of every shard's store
// (none without stores).
func (fr *Frontier) FiledQueues() []frontier.Queue {
	if fr.fronts == nil {
		return nil
	}
	var qs []frontier.Queue
	for _, s := range fr.fronts.stores {
		qs = append(qs, s.Queues()...)
	}
	return qs
}

// Backlog returns how many URLs group holds and the time one of them takes
// to be handed out after the one before (politeness.Scheduler.Backlog).
func (fr *Frontier) Backlog(group string) (int, time.Duration) { return fr.sched.Backlog(group) }
