// Package crawlcache answers, from the profile store, the two questions that
// loaders and crawlers ask for every contract: which profile applies to this
// crawl, and is the crawl running, paused or cancelled. Answers are cached
// briefly in bounded caches, so that a PATCH, pause or cancel reaches every
// service within seconds without a store read per URL.
package crawlcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/lru"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// Cache bounds and freshness.
const (
	// StateTTL is how long a crawl's state is cached: a cancel or pause
	// reaches every service within it.
	StateTTL = time.Second
	// ProfileTTL bounds how long a stored profile is cached, so that
	// settings changed mid-crawl take effect.
	ProfileTTL = 2 * time.Second
	// readTimeout bounds a shared read of a crawl's record.
	readTimeout = 30 * time.Second
	maxStates   = 10000
	maxProfile  = 1024
)

// reads coalesces the reads of one crawl's record that miss a cache at
// once: every goroutine of a loader asks when the cached answer expires,
// and they share one store read instead of sending one each (five a
// second per loader before).
type reads struct {
	store profiles.Store
	mu    sync.Mutex
	calls map[string]*read
}

// read is one store read in flight and, once done is closed, its answer.
type read struct {
	done chan struct{}
	cr   profiles.Crawl
	err  error
}

// get returns the stored record of crawlID, reading it once for all the
// callers that ask while a read of it runs. A caller whose ctx ends stops
// waiting; the read goes on for the others, bounded by readTimeout.
func (r *reads) get(ctx context.Context, crawlID string) (profiles.Crawl, error) {
	r.mu.Lock()
	if c, ok := r.calls[crawlID]; ok {
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.cr, c.err
		case <-ctx.Done():
			return profiles.Crawl{}, ctx.Err()
		}
	}
	c := &read{done: make(chan struct{})}
	if r.calls == nil {
		r.calls = map[string]*read{}
	}
	r.calls[crawlID] = c
	r.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	c.cr, c.err = r.store.Get(rctx, crawlID)
	cancel()
	r.mu.Lock()
	delete(r.calls, crawlID)
	r.mu.Unlock()
	close(c.done)
	return c.cr, c.err
}

// States answers "is this crawl running, paused or cancelled?".
type States struct {
	store profiles.Store
	reads reads
	cache *lru.Cache[string, contracts.CrawlState]
}

// NewStates returns a state cache over s; a nil s reports every crawl
// running.
func NewStates(s profiles.Store) *States {
	return &States{store: s, reads: reads{store: s}, cache: lru.New[string, contracts.CrawlState](maxStates, StateTTL)}
}

// State returns the state of crawlID; unknown crawls and store errors read
// as running (the transaction index still guards every transition).
func (c *States) State(ctx context.Context, crawlID string) contracts.CrawlState {
	if c.store == nil {
		return contracts.CrawlRunning
	}
	if st, ok := c.cache.Get(crawlID); ok {
		return st
	}
	st := contracts.CrawlRunning
	if cr, err := c.reads.get(ctx, crawlID); err == nil {
		st = cr.State
	}
	c.cache.Put(crawlID, st)
	return st
}

// Fresh returns the state of crawlID as stored now, and caches it: a
// caller about to act on a cached state that the crawl may have just left
// (parking the URLs of a crawl that reads paused, while a resume publishes
// them again) asks the store first.
func (c *States) Fresh(ctx context.Context, crawlID string) contracts.CrawlState {
	if c.store == nil {
		return contracts.CrawlRunning
	}
	st := contracts.CrawlRunning
	if cr, err := c.store.Get(ctx, crawlID); err == nil { // not shared: a read already running may be older than the call
		st = cr.State
	}
	c.cache.Put(crawlID, st)
	return st
}

// Cancelled reports whether crawlID is cancelled.
func (c *States) Cancelled(ctx context.Context, crawlID string) bool {
	return c.State(ctx, crawlID) == contracts.CrawlCancelled
}

// Profiles resolves the profile of a contract: the one carried inline, or
// the crawl's profile from the store, read again at most every ProfileTTL.
type Profiles struct {
	store profiles.Store
	reads reads
	cache *lru.Cache[string, *contracts.Profile]
	// last keeps the newest profile pointer per crawl beyond the TTL, so
	// that an unchanged version keeps its pointer, which callers key their
	// own caches by.
	last *lru.Cache[string, *contracts.Profile]
}

// NewProfiles returns a profile cache over s.
func NewProfiles(s profiles.Store) *Profiles {
	return &Profiles{store: s, reads: reads{store: s}, cache: lru.New[string, *contracts.Profile](maxProfile, ProfileTTL), last: lru.New[string, *contracts.Profile](maxProfile, 0)}
}

// Resolve returns inline when it is set, else the stored profile of crawlID.
// An unknown crawl yields an error wrapping profiles.ErrNotFound.
func (c *Profiles) Resolve(ctx context.Context, crawlID string, inline *contracts.Profile) (*contracts.Profile, error) {
	if inline != nil {
		return inline, nil
	}
	if p, ok := c.cache.Get(crawlID); ok {
		return p, nil
	}
	if c.store == nil {
		return nil, fmt.Errorf("profile of crawl %q: %w", crawlID, profiles.ErrNotFound)
	}
	cr, err := c.reads.get(ctx, crawlID)
	if err != nil {
		return nil, fmt.Errorf("profile of crawl %q: %w", crawlID, err)
	}
	p := &cr.Profile
	if old, ok := c.last.Get(crawlID); ok && old.Version == p.Version {
		p = old // unchanged: keep the pointer
	}
	c.cache.Put(crawlID, p)
	c.last.Put(crawlID, p)
	return p, nil
}
