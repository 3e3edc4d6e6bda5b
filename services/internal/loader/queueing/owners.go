package queueing

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/frontier"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Shard ownership with a durable frontier (see docs/architecture.md): a
// loader that files URLs works only on the shards whose lease it holds
// (txindex.Owners), one owner per shard. It claims free shards, renews its
// leases every sixth of their time to live, and consumes a shard's queue
// only while it owns the shard.
//
// A shard's store is tagged with the owner and lease epoch it was filed
// under. A claim that keeps the epoch (the loader restarted on its own
// store) keeps the store; a new epoch means another loader owned the shard
// since: the store is cleared and rebuilt from the transaction index's
// to-be-loaded records of the shard (Owners.Waiting) before the shard's
// queue is consumed, so that every URL the old owner filed, and every one
// whose contract it never saw, is filed again.
//
// A loader stops taking work of a shard once half the lease's time has
// passed since its last renewal (its deadline): another loader can claim
// the shard only once the lease has expired, so two loaders never work on
// one shard while their clocks differ by less than half the time to live.
// Fetches in flight at the deadline finish; the tasks the scheduler holds
// are dropped when they come up (admit), their URLs left to the new owner.

// owners keeps the loader's leases.
type owners struct {
	tx  txindex.Owners
	id  string // the owner's name: host and frontier directory
	ttl time.Duration

	mu     sync.Mutex
	shards []ownedShard // by shard
}

type ownedShard struct {
	lease   txindex.Lease
	held    bool      // the lease is this loader's
	until   time.Time // work is taken only before it
	working bool      // rebuilt and consumed (held and not working: being taken)
	stop    context.CancelFunc
}

// ownerName names the owner of the stores in dir on this host: a loader
// restarted on the same directory is the same owner (Pebble's lock keeps
// two live processes from opening one directory).
func ownerName(dir string) string {
	host, _ := os.Hostname()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return host + ":" + dir
}

// owns reports whether the loader may take work of shard now.
func (o *owners) owns(shard int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := &o.shards[shard]
	return s.working && time.Now().Before(s.until)
}

// ownLoop claims free shards and renews the leases held until ctx is done;
// it then stops consuming every shard. Subscriptions run under consumeCtx;
// intake counts their goroutines.
func (fr *Frontier) ownLoop(ctx, consumeCtx context.Context, intake *sync.WaitGroup) {
	o := fr.own
	started := time.Now()
	t := time.NewTicker(o.ttl / 6)
	defer t.Stop()
	var takers sync.WaitGroup
	defer takers.Wait()
	for {
		fr.renewShards(ctx)
		// Loaders started together share the shards: within Stagger of its
		// start a loader claims at most half of them.
		most := fr.shards
		if fr.deps.Stagger > 0 && time.Since(started) < fr.deps.Stagger && fr.shards > 1 {
			most = fr.shards / 2
		}
		fr.claimShards(ctx, consumeCtx, intake, &takers, most)
		select {
		case <-ctx.Done():
			o.mu.Lock()
			for i := range o.shards {
				if s := &o.shards[i]; s.stop != nil {
					s.stop()
					s.stop, s.working = nil, false
				}
			}
			o.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// renewShards renews every lease held. A lease found taken over, or not
// renewed by its deadline, ends the shard's work here.
func (fr *Frontier) renewShards(ctx context.Context) {
	o := fr.own
	o.mu.Lock()
	held := map[int]txindex.Lease{}
	for i, s := range o.shards {
		if s.held {
			held[i] = s.lease
		}
	}
	o.mu.Unlock()
	// Together: a store whose writes wait for a refresh (Elasticsearch's
	// wait-for policy) would otherwise take a second per shard.
	var wg sync.WaitGroup
	for shard, lease := range held {
		wg.Go(func() {
			start := time.Now()
			got, ok, err := o.tx.Renew(ctx, lease, o.ttl)
			o.mu.Lock()
			defer o.mu.Unlock()
			s := &o.shards[shard]
			if !s.held || s.lease.Epoch != lease.Epoch {
				return
			}
			switch {
			case err == nil && ok:
				s.lease, s.until = got, start.Add(o.ttl/2)
			case err == nil:
				fr.log.Warn("lost loader shard", "queue", routing.ShardQueue(shard, fr.shards), "owner", got.Owner, "epoch", got.Epoch)
				fr.dropShard(s)
			case time.Now().After(s.until):
				fr.log.Warn("loader shard lease not renewed in time", "queue", routing.ShardQueue(shard, fr.shards), "err", err)
				fr.dropShard(s)
			}
		})
	}
	wg.Wait()
}

// dropShard ends the loader's work on s; o.mu is held.
func (fr *Frontier) dropShard(s *ownedShard) {
	if s.stop != nil {
		s.stop()
	}
	s.held, s.working, s.stop = false, false, nil
}

// claimShards claims free shards, in random order, while the loader holds
// fewer than most, and takes each it wins in a goroutine of takers.
func (fr *Frontier) claimShards(ctx, consumeCtx context.Context, intake, takers *sync.WaitGroup, most int) {
	o := fr.own
	leases, err := o.tx.Leases(ctx)
	if err != nil {
		if ctx.Err() == nil {
			fr.log.Warn("read loader shard leases", "err", err)
		}
		return
	}
	live := map[string]bool{}
	now := time.Now()
	for _, ls := range leases {
		live[ls.Shard] = ls.Live(now) && ls.Owner != o.id
	}
	o.mu.Lock()
	have := 0
	for _, s := range o.shards {
		if s.held {
			have++
		}
	}
	o.mu.Unlock()
	for _, shard := range mrand.Perm(fr.shards) {
		if have >= most || ctx.Err() != nil {
			return
		}
		id := txindex.ShardID(shard, fr.shards)
		o.mu.Lock()
		held := o.shards[shard].held
		o.mu.Unlock()
		if held || live[id] {
			continue
		}
		lease, ok, err := o.tx.Claim(ctx, id, o.id, o.ttl)
		if err != nil {
			if ctx.Err() == nil {
				fr.log.Warn("claim loader shard", "queue", routing.ShardQueue(shard, fr.shards), "err", err)
			}
			return
		}
		if !ok {
			continue
		}
		have++
		o.mu.Lock()
		o.shards[shard] = ownedShard{lease: lease, held: true, until: now.Add(o.ttl / 2)}
		o.mu.Unlock()
		takers.Go(func() { fr.takeShard(ctx, consumeCtx, intake, shard, lease) })
	}
}

// takeShard makes the loader shard's owner under lease: its store rebuilt
// when it was filed under another epoch, its groups' politeness state
// loaded, and its queue consumed.
func (fr *Frontier) takeShard(ctx, consumeCtx context.Context, intake *sync.WaitGroup, shard int, lease txindex.Lease) {
	o := fr.own
	fail := func(err error) {
		if ctx.Err() == nil {
			fr.log.Warn("take loader shard", "queue", routing.ShardQueue(shard, fr.shards), "err", err)
		}
		o.mu.Lock()
		if s := &o.shards[shard]; s.held && s.lease.Epoch == lease.Epoch {
			// Let it go, to be claimed again (by this loader, same epoch).
			s.held = false
		}
		o.mu.Unlock()
	}
	store := fr.fronts.stores[shard]
	tag := []byte(lease.Owner + "\x00" + strconv.FormatInt(lease.Epoch, 10))
	had, err := store.Owner()
	if err != nil {
		fail(err)
		return
	}
	if string(had) != string(tag) {
		start := time.Now()
		n, err := fr.rebuildShard(ctx, shard, store)
		if err != nil {
			fail(err)
			return
		}
		if err := store.SetOwner(tag); err != nil {
			fail(err)
			return
		}
		fr.rebuiltURLs.Add(int64(n))
		fr.met.Rebuilt(n)
		fr.log.Info("rebuilt the frontier of a loader shard", "queue", routing.ShardQueue(shard, fr.shards), "epoch", lease.Epoch,
			"urls", n, "ms", time.Since(start).Milliseconds())
	}
	// Know the shard's groups' delays before scheduling any of them.
	fr.state.takeOver(ctx, shard)
	o.mu.Lock()
	s := &o.shards[shard]
	if !s.held || s.lease.Epoch != lease.Epoch || ctx.Err() != nil {
		o.mu.Unlock()
		return // lost meanwhile
	}
	subCtx, stop := context.WithCancel(consumeCtx)
	name := routing.ShardQueue(shard, fr.shards)
	deliveries, err := fr.deps.Queue.Consume(subCtx, name, queue.ConsumeOptions{Prefetch: fr.prefetch()})
	if err != nil {
		stop()
		o.mu.Unlock()
		fail(fmt.Errorf("consume %s: %w", name, err))
		return
	}
	s.stop, s.working = stop, true
	o.mu.Unlock()
	intake.Go(func() { fr.consumeOwned(ctx, subCtx, shard, deliveries) })
	for _, q := range store.Queues() {
		fr.fronts.want(shard, q.Group)
	}
}

// consumeOwned takes the deliveries of an owned shard until subCtx ends.
// A subscription that ends under it (its broker connection was lost) is
// made again: no other loader consumes the shard's queue meanwhile, since
// only its owner subscribes to it.
func (fr *Frontier) consumeOwned(ctx, subCtx context.Context, shard int, deliveries <-chan queue.Delivery) {
	name := routing.ShardQueue(shard, fr.shards)
	for {
		fr.intake(ctx, shard, deliveries)
		for {
			select {
			case <-subCtx.Done():
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			var err error
			if deliveries, err = fr.deps.Queue.Consume(subCtx, name, queue.ConsumeOptions{Prefetch: fr.prefetch()}); err == nil {
				break
			}
			fr.log.Warn("consume an owned shard again", "queue", name, "err", err)
		}
	}
}

// rebuildPage is how many records one read of a rebuild returns.
const rebuildPage = 2000

// rebuildShard clears store and files the to-be-loaded records of shard
// from the transaction index; it returns how many it filed.
func (fr *Frontier) rebuildShard(ctx context.Context, shard int, store *frontier.Store) (int, error) {
	if err := store.Clear(); err != nil {
		return 0, err
	}
	id := txindex.ShardID(shard, fr.shards)
	n, after := 0, ""
	for {
		recs, err := fr.own.tx.Waiting(ctx, id, after, rebuildPage)
		if err != nil {
			return n, fmt.Errorf("rebuild frontier of shard %s: %w", id, err)
		}
		if len(recs) == 0 {
			return n, nil
		}
		es := make([]frontier.Entry, 0, len(recs))
		for _, r := range recs {
			if r.Group == "" {
				continue
			}
			es = append(es, frontier.Entry{Group: r.Group, Crawl: r.CrawlID, URL: r.URL, Depth: r.Depth, Hops: r.Hops})
		}
		k, err := store.File(ctx, es)
		if err != nil {
			return n, fmt.Errorf("rebuild frontier of shard %s: %w", id, err)
		}
		n += k
		after = recs[len(recs)-1].Key
	}
}

// releaseShards gives up every lease held, once the loader has stopped and
// recorded its outcomes: another loader may take the shards at once.
func (fr *Frontier) releaseShards(ctx context.Context) {
	o := fr.own
	o.mu.Lock()
	var held []txindex.Lease
	for i := range o.shards {
		if s := &o.shards[i]; s.held {
			held = append(held, s.lease)
			fr.dropShard(s)
		}
	}
	o.mu.Unlock()
	for _, lease := range held {
		if err := o.tx.Release(ctx, lease); err != nil && ctx.Err() == nil {
			fr.log.Warn("release loader shard", "shard", lease.Shard, "err", err)
		}
	}
}
