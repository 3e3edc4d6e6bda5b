package mcp

import (
	"compress/gzip"
	"container/heap"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
)

// Limits of one page of the crawl log.
const (
	defaultLogLimit = 100
	maxLogLimit     = 1000
)

// urlRecord turns a transaction record into its crawl log form.
func urlRecord(r txindex.Record) contracts.URLRecord {
	out := contracts.URLRecord{Key: r.Key, URL: r.URL, Host: r.Host, Status: r.Status, StatusTime: r.StatusTime,
		Depth: r.Depth, Hops: r.Hops, Attempts: r.Attempts, Bytes: r.Bytes, History: []contracts.URLEvent{}}
	if r.Referrer != "" {
		out.Referrer = &r.Referrer
	}
	if r.HTTPStatus != 0 {
		out.HTTPStatus = &r.HTTPStatus
	}
	if r.MIMEType != "" {
		out.MIMEType = &r.MIMEType
	}
	if r.Render != "" {
		out.Render = &r.Render
	}
	if r.Error != "" {
		out.Reason = &r.Error
	}
	if r.Sitemap != "" {
		out.Sitemap = &r.Sitemap
	}
	out.Lastmod = r.Lastmod
	out.Recrawl, out.NextDue = urlRecrawl(r.Recrawl), r.NextDue
	if !r.CreatedAt.IsZero() {
		out.CreatedAt = &r.CreatedAt
	}
	for _, e := range r.History {
		out.History = append(out.History, contracts.URLEvent{Status: e.Status, Time: e.Time})
	}
	if r.Asset.Key != "" {
		out.WARC = &contracts.WARCRef{Segment: r.Asset.Key, Offset: r.Asset.Offset, Length: r.Asset.Length,
			URL: "/api/v1/crawls/" + url.PathEscape(r.CrawlID) + "/warc?key=" + url.QueryEscape(r.Key)}
	}
	return out
}

// urlRecrawl returns the API's form of a record's recrawl state, nil for
// none.
func urlRecrawl(rc *txindex.Recrawl) *contracts.URLRecrawl {
	if rc == nil {
		return nil
	}
	return &contracts.URLRecrawl{Fetched: rc.Fetched, Status: rc.Status, IntervalMS: rc.IntervalMS, Due: rc.Due,
		ETag: rc.ETag, LastModified: rc.LastModified, Digest: rc.Digest, RecordID: rc.RecordID, Stored: rc.Stored,
		Changes: rc.Changes, Revisits: rc.Revisits}
}

// knownCrawl answers 404 (or 500) and reports false when crawl id does not
// exist.
func (m *MCP) knownCrawl(w http.ResponseWriter, r *http.Request, id string) bool {
	_, err := m.deps.Profiles.Get(r.Context(), id)
	if errors.Is(err, profiles.ErrNotFound) {
		jsonapi.Error(w, http.StatusNotFound, "no such crawl", "")
		return false
	}
	if err != nil {
		m.log.Error("get crawl", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the crawl", "")
		return false
	}
	return true
}

// maxSortScan bounds the matching records a crawl log page in time or URL
// order reads: the transaction index lists records in key order only, so
// such a page scans every matching record (keeping only one page of them in
// memory). Past the bound the default order is key order, and an explicit
// sort=time or sort=url is refused with a hint to filter.
const maxSortScan = 50_000

// scanPage is how many records a sorting scan reads from the index at once.
const scanPage = 1000

// Crawl log orders (the sort parameter).
const (
	sortTime = "time"
	sortURL  = "url"
	sortKey  = "key"
)

// crawlLog serves GET /api/v1/crawls/{id}/urls: one URL's record with
// ?url=, else a page of the crawl's records filtered by status, reason and
// host, in the order sort asks (time: by status_time, the default; url; key:
// the index's order), continued with the opaque cursor of the page before.
func (m *MCP) crawlLog(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	q := r.URL.Query()
	if q.Has("url") {
		m.oneURL(w, r, id, q.Get("url"))
		return
	}
	f := txindex.Filter{Status: contracts.Status(q.Get("status")), Reason: q.Get("reason"), Host: q.Get("host")}
	if f.Status != "" && !f.Status.Valid() {
		var names []string
		for _, s := range contracts.Statuses {
			names = append(names, string(s))
		}
		jsonapi.Error(w, http.StatusBadRequest, "unknown status; one of "+strings.Join(names, ", "), "status")
		return
	}
	limit := defaultLogLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLogLimit {
			jsonapi.Error(w, http.StatusBadRequest, fmt.Sprintf("must be a whole number from 1 to %d", maxLogLimit), "limit")
			return
		}
		limit = n
	}
	order := q.Get("sort")
	switch order {
	case "", sortTime, sortURL, sortKey:
	default:
		jsonapi.Error(w, http.StatusBadRequest, `must be "time" (the default), "url" or "key"`, "sort")
		return
	}
	var cur logCursor
	if c := q.Get("cursor"); c != "" {
		var ok bool
		if cur, ok = parseLogCursor(c); !ok || order != "" && cur.order != order {
			jsonapi.Error(w, http.StatusBadRequest, "not a cursor of this listing", "cursor")
			return
		}
		order = cur.order
	}
	if order != sortKey {
		n, err := m.deps.Tx.CountMatching(r.Context(), id, f)
		if err != nil {
			m.log.Error("crawl log", "crawl_id", id, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's URLs", "")
			return
		}
		bound := int64(maxSortScan)
		if m.sortScanLimit > 0 {
			bound = int64(m.sortScanLimit)
		}
		switch {
		case n > bound && order == "":
			order = sortKey
		case n > bound:
			jsonapi.Error(w, http.StatusBadRequest, fmt.Sprintf("%d records match: sort=%s reads them all for every page, which it does for at most %d; filter by status, host or reason, or page in key order (sort=key)", n, order, bound), "sort")
			return
		case order == "":
			order = sortTime
		}
	}
	var recs []txindex.Record
	var err error
	if order == sortKey {
		recs, err = m.deps.Tx.Find(r.Context(), id, f, cur.key, limit)
	} else {
		recs, err = m.sortedPage(r, id, f, order, cur, limit)
	}
	if err != nil {
		m.log.Error("crawl log", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's URLs", "")
		return
	}
	out := contracts.CrawlLog{CrawlID: id, Sort: order, URLs: make([]contracts.URLRecord, 0, len(recs))}
	for _, rec := range recs {
		out.URLs = append(out.URLs, urlRecord(rec))
	}
	if len(recs) == limit {
		last := recs[len(recs)-1]
		c := logCursor{order: order, value: sortValue(order, last), key: last.Key}.String()
		out.NextCursor = &c
	}
	jsonapi.Write(w, http.StatusOK, out)
}

// logCursor is where a page of the crawl log ends: the order, and the sort
// value and key of its last record.
type logCursor struct {
	order, value, key string
}

// String encodes c: "k:KEY" for key order (the form of earlier cursors),
// else "ORDER\x00VALUE\x00KEY", in unpadded base64url.
func (c logCursor) String() string {
	raw := "k:" + c.key
	if c.order != sortKey {
		raw = c.order + "\x00" + c.value + "\x00" + c.key
	}
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseLogCursor(s string) (logCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return logCursor{}, false
	}
	if k, ok := strings.CutPrefix(string(b), "k:"); ok {
		return logCursor{order: sortKey, key: k}, true
	}
	parts := strings.SplitN(string(b), "\x00", 3)
	if len(parts) != 3 || parts[0] != sortTime && parts[0] != sortURL {
		return logCursor{}, false
	}
	return logCursor{order: parts[0], value: parts[1], key: parts[2]}, true
}

// sortValue is what record r is ordered by: its status time as fixed-width
// nanoseconds (so that strings compare as times), or its URL.
func sortValue(order string, r txindex.Record) string {
	if order == sortURL {
		return r.URL
	}
	return fmt.Sprintf("%020d", max(r.StatusTime.UnixNano(), 0))
}

// sortedPage returns the limit records of crawl id matching f that follow
// cur in order (by sort value, then key). The index lists in key order
// only, so it reads every matching record, scanPage at a time, and keeps
// the limit first in a heap: memory of one page, time of a scan.
func (m *MCP) sortedPage(r *http.Request, id string, f txindex.Filter, order string, cur logCursor, limit int) ([]txindex.Record, error) {
	h := &recordHeap{}
	after := ""
	for {
		recs, err := m.deps.Tx.Find(r.Context(), id, f, after, scanPage)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			v := sortValue(order, rec)
			if cur.key != "" && (v < cur.value || v == cur.value && rec.Key <= cur.key) {
				continue
			}
			if h.Len() < limit {
				heap.Push(h, sortedRecord{v, rec})
			} else if e := h.items[0]; v < e.value || v == e.value && rec.Key < e.rec.Key {
				h.items[0] = sortedRecord{v, rec}
				heap.Fix(h, 0)
			}
		}
		if len(recs) < scanPage {
			break
		}
		after = recs[len(recs)-1].Key
	}
	out := make([]txindex.Record, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(sortedRecord).rec
	}
	return out, nil
}

type sortedRecord struct {
	value string
	rec   txindex.Record
}

// recordHeap is a max-heap of records by (value, key): its top is the
// last of the page being gathered.
type recordHeap struct {
	items []sortedRecord
}

func (h *recordHeap) Len() int { return len(h.items) }
func (h *recordHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	return a.value > b.value || a.value == b.value && a.rec.Key > b.rec.Key
}
func (h *recordHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *recordHeap) Push(x any)    { h.items = append(h.items, x.(sortedRecord)) }
func (h *recordHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// oneURL answers the record of raw, normalized as the crawler does.
func (m *MCP) oneURL(w http.ResponseWriter, r *http.Request, id, raw string) {
	u, err := urlnorm.Normalize(raw)
	if err != nil {
		jsonapi.Error(w, http.StatusBadRequest, err.Error(), "url")
		return
	}
	rec, err := m.deps.Tx.Get(r.Context(), txindex.Key(id, u))
	if errors.Is(err, txindex.ErrNotFound) {
		jsonapi.Error(w, http.StatusNotFound, "the crawl has no record of this URL", "url")
		return
	}
	if err != nil {
		m.log.Error("get url record", "crawl_id", id, "url", u, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the URL's record", "")
		return
	}
	jsonapi.Write(w, http.StatusOK, urlRecord(rec))
}

// maxWARCRecord bounds the record size the WARC endpoint serves.
const maxWARCRecord = 1 << 30

// warcRecord serves GET /api/v1/crawls/{id}/warc?key=K: the WARC response
// record of one URL, read from its segment (a gzip member of a .gz segment
// is decompressed), as application/warc.
func (m *MCP) warcRecord(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		jsonapi.Error(w, http.StatusBadRequest, "the record key is required", "key")
		return
	}
	rec, err := m.deps.Tx.Get(r.Context(), key)
	if errors.Is(err, txindex.ErrNotFound) || err == nil && rec.CrawlID != id {
		jsonapi.Error(w, http.StatusNotFound, "the crawl has no record with this key", "key")
		return
	}
	if err != nil {
		m.log.Error("get url record", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the URL's record", "")
		return
	}
	a := rec.Asset
	if a.Key == "" || a.Length <= 0 || a.Length > maxWARCRecord || m.deps.Assets == nil {
		jsonapi.Error(w, http.StatusNotFound, "the URL has no WARC record", "key")
		return
	}
	out := progressWriter(w) // a large record outlasts the server's WriteTimeout
	rc, err := m.deps.Assets.Get(r.Context(), a.Key, a.Offset, a.Length)
	if err != nil {
		m.log.Error("read warc record", "crawl_id", id, "url", rec.URL, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the WARC record", "")
		return
	}
	defer rc.Close()
	var body io.Reader = rc
	if strings.HasSuffix(a.Key, ".gz") {
		zr, err := gzip.NewReader(rc)
		if err != nil {
			m.log.Error("read warc record", "crawl_id", id, "url", rec.URL, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not read the WARC record", "")
			return
		}
		zr.Multistream(false) // the record's member only
		body = zr
	}
	w.Header().Set("Content-Type", "application/warc")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.warc"`, rec.Key))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(out, body); err != nil && r.Context().Err() == nil {
		m.log.Warn("send warc record", "crawl_id", id, "url", rec.URL, "err", err)
	}
}
