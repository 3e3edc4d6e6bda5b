package queueing

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/bytebudget"
	"github.com/gridcrawl/gridcrawl/pkg/frontier"
	"github.com/gridcrawl/gridcrawl/pkg/lru"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

// delivery tracks the URLs of one contract until all have an outcome.
type delivery struct {
	// parts settles d, a contract of the broker, once each of its URLs
	// has an outcome (consume.Parts).
	d     queue.Delivery
	parts *consume.Parts
	// front, when set, is the frontier store that holds the delivery's one
	// URL as entry (Config.FrontierDir); d and parts are nil. Its outcome
	// removes the entry (filed.go), or files it again a little later
	// (later while gate finds a backend down), and refill asks for its
	// group's window to be filled again.
	gate   *outage.Gate
	front  *frontier.Store
	entry  frontier.Entry
	refill func()
}

// done reports the outcome of one of the delivery's URLs; the last one
// settles the delivery through the consumer shell: acked if every URL's
// outcome is durable, otherwise retried (postponed, when a backend is
// down).
func (dl *delivery) done(ctx context.Context, log *slog.Logger, err error) {
	if dl.front != nil {
		dl.settleFiled(ctx, log, err)
		return
	}
	dl.parts.Done(ctx, err)
}

// drop gives up one of the delivery's URLs without an outcome, because
// the delivery was taken back by the queue (queue.Lost): the message is
// delivered again, maybe to another loader, and cannot be settled here.
// The last URL given up or done releases what the delivery held.
func (dl *delivery) drop() {
	if dl.front != nil {
		_ = dl.front.Release([]frontier.Entry{dl.entry})
		dl.refill()
		return
	}
	dl.parts.Drop()
}

// Task is one URL to fetch: made by the frontier, fetched by the fetcher,
// recorded by the recorder, and ended through the frontier (Settle, Drop).
type Task struct {
	dl        *delivery
	CrawlID   string
	Profile   *contracts.Profile
	Inline    *contracts.Profile // as carried by the contract, forwarded as is
	Group     string
	Shard     int
	URL       string
	Host      string
	Depth     int
	Hops      int
	Attempt   int
	notBefore time.Time
	// prepaid: the task's group was charged for it by the lease that
	// fetched robots.txt in its stead, so its next lease costs nothing.
	prepaid bool
	// Sitemap is the record's sitemap kind (txindex.SitemapProbe,
	// txindex.SitemapFile), read at admission; RobotsSitemaps are the
	// Sitemap: lines of the origin's robots.txt, handed with a probe.
	Sitemap        string
	RobotsSitemaps []string
	// Prev is the record as admitted, kept for a continuous crawl (profile
	// recrawl): what its last fetch stored decides the conditional request
	// and whether this fetch found the page changed.
	Prev *txindex.Record
	// Known is the record as the contract's snapshot gave it (and the
	// store learned it), read at admission instead of the store; nil when
	// the contract carried none or was delivered before.
	Known *txindex.Record
	// BodyShare is the share of the body budget the fetched body holds,
	// from its read until the worker has recorded it.
	BodyShare *bytebudget.Reader
}

// Delivery returns the broker's delivery of t's contract; nil for a URL
// filed in a frontier store.
func (t *Task) Delivery() queue.Delivery {
	if t.dl == nil {
		return nil
	}
	return t.dl.d
}

// claimTTL bounds a claim, should its release ever be missed: a later
// duplicate is then fetched again rather than skipped for good.
const claimTTL = 10 * time.Minute

// claims maps the record key of each URL being fetched to its task, from
// the task's admission to the settlement of its outcome.
type claims struct {
	mu sync.Mutex
	by *lru.Cache[string, *Task]
}

func newClaims() *claims { return &claims{by: lru.New[string, *Task](100000, claimTTL)} }

// claim makes t the task that fetches its URL, unless another task is.
func (c *claims) claim(t *Task) bool {
	key := txindex.Key(t.CrawlID, t.URL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if owner, ok := c.by.Get(key); ok && owner != t {
		return false
	}
	c.by.Put(key, t)
	return true
}

// release ends t's claim, if it holds one.
func (c *claims) release(t *Task) {
	key := txindex.Key(t.CrawlID, t.URL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if owner, ok := c.by.Get(key); ok && owner == t {
		c.by.Delete(key)
	}
}
