package extract

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzText: plain text of any bytes, under any Content-Type header, gives
// valid UTF-8 within the limits, and never an error.
func FuzzText(f *testing.F) {
	for _, s := range []struct{ ctype, body string }{
		{"text/plain", "hello world\n"},
		{"text/plain; charset=iso-8859-1", "Gr\xfc\xdfe"},
		{"text/plain; charset=utf-16le", "\xff\xfeh\x00i\x00"},
		{"text/plain; charset=shift_jis", "\x82\xa0\x82\xa2"},
		{"text/plain; charset=nonsense", "\x00\x01\x02 bytes"},
		{"", "\xef\xbb\xbfBOM then text"},
	} {
		f.Add(s.ctype, s.body)
	}
	f.Fuzz(func(t *testing.T, ctype, body string) {
		res, err := TextWithContentType(strings.NewReader(body), ctype, Limits{MaxTextBytes: 500})
		if err != nil {
			t.Fatalf("TextWithContentType(%q, %q): %v", ctype, body, err)
		}
		if len(res.Text) > 500 || !utf8.ValidString(res.Text) {
			t.Fatalf("text of %d bytes, valid UTF-8 %v", len(res.Text), utf8.ValidString(res.Text))
		}
	})
}

// FuzzHTMLWithContentType: the charset of the Content-Type header, whatever
// it says, and the page's own declaration never make extraction fail or
// produce invalid UTF-8 or absolute links that are not http(s).
func FuzzHTMLWithContentType(f *testing.F) {
	for _, s := range []struct{ ctype, page string }{
		{"text/html; charset=utf-8", `<title>t</title><a href=/a>a</a>`},
		{"text/html; charset=iso-8859-1", "<meta charset=utf-8><title>Gr\xfc</title>"},
		{"text/html; charset=\"windows-1252\"", "<title>\x93q\x94</title>"},
		{"text/html; charset=utf-16", "\xff\xfe<\x00a\x00>\x00"},
		{"text/html; charset=x-user-defined", "<p>\x80\xff</p>"},
		{"text/html; charset=", "<meta http-equiv=content-type content='text/html; charset=koi8-r'><p>\xc1</p>"},
		{"text/html;;;charset=utf-8;charset=latin1", "<p>x</p>"},
		{"garbage", "<p>\x00</p>"},
	} {
		f.Add(s.ctype, s.page)
	}
	base := mustURL(f, pageURL)
	f.Fuzz(func(t *testing.T, ctype, page string) {
		res, err := HTMLWithContentType(strings.NewReader(page), ctype, base, Limits{MaxTextBytes: 1000, MaxLinks: 50, MaxHeadings: 5, MaxLinkBytes: 4096})
		if err != nil {
			t.Fatalf("HTMLWithContentType(%q, %q): %v", ctype, page, err)
		}
		for _, lk := range res.Links {
			checkLink(t, lk.URL)
		}
		for _, s := range append([]string{res.Title, res.Description, res.Text}, res.Headings...) {
			if !utf8.ValidString(s) {
				t.Fatalf("%q is not UTF-8", s)
			}
		}
		if len(res.Text) > 1000 || len(res.Links) > 50 {
			t.Fatalf("limits exceeded: %d text bytes, %d links", len(res.Text), len(res.Links))
		}
	})
}

// FuzzMetadata: any page under any Content-Type header gives WAT metadata
// within the limits, in valid UTF-8, that encodes as JSON, and no error.
func FuzzMetadata(f *testing.F) {
	for _, s := range []struct{ ctype, page string }{
		{"text/html", `<title>t</title><meta name=a content=b><link rel=x href=/l><a href=/a>a <b>b</b></a><img src=i alt=x>`},
		{"text/html; charset=iso-8859-1", "<base href=/b><a href='\xfc'>\xfc</a><form action=/f>"},
		{"", "<a href=1><a href=2>unclosed<script src=s></script><iframe src=f></iframe>"},
	} {
		f.Add(s.ctype, s.page)
	}
	f.Fuzz(func(t *testing.T, ctype, page string) {
		lim := MetaLimits{MaxItems: 20, MaxBytes: 2000}
		m, err := Metadata(strings.NewReader(page), ctype, lim)
		if err != nil {
			t.Fatalf("Metadata(%q, %q): %v", ctype, page, err)
		}
		b, err := json.Marshal(m)
		if err != nil || !utf8.Valid(b) {
			t.Fatalf("metadata does not encode: %v", err)
		}
		items := len(m.Head.Metas) + len(m.Head.Link) + len(m.Head.Scripts) + len(m.Links)
		if items > lim.MaxItems {
			t.Fatalf("%d items kept, limit %d", items, lim.MaxItems)
		}
		if len(b) > 8*lim.MaxBytes+1024+MaxTitleBytes {
			t.Fatalf("metadata of %d bytes", len(b))
		}
	})
}
