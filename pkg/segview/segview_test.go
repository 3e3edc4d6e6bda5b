package segview

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

const key = "warc/2026/12/01/gridcrawl-20261201030000000-00001-l1-x.warc.gz"

// store puts a segment of crawls a and b (a's page rendered, b's records
// between a's, one of b's responses over maxGap) with its CDXJ index, as a
// loader writes them, and returns the store and the segment's bytes.
func store(t *testing.T, withB bool) (assets.Store, []byte) {
	t.Helper()
	st, err := fsassets.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	date := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	seg := warc.NewSegment(true)
	var index []byte
	add := func(r warc.Record, crawl string) string {
		off, n, err := seg.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := seg.CDXJOf(r, 0, off, n, path.Base(key)); ok {
			c.Crawl = crawl
			index = c.AppendLine(index)
		}
		return warc.RecordID(r)
	}
	add(warc.NewWarcinfoRecord(date, map[string]string{"software": "test"}), "")
	exchange := func(crawl, url, body string) string {
		req := warc.NewRequestRecord(url, date, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		add(req, crawl)
		return add(warc.NewResponseRecord(url, date, "", []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"+body), false, warc.RecordID(req)), crawl)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, maxGap+maxGap/2)
	for i := range big {
		big[i] = 'a' + byte(rng.IntN(26))
	}
	a1 := exchange("A", "http://a.test/", "<p>one")
	if withB {
		exchange("B", "http://b.test/", "<p>b one")
	}
	dom := warc.NewConversionRecord("http://a.test/", date, a1, "text/html", []byte("<p>dom"))
	add(dom, "")
	add(warc.NewMetadataRecord("http://a.test/", date, warc.RecordID(dom), "render-reason", "always"), "")
	if withB {
		exchange("B", "http://b.test/big", string(big))
	}
	exchange("A", "http://a.test/2", "<p>two")
	exchange("A", "http://a.test/3", "<p>three")
	b := bytes.Clone(seg.Bytes())
	if err := st.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)), "application/warc"); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), assets.CDXJKey(key), bytes.NewReader(index), int64(len(index)), assets.ContentTypeCDXJ); err != nil {
		t.Fatal(err)
	}
	return st, b
}

func crawlScope(id, part string) Scope {
	return Scope{Member: func(c warc.CDXJ) bool { return c.Crawl == id }, PartName: part}
}

func readAll(t *testing.T, st assets.Store, v View, offset, length int64) []byte {
	t.Helper()
	rc, err := Open(t.Context(), st, v, offset, length)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuildShared: a crawl's view of a segment it shares holds its records
// (and the warcinfo, its DOM and metadata), named as the part; its lines
// point at its records in the view; byte ranges of the view, across runs
// of its ranges farther apart than maxGap, are those bytes of it.
func TestBuildShared(t *testing.T) {
	st, seg := store(t, true)
	var lines [][]byte
	v, err := Build(t.Context(), st, key, crawlScope("A", "part-A.warc.gz"), 0, func(l []byte) error {
		lines = append(lines, bytes.Clone(l))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v.Sel == nil || v.Name != "part-A.warc.gz" || v.Members != 3 || v.Lines != 3 || v.Size >= int64(len(seg)) {
		t.Fatalf("Build = %+v, want a part of the %d-byte segment, 3 lines", v, len(seg))
	}
	view := readAll(t, st, v, 0, -1)
	if int64(len(view)) != v.Size {
		t.Errorf("the view reads %d bytes, Size %d", len(view), v.Size)
	}
	var types, urls []string
	r := warc.NewReader(bytes.NewReader(view))
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, rec.Header.Get(warc.FieldType))
		urls = append(urls, rec.Header.Get(warc.FieldTargetURI))
	}
	if got, want := strings.Join(types, " "), "warcinfo request response conversion metadata request response request response"; got != want {
		t.Errorf("the view holds %s, want %s", got, want)
	}
	for _, u := range urls {
		if strings.Contains(u, "b.test") {
			t.Errorf("the view holds a record of %s, crawl B's", u)
		}
	}
	for _, l := range lines {
		c, err := warc.ParseCDXJ(l)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := warc.ReadRecord(bytes.NewReader(view[c.Offset:c.Offset+c.Length]), 1<<20)
		if err != nil || rec.Header.Get(warc.FieldTargetURI) != c.URL || c.Filename != "part-A.warc.gz" || c.Crawl != "A" {
			t.Errorf("line %s: points at %q (%v)", l, rec.Header.Get(warc.FieldTargetURI), err)
		}
	}
	n := int64(len(view))
	for _, rg := range [][2]int64{{0, 10}, {5, n - 10}, {n / 2, -1}, {n - 1, 1}, {n, 5}} {
		want := view[rg[0]:]
		if rg[1] >= 0 && rg[0]+rg[1] <= n {
			want = view[rg[0] : rg[0]+rg[1]]
		}
		if got := readAll(t, st, v, rg[0], rg[1]); !bytes.Equal(got, want) {
			t.Errorf("Open(%d, %d) read %d bytes, not those of the view (%d)", rg[0], rg[1], len(got), len(want))
		}
	}

	// Crawl B's view holds B's big response, read through the store.
	vb, err := Build(t.Context(), st, key, crawlScope("B", "part-B.warc.gz"), 0, func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, st, vb, 0, -1); int64(len(b)) != vb.Size || vb.Members != 2 || !bytes.Contains(b, seg[len(seg)/2:len(seg)/2+100]) {
		t.Errorf("crawl B's view: %d bytes of %d, %d members", len(b), vb.Size, vb.Members)
	}
}

// TestBuildAlone: a segment whose lines are all the crawl's is held whole,
// its lines as stored.
func TestBuildAlone(t *testing.T) {
	st, seg := store(t, false)
	rc, err := st.Get(t.Context(), assets.CDXJKey(key), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := io.ReadAll(rc)
	rc.Close()
	var got []byte
	v, err := Build(t.Context(), st, key, crawlScope("A", "part-A.warc.gz"), 0, func(l []byte) error {
		got = append(got, l...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v.Sel != nil || v.Name != "" || v.Size != int64(len(seg)) || !bytes.Equal(got, stored) {
		t.Errorf("Build = %+v with lines\n%s\nwant the whole %d-byte segment with its lines\n%s", v, got, len(seg), stored)
	}
	if b := readAll(t, st, v, 0, -1); !bytes.Equal(b, seg) {
		t.Errorf("the whole view reads %d bytes, not the segment's %d", len(b), len(seg))
	}
	if _, err := Build(t.Context(), st, key+"-gone.warc.gz", crawlScope("A", ""), 0, func([]byte) error { return nil }); !errorsIsNotFound(err) {
		t.Errorf("Build of a missing segment = %v, want assets.ErrNotFound", err)
	}
}

func TestSetOffset(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`k 2026 {"url": "u", "length": "10", "offset": "791", "filename": "f"}`, `k 2026 {"url": "u", "length": "10", "offset": "5", "filename": "f"}`},
		{`k 2026 {"url": "u", "offset": 791, "filename": "f"}`, `k 2026 {"url": "u", "offset": 5, "filename": "f"}`},
		{`k 2026 {"url": "http://x/?\"offset\": \"1\"", "offset": "7"}`, `k 2026 {"url": "http://x/?\"offset\": \"1\"", "offset": "5"}`},
	} {
		got, err := setOffset(nil, []byte(tc.line), 5)
		if err != nil || string(got) != tc.want {
			t.Errorf("setOffset(%q, 5) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	if _, err := setOffset(nil, []byte(`k 2026 {"url": "u"}`), 5); err == nil {
		t.Errorf("setOffset of a line without an offset: no error")
	}
}

func errorsIsNotFound(err error) bool { return errors.Is(err, assets.ErrNotFound) }
