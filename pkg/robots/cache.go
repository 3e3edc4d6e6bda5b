package robots

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Fetcher fetches a robots.txt URL with the caller's HTTP client, which
// follows up to five redirects and caps the body. It returns the final
// status code and body, or an error if no response was received.
type Fetcher func(ctx context.Context, robotsURL string) (status int, body []byte, err error)

// CacheConfig configures a Cache. Zero fields take their defaults.
type CacheConfig struct {
	// TTL is how long a fetched robots.txt is used (default 24h, the most
	// RFC 9309 §2.4 recommends).
	TTL time.Duration
	// ErrorTTL is how long an unreachable robots.txt (5xx, 429 or network
	// error) is remembered before the next attempt (default 10m).
	ErrorTTL time.Duration
	// MaxEntries bounds the number of origins kept; the least recently used
	// is evicted first (default 100000).
	MaxEntries int
	// Now returns the current time (default time.Now); tests replace it.
	Now func() time.Time
}

// Cache fetches and keeps the robots.txt rules of each origin. It is safe for
// concurrent use; concurrent Gets for one origin share a single fetch.
type Cache struct {
	fetch Fetcher
	cfg   CacheConfig

	mu       sync.Mutex
	entries  map[string]*list.Element // of *entry
	lru      *list.List               // front is most recently used
	inflight map[string]*call
}

type entry struct {
	key     string
	rules   *Rules
	expires time.Time
	// unreachable is why rules stand for an unreachable file, or nil.
	unreachable error
	// good is the last copy obtained from a definite answer (2xx, 3xx or
	// 4xx), kept to stand in while the server is unreachable.
	good *Rules
}

type call struct {
	done chan struct{}
	res  Result
	ok   bool // false: the fetching caller's context ended; try again
	// waiters counts the callers waiting on this call (read by tests).
	waiters int
}

// NewCache returns a Cache that fetches with fetch.
func NewCache(fetch Fetcher, cfg CacheConfig) *Cache {
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.ErrorTTL <= 0 {
		cfg.ErrorTTL = 10 * time.Minute
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 100000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Cache{
		fetch:    fetch,
		cfg:      cfg,
		entries:  map[string]*list.Element{},
		lru:      list.New(),
		inflight: map[string]*call{},
	}
}

// ErrUnreachable is wrapped by Result.Unreachable: robots.txt could not be
// had (a network error, a 5xx or 429 status), so nothing may be fetched
// (RFC 9309 §2.3.1.4).
var ErrUnreachable = errors.New("robots.txt unreachable")

// Result is what Lookup knows of an origin's robots.txt.
type Result struct {
	// Rules are the rules to obey; never nil.
	Rules *Rules
	// Unreachable, when not nil, wraps ErrUnreachable and the fetch's error
	// or status: Rules is DisallowAll because the file could not be had.
	// It is nil when Rules come from an answer or stand in from the last
	// good copy, so a URL Rules disallow is truly disallowed.
	Unreachable error
	// Fetched reports that this call fetched robots.txt itself (a request
	// was sent on its behalf); false when the rules were cached or another
	// caller's fetch was shared.
	Fetched bool
}

// Get returns the rules for scheme://hostport, fetching /robots.txt when
// they are not cached or have expired. Status codes follow RFC 9309 §2.3.1:
//   - 2xx: the body is parsed;
//   - 3xx (the fetcher gave up redirecting) and 4xx but 429: AllowAll;
//   - 5xx, 429, other codes and network errors: the file is unreachable,
//     so DisallowAll, or the last good copy if there is one, for ErrorTTL.
//
// The error is non-nil only if ctx ends before the rules are known.
func (c *Cache) Get(ctx context.Context, scheme, hostport string) (*Rules, error) {
	res, err := c.Lookup(ctx, scheme, hostport)
	return res.Rules, err
}

// Lookup is Get that also tells why the rules are DisallowAll when the file
// is unreachable, and whether this call fetched it.
func (c *Cache) Lookup(ctx context.Context, scheme, hostport string) (Result, error) {
	key := originKey(scheme, hostport)
	for {
		c.mu.Lock()
		var good *Rules
		if el, ok := c.entries[key]; ok {
			e := el.Value.(*entry)
			if c.cfg.Now().Before(e.expires) {
				c.lru.MoveToFront(el)
				c.mu.Unlock()
				return Result{Rules: e.rules, Unreachable: e.unreachable}, nil
			}
			good = e.good
		}
		if cl, ok := c.inflight[key]; ok {
			cl.waiters++
			c.mu.Unlock()
			select {
			case <-cl.done:
				if cl.ok {
					res := cl.res
					res.Fetched = false
					return res, nil
				}
				continue // the fetching caller gave up; fetch ourselves
			case <-ctx.Done():
				return Result{}, fmt.Errorf("get robots.txt of %q: %w", key, context.Cause(ctx))
			}
		}
		cl := &call{done: make(chan struct{})}
		c.inflight[key] = cl
		c.mu.Unlock()

		c.load(ctx, key, good, cl)
		if !cl.ok {
			return Result{}, fmt.Errorf("get robots.txt of %q: %w", key, context.Cause(ctx))
		}
		return cl.res, nil
	}
}

// originKey returns "scheme://host[:port]" in lower case, without the
// scheme's default port, so that equivalent origins share one entry.
func originKey(scheme, hostport string) string {
	scheme, hostport = strings.ToLower(scheme), strings.ToLower(hostport)
	if scheme == "" {
		scheme = "http"
	}
	switch {
	case scheme == "http":
		hostport = strings.TrimSuffix(hostport, ":80")
	case scheme == "https":
		hostport = strings.TrimSuffix(hostport, ":443")
	}
	return scheme + "://" + hostport
}

// load fetches key's robots.txt, stores the outcome and completes cl.
func (c *Cache) load(ctx context.Context, key string, good *Rules, cl *call) {
	defer func() {
		// Runs even if the fetcher panics, so that waiters are released.
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		close(cl.done)
	}()

	status, body, err := c.fetch(ctx, key+"/robots.txt")
	var rules *Rules
	var unreachable error
	ttl := c.cfg.TTL
	definite := true
	switch {
	case err != nil && ctx.Err() != nil:
		return // cancelled, not unreachable: remember nothing
	case err == nil && status >= 200 && status <= 299:
		rules = Parse(body)
	case err == nil && status >= 300 && status <= 499 && status != 429:
		rules = AllowAll
	default:
		definite = false
		ttl = c.cfg.ErrorTTL
		rules = DisallowAll
		switch {
		case good != nil:
			rules = good
		case err != nil:
			unreachable = fmt.Errorf("%w: %w", ErrUnreachable, err)
		default:
			unreachable = fmt.Errorf("%w: http %d", ErrUnreachable, status)
		}
	}
	if definite {
		good = rules
	}

	c.mu.Lock()
	e := &entry{key: key, rules: rules, unreachable: unreachable, expires: c.cfg.Now().Add(ttl), good: good}
	if el, ok := c.entries[key]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
	} else {
		c.entries[key] = c.lru.PushFront(e)
		for c.lru.Len() > c.cfg.MaxEntries {
			old := c.lru.Back()
			c.lru.Remove(old)
			delete(c.entries, old.Value.(*entry).key)
		}
	}
	c.mu.Unlock()
	cl.res, cl.ok = Result{Rules: rules, Unreachable: unreachable, Fetched: true}, true
}
