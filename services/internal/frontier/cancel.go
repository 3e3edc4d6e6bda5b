package frontier

import (
	"context"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// CancelCache answers "is this crawl cancelled?" from the profile store,
// caching each answer for a second.
type CancelCache struct {
	store profiles.Store
	mu    sync.Mutex
	seen  map[string]cancelEntry
}

type cancelEntry struct {
	cancelled bool
	at        time.Time
}

// NewCancelCache returns a cache over s; a nil s never reports cancelled.
func NewCancelCache(s profiles.Store) *CancelCache {
	return &CancelCache{store: s, seen: map[string]cancelEntry{}}
}

// Cancelled reports whether crawlID is cancelled.
func (c *CancelCache) Cancelled(ctx context.Context, crawlID string) bool {
	if c.store == nil {
		return false
	}
	c.mu.Lock()
	e, ok := c.seen[crawlID]
	c.mu.Unlock()
	if ok && time.Since(e.at) < time.Second {
		return e.cancelled
	}
	cr, err := c.store.Get(ctx, crawlID)
	e = cancelEntry{cancelled: err == nil && cr.State == contracts.CrawlCancelled, at: time.Now()}
	c.mu.Lock()
	if len(c.seen) > 10000 {
		clear(c.seen)
	}
	c.seen[crawlID] = e
	c.mu.Unlock()
	return e.cancelled
}
