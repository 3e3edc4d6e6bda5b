package grid

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// amplifyingPage is a page of n one-character links under a <base href> of
// a basePath-byte path: every link resolves to a URL about basePath bytes
// long, so the links take n*basePath bytes once resolved although the page
// holds about 12*n bytes.
func amplifyingPage(basePath, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<html><head><title>amplify</title><base href="/%s/"></head><body>`, strings.Repeat("p", basePath))
	for i := range n {
		fmt.Fprintf(&b, `<a href=%s>x</a>`, string(rune('a'+i%26))+fmt.Sprint(i))
	}
	b.WriteString("</body></html>")
	return b.String()
}

// TestLinkAmplificationIsBounded crawls pages whose few bytes resolve to
// megabytes of links: the document stored for each, and the records made
// for its links, stay within a small multiple of the page's size, and URLs
// longer than 2,048 bytes are not followed at all.
func TestLinkAmplificationIsBounded(t *testing.T) {
	pages := map[string]string{
		"/long-base":  amplifyingPage(8<<10, 1000), // a base longer than the URL cap: every link over it too
		"/under-base": amplifyingPage(1900, 5000),  // every link just under it
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<html><title>start</title><body><a href="/long-base">a</a> <a href="/under-base">b</a></body></html>`)
	})
	for path, body := range pages {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, body)
		})
	}
	start := serveSite(t, "amplify.test", mux)

	cfg := testConfig(t, t.TempDir(), "amplify.test=127.0.0.1")
	g, api := startGrid(t, cfg)
	// Depth 2: records are made for the two pages' links, which are fetched
	// (and answer 404).
	p := contracts.Profile{StartURLs: []string{start}, MaxDepth: 2,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 1}}
	crawlID := crawlToEnd(t, api, p, 2*time.Minute)
	base := strings.TrimSuffix(start, "/")
	for path, body := range pages {
		doc, err := g.Backends.Search.Get(t.Context(), txindex.Key(crawlID, base+path))
		if err != nil {
			t.Errorf("document of %s: %v", path, err)
			continue
		}
		stored, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		// The links may take 4 bytes per page byte; the rest of the
		// document (text, fields) is small here.
		if limit := 5 * len(body); len(stored) > limit {
			t.Errorf("%s: a %d-byte page stored a %d-byte document, want at most %d", path, len(body), len(stored), limit)
		}
		for _, l := range append(doc.InboundLinks, doc.OutboundLinks...) {
			if len(l) > 2048 {
				t.Errorf("%s: kept a link of %d bytes, want at most 2048", path, len(l))
				break
			}
		}
		t.Logf("%s: page %d bytes, document %d bytes, %d links kept", path, len(body), len(stored), len(doc.InboundLinks)+len(doc.OutboundLinks))
	}
	// Records exist only for the links kept: their URLs together stay
	// within the same bound as the documents.
	var urlBytes, records, unlinked int
	for _, status := range contracts.Statuses {
		for _, r := range crawlRecords(t, g.Backends.Tx, crawlID, status) {
			urlBytes += len(r.URL)
			records++
			// "a0" under the page's own directory: what the links of
			// /long-base became when its base was ignored instead of
			// making them too long as well.
			if p := strings.TrimPrefix(r.URL, base+"/"); p != r.URL && len(p) > 1 && p[0] >= 'a' && p[0] <= 'z' && strings.Trim(p[1:], "0123456789") == "" {
				unlinked++
			}
		}
	}
	pageBytes := len(pages["/long-base"]) + len(pages["/under-base"])
	if limit := 5 * pageBytes; urlBytes > limit {
		t.Errorf("%d records hold %d bytes of URLs, want at most %d", records, urlBytes, limit)
	}
	if unlinked > 0 {
		t.Errorf("%d records of URLs no page linked (links of /long-base resolved against the page URL)", unlinked)
	}
	// The links of /under-base that fit in its link budget, 4 bytes per
	// page byte: about 100 of its 5,000.
	if records < 50 {
		t.Errorf("%d records, want the links of /under-base that fit its budget", records)
	}
	t.Logf("%d records, %d bytes of URLs", records, urlBytes)
}
