package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/segview"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// sharedSegment is a segment holding records of two crawls, as a loader
// writes them: crawl A's page rendered (its DOM in a conversion record with
// a metadata record about it, B's exchange written between its response
// and its DOM), crawl B's page plain, and a subresource of A's render. It returns the segment and the offsets of A's and B's
// responses.
func sharedSegment(t *testing.T) (seg []byte, a, b, sub int64, ids map[string]string) {
	t.Helper()
	date := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	s := warc.NewSegment(true)
	ids = map[string]string{}
	add := func(name string, r warc.Record) int64 {
		off, _, err := s.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = warc.RecordID(r)
		return off
	}
	add("info", warc.NewWarcinfoRecord(date, map[string]string{"software": "gridcrawl"}))
	exchange := func(name, url, body string) int64 {
		req := warc.NewRequestRecord(url, date, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		add(name+"-req", req)
		resp := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
		return add(name, warc.NewResponseRecord(url, date, "", []byte(resp), false, warc.RecordID(req)))
	}
	sub = exchange("sub", "http://a.test/frame.html", "<title>Frame</title><p>a frame's text</p>")
	a = exchange("a", "http://a.test/", "<title>Shell</title><script>render()</script><a href='/shell'>s</a>")
	b = exchange("b", "http://b.test/", "<title>B page</title><p>bravo</p><a href='/b2'>b2</a>")
	dom := warc.NewConversionRecord("http://a.test/", date, ids["a"], "text/html; charset=utf-8",
		[]byte("<html><head><title>Rendered</title></head><body><p>after scripts</p><a href='/dom-link'>d</a></body></html>"))
	add("dom", dom)
	add("meta", warc.NewMetadataRecord("http://a.test/", date, ids["dom"], "render-reason", "always"))
	return bytes.Clone(s.Bytes()), a, b, sub, ids
}

// derive makes the WET or WAT file of the part of seg that holds the
// records at member (the crawl's indexed records) and the records written
// with them, as segview gives it, with the crawl's pages at their offsets
// in seg.
func derive(t *testing.T, kind string, seg []byte, member map[int64]bool, pages map[int64]crawlPage) []warc.Record {
	t.Helper()
	ranges, err := warc.SelectRecords(bytes.NewReader(seg), 0, func(o int64) bool { return member[o] }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sel := warc.NewSelection(ranges)
	var part []byte
	for _, r := range sel.Ranges() {
		part = append(part, seg[r.Offset:r.End()]...)
	}
	inPart := map[int64]crawlPage{}
	for off, p := range pages {
		if o, ok := sel.Map(off); ok {
			inPart[o] = p
		}
	}
	var out bytes.Buffer
	d := &deriver{kind: kind, name: "s.warc." + kind + ".gz", source: "s.warc.gz", pages: inPart, cfg: (&MCP{}).textConfig(),
		out: &out, rendered: map[string]warc.Scanned{}}
	if err := d.run(warc.NewScanner(bytes.NewReader(part), 0)); err != nil {
		t.Fatal(err)
	}
	var recs []warc.Record
	r := warc.NewReader(&out)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

// A segment shared by two crawls gives each crawl the WAT of its own
// records and the WET of its own pages; a rendered page's text is its
// DOM's.
func TestDerivedKeepsTheCrawlsRecords(t *testing.T) {
	seg, a, b, sub, ids := sharedSegment(t)
	type scope struct {
		member map[int64]bool
		pages  map[int64]crawlPage
	}
	scopeA := scope{map[int64]bool{a: true, sub: true}, map[int64]crawlPage{a: {rendered: true}}}
	scopeB := scope{map[int64]bool{b: true}, map[int64]crawlPage{b: {}}}

	for _, c := range []struct {
		name  string
		scope scope
		want  []string // the records the WAT envelopes refer to, in order
	}{
		{"A", scopeA, []string{"info", "sub-req", "sub", "a-req", "a", "dom", "meta"}},
		{"B", scopeB, []string{"info", "b-req", "b"}},
	} {
		wat := derive(t, "wat", seg, c.scope.member, c.scope.pages)
		var got []string
		for _, r := range wat[1:] {
			for name, id := range ids {
				if r.Header.Get(warc.FieldRefersTo) == id {
					got = append(got, name)
				}
			}
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") || wat[0].Header.Get(warc.FieldType) != warc.TypeWarcinfo {
			t.Errorf("crawl %s: WAT of %q, want a warcinfo and %q", c.name, got, c.want)
		}
		if c.name == "A" {
			// The rendered page's links are its DOM's, in its conversion
			// record's envelope and in its response's (which waited for
			// the DOM past crawl B's records), not the response body's.
			var dom, resp map[string]any
			for _, r := range wat {
				switch r.Header.Get(warc.FieldRefersTo) {
				case ids["dom"]:
					_ = json.Unmarshal(r.Block, &dom)
				case ids["a"]:
					_ = json.Unmarshal(r.Block, &resp)
				}
			}
			domLinks := fmt.Sprint(jsonPath(dom, "Envelope", "Payload-Metadata", "HTML-Metadata", "Links"))
			respLinks := fmt.Sprint(jsonPath(resp, "Envelope", "Payload-Metadata", "HTTP-Response-Metadata", "HTML-Metadata", "Links"))
			if !strings.Contains(domLinks, "/dom-link") || !strings.Contains(respLinks, "/dom-link") || strings.Contains(respLinks, "/shell") {
				t.Errorf("WAT links of the rendered page: DOM %s, response %s", domLinks, respLinks)
			}
		}
	}

	wetA := derive(t, "wet", seg, scopeA.member, scopeA.pages)
	if len(wetA) != 2 || wetA[1].Header.Get(warc.FieldRefersTo) != ids["a"] || string(wetA[1].Block) != "Rendered\nafter scripts d" {
		t.Errorf("crawl A's WET: %d records, the page's %q referring to %s; want its DOM's text referring to %s",
			len(wetA), lastBlock(wetA), lastRefers(wetA), ids["a"])
	}
	wetB := derive(t, "wet", seg, scopeB.member, scopeB.pages)
	if len(wetB) != 2 || wetB[1].Header.Get(warc.FieldRefersTo) != ids["b"] || string(wetB[1].Block) != "B page\nbravo b2" {
		t.Errorf("crawl B's WET: %d records, %q", len(wetB), lastBlock(wetB))
	}
}

func jsonPath(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func lastBlock(recs []warc.Record) string { return string(recs[len(recs)-1].Block) }

func lastRefers(recs []warc.Record) string { return recs[len(recs)-1].Header.Get(warc.FieldRefersTo) }

// countingRecords counts the whole-crawl scans made through it.
type countingRecords struct {
	Records
	lists atomic.Int64
}

func (c *countingRecords) List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]txindex.Record, error) {
	c.lists.Add(1)
	return c.Records.List(ctx, crawlID, status, after, limit)
}

// TestDerivedViewReadsTheSegmentsRecords: which records of a segment are
// a crawl's is read from the segment's index and the URL records of the
// URLs in it, not from a scan of the crawl's records, which grows with the
// crawl; a segment whose index names no crawl (written before the field)
// takes the scan and gives the same answer. The view holds the crawl's
// records and the segment's warcinfo, and its pages are at their offsets
// in the view.
func TestDerivedViewReadsTheSegmentsRecords(t *testing.T) {
	set, err := wire.Open(t.Context(), wire.Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	ctx := t.Context()
	seg, a, b, sub, ids := sharedSegment(t)
	const key = "warc/2026/11/28/gridcrawl-20261128030000000-00001-l1-x.warc.gz"
	if err := set.Assets.Put(ctx, key, bytes.NewReader(seg), int64(len(seg)), "application/warc"); err != nil {
		t.Fatal(err)
	}
	lines, err := warc.IndexWARC(bytes.NewReader(seg), path.Base(key), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int64]string{a: "A", sub: "A", b: "B"}
	named := func(withCrawl bool) []byte {
		var out []byte
		for _, l := range lines {
			c, err := warc.ParseCDXJ(l)
			if err != nil {
				t.Fatal(err)
			}
			if withCrawl {
				c.Crawl = owner[c.Offset]
			}
			out = c.AppendLine(out)
		}
		return out
	}
	now := time.Now().UTC()
	recs := []txindex.Record{{Key: txindex.Key("A", "http://a.test/"), CrawlID: "A", URL: "http://a.test/", Status: contracts.Indexed,
		StatusTime: now, Render: "always", Asset: contracts.AssetRef{Key: key, Offset: a}},
		{Key: txindex.Key("A", "http://a.test/frame.html"), CrawlID: "A", URL: "http://a.test/frame.html", Status: contracts.Failed,
			StatusTime: now, Asset: contracts.AssetRef{Key: key, Offset: sub}}}
	for i := range 2500 { // the crawl's other pages, in other segments
		u := fmt.Sprintf("http://a.test/p%d", i)
		recs = append(recs, txindex.Record{Key: txindex.Key("A", u), CrawlID: "A", URL: u, Status: contracts.Indexed, StatusTime: now,
			Asset: contracts.AssetRef{Key: "warc/2026/11/28/other.warc.gz", Offset: int64(i)}})
	}
	if _, err := set.Tx.Create(ctx, recs); err != nil {
		t.Fatal(err)
	}
	tx := &countingRecords{Records: set.Tx}
	m := New(Config{}, Deps{Tx: tx, Assets: set.Assets, Search: set.Search, Profiles: set.Profiles})
	for _, withCrawl := range []bool{true, false} {
		idx := named(withCrawl)
		if err := set.Assets.Put(ctx, assets.CDXJKey(key), bytes.NewReader(idx), int64(len(idx)), assets.ContentTypeCDXJ); err != nil {
			t.Fatal(err)
		}
		tx.lists.Store(0)
		v, pages, err := m.derivedView(ctx, "A", key)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := segview.Open(ctx, set.Assets, v, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		var aAt int64 = -1
		sc := warc.NewScanner(rc, 0)
		for {
			s, err := sc.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, id := range ids {
				if warc.RecordID(s.Record) == id {
					got = append(got, name)
					if name == "a" {
						aAt = s.Offset
					}
				}
			}
		}
		rc.Close()
		if want := "info sub-req sub a-req a dom meta"; strings.Join(got, " ") != want {
			t.Errorf("crawl names %v: the view holds %q, want %q", withCrawl, got, want)
		}
		if p, ok := pages[aAt]; !ok || !p.rendered || len(pages) != 1 {
			t.Errorf("crawl names %v: pages %v, want only %d (rendered)", withCrawl, pages, aAt)
		}
		if n := tx.lists.Load(); withCrawl && n != 0 || !withCrawl && n == 0 {
			t.Errorf("crawl names %v: %d scans of the crawl's records", withCrawl, n)
		}
	}
}
