package grid

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	htmlpkg "html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/segview"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/wacz"
)

// replaywebDir returns the unpacked replaywebpage npm package of
// scripts/services/replayweb.sh, or skips (fails when backends are
// required) when it is not installed.
func replaywebDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GRIDCRAWL_REPLAYWEB_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "gridcrawl-services", "replayweb")
	}
	for _, f := range []string{"ui.js", "sw.js"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			testenv.Unavailable(t, "no %s in %s: install ReplayWeb.page with scripts/services/replayweb.sh install (or set GRIDCRAWL_REPLAYWEB_DIR)", f, dir)
		}
	}
	return dir
}

// replayText is a script that returns the text of every document the page
// reaches: its own, its elements' shadow roots and its iframes' (same
// origin), recursively; ReplayWeb.page shows the replayed page in an iframe
// inside its app's shadow DOM inside the embed's iframe.
const replayText = `(() => {
  const out = [], seen = new Set();
  const walk = (root) => {
    if (!root || seen.has(root)) return;
    seen.add(root);
    if (root.body && root.body.innerText) out.push("[" + root.URL + " " + (root.title || "") + "] " + root.body.innerText);
    for (const el of root.querySelectorAll("*")) {
      if (el.shadowRoot) walk(el.shadowRoot);
      if (el.tagName === "IFRAME") { out.push("<iframe " + el.src + ">"); try { walk(el.contentDocument); } catch (e) {} }
    }
  };
  walk(document);
  return out.join("\n");
})()`

// TestWACZReplaysInReplayWebPage crawls a site on the embedded grid,
// downloads its WACZ from the API, and opens it in ReplayWeb.page (the npm
// package's ui.js and service worker, served with the WACZ from loopback)
// in Chromium: the replayed page shows the text the site served, read from
// inside ReplayWeb.page's replay iframe; and so does the same archive with
// its index compressed (indexes/index.cdx.gz and index.idx), as a crawl of
// over wacz.PlainIndexLines captures has it.
func TestWACZReplaysInReplayWebPage(t *testing.T) {
	rwp := replaywebDir(t)
	chromiumPath(t)
	start := serveSite(t, "archive.test", archiveHandler())
	data := t.TempDir()
	_, api := startGrid(t, testConfig(t, data, "archive.test=127.0.0.1,"+neighbourResolve))
	crawlNeighbour(t, api) // its records in the segment this crawl's go to: the WACZ leaves them out
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{start}, MaxDepth: 3,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
	file := filepath.Join(t.TempDir(), "crawl.wacz")
	cliExport(t, "--api", api, "--wacz", "--out", file, id)

	// The same archive with its index compressed (ZipNum blocks of 3
	// lines), as a large crawl's is.
	compressed := filepath.Join(t.TempDir(), "compressed.wacz")
	recompress(t, file, compressed)
	runTool(t, filepath.Dir(compressed), waczTool(t), "validate", "-f", compressed)

	// One embedding page a case, at the root (ReplayWeb.page's service
	// worker lives at the default replay base ./replay/).
	base := strings.TrimSuffix(start, "/")
	cases := []struct {
		page, wacz, path, title, text, shot string
	}{
		{"/a", "crawl.wacz", "/a.html", "Page A", "alpha text", "replay-a.png"},
		{"/b", "compressed.wacz", "/Dir/B.html?x=1&y=2", "Page B", "bravo text with a query", "replay-b-compressed-index.png"},
	}
	mux := http.NewServeMux()
	for _, tc := range cases {
		mux.HandleFunc("GET "+tc.page, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html>
<html><head><meta charset="utf-8"><title>gridcrawl WACZ in ReplayWeb.page</title><script src="/ui.js"></script></head>
<body style="margin:0"><replay-web-page source="http://%s/%s" url="%s"
 style="display:block;width:100%%;height:860px"></replay-web-page></body></html>`, r.Host, tc.wacz, htmlpkg.EscapeString(base+tc.path))
		})
	}
	mux.HandleFunc("GET /ui.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(rwp, "ui.js")) })
	// The service worker, at the embed's default replay base ./replay/,
	// and the app the embed's frame shows there: the service worker serves
	// it once active, the network before (a frame may load first).
	mux.HandleFunc("GET /replay/sw.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(rwp, "sw.js")) })
	mux.HandleFunc("GET /replay/ui.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(rwp, "ui.js")) })
	mux.HandleFunc("GET /replay/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(rwp, "index.html"))
	})
	// The WACZ files, with Range requests, as ReplayWeb.page reads them.
	mux.HandleFunc("GET /crawl.wacz", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, file) })
	mux.HandleFunc("GET /compressed.wacz", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, compressed) })
	// On 127.0.0.1: a secure context, where service workers run.
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	dir := replaywebArtifacts(t)
	for _, tc := range cases {
		target := base + tc.path
		var text string
		err := chromedp.Run(bctx, chromedp.Navigate(srv.URL+tc.page),
			chromedp.ActionFunc(func(ctx context.Context) error {
				for {
					if err := chromedp.Evaluate(replayText, &text).Do(ctx); err != nil {
						return err
					}
					if strings.Contains(text, tc.text) {
						return nil
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(200 * time.Millisecond):
					}
				}
			}))
		var png []byte
		if serr := chromedp.Run(bctx, chromedp.FullScreenshot(&png, 100)); serr == nil {
			if werr := os.WriteFile(filepath.Join(dir, tc.shot), png, 0o644); werr != nil {
				t.Error(werr)
			}
		}
		if err != nil {
			t.Fatalf("ReplayWeb.page did not show %s from %s: %v\npage text:\n%s\nscript errors: %v", target, tc.wacz, err, text, pageErrors())
		}
		// The text is in a frame the service worker serves from the
		// archive under /replay/ (the site's own host does not resolve in
		// the browser); the replayed document believes it is at the page's
		// URL.
		if !regexp.MustCompile(`<iframe ` + regexp.QuoteMeta(srv.URL) + `/replay/\S+>\s*\[` +
			regexp.QuoteMeta(target) + ` ` + tc.title + `\] ` + tc.text).MatchString(text) {
			t.Errorf("%s: no replayed %s with its text in a replay frame:\n%s", tc.wacz, tc.title, text)
		}
	}
}

// recompress writes the WACZ src again as dst with pkg/wacz, its index
// compressed in blocks of 3 lines: its segments (put in a store of their
// own), its index lines and its pages.
func recompress(t *testing.T, src, dst string) {
	t.Helper()
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	st, err := fsassets.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	read := func(f *zip.File) []byte {
		rc, err := f.Open()
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
	c := wacz.Crawl{Title: "recompressed", Software: "gridcrawl test", PlainLines: -1, BlockLines: 3, TempDir: t.TempDir()}
	var index []byte
	var pages []wacz.Page
	for _, f := range zr.File {
		b := read(f)
		switch {
		case strings.HasPrefix(f.Name, "archive/"):
			name := path.Base(f.Name)
			if err := st.Put(t.Context(), "seg/"+name, bytes.NewReader(b), int64(len(b)), "application/warc"); err != nil {
				t.Fatal(err)
			}
			c.Segments = append(c.Segments, wacz.Segment{Name: name, Key: "seg/" + name})
		case f.Name == "indexes/index.cdx":
			index = b
		case f.Name == "pages/pages.jsonl":
			for l := range bytes.Lines(b) {
				var p struct{ ID, URL, TS, Title string }
				if err := json.Unmarshal(l, &p); err != nil {
					t.Fatal(err)
				}
				if p.URL == "" {
					continue // the header
				}
				ts, err := time.Parse(time.RFC3339, p.TS)
				if err != nil {
					t.Fatal(err)
				}
				pages = append(pages, wacz.Page{ID: p.ID, URL: p.URL, TS: ts, Title: p.Title})
			}
		}
	}
	if len(c.Segments) == 0 || len(bytes.Split(index, []byte("\n"))) < 4 {
		t.Fatalf("%s: %d segments, index %q: too little to compress in blocks", src, len(c.Segments), index)
	}
	first := c.Segments[0].Name
	c.Store = st
	c.Index = func(_ context.Context, s wacz.Segment, yield func([]byte) error) (segview.View, error) {
		if s.Name != first {
			return segview.Whole(s.Key), nil // the merged index, given once
		}
		for l := range bytes.Lines(index) {
			if err := yield(l); err != nil {
				return segview.View{}, err
			}
		}
		return segview.Whole(s.Key), nil
	}
	c.Pages = func(_ context.Context, yield func(wacz.Page) error) error {
		for _, p := range pages {
			if err := yield(p); err != nil {
				return err
			}
		}
		return nil
	}
	e, err := wacz.Prepare(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := e.WriteTo(t.Context(), out); err != nil {
		t.Fatal(err)
	}
}

// replaywebArtifacts is where the test leaves its screenshot:
// $GRIDCRAWL_ARTIFACTS/replayweb, or a new temporary directory.
func replaywebArtifacts(t *testing.T) string {
	t.Helper()
	var dir string
	var err error
	if base := os.Getenv("GRIDCRAWL_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, "replayweb")
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "gridcrawl-replayweb-")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ReplayWeb.page screenshot in %s", dir)
	return dir
}
