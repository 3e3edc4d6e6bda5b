package loader

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
)

// Recorder: outcomes that need a durable record wait in the current WARC
// segment until the next flush, which stores the segment, applies their
// transitions, publishes their crawler contracts and only then settles their
// loader contracts.
//
// Segment keys are never reused: each names the loader, the process (start
// time and random text) and a serial, in the manner of Heritrix
// ("gridcrawl-<opened>-<serial>-<loader>-<process>.warc.gz"). On a store
// that can append (assets.Appender) a segment stays open across flushes
// until it reaches SegmentBytes or SegmentAge; elsewhere each flush stores
// one object.

// result is the outcome of one task, waiting for its segment to be stored.
type result struct {
	t      *task
	status contracts.Status // ToBeParsed, Failed or Retired; "" means no transition
	reason string
	page   contracts.CrawlerPage
	inSeg  bool // page.Asset.Offset/Length refer to the segment being filled
	repub  *contracts.CrawlerPage
	// bytes is the size of the fetched body, for the record (with an
	// exchange only).
	bytes int64
	// ip and response are the exchange's, kept for the handoff.
	ip       string
	response []byte
}

// recorder owns the segment being filled and the results waiting for it.
type recorder struct {
	l        *Loader
	appender assets.Appender // nil: one object per flush
	flushCh  chan struct{}
	flushMu  sync.Mutex // one flush at a time

	mu      sync.Mutex
	seg     *warc.Segment
	spare   *warc.Segment // a stored segment kept for reuse of its buffers
	pending []*result
	key     string  // where seg goes
	file    segFile // the open segment object of an appending store
	serial  int
}

// segFile is the segment object appends go to.
type segFile struct {
	key    string
	size   int64
	opened time.Time
	broken bool // an append failed: open another
}

func newRecorder(l *Loader) *recorder {
	r := &recorder{l: l, flushCh: make(chan struct{}, 1), seg: warc.NewSegment(l.cfg.Gzip)}
	r.appender, _ = l.deps.Assets.(assets.Appender)
	return r
}

// take hands on the outcome of one task: what needs a record waits for the
// next flush; the rest is scheduled again, parked or settled now.
func (r *recorder) take(ctx context.Context, t *task, o outcome) {
	l := r.l
	if o.robots != nil {
		r.archive(o.robots)
	}
	switch o.verdict {
	case vAgain:
		t.prepaid = true // robots.txt is paid as the page: budgets count pages
		l.schedule(ctx, t)
	case vRetry:
		// The group's own backoff (from the outcome) slows every URL of the
		// group meanwhile.
		t.attempt++
		t.prepaid = false
		t.notBefore = time.Now().Add(l.cfg.RetryDelay * time.Duration(t.attempt))
		l.schedule(ctx, t)
	case vPaused:
		t.notBefore = time.Time{}
		l.claims.release(t)
		t.dl.done(ctx, l.log, l.park(ctx, []*task{t}, l.cfg.PausedDelay))
	case vAbandon:
		if ctx.Err() == nil {
			l.log.Warn("abandon url", "url", t.url, "crawl_id", t.crawlID, "err", o.err)
		}
		l.claims.release(t)
		t.dl.done(ctx, l.log, o.err)
	case vFetched:
		r.addExchange(t, o)
	case vFailed:
		st := contracts.Failed
		if t.sitemap == txindex.SitemapProbe && strings.HasPrefix(o.reason, "robots.txt") {
			// A start host's /sitemap.xml that robots.txt keeps us from
			// trying was never known to exist: no failure either.
			st = contracts.Sitemap
		}
		r.add(&result{t: t, status: st, reason: o.reason})
	case vRetired:
		r.add(&result{t: t, status: contracts.Retired, reason: o.reason})
	case vRepublish:
		r.add(&result{t: t, repub: o.repub})
	case vSkip:
		r.add(&result{t: t})
	case vLost:
		l.claims.release(t)
		t.dl.drop()
	}
}

// add queues a result that needs no WARC record.
func (r *recorder) add(res *result) {
	r.mu.Lock()
	r.pending = append(r.pending, res)
	r.mu.Unlock()
}

// addExchange writes a fetched page into the segment and queues its result.
func (r *recorder) addExchange(t *task, o outcome) {
	ex := o.ex
	res := &result{t: t, status: contracts.ToBeParsed, reason: o.reason, page: contracts.CrawlerPage{
		URL: t.url, Depth: t.depth, Hops: t.hops, StatusCode: ex.status, ContentType: ex.contentType, FetchedAt: ex.date,
		ResponseTimeMS: int(ex.elapsed.Milliseconds()), Sitemaps: t.robotsSitemaps, Truncated: ex.truncated,
	}, bytes: ex.bodyBytes}
	if o.reason != "" {
		res.status = contracts.Failed
	}
	r.mu.Lock()
	off, n, err := r.appendLocked(ex)
	if err != nil {
		res.status, res.reason = contracts.Failed, "warc: "+err.Error()
	} else {
		res.inSeg, res.page.Asset = true, contracts.AssetRef{Offset: off, Length: n}
		if r.l.deps.Handoff != nil && res.status == contracts.ToBeParsed {
			res.ip, res.response = ex.ip, ex.response
		}
	}
	r.pending = append(r.pending, res)
	full := r.seg.Len() >= r.l.cfg.SegmentBytes
	r.mu.Unlock()
	if full { // store it now rather than at the next tick
		r.nudge()
	}
}

// nudge asks the flush loop for a flush now rather than at the next tick.
func (r *recorder) nudge() {
	select {
	case r.flushCh <- struct{}{}:
	default:
	}
}

// archive writes an exchange that settles nothing (robots.txt) into the
// segment; it is stored with the next flush.
func (r *recorder) archive(ex *exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, _, err := r.appendLocked(ex); err != nil {
		r.l.log.Warn("archive exchange", "url", ex.url, "err", err)
	}
}

// appendLocked appends ex's request and response records to the segment
// and returns where the response lies in it.
func (r *recorder) appendLocked(ex *exchange) (offset, length int64, err error) {
	if r.seg.Count() == 0 {
		r.startLocked(time.Now())
	}
	req := warc.NewRequestRecord(ex.url, ex.date, ex.request)
	resp := warc.NewResponseRecord(ex.url, ex.date, ex.ip, ex.response, ex.truncated, warc.RecordID(req))
	if _, _, err := r.seg.Append(req); err != nil {
		return 0, 0, err
	}
	return r.seg.Append(resp)
}

// startLocked chooses the object the empty segment goes to: the open one,
// or a new one, which starts with a warcinfo record.
func (r *recorder) startLocked(now time.Time) {
	cfg := r.l.cfg
	f := r.file
	if r.appender != nil && f.key != "" && !f.broken && f.size < cfg.SegmentBytes && now.Sub(f.opened) < cfg.SegmentAge {
		r.key = f.key
		return
	}
	r.serial++
	stamp := strings.Replace(now.UTC().Format("20060102150405.000"), ".", "", 1) // Heritrix's 17 digits
	r.key = fmt.Sprintf("warc/%s/gridcrawl-%s-%05d-%s-%s.warc", now.UTC().Format("2006/01/02"), stamp, r.serial, keySafe(cfg.ID), r.l.run)
	if cfg.Gzip {
		r.key += ".gz"
	}
	r.file = segFile{key: r.key, opened: now}
	_, _, _ = r.seg.Append(warc.NewWarcinfoRecord(now, map[string]string{
		"software": "gridcrawl", "format": "WARC File Format 1.1", "operator-loader": cfg.ID, "filename": r.key[strings.LastIndexByte(r.key, '/')+1:],
	}))
}

// keySafe makes a loader id usable inside one segment of an asset key.
func keySafe(id string) string {
	return strings.NewReplacer("/", "_", "\\", "_", " ", "_").Replace(strings.TrimLeft(id, "."))
}

// flushLoop flushes when the segment is full, when the loader has no fetch
// in progress (nudge), and every FlushInterval, until ctx is done; flushes
// run under drain.
func (r *recorder) flushLoop(ctx, drain context.Context) {
	tick := time.NewTicker(r.l.cfg.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.flushCh:
		}
		r.flush(drain)
	}
}

// flush stores the segment, records the pending results and settles their
// contracts: acked if all of it succeeded, retried otherwise.
func (r *recorder) flush(ctx context.Context) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	if len(r.pending) == 0 && r.seg.Count() == 0 {
		r.mu.Unlock()
		return
	}
	seg, pending, key := r.seg, r.pending, r.key
	r.seg, r.spare, r.pending = r.spare, nil, nil
	if r.seg == nil {
		r.seg = warc.NewSegment(r.l.cfg.Gzip)
	}
	r.mu.Unlock()

	err := r.store(ctx, seg, key, pending)
	if err == nil {
		err = r.record(ctx, pending)
	}
	if seg.Len() <= 4*r.l.cfg.SegmentBytes {
		seg.Reset()
		r.mu.Lock()
		r.spare = seg
		r.mu.Unlock()
	}
	if err != nil && ctx.Err() == nil {
		r.l.log.Error("flush segment", "err", err)
	}
	for _, res := range pending {
		r.l.claims.release(res.t) // recorded, or its contract is retried
		res.t.dl.done(ctx, r.l.log, err)
	}
}

// store writes seg to key (appending when the store can) and points the
// pending results into it.
func (r *recorder) store(ctx context.Context, seg *warc.Segment, key string, pending []*result) error {
	if seg.Count() == 0 {
		return nil
	}
	var base int64
	var err error
	if r.appender != nil {
		base, err = r.appender.Append(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len())
	} else {
		ctype := "application/warc"
		if r.l.cfg.Gzip {
			ctype = "application/warc+gzip"
		}
		err = r.l.deps.Assets.Put(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len(), ctype)
	}
	r.mu.Lock()
	if r.file.key == key {
		r.file.size = base + seg.Len()
		r.file.broken = err != nil
	}
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("store segment %q: %w", key, err)
	}
	r.l.met.WARCBytes(seg.Len())
	for _, res := range pending {
		if res.inSeg {
			res.page.Asset.Key = key
			res.page.Asset.Offset += base
		}
	}
	return nil
}

// record applies the transitions of pending and publishes crawler contracts
// for the pages that moved to to-be-parsed and those to publish again.
func (r *recorder) record(ctx context.Context, pending []*result) error {
	var ts []txindex.Transition
	var moved []*result
	for _, res := range pending {
		if res.status == "" {
			continue
		}
		tr := txindex.Transition{Key: txindex.Key(res.t.crawlID, res.t.url), From: contracts.ToBeLoaded, To: res.status, Error: res.reason, HTTPStatus: res.page.StatusCode}
		if res.inSeg {
			a := res.page.Asset
			tr.Asset = &a
		}
		if res.page.StatusCode != 0 { // a response arrived
			tr.MIMEType = mediaType(res.page.ContentType)
			tr.Bytes = &res.bytes
		}
		ts = append(ts, tr)
		moved = append(moved, res)
	}
	applied, err := r.l.deps.Tx.Transition(ctx, ts)
	if err != nil {
		return fmt.Errorf("record fetch outcomes: %w", err)
	}
	var pages crawlerPages
	for i, res := range moved {
		if applied[i] && res.status == contracts.ToBeParsed {
			pages.add(res, res.page)
			if res.response != nil {
				r.l.deps.Handoff.Put(res.page.Asset, res.ip, res.response)
			}
		}
	}
	for _, res := range pending {
		if res.repub != nil {
			pages.add(res, *res.repub)
		}
	}
	msgs, err := pages.messages()
	if err != nil || len(msgs) == 0 {
		return err
	}
	if err := r.l.deps.Queue.Publish(ctx, contracts.QueueCrawler, msgs...); err != nil {
		return fmt.Errorf("publish crawler contracts: %w", err)
	}
	return nil
}

// crawlerPages collects crawler pages by crawl, in order of first appearance.
type crawlerPages struct {
	order   []string
	byCrawl map[string]*crawlBatch
}

type crawlBatch struct {
	inline *contracts.Profile
	pages  []contracts.CrawlerPage
}

func (c *crawlerPages) add(res *result, p contracts.CrawlerPage) {
	if c.byCrawl == nil {
		c.byCrawl = map[string]*crawlBatch{}
	}
	b := c.byCrawl[res.t.crawlID]
	if b == nil {
		b = &crawlBatch{inline: res.t.inline}
		c.byCrawl[res.t.crawlID] = b
		c.order = append(c.order, res.t.crawlID)
	}
	b.pages = append(b.pages, p)
}

func (c *crawlerPages) messages() ([]queue.Message, error) {
	var msgs []queue.Message
	for _, id := range c.order {
		b := c.byCrawl[id]
		m, err := contractmsg.Crawler(id, b.inline, b.pages, false)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m...)
	}
	return msgs, nil
}

// mediaType returns the media type of a Content-Type value, lower case and
// without parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
