package wacz_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/segview"
	"github.com/gridcrawl/gridcrawl/pkg/wacz"
)

// fixture is a crawl of nseg segments with lines index lines each (one
// line of every segment duplicated in the next, as a record indexed twice
// would be) and npages pages.
type fixture struct {
	crawl wacz.Crawl
	// segs holds each segment's bytes by name; lines the expected index
	// (sorted, without duplicates); pages the pages yielded.
	segs  map[string][]byte
	lines []string
	pages []wacz.Page
}

func newFixture(t *testing.T, nseg, lines, npages int) *fixture {
	t.Helper()
	st, err := fsassets.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{segs: map[string][]byte{}}
	byName := map[string][]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	set := map[string]bool{}
	for i := range nseg {
		name := fmt.Sprintf("gridcrawl-20261128%06d-%d.warc", i, i)
		key := "warc/2026/11/28/" + name
		body := bytes.Repeat([]byte(fmt.Sprintf("segment %d record\n", i)), 2000+i*37)
		if err := st.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), "application/warc"); err != nil {
			t.Fatal(err)
		}
		f.segs[name] = body
		f.crawl.Segments = append(f.crawl.Segments, wacz.Segment{Name: name, Key: key})
		var ls []string
		for j := range lines {
			u := fmt.Sprintf("http://h%d.example/p%d", rng.IntN(50), rng.IntN(1<<20))
			l := fmt.Sprintf(`example,h)/p%d 20261128%06d {"url": %q, "offset": "%d", "filename": %q}`, j, rng.IntN(999999), u, j*100, name)
			ls = append(ls, l)
			set[l] = true
		}
		if i > 0 { // a line of the segment before, again
			ls = append(ls, byName[f.crawl.Segments[i-1].Name][0])
		}
		rng.Shuffle(len(ls), func(a, b int) { ls[a], ls[b] = ls[b], ls[a] })
		byName[name] = ls
	}
	for l := range set {
		f.lines = append(f.lines, l+"\n")
	}
	slices.Sort(f.lines)
	for i := range npages {
		f.pages = append(f.pages, wacz.Page{ID: fmt.Sprint(i), URL: fmt.Sprintf("http://h.example/p%d", i),
			TS: time.Date(2026, 11, 28, 1, 2, i%60, 0, time.UTC), Title: fmt.Sprintf("Page %d", i), Text: fmt.Sprintf("text of page %d", i)})
	}
	f.crawl.Store = st
	f.crawl.Title = "a crawl"
	f.crawl.Software = "gridcrawl test"
	f.crawl.MainPageURL = "http://h.example/p0"
	f.crawl.TempDir = t.TempDir()
	f.crawl.Index = func(_ context.Context, s wacz.Segment, yield func([]byte) error) (segview.View, error) {
		for _, l := range byName[s.Name] {
			if err := yield([]byte(l + "\n")); err != nil {
				return segview.View{}, err
			}
		}
		return segview.Whole(s.Key), nil
	}
	f.crawl.Pages = func(_ context.Context, yield func(wacz.Page) error) error {
		for _, p := range f.pages {
			if err := yield(p); err != nil {
				return err
			}
		}
		return nil
	}
	return f
}

func export(t *testing.T, c wacz.Crawl) []byte {
	t.Helper()
	var buf bytes.Buffer
	e, err := wacz.Prepare(t.Context(), c)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer e.Close()
	if err := e.WriteTo(t.Context(), &buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return buf.Bytes()
}

type datapackage struct {
	Profile   string `json:"profile"`
	Resources []struct {
		Name, Path, Hash string
		Bytes            int64
	} `json:"resources"`
	Title        string `json:"title"`
	MainPageURL  string `json:"mainPageUrl"`
	MainPageDate string `json:"mainPageDate"`
	Created      string `json:"created"`
	WACZVersion  string `json:"wacz_version"`
	Software     string `json:"software"`
}

func readEntry(t *testing.T, f *zip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatalf("open %s: %v", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", f.Name, err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// checkPackage checks the archive's ZIP entries against datapackage.json
// and datapackage-digest.json and returns the entries' contents by name.
func checkPackage(t *testing.T, data []byte) (map[string][]byte, datapackage) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		if _, dup := files[f.Name]; dup {
			t.Errorf("entry %s twice", f.Name)
		}
		files[f.Name] = readEntry(t, f)
		if (strings.HasPrefix(f.Name, "archive/") || strings.HasSuffix(f.Name, ".cdx.gz")) && f.Method != zip.Store {
			t.Errorf("entry %s is compressed (method %d), want stored", f.Name, f.Method)
		}
	}
	var pkg datapackage
	if err := json.Unmarshal(files["datapackage.json"], &pkg); err != nil {
		t.Fatalf("datapackage.json: %v", err)
	}
	if pkg.Profile != "data-package" || pkg.WACZVersion != "1.1.1" || pkg.Created == "" || pkg.Software == "" {
		t.Errorf("datapackage.json = %+v", pkg)
	}
	listed := map[string]bool{}
	for _, r := range pkg.Resources {
		listed[r.Path] = true
		b, ok := files[r.Path]
		if !ok {
			t.Errorf("resource %s is not in the zip", r.Path)
			continue
		}
		if r.Hash != sha(b) || r.Bytes != int64(len(b)) {
			t.Errorf("resource %s: hash %s, %d bytes; the entry has %s, %d bytes", r.Path, r.Hash, r.Bytes, sha(b), len(b))
		}
	}
	for name := range files {
		if !listed[name] && name != "datapackage.json" && name != "datapackage-digest.json" {
			t.Errorf("entry %s is not listed in datapackage.json", name)
		}
	}
	var digest struct{ Path, Hash string }
	if err := json.Unmarshal(files["datapackage-digest.json"], &digest); err != nil {
		t.Fatalf("datapackage-digest.json: %v", err)
	}
	if digest.Path != "datapackage.json" || digest.Hash != sha(files["datapackage.json"]) {
		t.Errorf("datapackage-digest.json = %+v, want the hash %s", digest, sha(files["datapackage.json"]))
	}
	return files, pkg
}

func splitLines(b []byte) []string {
	var out []string
	for l := range strings.Lines(string(b)) {
		out = append(out, l)
	}
	return out
}

func TestExportPlainIndex(t *testing.T) {
	f := newFixture(t, 3, 40, 5)
	f.crawl.RunBytes = 2000 // several runs a segment: the merge crosses runs and segments
	files, pkg := checkPackage(t, export(t, f.crawl))
	for name, body := range f.segs {
		if !bytes.Equal(files["archive/"+name], body) {
			t.Errorf("archive/%s differs from the segment", name)
		}
	}
	if diff := cmp.Diff(f.lines, splitLines(files["indexes/index.cdx"])); diff != "" {
		t.Errorf("index.cdx (-want +got):\n%s", diff)
	}
	if _, ok := files["indexes/index.cdx.gz"]; ok {
		t.Errorf("a small index was written compressed")
	}
	pages := splitLines(files["pages/pages.jsonl"])
	if len(pages) != len(f.pages)+1 {
		t.Fatalf("pages.jsonl has %d lines, want %d", len(pages), len(f.pages)+1)
	}
	var head map[string]any
	if err := json.Unmarshal([]byte(pages[0]), &head); err != nil || head["format"] != "json-pages-1.0" || head["id"] != "pages" {
		t.Errorf("pages.jsonl header = %s (%v)", pages[0], err)
	}
	for i, p := range f.pages {
		var got map[string]string
		if err := json.Unmarshal([]byte(pages[i+1]), &got); err != nil {
			t.Fatalf("page line %d: %v", i+1, err)
		}
		want := map[string]string{"id": p.ID, "url": p.URL, "ts": p.TS.Format(time.RFC3339), "title": p.Title}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("page %d (-want +got):\n%s", i, diff)
		}
	}
	if pkg.MainPageURL != "http://h.example/p0" || pkg.MainPageDate != f.pages[0].TS.Format(time.RFC3339) || pkg.Title != "a crawl" {
		t.Errorf("datapackage.json main page %q at %q, title %q", pkg.MainPageURL, pkg.MainPageDate, pkg.Title)
	}
}

func TestExportText(t *testing.T) {
	f := newFixture(t, 1, 3, 2)
	f.crawl.Text = true
	files, _ := checkPackage(t, export(t, f.crawl))
	pages := splitLines(files["pages/pages.jsonl"])
	if !strings.Contains(pages[0], `"hasText": true`) {
		t.Errorf("header %s does not say hasText", pages[0])
	}
	var p struct{ Text string }
	if err := json.Unmarshal([]byte(pages[2]), &p); err != nil || p.Text != "text of page 1" {
		t.Errorf("page line %s: text %q (%v)", pages[2], p.Text, err)
	}
}

// TestExportCompressedIndex: an index over PlainIndexLines is written as
// gzip blocks and their idx, which together give back the sorted lines.
func TestExportCompressedIndex(t *testing.T) {
	f := newFixture(t, 3, 1500, 1)
	f.crawl.RunBytes = 64 << 10
	files, _ := checkPackage(t, export(t, f.crawl))
	if _, ok := files["indexes/index.cdx"]; ok {
		t.Errorf("a large index was also written plain")
	}
	gz, idx := files["indexes/index.cdx.gz"], splitLines(files["indexes/index.idx"])
	if len(idx) < 2 || !strings.HasPrefix(idx[0], "!meta 0 ") {
		t.Fatalf("index.idx starts %q", idx[:min(len(idx), 1)])
	}
	var meta struct{ Format, Filename string }
	if err := json.Unmarshal([]byte(strings.TrimPrefix(idx[0], "!meta 0 ")), &meta); err != nil ||
		meta.Format != "cdxj-gzip-1.0" || meta.Filename != "index.cdx.gz" {
		t.Errorf("index.idx meta %q (%v)", idx[0], err)
	}
	var got []string
	var next int64
	for _, l := range idx[1:] {
		prefix, js, ok := strings.Cut(l, " {")
		if !ok {
			t.Fatalf("idx line %q", l)
		}
		var b struct {
			Offset, Length int64
			Digest         string
		}
		if err := json.Unmarshal([]byte("{"+js), &b); err != nil {
			t.Fatalf("idx line %q: %v", l, err)
		}
		if b.Offset != next || b.Offset+b.Length > int64(len(gz)) {
			t.Fatalf("idx block at %d+%d, want at %d within %d bytes", b.Offset, b.Length, next, len(gz))
		}
		next = b.Offset + b.Length
		block := gz[b.Offset:next]
		if b.Digest != sha(block) {
			t.Errorf("block at %d: digest %s, want %s", b.Offset, b.Digest, sha(block))
		}
		zr, err := gzip.NewReader(bytes.NewReader(block))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		lines := splitLines(plain)
		if len(lines) > wacz.BlockLines {
			t.Errorf("block of %d lines, want at most %d", len(lines), wacz.BlockLines)
		}
		if first := strings.SplitN(lines[0], " {", 2)[0]; first != prefix {
			t.Errorf("idx key %q, block starts %q", prefix, first)
		}
		got = append(got, lines...)
	}
	if next != int64(len(gz)) {
		t.Errorf("blocks end at %d of %d bytes", next, len(gz))
	}
	if diff := cmp.Diff(f.lines, got); diff != "" {
		t.Errorf("lines of the blocks (-want +got):\n%s", diff)
	}
}

// recordingStore records how many bytes the archive's writer had received
// when each segment was opened.
type recordingStore struct {
	assets.Store
	out    *maxWriter
	opened map[string]int64
}

func (s *recordingStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	s.opened[key] = s.out.n
	return s.Store.Get(ctx, key, offset, length)
}

// maxWriter counts what is written and the largest single write.
type maxWriter struct{ n, max int64 }

func (w *maxWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.max = max(w.max, int64(len(p)))
	return len(p), nil
}

// TestExportStreams: each segment is sent before the next is opened, in
// writes no larger than a copy buffer, so nothing holds a segment (or the
// archive) whole.
func TestExportStreams(t *testing.T) {
	f := newFixture(t, 3, 10, 3)
	var segBytes int64
	for _, b := range f.segs {
		segBytes += int64(len(b))
	}
	out := &maxWriter{}
	rs := &recordingStore{Store: f.crawl.Store, out: out, opened: map[string]int64{}}
	f.crawl.Store = rs
	e, err := wacz.Prepare(t.Context(), f.crawl)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.WriteTo(t.Context(), out); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(f.crawl.Segments); i++ {
		prev, s := f.crawl.Segments[i-1], f.crawl.Segments[i]
		if rs.opened[s.Key] < rs.opened[prev.Key]+int64(len(f.segs[prev.Name])) {
			t.Errorf("segment %s opened when %d bytes were written; the one before (%d bytes) was opened at %d",
				s.Name, rs.opened[s.Key], len(f.segs[prev.Name]), rs.opened[prev.Key])
		}
	}
	if out.n < segBytes {
		t.Errorf("wrote %d bytes, less than the segments' %d", out.n, segBytes)
	}
	if out.max > 64<<10 {
		t.Errorf("largest write %d bytes, want at most 64 KiB", out.max)
	}
}

type failingStore struct{ assets.Store }

var errBroken = errors.New("disk broken")

func (failingStore) Get(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, errBroken
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errBroken
	}
	return len(p), nil
}

func TestExportErrors(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*wacz.Crawl)
		out     io.Writer
		prepare bool // the error comes from Prepare
	}{
		{"store", func(c *wacz.Crawl) { c.Store = failingStore{c.Store} }, io.Discard, false},
		{"index", func(c *wacz.Crawl) {
			c.Index = func(context.Context, wacz.Segment, func([]byte) error) (segview.View, error) {
				return segview.View{}, errBroken
			}
		}, io.Discard, true},
		{"pages", func(c *wacz.Crawl) {
			c.Pages = func(context.Context, func(wacz.Page) error) error { return errBroken }
		}, io.Discard, false},
		{"writer", func(*wacz.Crawl) {}, &failingWriter{after: 5000}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2, 5, 2)
			tc.change(&f.crawl)
			e, err := wacz.Prepare(t.Context(), f.crawl)
			if tc.prepare {
				if !errors.Is(err, errBroken) {
					t.Fatalf("Prepare = %v, want %v", err, errBroken)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if err := e.WriteTo(t.Context(), tc.out); !errors.Is(err, errBroken) {
				t.Errorf("WriteTo = %v, want %v", err, errBroken)
			}
		})
	}
}

// TestPrepareRejectsHugeLine: a line over MaxLine is an error, not memory.
func TestPrepareRejectsHugeLine(t *testing.T) {
	f := newFixture(t, 1, 1, 1)
	f.crawl.Index = func(_ context.Context, s wacz.Segment, yield func([]byte) error) (segview.View, error) {
		return segview.Whole(s.Key), yield(bytes.Repeat([]byte("x"), wacz.MaxLine+1))
	}
	if _, err := wacz.Prepare(t.Context(), f.crawl); err == nil {
		t.Errorf("Prepare took a line of %d bytes", wacz.MaxLine+1)
	}
}

// TestCloseRemovesRuns: the sorted runs are temporary.
func TestCloseRemovesRuns(t *testing.T) {
	f := newFixture(t, 2, 50, 1)
	f.crawl.RunBytes = 500
	e, err := wacz.Prepare(t.Context(), f.crawl)
	if err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, f.crawl.TempDir); n < 2 {
		t.Errorf("%d runs spilled, want several", n)
	}
	if err := e.WriteTo(t.Context(), io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, f.crawl.TempDir); n != 0 {
		t.Errorf("%d files left in the temporary directory", n)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
