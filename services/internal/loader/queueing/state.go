package queueing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Politeness across failover: each shard has one active loader, and when it
// dies another takes the shard over. The new owner does not know when the
// old one last fetched each group, but it knows it was before the takeover.
// So the loader stores, per shard, every group's delay lower bound that
// exceeds the crawl's minimum delay (a Crawl-delay, a backoff) whenever it
// changes, and a loader that receives its first contract of a shard makes
// every group of the shard wait until then plus the group's bound (at least
// the crawl's minimum delay) before its first request.

// StatePrefix is where loaders store each shard's politeness state in the
// asset store: StatePrefix + shard queue name + ".json".
const StatePrefix = "state/politeness/"

// maxStateGroups bounds the groups one shard's state keeps.
const maxStateGroups = 100000

// groupBound is what a shard's state keeps of one group.
type groupBound struct {
	// DelayMS is the least delay between two requests to the group.
	DelayMS int64 `json:"delay_ms"`
	// Trouble is when the backoff in DelayMS was last raised; zero if
	// DelayMS holds no backoff.
	Trouble time.Time `json:"trouble,omitzero"`
}

// stateFile is the stored state of one shard.
type stateFile struct {
	Shard   string                `json:"shard"`
	Updated time.Time             `json:"updated"`
	Groups  map[string]groupBound `json:"groups"`
}

// politenessState is the politeness state of every shard.
type politenessState struct {
	store  assets.Store
	n      int
	log    *slog.Logger
	shards []shardState
	writes atomic.Int64
	// retakeAfter: a redelivered contract of a shard activated longer ago
	// than this activates it again (see activate).
	retakeAfter time.Duration
}

type shardState struct {
	mu        sync.Mutex
	active    bool
	activated time.Time     // first contract of the shard taken by this loader
	window    time.Duration // no group's bound exceeds it
	groups    map[string]groupBound
	version   uint64

	wmu     sync.Mutex // serializes the shard's writes
	written uint64
}

func newPolitenessState(store assets.Store, n int, log *slog.Logger) *politenessState {
	return &politenessState{store: store, n: n, log: log, shards: make([]shardState, n), retakeAfter: time.Second}
}

func stateKey(shard, n int) string { return StatePrefix + routing.ShardQueue(shard, n) + ".json" }

// activate loads shard's state when the loader takes its first contract of
// the shard, and again when a redelivered contract shows that the shard may
// have been taken over in between (a consumer died or lost its connection
// with the contract unsettled: this loader may have lost the shard and got
// it back); the other calls return at once.
func (ps *politenessState) activate(ctx context.Context, shard int, redelivered bool) {
	s := &ps.shards[shard]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active && !(redelivered && time.Since(s.activated) > ps.retakeAfter) {
		return
	}
	ps.reload(ctx, shard, s)
}

// reload reads shard's stored state into s, whose lock is held, and makes
// the shard taken now.
func (ps *politenessState) reload(ctx context.Context, shard int, s *shardState) {
	groups, err := ps.load(ctx, shard)
	if err != nil && ctx.Err() == nil {
		ps.log.Warn("load politeness state", "queue", routing.ShardQueue(shard, ps.n), "err", err)
	}
	s.active, s.activated, s.groups = true, time.Now(), groups
	for _, b := range groups {
		s.window = max(s.window, time.Duration(b.DelayMS)*time.Millisecond)
	}
}

// takeOver loads shard's state when the loader has become the shard's
// owner (owners.go): its groups wait as after a failover.
func (ps *politenessState) takeOver(ctx context.Context, shard int) {
	s := &ps.shards[shard]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = 0
	ps.reload(ctx, shard, s)
}

func (ps *politenessState) load(ctx context.Context, shard int) (map[string]groupBound, error) {
	groups := map[string]groupBound{}
	rc, err := ps.store.Get(ctx, stateKey(shard, ps.n), 0, -1)
	if errors.Is(err, assets.ErrNotFound) {
		return groups, nil
	}
	if err != nil {
		return groups, err
	}
	defer rc.Close()
	var f stateFile
	if err := json.NewDecoder(rc).Decode(&f); err != nil {
		return groups, fmt.Errorf("decode %s: %w", stateKey(shard, ps.n), err)
	}
	for g, b := range f.Groups {
		groups[g] = b
	}
	return groups, nil
}

// holdUntil returns the earliest time group, of shard, may be fetched after
// the loader took the shard over: the takeover plus the group's bound, and
// at least plus minDelay. It is zero once that has passed.
func (ps *politenessState) holdUntil(shard int, group string, minDelay time.Duration) time.Time {
	s := &ps.shards[shard]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active || time.Since(s.activated) > max(s.window, minDelay) {
		return time.Time{}
	}
	return s.activated.Add(max(minDelay, time.Duration(s.groups[group].DelayMS)*time.Millisecond))
}

// learn updates group's bound after a request whose robots.txt Crawl-delay
// was crawlDelay and which did (trouble) or did not raise the backoff;
// decided, when positive, is the delay the scheduler decided after
// trouble. When the bound changes, the shard's state is stored before
// learn returns.
func (ps *politenessState) learn(ctx context.Context, shard int, group string, pol *politeness.DelayPolicy, crawlDelay time.Duration, trouble bool, decided time.Duration) {
	bound := pol.Min
	if crawlDelay > 0 {
		cd := crawlDelay
		if pol.CrawlDelayCap > 0 {
			cd = min(cd, pol.CrawlDelayCap)
		}
		bound = max(bound, cd)
	}
	now := time.Now()
	s := &ps.shards[shard]
	s.mu.Lock()
	old, had := s.groups[group]
	nb := groupBound{DelayMS: bound.Milliseconds()}
	switch {
	case trouble && decided > 0:
		nb.DelayMS, nb.Trouble = max(nb.DelayMS, decided.Milliseconds()), now
	case !old.Trouble.IsZero() && now.Sub(old.Trouble) < pol.ForgiveAfter:
		nb.DelayMS, nb.Trouble = max(nb.DelayMS, old.DelayMS), old.Trouble // not forgiven yet
	}
	keep := nb.DelayMS > pol.Min.Milliseconds()
	if (keep && had && old.DelayMS == nb.DelayMS && old.Trouble.Equal(nb.Trouble)) || (!keep && !had) || s.groups == nil {
		s.mu.Unlock()
		return
	}
	if keep {
		if !had && len(s.groups) >= maxStateGroups {
			clear(s.groups) // rather forget old bounds than grow without limit
		}
		s.groups[group] = nb
		s.window = max(s.window, time.Duration(nb.DelayMS)*time.Millisecond)
	} else {
		delete(s.groups, group)
	}
	s.version++
	v := s.version
	body, err := json.Marshal(stateFile{Shard: routing.ShardQueue(shard, ps.n), Updated: now.UTC(), Groups: s.groups})
	s.mu.Unlock()
	if err == nil {
		err = ps.save(ctx, shard, v, body)
	}
	if err != nil && ctx.Err() == nil {
		ps.log.Warn("store politeness state", "queue", routing.ShardQueue(shard, ps.n), "chg", group, "err", err)
	}
}

// save stores version v of shard's state unless a newer one was stored.
func (ps *politenessState) save(ctx context.Context, shard int, v uint64, body []byte) error {
	s := &ps.shards[shard]
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if v <= s.written {
		return nil
	}
	if err := ps.store.Put(ctx, stateKey(shard, ps.n), bytes.NewReader(body), int64(len(body)), "application/json"); err != nil {
		return err
	}
	s.written = v
	ps.writes.Add(1)
	return nil
}
