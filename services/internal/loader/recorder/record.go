package recorder

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/fetcher"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// Recorder: the outcomes that need a durable record (fetched, failed,
// retired) and those that only settle (skip, republish) wait, with their
// WARC records, in the segment being filled until the next flush. A flush
// stores the segment (segmentWriter), applies the transitions, and hands
// the batch to the publisher, which publishes its crawler contracts and
// only then settles its loader contracts. The recorder calls nothing
// upstream: what the loader must learn of a recorded task (its claim ends,
// its contract is told) goes through the settle function it was given.

// result is the outcome of one task, waiting for its segment to be stored.
type result struct {
	t      *queueing.Task
	Status contracts.Status // ToBeParsed, Failed or Retired; "" means no transition
	Reason string
	page   contracts.CrawlerPage
	inSeg  bool // page.Asset.Offset/Length refer to the segment being filled
	Repub  *contracts.CrawlerPage
	// bytes is the size of the fetched body, for the record (with an
	// exchange only).
	bytes int64
	// ip and response are the exchange's, kept for the handoff.
	IP       string
	Response []byte
	// recrawl is the recrawl state the outcome leaves, for a continuous
	// crawl's URL (nil otherwise).
	recrawl *txindex.Recrawl
	// render is why the page was rendered in the browser ("" if it was not).
	render string
	// dd is set for a response that waits for its dedupe decision (dedup.go).
	dd *dedupPending
}

// Index is what the recorder needs of the transaction index: blind
// transitions, and a read of the records a failed attempt may have moved.
// The crawler contracts carry the snapshots of a store that keeps them
// (txindex.Snapshot).
type Index interface {
	Transition(ctx context.Context, ts []txindex.Transition) (applied []bool, err error)
	GetMany(ctx context.Context, keys []string) (map[string]txindex.Record, error)
}

// settleFunc ends a task whose outcome is recorded (err nil) or could not
// be (err): the loader gives it to the recorder and the publisher at
// construction, and releases there what earlier stages hold for the task
// (its claim) and reports the outcome to its contract.
type settleFunc func(ctx context.Context, t *queueing.Task, err error)

// recorderDeps are the recorder's dependencies.
type recorderDeps struct {
	segments  *segmentWriter
	index     Index
	publisher *publisher
	gate      *outage.Gate
	log       *slog.Logger
	settle    settleFunc
	// keepResponses: keep the responses of pages moved to to-be-parsed
	// for the publisher's handoff.
	keepResponses bool
	flushInterval time.Duration
	// maxHeld is Config.RecordBytes (0: no bound, for tests).
	maxHeld int64
	// dedup deduplicates responses across crawls (nil: never).
	dedup   *dedup
	metrics *metrics.Loader
	// shards is the number of loader queue shards, for the logs.
	shards int
	// lease is the recovery lease (Config.RecoveryLease): a batch kept
	// while a backend is down renews its records' lease every half of it,
	// so that the recovery sweep does not take the URLs this loader holds
	// for lost and fail them after RecoveryAttempts republications.
	lease time.Duration
}

// Recorder keeps the results waiting for the segment being filled, and
// flushes them.
type Recorder struct {
	recorderDeps
	flushCh chan struct{}
	// idleCh asks for a flush because no fetch is in progress (idle).
	idleCh  chan struct{}
	flushMu sync.Mutex // one flush at a time

	mu      sync.Mutex // orders pending with the segment's records
	pending []*result
	// deferred counts the response bytes waiting for a dedupe decision.
	deferred int64
	// held counts the response bytes (capacity) fetched since the last
	// cut, those waiting for a dedupe decision included (maxHeld).
	held int64
	// room, when not nil, is closed (and cleared) at the next cut, for
	// the workers waiting in waitRoom.
	room chan struct{}
	// stuck holds the batches a failed flush kept while a backend was down
	// (only the flush goroutine touches it, under flushMu).
	stuck []*batch
}

func newRecorder(deps recorderDeps) *Recorder {
	return &Recorder{recorderDeps: deps, flushCh: make(chan struct{}, 1), idleCh: make(chan struct{}, 1)}
}

// Take records the outcome of one task: fetched, failed, retired, or one
// that only settles (skip) or publishes again (republish). It waits for the
// next flush.
func (r *Recorder) Take(t *queueing.Task, o fetcher.Outcome) {
	switch o.Verdict {
	case fetcher.Fetched:
		r.addExchange(t, o)
	case fetcher.Failed:
		st := contracts.Failed
		if t.Sitemap == txindex.SitemapProbe && strings.HasPrefix(o.Reason, "robots.txt") {
			// A start host's /sitemap.xml that robots.txt keeps us from
			// trying was never known to exist: no failure either.
			st = contracts.Sitemap
		}
		res := &result{t: t, Status: st, Reason: o.Reason}
		if t.Profile.Recrawl != nil {
			// Tried again at the next due time, like a fetched page.
			res.recrawl = recrawlState(t, time.Now(), 0, "", "", nil, "", "")
		}
		r.add(res)
	case fetcher.Retired:
		r.add(&result{t: t, Status: contracts.Retired, Reason: o.Reason})
	case fetcher.Republish:
		r.add(&result{t: t, Repub: o.Repub})
	case fetcher.Skip:
		r.add(&result{t: t})
	}
}

// add queues a result that needs no WARC record.
func (r *Recorder) add(res *result) {
	r.mu.Lock()
	r.pending = append(r.pending, res)
	r.mu.Unlock()
}

// addExchange writes a fetched page into the segment and queues its result.
// A continuous crawl's page found unchanged is written as a revisit record
// and settles back in its status (indexed) without a crawler contract.
func (r *Recorder) addExchange(t *queueing.Task, o fetcher.Outcome) {
	ex := o.Ex
	defer r.hold(int64(cap(ex.Response)))
	res := &result{t: t, Status: contracts.ToBeParsed, Reason: o.Reason, page: contracts.CrawlerPage{
		URL: t.URL, Depth: t.Depth, Hops: t.Hops, StatusCode: ex.Status, ContentType: ex.ContentType, FetchedAt: ex.Date,
		ResponseTimeMS: int(ex.Elapsed.Milliseconds()), Sitemaps: t.RobotsSitemaps, Truncated: ex.Truncated,
	}, bytes: ex.BodyBytes}
	if o.Reason != "" {
		res.Status = contracts.Failed
	}
	if scope := r.dedup.eligible(t, o); scope != "" {
		// Written at the flush, with the other responses' look-ups.
		res.dd = &dedupPending{Ex: ex, scope: scope, digest: warc.PayloadDigest(ex.Response)}
		if res.dd.digest != "" {
			r.mu.Lock()
			r.pending = append(r.pending, res)
			r.deferred += int64(len(ex.Response))
			full := r.deferred >= r.segments.cfg.bytes
			r.mu.Unlock()
			if full {
				r.nudge()
			}
			return
		}
		res.dd = nil
	}
	// Under mu, so that a result lands in the same flush as its records.
	r.mu.Lock()
	if o.Revisit != nil {
		st := t.Prev.Recrawl
		_, _, err := r.segments.appendRevisit(ex, t.CrawlID, t.URL, st.Stored, st.RecordID, st.Digest, o.Revisit)
		if err == nil {
			res.Status, res.page.StatusCode = fetcher.PreviousStatus(t.Prev), 0
			res.recrawl = recrawlState(t, ex.Date, ex.Status, ex.ETag, ex.LastModified, o.Revisit, "", "")
			r.pending = append(r.pending, res)
			r.mu.Unlock()
			return
		}
		// The whole response is stored instead, and parsed as a change.
		r.log.Warn("write revisit record; storing the response", "url", t.URL, "crawl_id", t.CrawlID, "err", err)
	}
	r.writeResponse(res, ex, o.Render)
	r.pending = append(r.pending, res)
	r.mu.Unlock()
	if r.segments.full() { // store it now rather than at the next tick
		r.nudge()
	}
}

// writeResponse writes ex's request and response records (and a rendered
// page's DOM) into the segment and points res at them, or fails res with
// the reason. It returns the response's record id ("" when it failed).
// Called under r.mu, or by the flush (decideDedup).
func (r *Recorder) writeResponse(res *result, ex *fetcher.Exchange, rnd *fetcher.Rendering) string {
	t := res.t
	off, n, id, digest, err := r.segments.appendExchange(ex, t.CrawlID)
	if err == nil && rnd != nil {
		// The DOM after scripts, tied to the response: what the crawler parses.
		var domOff, domLen int64
		if domOff, domLen, err = r.segments.appendRendered(t.URL, ex.Date, id, rnd); err == nil {
			res.page.Render = &contracts.RenderedPage{Reason: rnd.Reason, Cut: rnd.Cut(),
				DOM: contracts.AssetRef{Offset: domOff, Length: domLen}, Navigations: rnd.Res.Navigations}
			res.render = rnd.Reason
			if cut := rnd.Cut(); cut != "" {
				res.render += "; cut: " + cut
			}
		}
	}
	if err != nil {
		res.Status, res.Reason, res.page.Render = contracts.Failed, "warc: "+err.Error(), nil
		id = ""
	} else {
		res.inSeg, res.page.Asset = true, contracts.AssetRef{Offset: off, Length: n}
		if r.keepResponses && res.Status == contracts.ToBeParsed {
			res.IP, res.Response = ex.IP, ex.Response
			if rnd != nil {
				res.Response = rnd.Response()
			}
		}
	}
	if t.Profile.Recrawl != nil {
		res.recrawl = recrawlState(t, ex.Date, ex.Status, ex.ETag, ex.LastModified, nil, id, digest)
	}
	return id
}

// Archive writes an exchange that settles nothing (robots.txt) into the
// segment; it is stored with the next flush.
func (r *Recorder) Archive(ex *fetcher.Exchange, crawlID string) {
	if _, _, _, _, err := r.segments.appendExchange(ex, crawlID); err != nil {
		r.log.Warn("archive exchange", "url", ex.URL, "err", err)
	}
}

// hold counts n more response bytes fetched since the last cut, and asks
// for a flush once they pass half of the bound.
func (r *Recorder) hold(n int64) {
	r.mu.Lock()
	r.held += n
	flush := r.maxHeld > 0 && r.held >= r.maxHeld/2
	r.mu.Unlock()
	if flush {
		r.nudge()
	}
}

// WaitRoom waits while the responses fetched since the last cut hold
// maxHeld bytes or more, until a flush cuts them or ctx is done. Workers
// call it before they take a new URL: the bound is passed by the bodies in
// hand at most.
func (r *Recorder) WaitRoom(ctx context.Context) {
	for {
		r.mu.Lock()
		if r.maxHeld <= 0 || r.held < r.maxHeld {
			r.mu.Unlock()
			return
		}
		if r.room == nil {
			r.room = make(chan struct{})
		}
		wait := r.room
		r.mu.Unlock()
		r.nudge()
		select {
		case <-wait:
		case <-ctx.Done():
			return
		}
	}
}

// nudge asks the flush loop for a flush now rather than at the next tick.
func (r *Recorder) nudge() {
	select {
	case r.flushCh <- struct{}{}:
	default:
	}
}

// Idle asks for a flush because the loader has no fetch in progress: the
// results in hand are recorded and their links published without waiting
// for the flush interval, so that a chain of newly found links advances at
// the politeness delay. Such flushes come at most every idleFlushGap: a
// loader that keeps running dry between fetches (a few groups that each
// fetch every few milliseconds, as on a deep crawl) records its pages in
// batches of that much time rather than one by one, each batch a segment
// write, a transition write and a crawler contract.
func (r *Recorder) Idle() {
	select {
	case r.idleCh <- struct{}{}:
	default:
	}
}

// idleFlushGap is the least time between a flush and an idle one: on a
// deep web (10 hosts at a 10 ms delay) 50 ms takes the loader from a flush
// per few pages to one per about 40, and a chain of new links, whose steps
// are longer, is not held up by it (docs/benchmarks.md).
const idleFlushGap = 50 * time.Millisecond

// FlushLoop flushes when the segment is full (nudge), when the loader has
// no fetch in progress (idle, at most every idleFlushGap), and every flush
// interval, until ctx is done; flushes run under drain.
func (r *Recorder) FlushLoop(ctx, drain context.Context) {
	tick := time.NewTicker(r.flushInterval)
	defer tick.Stop()
	var last time.Time
	var gap <-chan time.Time // the deferred idle flush
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.flushCh:
		case <-r.idleCh:
			if wait := idleFlushGap - time.Since(last); wait > 0 {
				if gap == nil {
					gap = time.After(wait)
				}
				continue
			}
		case <-gap:
		}
		gap = nil
		r.Flush(drain, false)
		last = time.Now()
	}
}

// Flush stores the segment and applies the transitions of the pending
// results, then hands them to the publisher. A batch that could not be
// recorded is settled with the error (its contracts are retried).
//
// When a step fails while a backend is down, the batch is kept with what it
// has done so far and tried again at the next flush, before newer batches:
// what was fetched is not fetched again. A step that fails while every
// backend answers is tried again the same way for transientFor. A final
// Flush (at shutdown) keeps nothing.
func (r *Recorder) Flush(ctx context.Context, final bool) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.decideDedup(ctx)
	batches := r.stuck
	r.stuck = nil
	r.mu.Lock()
	// Responses that came after the dedupe decisions wait for the next
	// flush: none of their records is in this segment.
	var later []*result
	take := r.pending[:0:0]
	for _, res := range r.pending {
		if res.dd != nil && !res.dd.decided {
			later = append(later, res)
		} else {
			take = append(take, res)
		}
	}
	if c := r.segments.cut(); c.seg != nil || len(take) > 0 {
		batches = append(batches, &batch{seg: c, pending: take})
	}
	r.pending = later
	r.held = 0
	for _, res := range later {
		r.held += int64(cap(res.dd.Ex.Response))
	}
	if r.room != nil {
		close(r.room)
		r.room = nil
	}
	r.mu.Unlock()
	for _, b := range batches {
		err := r.prepare(ctx, b)
		// A write that failed for lack of disk space keeps the batch even
		// when the next probe finds room: settling it as failed would
		// send what was fetched to be fetched again.
		outage := r.gate.Note(err)
		if err != nil && !final && ctx.Err() == nil {
			down := outage || len(r.gate.Down(ctx)) > 0
			if !down && b.failedUp.IsZero() {
				b.failedUp = time.Now()
				r.log.Warn("flush segment failed: tried again", "urls", len(b.pending), "err", err)
			}
			if down || time.Since(b.failedUp) < transientFor {
				if down && !b.kept {
					r.log.Warn("flush segment waits for the backends", "urls", len(b.pending), "err", err)
				}
				b.kept = b.kept || down
				r.renew(ctx, b)
				r.stuck = append(r.stuck, b)
				continue
			}
		}
		if err != nil {
			b.settle(ctx, r.log, r.settle, err)
			continue
		}
		r.publisher.put(ctx, b)
	}
	r.segments.sealClosed(ctx)
}

// Close seals the open segment object's index, after the final flush.
func (r *Recorder) Close(ctx context.Context) { r.segments.close(ctx) }

// renew renews the lease of the records of kept batch b, once every half
// lease, while its transitions are not applied: the URLs are fetched and
// held here until the backend is back. A renewal that fails (the
// transaction index may be the backend that is down) is tried at the next
// flush.
func (r *Recorder) renew(ctx context.Context, b *batch) {
	if b.rs.applied != nil || r.lease <= 0 || time.Since(b.renewed) < r.lease/2 {
		return
	}
	var ts []txindex.Transition
	for _, res := range b.pending {
		if res.Status != "" {
			ts = append(ts, txindex.Transition{Key: txindex.Key(res.t.CrawlID, res.t.URL), From: contracts.ToBeLoaded, To: contracts.ToBeLoaded})
		}
	}
	if len(ts) == 0 {
		return
	}
	if _, err := r.index.Transition(ctx, ts); err != nil {
		r.log.Debug("renew lease of urls waiting for the backends", "urls", len(ts), "err", err)
		return
	}
	b.renewed = time.Now()
}

// batch is one flush's segment and results, with how far it got.
type batch struct {
	seg     segmentCut
	pending []*result
	rs      recordState
	kept    bool      // kept for a later flush while a backend was down
	renewed time.Time // when its records' lease was last renewed (see renew)
	// failedUp is when a step first failed while every backend answered
	// (zero: never).
	failedUp time.Time
	// digestsAdded: its responses' payload digests went to the index.
	digestsAdded bool
}

// transientFor is how long a batch whose step failed while every backend
// answered is tried again at each flush before its contracts are settled
// with the error (and retried, which fetches the pages again). Such a
// failure is most often a backend on its way back or away, whose probe
// answered while the next request did not.
const transientFor = 30 * time.Second

// recordState is how far a batch's transitions got, so that a batch tried
// again after an outage does not lose the transitions it applied.
type recordState struct {
	applied []bool // the transitions' results, once applied
	moved   []*result
	// failed: an attempt to apply the transitions failed, and may have
	// applied some of them before it did.
	failed bool
}

// prepare does the steps of b not done yet before publishing: store its
// segment, point its results into it, apply its transitions.
func (r *Recorder) prepare(ctx context.Context, b *batch) error {
	if !b.seg.stored {
		if err := r.segments.store(ctx, &b.seg); err != nil {
			return err
		}
		for _, res := range b.pending {
			if res.inSeg {
				res.page.Asset.Key = b.seg.key
				res.page.Asset.Offset += b.seg.base
				if rp := res.page.Render; rp != nil {
					rp.DOM.Key = b.seg.key
					rp.DOM.Offset += b.seg.base
				}
			}
		}
	}
	if r.dedup != nil && !b.digestsAdded {
		r.addDigests(ctx, b)
		b.digestsAdded = true
	}
	if b.rs.applied == nil {
		return r.transition(ctx, b.pending, &b.rs)
	}
	return nil
}

// settle settles the contracts of b's results with err, through settle.
func (b *batch) settle(ctx context.Context, log *slog.Logger, settle settleFunc, err error) {
	if err != nil && ctx.Err() == nil {
		log.Error("flush segment", "err", err)
	}
	if b.kept && err == nil {
		log.Info("flush segment done after the outage", "urls", len(b.pending))
	}
	for _, res := range b.pending {
		settle(ctx, res.t, err)
	}
}

// transition applies the transitions of pending and keeps their results in rs.
func (r *Recorder) transition(ctx context.Context, pending []*result, rs *recordState) error {
	var ts []txindex.Transition
	var moved []*result
	for _, res := range pending {
		if res.Status == "" {
			continue
		}
		tr := txindex.Transition{Key: txindex.Key(res.t.CrawlID, res.t.URL), From: contracts.ToBeLoaded, To: res.Status, Error: res.Reason, HTTPStatus: res.page.StatusCode}
		if res.inSeg {
			a := res.page.Asset
			tr.Asset = &a
		}
		if res.page.StatusCode != 0 { // a response arrived
			tr.MIMEType = fetcher.MediaType(res.page.ContentType)
			tr.Bytes = &res.bytes
			tr.Render = res.render
		}
		if res.recrawl != nil {
			tr.Recrawl = res.recrawl
			tr.ClearError = res.Status == contracts.ToBeParsed
		}
		ts = append(ts, tr)
		moved = append(moved, res)
	}
	applied, err := r.index.Transition(ctx, ts)
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
	r.warnFetchedTwice(moved, applied)
	rs.applied, rs.moved = applied, moved
	return nil
}

// warnFetchedTwice logs the fetched pages whose record had left
// to-be-loaded before their transition: another fetch (or a cancellation)
// moved it meanwhile, so the page was most likely fetched twice. It says how
// the contract came, which tells the duplicate's path.
func (r *Recorder) warnFetchedTwice(moved []*result, applied []bool) {
	for i, res := range moved {
		if i >= len(applied) || applied[i] || res.page.StatusCode == 0 || res.t.Delivery() == nil {
			continue
		}
		t, d := res.t, res.t.Delivery()
		resent := false
		if rd, ok := d.(queue.Resendable); ok {
			resent = rd.Resent()
		}
		r.log.Warn("fetched a url whose record another fetch or a cancellation had moved", "crawl_id", t.CrawlID, "url", t.URL,
			"queue", routing.ShardQueue(t.Shard, max(r.shards, 1)), "redelivered", d.Redelivered(), "attempt", d.Attempt(),
			"resent", resent, "snapshot", t.Known != nil)
	}
}

// appliedBefore marks as applied the transitions that an earlier, failed
// attempt applied (the record holds their outcome), so that their crawler
// contracts are published now rather than after the recovery lease.
func (r *Recorder) appliedBefore(ctx context.Context, ts []txindex.Transition, applied []bool) error {
	var keys []string
	for i, tr := range ts {
		if !applied[i] {
			keys = append(keys, tr.Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	recs, err := r.index.GetMany(ctx, keys)
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

// recrawlState returns the recrawl state a fetch of t at time at leaves:
// status is the response's (0: none), etag and lastModified its
// validators, rv set when it found the page unchanged, and recordID and
// digest those of the response record it stored (empty: none).
func recrawlState(t *queueing.Task, at time.Time, status int, etag, lastModified string, rv *fetcher.Revisit, recordID, digest string) *txindex.Recrawl {
	var st txindex.Recrawl
	if t.Prev != nil && t.Prev.Recrawl != nil {
		st = *t.Prev.Recrawl
	}
	first := st.Fetched.IsZero()
	st.Fetched, st.Status = at.UTC(), status
	changed := rv == nil && recordID != "" && !first
	switch {
	case rv != nil:
		st.Revisits++
	case recordID != "":
		if changed && digest != st.Digest {
			st.Changes++
		}
		st.RecordID, st.Stored, st.Digest = recordID, at.UTC(), digest
		st.ETag, st.LastModified = "", ""
	}
	if rv != nil || recordID != "" {
		// A 304 may update the validators; a new response replaces them.
		if etag != "" && len(etag) <= txindex.MaxValidatorLen {
			st.ETag = etag
		}
		if lastModified != "" && len(lastModified) <= txindex.MaxValidatorLen {
			st.LastModified = lastModified
		}
	}
	next := t.Profile.Recrawl.Next(time.Duration(st.IntervalMS)*time.Millisecond, changed || first)
	st.IntervalMS = next.Milliseconds()
	st.Due = at.UTC().Add(next).Truncate(time.Millisecond)
	return &st
}
