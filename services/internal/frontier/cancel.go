package frontier

import (
	"context"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// stateTTL is how long a crawl's state is cached: a cancel or pause reaches
// every service within it.
const stateTTL = time.Second

// CancelCache answers "is this crawl cancelled, or paused?" from the
// profile store, caching each answer for a second.
type CancelCache struct {
	store profiles.Store
	mu    sync.Mutex
	seen  map[string]cancelEntry
}

type cancelEntry struct {
	state contracts.CrawlState
	at    time.Time
}

// NewCancelCache returns a cache over s; a nil s reports every crawl running.
func NewCancelCache(s profiles.Store) *CancelCache {
	return &CancelCache{store: s, seen: map[string]cancelEntry{}}
}

// State returns the state of crawlID; unknown crawls and errors read as
// running (the transaction index still guards every transition).
func (c *CancelCache) State(ctx context.Context, crawlID string) contracts.CrawlState {
	if c.store == nil {
		return contracts.CrawlRunning
	}
	c.mu.Lock()
	e, ok := c.seen[crawlID]
	c.mu.Unlock()
	if ok && time.Since(e.at) < stateTTL {
		return e.state
	}
	e = cancelEntry{state: contracts.CrawlRunning, at: time.Now()}
	if cr, err := c.store.Get(ctx, crawlID); err == nil {
		e.state = cr.State
	}
	c.mu.Lock()
	if len(c.seen) > 10000 {
		clear(c.seen)
	}
	c.seen[crawlID] = e
	c.mu.Unlock()
	return e.state
}

// Cancelled reports whether crawlID is cancelled.
func (c *CancelCache) Cancelled(ctx context.Context, crawlID string) bool {
	return c.State(ctx, crawlID) == contracts.CrawlCancelled
}
