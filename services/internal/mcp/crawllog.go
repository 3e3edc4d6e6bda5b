package mcp

import (
	"compress/gzip"
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

// crawlLog serves GET /api/v1/crawls/{id}/urls: one URL's record with
// ?url=, else a page of the crawl's records in key order, filtered by
// status, reason and host, continued with the opaque cursor of the page
// before.
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
	after := ""
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !strings.HasPrefix(string(b), "k:") {
			jsonapi.Error(w, http.StatusBadRequest, "not a cursor of this listing", "cursor")
			return
		}
		after = strings.TrimPrefix(string(b), "k:")
	}
	recs, err := m.deps.Tx.Find(r.Context(), id, f, after, limit)
	if err != nil {
		m.log.Error("crawl log", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's URLs", "")
		return
	}
	out := contracts.CrawlLog{CrawlID: id, URLs: make([]contracts.URLRecord, 0, len(recs))}
	for _, rec := range recs {
		out.URLs = append(out.URLs, urlRecord(rec))
	}
	if len(recs) == limit {
		c := base64.RawURLEncoding.EncodeToString([]byte("k:" + recs[len(recs)-1].Key))
		out.NextCursor = &c
	}
	jsonapi.Write(w, http.StatusOK, out)
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
