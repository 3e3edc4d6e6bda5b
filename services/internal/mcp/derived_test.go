package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/warc"
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

func derive(t *testing.T, kind string, seg []byte, scope derivedScope) []warc.Record {
	t.Helper()
	var out bytes.Buffer
	d := &deriver{kind: kind, name: "s.warc." + kind + ".gz", source: "s.warc.gz", scope: scope, cfg: (&MCP{}).textConfig(),
		out: &out, ids: map[string]bool{}, rendered: map[string]warc.Scanned{}}
	if err := d.run(warc.NewScanner(bytes.NewReader(seg), 0)); err != nil {
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
	scopeA := derivedScope{members: map[int64]bool{a: true, sub: true}, pages: map[int64]crawlPage{a: {rendered: true}}}
	scopeB := derivedScope{members: map[int64]bool{b: true}, pages: map[int64]crawlPage{b: {}}}

	for _, c := range []struct {
		name  string
		scope derivedScope
		want  []string // the records the WAT envelopes refer to, in order
	}{
		{"A", scopeA, []string{"info", "sub-req", "sub", "a-req", "a", "dom", "meta"}},
		{"B", scopeB, []string{"info", "b-req", "b"}},
	} {
		wat := derive(t, "wat", seg, c.scope)
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

	wetA := derive(t, "wet", seg, scopeA)
	if len(wetA) != 2 || wetA[1].Header.Get(warc.FieldRefersTo) != ids["a"] || string(wetA[1].Block) != "Rendered\nafter scripts d" {
		t.Errorf("crawl A's WET: %d records, the page's %q referring to %s; want its DOM's text referring to %s",
			len(wetA), lastBlock(wetA), lastRefers(wetA), ids["a"])
	}
	wetB := derive(t, "wet", seg, scopeB)
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
