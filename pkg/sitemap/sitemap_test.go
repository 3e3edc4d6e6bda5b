package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func at(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func urlset(n int) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range n {
		fmt.Fprintf(&b, "<url><loc>http://a.test/p%d</loc></url>\n", i)
	}
	b.WriteString(`</urlset>`)
	return []byte(b.String())
}

func TestParse(t *testing.T) {
	plain := []byte("\ufeff <?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">" +
		"<url><loc> http://a.test/one </loc><lastmod>2024-03-01T10:20:30+02:00</lastmod><priority>0.5</priority></url>" +
		"<url><loc>http://a.test/two?a=1&amp;b=2</loc><lastmod>2024-03</lastmod></url>" +
		"<url><loc>http://a.test/three</loc><lastmod>yesterday</lastmod></url>" +
		"<url><lastmod>2024-01-01</lastmod></url>" + // no loc: skipped
		"</urlset>")
	want := []Entry{
		{Loc: "http://a.test/one", Lastmod: at("2024-03-01T08:20:30Z")},
		{Loc: "http://a.test/two?a=1&b=2", Lastmod: at("2024-03-01T00:00:00Z")},
		{Loc: "http://a.test/three"},
	}
	index := []byte(`<sitemapindex><sitemap><loc>http://a.test/s1.xml.gz</loc><lastmod>2023-12-31</lastmod></sitemap>` +
		`<sitemap><loc>http://b.test/s2.xml</loc></sitemap></sitemapindex>`)
	big := urlset(MaxURLs + 5)
	huge := append(append([]byte(`<urlset><url><loc>http://a.test/x</loc></url>`), bytes.Repeat([]byte(" "), MaxBytes)...), []byte(`<url><loc>http://a.test/y</loc></url></urlset>`)...)
	tests := []struct {
		name      string
		body      []byte
		truncated bool
		want      Result
		wantErr   error
	}{
		{name: "urlset", body: plain, want: Result{Entries: want}},
		{name: "gzipped urlset", body: gz(t, plain), want: Result{Entries: want}},
		{name: "index", body: index, want: Result{Index: true, Entries: []Entry{
			{Loc: "http://a.test/s1.xml.gz", Lastmod: at("2023-12-31T00:00:00Z")}, {Loc: "http://b.test/s2.xml"}}}},
		{name: "text", body: []byte("http://a.test/a\n\nhttps://a.test/b\r\n"), want: Result{Entries: []Entry{{Loc: "http://a.test/a"}, {Loc: "https://a.test/b"}}}},
		{name: "html", body: []byte("<!doctype html><html><body>Not found</body></html>"), wantErr: ErrNotSitemap},
		{name: "rss", body: []byte(`<?xml version="1.0"?><rss><channel></channel></rss>`), wantErr: ErrNotSitemap},
		{name: "empty", body: nil, wantErr: ErrNotSitemap},
		{name: "prose", body: []byte("Sorry, nothing here."), wantErr: ErrNotSitemap},
		{name: "broken after one", body: []byte(`<urlset><url><loc>http://a.test/x</loc></url><url><loc>http://a`), want: Result{
			Entries: []Entry{{Loc: "http://a.test/x"}}, Cut: "broke off: xml: XML syntax error on line 1: unexpected EOF"}},
		{name: "truncated by the loader", truncated: true, body: []byte(`<urlset><url><loc>http://a.test/x</loc></url><url><loc>http://a`), want: Result{
			Entries: []Entry{{Loc: "http://a.test/x"}}, Cut: "cut by the loader's body size limit: 1 entries kept"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.body, tc.truncated)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Parse(%q) error = %v, want %v", tc.name, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.name, diff)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		body    []byte
		entries int
		cut     string
	}{
		{"more than MaxURLs", big, MaxURLs, "lists more than 50000 entries: the first 50000 kept"},
		{"more than MaxURLs gzipped", gz(t, big), MaxURLs, "lists more than 50000 entries: the first 50000 kept"},
		{"more than MaxBytes gzipped", gz(t, huge), 1, fmt.Sprintf("larger than %d bytes uncompressed: cut there, 1 entries kept", MaxBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.body, false)
			if err != nil || len(got.Entries) != tc.entries || got.Cut != tc.cut {
				t.Errorf("Parse(%s) = %d entries, cut %q, %v; want %d entries, cut %q", tc.name, len(got.Entries), got.Cut, err, tc.entries, tc.cut)
			}
		})
	}
}

func TestParseLastmod(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *time.Time
	}{
		{"2024-03-01T10:20:30.123+02:00", at("2024-03-01T08:20:30Z")},
		{"2024-03-01T10:20Z", at("2024-03-01T10:20:00Z")},
		{"2024-03-01T10:20:30", at("2024-03-01T10:20:30Z")},
		{"2024", at("2024-01-01T00:00:00Z")},
		{"1969-12-31", nil},
		{"2999-01-01", nil},
		{"", nil},
		{"03/01/2024", nil},
	} {
		if got := ParseLastmod(tc.in); !cmp.Equal(got, tc.want) {
			t.Errorf("ParseLastmod(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`<urlset><url><loc>http://a.test/</loc><lastmod>2024-01-01</lastmod></url></urlset>`), false)
	f.Add([]byte(`<sitemapindex><sitemap><loc>http://a.test/s.xml</loc></sitemap></sitemapindex>`), true)
	f.Add([]byte("http://a.test/\n"), false)
	f.Fuzz(func(t *testing.T, body []byte, truncated bool) {
		res, err := Parse(body, truncated)
		if err != nil && len(res.Entries) > 0 {
			t.Fatalf("Parse returned entries with error %v", err)
		}
		if len(res.Entries) > MaxURLs {
			t.Fatalf("Parse returned %d entries", len(res.Entries))
		}
		for _, e := range res.Entries {
			if e.Loc == "" || len(e.Loc) > maxLocBytes {
				t.Fatalf("Parse returned entry %q", e.Loc)
			}
		}
	})
}
