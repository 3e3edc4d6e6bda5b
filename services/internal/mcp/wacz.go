package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/segview"
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
	title := c.Profile.Name
	if title == "" {
		title = "gridcrawl crawl " + id
	}
	m.serveWACZ(w, r, id, title, "Crawl "+id+" by gridcrawl", []profiles.Crawl{c})
}

// collectionWACZ serves GET /api/v1/collections/{name}/wacz: every crawl
// whose profile names the collection, oldest first, as one WACZ file, as
// crawlWACZ serves one crawl: the crawls of a collection that deduplicates
// across crawls (profile dedupe) replay together, each at its own time.
func (m *MCP) collectionWACZ(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	all, err := m.deps.Profiles.List(r.Context())
	if err != nil {
		m.log.Error("list crawls", "collection", name, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawls", "")
		return
	}
	var crawls []profiles.Crawl
	for _, c := range all {
		if slices.Contains(c.Profile.Collection, name) {
			crawls = append(crawls, c)
		}
	}
	if len(crawls) == 0 {
		jsonapi.Error(w, http.StatusNotFound, "no crawl names this collection", "")
		return
	}
	slices.SortFunc(crawls, func(a, b profiles.Crawl) int { return strings.Compare(a.ID, b.ID) }) // ids start with their time
	m.serveWACZ(w, r, name, "gridcrawl collection "+name,
		fmt.Sprintf("Collection %s by gridcrawl: %d crawls", name, len(crawls)), crawls)
}

// serveWACZ streams the crawls as one WACZ file named name.wacz: their
// part of each of their segments (pkg/segview: their records, not the
// other crawls' a segment holds too), with the originals of their
// revisits, whichever crawl stored them, their index lines and their
// pages. The main page is the first crawl's first
// start URL.
func (m *MCP) serveWACZ(w http.ResponseWriter, r *http.Request, name, title, description string, crawls []profiles.Crawl) {
	id := crawls[0].ID // for the logs
	q := r.URL.Query().Get("text")
	crawl := wacz.Crawl{
		Title:       title,
		Description: description,
		Software:    software(),
		Store:       m.deps.Assets,
		Text:        q == "1" || q == "true",
	}
	if p := crawls[0].Profile; len(p.StartURLs) > 0 {
		crawl.MainPageURL = p.StartURLs[0]
	}
	pages := make([]func(context.Context, func(wacz.Page) error) error, len(crawls))
	for i, c := range crawls {
		pages[i] = m.waczPages(c.ID)
	}
	crawl.Pages = func(ctx context.Context, yield func(wacz.Page) error) error {
		for _, p := range pages {
			if err := p(ctx, yield); err != nil {
				return err
			}
		}
		return nil
	}
	if m.deps.Assets != nil {
		set := map[string]bool{}
		ids := make([]string, len(crawls))
		originals := map[string]map[int64]bool{}
		for i, c := range crawls {
			ids[i] = c.ID
			keys, err := m.crawlSegmentKeys(r.Context(), c.ID)
			if err != nil {
				m.log.Error("list segments", "crawl_id", c.ID, "err", err)
				jsonapi.Error(w, http.StatusInternalServerError, "could not list the crawl's segments", "")
				return
			}
			orig, err := m.waczOriginals(r, c.ID, c.Profile, keys)
			if err != nil {
				m.log.Error("wacz originals", "crawl_id", c.ID, "err", err)
				jsonapi.Error(w, http.StatusInternalServerError, "could not look up the originals of the crawl's revisits", "")
				return
			}
			for _, k := range keys {
				set[k] = true
			}
			for k, offs := range orig {
				set[k] = true
				if originals[k] == nil {
					originals[k] = map[int64]bool{}
				}
				maps.Copy(originals[k], offs)
			}
		}
		// Each segment is the crawls' part of it, their originals held
		// alone; a line two crawls keep is one line (the sort drops
		// duplicates).
		scope := m.exportScope(name, ids, originals)
		crawl.Index = func(ctx context.Context, s wacz.Segment, yield func([]byte) error) (segview.View, error) {
			return scope.view(ctx, s.Key, yield)
		}
		keys := slices.Sorted(maps.Keys(set))
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
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.wacz"`, name))
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

// waczOriginals returns where the originals of the crawl's revisits lie
// (segment key, record offsets) when the digest index knows them: a revisit
// of a payload that another crawl of the collection stored refers to that
// crawl's record, and a WACZ without it could not replay the page. The
// crawl's revisit lines are read from its segments' indexes and their
// digests looked up, a thousand at a time, in the crawl's own scope and in
// its first collection's (whatever dedupe is now: it may have changed
// since). Memory: an offset per original found.
func (m *MCP) waczOriginals(r *http.Request, id string, p contracts.Profile, keys []string) (map[string]map[int64]bool, error) {
	out := map[string]map[int64]bool{}
	if m.deps.Digests == nil {
		return out, nil
	}
	ctx := r.Context()
	scopes := []string{"crawl:" + id}
	if len(p.Collection) > 0 && p.Collection[0] != "" {
		scopes = append(scopes, "collection:"+p.Collection[0])
	}
	var batch []digests.Ref
	lookup := func() error {
		if len(batch) == 0 {
			return nil
		}
		found, err := m.deps.Digests.Lookup(ctx, batch)
		if err != nil {
			return fmt.Errorf("look up the originals of crawl %q's revisits: %w", id, err)
		}
		for _, e := range found {
			if out[e.Key] == nil {
				out[e.Key] = map[int64]bool{}
			}
			out[e.Key][e.Offset] = true
		}
		batch = batch[:0]
		return nil
	}
	var inner error
	for _, k := range keys {
		err := m.eachIndexLine(ctx, k, func(c warc.CDXJ) bool {
			if inner != nil || c.Crawl != id || c.MIME != warc.MIMERevisit || c.Digest == "" {
				return false
			}
			for _, s := range scopes {
				batch = append(batch, digests.Ref{Scope: s, Digest: c.Digest})
			}
			if len(batch) >= 1000 {
				inner = lookup()
			}
			return false
		}, func([]byte) error { return nil })
		if inner != nil {
			return nil, inner
		}
		if err != nil && !errors.Is(err, assets.ErrNotFound) {
			return nil, err
		}
	}
	if err := lookup(); err != nil {
		return nil, err
	}
	return out, nil
}

// eachIndexLine calls yield with the lines of the segment key's CDXJ index
// that keep selects, reading the index object line by line, or, for a
// segment stored without one, indexing the segment (one segment's lines in
// memory). The offsets are the stored segment's.
func (m *MCP) eachIndexLine(ctx context.Context, key string, keep func(warc.CDXJ) bool, yield func([]byte) error) error {
	rc, err := m.deps.Assets.Get(ctx, assets.CDXJKey(key), 0, -1)
	if errors.Is(err, assets.ErrNotFound) {
		seg, err := m.deps.Assets.Get(ctx, key, 0, -1)
		if err != nil {
			return err
		}
		defer seg.Close()
		lines, err := warc.IndexWARC(seg, path.Base(key), maxWARCRecord)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if c, err := warc.ParseCDXJ(l); err == nil && keep(c) {
				if err := yield(l); err != nil {
					return err
				}
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
			docs, err := m.deps.Search.Documents(ctx, id, after, waczDocPage)
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
			if len(docs) < waczDocPage {
				return nil
			}
			after = docs[len(docs)-1].ID
		}
	}
}

// waczDocPage is how many documents one read for pages.jsonl takes. A
// document comes whole, its text too (20 KB and more on a real page), so
// the page is smaller than the export's MaxExportPage: it bounds the heap.
const waczDocPage = 200

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
