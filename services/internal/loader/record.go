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
	off, n, err := r.appendLocked(ex, t.crawlID)
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
func (r *recorder) archive(ex *exchange, crawlID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, _, err := r.appendLocked(ex, crawlID); err != nil {
		r.l.log.Warn("archive exchange", "url", ex.url, "err", err)
	}
}

// appendLocked appends ex's request and response records to the segment,
// notes the response's CDXJ line (for the crawl crawlID) and returns where
// the response lies in the segment.
func (r *recorder) appendLocked(ex *exchange, crawlID string) (offset, length int64, err error) {
	if r.seg.Count() == 0 {
		r.startLocked(time.Now())
	}
	req := warc.NewRequestRecord(ex.url, ex.date, ex.request)
	resp := warc.NewResponseRecord(ex.url, ex.date, ex.ip, ex.response, ex.truncated, warc.RecordID(req))
	if _, _, err := r.seg.Append(req); err != nil {
		return 0, 0, err
	}
	offset, length, err = r.seg.Append(resp)
	if err != nil {
		return 0, 0, err
	}
	if c, ok := r.seg.CDXJOf(resp, 0, offset, length, ""); ok {
		c.Crawl = crawlID
		r.cdx = append(r.cdx, c)
	}
	return offset, length, nil
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
	seg, pending, key, cdx := r.seg, r.pending, r.key, r.cdx
	r.seg, r.spare, r.pending, r.cdx, r.spareCDX = r.spare, nil, nil, r.spareCDX[:0], nil
	if r.seg == nil {
		r.seg = warc.NewSegment(r.l.cfg.Gzip)
	}
	r.mu.Unlock()

	err := r.store(ctx, seg, key, cdx, pending)
	if err == nil {
		err = r.record(ctx, pending)
	}
	if seg.Len() <= 4*r.l.cfg.SegmentBytes {
		seg.Reset()
		r.mu.Lock()
		r.spare, r.spareCDX = seg, cdx[:0]
		r.mu.Unlock()
	}
	if err != nil && ctx.Err() == nil {
		r.l.log.Error("flush segment", "err", err)
	}
	r.mu.Lock()
	toSeal := r.toSeal
	r.toSeal = nil
	r.mu.Unlock()
	for _, key := range toSeal {
		r.sealIndex(ctx, key)
	}
	for _, res := range pending {
		r.l.claims.release(res.t) // recorded, or its contract is retried
		res.t.dl.done(ctx, r.l.log, err)
	}
}

// store writes seg to key and the CDXJ lines of its records to key's index
// object (appending both when the store can), and points the pending
// results into it.
func (r *recorder) store(ctx context.Context, seg *warc.Segment, key string, cdx []warc.CDXJ, pending []*result) error {
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
	if err == nil && len(cdx) > 0 {
		// The index follows its segment: a flush whose lines are not
		// stored fails like one whose records are not, and the segment
		// object is not appended to again.
		err = r.storeIndex(ctx, key, base, cdx)
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
