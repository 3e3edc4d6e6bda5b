package grid

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// TestContentEncodings crawls pages served gzip, x-gzip, deflate and br
// encoded (what the loader offers) and one in a coding it does not offer:
// the encoded pages are indexed with their text, and the other fails with
// the reason instead of being indexed as compressed bytes.
func TestContentEncodings(t *testing.T) {
	encoders := map[string]func(io.Writer) io.WriteCloser{
		"gzip":    func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		"x-gzip":  func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		"deflate": func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) },
		"br":      func(w io.Writer) io.WriteCloser { return brotli.NewWriter(w) },
		"compress": func(w io.Writer) io.WriteCloser { // not offered: sent anyway, as gzip bytes
			return gzip.NewWriter(w)
		},
	}
	var offered []string
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	var links strings.Builder
	for coding, enc := range encoders {
		fmt.Fprintf(&links, `<a href="/%s">%s</a> `, coding, coding)
		mux.HandleFunc("/"+coding, func(w http.ResponseWriter, r *http.Request) {
			offered = append(offered, r.Header.Get("Accept-Encoding"))
			var buf bytes.Buffer
			zw := enc(&buf)
			fmt.Fprintf(zw, "<html><title>%s page</title><body>decoded%s words here</body></html>", coding, strings.ReplaceAll(coding, "-", ""))
			zw.Close()
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", coding)
			w.Write(buf.Bytes())
		})
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><title>start</title><body>"+links.String()+"</body></html>")
	})
	start := serveSite(t, "encoded.test", mux)

	g, api := startGrid(t, testConfig(t, t.TempDir(), "encoded.test=127.0.0.1"))
	p := contracts.Profile{StartURLs: []string{start}, MaxDepth: 1,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 1}}
	crawlID := crawlToEnd(t, api, p, time.Minute)
	base := strings.TrimSuffix(start, "/")
	for coding := range encoders {
		key := txindex.Key(crawlID, base+"/"+coding)
		r, err := g.Backends.Tx.Get(t.Context(), key)
		if err != nil {
			t.Errorf("record of /%s: %v", coding, err)
			continue
		}
		if coding == "compress" {
			if r.Status != contracts.Failed || !strings.Contains(r.Error, "content encoding compress: not supported") {
				t.Errorf("/compress = %s (%q), want failed for its coding", r.Status, r.Error)
			}
			continue
		}
		doc, err := g.Backends.Search.Get(t.Context(), key)
		if err != nil {
			t.Errorf("/%s = %s (%q), document: %v; want indexed", coding, r.Status, r.Error, err)
			continue
		}
		if want := "decoded" + strings.ReplaceAll(coding, "-", ""); !strings.Contains(doc.Text, want) {
			t.Errorf("/%s text = %.80q, want it to hold %q", coding, doc.Text, want)
		}
	}
	for _, a := range offered {
		if a != "gzip, deflate, br" {
			t.Errorf("Accept-Encoding = %q, want gzip, deflate, br", a)
		}
	}
}
