package recorder

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/fetcher"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Deduplication across crawls (profile dedupe): a 200 response of a
// one-shot crawl whose payload digest the crawl's dedupe scope (the crawl,
// or its first collection) holds in the digest index, with the original
// record still in the asset store, is stored as a revisit record
// (identical-payload-digest) that refers to the original; any other is
// stored as a response and its digest added to the index, after its
// segment is stored (so an entry never names a record that is not there).
//
// The decision waits for the flush: the responses of one flush are looked
// up in one call, their originals checked with one Stat per segment object
// (positive answers cached for GRIDCRAWL_DEDUP_CHECK_TTL), and their new digests
// added in one call. A payload seen twice within one flush is stored once,
// the second time as a revisit of the first. Two loaders storing one
// payload at once both store a response; the index keeps the first
// (digests.Index: first writer wins), the other stays an extra response.
//
// The crawler parses the revisit's payload from the original
// (contracts.CrawlerPage.Original; in-process, from the handoff), so the
// page is parsed, its links followed and it is indexed like any other.
// Continuous crawls keep their own revisits of a URL's last fetch
// (recrawl.go) and are not deduplicated across crawls; neither are pages
// rendered in the browser (their DOM record refers to their response) nor
// sitemaps (small, and read by the crawler from their own record).

// Defaults of the digest index's bound and of its checks.
const (
	// dedupCountEvery is how often the loader counts the index's entries
	// (its bound and the gauge).
	dedupCountEvery = 10 * time.Second
	// dedupReadableKeys bounds the cache of readable segment objects.
	dedupReadableKeys = 1 << 16
	// dedupStats bounds the Stat calls in flight at once.
	dedupStats = 8
)

// dedupPending is a response waiting in the recorder for its dedupe
// decision, and the decision.
type dedupPending struct {
	Ex     *fetcher.Exchange
	scope  string
	digest string
	// decided is set when its records are written (under recorder.mu).
	decided bool
	// sameAs is the response of this flush that the revisit refers to.
	sameAs *result
	// add: written as a response, whose digest goes to the index once
	// stored (recordID is the response's); stale is an entry of the same
	// ref whose original is gone, removed first.
	add      bool
	recordID string
	stale    *digests.Entry
}

// dedup holds the digest index and what the loader knows of it.
type dedup struct {
	index digests.Index
	store assets.Store
	max   int64
	met   *metrics.Loader
	log   *slog.Logger
	ttl   time.Duration
	now   func() time.Time

	revisits atomic.Int64 // revisit records written

	mu       sync.Mutex
	count    int64
	counted  time.Time // zero: not counted yet
	readable map[string]readableSeg
}

// readableSeg is a segment object found to hold size bytes at a time.
type readableSeg struct {
	size int64
	at   time.Time
}

func newDedup(index digests.Index, store assets.Store, maxEntries int64, ttl time.Duration, met *metrics.Loader, log *slog.Logger) *dedup {
	if index == nil {
		return nil
	}
	return &dedup{index: index, store: store, max: maxEntries, met: met, log: log, ttl: ttl, now: time.Now,
		readable: map[string]readableSeg{}}
}

// eligible returns the dedupe scope of a fetched page's response, or ""
// when it is stored as a response without a look-up.
func (d *dedup) eligible(t *queueing.Task, o fetcher.Outcome) string {
	ex := o.Ex
	if d == nil || o.Revisit != nil || o.Render != nil || o.Reason != "" || ex.Status != 200 || ex.Truncated || t.Profile.Recrawl != nil ||
		t.Sitemap != "" {
		return ""
	}
	return t.Profile.DedupeScope(t.CrawlID)
}

// lookup returns the entries of refs whose original is still readable,
// and those whose original is gone (missing, or shorter than the record).
// A failed look-up is logged and finds nothing: the responses are stored
// in full.
func (d *dedup) lookup(ctx context.Context, refs []digests.Ref) (ok, stale map[digests.Ref]digests.Entry) {
	found, err := d.index.Lookup(ctx, refs)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("look up payload digests; storing the responses in full", "urls", len(refs), "err", err)
		}
		return nil, nil
	}
	if len(found) == 0 {
		return nil, nil
	}
	need := map[string]int64{} // segment key → bytes the entries need
	for _, e := range found {
		need[e.Key] = max(need[e.Key], e.Offset+e.Length)
	}
	gone := d.checkSegments(ctx, need)
	ok, stale = make(map[digests.Ref]digests.Entry, len(found)), map[digests.Ref]digests.Entry{}
	for ref, e := range found {
		switch g, checked := gone[e.Key]; {
		case !checked:
			ok[ref] = e
		case g:
			stale[ref] = e
		} // checked but unknown (an error): neither, stored in full
	}
	return ok, stale
}

// checkSegments checks that each segment object of need holds at least its
// bytes. It returns the keys it could not vouch for: true when the object
// is missing or too short, false when the check failed. Positive answers
// are cached for d.ttl.
func (d *dedup) checkSegments(ctx context.Context, need map[string]int64) map[string]bool {
	now := d.now()
	var todo []string
	d.mu.Lock()
	for key, n := range need {
		if c, ok := d.readable[key]; ok && c.size >= n && now.Sub(c.at) < d.ttl {
			continue
		}
		todo = append(todo, key)
	}
	d.mu.Unlock()
	out := map[string]bool{}
	if len(todo) == 0 {
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, dedupStats)
	for _, key := range todo {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			size, err := d.segmentSize(ctx, key, need[key])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, assets.ErrNotFound):
				out[key] = true
			case err != nil:
				if ctx.Err() == nil {
					d.log.Warn("check original segment", "asset", key, "err", err)
				}
				out[key] = false
			case size < need[key]:
				out[key] = true
			default:
				d.mu.Lock()
				if len(d.readable) >= dedupReadableKeys {
					clear(d.readable)
				}
				d.readable[key] = readableSeg{size: size, at: now}
				d.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// segmentSize returns the size of the object key (assets.Stater), or,
// where the store cannot tell, n when its byte n-1 can be read and less
// when it cannot.
func (d *dedup) segmentSize(ctx context.Context, key string, n int64) (int64, error) {
	if st, ok := d.store.(assets.Stater); ok {
		info, err := st.Stat(ctx, key)
		if !errors.Is(err, errors.ErrUnsupported) {
			return info.Size, err
		}
	}
	rc, err := d.store.Get(ctx, key, n-1, 1)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	got, err := io.Copy(io.Discard, rc)
	if err != nil {
		return 0, err
	}
	return n - 1 + got, nil
}

// room returns how many entries the index takes before it holds d.max,
// counting them again when the last count is older than dedupCountEvery.
func (d *dedup) room(ctx context.Context) int64 {
	d.mu.Lock()
	stale := d.counted.IsZero() || d.now().Sub(d.counted) >= dedupCountEvery
	d.mu.Unlock()
	if stale {
		n, err := d.index.Count(ctx)
		d.mu.Lock()
		if err == nil {
			d.count, d.counted = n, d.now()
			d.met.DedupEntries(n)
		} else if ctx.Err() == nil {
			d.log.Warn("count payload digests", "err", err)
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(0, d.max-d.count)
}

// added notes n entries added since the last count.
func (d *dedup) added(n int) {
	d.mu.Lock()
	d.count += int64(n)
	d.met.DedupEntries(d.count)
	d.mu.Unlock()
}

// report returns the digest index as the loader last counted it, for the
// frontier report; nil before the first count.
func (d *dedup) report() *contracts.FrontierDedup {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counted.IsZero() {
		return nil
	}
	return &contracts.FrontierDedup{Entries: d.count, MaxEntries: d.max, Revisits: d.revisits.Load()}
}

// decideDedup makes the dedupe decision of the responses waiting for one
// and writes their records into the segment being filled: one look-up for
// them all, then the writes. Neither holds the recorder's lock, which the
// workers need to hand over their outcomes: only a flush cuts the segment
// and takes the results, and this is the flush's goroutine, so the records
// written here and their results land in the same cut, like those of the
// workers, which write both under the lock.
func (r *Recorder) decideDedup(ctx context.Context) {
	r.mu.Lock()
	var todo []*result
	for _, res := range r.pending {
		if res.dd != nil && !res.dd.decided {
			todo = append(todo, res)
		}
	}
	r.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	refs := make([]digests.Ref, 0, len(todo))
	seen := make(map[digests.Ref]bool, len(todo))
	for _, res := range todo {
		ref := digests.Ref{Scope: res.dd.scope, Digest: res.dd.digest}
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	found, stale := r.dedup.lookup(ctx, refs)
	firsts := map[digests.Ref]*result{}
	revisits := 0
	var written int64
	defer func() {
		r.mu.Lock()
		r.deferred -= written
		for _, res := range todo {
			res.dd.decided = true
		}
		r.mu.Unlock()
	}()
	for _, res := range todo {
		dd := res.dd
		written += int64(len(dd.Ex.Response))
		ref := digests.Ref{Scope: dd.scope, Digest: dd.digest}
		if e, ok := found[ref]; ok {
			orig := contracts.AssetRef{Key: e.Key, Offset: e.Offset, Length: e.Length}
			if r.writeDedupRevisit(res, e.URI, e.Date, e.RecordID) {
				res.page.Original = &orig
				revisits++
				continue
			}
		} else if f := firsts[ref]; f != nil {
			if r.writeDedupRevisit(res, f.dd.Ex.URL, f.dd.Ex.Date, f.dd.recordID) {
				dd.sameAs = f
				revisits++
				continue
			}
		}
		id := r.writeResponse(res, dd.Ex, nil)
		if id == "" {
			continue // failed with the reason
		}
		dd.add, dd.recordID = true, id
		if e, ok := stale[ref]; ok {
			dd.stale = &e
		}
		if firsts[ref] == nil {
			firsts[ref] = res
		}
	}
	r.metrics.DedupRevisits(revisits)
	r.dedup.revisits.Add(int64(revisits))
}

// writeDedupRevisit writes res's exchange as a revisit record of the
// original (uri, date, id) and reports whether it did (a failure is
// logged: the response is stored instead).
func (r *Recorder) writeDedupRevisit(res *result, uri string, date time.Time, id string) bool {
	dd := res.dd
	rv := &fetcher.Revisit{Profile: warc.ProfileIdenticalPayloadDigest}
	off, n, err := r.segments.appendRevisit(dd.Ex, res.t.CrawlID, uri, date, id, dd.digest, rv)
	if err != nil {
		r.log.Warn("write revisit record; storing the response", "url", res.t.URL, "crawl_id", res.t.CrawlID, "err", err)
		return false
	}
	res.inSeg, res.page.Asset = true, contracts.AssetRef{Offset: off, Length: n}
	if r.keepResponses {
		res.IP, res.Response = dd.Ex.IP, dd.Ex.Response
	}
	return true
}

// addDigests, once b's segment is stored, points b's revisits of responses
// of the same flush at them, and adds the digests of b's responses to the
// index (removing the stale entries they replace first), within the
// index's bound. A failure is logged: the responses are stored, only not
// found by later look-ups.
func (r *Recorder) addDigests(ctx context.Context, b *batch) {
	var entries []digests.Entry
	var stale []digests.Entry
	for _, res := range b.pending {
		dd := res.dd
		if dd == nil {
			continue
		}
		if dd.sameAs != nil {
			orig := dd.sameAs.page.Asset
			res.page.Original = &orig
		}
		if !dd.add || res.page.Asset.Key == "" {
			continue
		}
		if dd.stale != nil {
			stale = append(stale, *dd.stale)
		}
		a := res.page.Asset
		entries = append(entries, digests.Entry{Ref: digests.Ref{Scope: dd.scope, Digest: dd.digest}, URI: dd.Ex.URL, Date: dd.Ex.Date,
			RecordID: dd.recordID, Key: a.Key, Offset: a.Offset, Length: a.Length})
	}
	if len(stale) > 0 {
		if err := r.dedup.index.Remove(ctx, stale); err != nil && ctx.Err() == nil {
			r.log.Warn("remove payload digests of lost originals", "urls", len(stale), "err", err)
		}
	}
	if len(entries) == 0 {
		return
	}
	if room := r.dedup.room(ctx); int64(len(entries)) > room {
		r.metrics.DedupRefused(len(entries) - int(room))
		entries = entries[:room]
	}
	if len(entries) == 0 {
		return
	}
	added, err := r.dedup.index.Add(ctx, entries)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("add payload digests", "urls", len(entries), "err", err)
		}
		return
	}
	n := 0
	for _, ok := range added {
		if ok {
			n++
		}
	}
	r.dedup.added(n)
}
