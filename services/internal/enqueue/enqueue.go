// Package enqueue turns discovered URLs into transaction records and loader
// contracts: create-if-absent (dedupe), the profile's page limits, lowering
// the depth of URLs found on a shorter path, and publication to the loader
// queue shard of each URL's crawl host group. The coordinator (start URLs), the crawler
// (links and redirect targets) and the recovery sweep all go through it, so
// dedupe and publication are the same everywhere. Which URLs are in scope is
// package scope's; routing is package routing's; encoding is contractmsg's.
package enqueue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Candidate is a discovered URL, already normalized.
type Candidate struct {
	URL      string
	Depth    int
	Hops     int
	Referrer string // record key of the page that found it
	// Sitemap is the record's sitemap kind (txindex.SitemapProbe,
	// txindex.SitemapFile) when the URL is to be read as a sitemap.
	Sitemap string
	// Lastmod is the <lastmod> of the sitemap entry that found the URL.
	Lastmod *time.Time
}

// errNoGroup: a record must carry its crawl host group to be routed.
var errNoGroup = errors.New("record without crawl host group")

// Enqueuer writes discovered URLs and publishes their loader contracts.
type Enqueuer struct {
	Tx    txindex.Pipeline
	Queue queue.Queue
	Group routing.Grouper
	// Shards is the number of loader queue shards (see Config); 0 means 1.
	Shards int
	Now    func() time.Time
	// Gather, when positive, is how long the first of concurrent Enqueue
	// calls waits for others before it publishes the new records' loader
	// contracts of all of them together: found links of several pages go
	// to a shard in one message instead of one per call (a group commit).
	// Each call returns once its records are published.
	Gather time.Duration

	mu     sync.Mutex
	gather *gathered // the open group, nil when none
}

// gathered is one group of publications (see Enqueuer.Gather).
type gathered struct {
	reqs []gatheredReq
	done chan struct{} // closed once published, err set
	err  error
}

type gatheredReq struct {
	crawlID string
	p       contracts.Profile
	recs    []txindex.Record
	snaps   map[string]*contracts.Snapshot
}

// Enqueue creates records for the candidates that are absent and publishes
// loader contracts for them, grouped by crawl host group.
//
// A candidate whose record exists at a greater depth was found on a shorter
// path: the record's depth is lowered (txindex.Index.LowerDepth), so that a
// page is always as deep as its shortest path from the start URLs. A
// lowered record that the crawler has already parsed goes back to
// to-be-parsed, and a crawler contract is published for every lowered
// to-be-parsed record (a relink contract for pages that were settled, whose
// documents are indexed), so that its links are extracted again at the new
// depth and their own depths lowered in turn; depths only decrease, so this
// ends. The page that found the shorter path is still to-be-parsed while
// this happens, so the crawl cannot finish before the relinked pages are
// settled again. A lowered record still to be loaded needs nothing more:
// the crawler parses every page at its record's depth.
//
// Otherwise, candidates whose record already exists are republished only
// when the record is still to-be-loaded and was found by the same referrer:
// that is the redelivery of a page whose follow-up contracts may not have
// been published. It returns the number of records created.
func (f *Enqueuer) Enqueue(ctx context.Context, crawlID string, p contracts.Profile, cands []Candidate) (int, error) {
	if len(cands) == 0 {
		return 0, nil
	}
	now := f.now()
	recs := make([]txindex.Record, 0, len(cands))
	seen := make(map[string]int, len(cands)) // key → index in recs
	for _, c := range cands {
		u, err := url.Parse(c.URL)
		if err != nil {
			continue
		}
		key := txindex.Key(crawlID, c.URL)
		if i, ok := seen[key]; ok {
			// Of the same URL found twice, the nearer finding counts.
			if c.Depth < recs[i].Depth {
				recs[i].Depth, recs[i].Hops, recs[i].Referrer = c.Depth, c.Hops, c.Referrer
			}
			continue
		}
		seen[key] = len(recs)
		// The record's host carries the port, as scope "host" does, so that
		// the hosts report and the per-host page limit keep two servers of
		// one machine apart; the crawl host group is the host name's, since
		// politeness protects the machine.
		host := urlnorm.Host(u)
		group := f.group(host)
		n := max(f.Shards, 1)
		recs = append(recs, txindex.Record{
			Key: key, CrawlID: crawlID, URL: c.URL, Host: urlnorm.HostPort(u), Group: group,
			Shard: txindex.ShardID(routing.ShardOf(group, n), n),
			Depth: c.Depth, Hops: c.Hops, Referrer: c.Referrer, Sitemap: c.Sitemap, Lastmod: c.Lastmod,
			Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now,
		})
	}
	recs, existing, err := f.limit(ctx, crawlID, p, recs)
	if err != nil {
		return 0, err
	}
	created, err := f.Tx.Create(ctx, recs)
	if err != nil {
		return 0, fmt.Errorf("create records: %w", err)
	}
	var publish []txindex.Record
	var found []txindex.Record // candidates whose record exists
	n := 0
	for i, r := range recs {
		if created[i] {
			publish = append(publish, r)
			n++
		} else {
			found = append(found, r)
		}
	}
	if len(found) > 0 {
		republish, err := f.revisit(ctx, crawlID, p, found, existing)
		if err != nil {
			return n, err
		}
		// Republished records go without snapshots: the loader reads
		// them, and skips those fetched meanwhile.
		if err := f.Publish(ctx, crawlID, p, republish); err != nil {
			return n, err
		}
	}
	// New records carry what this process wrote, so that the loader's
	// store transitions them without reading them first.
	if err := f.publishGathered(ctx, crawlID, p, publish); err != nil {
		return n, err
	}
	return n, nil
}

// publishGathered publishes the loader contracts of new records, with
// those of concurrent calls when Gather is set.
func (f *Enqueuer) publishGathered(ctx context.Context, crawlID string, p contracts.Profile, recs []txindex.Record) error {
	if f.Gather <= 0 || len(recs) == 0 {
		return f.publish(ctx, crawlID, p, recs, f.snapshot, nil)
	}
	// The snapshots are taken now: the records as this call wrote them.
	snaps := make(map[string]*contracts.Snapshot, len(recs))
	for _, r := range recs {
		if s := f.snapshot(r.Key); s != nil {
			snaps[r.Key] = s
		}
	}
	f.mu.Lock()
	g := f.gather
	lead := g == nil
	if lead {
		g = &gathered{done: make(chan struct{})}
		f.gather = g
	}
	g.reqs = append(g.reqs, gatheredReq{crawlID: crawlID, p: p, recs: recs, snaps: snaps})
	f.mu.Unlock()
	if lead {
		t := time.NewTimer(f.Gather)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		f.mu.Lock()
		f.gather = nil
		reqs := g.reqs
		f.mu.Unlock()
		g.err = f.publishAll(ctx, reqs)
		close(g.done)
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// publishAll publishes the records of reqs, one contract per crawl and
// shard (and MaxURLsPerContract URLs).
func (f *Enqueuer) publishAll(ctx context.Context, reqs []gatheredReq) error {
	type crawl struct {
		p     contracts.Profile
		recs  []txindex.Record
		snaps map[string]*contracts.Snapshot
	}
	byCrawl := map[string]*crawl{}
	var order []string
	for _, r := range reqs {
		c := byCrawl[r.crawlID]
		if c == nil {
			c = &crawl{p: r.p, snaps: map[string]*contracts.Snapshot{}}
			byCrawl[r.crawlID] = c
			order = append(order, r.crawlID)
		}
		c.recs = append(c.recs, r.recs...)
		maps.Copy(c.snaps, r.snaps)
	}
	for _, id := range order {
		c := byCrawl[id]
		snap := func(key string) *contracts.Snapshot { return c.snaps[key] }
		if err := f.publish(ctx, id, c.p, c.recs, snap, nil); err != nil {
			return err
		}
	}
	return nil
}

// revisit handles candidates whose record exists: it lowers the depth of
// records found nearer and publishes crawler contracts for those that must
// be parsed at their new depth, and returns the records whose loader
// contracts must be published again (see Enqueue). existing holds the
// records limit read already, if it read them; otherwise only the records
// found again are read, in one request. (Lowering is checked by the index,
// so a record read before Create is as good as one read after.)
func (f *Enqueuer) revisit(ctx context.Context, crawlID string, p contracts.Profile, found []txindex.Record, existing map[string]txindex.Record) ([]txindex.Record, error) {
	if existing == nil {
		var err error
		if existing, err = f.peek(ctx, found); err != nil {
			return nil, err
		}
	}
	if err := f.lowerDepths(ctx, crawlID, p, found, existing); err != nil {
		return nil, err
	}
	var republish []txindex.Record
	for _, c := range found {
		if e, ok := existing[c.Key]; ok && c.Referrer != "" && e.Status == contracts.ToBeLoaded && e.Referrer == c.Referrer {
			republish = append(republish, e)
		}
	}
	return republish, nil
}

// lowerDepths lowers the depth of the records of found that existing
// shows deeper, keeps the lowered records in existing, and publishes crawler
// contracts for the pages that must be parsed at their new depth.
func (f *Enqueuer) lowerDepths(ctx context.Context, crawlID string, p contracts.Profile, found []txindex.Record, existing map[string]txindex.Record) error {
	var lower []txindex.Lowering
	for _, c := range found {
		if e, ok := existing[c.Key]; ok && c.Depth < e.Depth {
			lower = append(lower, txindex.Lowering{Key: c.Key, Depth: c.Depth, Hops: c.Hops})
		}
	}
	if len(lower) == 0 {
		return nil
	}
	lowered, err := f.Tx.LowerDepth(ctx, lower)
	if err != nil {
		return fmt.Errorf("lower depths: %w", err)
	}
	// Pages parsed to an end (indexed, redirected, excluded) are only
	// relinked; the others (not parsed yet, being parsed, or with a
	// document on its way to the index) are parsed again in full.
	var parse, relink []contracts.CrawlerPage
	for _, l := range lower {
		r, ok := lowered[l.Key]
		if !ok {
			continue
		}
		existing[l.Key] = r.Record
		if r.Status != contracts.ToBeParsed {
			continue // to be loaded: parsed at its record's depth
		}
		page := contracts.CrawlerPage{URL: r.URL, Depth: r.Depth, Hops: r.Hops, Asset: r.Asset,
			StatusCode: r.HTTPStatus, FetchedAt: r.StatusTime}
		if r.From.Terminal() {
			relink = append(relink, page)
		} else {
			parse = append(parse, page)
		}
	}
	inline := contracts.InlineProfile(p)
	msgs, err := contractmsg.Crawler(crawlID, inline, parse, false)
	if err != nil {
		return err
	}
	rmsgs, err := contractmsg.Relink(crawlID, inline, relink)
	if err != nil {
		return err
	}
	if msgs = append(msgs, rmsgs...); len(msgs) > 0 {
		if err := f.Queue.Publish(ctx, contracts.QueueCrawler, msgs...); err != nil {
			return fmt.Errorf("publish crawler contracts of lowered pages: %w", err)
		}
	}
	return nil
}

// peek reads the records of found, which exist: those this process knows
// (it created or wrote them: txindex.Revisions) as it knows them, the
// others from the index's lagging view (txindex.Pipeline.Peek), which costs
// Elasticsearch no refresh, and the few it does not show yet (created a
// moment ago by another process) with a current read. A record known or
// shown older can only be deeper than it is now (depths only decrease),
// and LowerDepth checks the depth it lowers, so a stale record costs at
// most a lowering that does not apply. The republish rule of revisit reads
// a record to-be-loaded with the same referrer: an older version may show
// it to-be-loaded after it was fetched, which republishes a contract the
// loader then skips.
func (f *Enqueuer) peek(ctx context.Context, found []txindex.Record) (map[string]txindex.Record, error) {
	existing := make(map[string]txindex.Record, len(found))
	rv, _ := f.Tx.(txindex.Revisions)
	keys := make([]string, 0, len(found))
	for _, c := range found {
		if rv != nil {
			if r, _, ok := rv.Known(c.Key); ok {
				existing[c.Key] = r
				continue
			}
		}
		keys = append(keys, c.Key)
	}
	if len(keys) == 0 {
		return existing, nil
	}
	shown, err := f.Tx.Peek(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("peek existing records: %w", err)
	}
	var missing []string
	for _, k := range keys {
		if r, ok := shown[k]; ok {
			existing[k] = r
			continue
		}
		missing = append(missing, k)
	}
	if len(missing) == 0 {
		return existing, nil
	}
	fresh, err := f.Tx.GetMany(ctx, missing)
	if err != nil {
		return nil, fmt.Errorf("get existing records: %w", err)
	}
	for k, r := range fresh {
		existing[k] = r
	}
	return existing, nil
}

// limit drops candidates beyond the profile's page limits. Limits count
// records, so they hold within the concurrency of one Enqueue per crawl; two
// crawlers enqueueing at once may overshoot by at most one batch. It also
// returns the records it read of recs, nil when no limit is set.
func (f *Enqueuer) limit(ctx context.Context, crawlID string, p contracts.Profile, recs []txindex.Record) ([]txindex.Record, map[string]txindex.Record, error) {
	if p.MaxPages == 0 && p.MaxPagesPerHost == 0 {
		return recs, nil, nil
	}
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	existing, err := f.Tx.GetMany(ctx, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("get existing records: %w", err)
	}
	left := int64(-1)
	if p.MaxPages > 0 {
		counts, err := f.Tx.Counts(ctx, crawlID)
		if err != nil {
			return nil, nil, fmt.Errorf("count records: %w", err)
		}
		var total int64
		for _, n := range counts {
			total += n
		}
		left = int64(p.MaxPages) - total
	}
	hostLeft := map[string]int64{}
	out := recs[:0:0]
	for _, r := range recs {
		if _, ok := existing[r.Key]; ok {
			out = append(out, r) // not new: keeps its redelivery path
			continue
		}
		if left == 0 {
			continue
		}
		if p.MaxPagesPerHost > 0 {
			hl, ok := hostLeft[r.Host]
			if !ok {
				n, err := f.Tx.CountHost(ctx, crawlID, r.Host)
				if err != nil {
					return nil, nil, fmt.Errorf("count host records: %w", err)
				}
				hl = int64(p.MaxPagesPerHost) - n
			}
			if hl <= 0 {
				hostLeft[r.Host] = 0
				continue
			}
			hostLeft[r.Host] = hl - 1
		}
		if left > 0 {
			left--
		}
		out = append(out, r)
	}
	return out, existing, nil
}

// Publish sends loader contracts for records to the loader queue shard of
// their crawl host group, at most MaxURLsPerContract URLs each. They carry
// no snapshots: records published again (recovered, resumed, found again)
// may have changed since they were read, and the loader reads them first.
func (f *Enqueuer) Publish(ctx context.Context, crawlID string, p contracts.Profile, recs []txindex.Record) error {
	return f.publish(ctx, crawlID, p, recs, nil, nil)
}

// PublishResumed is Publish for the records of a crawl just resumed: its
// contracts carry contractmsg.HeaderResumed.
func (f *Enqueuer) PublishResumed(ctx context.Context, crawlID string, p contracts.Profile, recs []txindex.Record) error {
	return f.publish(ctx, crawlID, p, recs, nil, map[string]string{contractmsg.HeaderResumed: "1"})
}

func (f *Enqueuer) publish(ctx context.Context, crawlID string, p contracts.Profile, recs []txindex.Record, snap func(string) *contracts.Snapshot, headers map[string]string) error {
	if len(recs) == 0 {
		return nil
	}
	n := max(f.Shards, 1)
	byShard := make([][]txindex.Record, n)
	for _, r := range recs {
		if r.Group == "" {
			return fmt.Errorf("publish %s: %w", r.URL, errNoGroup)
		}
		i := routing.ShardOf(r.Group, n)
		byShard[i] = append(byShard[i], r)
	}
	for i, rs := range byShard {
		msgs, err := contractmsg.LoaderWithSnapshots(crawlID, p, rs, snap)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			continue
		}
		if headers != nil {
			for j := range msgs {
				msgs[j].Headers = maps.Clone(headers)
			}
		}
		if err := f.Queue.Publish(ctx, routing.ShardQueue(i, n), msgs...); err != nil {
			return fmt.Errorf("publish loader contracts: %w", err)
		}
	}
	return nil
}

// snapshot is the record of key as this process's store knows it, for
// the loader's store (see txindex.Revisions).
func (f *Enqueuer) snapshot(key string) *contracts.Snapshot {
	return txindex.Snapshot(f.Tx, key)
}

func (f *Enqueuer) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Enqueuer) group(host string) string {
	if f.Group != nil {
		return f.Group(host)
	}
	return host
}
