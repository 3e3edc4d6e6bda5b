// Package lru is a bounded, concurrency-safe cache that evicts the least
// recently used entry when full, with an optional time to live. Services use
// it wherever they remember something per crawl, host or group that could
// otherwise grow without bound (profiles, crawl states, scopes, groupings,
// delay policies).
package lru

import (
	"container/list"
	"sync"
	"time"
)

// Cache maps keys to values. At most Size entries are kept; an entry older
// than TTL (when TTL > 0) reads as absent. The zero value is not usable: use
// New. All methods are safe for concurrent use.
type Cache[K comparable, V any] struct {
	size int
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	order *list.List // front: most recently used
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key K
	val V
	at  time.Time
}

// New returns a cache of at most size entries (at least 1) whose entries
// expire after ttl; ttl <= 0 means they never expire.
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	return &Cache[K, V]{size: max(size, 1), ttl: ttl, now: time.Now, order: list.New(), items: map[K]*list.Element{}}
}

// Get returns the value of key and whether it is present and fresh.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*entry[K, V])
	if c.ttl > 0 && c.now().Sub(e.at) >= c.ttl {
		c.order.Remove(el)
		delete(c.items, key)
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.val, true
}

// Put stores val under key, evicting the least recently used entry when the
// cache is full.
func (c *Cache[K, V]) Put(key K, val V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*entry[K, V])
		e.val, e.at = val, c.now()
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry[K, V]).key)
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, val: val, at: c.now()})
}

// GetOrLoad returns the cached value of key, or calls load, caches its value
// when it returns no error, and returns it. Concurrent misses of one key may
// each call load.
func (c *Cache[K, V]) GetOrLoad(key K, load func() (V, error)) (V, error) {
	if v, ok := c.Get(key); ok {
		return v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.Put(key, v)
	return v, nil
}

// Delete removes key.
func (c *Cache[K, V]) Delete(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.Remove(el)
		delete(c.items, key)
	}
}

// Len returns the number of entries, fresh or not.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
