package loader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	// recrawl is the recrawl state the outcome leaves, for a continuous
	// crawl's URL (nil otherwise).
	recrawl *txindex.Recrawl
}

// recorder owns the segment being filled and the results waiting for it.
type recorder struct {
	l        *Loader
	appender assets.Appender // nil: one object per flush
	flushCh  chan struct{}
	flushMu  sync.Mutex // one flush at a time

	mu       sync.Mutex
	seg      *warc.Segment
	spare    *warc.Segment // a stored segment kept for reuse of its buffers
	pending  []*result
	cdx      []warc.CDXJ // index lines of seg's records, offsets within seg
	spareCDX []warc.CDXJ
	key      string   // where seg goes
	file     segFile  // the open segment object of an appending store
	toSeal   []string // closed segment objects of an appending store whose index is unsorted
	serial   int
	// stuck holds the batches a failed flush kept while a backend was down
	// (only the flush goroutine touches it, under flushMu).
	stuck []*batch
	pub   *publisher
}

// segFile is the segment object appends go to.
type segFile struct {
	key    string
	size   int64
	opened time.Time
	broken bool // an append failed: open another
}

func newRecorder(l *Loader) *recorder {
	r := &recorder{l: l, flushCh: make(chan struct{}, 1), seg: warc.NewSegment(l.cfg.Gzip), pub: newPublisher()}
	r.appender, _ = l.deps.Assets.(assets.Appender)
	return r
}

// take hands on the outcome of one task: what needs a record waits for the
// next flush; the rest is scheduled again, parked or settled now.
func (r *recorder) take(ctx context.Context, t *task, o outcome) {
	l := r.l
	if o.robots != nil {
		r.archive(o.robots, t.crawlID)
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
		if ctx.Err() == nil && len(l.deps.Gate.Down(ctx)) > 0 && l.deps.Gate.Wait(ctx) == nil {
			// A backend was down (the record could not be read): the task
			// keeps its place and its attempts, and waited for the backend.
			l.claims.release(t)
			l.schedule(ctx, t)
			return
		}
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
		res := &result{t: t, status: st, reason: o.reason}
		if t.profile.Recrawl != nil {
			// Tried again at the next due time, like a fetched page.
			res.recrawl = recrawlState(t, time.Now(), 0, "", "", nil, "", "")
		}
		r.add(res)
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
// A continuous crawl's page found unchanged is written as a revisit record
// and settles back in its status (indexed) without a crawler contract.
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
	if o.revisit != nil {
		err := r.appendRevisitLocked(ex, t, o.revisit)
		if err == nil {
			res.status, res.page.StatusCode = previousStatus(t.prev), 0
			res.recrawl = recrawlState(t, ex.date, ex.status, ex.etag, ex.lastModified, o.revisit, "", "")
			r.pending = append(r.pending, res)
			r.mu.Unlock()
			return
		}
		// The whole response is stored instead, and parsed as a change.
		r.l.log.Warn("write revisit record; storing the response", "url", t.url, "crawl_id", t.crawlID, "err", err)
	}
	off, n, id, digest, err := r.appendLocked(ex, t.crawlID)
	if err != nil {
		res.status, res.reason = contracts.Failed, "warc: "+err.Error()
	} else {
		res.inSeg, res.page.Asset = true, contracts.AssetRef{Offset: off, Length: n}
		if r.l.deps.Handoff != nil && res.status == contracts.ToBeParsed {
			res.ip, res.response = ex.ip, ex.response
		}
	}
	if t.profile.Recrawl != nil {
		res.recrawl = recrawlState(t, ex.date, ex.status, ex.etag, ex.lastModified, nil, id, digest)
	}
	r.pending = append(r.pending, res)
	full := r.seg.Len() >= r.l.cfg.SegmentBytes
	r.mu.Unlock()
	if full { // store it now rather than at the next tick
		r.nudge()
	}
}

// appendRevisitLocked appends ex's request record and a revisit record of
// ex, which found t's stored response unchanged, to the segment, and notes
// the revisit's CDXJ line.
func (r *recorder) appendRevisitLocked(ex *exchange, t *task, rv *revisit) error {
	st := t.prev.Recrawl
	req := warc.NewRequestRecord(ex.url, ex.date, ex.request)
	rec, err := warc.NewRevisitRecord(warc.Revisit{
		TargetURI: ex.url, Date: ex.date, IP: ex.ip, Profile: rv.profile,
		HTTPResponse: ex.response, OriginalHeader: rv.originalHeader, PayloadDigest: st.Digest,
		RefersToTargetURI: t.url, RefersToDate: st.Stored, RefersTo: st.RecordID, ConcurrentTo: warc.RecordID(req),
	})
	if err != nil {
		return err
	}
	if r.seg.Count() == 0 {
		r.startLocked(time.Now())
	}
	if _, _, err := r.seg.Append(req); err != nil {
		return err
	}
	offset, length, err := r.seg.Append(rec)
	if err != nil {
		return err
	}
	if c, ok := r.seg.CDXJOf(rec, 0, offset, length, ""); ok {
		c.Crawl = t.crawlID
		r.cdx = append(r.cdx, c)
	}
	return nil
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
func (r *recorder) archive(ex *exchange, crawlID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, _, _, _, err := r.appendLocked(ex, crawlID); err != nil {
		r.l.log.Warn("archive exchange", "url", ex.url, "err", err)
	}
}

// appendLocked appends ex's request and response records to the segment,
// notes the response's CDXJ line (for the crawl crawlID) and returns where
// the response lies in the segment, with its record id and payload digest.
func (r *recorder) appendLocked(ex *exchange, crawlID string) (offset, length int64, id, digest string, err error) {
	if r.seg.Count() == 0 {
		r.startLocked(time.Now())
	}
	req := warc.NewRequestRecord(ex.url, ex.date, ex.request)
	resp := warc.NewResponseRecord(ex.url, ex.date, ex.ip, ex.response, ex.truncated, warc.RecordID(req))
	if _, _, err := r.seg.Append(req); err != nil {
		return 0, 0, "", "", err
	}
	offset, length, err = r.seg.Append(resp)
	if err != nil {
		return 0, 0, "", "", err
	}
	if c, ok := r.seg.CDXJOf(resp, 0, offset, length, ""); ok {
		c.Crawl = crawlID
		r.cdx = append(r.cdx, c)
	}
	return offset, length, warc.RecordID(resp), resp.Header.Get(warc.FieldPayloadDigest), nil
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
	if r.appender != nil && f.key != "" {
		r.toSeal = append(r.toSeal, f.key)
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
		r.flush(drain, false)
	}
}

// flush stores the segment and applies the transitions of the pending
// results, then hands them to the publisher, which publishes their crawler
// contracts and settles their loader contracts: acked if all of it
// succeeded, retried otherwise. Publishing runs apart, so that a broker that
// is away (a publish waits for its return) does not hold back the record of
// what was fetched meanwhile: once recorded, a URL whose contract went back
// to the queue is not fetched again by the loader that gets it next.
//
// When a step fails while a backend is down, the batch is kept with what it
// has done so far and tried again at the next flush, before newer batches:
// what was fetched is not fetched again. A final flush (at shutdown) keeps
// nothing.
func (r *recorder) flush(ctx context.Context, final bool) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	batches := r.stuck
	r.stuck = nil
	r.mu.Lock()
	if len(r.pending) > 0 || r.seg.Count() > 0 {
		batches = append(batches, &batch{seg: r.seg, key: r.key, cdx: r.cdx, pending: r.pending})
		r.seg, r.spare, r.pending, r.cdx, r.spareCDX = r.spare, nil, nil, r.spareCDX[:0], nil
		if r.seg == nil {
			r.seg = warc.NewSegment(r.l.cfg.Gzip)
		}
	}
	r.mu.Unlock()
	for _, b := range batches {
		err := r.prepare(ctx, b)
		// A write that failed for lack of disk space keeps the batch even
		// when the next probe finds room: settling it as failed would
		// send what was fetched to be fetched again.
		outage := r.l.deps.Gate.Note(err)
		if err != nil && !final && ctx.Err() == nil && (outage || len(r.l.deps.Gate.Down(ctx)) > 0) {
			if !b.kept {
				b.kept = true
				r.l.log.Warn("flush segment waits for the backends", "urls", len(b.pending), "err", err)
			}
			r.stuck = append(r.stuck, b)
			continue
		}
		if err != nil {
			r.settle(ctx, b, err)
			continue
		}
		r.pub.put(b)
	}
	r.mu.Lock()
	toSeal := r.toSeal
	r.toSeal = nil
	r.mu.Unlock()
	for _, key := range toSeal {
		r.sealIndex(ctx, key)
	}
}

// batch is one flush's segment and results, with how far it got.
type batch struct {
	seg     *warc.Segment
	key     string
	cdx     []warc.CDXJ
	pending []*result
	// segStored and base: the segment is stored, at base of its object
	// (its index may not be).
	segStored bool
	base      int64
	rs        recordState
	kept      bool // kept for a later flush at least once
}

// prepare does the steps of b not done yet before publishing: store its
// segment (then recycle it), apply its transitions.
func (r *recorder) prepare(ctx context.Context, b *batch) error {
	if !b.rs.stored {
		if err := r.store(ctx, b); err != nil {
			return err
		}
		b.rs.stored = true
		if b.seg.Len() <= 4*r.l.cfg.SegmentBytes {
			b.seg.Reset()
			r.mu.Lock()
			r.spare, r.spareCDX = b.seg, b.cdx[:0]
			r.mu.Unlock()
		}
		b.seg, b.cdx = nil, nil
	}
	if b.rs.applied == nil {
		return r.transition(ctx, b.pending, &b.rs)
	}
	return nil
}

// publishLoop publishes the crawler contracts of the batches flush hands
// over, in order, and settles them, until the publisher is closed and
// empty. While a backend is down it waits for it rather than give up.
func (r *recorder) publishLoop(ctx context.Context) {
	defer close(r.pub.done)
	for {
		b, ok := r.pub.take()
		if !ok {
			return
		}
		err := r.publish(ctx, b.pending, &b.rs)
		r.l.deps.Gate.Note(err)
		for err != nil && ctx.Err() == nil && len(r.l.deps.Gate.Down(ctx)) > 0 {
			if !b.kept {
				b.kept = true
				r.l.log.Warn("publish crawler contracts waits for the backends", "urls", len(b.pending), "err", err)
			}
			if r.l.deps.Gate.Wait(ctx) != nil {
				break
			}
			err = r.publish(ctx, b.pending, &b.rs)
			r.l.deps.Gate.Note(err)
		}
		r.settle(ctx, b, err)
	}
}

// publisher is the queue of batches between flush and publishLoop.
type publisher struct {
	mu      sync.Mutex
	batches []*batch
	closed  bool
	wake    chan struct{}
	done    chan struct{} // closed when publishLoop has returned
}

func newPublisher() *publisher {
	return &publisher{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (p *publisher) put(b *batch) {
	p.mu.Lock()
	p.batches = append(p.batches, b)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns the oldest batch, waiting for one; false once closed and empty.
func (p *publisher) take() (*batch, bool) {
	for {
		p.mu.Lock()
		if len(p.batches) > 0 {
			b := p.batches[0]
			p.batches[0] = nil
			p.batches = p.batches[1:]
			p.mu.Unlock()
			return b, true
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return nil, false
		}
		<-p.wake
	}
}

// close lets publishLoop return once it has published what it holds, and
// waits for that.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
}

// settle settles the contracts of b's results with err.
func (r *recorder) settle(ctx context.Context, b *batch, err error) {
	if err != nil && ctx.Err() == nil {
		r.l.log.Error("flush segment", "err", err)
	}
	if b.kept && err == nil {
		r.l.log.Info("flush segment done after the outage", "urls", len(b.pending))
	}
	for _, res := range b.pending {
		r.l.claims.release(res.t) // recorded, or its contract is retried
		res.t.dl.done(ctx, r.l.log, err)
	}
}

// store writes seg to key and the CDXJ lines of its records to key's index
// object (appending both when the store can), and points the pending
// results into it.
func (r *recorder) store(ctx context.Context, b *batch) error {
	seg, key := b.seg, b.key
	if seg.Count() == 0 {
		return nil
	}
	var err error
	if !b.segStored { // tried again after a failed index: the segment is there
		var base int64
		if r.appender != nil {
			base, err = r.appender.Append(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len())
		} else {
			ctype := "application/warc"
			if r.l.cfg.Gzip {
				ctype = "application/warc+gzip"
			}
			err = r.l.deps.Assets.Put(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len(), ctype)
		}
		if err == nil {
			b.segStored, b.base = true, base
		}
	}
	if err == nil && len(b.cdx) > 0 {
		// The index follows its segment: a flush whose lines are not
		// stored fails like one whose records are not, and the segment
		// object is not appended to again.
		err = r.storeIndex(ctx, key, b.base, b.cdx)
	}
	r.mu.Lock()
	if r.file.key == key {
		r.file.size = b.base + seg.Len()
		r.file.broken = err != nil
	}
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("store segment %q: %w", key, err)
	}
	r.l.met.WARCBytes(seg.Len())
	for _, res := range b.pending {
		if res.inSeg {
			res.page.Asset.Key = key
			res.page.Asset.Offset += b.base
		}
	}
	return nil
}

// recordState is how far a batch got, so that a batch tried again after an
// outage neither stores twice nor loses the transitions it applied.
type recordState struct {
	stored  bool   // the segment is stored
	applied []bool // the transitions' results, once applied
	moved   []*result
	// failed: an attempt to apply the transitions failed, and may have
	// applied some of them before it did.
	failed bool
	// handedOff: the responses went to the handoff (once is enough).
	handedOff bool
}

// publish publishes crawler contracts for the pages of pending that moved
// to to-be-parsed (rs holds the transitions, applied) and those to publish
// again.
func (r *recorder) publish(ctx context.Context, pending []*result, rs *recordState) error {
	var pages crawlerPages
	for i, res := range rs.moved {
		if rs.applied[i] && res.status == contracts.ToBeParsed {
			pages.add(res, res.page)
			if res.response != nil && !rs.handedOff {
				r.l.deps.Handoff.Put(res.page.Asset, res.ip, res.response)
			}
		}
	}
	rs.handedOff = true
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

// transition applies the transitions of pending and keeps their results in rs.
func (r *recorder) transition(ctx context.Context, pending []*result, rs *recordState) error {
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
		if res.recrawl != nil {
			tr.Recrawl = res.recrawl
			tr.ClearError = res.status == contracts.ToBeParsed
		}
		ts = append(ts, tr)
		moved = append(moved, res)
	}
	applied, err := r.l.deps.Tx.Transition(ctx, ts)
	if err == nil && rs.failed {
		err = r.appliedBefore(ctx, ts, applied)
	}
	if err != nil {
		rs.failed = true
		return fmt.Errorf("record fetch outcomes: %w", err)
	}
	if applied == nil {
		applied = []bool{}
	}
	rs.applied, rs.moved = applied, moved
	return nil
}

// appliedBefore marks as applied the transitions that an earlier, failed
// attempt applied (the record holds their outcome), so that their crawler
// contracts are published now rather than after the recovery lease.
func (r *recorder) appliedBefore(ctx context.Context, ts []txindex.Transition, applied []bool) error {
	var keys []string
	for i, tr := range ts {
		if !applied[i] {
			keys = append(keys, tr.Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	recs, err := r.l.deps.Tx.GetMany(ctx, keys)
	if err != nil {
		return fmt.Errorf("read records after a failed transition: %w", err)
	}
	for i, tr := range ts {
		rec, ok := recs[tr.Key]
		if applied[i] || !ok || rec.Status != tr.To {
			continue
		}
		applied[i] = tr.Asset == nil || rec.Asset == *tr.Asset
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

// storeIndex writes the CDXJ lines of records stored at base in the
// segment key, sorted, to the segment's index object (assets.CDXJKey):
// appended on an appending store, where the object is a series of sorted
// runs, one per flush, until the loader seals it (see sealIndex); one
// object per segment object elsewhere.
func (r *recorder) storeIndex(ctx context.Context, key string, base int64, cdx []warc.CDXJ) error {
	filename := key[strings.LastIndexByte(key, '/')+1:]
	lines := make([][]byte, 0, len(cdx))
	size := 0
	for _, c := range cdx {
		c.Offset += base
		c.Filename = filename
		line := c.AppendLine(nil)
		size += len(line)
		lines = append(lines, line)
	}
	body := make([]byte, 0, size)
	for _, l := range warc.SortCDXJ(lines) {
		body = append(body, l...)
	}
	var err error
	if r.appender != nil {
		_, err = r.appender.Append(ctx, assets.CDXJKey(key), bytes.NewReader(body), int64(len(body)))
	} else {
		err = r.l.deps.Assets.Put(ctx, assets.CDXJKey(key), bytes.NewReader(body), int64(len(body)), assets.ContentTypeCDXJ)
	}
	if err != nil {
		return fmt.Errorf("store segment index %q: %w", assets.CDXJKey(key), err)
	}
	return nil
}

// sealIndex rewrites the index of the closed segment key, a series of
// sorted runs on an appending store, as one sorted file, which pywb can
// search. A failure leaves the runs, which gridcrawl's readers sort
// anyway, and is logged.
func (r *recorder) sealIndex(ctx context.Context, key string) {
	ikey := assets.CDXJKey(key)
	rc, err := r.l.deps.Assets.Get(ctx, ikey, 0, -1)
	if errors.Is(err, assets.ErrNotFound) {
		return
	}
	var body []byte
	if err == nil {
		body, err = io.ReadAll(rc)
		rc.Close()
	}
	if err == nil {
		var lines [][]byte
		for l := range bytes.Lines(body) {
			lines = append(lines, l)
		}
		sorted := bytes.Join(warc.SortCDXJ(lines), nil)
		err = r.l.deps.Assets.Put(ctx, ikey, bytes.NewReader(sorted), int64(len(sorted)), assets.ContentTypeCDXJ)
	}
	if err != nil && ctx.Err() == nil {
		r.l.log.Warn("seal segment index", "key", ikey, "err", err)
	}
}

// close seals the index of the open segment object of an appending store,
// which no flush appends to after the loader stops.
func (r *recorder) close(ctx context.Context) {
	r.mu.Lock()
	key := r.file.key
	r.file = segFile{}
	r.mu.Unlock()
	if r.appender != nil && key != "" {
		r.sealIndex(ctx, key)
	}
}
