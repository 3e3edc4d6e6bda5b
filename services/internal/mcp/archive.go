package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/cdxjsort"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/segview"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// Archive output: a crawl's WARC segments (listed, downloaded whole or by
// range), their CDXJ indexes, the crawl's merged CDXJ and its indexed
// documents as JSON lines.
//
// A segment belongs to the loader that wrote it and may hold records of
// several crawls; a crawl's segments are those its URL records point into.
// Served under a crawl, a segment is the crawl's part of it (see
// pkg/segview): its records, its requests, DOMs and metadata, and the
// segment's warcinfo record, byte for byte; the crawl's index lines point
// into that part. A segment whose records are all the crawl's is served as
// stored; a part is a file of its own, named for the crawl (partName).

// exportScope says which records of the segments an export holds: those
// of the crawls ids, and, held alone, the originals of their revisits (by
// segment key and offset, see waczOriginals).
type exportScope struct {
	m *MCP
	// label names the parts of segments (the crawl's id, or the
	// collection's name).
	label     string
	ids       []string
	originals map[string]map[int64]bool
	// pointed are the offsets the crawls' URL records point to, by
	// segment key, read for the first line without a crawl name (an index
	// written before the names); err is why they could not be.
	pointed map[string]map[int64]bool
	err     error
}

func (m *MCP) exportScope(label string, ids []string, originals map[string]map[int64]bool) *exportScope {
	return &exportScope{m: m, label: label, ids: ids, originals: originals}
}

// partName is the file name of the part of segment name (NAME.warc.gz or
// NAME.warc) an export labelled label holds: NAME_label.warc.gz. The
// parts two crawls hold of one segment are different files: their lines
// point into different bytes.
func partName(name, label string) string {
	label = partLabel(label)
	for _, ext := range []string{".warc.gz", ".warc"} {
		if base, ok := strings.CutSuffix(name, ext); ok {
			return base + "_" + label + ext
		}
	}
	return name + "_" + label
}

// partLabel is label as a part of a file name.
func partLabel(label string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e || strings.ContainsRune(`/\"_`, r) {
			return '-'
		}
		return r
	}, label)
}

// wholeName returns the name of the segment whose part crawl id holds is
// named name (see partName), or name itself.
func wholeName(name, id string) string {
	for _, ext := range []string{".warc.gz", ".warc"} {
		if base, ok := strings.CutSuffix(name, "_"+partLabel(id)+ext); ok {
			return base + ext
		}
	}
	return name
}

// scope is the segview scope of segment key.
func (e *exportScope) scope(ctx context.Context, key string) segview.Scope {
	return segview.Scope{
		PartName: partName(path.Base(key), e.label),
		Member: func(c warc.CDXJ) bool {
			if c.Crawl != "" {
				return slices.Contains(e.ids, c.Crawl)
			}
			if e.pointed == nil && e.err == nil {
				e.pointed = map[string]map[int64]bool{}
				for _, id := range e.ids {
					segs, err := e.m.crawlSegments(ctx, id)
					if err != nil {
						e.err = err
						break
					}
					for _, s := range segs {
						if e.pointed[s.key] == nil {
							e.pointed[s.key] = map[int64]bool{}
						}
						maps.Copy(e.pointed[s.key], s.offsets)
					}
				}
			}
			return e.pointed[key][c.Offset]
		},
		Alone: func(c warc.CDXJ) bool { return e.originals[key][c.Offset] },
	}
}

// view builds the export's view of segment key, calling yield (when not
// nil) with the index lines it holds.
func (e *exportScope) view(ctx context.Context, key string, yield func([]byte) error) (segview.View, error) {
	return e.viewOf(ctx, key, e.scope(ctx, key), yield)
}

func (e *exportScope) viewOf(ctx context.Context, key string, sc segview.Scope, yield func([]byte) error) (segview.View, error) {
	if yield == nil {
		yield = func([]byte) error { return nil }
	}
	v, err := segview.Build(ctx, e.m.deps.Assets, key, sc, maxWARCRecord, yield)
	if e.err != nil {
		return v, e.err
	}
	return v, err
}

// crawlSegment is a segment of a crawl with the offsets of the crawl's
// response records in it.
type crawlSegment struct {
	key     string
	offsets map[int64]bool
}

// listPage is how many records one step of a segment scan reads.
const listPage = 1000

// crawlSegments returns the segments the records of crawl id point into, in
// key order (which is the order they were opened in, per loader).
func (m *MCP) crawlSegments(ctx context.Context, id string) ([]crawlSegment, error) {
	byKey := map[string]*crawlSegment{}
	after := ""
	for {
		recs, err := m.deps.Tx.List(ctx, id, "", after, listPage)
		if err != nil {
			return nil, fmt.Errorf("list records of crawl %q: %w", id, err)
		}
		for _, rec := range recs {
			if rec.Asset.Key == "" {
				continue
			}
			s := byKey[rec.Asset.Key]
			if s == nil {
				s = &crawlSegment{key: rec.Asset.Key, offsets: map[int64]bool{}}
				byKey[rec.Asset.Key] = s
			}
			s.offsets[rec.Asset.Offset] = true
		}
		if len(recs) < listPage {
			break
		}
		after = recs[len(recs)-1].Key
	}
	out := make([]crawlSegment, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b crawlSegment) int { return strings.Compare(a.key, b.key) })
	return out, nil
}

func segmentURL(id, name string) string {
	return "/api/v1/crawls/" + url.PathEscape(id) + "/segments/" + url.PathEscape(name)
}

// listSegments serves GET /api/v1/crawls/{id}/segments.
func (m *MCP) listSegments(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	segs, err := m.crawlSegments(r.Context(), id)
	if err != nil {
		m.log.Error("list segments", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's segments", "")
		return
	}
	out := contracts.SegmentList{CrawlID: id, Segments: make([]contracts.Segment, 0, len(segs))}
	scope := m.exportScope(id, []string{id}, nil)
	for _, s := range segs {
		name := path.Base(s.key)
		var size *int64
		var modified *time.Time
		if m.deps.Assets != nil {
			// The size is the crawl's part's, which takes the segment's
			// index (and, for a segment holding other crawls' records, a
			// read of the segment).
			v, err := scope.view(r.Context(), s.key, nil)
			switch {
			case err == nil:
				if v.Size >= 0 {
					size = &v.Size
					out.TotalSize += v.Size
				}
				if !v.Modified.IsZero() {
					modified = &v.Modified
				}
				if v.Name != "" {
					name = v.Name
				}
			case !errors.Is(err, assets.ErrNotFound):
				m.log.Error("read segment", "crawl_id", id, "key", s.key, "err", err)
				jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment's size", "")
				return
			}
		}
		out.Segments = append(out.Segments, contracts.Segment{Name: name, Key: s.key, Size: size, Modified: modified,
			Records: int64(len(s.offsets)), URL: segmentURL(id, name), CDXJURL: segmentURL(id, name+assets.CDXJSuffix),
			WETURL: segmentURL(id, warc.DerivedName(name, warc.WETSuffix)), WATURL: segmentURL(id, warc.DerivedName(name, warc.WATSuffix))})
	}
	jsonapi.Write(w, http.StatusOK, out)
}

// segmentKey returns the asset key of the segment file name (the loader
// files a segment opened at stamp YYYYMMDD... under warc/YYYY/MM/DD/), or
// "" for a name no loader writes.
func segmentKey(name string) string {
	base := strings.TrimSuffix(name, assets.CDXJSuffix)
	if strings.ContainsAny(base, "/\\") || !strings.HasPrefix(base, "gridcrawl-") ||
		!strings.HasSuffix(base, ".warc") && !strings.HasSuffix(base, ".warc.gz") {
		return ""
	}
	stamp := strings.TrimPrefix(base, "gridcrawl-")
	if len(stamp) < 8 {
		return ""
	}
	for _, c := range stamp[:8] {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return "warc/" + stamp[:4] + "/" + stamp[4:6] + "/" + stamp[6:8] + "/" + base
}

// segmentFile serves GET /api/v1/crawls/{id}/segments/{name}: the crawl's
// part of the segment (one gzip member per record for .warc.gz), with
// single byte ranges (Range: bytes=...) of it when its size is known; and,
// for a name ending in .cdxj, the crawl's lines of the segment's CDXJ
// index, sorted, pointing into that part. A segment holding no record of
// the crawl is not found.
func (m *MCP) segmentFile(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	if !m.knownCrawl(w, r, id) {
		return
	}
	if kind := derivedKind(name); kind != "" {
		m.segmentDerived(w, r, id, name, kind)
		return
	}
	key := segmentKey(wholeName(strings.TrimSuffix(name, assets.CDXJSuffix), id))
	if key == "" || m.deps.Assets == nil {
		jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
		return
	}
	out := progressWriter(w) // a large segment outlasts the server's WriteTimeout
	scope := m.exportScope(id, []string{id}, nil)
	if strings.HasSuffix(name, assets.CDXJSuffix) {
		err := m.sendCDXJ(w, out, r, id, name, func(add func([]byte) error) error {
			v, err := scope.view(r.Context(), key, add)
			if err == nil && v.Members == 0 {
				err = errNotTheCrawls
			}
			return err
		})
		switch {
		case errors.Is(err, assets.ErrNotFound):
			jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
		case errors.Is(err, errNotTheCrawls):
			jsonapi.Error(w, http.StatusNotFound, "the segment holds no record of the crawl", "name")
		case err != nil:
			m.log.Error("read segment index", "crawl_id", id, "key", key, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment's index", "")
		}
		return
	}
	v, err := scope.view(r.Context(), key, nil)
	switch {
	case errors.Is(err, assets.ErrNotFound):
		jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
		return
	case err != nil:
		m.log.Error("read segment", "crawl_id", id, "key", key, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment", "")
		return
	case v.Members == 0:
		jsonapi.Error(w, http.StatusNotFound, "the segment holds no record of the crawl", "name")
		return
	}
	size := v.Size
	offset, length, partial, ok := byteRange(r.Header.Get("Range"), size)
	if !ok {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		jsonapi.Error(w, http.StatusRequestedRangeNotSatisfiable, "the range is not within the segment", "Range")
		return
	}
	rc, err := segview.Open(r.Context(), m.deps.Assets, v, offset, length)
	if errors.Is(err, assets.ErrNotFound) {
		jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
		return
	}
	if err != nil {
		m.log.Error("read segment", "crawl_id", id, "key", key, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment", "")
		return
	}
	defer rc.Close()
	ctype := "application/warc"
	if strings.HasSuffix(name, ".gz") {
		ctype = "application/warc+gzip" // stored compressed: no Content-Encoding, the file is .warc.gz
	}
	if v.Name != "" {
		name = v.Name
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, name))
	code := http.StatusOK
	if size >= 0 {
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
		if partial {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", offset, offset+length-1, size))
			code = http.StatusPartialContent
		}
	}
	w.WriteHeader(code)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(out, rc); err != nil && r.Context().Err() == nil {
		m.log.Warn("send segment", "crawl_id", id, "key", key, "err", err)
	}
}

// errNotTheCrawls is a segment that holds no record of the crawl.
var errNotTheCrawls = errors.New("the segment holds no record of the crawl")

// byteRange reads a Range header for an object of size bytes (-1: unknown,
// which serves the whole object): the offset and length to send, whether
// that is a part, and false for a range that is not satisfiable. Only one
// range is served; a header that is not a single byte range is ignored, as
// RFC 9110 allows.
func byteRange(h string, size int64) (offset, length int64, partial, ok bool) {
	if size < 0 {
		return 0, -1, false, true
	}
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, size, false, true
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, size, false, true
	}
	if first == "" { // the last n bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n <= 0 {
			return 0, size, false, err != nil
		}
		n = min(n, size)
		return size - n, n, true, size > 0
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || start < 0 {
		return 0, size, false, true
	}
	if start >= size {
		return 0, 0, false, false
	}
	end := size - 1
	if last != "" {
		e, err := strconv.ParseInt(last, 10, 64)
		if err != nil || e < start {
			return 0, size, false, true
		}
		end = min(e, size-1)
	}
	return start, end - start + 1, true, true
}

// maxIndexLine bounds one CDXJ line read from the store.
const maxIndexLine = segview.MaxLine

// crawlCDXJ serves GET /api/v1/crawls/{id}/cdxj: the CDXJ lines of the
// crawl's records in all its segments, merged and sorted, as one index
// that pywb can use for the crawl's segments as segmentFile serves them
// (the offsets are in the crawl's part of each). The lines are sorted in
// bounded runs spilled to temporary files (pkg/cdxjsort): memory stays
// flat however large the crawl.
func (m *MCP) crawlCDXJ(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	out := progressWriter(w) // reading and sorting a large crawl's index takes a while
	var keys []string
	if m.deps.Assets != nil {
		var err error
		if keys, err = m.crawlSegmentKeys(r.Context(), id); err != nil {
			m.log.Error("list segments", "crawl_id", id, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's segments", "")
			return
		}
	}
	// A line names its crawl; only for a line of an index without names
	// are the crawl's record offsets read, to tell whether it is the
	// crawl's. A record pointing at a lost segment has nothing to index.
	scope := m.exportScope(id, []string{id}, nil)
	err := m.sendCDXJ(w, out, r, id, id+".cdxj", func(add func([]byte) error) error {
		for _, k := range keys {
			if _, err := scope.view(r.Context(), k, add); err != nil && !errors.Is(err, assets.ErrNotFound) {
				return fmt.Errorf("index of %s: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		m.log.Error("read segment index", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the crawl's segment indexes", "")
	}
}

// sendCDXJ sends the lines that fill adds as the CDXJ file filename,
// sorted bytewise without duplicates (as warc.SortCDXJ sorts them), through
// out, a progressWriter of w. The lines are all read and sorted into
// bounded runs before the status is sent: an error of fill is returned with
// nothing sent, for the caller to answer. An error once the status is sent
// cuts the stream.
func (m *MCP) sendCDXJ(w http.ResponseWriter, out io.Writer, r *http.Request, id, filename string, fill func(add func([]byte) error) error) error {
	sorter := cdxjsort.New("", m.cdxjRunBytes)
	defer func() {
		if err := sorter.Close(); err != nil {
			m.log.Warn("remove cdxj runs", "crawl_id", id, "err", err)
		}
	}()
	if err := fill(sorter.Add); err != nil {
		return err
	}
	merged, err := sorter.Merge()
	if err != nil {
		return err
	}
	defer merged.Close()
	w.Header().Set("Content-Type", "application/x-cdxj")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, filename))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(out, 64<<10)
	for {
		l, err := merged.Next()
		if err == io.EOF {
			break
		}
		if err == nil {
			_, err = bw.Write(l)
		}
		if err != nil {
			if r.Context().Err() == nil {
				m.log.Warn("send cdxj", "crawl_id", id, "err", err)
			}
			// The status is sent: cut the stream rather than end it as if
			// complete.
			panic(http.ErrAbortHandler)
		}
	}
	if err := bw.Flush(); err != nil && r.Context().Err() == nil {
		m.log.Warn("send cdxj", "crawl_id", id, "err", err)
	}
	return nil
}

// crawlDocuments serves GET /api/v1/crawls/{id}/documents: the crawl's
// indexed documents, whole, one JSON object a line
// (application/x-ndjson), in id order, streamed page by page; ?after=ID
// resumes after the document ID (the last one received), so that a client
// whose connection broke continues where it stopped.
func (m *MCP) crawlDocuments(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	out := progressWriter(w) // a large crawl's documents outlast the server's WriteTimeout
	after := r.URL.Query().Get("after")
	first, err := m.deps.Search.Documents(r.Context(), id, after, search.MaxExportPage)
	if err != nil {
		m.log.Error("export documents", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the crawl's documents", "")
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.jsonl"`, id))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(out, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	flusher, _ := w.(http.Flusher)
	page := first
	for {
		for i := range page {
			if err := enc.Encode(&page[i]); err != nil {
				if r.Context().Err() == nil {
					m.log.Warn("send documents", "crawl_id", id, "err", err)
				}
				return
			}
		}
		if err := bw.Flush(); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if len(page) < search.MaxExportPage {
			return
		}
		after = page[len(page)-1].ID
		page, err = m.deps.Search.Documents(r.Context(), id, after, search.MaxExportPage)
		if err != nil {
			// The status is sent: cut the stream, which the client sees
			// as an error, rather than end it as if complete.
			m.log.Error("export documents", "crawl_id", id, "after", after, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}
