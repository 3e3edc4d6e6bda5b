package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/fetcher"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// segmentWriter writes WARC records into segment objects of the asset
// store, with each segment's CDXJ index (assets.CDXJKey) beside it.
//
// What it guarantees:
//   - Records are appended to a segment in memory. None is durable until
//     store has returned nil for the segment cut that holds it; from then
//     on the records are in the store and the CDXJ lines of their responses
//     in the segment's index, at the offsets store reports.
//   - The index follows its segment: a store whose index lines could not be
//     written fails like one whose records could not, and the segment
//     object is not appended to again (later records open a new one).
//   - Segment keys are never reused: each names the loader, the process
//     (start time and random text) and a serial, in the manner of Heritrix
//     (https://github.com/internetarchive/heritrix3):
//     "gridcrawl-<opened>-<serial>-<loader>-<process>.warc.gz". Every
//     segment object starts with a warcinfo record.
//   - On a store that can append (assets.Appender) a segment object takes
//     the records of many cuts until it reaches SegmentBytes or
//     SegmentAge; its index is then a series of sorted runs, one per cut,
//     until the object is closed (rolled over, or at close) and its index
//     rewritten as one sorted file. Elsewhere every cut is one object with
//     one sorted index.
//   - close, at shutdown, seals the index of the open object: no store
//     appends to it afterwards.
//
// Appends and cut may be called from any goroutine; store, sealClosed and
// close are called by one goroutine at a time (the recorder's flush).
type segmentWriter struct {
	assets   assets.Store
	appender assets.Appender // nil: one object per cut
	cfg      segmentConfig
	met      *metrics.Loader
	log      *slog.Logger

	mu       sync.Mutex
	seg      *warc.Segment // the segment being filled
	cdx      []warc.CDXJ   // index lines of seg's records, offsets within seg
	spare    *warc.Segment // a stored segment kept for reuse of its buffers
	spareCDX []warc.CDXJ
	key      string   // where seg goes
	file     segFile  // the open segment object of an appending store
	toSeal   []string // closed segment objects of an appending store whose index is unsorted
	serial   int
}

// segmentConfig is what a segment writer takes from the loader's
// configuration.
type segmentConfig struct {
	loader string // Config.ID
	run    string // names the process in segment keys
	gzip   bool
	bytes  int64 // Config.SegmentBytes
	age    time.Duration
}

// segFile is the segment object appends go to.
type segFile struct {
	key    string
	size   int64
	opened time.Time
	broken bool // an append failed: open another
}

// segmentCut is the records of one flush, taken from the writer by cut,
// with how far storing them got.
type segmentCut struct {
	seg *warc.Segment // nil: no records
	cdx []warc.CDXJ
	key string
	// segStored: the records are in the object key, at base (the index may
	// not be); stored: the index too.
	segStored bool
	stored    bool
	base      int64
}

func newSegmentWriter(store assets.Store, cfg segmentConfig, met *metrics.Loader, log *slog.Logger) *segmentWriter {
	w := &segmentWriter{assets: store, cfg: cfg, met: met, log: log, seg: warc.NewSegment(cfg.gzip)}
	w.appender, _ = store.(assets.Appender)
	return w
}

// appendExchange appends ex's request and response records, notes the
// response's CDXJ line (for the crawl crawlID) and returns where the
// response lies in the segment being filled, with its record id and
// payload digest.
func (w *segmentWriter) appendExchange(ex *fetcher.Exchange, crawlID string) (offset, length int64, id, digest string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg.Count() == 0 {
		w.startLocked(time.Now())
	}
	req := warc.NewRequestRecord(ex.URL, ex.Date, ex.Request)
	resp := warc.NewResponseRecord(ex.URL, ex.Date, ex.IP, ex.Response, ex.Truncated, warc.RecordID(req))
	if _, _, err := w.seg.Append(req); err != nil {
		return 0, 0, "", "", err
	}
	offset, length, err = w.seg.Append(resp)
	if err != nil {
		return 0, 0, "", "", err
	}
	if c, ok := w.seg.CDXJOf(resp, 0, offset, length, ""); ok {
		c.Crawl = crawlID
		w.cdx = append(w.cdx, c)
	}
	return offset, length, warc.RecordID(resp), resp.Header.Get(warc.FieldPayloadDigest), nil
}

// appendRendered appends the records of a page rendered in the browser
// (renderedRecords) after its response respID, and returns where the DOM's
// conversion record lies in the segment being filled. Neither is indexed
// for replay: the page replays from its response and resources.
func (w *segmentWriter) appendRendered(url string, date time.Time, respID string, r *fetcher.Rendering) (offset, length int64, err error) {
	dom, meta := renderedRecords(url, date, respID, r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg.Count() == 0 {
		w.startLocked(time.Now())
	}
	if offset, length, err = w.seg.Append(dom); err != nil {
		return 0, 0, err
	}
	if _, _, err = w.seg.Append(meta); err != nil {
		return 0, 0, err
	}
	return offset, length, nil
}

// appendRevisit appends ex's request record and a revisit record of ex,
// whose payload (digest) the original record refersTo (WARC-Record-ID,
// "" if unknown) of refersURI at refersDate holds, notes the revisit's
// CDXJ line and returns where the revisit lies in the segment being
// filled.
func (w *segmentWriter) appendRevisit(ex *fetcher.Exchange, crawlID, refersURI string, refersDate time.Time, refersTo, digest string, rv *fetcher.Revisit) (offset, length int64, err error) {
	req := warc.NewRequestRecord(ex.URL, ex.Date, ex.Request)
	rec, err := warc.NewRevisitRecord(warc.Revisit{
		TargetURI: ex.URL, Date: ex.Date, IP: ex.IP, Profile: rv.Profile,
		HTTPResponse: ex.Response, OriginalHeader: rv.OriginalHeader, PayloadDigest: digest,
		RefersToTargetURI: refersURI, RefersToDate: refersDate, RefersTo: refersTo, ConcurrentTo: warc.RecordID(req),
	})
	if err != nil {
		return 0, 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg.Count() == 0 {
		w.startLocked(time.Now())
	}
	if _, _, err := w.seg.Append(req); err != nil {
		return 0, 0, err
	}
	offset, length, err = w.seg.Append(rec)
	if err != nil {
		return 0, 0, err
	}
	if c, ok := w.seg.CDXJOf(rec, 0, offset, length, ""); ok {
		c.Crawl = crawlID
		w.cdx = append(w.cdx, c)
	}
	return offset, length, nil
}

// full reports whether the segment being filled has reached SegmentBytes:
// it is better stored now than at the next tick.
func (w *segmentWriter) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seg.Len() >= w.cfg.bytes
}

// startLocked chooses the object the empty segment goes to: the open one,
// or a new one, which starts with a warcinfo record.
func (w *segmentWriter) startLocked(now time.Time) {
	cfg := w.cfg
	f := w.file
	if w.appender != nil && f.key != "" && !f.broken && f.size < cfg.bytes && now.Sub(f.opened) < cfg.age {
		w.key = f.key
		return
	}
	if w.appender != nil && f.key != "" {
		w.toSeal = append(w.toSeal, f.key)
	}
	w.serial++
	stamp := strings.Replace(now.UTC().Format("20060102150405.000"), ".", "", 1) // Heritrix's 17 digits
	w.key = fmt.Sprintf("warc/%s/gridcrawl-%s-%05d-%s-%s.warc", now.UTC().Format("2006/01/02"), stamp, w.serial, keySafe(cfg.loader), cfg.run)
	if cfg.gzip {
		w.key += ".gz"
	}
	w.file = segFile{key: w.key, opened: now}
	_, _, _ = w.seg.Append(warc.NewWarcinfoRecord(now, map[string]string{
		"software": "gridcrawl", "format": "WARC File Format 1.1", "operator-loader": cfg.loader, "filename": w.key[strings.LastIndexByte(w.key, '/')+1:],
	}))
}

// keySafe makes a loader id usable inside one segment of an asset key.
func keySafe(id string) string {
	return strings.NewReplacer("/", "_", "\\", "_", " ", "_").Replace(strings.TrimLeft(id, "."))
}

// cut takes the records appended so far (none: a cut without a segment)
// and starts an empty segment, on the buffers of a stored one when it can.
func (w *segmentWriter) cut() segmentCut {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg.Count() == 0 {
		return segmentCut{}
	}
	c := segmentCut{seg: w.seg, cdx: w.cdx, key: w.key}
	w.seg, w.spare, w.cdx, w.spareCDX = w.spare, nil, w.spareCDX[:0], nil
	if w.seg == nil {
		w.seg = warc.NewSegment(w.cfg.gzip)
	}
	return c
}

// store writes c's records to c.key and their CDXJ lines to the key's index
// object (appending both when the store can). Once it returns nil, c.key
// and c.base say where the records lie (a record at offset o of the cut is
// at c.base+o of the object) and c's buffers went back to the writer.
// Called again after a failure, it does only what is left.
func (w *segmentWriter) store(ctx context.Context, c *segmentCut) error {
	if c.stored {
		return nil
	}
	if c.seg == nil {
		c.stored = true
		return nil
	}
	seg, key := c.seg, c.key
	var err error
	appended := false // by this call, to an appending store
	if !c.segStored { // tried again after a failed index: the segment is there
		var base int64
		if w.appender != nil {
			base, err = w.appender.Append(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len())
		} else {
			ctype := "application/warc"
			if w.cfg.gzip {
				ctype = "application/warc+gzip"
			}
			err = w.assets.Put(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len(), ctype)
		}
		if err == nil {
			c.segStored, c.base = true, base
			appended = w.appender != nil
		}
	}
	if err == nil && len(c.cdx) > 0 {
		// The index follows its segment: a flush whose lines are not
		// stored fails like one whose records are not, and the segment
		// object is not appended to again.
		err = w.storeIndex(ctx, key, c.base, c.cdx)
	}
	w.mu.Lock()
	shrank := false
	if w.file.key == key {
		// An object that grew from less than the writer appended to it
		// was deleted or replaced meanwhile: records of the earlier
		// object may be referred to by their offsets (the digest index),
		// so the key takes no more records.
		shrank = appended && c.base < w.file.size
		w.file.size = c.base + seg.Len()
		w.file.broken = err != nil || shrank
	}
	w.mu.Unlock()
	if shrank {
		w.log.Warn("segment object was deleted or replaced while open; opening another", "key", key)
	}
	if err != nil {
		return fmt.Errorf("store segment %q: %w", key, err)
	}
	w.met.WARCBytes(seg.Len())
	c.stored = true
	if seg.Len() <= 4*w.cfg.bytes {
		seg.Reset()
		w.mu.Lock()
		w.spare, w.spareCDX = seg, c.cdx[:0]
		w.mu.Unlock()
	}
	c.seg, c.cdx = nil, nil
	return nil
}

// storeIndex writes the CDXJ lines of records stored at base in the
// segment key, sorted, to the segment's index object (assets.CDXJKey):
// appended on an appending store, where the object is a series of sorted
// runs, one per flush, until the writer seals it (see sealIndex); one
// object per segment object elsewhere.
func (w *segmentWriter) storeIndex(ctx context.Context, key string, base int64, cdx []warc.CDXJ) error {
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
	if w.appender != nil {
		_, err = w.appender.Append(ctx, assets.CDXJKey(key), bytes.NewReader(body), int64(len(body)))
	} else {
		err = w.assets.Put(ctx, assets.CDXJKey(key), bytes.NewReader(body), int64(len(body)), assets.ContentTypeCDXJ)
	}
	if err != nil {
		return fmt.Errorf("store segment index %q: %w", assets.CDXJKey(key), err)
	}
	return nil
}

// sealClosed seals the indices of the segment objects closed since the
// last call (an appending store's objects roll over).
func (w *segmentWriter) sealClosed(ctx context.Context) {
	w.mu.Lock()
	toSeal := w.toSeal
	w.toSeal = nil
	w.mu.Unlock()
	for _, key := range toSeal {
		w.sealIndex(ctx, key)
	}
}

// sealIndex rewrites the index of the closed segment key, a series of
// sorted runs on an appending store, as one sorted file, which pywb can
// search. A failure leaves the runs, which gridcrawl's readers sort
// anyway, and is logged.
func (w *segmentWriter) sealIndex(ctx context.Context, key string) {
	ikey := assets.CDXJKey(key)
	rc, err := w.assets.Get(ctx, ikey, 0, -1)
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
		err = w.assets.Put(ctx, ikey, bytes.NewReader(sorted), int64(len(sorted)), assets.ContentTypeCDXJ)
	}
	if err != nil && ctx.Err() == nil {
		w.log.Warn("seal segment index", "key", ikey, "err", err)
	}
}

// close seals the index of the open segment object of an appending store,
// which nothing appends to once the loader stops.
func (w *segmentWriter) close(ctx context.Context) {
	w.mu.Lock()
	key := w.file.key
	w.file = segFile{}
	w.mu.Unlock()
	if w.appender != nil && key != "" {
		w.sealIndex(ctx, key)
	}
}

// renderedRecords returns the records of a rendered page: its DOM as a
// conversion record of the response respID, and a metadata record of how
// it was rendered.
func renderedRecords(url string, date time.Time, respID string, r *fetcher.Rendering) (dom, meta warc.Record) {
	dom = warc.NewConversionRecord(url, date, respID, "text/html; charset=utf-8", r.Res.DOM)
	fields := []string{"render-reason", r.Reason, "render-duration-ms", fmt.Sprint(r.Res.Duration.Milliseconds()),
		"render-requests", fmt.Sprint(r.Res.Requests), "render-refused", fmt.Sprint(r.Res.Refused),
		"render-bytes", fmt.Sprint(r.Res.Bytes), "render-final-url", r.Res.URL}
	for _, c := range r.Res.Cut {
		fields = append(fields, "render-cut", c)
	}
	for _, n := range r.Res.Navigations {
		fields = append(fields, "render-navigation-refused", n)
	}
	meta = warc.NewMetadataRecord(url, date, warc.RecordID(dom), fields...)
	return dom, meta
}
