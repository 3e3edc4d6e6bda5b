// Package fetcher is the loader's fetcher: it turns one leased task into
// exactly one outcome (Fetch), with at most one request per lease (the page
// or its origin's robots.txt), through the network guard (pkg/netguard);
// it applies robots.txt (a cache per origin), makes a continuous crawl's
// request conditional, and renders the pages a profile renders in a
// headless browser, whose requests it makes itself. It records nothing:
// the exchanges it makes go back in the outcome, and those of a rendered
// page's requests to Deps.Archive.
package fetcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/browser"
	"github.com/gridcrawl/gridcrawl/pkg/bytebudget"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/robots"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/crawlcache"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Config is what the fetcher takes of the loader's configuration (the
// loader's Config documents each setting).
type Config struct {
	MaxBodyBytes        int64
	BodyBudget          int64
	RecoveryLease       time.Duration
	FetchTimeout        time.Duration
	FetchAttempts       int
	AllowNets           string
	Resolve             string
	RobotsTTL           time.Duration
	Chromium            string
	RenderTabs          int
	RenderTimeout       time.Duration
	RenderIdle          time.Duration
	RenderMaxRequests   int
	RenderMaxBytes      int64
	RenderGroupRequests int
	RenderCacheBytes    int64
	BrowserRestartPages int
	BrowserMaxMemory    int64
	BrowserNoSandbox    bool
	BrowserJSHeapMB     int
}

// Tasks is what the fetcher asks of the frontier that leased its tasks.
type Tasks interface {
	// Lost reports whether t's contract or shard went to another loader.
	Lost(t *queueing.Task) bool
	// Claim makes t the task that fetches its URL, unless another does.
	Claim(t *queueing.Task) bool
	// Group is the crawl host group of host.
	Group(host string) string
	// Embedded counts a rendered page's request to group.
	Embedded(group string, bytes int64)
}

// Records is what the fetcher reads of the transaction index: a URL's
// record, when the contract's snapshot is not to be trusted. A store that
// also keeps txindex.Revisions answers for the versions it wrote.
type Records interface {
	Get(ctx context.Context, key string) (txindex.Record, error)
}

// Deps are the fetcher's dependencies.
type Deps struct {
	Tx Records
	// Assets holds the stored responses a continuous crawl's revisit
	// records refer to.
	Assets assets.Store
	// States tells whether a crawl is paused or cancelled.
	States *crawlcache.States
	Tasks  Tasks
	// Archive takes an exchange that settles nothing (a rendered page's
	// request) for the WARC segment.
	Archive func(ex *Exchange, crawlID string)
	Metrics *metrics.Loader
	Logger  *slog.Logger
}

// Fetcher fetches the loader's tasks; it is safe for concurrent use.
type Fetcher struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	met  *metrics.Loader

	client  *http.Client
	robots  *robots.Cache
	cancels *crawlcache.States
	// bodies bounds the memory of bodies being read (Config.BodyBudget).
	bodies  *bytebudget.Budget
	fetched atomic.Int64

	// embedClient makes the requests of rendered pages (render.go);
	// browser is started with the first page to render.
	embedClient *http.Client
	embedCache  *embedCache
	browserMu   sync.Mutex
	browser     *browser.Browser
	browserErr  error
	renders     renderCounts
}

// New returns a fetcher.
func New(cfg Config, deps Deps) (*Fetcher, error) {
	allow, err := netguard.ParseNets(cfg.AllowNets)
	if err != nil {
		return nil, fmt.Errorf("parse allowed nets: %w", err)
	}
	overrides, err := netguard.ParseOverrides(cfg.Resolve)
	if err != nil {
		return nil, fmt.Errorf("parse resolve overrides: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dialer := &netguard.Dialer{Allow: allow, Overrides: overrides, Timeout: 10 * time.Second}
	transport := &http.Transport{
		DialContext:            dialer.DialContext,
		MaxIdleConnsPerHost:    2,
		MaxIdleConns:           1024,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  cfg.FetchTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
		ForceAttemptHTTP2:      true,
	}
	met := deps.Metrics
	f := &Fetcher{
		cfg:  cfg,
		deps: deps,
		log:  log,
		met:  met,
		client: &http.Client{
			Transport:     &countingTransport{base: transport, kind: metrics.KindPage, met: met},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		cancels: deps.States,
		bodies:  bytebudget.New(max(cfg.BodyBudget, cfg.MaxBodyBytes+1), freeBodyBytes),
	}
	f.embedCache = newEmbedCache(cfg.RenderCacheBytes, 10*time.Minute)
	f.embedClient = &http.Client{
		Transport:     &countingTransport{base: transport, kind: metrics.KindEmbed, met: met},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, // the browser follows
	}
	robotsClient := &http.Client{
		Transport: &countingTransport{base: transport, kind: metrics.KindRobots, met: met},
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many robots.txt redirects")
			}
			return nil
		},
	}
	f.robots = robots.NewCache(func(ctx context.Context, robotsURL string) (int, []byte, error) {
		return f.fetchRobots(ctx, robotsClient, robotsURL)
	}, robots.CacheConfig{TTL: cfg.RobotsTTL})
	return f, nil
}

// Fetched returns the number of requests made so far, robots.txt included.
func (f *Fetcher) Fetched() int64 { return f.fetched.Load() }

// countingTransport counts the requests that went out, by response code,
// for gridcrawl_loader_requests_total: one per request the server saw
// (redirects followed for robots.txt included). A dial refused by the
// address guard sent nothing and is not counted.
type countingTransport struct {
	base http.RoundTripper
	kind metrics.Kind
	met  *metrics.Loader
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	switch {
	case err == nil:
		c.met.Request(c.kind, resp.StatusCode)
	case !errors.Is(err, netguard.ErrForbidden):
		c.met.Request(c.kind, 0)
	}
	return resp, err
}
