// Package loader is the loader service: it consumes loader contracts, applies
// per-host politeness and robots.txt, fetches, writes every exchange as WARC
// records into segment objects in the asset store, moves each URL to
// to-be-parsed (or failed) and publishes crawler contracts.
//
// A contract is acked only when every URL it carries has a durable outcome:
// the WARC segment is stored, the transaction index updated and the crawler
// contracts confirmed.
package loader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/robots"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/frontier"
)

// Config configures a loader. Every field is an environment variable.
type Config struct {
	ID            string        `env:"GRIDCRAWL_LOADER_ID"`
	Workers       int           `env:"GRIDCRAWL_LOADER_WORKERS" envDefault:"32"`
	Prefetch      int           `env:"GRIDCRAWL_LOADER_PREFETCH" envDefault:"2048"`
	MaxBodyBytes  int64         `env:"GRIDCRAWL_MAX_BODY_BYTES" envDefault:"8388608"`
	FetchTimeout  time.Duration `env:"GRIDCRAWL_FETCH_TIMEOUT" envDefault:"30s"`
	FetchAttempts int           `env:"GRIDCRAWL_FETCH_ATTEMPTS" envDefault:"3"`
	RetryDelay    time.Duration `env:"GRIDCRAWL_FETCH_RETRY_DELAY" envDefault:"10s"`
	CrawlDelayCap time.Duration `env:"GRIDCRAWL_CRAWL_DELAY_CAP" envDefault:"30s"`
	AllowNets     string        `env:"GRIDCRAWL_ALLOW_NETS"`
	Resolve       string        `env:"GRIDCRAWL_RESOLVE"`
	SegmentBytes  int64         `env:"GRIDCRAWL_WARC_SEGMENT_BYTES" envDefault:"33554432"`
	FlushInterval time.Duration `env:"GRIDCRAWL_WARC_FLUSH_INTERVAL" envDefault:"250ms"`
	Gzip          bool          `env:"GRIDCRAWL_WARC_GZIP" envDefault:"true"`
	RobotsTTL     time.Duration `env:"GRIDCRAWL_ROBOTS_TTL" envDefault:"24h"`
	// GroupQueue bounds the URLs one crawl host group holds in the loader;
	// more are parked in the broker (see park.go).
	GroupQueue int `env:"GRIDCRAWL_LOADER_GROUP_QUEUE" envDefault:"100"`
	// ReportInterval is how often the loader stores its frontier report.
	ReportInterval time.Duration `env:"GRIDCRAWL_FRONTIER_REPORT_INTERVAL" envDefault:"5s"`
}

// Validate checks c and fills in derived defaults.
func (c *Config) Validate() error {
	switch {
	case c.Workers < 1:
		return errors.New("GRIDCRAWL_LOADER_WORKERS must be at least 1")
	case c.Prefetch < 1:
		return errors.New("GRIDCRAWL_LOADER_PREFETCH must be at least 1")
	case c.MaxBodyBytes < 1024:
		return errors.New("GRIDCRAWL_MAX_BODY_BYTES must be at least 1024")
	case c.FetchTimeout <= 0:
		return errors.New("GRIDCRAWL_FETCH_TIMEOUT must be positive")
	case c.FetchAttempts < 1:
		return errors.New("GRIDCRAWL_FETCH_ATTEMPTS must be at least 1")
	case c.SegmentBytes < 1<<16:
		return errors.New("GRIDCRAWL_WARC_SEGMENT_BYTES must be at least 65536")
	case c.FlushInterval <= 0:
		return errors.New("GRIDCRAWL_WARC_FLUSH_INTERVAL must be positive")
	case c.GroupQueue < 1:
		return errors.New("GRIDCRAWL_LOADER_GROUP_QUEUE must be at least 1")
	case c.ReportInterval < 100*time.Millisecond:
		return errors.New("GRIDCRAWL_FRONTIER_REPORT_INTERVAL must be at least 100ms")
	}
	if _, err := netguard.ParseNets(c.AllowNets); err != nil {
		return fmt.Errorf("GRIDCRAWL_ALLOW_NETS: %w", err)
	}
	if _, err := netguard.ParseOverrides(c.Resolve); err != nil {
		return fmt.Errorf("GRIDCRAWL_RESOLVE: %w", err)
	}
	if c.ID == "" {
		h, _ := os.Hostname()
		c.ID = fmt.Sprintf("loader-%s-%d-%s", h, os.Getpid(), strconv.FormatInt(time.Now().UnixNano(), 36))
	}
	return nil
}

// Deps are the loader's backends and frontier settings.
type Deps struct {
	Queue    queue.Queue
	Tx       txindex.Index
	Assets   assets.Store
	Profiles profiles.Store
	// Group computes the crawl host group of URLs whose contract names none.
	Group frontier.Grouper
	// Shards is the number of loader queue shards to consume (see
	// frontier.Config); 0 means 1.
	Shards int
	// Stagger delays the subscription to a random half of the shards. On a
	// broker that gives a single-active-consumer queue to its first
	// subscriber, loaders started together then share the shards instead of
	// the first one owning them all; the others stay standbys for failover.
	Stagger time.Duration
	Logger  *slog.Logger
}

// Loader is the loader service.
type Loader struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	client   *http.Client
	robots   *robots.Cache
	sched    *politeness.Scheduler
	polMu    sync.Mutex
	pols     map[*contracts.Profile]*politeness.DelayPolicy
	budgets  map[string]budgetKey
	versions map[string]int // newest profile version seen per crawl
	costs    map[string]politeness.CostPolicy
	cancels  *frontier.CancelCache
	profs    *frontier.ProfileCache

	segMu   sync.Mutex
	seg     *warc.Segment
	spare   *warc.Segment // a stored segment kept for reuse of its buffers
	pending []*result
	segSeq  int
	flushCh chan struct{}

	fetched    atomic.Int64
	parkedURLs atomic.Int64

	// holders maps a crawl host group to the one unsettled contract whose
	// URLs of the group the loader holds; other contracts park theirs, so a
	// group occupies at most one prefetch slot.
	holdMu  sync.Mutex
	holders map[string]*delivery
}

// New returns a loader; cfg must have been validated.
func New(cfg Config, deps Deps) (*Loader, error) {
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
	l := &Loader{
		cfg:  cfg,
		deps: deps,
		log:  log,
		client: &http.Client{
			Transport:     transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		pols:     map[*contracts.Profile]*politeness.DelayPolicy{},
		budgets:  map[string]budgetKey{},
		versions: map[string]int{},
		holders:  map[string]*delivery{},
		costs:    map[string]politeness.CostPolicy{},
		cancels:  frontier.NewCancelCache(deps.Profiles),
		profs:    frontier.NewProfileCache(deps.Profiles),
		seg:      warc.NewSegment(cfg.Gzip),
		flushCh:  make(chan struct{}, 1),
	}
	// A group is busy for at most one fetch plus its robots.txt fetch.
	sched, err := politeness.New(politeness.Config{BusyTimeout: 2*cfg.FetchTimeout + 30*time.Second, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("create politeness scheduler: %w", err)
	}
	l.sched = sched
	robotsClient := &http.Client{
		Transport: transport,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many robots.txt redirects")
			}
			return nil
		},
	}
	l.robots = robots.NewCache(func(ctx context.Context, robotsURL string) (int, []byte, error) {
		return fetchRobots(ctx, robotsClient, robotsURL)
	}, robots.CacheConfig{TTL: cfg.RobotsTTL})
	return l, nil
}

// Fetched returns the number of fetches made so far.
func (l *Loader) Fetched() int64 { return l.fetched.Load() }

// Run consumes loader_pending until ctx is cancelled. In-flight contracts are
// not acked on shutdown; the queue delivers them again.
func (l *Loader) Run(ctx context.Context) error {
	shards := frontier.ShardQueues(max(l.deps.Shards, 1))
	prefetch := max(1, l.cfg.Prefetch/len(shards))
	rand.Shuffle(len(shards), func(i, j int) { shards[i], shards[j] = shards[j], shards[i] })
	var intake sync.WaitGroup
	consume := func(name string) error {
		deliveries, err := l.deps.Queue.Consume(ctx, name, queue.ConsumeOptions{Prefetch: prefetch})
		if err != nil {
			return fmt.Errorf("consume %s: %w", name, err)
		}
		intake.Go(func() {
			for d := range deliveries {
				l.accept(ctx, d)
			}
		})
		return nil
	}
	first, later := shards, []string(nil)
	if l.deps.Stagger > 0 && len(shards) > 1 {
		first, later = shards[:len(shards)/2], shards[len(shards)/2:]
	}
	for _, name := range first {
		if err := consume(name); err != nil {
			return err
		}
	}
	if len(later) > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(l.deps.Stagger):
			for _, name := range later {
				if err := consume(name); err != nil {
					return err
				}
			}
		}
	}
	var wg sync.WaitGroup
	workCtx, stopWork := context.WithCancel(ctx)
	for range l.cfg.Workers {
		wg.Go(func() { l.work(workCtx) })
	}
	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		l.flushLoop(workCtx)
	}()
	wg.Go(func() { l.reportLoop(workCtx) })
	wg.Go(func() { l.retireLoop(workCtx) })
	intake.Wait()
	stopWork()
	wg.Wait()
	<-flushDone
	return nil
}

// delivery tracks the URLs of one contract until all have an outcome.
type delivery struct {
	d         queue.Delivery
	remaining atomic.Int32
	failed    atomic.Bool
	// settled runs once the delivery is settled (may be nil).
	settled func()
}

func (dl *delivery) done(ctx context.Context, log *slog.Logger, err error) {
	if err != nil {
		dl.failed.Store(true)
	}
	if dl.remaining.Add(-1) != 0 {
		return
	}
	var serr error
	if dl.failed.Load() {
		serr = dl.d.Retry(ctx, 5*time.Second)
	} else {
		serr = dl.d.Ack(ctx)
	}
	if serr != nil && ctx.Err() == nil {
		log.Warn("settle loader contract", "queue", contracts.QueueLoader, "err", serr)
	}
	if dl.settled != nil {
		dl.settled()
	}
}

// task is one URL to fetch.
type task struct {
	dl        *delivery
	crawlID   string
	profile   *contracts.Profile
	inline    *contracts.Profile // as carried by the contract, forwarded as is
	group     string
	url       string
	host      string
	depth     int
	hops      int
	attempt   int
	notBefore time.Time
}

func (l *Loader) accept(ctx context.Context, d queue.Delivery) {
	var c contracts.LoaderContract
	if err := json.Unmarshal(d.Body(), &c); err != nil {
		l.deadLetter(ctx, d, "undecodable loader contract: "+err.Error())
		return
	}
	if c.V != contracts.Version || c.CrawlID == "" || len(c.URLs) == 0 {
		l.deadLetter(ctx, d, fmt.Sprintf("invalid loader contract: v=%d crawl_id=%q chg=%q urls=%d", c.V, c.CrawlID, c.Group, len(c.URLs)))
		return
	}
	p, err := l.profs.Resolve(ctx, c.CrawlID, c.Profile)
	if errors.Is(err, profiles.ErrNotFound) {
		l.deadLetter(ctx, d, "loader contract of unknown crawl "+c.CrawlID)
		return
	}
	if err != nil {
		l.log.Warn("resolve profile", "crawl_id", c.CrawlID, "err", err)
		if err := d.Retry(ctx, frontier.RetryDelay(d.Attempt())); err != nil && ctx.Err() == nil {
			l.log.Error("retry loader contract", "crawl_id", c.CrawlID, "err", err)
		}
		return
	}
	dl := &delivery{d: d}
	dl.remaining.Store(int32(len(c.URLs)))
	var keep []*task
	park := &parked{c: &c}
	added := map[string]int{}
	for _, u := range c.URLs {
		host := u.URL
		if pu, err := url.Parse(u.URL); err == nil {
			host = urlnorm.Host(pu)
		}
		g := c.GroupOf(u)
		if g == "" {
			g = l.group(host)
		}
		t := &task{dl: dl, crawlID: c.CrawlID, profile: p, inline: c.Profile, group: g, url: u.URL, host: host, depth: u.Depth, hops: u.Hops}
		l.applyBudget(c.CrawlID, g, host, p)
		queued, delay := l.sched.Queued(g)
		l.holdMu.Lock()
		h := l.holders[g]
		l.holdMu.Unlock()
		// Park when the group holds all it may, or when another contract
		// already holds its URLs and these would wait long behind them: only
		// slow groups are parked, fast ones keep their URLs in memory.
		wait := time.Duration(queued+added[g]) * delay
		if queued+added[g] >= l.groupLimit(delay) || (h != nil && h != dl && wait > holdWait) {
			park.add(t, queued+added[g], delay)
			continue
		}
		added[g]++
		keep = append(keep, t)
	}
	if len(added) > 0 {
		l.holdMu.Lock()
		for g := range added {
			l.holders[g] = dl
		}
		l.holdMu.Unlock()
		dl.settled = func() {
			l.holdMu.Lock()
			for g := range added {
				if l.holders[g] == dl {
					delete(l.holders, g)
				}
			}
			l.holdMu.Unlock()
		}
	}
	if !l.park(ctx, park) {
		keep = append(keep, park.tasks...) // could not park: hold them after all
		park.tasks = nil
	}
	for _, t := range keep {
		l.schedule(ctx, t)
	}
	for range park.tasks {
		dl.done(ctx, l.log, nil)
	}
}

// Parked returns the number of URLs parked in the broker so far.
func (l *Loader) Parked() int64 { return l.parkedURLs.Load() }

func (l *Loader) group(host string) string {
	if l.deps.Group != nil {
		return l.deps.Group(host)
	}
	return frontier.HostGrouper(host)
}

// schedule hands t to the politeness scheduler.
func (l *Loader) schedule(ctx context.Context, t *task) {
	it := politeness.Item{URL: t.url, Host: t.host, Group: t.group, NotBefore: t.notBefore, Payload: t, Cost: l.costPolicy(t.profile)}
	if err := l.sched.Add(it); err != nil {
		t.dl.done(ctx, l.log, fmt.Errorf("schedule %s: %w", t.url, err))
	}
}

// policy returns the delay policy of a crawl's profile.
func (l *Loader) policy(p *contracts.Profile) *politeness.DelayPolicy {
	l.polMu.Lock()
	defer l.polMu.Unlock()
	if pol, ok := l.pols[p]; ok {
		return pol
	}
	pol := politeness.DelayPolicyFor(p.Politeness)
	pol.CrawlDelayCap = l.cfg.CrawlDelayCap
	if len(l.pols) > 1024 {
		clear(l.pols)
	}
	l.pols[p] = &pol
	return &pol
}

func (l *Loader) deadLetter(ctx context.Context, d queue.Delivery, reason string) {
	l.log.Warn("dead-letter contract", "queue", contracts.QueueLoader, "reason", reason)
	if err := d.DeadLetter(ctx, reason); err != nil {
		l.log.Error("dead-letter contract", "queue", contracts.QueueLoader, "err", err)
	}
}

func (l *Loader) work(ctx context.Context) {
	for {
		lease, err := l.sched.Next(ctx)
		if err != nil {
			return
		}
		t := lease.Item.Payload.(*task)
		o := l.process(ctx, t)
		o.Policy = l.policy(t.profile)
		l.sched.Release(lease, o)
	}
}

// result is the outcome of one task, waiting for its segment to be flushed.
type result struct {
	t      *task
	status contracts.Status // ToBeParsed or Failed; "" means nothing to record
	reason string
	page   contracts.CrawlerPage
	inSeg  bool // page.Asset.Offset/Length refer to the current segment
	skip   bool // no transition: only settle (and maybe republish)
	repub  *contracts.CrawlerPage
}

// process handles one task and returns what the politeness scheduler needs
// to know of it. A task that fetched nothing reports a zero Duration.
func (l *Loader) process(ctx context.Context, t *task) politeness.Outcome {
	none := politeness.Outcome{Unfetched: true} // nothing fetched: no cost, no delay
	switch l.cancels.State(ctx, t.crawlID) {
	case contracts.CrawlCancelled:
		l.finish(&result{t: t, status: contracts.Failed, reason: "cancelled"})
		return none
	case contracts.CrawlPaused:
		// Hold the URL until the crawl resumes; its contract stays unacked.
		t.notBefore = time.Now().Add(time.Second)
		l.schedule(ctx, t)
		return politeness.Outcome{Unfetched: true}
	}
	rec, err := l.deps.Tx.Get(ctx, txindex.Key(t.crawlID, t.url))
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("get record", "url", t.url, "crawl_id", t.crawlID, "err", err)
		}
		t.dl.done(ctx, l.log, err)
		return none
	}
	switch {
	case rec.Status == contracts.ToBeParsed && rec.Asset.Key != "":
		// Fetched before but the crawler contract may be lost: publish again.
		l.finish(&result{t: t, skip: true, repub: &contracts.CrawlerPage{URL: t.url, Depth: rec.Depth, Hops: rec.Hops, Asset: rec.Asset, StatusCode: rec.HTTPStatus, FetchedAt: rec.StatusTime}})
		return none
	case rec.Status != contracts.ToBeLoaded:
		l.finish(&result{t: t, skip: true})
		return none
	}
	u, err := url.Parse(t.url)
	if err != nil {
		l.finish(&result{t: t, status: contracts.Failed, reason: "invalid url"})
		return none
	}
	var o politeness.Outcome
	if t.profile.Politeness.Robots != contracts.RobotsIgnore {
		rules, err := l.robots.Get(ctx, u.Scheme, urlnorm.HostPort(u))
		if err != nil {
			t.dl.done(ctx, l.log, err)
			return none
		}
		if cd, ok := rules.CrawlDelay(t.profile.UserAgent); ok {
			o.CrawlDelay = cd // a long Crawl-delay slows the group; it never fails URLs
		}
		if !rules.Allowed(t.profile.UserAgent, u.RequestURI()) {
			l.finish(&result{t: t, status: contracts.Failed, reason: "robots.txt disallowed"})
			return o
		}
	}
	start := time.Now()
	ex, err := l.fetch(ctx, t, u)
	o.Duration = time.Since(start)
	l.fetched.Add(1)
	if err != nil {
		if ctx.Err() != nil {
			t.dl.done(ctx, l.log, ctx.Err())
			return none
		}
		o.Err, o.ErrKind = err, politeness.ClassifyError(err)
		if errors.Is(err, netguard.ErrForbidden) {
			l.finish(&result{t: t, status: contracts.Failed, reason: "address not allowed"})
			return o
		}
		if t.attempt+1 < l.cfg.FetchAttempts {
			l.retry(ctx, t)
			return o
		}
		l.finish(&result{t: t, status: contracts.Failed, reason: "fetch: " + err.Error()})
		return o
	}
	o.Status, o.RetryAfter = ex.status, ex.retryAfter
	if (ex.status == http.StatusTooManyRequests || ex.status == http.StatusServiceUnavailable) && t.attempt+1 < l.cfg.FetchAttempts {
		l.retry(ctx, t)
		return o
	}
	r := &result{t: t, inSeg: true, page: contracts.CrawlerPage{
		URL: t.url, Depth: t.depth, Hops: t.hops, StatusCode: ex.status, ContentType: ex.contentType, FetchedAt: ex.date,
	}}
	switch {
	case ex.status >= 200 && ex.status < 400:
		r.status = contracts.ToBeParsed
	default:
		r.status, r.reason = contracts.Failed, fmt.Sprintf("http %d", ex.status)
	}
	l.appendExchange(r, ex)
	return o
}

// retry schedules t again after a growing delay; its group's own backoff
// (from the outcome) slows every URL of the group meanwhile.
func (l *Loader) retry(ctx context.Context, t *task) {
	t.attempt++
	t.notBefore = time.Now().Add(l.cfg.RetryDelay * time.Duration(t.attempt))
	l.schedule(ctx, t)
}

// finish queues a result that needs no WARC record.
func (l *Loader) finish(r *result) {
	l.segMu.Lock()
	l.pending = append(l.pending, r)
	l.segMu.Unlock()
}

func (l *Loader) appendExchange(r *result, ex *exchange) {
	l.segMu.Lock()
	if l.seg.Count() == 0 {
		_, _, _ = l.seg.Append(warc.NewWarcinfoRecord(time.Now(), map[string]string{"software": "gridcrawl", "format": "WARC File Format 1.1", "operator-loader": l.cfg.ID}))
	}
	req := warc.NewRequestRecord(r.t.url, ex.date, ex.request)
	resp := warc.NewResponseRecord(r.t.url, ex.date, ex.ip, ex.response, ex.truncated, warc.RecordID(req))
	_, _, err1 := l.seg.Append(req)
	off, n, err2 := l.seg.Append(resp)
	if err := errors.Join(err1, err2); err != nil {
		r.inSeg = false
		r.status, r.reason = contracts.Failed, "warc: "+err.Error()
	} else {
		r.page.Asset = contracts.AssetRef{Offset: off, Length: n}
	}
	l.pending = append(l.pending, r)
	full := l.seg.Len() >= l.cfg.SegmentBytes
	l.segMu.Unlock()
	if full { // store it now rather than at the next tick
		select {
		case l.flushCh <- struct{}{}:
		default:
		}
	}
}

// flushLoop stores the current segment and records its results, either when
// it is full or every FlushInterval.
func (l *Loader) flushLoop(ctx context.Context) {
	tick := time.NewTicker(l.cfg.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-l.flushCh:
		}
		l.flush(ctx)
	}
}

func (l *Loader) flush(ctx context.Context) {
	l.segMu.Lock()
	if len(l.pending) == 0 {
		l.segMu.Unlock()
		return
	}
	seg, pending := l.seg, l.pending
	next := l.spare
	if next == nil {
		next = warc.NewSegment(l.cfg.Gzip)
	}
	l.seg, l.spare, l.pending = next, nil, nil
	l.segSeq++
	seq := l.segSeq
	l.segMu.Unlock()

	var err error
	if seg.Count() > 0 {
		now := time.Now().UTC()
		key := fmt.Sprintf("warc/%s/%s-%06d.warc", now.Format("2006/01/02"), l.cfg.ID, seq)
		ctype := "application/warc"
		if l.cfg.Gzip {
			key += ".gz"
			ctype = "application/warc+gzip"
		}
		err = l.deps.Assets.Put(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len(), ctype)
		if err != nil {
			err = fmt.Errorf("put segment %q: %w", key, err)
		}
		for _, r := range pending {
			if r.inSeg {
				r.page.Asset.Key = key
			}
		}
	}
	if err == nil {
		err = l.record(ctx, pending)
	}
	if seg.Len() <= 4*l.cfg.SegmentBytes {
		seg.Reset()
		l.segMu.Lock()
		l.spare = seg
		l.segMu.Unlock()
	}
	if err != nil && ctx.Err() == nil {
		l.log.Error("flush segment", "err", err)
	}
	for _, r := range pending {
		r.t.dl.done(ctx, l.log, err)
	}
}

// record applies the transitions of pending and publishes crawler contracts
// for the pages that moved to to-be-parsed.
func (l *Loader) record(ctx context.Context, pending []*result) error {
	var ts []txindex.Transition
	var idx []int
	for i, r := range pending {
		if r.skip {
			continue
		}
		tr := txindex.Transition{Key: txindex.Key(r.t.crawlID, r.t.url), From: contracts.ToBeLoaded, To: r.status, Error: r.reason, HTTPStatus: r.page.StatusCode}
		if r.inSeg {
			a := r.page.Asset
			tr.Asset = &a
		}
		ts = append(ts, tr)
		idx = append(idx, i)
	}
	applied, err := l.deps.Tx.Transition(ctx, ts)
	if err != nil {
		return fmt.Errorf("record fetch outcomes: %w", err)
	}
	type batch struct {
		inline *contracts.Profile
		pages  []contracts.CrawlerPage
	}
	byCrawl := map[string]*batch{}
	var order []string
	add := func(r *result, p contracts.CrawlerPage) {
		b := byCrawl[r.t.crawlID]
		if b == nil {
			b = &batch{inline: r.t.inline}
			byCrawl[r.t.crawlID] = b
			order = append(order, r.t.crawlID)
		}
		b.pages = append(b.pages, p)
	}
	for j, i := range idx {
		if applied[j] && pending[i].status == contracts.ToBeParsed {
			add(pending[i], pending[i].page)
		}
	}
	for _, r := range pending {
		if r.repub != nil {
			add(r, *r.repub)
		}
	}
	var msgs []queue.Message
	for _, id := range order {
		b := byCrawl[id]
		m, err := frontier.CrawlerMessages(id, b.inline, b.pages, false)
		if err != nil {
			return err
		}
		msgs = append(msgs, m...)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := l.deps.Queue.Publish(ctx, contracts.QueueCrawler, msgs...); err != nil {
		return fmt.Errorf("publish crawler contracts: %w", err)
	}
	return nil
}
