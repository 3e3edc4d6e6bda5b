package fetcher

import (
	"context"
	"net/http"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
)

// Recrawl: a continuous crawl's refetch is conditional on what the last
// fetch stored (If-None-Match, If-Modified-Since). A page found unchanged,
// by a 304 or by a payload digest equal to the stored one, is written as a
// WARC revisit record that refers to the stored response, and settles back
// as indexed without a crawler contract: it is neither parsed nor indexed
// again. Every fetch, changed or not, leaves the record's recrawl state
// with its next due time.

// Revisit is what the loader knows of a page found unchanged.
type Revisit struct {
	Profile string // warc.ProfileServerNotModified or warc.ProfileIdenticalPayloadDigest
	// originalHeader is the stored response's status line and header (a
	// 304's revisit block is that header freshened); nil when it could not
	// be read.
	OriginalHeader []byte
}

// setConditional makes req conditional on the validators the last fetch of
// a continuous crawl's page stored.
func setConditional(req *http.Request, t *queueing.Task) {
	if t.Prev == nil || t.Prev.Recrawl == nil || !hasStored(t.Prev) {
		return
	}
	if v := t.Prev.Recrawl.ETag; v != "" {
		req.Header.Set("If-None-Match", v)
	}
	if v := t.Prev.Recrawl.LastModified; v != "" {
		req.Header.Set("If-Modified-Since", v)
	}
}

// hasStored reports whether rec was settled as indexed with a stored
// response that a revisit record can refer to: only such a page can be
// found unchanged (a page that failed, redirected or was excluded since is
// fetched and parsed in full).
func hasStored(rec *txindex.Record) bool {
	rc := rec.Recrawl
	return rc != nil && rc.RecordID != "" && !rc.Stored.IsZero() && rec.Asset.Key != "" && PreviousStatus(rec) == contracts.Indexed
}

// PreviousStatus is the status rec was settled in before the due check took
// it back to to-be-loaded: the event before the last of its history.
func PreviousStatus(rec *txindex.Record) contracts.Status {
	h := rec.History
	if len(h) < 2 || h[len(h)-1].Status != contracts.ToBeLoaded {
		return ""
	}
	return h[len(h)-2].Status
}

// unchanged decides whether ex, a fetch of a continuous crawl's page, found
// it as stored: a 304 answer, or a 200 whose payload digest is the stored
// one. It returns nil for a changed page, a first fetch and a one-shot
// crawl.
func (f *Fetcher) unchanged(ctx context.Context, t *queueing.Task, ex *Exchange) *Revisit {
	if t.Prev == nil || !hasStored(t.Prev) || ex.Truncated {
		return nil
	}
	switch {
	case ex.Status == http.StatusNotModified:
		return &Revisit{Profile: warc.ProfileServerNotModified, OriginalHeader: f.storedHeader(ctx, t)}
	case ex.Status == http.StatusOK && t.Prev.Recrawl.Digest != "" && warc.PayloadDigest(ex.Response) == t.Prev.Recrawl.Digest:
		return &Revisit{Profile: warc.ProfileIdenticalPayloadDigest}
	}
	return nil
}

// storedHeader reads the status line and header of the stored response of
// t's page, or returns nil (logged) when it cannot: the revisit record then
// holds the 304's own header.
func (f *Fetcher) storedHeader(ctx context.Context, t *queueing.Task) []byte {
	ref := t.Prev.Asset
	rc, err := f.deps.Assets.Get(ctx, ref.Key, ref.Offset, ref.Length)
	if err == nil {
		defer rc.Close()
		var rec warc.Record
		if rec, err = warc.ReadRecord(rc, f.cfg.MaxBodyBytes+1<<20); err == nil {
			var h []byte
			if h, err = warc.HTTPHeader(rec.Block); err == nil {
				return h
			}
		}
	}
	f.log.Warn("read stored response for a Revisit record", "url", t.URL, "crawl_id", t.CrawlID, "asset", ref.Key, "err", err)
	return nil
}
