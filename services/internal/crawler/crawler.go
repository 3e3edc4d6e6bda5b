// Package crawler is the crawler service, the second stage of the pipeline.
// For each crawler contract it runs the loop of YaCy Grid's crawler
// (https://github.com/yacy/yacy_grid_crawler) in its order: check the page
// is to-be-parsed, load its WARC record from the asset store, parse it into
// a document, publish the document to index_pending, extract and filter the
// links with the profile, write the unseen ones as to-be-loaded and publish
// their loader contracts, and only then move the page to to-be-indexed. The
// consumer shell (services/internal/consume) decodes and checks the
// contracts and settles them by the crawler's verdict.
//
// A page is parsed at its record's depth, not its contract's: enqueueing
// lowers the depth of a URL found again on a shorter path, and sends a page
// already parsed back to to-be-parsed with a relink contract, so that its
// links are followed as deep as their shortest path allows. A page lowered
// while it is being parsed keeps its status (the transition is conditioned
// on the depth) and is parsed again.
package crawler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/bytebudget"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/extract"
	"github.com/gridcrawl/gridcrawl/pkg/gcnudge"
	"github.com/gridcrawl/gridcrawl/pkg/httpbody"
	"github.com/gridcrawl/gridcrawl/pkg/lru"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/yacydoc"
	"github.com/gridcrawl/gridcrawl/services/internal/consume"
	"github.com/gridcrawl/gridcrawl/services/internal/crawlcache"
	"github.com/gridcrawl/gridcrawl/services/internal/enqueue"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
	"github.com/gridcrawl/gridcrawl/services/internal/scope"
)

// linkBytesPerPageByte is how many bytes of resolved links and images one
// byte of page may bring.
const linkBytesPerPageByte = 4

// Config configures a crawler. Every field is an environment variable.
type Config struct {
	Workers      int   `env:"GRIDCRAWL_CRAWLER_WORKERS" envDefault:"4"`
	Prefetch     int   `env:"GRIDCRAWL_CRAWLER_PREFETCH" envDefault:"16"`
	MaxBodyBytes int64 `env:"GRIDCRAWL_MAX_BODY_BYTES" envDefault:"8388608"`
	// DecodeBudget bounds the decompressed bytes the workers hold together
	// beyond the first 256 KiB of each body (raised to the largest record
	// block): compression bombs decoded by every worker at once, and WARC
	// record blocks over 1 MiB read by every worker at once, take turns.
	DecodeBudget int64 `env:"GRIDCRAWL_CRAWLER_DECODE_BUDGET" envDefault:"16777216"`
	MaxTextBytes int   `env:"GRIDCRAWL_MAX_TEXT_BYTES" envDefault:"1048576"`
	MaxLinks     int   `env:"GRIDCRAWL_MAX_LINKS" envDefault:"5000"`
	MaxRedirects int   `env:"GRIDCRAWL_MAX_REDIRECTS" envDefault:"10"`
	// PublishGather is how long a worker's new links wait for those of the
	// other workers, so that they reach each loader queue shard in one
	// contract (broker messages per page); 0 publishes each contract's at
	// once.
	PublishGather time.Duration `env:"GRIDCRAWL_CRAWLER_PUBLISH_GATHER" envDefault:"50ms"`
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.Workers < 1:
		return errors.New("GRIDCRAWL_CRAWLER_WORKERS must be at least 1")
	case c.Prefetch < 1:
		return errors.New("GRIDCRAWL_CRAWLER_PREFETCH must be at least 1")
	case c.DecodeBudget < 1<<20:
		return errors.New("GRIDCRAWL_CRAWLER_DECODE_BUDGET must be at least 1048576")
	case c.MaxBodyBytes < 1024:
		return errors.New("GRIDCRAWL_MAX_BODY_BYTES must be at least 1024")
	case c.MaxTextBytes < 1024:
		return errors.New("GRIDCRAWL_MAX_TEXT_BYTES must be at least 1024")
	case c.MaxLinks < 1:
		return errors.New("GRIDCRAWL_MAX_LINKS must be at least 1")
	case c.MaxRedirects < 0:
		return errors.New("GRIDCRAWL_MAX_REDIRECTS must not be negative")
	}
	return nil
}

// Deps are the crawler's backends.
type Deps struct {
	Queue  queue.Queue
	Tx     txindex.Pipeline
	Assets assets.Store
	// Digests resolves a revisit record whose contract names no original
	// (a page parsed again from its transaction record) to the response
	// that holds its payload; nil: such a page fails with the reason.
	Digests  digests.Index
	Profiles profiles.Store
	Group    routing.Grouper
	// Shards is the number of loader queue shards; 0 means 1.
	Shards int
	// Handoff, when not nil, holds responses a loader in the same process
	// has just stored; the crawler takes a page's response from it instead
	// of reading its WARC record back. Nil: every record is read.
	Handoff *Handoff
	Logger  *slog.Logger
	// Gate tells backend outages from failed work (nil: every failure
	// counts as the work's): a contract that failed while a backend is down
	// is postponed without counting an attempt, and the worker waits for
	// the backend before it takes another.
	Gate *outage.Gate
	// Metrics receives the crawler's metrics; nil: registered nowhere.
	Metrics *metrics.Registry
}

// Crawler is the crawler service.
type Crawler struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	enq     *enqueue.Enqueuer
	cancels *crawlcache.States
	profs   *crawlcache.Profiles

	scopes *lru.Cache[string, *scope.Rules] // by crawl id
	met    *metrics.Crawler
	// decodes bounds the memory of decompressed bodies (Config.DecodeBudget).
	decodes *bytebudget.Budget
	shell   *consume.Shell[contracts.CrawlerContract]
}

// New returns a crawler; cfg must have been validated.
func New(cfg Config, deps Deps) *Crawler {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Crawler{
		cfg: cfg, deps: deps, log: log,
		enq:     &enqueue.Enqueuer{Tx: deps.Tx, Queue: deps.Queue, Group: deps.Group, Shards: deps.Shards, Gather: cfg.PublishGather},
		cancels: crawlcache.NewStates(deps.Profiles),
		profs:   crawlcache.NewProfiles(deps.Profiles),
		scopes:  lru.New[string, *scope.Rules](1000, 0),
		met:     deps.Metrics.Crawler(),
		decodes: bytebudget.New(max(cfg.DecodeBudget, cfg.MaxBodyBytes+1<<20+1), 256<<10), // a record block fits too
		shell: consume.New(consume.Config[contracts.CrawlerContract]{Queue: deps.Queue, QueueName: contracts.QueueCrawler,
			Kind: "crawler", Prefetch: cfg.Prefetch, Workers: cfg.Workers, Validate: validContract,
			Version: func(k *contracts.CrawlerContract) int { return k.V }, Gate: deps.Gate, Logger: log}),
	}
}

// Run consumes crawler_pending until ctx is cancelled.
func (c *Crawler) Run(ctx context.Context) error {
	// While it runs, the loader of the process waits for it when the
	// handoff is full; once it stops, nobody would make room.
	detach := c.deps.Handoff.Attach()
	defer detach()
	if err := c.shell.Run(ctx, c.handle); err != nil {
		return err
	}
	c.log.Info("shutdown complete")
	return nil
}

// validContract checks the fields every crawler contract needs.
func validContract(k *contracts.CrawlerContract) error {
	switch {
	case k.CrawlID == "":
		return errors.New("no crawl_id")
	case len(k.Pages) == 0:
		return fmt.Errorf("crawl_id=%q: no pages", k.CrawlID)
	case k.Reindex && k.Relink:
		return fmt.Errorf("crawl_id=%q: both reindex and relink", k.CrawlID)
	}
	return nil
}

// handle processes one crawler contract for the consumer shell.
func (c *Crawler) handle(ctx context.Context, d queue.Delivery, k *contracts.CrawlerContract) consume.Verdict {
	p, err := c.profs.Resolve(ctx, k.CrawlID, k.Profile)
	if errors.Is(err, profiles.ErrNotFound) {
		return consume.DeadLetter("crawler contract of unknown crawl " + k.CrawlID)
	}
	if err != nil {
		c.log.Warn("resolve profile", "crawl_id", k.CrawlID, "err", err)
		return consume.Retry(err)
	}
	scope, err := c.scope(k.CrawlID, *p)
	if err != nil {
		return consume.DeadLetter("invalid profile in crawler contract: " + err.Error())
	}
	if queue.SeenBefore(d) {
		// Delivered before (or a copy sent again): its pages may have
		// been parsed since their snapshots were taken, so their records
		// are read.
		for i := range k.Pages {
			k.Pages[i].Snapshot = nil
		}
	}
	if err := c.Process(ctx, *k, *p, scope); err != nil {
		if ctx.Err() == nil { // shutting down: the delivery goes back to the queue
			c.log.Warn("process crawler contract", "crawl_id", k.CrawlID, "attempt", d.Attempt(), "err", err)
		}
		return consume.Retry(err)
	}
	return consume.Ack()
}

func (c *Crawler) scope(crawlID string, p contracts.Profile) (*scope.Rules, error) {
	return c.scopes.GetOrLoad(crawlID, func() (*scope.Rules, error) { return scope.New(p, c.cfg.MaxRedirects) })
}

// parsed is the crawler's view of one page.
type parsed struct {
	page   contracts.CrawlerPage
	key    string
	doc    *contracts.Document // nil: nothing to index
	final  contracts.Status    // status after the links are written
	reason string
	links  []enqueue.Candidate
	// loaded is the size of the body as loaded, garbage once parsed.
	loaded int64
}

// Process runs the crawler's loop for the pages of k. It is idempotent: pages
// not in to-be-parsed are skipped (or, with k.Reindex, only pages in
// to-be-indexed are parsed again and their documents republished). With
// k.Relink the pages' documents are indexed already: only their links are
// followed, and a page that would go to to-be-indexed goes to indexed.
func (c *Crawler) Process(ctx context.Context, k contracts.CrawlerContract, profile contracts.Profile, scope *scope.Rules) error {
	keys := make([]string, len(k.Pages))
	for i, p := range k.Pages {
		keys[i] = txindex.Key(k.CrawlID, p.URL)
	}
	recs, err := c.records(ctx, k, keys)
	if err != nil {
		return err
	}
	todo := work(k, keys, recs)
	if !k.Reindex && !k.Relink && len(todo) < len(k.Pages) {
		// Pages parsed by an earlier delivery: nobody else takes their
		// responses, and the loader may be waiting for their room.
		parse := make(map[contracts.AssetRef]bool, len(todo))
		for _, w := range todo {
			parse[w.page.Asset] = true
		}
		for _, p := range k.Pages {
			if !parse[p.Asset] {
				c.deps.Handoff.Take(p.Asset)
			}
		}
	}
	var pages []*parsed
	if c.cancels.Cancelled(ctx, k.CrawlID) {
		for _, w := range todo {
			c.deps.Handoff.Take(w.page.Asset) // not parsed: free its room
			pages = append(pages, &parsed{page: w.page, key: w.key, final: contracts.Failed, reason: "cancelled"})
		}
		todo = nil
	}
	done, err := c.parseAll(ctx, k, profile, scope, todo)
	if err != nil {
		return err
	}
	pages = append(pages, done...)
	if len(pages) == 0 {
		return nil
	}
	if k.Reindex {
		// The pages are to-be-indexed already: their documents go again.
		return c.publishDocs(ctx, k, pages, nil)
	}
	var cands []enqueue.Candidate
	for _, p := range pages {
		cands = append(cands, p.links...)
	}
	created, err := c.enq.Enqueue(ctx, k.CrawlID, profile, cands)
	if err != nil {
		return fmt.Errorf("enqueue links: %w", err)
	}
	c.met.Links(created)
	applied, err := c.recordParsed(ctx, k, pages)
	if err != nil {
		return err
	}
	// The documents go to the indexer once their pages are to-be-indexed,
	// with the records as written, so that the indexer's transition needs
	// no read. Should this process die before they are published, the
	// pages are to-be-indexed without a document on its way: the recovery
	// sweep has them parsed again (a reindex contract).
	return c.publishDocs(ctx, k, pages, applied)
}

// pageWork is one page of a contract to parse, with what its record says.
type pageWork struct {
	page     contracts.CrawlerPage
	key      string
	referrer string // the URL of the page that linked it
	sitemap  string // the record's sitemap kind; "" for a page
}

// work returns the pages of k that are its work: those whose record (recs,
// by keys) is in the status k is for, to-be-parsed or, with k.Reindex,
// to-be-indexed. The others were handled by an earlier delivery. A page
// takes its record's depth: it may have been lowered since the contract
// was written.
func work(k contracts.CrawlerContract, keys []string, recs map[string]txindex.Record) []pageWork {
	want := contracts.ToBeParsed
	if k.Reindex {
		want = contracts.ToBeIndexed
	}
	var todo []pageWork
	for i, p := range k.Pages {
		if r, ok := recs[keys[i]]; ok && r.Status == want {
			p.Depth, p.Hops = r.Depth, r.Hops
			todo = append(todo, pageWork{page: p, key: keys[i], referrer: r.Referrer, sitemap: r.Sitemap})
		}
	}
	return todo
}

// parseAll reads and parses the pages of todo, sitemaps as sitemaps.
func (c *Crawler) parseAll(ctx context.Context, k contracts.CrawlerContract, profile contracts.Profile, scope *scope.Rules, todo []pageWork) ([]*parsed, error) {
	pages := make([]contracts.CrawlerPage, len(todo))
	for i, w := range todo {
		pages[i] = w.page
	}
	handed := c.takeHanded(pages)
	spans, err := c.readSpans(ctx, pages, handed)
	if err != nil {
		return nil, err
	}
	out := make([]*parsed, 0, len(todo))
	for _, w := range todo {
		var pp *parsed
		if w.sitemap != "" {
			pp, err = c.readSitemap(ctx, k.CrawlID, scope, w, handed, spans)
		} else {
			pp, err = c.parse(ctx, k, profile, scope, w.page, w.key, w.referrer, handed, spans)
		}
		if err != nil {
			return nil, err
		}
		if _, ok := handed[w.page.Asset]; !ok { // a handed response is held until Process returns
			gcnudge.Dropped(pp.loaded)
		}
		out = append(out, pp)
	}
	return out, nil
}

// recordParsed moves the parsed pages out of to-be-parsed and reports which
// transitions applied. A page whose depth was lowered while it was parsed
// stays to-be-parsed: whoever lowered it published it again, to be parsed
// at its new depth.
func (c *Crawler) recordParsed(ctx context.Context, k contracts.CrawlerContract, pages []*parsed) ([]bool, error) {
	ts := make([]txindex.Transition, len(pages))
	for i, p := range pages {
		to := p.final
		if k.Relink && to == contracts.ToBeIndexed {
			to = contracts.Indexed
		}
		ts[i] = txindex.Transition{Key: p.key, From: contracts.ToBeParsed, To: to, Error: p.reason, IfDepth: &p.page.Depth}
	}
	applied, err := c.deps.Tx.Transition(ctx, ts)
	if err != nil {
		return nil, fmt.Errorf("record parsed pages: %w", err)
	}
	for i, ok := range applied {
		if ok {
			c.met.Page(ts[i].To)
		}
	}
	return applied, nil
}

// records returns the records of k's pages (keys), keyed by key: those
// whose snapshot the contract carries as the snapshot gave them (the
// store learns them, see txindex.Revisions), the others read.
func (c *Crawler) records(ctx context.Context, k contracts.CrawlerContract, keys []string) (map[string]txindex.Record, error) {
	recs := make(map[string]txindex.Record, len(keys))
	var read []string
	for i, p := range k.Pages {
		if r, ok := txindex.Learn(c.deps.Tx, keys[i], p.Snapshot); ok {
			recs[keys[i]] = r
			continue
		}
		read = append(read, keys[i])
	}
	if len(read) == 0 {
		return recs, nil
	}
	got, err := c.deps.Tx.GetMany(ctx, read)
	if err != nil {
		return nil, fmt.Errorf("get records: %w", err)
	}
	for key, r := range got {
		recs[key] = r
	}
	return recs, nil
}

// publishDocs publishes one index contract with the documents of pages
// whose transition applied (all of them when applied is nil), each with
// its record's snapshot.
func (c *Crawler) publishDocs(ctx context.Context, k contracts.CrawlerContract, pages []*parsed, applied []bool) error {
	if k.Relink {
		return nil // their documents are indexed already
	}
	ic := contracts.IndexContract{V: contracts.Version, CrawlID: k.CrawlID}
	for i, p := range pages {
		if p.doc == nil || applied != nil && !applied[i] {
			continue
		}
		ic.Docs = append(ic.Docs, *p.doc)
		if s := txindex.Snapshot(c.deps.Tx, p.key); s != nil {
			ic.Snapshots = append(ic.Snapshots, *s)
		}
	}
	if len(ic.Docs) == 0 {
		return nil
	}
	body, err := json.Marshal(ic)
	if err != nil {
		return fmt.Errorf("encode index contract: %w", err)
	}
	if err := c.deps.Queue.Publish(ctx, contracts.QueueIndex, queue.Message{Body: body}); err != nil {
		return fmt.Errorf("publish index contract: %w", err)
	}
	return nil
}

// parse loads and parses one page. Only backend failures are errors; a page
// that cannot be parsed becomes a failed record.
// referrer is the URL of the page that linked p.
func (c *Crawler) parse(ctx context.Context, k contracts.CrawlerContract, profile contracts.Profile, scope *scope.Rules,
	p contracts.CrawlerPage, key, referrer string, handed map[contracts.AssetRef]handedResponse, spans spanSet) (*parsed, error) {
	out := &parsed{page: p, key: key, final: contracts.ToBeIndexed}
	ref := readRef(p, handed)
	status, header, ip, body, release, err := c.load(ctx, ref, handed, spans, c.cfg.MaxBodyBytes)
	if rv := (*revisitError)(nil); errors.As(err, &rv) {
		// A revisit record whose contract names no original: the digest
		// index knows where its payload is.
		if ref, err = c.resolveRevisit(ctx, profile.DedupeScope(k.CrawlID), rv); err == nil {
			status, header, ip, body, release, err = c.load(ctx, ref, handed, spans, c.cfg.MaxBodyBytes)
		}
	}
	defer func() { release() }()
	if err != nil {
		return loadFailed(out, ref, err)
	}
	if _, inHand := handed[p.Asset]; p.Render != nil && !inHand {
		// A rendered page: its DOM after scripts, not its response (the
		// handoff holds the DOM already).
		release()
		release = noRelease
		if body, err = c.loadDOM(ctx, p.Render.DOM); err != nil {
			return loadFailed(out, p.Render.DOM, err)
		}
		header = header.Clone()
		header.Set("Content-Type", "text/html; charset=utf-8")
	}
	out.loaded = int64(cap(body))
	pageURL, err := url.Parse(p.URL)
	if err != nil {
		out.final, out.reason = contracts.Failed, "invalid url"
		return out, nil
	}
	if status >= 300 && status < 400 {
		out.final = contracts.Redirected
		loc := header.Get("Location")
		target, err := urlnorm.Resolve(pageURL, loc)
		if loc == "" || err != nil {
			out.final, out.reason = contracts.Failed, "redirect without valid location"
			return out, nil
		}
		out.reason = redirectedTo + target
		why, err := c.chainEnd(ctx, k.CrawlID, p, referrer, target)
		if err != nil {
			return nil, err
		}
		if why != "" {
			out.final, out.reason = contracts.Failed, why
			return out, nil
		}
		if tu, err := url.Parse(target); err == nil {
			if ok, _ := scope.Follow(tu, target, p.Depth, p.Hops+1); ok {
				out.links = append(out.links, enqueue.Candidate{URL: target, Depth: p.Depth, Hops: p.Hops + 1, Referrer: p.URL})
			}
		}
		return out, nil
	}
	ctype := header.Get("Content-Type")
	mt := extract.MediaType(ctype)
	res, err := c.extract(p.URL, mt, ctype, body, pageURL, Limits(c.cfg, len(body)))
	if err != nil {
		out.final, out.reason = contracts.Failed, "parse: "+err.Error()
		return out, nil
	}
	robots, ownRobots := yacydoc.HeaderRobots(header)
	noIndex := res.NoIndex || ownRobots&contracts.RobotsHeaderNoIndex != 0
	noFollow := res.NoFollow || ownRobots&contracts.RobotsHeaderNoFollow != 0
	doc := yacydoc.Build(yacydoc.Page{Key: key, CrawlID: k.CrawlID, URL: pageURL, Fetched: p, Header: header, IP: ip,
		BodyBytes: len(body), MediaType: mt, Referrer: referrer, Collection: profile.Collection, HeaderRobots: robots}, &res)
	if noIndex || !scope.Index(p.URL) {
		out.final, out.reason = contracts.Failed, contracts.ReasonExcluded
	} else {
		out.doc = doc
	}
	if p.Render != nil {
		// Script redirects, followed like HTTP ones (one hop more).
		for _, nav := range p.Render.Navigations {
			target, err := urlnorm.Resolve(pageURL, nav)
			if err != nil {
				continue
			}
			if tu, err := url.Parse(target); err == nil {
				if ok, _ := scope.Follow(tu, target, p.Depth, p.Hops+1); ok {
					out.links = append(out.links, enqueue.Candidate{URL: target, Depth: p.Depth, Hops: p.Hops + 1, Referrer: p.URL})
				}
			}
		}
	}
	if !noFollow {
		for _, l := range res.Links {
			if l.Nofollow {
				continue
			}
			lu, err := url.Parse(l.URL)
			if err != nil {
				continue
			}
			if ok, _ := scope.Follow(lu, l.URL, p.Depth+1, 0); ok {
				out.links = append(out.links, enqueue.Candidate{URL: l.URL, Depth: p.Depth + 1, Referrer: p.URL})
			}
		}
	}
	return out, nil
}

// streamReader remembers how a read from the asset store went.
type streamReader struct {
	r   io.Reader
	n   int64 // bytes read
	eof bool  // the store reported the end
	err error // the first error other than io.EOF
}

func (s *streamReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		s.eof = true
	case err != nil && s.err == nil:
		s.err = err
	}
	return n, err
}

type badRecordError struct{ msg string }

func (e *badRecordError) Error() string { return e.msg }

// span is a byte range of one asset object read at once.
type span struct {
	off  int64
	data []byte
}

// spanSet holds the spans read for one contract, by asset key, in offset order.
type spanSet map[string][]span

// find returns the bytes of ref when a span holds them.
func (s spanSet) find(ref contracts.AssetRef) ([]byte, bool) {
	for _, sp := range s[ref.Key] {
		if ref.Offset >= sp.off && ref.Offset+ref.Length <= sp.off+int64(len(sp.data)) {
			return sp.data[ref.Offset-sp.off : ref.Offset-sp.off+ref.Length], true
		}
	}
	return nil, false
}

const (
	// maxSpanBytes bounds one combined read of a WARC segment.
	maxSpanBytes = 16 << 20
	// maxSpanRecord is the largest record read as part of a span: a larger
	// one (a body near the size cap) is streamed alone from the store into
	// its block, so that its compressed bytes are not held besides.
	maxSpanRecord = 512 << 10
	// maxSpanGap is the most bytes of other records a span reads between
	// two of its pages; farther pages start another span.
	maxSpanGap = 256 << 10
)

// handedResponse is a response taken from the handoff.
type handedResponse struct {
	ip       string
	response []byte
}

// takeHanded takes the responses of pages that the handoff holds.
func (c *Crawler) takeHanded(pages []contracts.CrawlerPage) map[contracts.AssetRef]handedResponse {
	if c.deps.Handoff == nil {
		return nil
	}
	var out map[contracts.AssetRef]handedResponse
	for _, p := range pages {
		if ip, resp, ok := c.deps.Handoff.Take(p.Asset); ok {
			if out == nil {
				out = make(map[contracts.AssetRef]handedResponse, len(pages))
			}
			out[p.Asset] = handedResponse{ip: ip, response: resp}
		}
	}
	return out
}

// readSpans reads, per asset object, the byte ranges covering the records
// of pages in one request: a contract's pages come from one WARC segment,
// so this is one read per run of nearby records instead of one per page.
// Pages whose response was handed over are not read; large records, and
// pages alone in their run, are left to per-page reads.
func (c *Crawler) readSpans(ctx context.Context, pages []contracts.CrawlerPage, handed map[contracts.AssetRef]handedResponse) (spanSet, error) {
	byKey := map[string][]contracts.AssetRef{}
	for _, p := range pages {
		if _, ok := handed[p.Asset]; ok {
			continue
		}
		a := readRef(p, handed)
		if a.Key == "" || a.Length <= 0 {
			continue
		}
		byKey[a.Key] = append(byKey[a.Key], a)
	}
	out := spanSet{}
	for key, refs := range byKey {
		for _, r := range spanRuns(refs) {
			rc, err := c.deps.Assets.Get(ctx, key, r.lo, r.hi-r.lo)
			if errors.Is(err, assets.ErrNotFound) {
				break // each page reports the missing asset on its own
			}
			if err != nil {
				return nil, fmt.Errorf("get asset %q: %w", key, err)
			}
			// The span's size is known: one allocation of it (io.ReadAll's
			// growth allocated several times a span holding a large record).
			data := make([]byte, r.hi-r.lo)
			n, err := io.ReadFull(rc, data)
			rc.Close()
			data = data[:n]
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = nil // a short span: its pages beyond the end read alone
			}
			if err != nil {
				return nil, fmt.Errorf("read asset %q: %w", key, err)
			}
			out[key] = append(out[key], span{off: r.lo, data: data})
		}
	}
	return out, nil
}

// spanRun is a byte range of an asset object that holds records of
// several pages.
type spanRun struct{ lo, hi int64 }

// spanRuns groups the records at refs (of one asset object) into the
// ranges worth one read each: records at most maxSpanGap apart, at most
// maxSpanBytes in all, two records at least. Records over maxSpanRecord
// are left out (they lie in a gap).
func spanRuns(refs []contracts.AssetRef) []spanRun {
	refs = slices.SortedFunc(slices.Values(refs), func(a, b contracts.AssetRef) int { return cmp.Compare(a.Offset, b.Offset) })
	var runs []spanRun
	n := 0 // records in the last run
	for _, a := range refs {
		if a.Length > maxSpanRecord {
			continue
		}
		if k := len(runs) - 1; k >= 0 && a.Offset-runs[k].hi <= maxSpanGap && a.Offset+a.Length-runs[k].lo <= maxSpanBytes {
			runs[k].hi = max(runs[k].hi, a.Offset+a.Length)
			n++
			continue
		}
		if n == 1 {
			runs = runs[:len(runs)-1] // a record alone is read alone
		}
		runs, n = append(runs, spanRun{lo: a.Offset, hi: a.Offset + a.Length}), 1
	}
	if n == 1 {
		runs = runs[:len(runs)-1]
	}
	return runs
}

// load returns the HTTP status, headers and decoded body of the response at
// ref, capped at limit (a gzip bomb is cut there): the response handed over
// when there is one, else the WARC response record (from spans when they
// hold it).
//
// release gives back the share of the decode budget the body holds: call
// it once the body is no longer used.
func (c *Crawler) load(ctx context.Context, ref contracts.AssetRef, handed map[contracts.AssetRef]handedResponse, spans spanSet, limit int64) (status int, header http.Header, ip string, body []byte, release func(), err error) {
	maxBlock := max(c.cfg.MaxBodyBytes, limit) + 1<<20
	// A large record block and each decoded layer are read within the
	// decode budget.
	var readers []*bytebudget.Reader
	release = func() {
		for _, r := range readers {
			r.Release()
		}
	}
	wrap := func(r io.Reader) io.Reader {
		// One share at a time: the layer before (the block, or a stacked
		// coding) is read whole already, and a worker that held one share
		// while waiting for another could deadlock with the others.
		release()
		br := c.decodes.Reader(ctx, r)
		readers = append(readers[:0], br)
		return br
	}
	if limit > c.cfg.MaxBodyBytes {
		wrap = nil // a sitemap (up to 50 MiB): one per probe, not budgeted
	}
	var block []byte
	if h, ok := handed[ref]; ok {
		// The record's block is exactly this response; keep its limit.
		if int64(len(h.response)) > maxBlock {
			return 0, nil, "", nil, noRelease, &badRecordError{fmt.Sprintf("read warc record: %v", warc.ErrTooLarge)}
		}
		block, ip = h.response, h.ip
	} else {
		var r io.Reader
		var stream *streamReader
		if data, ok := spans.find(ref); ok {
			r = bytes.NewReader(data)
		} else {
			rc, err := c.deps.Assets.Get(ctx, ref.Key, ref.Offset, ref.Length)
			if err != nil {
				return 0, nil, "", nil, noRelease, fmt.Errorf("get asset %q: %w", ref.Key, err)
			}
			defer rc.Close()
			stream = &streamReader{r: rc}
			r = stream
		}
		rec, err := warc.ReadRecordWith(r, maxBlock, wrap)
		if err != nil {
			release()
			// A stream that broke off (a reset connection, a transfer cut
			// short) is the store's failure, worth a retry like the batched
			// read's; a record that arrived whole and does not parse is bad.
			if stream != nil && (stream.err != nil || stream.eof && stream.n < ref.Length) {
				return 0, nil, "", nil, noRelease, fmt.Errorf("read asset %q: %w", ref.Key, errors.Join(err, stream.err))
			}
			return 0, nil, "", nil, noRelease, &badRecordError{"read warc record: " + err.Error()}
		}
		if rec.Header.Get(warc.FieldType) == warc.TypeRevisit {
			release()
			return 0, nil, "", nil, noRelease, &revisitError{digest: rec.Header.Get(warc.FieldPayloadDigest), refersTo: rec.Header.Get(warc.FieldRefersTo)}
		}
		block, ip = rec.Block, rec.Header.Get(warc.FieldIPAddress)
	}
	status, header, body, err = warc.ParseHTTPResponse(block)
	if err != nil {
		release()
		return 0, nil, "", nil, noRelease, &badRecordError{"parse http response: " + err.Error()}
	}
	body, err = httpbody.DecodeWith(header, body, limit, wrap)
	if err != nil {
		release()
		return 0, nil, "", nil, noRelease, &badRecordError{"decode body: " + err.Error()}
	}
	return status, header, ip, body, release, nil
}

// readRef is where the response of page p is read from when the handoff
// does not hold it: the original of a revisit, else its own record.
func readRef(p contracts.CrawlerPage, handed map[contracts.AssetRef]handedResponse) contracts.AssetRef {
	if _, ok := handed[p.Asset]; !ok && p.Original != nil {
		return *p.Original
	}
	return p.Asset
}

// revisitError is load's answer for a revisit record: the payload is in
// the original response record, which refersTo names.
type revisitError struct{ digest, refersTo string }

func (e *revisitError) Error() string {
	return fmt.Sprintf("a revisit record of %s (payload %s)", e.refersTo, e.digest)
}

// resolveRevisit returns where the original of revisit rv lies, from the
// digest index entry of its payload in scope, which must be the record the
// revisit refers to; a revisit that cannot be resolved is a bad record.
func (c *Crawler) resolveRevisit(ctx context.Context, scope string, rv *revisitError) (contracts.AssetRef, error) {
	if c.deps.Digests == nil || scope == "" || rv.digest == "" {
		return contracts.AssetRef{}, &badRecordError{"read warc record: " + rv.Error() + ", and no digest index to find it"}
	}
	ref := digests.Ref{Scope: scope, Digest: rv.digest}
	found, err := c.deps.Digests.Lookup(ctx, []digests.Ref{ref})
	if err != nil {
		return contracts.AssetRef{}, fmt.Errorf("resolve revisit: %w", err)
	}
	e, ok := found[ref]
	if !ok || rv.refersTo != "" && e.RecordID != rv.refersTo {
		return contracts.AssetRef{}, &badRecordError{"read warc record: " + rv.Error() + ", whose original the digest index no longer holds"}
	}
	return contracts.AssetRef{Key: e.Key, Offset: e.Offset, Length: e.Length}, nil
}

// loadDOM reads the DOM of a rendered page from its conversion record.
func (c *Crawler) loadDOM(ctx context.Context, ref contracts.AssetRef) ([]byte, error) {
	rc, err := c.deps.Assets.Get(ctx, ref.Key, ref.Offset, ref.Length)
	if err != nil {
		return nil, fmt.Errorf("get asset %q: %w", ref.Key, err)
	}
	defer rc.Close()
	rec, err := warc.ReadRecordWith(rc, c.cfg.MaxBodyBytes+1<<20, nil)
	if err != nil {
		return nil, &badRecordError{"read rendered dom: " + err.Error()}
	}
	if t := rec.Header.Get(warc.FieldType); t != warc.TypeConversion {
		return nil, &badRecordError{"read rendered dom: a " + t + " record, not a conversion"}
	}
	return rec.Block, nil
}

// extract parses body by its media type. A panic of the parser (a bug a
// hostile page found) fails this page with the panic as its reason, logged
// with the stack, instead of crashing the service on every redelivery.
func (c *Crawler) extract(pageURL, mt, ctype string, body []byte, u *url.URL, lim extract.Limits) (res extract.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("parser panic", "url", pageURL, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("parser failed on this page: %v", p)
		}
	}()
	res, _, err = extract.Page(mt, ctype, body, u, lim) // other media are indexed by their metadata only
	return res, err
}

// Limits returns the extraction limits of a page of bodyBytes decoded bytes
// under cfg: what the crawler keeps of it. A page's links may take at most
// a small multiple of its own bytes once resolved, so that what is stored
// and queued for it stays bounded by its size (and 64 KiB for the smallest
// pages). WET files (TextOf) extract with the same limits, so that their
// text is the index's.
func Limits(cfg Config, bodyBytes int) extract.Limits {
	return extract.Limits{MaxTextBytes: cfg.MaxTextBytes, MaxLinks: cfg.MaxLinks,
		MaxLinkBytes: max(64<<10, linkBytesPerPageByte*bodyBytes)}
}

// noRelease is the release of a load that holds no share of the budget.
func noRelease() {}

// loadFailed turns a failed load of ref into out failed with its reason
// when the record is missing or bad, and returns other errors (a backend
// failure) for the contract to be tried again.
func loadFailed(out *parsed, ref contracts.AssetRef, err error) (*parsed, error) {
	var bad *badRecordError
	switch {
	case errors.Is(err, assets.ErrNotFound):
		out.final, out.reason = contracts.Failed, "asset missing: "+ref.Key
	case errors.As(err, &bad):
		out.final, out.reason = contracts.Failed, bad.Error()
	default:
		return nil, err
	}
	return out, nil
}
