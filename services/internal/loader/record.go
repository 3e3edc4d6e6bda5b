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
		r.add(&result{t: t, status: contracts.Failed, reason: o.reason})
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
		ResponseTimeMS: int(ex.elapsed.Milliseconds()),
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
		batches = append(batches, &batch{seg: r.seg, key: r.key, pending: r.pending})
		r.seg, r.spare, r.pending = r.spare, nil, nil
		if r.seg == nil {
			r.seg = warc.NewSegment(r.l.cfg.Gzip)
		}
	}
	r.mu.Unlock()
	for _, b := range batches {
		err := r.prepare(ctx, b)
		r.l.deps.Gate.Note(err)
		if err != nil && !final && ctx.Err() == nil && len(r.l.deps.Gate.Down(ctx)) > 0 {
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
}

// batch is one flush's segment and results, with how far it got.
type batch struct {
	seg     *warc.Segment
	key     string
	pending []*result
	rs      recordState
	kept    bool // kept for a later flush at least once
}

// prepare does the steps of b not done yet before publishing: store its
// segment (then recycle it), apply its transitions.
func (r *recorder) prepare(ctx context.Context, b *batch) error {
	if !b.rs.stored {
		if err := r.store(ctx, b.seg, b.key, b.pending); err != nil {
			return err
		}
		b.rs.stored = true
		if b.seg.Len() <= 4*r.l.cfg.SegmentBytes {
			b.seg.Reset()
			r.mu.Lock()
			r.spare = b.seg
			r.mu.Unlock()
		}
		b.seg = nil
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
