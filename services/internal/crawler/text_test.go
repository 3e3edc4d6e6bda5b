package crawler

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.String()
}

func TestTextOf(t *testing.T) {
	cfg := Config{MaxBodyBytes: 1 << 20, MaxTextBytes: 1024, MaxLinks: 100}
	resp := func(status, headers, body string) []byte {
		return []byte("HTTP/1.1 " + status + "\r\n" + headers + "\r\n" + body)
	}
	huge := "<html><body>" + strings.Repeat("<p>word and more words</p>", 20000) + "</body></html>"
	for _, c := range []struct {
		name, url string
		response  []byte
		dom       string
		want      PageText
		ok        bool
	}{
		{"html", "http://x.test/", resp("200 OK", "Content-Type: text/html\r\n", "<title> A  page </title><p>Hello <b>world</b></p><script>no()</script>"),
			"", PageText{"A page", "Hello world"}, true},
		{"gzip-encoded", "http://x.test/z", resp("200 OK", "Content-Type: text/html\r\nContent-Encoding: gzip\r\n", gzipped("<title>Z</title><p>zipped</p>")),
			"", PageText{"Z", "zipped"}, true},
		{"text, titled by its file name", "http://x.test/dir/notes.txt", resp("200 OK", "Content-Type: text/plain\r\n", "plain\nnotes"),
			"", PageText{"notes.txt", "plain notes"}, true},
		{"rendered: the DOM's text", "http://x.test/app", resp("200 OK", "Content-Type: text/html\r\n", "<title>Shell</title><p>loading</p>"),
			"<html><head><title>App</title></head><body><p>rendered text</p></body></html>", PageText{"App", "rendered text"}, true},
		{"meta noindex", "http://x.test/p", resp("200 OK", "Content-Type: text/html\r\n", `<meta name="robots" content="noindex"><p>secret</p>`), "", PageText{}, false},
		{"header noindex", "http://x.test/p", resp("200 OK", "Content-Type: text/html\r\nX-Robots-Tag: noindex\r\n", "<p>secret</p>"), "", PageText{}, false},
		{"not found", "http://x.test/gone", resp("404 Not Found", "Content-Type: text/html\r\n", "<p>gone</p>"), "", PageText{}, false},
		{"redirect", "http://x.test/r", resp("301 Moved", "Location: /\r\n", ""), "", PageText{}, false},
		{"image", "http://x.test/i.png", resp("200 OK", "Content-Type: image/png\r\n", "\x89PNG"), "", PageText{}, false},
		{"not http", "http://x.test/", []byte("garbage"), "", PageText{}, false},
	} {
		var dom []byte
		if c.dom != "" {
			dom = []byte(c.dom)
		}
		got, ok := TextOf(cfg, c.url, c.response, dom)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: TextOf = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	// A huge page's text is cut where the crawler cuts it.
	got, ok := TextOf(cfg, "http://x.test/huge", resp("200 OK", "Content-Type: text/html\r\n", huge), nil)
	if !ok || len(got.Text) == 0 || len(got.Text) > cfg.MaxTextBytes {
		t.Errorf("huge page: %d bytes of text (%v), want 1 to %d", len(got.Text), ok, cfg.MaxTextBytes)
	}
}
