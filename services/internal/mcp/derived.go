package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/extract"
	"github.com/gridcrawl/gridcrawl/pkg/httpbody"
	"github.com/gridcrawl/gridcrawl/pkg/segview"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/crawler"
	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// Common Crawl's derived formats of a segment, made on demand by streaming
// the segment (only the record being read is in memory):
//
//   - NAME.warc.wet.gz: a warcinfo record, then one text/plain conversion
//     record per page of the crawl that the segment holds the indexed
//     response of, whose block is the indexed document's title, a line
//     break and its text, extracted by the crawler's own code
//     (crawler.TextOf). A rendered page's text comes from its DOM (its
//     conversion record). Revisit records are skipped, as in Common
//     Crawl's WET files: their page's text is in the record they revisit.
//   - NAME.warc.wat.gz: a warcinfo record, then one metadata record per
//     record of the crawl in the segment (Common Crawl's JSON envelope,
//     warc.Envelope), with the HTML-Metadata of HTML responses; a
//     rendered page's response and DOM both get the DOM's (emitWAT).
//
// A segment may hold records of several crawls: served under a crawl, a
// derived file is made of the crawl's part of the segment, as the segment
// download serves it (pkg/segview), and the WAT's offsets are in that
// part.

// derivedKind is the kind of derived file a segment name asks for: "wet",
// "wat" or "".
func derivedKind(name string) string {
	switch {
	case strings.HasSuffix(name, ".warc"+warc.WETSuffix):
		return "wet"
	case strings.HasSuffix(name, ".warc"+warc.WATSuffix):
		return "wat"
	}
	return ""
}

// derivedSource returns the segment names a derived file name may come
// from: NAME.warc.gz, then NAME.warc (both derive NAME.warc.wet.gz, as
// Common Crawl names them).
func derivedSource(name string) []string {
	base := strings.TrimSuffix(strings.TrimSuffix(name, warc.WETSuffix), warc.WATSuffix)
	return []string{base + ".gz", base}
}

// crawlPage is a page of a crawl whose indexed response lies in a segment.
type crawlPage struct {
	rendered bool
}

// derivedView returns the crawl's part of segment key and the crawl's
// pages whose indexed response it holds, by offset in the view. The
// segment's index names each line's crawl, so the crawl's URL records read
// are only those of the URLs in the segment, whatever the crawl's size; an
// index without names (a segment older than them) takes a scan of the
// crawl's records instead.
func (m *MCP) derivedView(ctx context.Context, id, key string) (segview.View, map[int64]crawlPage, error) {
	scope := m.exportScope(id, []string{id}, nil)
	sc := scope.scope(ctx, key)
	member := sc.Member
	unnamed := false
	var urls []string
	seen := map[string]bool{}
	sc.Member = func(c warc.CDXJ) bool {
		ok := member(c)
		switch {
		case ok && c.Crawl == "":
			unnamed = true
		case ok && !seen[c.URL]:
			seen[c.URL] = true
			urls = append(urls, c.URL)
		}
		return ok
	}
	v, err := scope.viewOf(ctx, key, sc, nil)
	if err != nil {
		return v, nil, err
	}
	pages := map[int64]crawlPage{}
	point := func(rec txindex.Record) {
		if rec.Asset.Key != key || rec.Status != contracts.Indexed {
			return
		}
		off := rec.Asset.Offset
		if v.Sel != nil {
			var ok bool
			if off, ok = v.Sel.Map(off); !ok {
				return
			}
		}
		pages[off] = crawlPage{rendered: rec.Render != ""}
	}
	if unnamed {
		if err := m.eachRecord(ctx, id, point); err != nil {
			return v, nil, err
		}
	}
	for start := 0; start < len(urls); start += listPage {
		batch := urls[start:min(start+listPage, len(urls))]
		keys := make([]string, len(batch))
		for i, u := range batch {
			keys[i] = txindex.Key(id, u)
		}
		recs, err := m.deps.Tx.GetMany(ctx, keys)
		if err != nil {
			return v, nil, fmt.Errorf("get records of crawl %q: %w", id, err)
		}
		for _, rec := range recs {
			point(rec)
		}
	}
	return v, pages, nil
}

// eachRecord calls f with every URL record of crawl id.
func (m *MCP) eachRecord(ctx context.Context, id string, f func(txindex.Record)) error {
	after := ""
	for {
		recs, err := m.deps.Tx.List(ctx, id, "", after, listPage)
		if err != nil {
			return fmt.Errorf("list records of crawl %q: %w", id, err)
		}
		for _, rec := range recs {
			f(rec)
		}
		if len(recs) < listPage {
			return nil
		}
		after = recs[len(recs)-1].Key
	}
}

// textConfig is the crawler configuration WET text is extracted with.
func (m *MCP) textConfig() crawler.Config {
	c := crawler.Config{MaxBodyBytes: m.cfg.MaxBodyBytes, MaxTextBytes: m.cfg.MaxTextBytes, MaxLinks: m.cfg.MaxLinks}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.MaxTextBytes <= 0 {
		c.MaxTextBytes = 1 << 20
	}
	if c.MaxLinks <= 0 {
		c.MaxLinks = 5000
	}
	return c
}

// segmentDerived serves GET /api/v1/crawls/{id}/segments/{name} for a name
// ending in .warc.wet.gz or .warc.wat.gz (derivedKind).
func (m *MCP) segmentDerived(w http.ResponseWriter, r *http.Request, id, name, kind string) {
	if m.deps.Assets == nil {
		jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
		return
	}
	out := progressWriter(w) // deriving a large segment's file outlasts the server's WriteTimeout
	var (
		v     segview.View
		pages map[int64]crawlPage
		key   string
	)
	for _, src := range derivedSource(name) {
		k := segmentKey(wholeName(src, id))
		if k == "" {
			continue
		}
		var err error
		v, pages, err = m.derivedView(r.Context(), id, k)
		if errors.Is(err, assets.ErrNotFound) {
			continue
		}
		if err != nil {
			m.log.Error("read segment", "crawl_id", id, "key", k, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment", "")
			return
		}
		key = k
		break
	}
	if key == "" {
		jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
		return
	}
	if v.Members == 0 {
		jsonapi.Error(w, http.StatusNotFound, "the segment holds no record of the crawl", "name")
		return
	}
	rc, err := segview.Open(r.Context(), m.deps.Assets, v, 0, -1)
	if err != nil {
		m.log.Error("read segment", "crawl_id", id, "key", key, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment", "")
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/warc+gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, name))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	source := path.Base(key)
	if v.Name != "" {
		source = v.Name // the part of the segment the crawl's download is
	}
	d := &deriver{kind: kind, name: name, source: source, pages: pages, cfg: m.textConfig(), out: bw,
		rendered: map[string]warc.Scanned{}}
	err = d.run(warc.NewScanner(rc, warc.DefaultMaxBlock))
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if r.Context().Err() == nil {
			m.log.Error("derive segment file", "crawl_id", id, "key", key, "kind", kind, "err", err)
		}
		// The status is sent: cut the stream, which the client sees as an
		// error, rather than end it as if complete.
		panic(http.ErrAbortHandler)
	}
}

// deriver writes the WET or WAT file of a crawl's part of a segment (every
// record it reads is the crawl's).
type deriver struct {
	kind, name, source string
	// pages are the crawl's indexed pages by the offset of their response.
	pages map[int64]crawlPage
	cfg   crawler.Config
	out   io.Writer

	wet *warc.WETWriter
	wat *warc.WATWriter
	// rendered holds the response heads of rendered pages whose DOM has
	// not come yet, by record id (WET).
	rendered map[string]warc.Scanned
	// waiting are rendered pages' responses whose DOM has not come yet
	// (WAT), in order.
	waiting []waitingEnvelope
}

func (d *deriver) run(sc *warc.Scanner) error {
	for {
		s, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := d.open(s); err != nil {
			return err
		}
		if err := d.record(s); err != nil {
			return err
		}
	}
	if err := d.open(warc.Scanned{}); err != nil {
		return err
	}
	if d.wat != nil {
		return d.flushWaiting()
	}
	return nil
}

// open writes the derived file's warcinfo record, dated as the segment's
// first record, before anything else.
func (d *deriver) open(first warc.Scanned) error {
	if d.wet != nil || d.wat != nil {
		return nil
	}
	date, err := time.Parse(time.RFC3339Nano, first.Header.Get(warc.FieldDate))
	if err != nil {
		date = time.Unix(0, 0)
	}
	fields := map[string]string{"software": "gridcrawl", "format": "WARC File Format 1.1",
		"description": "Common Crawl " + strings.ToUpper(d.kind) + " of " + d.source, "isPartOf": d.source}
	if d.kind == "wet" {
		d.wet, err = warc.NewWETWriter(d.out, d.name, date, fields)
	} else {
		d.wat, err = warc.NewWATWriter(d.out, d.name, d.source, date, fields)
	}
	return err
}

// record takes the next record of the segment.
func (d *deriver) record(s warc.Scanned) error {
	return d.emit(s, s.Header.Get(warc.FieldType))
}

// maxWaiting bounds the rendered pages' responses a WAT waits with for
// their DOM: past it the oldest is written with its own HTML metadata.
const maxWaiting = 8

func (d *deriver) emit(s warc.Scanned, typ string) error {
	if d.wat != nil {
		return d.emitWAT(s, typ)
	}
	switch typ {
	case warc.TypeResponse:
		page, ok := d.pages[s.Offset]
		if !ok {
			return nil
		}
		if page.rendered {
			// Its text is its DOM's, which comes in a conversion record
			// after it: keep the response's head until then.
			head := s
			if end := bytes.Index(s.Block, []byte("\r\n\r\n")); end >= 0 {
				head.Block = bytes.Clone(s.Block[:end+4])
			}
			d.rendered[warc.RecordID(s.Record)] = head
			return nil
		}
		return d.writeText(s, nil)
	case warc.TypeConversion:
		resp, ok := d.rendered[s.Header.Get(warc.FieldRefersTo)]
		if !ok {
			return nil
		}
		delete(d.rendered, s.Header.Get(warc.FieldRefersTo))
		return d.writeText(resp, s.Block)
	}
	return nil
}

// emitWAT writes the envelope of s. The envelope of a rendered page's
// response waits for the page's DOM (its conversion record, which the
// loader writes after it), whose HTML metadata it takes: the links the
// crawler followed, where WAT readers look for them. It is written just
// before the DOM's own envelope.
func (d *deriver) emitWAT(s warc.Scanned, typ string) error {
	switch typ {
	case warc.TypeResponse:
		if d.pages[s.Offset].rendered {
			if len(d.waiting) >= maxWaiting {
				if err := d.writeWaiting(d.waiting[0], nil); err != nil {
					return err
				}
				d.waiting = d.waiting[1:]
			}
			// The envelope without HTML metadata, not the record: its
			// block is no longer needed.
			d.waiting = append(d.waiting, waitingEnvelope{header: s.Header, offset: s.Offset,
				env: warc.Envelope(s, d.source, nil), own: d.htmlMeta(s, typ)})
			return nil
		}
	case warc.TypeConversion:
		meta := d.htmlMeta(s, typ)
		for i, w := range d.waiting {
			if w.header.Get(warc.FieldRecordID) == s.Header.Get(warc.FieldRefersTo) {
				d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
				if err := d.writeWaiting(w, meta); err != nil {
					return err
				}
				break
			}
		}
		return d.wat.Write(s, meta)
	}
	return d.wat.Write(s, d.htmlMeta(s, typ))
}

// waitingEnvelope is the envelope of a rendered page's response waiting
// for its DOM's HTML metadata; own is the response's own.
type waitingEnvelope struct {
	header warc.Header
	offset int64
	env    warc.WATEnvelope
	own    any
}

// writeWaiting writes w's envelope with the HTML metadata html (nil: the
// response's own).
func (d *deriver) writeWaiting(w waitingEnvelope, html any) error {
	if html == nil {
		html = w.own
	}
	if html != nil {
		w.env.SetHTML(html)
	}
	return d.wat.WriteEnvelope(w.header, w.offset, w.env)
}

// flushWaiting writes the envelopes of rendered pages' responses whose DOM
// never came, with their own HTML metadata.
func (d *deriver) flushWaiting() error {
	for _, w := range d.waiting {
		if err := d.writeWaiting(w, nil); err != nil {
			return err
		}
	}
	d.waiting = nil
	return nil
}

// writeText writes the WET record of the response resp (dom: the DOM of a
// rendered page).
func (d *deriver) writeText(resp warc.Scanned, dom []byte) error {
	uri := resp.Header.Get(warc.FieldTargetURI)
	t, ok := crawler.TextOf(d.cfg, uri, resp.Block, dom)
	if !ok {
		return nil
	}
	return d.wet.Write(warc.WETPage{TargetURI: uri, Date: resp.Header.Get(warc.FieldDate),
		RecordID: warc.RecordID(resp.Record), Title: t.Title, Text: t.Text})
}

// htmlMeta returns the HTML-Metadata of an HTML response (2xx) or an HTML
// conversion record (a rendered page's DOM), or nil.
func (d *deriver) htmlMeta(s warc.Scanned, typ string) any {
	var body []byte
	var ctype string
	switch typ {
	case warc.TypeResponse:
		status, header, raw, err := warc.ParseHTTPResponse(s.Block)
		if err != nil || status < 200 || status >= 300 {
			return nil
		}
		ctype = header.Get("Content-Type")
		if body, err = httpbody.Decode(header, raw, d.cfg.MaxBodyBytes); err != nil {
			return nil
		}
	case warc.TypeConversion:
		ctype, body = s.Header.Get(warc.FieldContentType), s.Block
	default:
		return nil
	}
	if !extract.IsHTML(extract.MediaType(ctype), body) {
		return nil
	}
	meta, err := extract.Metadata(bytes.NewReader(body), ctype,
		extract.MetaLimits{MaxItems: d.cfg.MaxLinks, MaxBytes: max(64<<10, 4*len(body))})
	if err != nil {
		return nil
	}
	return meta
}
