package fetcher

import (
	"container/list"
	"strings"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/browser"
)

// embedCache keeps the answers to rendered pages' requests for shared
// resources (scripts, styles, images: see sharedType) for a while, per
// crawl, so that what every page of a site loads is requested and archived
// once, not once per page: a browser's cache, bounded
// in bytes. Only an answer to a GET with a status RFC 9111 lets caches keep
// by default (200, 404...), without Cache-Control no-store, of at most
// maxEntry bytes, is kept; replay finds the first copy by its URL.
type embedCache struct {
	maxBytes, maxEntry int64
	ttl                time.Duration

	mu    sync.Mutex
	bytes int64
	order *list.List // front: most recently used
	items map[string]*list.Element
}

type embedEntry struct {
	key  string
	resp *browser.Response
	at   time.Time
	size int64
}

func newEmbedCache(maxBytes int64, ttl time.Duration) *embedCache {
	return &embedCache{maxBytes: maxBytes, maxEntry: max(maxBytes/16, 1), ttl: ttl, order: list.New(), items: map[string]*list.Element{}}
}

func embedKey(crawlID, url string) string { return crawlID + " " + url }

// get returns the kept answer to a GET of url in crawl crawlID.
func (c *embedCache) get(crawlID, url string) (*browser.Response, bool) {
	if c == nil || c.maxBytes <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[embedKey(crawlID, url)]
	if !ok {
		return nil, false
	}
	e := el.Value.(*embedEntry)
	if time.Since(e.at) > c.ttl {
		c.removeLocked(el)
		return nil, false
	}
	c.order.MoveToFront(el)
	return e.resp, true
}

// put keeps r, the answer to a GET of url in crawl crawlID, if it may be
// kept.
func (c *embedCache) put(crawlID, url string, r *browser.Response) {
	if c == nil || c.maxBytes <= 0 || !heuristicallyCacheable(r.Status) ||
		strings.Contains(strings.ToLower(r.Header.Get("Cache-Control")), "no-store") {
		return
	}
	size := int64(len(r.Body)) + 512
	if size > c.maxEntry {
		return
	}
	key := embedKey(crawlID, url)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeLocked(el)
	}
	c.items[key] = c.order.PushFront(&embedEntry{key: key, resp: r, at: time.Now(), size: size})
	c.bytes += size
	for c.bytes > c.maxBytes {
		c.removeLocked(c.order.Back())
	}
}

func (c *embedCache) removeLocked(el *list.Element) {
	e := el.Value.(*embedEntry)
	c.order.Remove(el)
	delete(c.items, e.key)
	c.bytes -= e.size
}

// heuristicallyCacheable reports the statuses RFC 9111 (section 4.2.2)
// lets a cache keep without explicit freshness.
func heuristicallyCacheable(status int) bool {
	switch status {
	case 200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501:
		return true
	}
	return false
}
