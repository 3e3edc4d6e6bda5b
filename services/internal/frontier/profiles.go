package frontier

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// ProfileCache resolves the profile of a contract: the one carried inline,
// or the crawl's profile from the store, read again at most every
// profileTTL so that settings changed mid-crawl (PATCH) take effect.
type ProfileCache struct {
	store profiles.Store
	mu    sync.Mutex
	byID  map[string]cachedProfile
}

type cachedProfile struct {
	p  *contracts.Profile
	at time.Time
}

// profileTTL bounds how long a stored profile is cached.
const profileTTL = 2 * time.Second

// maxCachedProfiles bounds the cache; it is cleared when full.
const maxCachedProfiles = 1024

// NewProfileCache returns a cache over s.
func NewProfileCache(s profiles.Store) *ProfileCache {
	return &ProfileCache{store: s, byID: map[string]cachedProfile{}}
}

// Resolve returns inline when it is set, else the stored profile of crawlID.
// An unknown crawl yields an error wrapping profiles.ErrNotFound.
func (c *ProfileCache) Resolve(ctx context.Context, crawlID string, inline *contracts.Profile) (*contracts.Profile, error) {
	if inline != nil {
		return inline, nil
	}
	c.mu.Lock()
	e, ok := c.byID[crawlID]
	c.mu.Unlock()
	if ok && time.Since(e.at) < profileTTL {
		return e.p, nil
	}
	if c.store == nil {
		return nil, fmt.Errorf("profile of crawl %q: %w", crawlID, profiles.ErrNotFound)
	}
	cr, err := c.store.Get(ctx, crawlID)
	if err != nil {
		return nil, fmt.Errorf("profile of crawl %q: %w", crawlID, err)
	}
	p := &cr.Profile
	if ok && e.p.Version == p.Version {
		p = e.p // unchanged: keep the pointer, which callers key caches by
	}
	c.mu.Lock()
	if len(c.byID) >= maxCachedProfiles {
		clear(c.byID)
	}
	c.byID[crawlID] = cachedProfile{p: p, at: time.Now()}
	c.mu.Unlock()
	return p, nil
}
