package frontier

import (
	"context"
	"fmt"
	"sync"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// ProfileCache resolves the profile of a contract: the one carried inline,
// or the crawl's immutable profile from the store, read once per crawl.
type ProfileCache struct {
	store profiles.Store
	mu    sync.Mutex
	byID  map[string]*contracts.Profile
}

// maxCachedProfiles bounds the cache; it is cleared when full.
const maxCachedProfiles = 1024

// NewProfileCache returns a cache over s.
func NewProfileCache(s profiles.Store) *ProfileCache {
	return &ProfileCache{store: s, byID: map[string]*contracts.Profile{}}
}

// Resolve returns inline when it is set, else the stored profile of crawlID.
// An unknown crawl yields an error wrapping profiles.ErrNotFound.
func (c *ProfileCache) Resolve(ctx context.Context, crawlID string, inline *contracts.Profile) (*contracts.Profile, error) {
	if inline != nil {
		return inline, nil
	}
	c.mu.Lock()
	p, ok := c.byID[crawlID]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	if c.store == nil {
		return nil, fmt.Errorf("profile of crawl %q: %w", crawlID, profiles.ErrNotFound)
	}
	cr, err := c.store.Get(ctx, crawlID)
	if err != nil {
		return nil, fmt.Errorf("profile of crawl %q: %w", crawlID, err)
	}
	p = &cr.Profile
	c.mu.Lock()
	if len(c.byID) >= maxCachedProfiles {
		clear(c.byID)
	}
	c.byID[crawlID] = p
	c.mu.Unlock()
	return p, nil
}
