package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// Archive output: a crawl's WARC segments (listed, downloaded whole or by
// range), their CDXJ indexes, the crawl's merged CDXJ and its indexed
// documents as JSON lines.
//
// A segment belongs to the loader that wrote it and may hold records of
// several crawls; a crawl's segments are those its URL records point into.
// Its merged CDXJ holds only its own lines.

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
func (m *MCP) crawlSegments(r *http.Request, id string) ([]crawlSegment, error) {
	byKey := map[string]*crawlSegment{}
	after := ""
	for {
		recs, err := m.deps.Tx.List(r.Context(), id, "", after, listPage)
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
	segs, err := m.crawlSegments(r, id)
	if err != nil {
		m.log.Error("list segments", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's segments", "")
		return
	}
	out := contracts.SegmentList{CrawlID: id, Segments: make([]contracts.Segment, 0, len(segs))}
	st, _ := m.deps.Assets.(assets.Stater)
	for _, s := range segs {
		name := path.Base(s.key)
		seg := contracts.Segment{Name: name, Key: s.key, Records: int64(len(s.offsets)), URL: segmentURL(id, name),
			CDXJURL: segmentURL(id, name+assets.CDXJSuffix), WETURL: segmentURL(id, warc.DerivedName(name, warc.WETSuffix)),
			WATURL: segmentURL(id, warc.DerivedName(name, warc.WATSuffix))}
		if st != nil {
			info, err := st.Stat(r.Context(), s.key)
			switch {
			case err == nil:
				seg.Size, seg.Modified = &info.Size, &info.Modified
				out.TotalSize += info.Size
			case !errors.Is(err, assets.ErrNotFound) && !errors.Is(err, errors.ErrUnsupported):
				m.log.Error("stat segment", "crawl_id", id, "key", s.key, "err", err)
				jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment's size", "")
				return
			}
		}
		out.Segments = append(out.Segments, seg)
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

// segmentFile serves GET /api/v1/crawls/{id}/segments/{name}: the segment
// as stored (one gzip member per record for .warc.gz), with single byte
// ranges (Range: bytes=...) when the store can tell the size; and, for a
// name ending in .cdxj, the segment's CDXJ index, sorted (every crawl's
// lines: the segment's own index).
func (m *MCP) segmentFile(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	if !m.knownCrawl(w, r, id) {
		return
	}
	if kind := derivedKind(name); kind != "" {
		m.segmentDerived(w, r, id, name, kind)
		return
	}
	key := segmentKey(name)
	if key == "" || m.deps.Assets == nil {
		jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
		return
	}
	if strings.HasSuffix(name, assets.CDXJSuffix) {
		lines, err := m.segmentIndex(r, key, nil)
		if errors.Is(err, assets.ErrNotFound) {
			jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
			return
		}
		if err != nil {
			m.log.Error("read segment index", "crawl_id", id, "key", key, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment's index", "")
			return
		}
		writeCDXJ(w, r, m, id, name, warc.SortCDXJ(lines))
		return
	}
	var size int64 = -1
	if st, ok := m.deps.Assets.(assets.Stater); ok {
		info, err := st.Stat(r.Context(), key)
		switch {
		case errors.Is(err, assets.ErrNotFound):
			jsonapi.Error(w, http.StatusNotFound, "no such segment", "name")
			return
		case errors.Is(err, errors.ErrUnsupported):
		case err != nil:
			m.log.Error("stat segment", "crawl_id", id, "key", key, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not read the segment", "")
			return
		default:
			size = info.Size
		}
	}
	offset, length, partial, ok := byteRange(r.Header.Get("Range"), size)
	if !ok {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		jsonapi.Error(w, http.StatusRequestedRangeNotSatisfiable, "the range is not within the segment", "Range")
		return
	}
	rc, err := m.deps.Assets.Get(r.Context(), key, offset, length)
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
	if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
		m.log.Warn("send segment", "crawl_id", id, "key", key, "err", err)
	}
}

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
const maxIndexLine = 1 << 20

// segmentIndex returns the CDXJ lines of the segment key (in the order
// stored), from its index object or, for a segment stored without one, by
// indexing the segment itself. keep, when not nil, selects the lines.
func (m *MCP) segmentIndex(r *http.Request, key string, keep func(warc.CDXJ) bool) ([][]byte, error) {
	rc, err := m.deps.Assets.Get(r.Context(), assets.CDXJKey(key), 0, -1)
	if errors.Is(err, assets.ErrNotFound) {
		return m.indexSegment(r, key, keep)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var lines [][]byte
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), maxIndexLine)
	for sc.Scan() {
		line := append(bytes.Clone(sc.Bytes()), '\n')
		if keep != nil {
			c, err := warc.ParseCDXJ(line)
			if err != nil {
				return nil, fmt.Errorf("index of %s: %w", key, err)
			}
			if !keep(c) {
				continue
			}
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("index of %s: %w", key, err)
	}
	return lines, nil
}

// indexSegment indexes a segment stored without a CDXJ index (by a loader
// older than the indexes).
func (m *MCP) indexSegment(r *http.Request, key string, keep func(warc.CDXJ) bool) ([][]byte, error) {
	rc, err := m.deps.Assets.Get(r.Context(), key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	lines, err := warc.IndexWARC(rc, path.Base(key), maxWARCRecord)
	if err != nil || keep == nil {
		return lines, err
	}
	kept := lines[:0]
	for _, l := range lines {
		if c, err := warc.ParseCDXJ(l); err == nil && keep(c) {
			kept = append(kept, l)
		}
	}
	return kept, nil
}

// crawlCDXJ serves GET /api/v1/crawls/{id}/cdxj: the CDXJ lines of the
// crawl's records in all its segments, merged and sorted, as one index
// that pywb can use for the crawl's segments.
func (m *MCP) crawlCDXJ(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	if m.deps.Assets == nil {
		writeCDXJ(w, r, m, id, id+".cdxj", nil)
		return
	}
	segs, err := m.crawlSegments(r, id)
	if err != nil {
		m.log.Error("list segments", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's segments", "")
		return
	}
	var all [][]byte
	for _, s := range segs {
		// A line names its crawl; a line of an index without names (a
		// segment indexed now) is the crawl's if a record of it points
		// there.
		keep := func(c warc.CDXJ) bool { return c.Crawl == id || c.Crawl == "" && s.offsets[c.Offset] }
		lines, err := m.segmentIndex(r, s.key, keep)
		if errors.Is(err, assets.ErrNotFound) {
			continue // a record pointing at a lost segment: nothing to index
		}
		if err != nil {
			m.log.Error("read segment index", "crawl_id", id, "key", s.key, "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not read the crawl's segment indexes", "")
			return
		}
		all = append(all, lines...)
	}
	writeCDXJ(w, r, m, id, id+".cdxj", warc.SortCDXJ(all))
}

func writeCDXJ(w http.ResponseWriter, r *http.Request, m *MCP, id, filename string, lines [][]byte) {
	w.Header().Set("Content-Type", "application/x-cdxj")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, filename))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, l := range lines {
		if _, err := bw.Write(l); err != nil {
			if r.Context().Err() == nil {
				m.log.Warn("send cdxj", "crawl_id", id, "err", err)
			}
			return
		}
	}
	_ = bw.Flush()
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
	bw := bufio.NewWriterSize(w, 64<<10)
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
