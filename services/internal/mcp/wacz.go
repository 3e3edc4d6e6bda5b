package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/wacz"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// crawlWACZ serves GET /api/v1/crawls/{id}/wacz: the crawl as one WACZ
// file (see pkg/wacz), streamed; ?text=1 puts each page's text in
// pages/pages.jsonl. The index is read and sorted before the status is
// sent, so that an unreadable index is a 500; an error later cuts the
// stream, which leaves the ZIP without its central directory.
func (m *MCP) crawlWACZ(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	c, err := m.deps.Profiles.Get(r.Context(), id)
	if err != nil {
		m.log.Error("get crawl", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the crawl", "")
		return
	}
	keys, err := m.crawlSegmentKeys(r.Context(), id)
	if err != nil {
		m.log.Error("list segments", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's segments", "")
		return
	}
	q := r.URL.Query().Get("text")
	crawl := wacz.Crawl{
		Title:    c.Profile.Name,
		Software: software(),
		Store:    m.deps.Assets,
		Text:     q == "1" || q == "true",
		Pages:    m.waczPages(id),
	}
	if crawl.Title == "" {
		crawl.Title = "gridcrawl crawl " + id
	}
	crawl.Description = "Crawl " + id + " by gridcrawl"
	if len(c.Profile.StartURLs) > 0 {
		crawl.MainPageURL = c.Profile.StartURLs[0]
	}
	if m.deps.Assets != nil {
		crawl.Index = m.waczIndex(r, id)
		st, _ := m.deps.Assets.(assets.Stater)
		for _, k := range keys {
			if st != nil {
				// A record pointing at a lost segment has nothing to
				// archive (as the crawl's CDXJ skips it).
				if _, err := st.Stat(r.Context(), k); errors.Is(err, assets.ErrNotFound) {
					continue
				}
			}
			crawl.Segments = append(crawl.Segments, wacz.Segment{Name: path.Base(k), Key: k})
		}
	}
	out := progressWriter(w) // before the index is sorted, which takes a while
	ex, err := wacz.Prepare(r.Context(), crawl)
	if err != nil {
		m.log.Error("wacz index", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the crawl's segment indexes", "")
		return
	}
	defer func() {
		if err := ex.Close(); err != nil {
			m.log.Warn("remove wacz index runs", "crawl_id", id, "err", err)
		}
	}()
	w.Header().Set("Content-Type", "application/wacz+zip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.wacz"`, id))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	err = ex.WriteTo(r.Context(), bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if r.Context().Err() == nil {
			m.log.Error("send wacz", "crawl_id", id, "err", err)
		}
		// The status is sent: cut the stream rather than end it as if
		// complete.
		panic(http.ErrAbortHandler)
	}
}

// waczWriteGrace is how long a WACZ download may make no progress (the
// client reads nothing) before its connection is cut.
const waczWriteGrace = time.Minute

// progressWriter lifts the write deadline of w, which the server's
// WriteTimeout sets for the whole response and which the WACZ of a large
// crawl outlasts, and returns a writer to w that sets it to waczWriteGrace
// from now as it writes: a download is cut only when it makes no progress.
func progressWriter(w http.ResponseWriter) io.Writer {
	ctl := http.NewResponseController(w)
	_ = ctl.SetWriteDeadline(time.Time{}) // ErrNotSupported: the server's own deadline holds
	return &deadlineWriter{w: w, ctl: ctl}
}

// deadlineWriter moves the response's write deadline to waczWriteGrace
// from now as it writes (at most every quarter of it).
type deadlineWriter struct {
	w    io.Writer
	ctl  *http.ResponseController
	next time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); !now.Before(d.next) {
		_ = d.ctl.SetWriteDeadline(now.Add(waczWriteGrace))
		d.next = now.Add(waczWriteGrace / 4)
	}
	return d.w.Write(p)
}

// crawlSegmentKeys returns the keys of the segments the records of crawl
// id point into, sorted: one entry a segment, however many records.
func (m *MCP) crawlSegmentKeys(ctx context.Context, id string) ([]string, error) {
	set := map[string]bool{}
	after := ""
	for {
		recs, err := m.deps.Tx.List(ctx, id, "", after, listPage)
		if err != nil {
			return nil, fmt.Errorf("list records of crawl %q: %w", id, err)
		}
		for _, rec := range recs {
			if rec.Asset.Key != "" {
				set[rec.Asset.Key] = true
			}
		}
		if len(recs) < listPage {
			break
		}
		after = recs[len(recs)-1].Key
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// waczIndex yields the crawl's lines of a segment's CDXJ index. A line
// names its crawl; only for a line without a name (a segment indexed by an
// older loader, or indexed now) are the crawl's record offsets needed,
// which are then read once, for all segments.
func (m *MCP) waczIndex(r *http.Request, id string) func(context.Context, wacz.Segment, func([]byte) error) error {
	var offsets map[string]map[int64]bool
	return func(ctx context.Context, s wacz.Segment, yield func([]byte) error) error {
		var inner error
		keep := func(c warc.CDXJ) bool {
			if inner != nil {
				return false
			}
			if c.Crawl != "" {
				return c.Crawl == id
			}
			if offsets == nil {
				segs, err := m.crawlSegments(r, id)
				if err != nil {
					inner = err
					return false
				}
				offsets = map[string]map[int64]bool{}
				for _, cs := range segs {
					offsets[cs.key] = cs.offsets
				}
			}
			return offsets[s.Key][c.Offset]
		}
		err := m.eachIndexLine(ctx, r, s.Key, keep, yield)
		if inner != nil {
			return inner
		}
		if errors.Is(err, assets.ErrNotFound) {
			return nil // the segment went: nothing to index
		}
		return err
	}
}

// eachIndexLine calls yield with the lines of the segment key's CDXJ index
// that keep selects, reading the index object line by line, or, for a
// segment stored without one, indexing the segment (one segment's lines in
// memory).
func (m *MCP) eachIndexLine(ctx context.Context, r *http.Request, key string, keep func(warc.CDXJ) bool, yield func([]byte) error) error {
	rc, err := m.deps.Assets.Get(ctx, assets.CDXJKey(key), 0, -1)
	if errors.Is(err, assets.ErrNotFound) {
		lines, err := m.indexSegment(r, key, keep)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if err := yield(l); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), maxIndexLine)
	for sc.Scan() {
		c, err := warc.ParseCDXJ(sc.Bytes())
		if err != nil {
			return fmt.Errorf("index of %s: %w", key, err)
		}
		if !keep(c) {
			continue
		}
		if err := yield(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("index of %s: %w", key, err)
	}
	return nil
}

// waczPages yields the crawl's indexed documents as pages, a page of
// search.MaxExportPage documents at a time.
func (m *MCP) waczPages(id string) func(context.Context, func(wacz.Page) error) error {
	return func(ctx context.Context, yield func(wacz.Page) error) error {
		after := ""
		for {
			docs, err := m.deps.Search.Documents(ctx, id, after, search.MaxExportPage)
			if err != nil {
				return fmt.Errorf("read documents of crawl %q: %w", id, err)
			}
			for _, d := range docs {
				p := wacz.Page{ID: d.ID, URL: d.URL, TS: d.LoadDate, Text: d.Text}
				if len(d.Title) > 0 {
					p.Title = d.Title[0]
				}
				if err := yield(p); err != nil {
					return err
				}
			}
			if len(docs) < search.MaxExportPage {
				return nil
			}
			after = docs[len(docs)-1].ID
		}
	}
}

// software names gridcrawl and, when the build knows it, its version.
func software() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "gridcrawl"
	}
	if bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return "gridcrawl " + s.Value[:min(12, len(s.Value))]
			}
		}
		return "gridcrawl"
	}
	return "gridcrawl " + strings.TrimSpace(bi.Main.Version)
}
