package grid

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
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
// inside ReplayWeb.page's replay iframe.
func TestWACZReplaysInReplayWebPage(t *testing.T) {
	rwp := replaywebDir(t)
	chromiumPath(t)
	start := serveSite(t, "archive.test", archiveHandler())
	data := t.TempDir()
	_, api := startGrid(t, testConfig(t, data, "archive.test=127.0.0.1"))
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{start}, MaxDepth: 3,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
	file := filepath.Join(t.TempDir(), "crawl.wacz")
	cliExport(t, "--api", api, "--wacz", "--out", file, id)

	target := strings.TrimSuffix(start, "/") + "/a.html"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html>
<html><head><meta charset="utf-8"><title>gridcrawl WACZ in ReplayWeb.page</title><script src="/ui.js"></script></head>
<body style="margin:0"><replay-web-page source="http://%s/crawl.wacz" url="%s"
 style="display:block;width:100%%;height:860px"></replay-web-page></body></html>`, r.Host, target)
	})
	mux.HandleFunc("GET /ui.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(rwp, "ui.js")) })
	// The service worker, at the embed's default replay base ./replay/.
	mux.HandleFunc("GET /replay/sw.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(rwp, "sw.js")) })
	// The WACZ, with Range requests, as ReplayWeb.page reads it.
	mux.HandleFunc("GET /crawl.wacz", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, file) })
	// On 127.0.0.1: a secure context, where service workers run.
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	var text string
	err := chromedp.Run(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.ActionFunc(func(ctx context.Context) error {
		for {
			if err := chromedp.Evaluate(replayText, &text).Do(ctx); err != nil {
				return err
			}
			if strings.Contains(text, "alpha text") {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}))
	dir := replaywebArtifacts(t)
	var png []byte
	if serr := chromedp.Run(bctx, chromedp.FullScreenshot(&png, 100)); serr == nil {
		if werr := os.WriteFile(filepath.Join(dir, "replay-a.png"), png, 0o644); werr != nil {
			t.Error(werr)
		}
	}
	if err != nil {
		t.Fatalf("ReplayWeb.page did not show %s's text: %v\npage text:\n%s\nscript errors: %v", target, err, text, pageErrors())
	}
	// The text is in a frame the service worker serves from the archive
	// under /replay/ (the site's own host does not resolve in the browser);
	// the replayed document believes it is at the page's URL.
	if !regexp.MustCompile(`<iframe ` + regexp.QuoteMeta(srv.URL) + `/replay/\S+` + regexp.QuoteMeta(target) + `>\s*\[` +
		regexp.QuoteMeta(target) + ` Page A\] alpha text`).MatchString(text) {
		t.Errorf("no replayed Page A with its text in a replay frame:\n%s", text)
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
