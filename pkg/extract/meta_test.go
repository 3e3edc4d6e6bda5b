package extract

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetadata(t *testing.T) {
	page := `<!doctype html><html><head><title> The
	Title </title><base href="/base/">
<meta charset="utf-8"><meta name="description" content="About &amp; more">
<link rel="stylesheet" href="/s.css" type="text/css"><link rel="canonical" href="https://example.test/c">
<script src="/app.js"></script><script>var x = "<a href='/not'>";</script></head>
<body><a href="/one" title="first">One <b>link</b></a> <img src="i.png" alt="pic">
<a href="two">Two</a><form action="/search"></form><iframe src="/frame"></iframe><script src="/late.js"></script>
</body></html>`
	got, err := Metadata(strings.NewReader(page), "text/html", MetaLimits{})
	if err != nil {
		t.Fatal(err)
	}
	want := Meta{
		Head: MetaHead{Title: "The Title", Base: "/base/",
			Metas: []map[string]string{{"charset": "utf-8"}, {"name": "description", "content": "About & more"}},
			Link: []MetaLink{{Path: "LINK@/href", URL: "/s.css", Rel: "stylesheet", Type: "text/css"},
				{Path: "LINK@/href", URL: "https://example.test/c", Rel: "canonical"}},
			Scripts: []MetaLink{{Path: "SCRIPT@/src", URL: "/app.js"}}},
		Links: []MetaLink{{Path: "A@/href", URL: "/one", Title: "first", Text: "One link"},
			{Path: "IMG@/src", URL: "i.png", Alt: "pic"}, {Path: "A@/href", URL: "two", Text: "Two"},
			{Path: "FORM@/action", URL: "/search"}, {Path: "IFRAME@/src", URL: "/frame"},
			{Path: "SCRIPT@/src", URL: "/late.js"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Metadata (-want +got):\n%s", d)
	}
}

// A page of a million links and metas keeps at most the limits.
func TestMetadataBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("<html><head>")
	for range 20000 {
		b.WriteString(`<meta name="k" content="` + strings.Repeat("v", 5000) + `">`)
	}
	b.WriteString("</head><body>")
	for range 200000 {
		b.WriteString(`<a href="/x">` + strings.Repeat("t", 300) + `</a>`)
	}
	lim := MetaLimits{MaxItems: 1000, MaxBytes: 1 << 20}
	got, err := Metadata(strings.NewReader(b.String()), "", lim)
	if err != nil {
		t.Fatal(err)
	}
	items := len(got.Head.Metas) + len(got.Links)
	size := 0
	for _, m := range got.Head.Metas {
		for k, v := range m {
			size += len(k) + len(v)
			if len(v) > maxMetaValue {
				t.Errorf("a meta value of %d bytes", len(v))
			}
		}
	}
	for _, l := range got.Links {
		size += len(l.URL) + len(l.Text)
		if len(l.Text) > MaxAnchorTextBytes {
			t.Errorf("an anchor text of %d bytes", len(l.Text))
		}
	}
	if items == 0 || items > lim.MaxItems || size > lim.MaxBytes {
		t.Errorf("%d items of %d bytes kept, want 1 to %d items within %d bytes", items, size, lim.MaxItems, lim.MaxBytes)
	}
}
