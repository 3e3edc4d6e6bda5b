// Package wacz writes a crawl as one WACZ file (Web Archive Collection
// Zipped, https://specs.webrecorder.net/wacz/1.1.1/), the package that
// ReplayWeb.page opens and Browsertrix imports.
//
// The archive is streamed: segments (or the archive's part of each, see
// pkg/segview) are copied from the asset store into the ZIP as they are
// read, the CDXJ index is sorted in bounded runs spilled
// to temporary files and merged while written, pages are written as the
// source yields them, and the hashes of datapackage.json are computed on the
// way. Memory does not grow with the crawl: see Export for the bound.
//
// The archive holds:
//
//	archive/<segment name>     each WARC segment (the archive's part of it), stored (not deflated), so that the index's offsets point into it
//	indexes/index.cdx          the sorted CDXJ index (named .cdx, which pywb's wb-manager takes), for up to PlainIndexLines lines; above that
//	indexes/index.cdx.gz       the same lines in gzip blocks of BlockLines lines (ZipNum, as py-wacz writes it)
//	indexes/index.idx          with one line per block
//	pages/pages.jsonl          the pages (json-pages-1.0)
//	datapackage.json           the package: every other file with its sha256 and size
//	datapackage-digest.json    the sha256 of datapackage.json (unsigned: signing is not done)
package wacz

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/cdxjsort"
	"github.com/gridcrawl/gridcrawl/pkg/segview"
)

// Version is the WACZ version written in datapackage.json, as py-wacz 0.6
// writes it and its validator requires.
const Version = "1.1.1"

// PlainIndexLines is the most index lines written as one plain
// indexes/index.cdx; a larger index is written compressed.
const PlainIndexLines = 3000

// BlockLines is the number of CDXJ lines of one gzip block of a compressed
// index (py-wacz's and ArchiveWeb.page's default).
const BlockLines = 1024

// RunBytes bounds the index lines sorted in memory at once; each sorted
// run is spilled to a temporary file (see pkg/cdxjsort).
const RunBytes = cdxjsort.RunBytes

// MaxLine bounds one CDXJ line.
const MaxLine = cdxjsort.MaxLine

// Segment is a WARC file of the archive.
type Segment struct {
	// Name is the file name under archive/, the name the index's lines
	// give as their filename.
	Name string
	// Key is the segment's key in the asset store.
	Key string
}

// Page is one line of pages/pages.jsonl.
type Page struct {
	ID    string
	URL   string
	TS    time.Time
	Title string
	// Text is written only when Crawl.Text is set.
	Text string
}

// Crawl is what an archive is made of.
type Crawl struct {
	// Title and Description describe the package.
	Title, Description string
	// Software names the writer ("gridcrawl ...").
	Software string
	// Created is the package's creation time (now when zero).
	Created time.Time
	// MainPageURL is the page the archive opens at (a start URL), written
	// as mainPageUrl (with its page's time as mainPageDate) when a page
	// has that URL.
	MainPageURL string
	// Store holds the segments.
	Store assets.Store
	// Segments are the archive's WARC files, in the order written.
	Segments []Segment
	// Index calls yield with each CDXJ line of segment s that belongs in
	// the archive, in any order, newline optional, and returns the part of
	// s the archive holds, which the lines' offsets point into (see
	// segview.Build). The line is not kept after yield returns. An error
	// ends the export.
	Index func(ctx context.Context, s Segment, yield func(line []byte) error) (segview.View, error)
	// Pages calls yield with each page of the archive, in any order. An
	// error ends the export.
	Pages func(ctx context.Context, yield func(Page) error) error
	// Text writes each page's text in pages.jsonl.
	Text bool
	// TempDir holds the index's sorted runs ("" for os.TempDir).
	TempDir string
	// RunBytes bounds the index lines sorted in memory at once (0 for
	// RunBytes).
	RunBytes int
	// PlainLines is the most lines written as a plain index, BlockLines
	// the lines of a block of a compressed one (0 for PlainIndexLines and
	// BlockLines); -1 always compresses.
	PlainLines, BlockLines int
}

// Export is an archive being written: its index sorted into runs on disk,
// ready to be streamed. Close removes the runs.
type Export struct {
	c     Crawl
	index *cdxjsort.Sorter
	views []segview.View // of c.Segments
}

// Prepare reads and sorts the index of c into temporary runs, before
// anything is written, so that an unreadable index is an error the caller
// can still answer with a status. Memory is bounded by RunBytes plus the
// line being read.
func Prepare(ctx context.Context, c Crawl) (*Export, error) {
	if c.Created.IsZero() {
		c.Created = time.Now()
	}
	c.Created = c.Created.UTC().Truncate(time.Second)
	if c.PlainLines == 0 {
		c.PlainLines = PlainIndexLines
	}
	if c.BlockLines <= 0 {
		c.BlockLines = BlockLines
	}
	e := &Export{c: c, index: cdxjsort.New(c.TempDir, c.RunBytes)}
	for _, s := range c.Segments {
		v, err := c.Index(ctx, s, func(line []byte) error {
			if err := e.index.Add(line); errors.Is(err, cdxjsort.ErrLine) {
				return fmt.Errorf("index line of %s: too long or not one line", s.Name)
			} else if err != nil {
				return err
			}
			return nil
		})
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("index of segment %s: %w", s.Name, err)
		}
		e.views = append(e.views, v)
	}
	return e, nil
}

// Lines is the number of index lines read (duplicates included).
func (e *Export) Lines() int64 { return e.index.Lines() }

// Close removes the export's temporary files.
func (e *Export) Close() error {
	return e.index.Close()
}

// resource is a datapackage.json resource.
type resource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// entry is a ZIP entry being written, hashed and counted.
type entry struct {
	w    io.Writer
	h    hash.Hash
	n    int64
	path string
}

func (en *entry) Write(p []byte) (int, error) {
	n, err := en.w.Write(p)
	en.h.Write(p[:n])
	en.n += int64(n)
	return n, err
}

func (en *entry) resource() resource {
	return resource{Name: strings.ToLower(path.Base(en.path)), Path: en.path,
		Hash: "sha256:" + hex.EncodeToString(en.h.Sum(nil)), Bytes: en.n}
}

// writer is the archive being written.
type writer struct {
	c   Crawl
	zw  *zip.Writer
	res []resource
}

func (w *writer) create(name string, method uint16) (*entry, error) {
	zw, err := w.zw.CreateHeader(&zip.FileHeader{Name: name, Method: method, Modified: w.c.Created})
	if err != nil {
		return nil, fmt.Errorf("zip entry %s: %w", name, err)
	}
	return &entry{w: zw, h: sha256.New(), path: name}, nil
}

func (w *writer) done(en *entry) { w.res = append(w.res, en.resource()) }

// WriteTo streams the archive to out. An error after the first byte leaves
// out holding a truncated archive (no central directory), which no reader
// takes for a complete one.
//
// Memory is bounded by one 64 KiB read buffer per index run (a run is at
// most RunBytes of lines, so a crawl of N index lines of L bytes has about
// N·L/RunBytes runs), the gzip block of a compressed index (BlockLines
// lines), one page and the ZIP writer's buffers and per-entry headers (one
// per segment): not by the number of pages or records.
func (e *Export) WriteTo(ctx context.Context, out io.Writer) error {
	w := &writer{c: e.c, zw: zip.NewWriter(out)}
	if err := e.writeIndex(w); err != nil {
		return err
	}
	mainTS, err := e.writePages(ctx, w)
	if err != nil {
		return err
	}
	for i, s := range e.c.Segments {
		if err := e.writeSegment(ctx, w, s, e.views[i]); err != nil {
			return err
		}
	}
	pkg := struct {
		Profile      string     `json:"profile"`
		Resources    []resource `json:"resources"`
		Title        string     `json:"title,omitempty"`
		Description  string     `json:"description,omitempty"`
		MainPageURL  string     `json:"mainPageUrl,omitempty"`
		MainPageDate string     `json:"mainPageDate,omitempty"`
		Created      string     `json:"created"`
		WACZVersion  string     `json:"wacz_version"`
		Software     string     `json:"software"`
	}{Profile: "data-package", Resources: w.res, Title: e.c.Title, Description: e.c.Description,
		Created: e.c.Created.Format(time.RFC3339), WACZVersion: Version, Software: e.c.Software}
	if !mainTS.IsZero() {
		pkg.MainPageURL = e.c.MainPageURL
		pkg.MainPageDate = mainTS.UTC().Format(time.RFC3339)
	}
	data, err := json.MarshalIndent(pkg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode datapackage.json: %w", err)
	}
	if err := w.writeSmall("datapackage.json", data); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	digest, err := json.MarshalIndent(map[string]string{"path": "datapackage.json",
		"hash": "sha256:" + hex.EncodeToString(sum[:])}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode datapackage-digest.json: %w", err)
	}
	if err := w.writeSmall("datapackage-digest.json", digest); err != nil {
		return err
	}
	if err := w.zw.Close(); err != nil {
		return fmt.Errorf("finish zip: %w", err)
	}
	return nil
}

func (w *writer) writeSmall(name string, data []byte) error {
	en, err := w.create(name, zip.Deflate)
	if err != nil {
		return err
	}
	if _, err := en.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func (e *Export) writeSegment(ctx context.Context, w *writer, s Segment, v segview.View) error {
	if s.Name == "" || strings.ContainsAny(s.Name, "/\\") {
		return fmt.Errorf("segment name %q: not a file name", s.Name)
	}
	name := s.Name
	if v.Name != "" {
		name = v.Name // a part of the segment, which the index lines name
		if strings.ContainsAny(name, "/\\") {
			return fmt.Errorf("segment part name %q: not a file name", name)
		}
	}
	rc, err := segview.Open(ctx, e.c.Store, v, 0, -1)
	if err != nil {
		return fmt.Errorf("read segment %s: %w", s.Key, err)
	}
	defer rc.Close()
	en, err := w.create("archive/"+name, zip.Store)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	if _, err := io.CopyBuffer(en, struct{ io.Reader }{rc}, buf); err != nil {
		return fmt.Errorf("copy segment %s: %w", s.Key, err)
	}
	w.done(en)
	return nil
}

// writePages writes pages/pages.jsonl and returns the time of the main
// page (zero when no page has its URL).
func (e *Export) writePages(ctx context.Context, w *writer) (time.Time, error) {
	en, err := w.create("pages/pages.jsonl", zip.Deflate)
	if err != nil {
		return time.Time{}, err
	}
	bw := bufio.NewWriterSize(en, 64<<10)
	head := `{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"`
	if e.c.Text {
		head += `, "hasText": true`
	}
	bw.WriteString(head + "}\n")
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	type line struct {
		ID    string `json:"id,omitempty"`
		URL   string `json:"url"`
		TS    string `json:"ts"`
		Title string `json:"title,omitempty"`
		Text  string `json:"text,omitempty"`
	}
	var mainTS time.Time
	err = e.c.Pages(ctx, func(p Page) error {
		l := line{ID: p.ID, URL: p.URL, TS: p.TS.UTC().Format(time.RFC3339), Title: p.Title}
		if e.c.Text {
			l.Text = p.Text
		}
		if e.c.MainPageURL != "" && p.URL == e.c.MainPageURL && (mainTS.IsZero() || p.TS.Before(mainTS)) {
			mainTS = p.TS
		}
		if err := enc.Encode(&l); err != nil {
			return fmt.Errorf("write pages.jsonl: %w", err)
		}
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("pages: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return time.Time{}, fmt.Errorf("write pages.jsonl: %w", err)
	}
	w.done(en)
	return mainTS, nil
}

// writeIndex merges the sorted runs into the archive's index, dropping
// duplicate lines.
func (e *Export) writeIndex(w *writer) error {
	m, err := e.index.Merge()
	if err != nil {
		return err
	}
	defer m.Close()
	if e.index.Lines() <= int64(e.c.PlainLines) {
		en, err := w.create("indexes/index.cdx", zip.Deflate)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(en, 64<<10)
		for {
			l, err := m.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			bw.Write(l)
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("write index.cdx: %w", err)
		}
		w.done(en)
		return nil
	}
	return e.writeZipNum(w, m)
}

// writeZipNum writes the index as indexes/index.cdx.gz, gzip blocks of
// BlockLines lines each, and indexes/index.idx, whose lines (sorted, as the
// blocks are) give each block's first key and timestamp, offset, length and
// sha256: the compressed index of WACZ 1.1.1 as py-wacz (cdxj-indexer's
// CompressedWriter) writes it. The idx lines are spilled to a temporary
// file until the blocks are written.
func (e *Export) writeZipNum(w *writer, m *cdxjsort.Merger) error {
	idx, err := os.CreateTemp(e.c.TempDir, "wacz-idx-*")
	if err != nil {
		return fmt.Errorf("index.idx: %w", err)
	}
	defer os.Remove(idx.Name())
	defer idx.Close()
	ibw := bufio.NewWriter(idx)
	fmt.Fprintf(ibw, "!meta 0 %s\n", `{"format": "cdxj-gzip-1.0", "filename": "index.cdx.gz"}`)
	en, err := w.create("indexes/index.cdx.gz", zip.Store)
	if err != nil {
		return err
	}
	var (
		block  bytes.Buffer
		gzbuf  bytes.Buffer
		prefix string
		n      int
		offset int64
	)
	flush := func() error {
		if n == 0 {
			return nil
		}
		gzbuf.Reset()
		gz := gzip.NewWriter(&gzbuf)
		gz.Write(block.Bytes())
		if err := gz.Close(); err != nil {
			return fmt.Errorf("compress index block: %w", err)
		}
		sum := sha256.Sum256(gzbuf.Bytes())
		fmt.Fprintf(ibw, "%s {\"offset\": %d, \"length\": %d, \"digest\": \"sha256:%s\"}\n",
			prefix, offset, gzbuf.Len(), hex.EncodeToString(sum[:]))
		if _, err := en.Write(gzbuf.Bytes()); err != nil {
			return fmt.Errorf("write index.cdx.gz: %w", err)
		}
		offset += int64(gzbuf.Len())
		block.Reset()
		n = 0
		return nil
	}
	for {
		l, err := m.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if n == 0 {
			p, _, _ := bytes.Cut(l, []byte("{"))
			prefix = string(bytes.TrimSpace(p))
		}
		block.Write(l)
		n++
		if n == e.c.BlockLines {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	w.done(en)
	if err := ibw.Flush(); err != nil {
		return fmt.Errorf("index.idx: %w", err)
	}
	if _, err := idx.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("index.idx: %w", err)
	}
	ien, err := w.create("indexes/index.idx", zip.Deflate)
	if err != nil {
		return err
	}
	if _, err := io.Copy(ien, idx); err != nil {
		return fmt.Errorf("write index.idx: %w", err)
	}
	w.done(ien)
	return nil
}
