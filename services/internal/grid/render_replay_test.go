package grid

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// TestRenderedPageReplaysInPywb crawls a scripted site with render
// "always", exports the crawl's segments and CDXJ with grid export, and
// replays a script page in pywb from them: warcio check passes every
// segment; every CDXJ line points at the record it names; pywb's wayback,
// given our CDXJ as its collection's index, serves the page's shell, its
// script and the JSON the script fetches, so that the script builds in
// Chromium the page the site's oracle describes (its token, its links,
// the one to the hidden page included); and nothing of the replay reaches
// the live site.
func TestRenderedPageReplaysInPywb(t *testing.T) {
	venv := pywbVenv(t)
	bin := func(tool string) string { return filepath.Join(venv, "bin", tool) }
	t.Setenv("GRIDCRAWL_CHROMIUM", chromiumPath(t))

	// The site on 127.0.0.1 rather than a name only the grid resolves: a
	// replay that escapes pywb's rewriting reaches it and is counted.
	site := websim.NewScriptSite(3)
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	base := srv.URL
	_, api := startGrid(t, testConfig(t, t.TempDir(), neighbourResolve))
	crawlNeighbour(t, api) // its records in the segment this crawl's go to: the exports leave them out
	id := crawlToEnd(t, api, contracts.Profile{
		StartURLs: []string{base + "/"}, MaxDepth: 20, Render: contracts.RenderAlways,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 20, DelayFactor: 0.1, Robots: contracts.RobotsObey},
	}, time.Minute)
	crawled := site.Requests()

	out := filepath.Join(t.TempDir(), "export")
	cliExport(t, "--api", api, "--out", out, "segments", id)
	ourIndex, err := os.ReadFile(filepath.Join(out, "index.cdxj"))
	if err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(out, "*.warc.gz"))
	if len(segs) == 0 {
		t.Fatalf("grid export segments --out wrote no segment")
	}
	for _, seg := range segs {
		runTool(t, out, bin("warcio"), "check", "-v", seg)
	}

	// Every line points at a readable record of its URL and date, of a
	// type pywb replays.
	captures := map[string]warc.CDXJ{}
	for line := range bytes.Lines(ourIndex) {
		c, err := warc.ParseCDXJ(line)
		if err != nil {
			t.Fatal(err)
		}
		rec := recordAt(t, out, c)
		typ := rec.Header.Get(warc.FieldType)
		if typ != warc.TypeResponse && typ != warc.TypeRevisit && typ != warc.TypeResource {
			t.Errorf("line %s points at a %s record", bytes.TrimSpace(line), typ)
		}
		if u := rec.Header.Get(warc.FieldTargetURI); u != c.URL {
			t.Errorf("line %s points at the record of %s", bytes.TrimSpace(line), u)
		}
		if d, err := time.Parse(time.RFC3339Nano, rec.Header.Get(warc.FieldDate)); err != nil || !d.Truncate(time.Second).Equal(c.Time) {
			t.Errorf("line %s points at a record of %s", bytes.TrimSpace(line), rec.Header.Get(warc.FieldDate))
		}
		captures[c.URL] = c
	}
	// What the replay of item 1 needs: its shell, the app's script and
	// style, and the JSON the script reads.
	const page = "/app/item/1"
	for _, p := range []string{page, "/app/app.js", "/app/app.css", "/api/item/1.json"} {
		if c, ok := captures[base+p]; !ok || c.Status != 200 {
			t.Errorf("CDXJ line of %s = %+v, %v; want a 200 capture", p, c, ok)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// A pywb collection with our segments and OUR index. wayback without a
	// config.yaml and without --live has no live-web collection: whatever
	// the index lacks answers 404 instead of being fetched.
	root := t.TempDir()
	runTool(t, root, bin("wb-manager"), "init", "crawl")
	if _, err := os.Stat(filepath.Join(root, "config.yaml")); err == nil {
		t.Fatalf("wb-manager init wrote a config.yaml; the collection may not be archive-only")
	}
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "collections", "crawl", "archive", filepath.Base(seg)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "collections", "crawl", "indexes", "index.cdxj"), ourIndex, 0o644); err != nil {
		t.Fatal(err)
	}
	wayback := startWayback(t, root, bin("wayback"))

	// pywb's framed replay, as a visitor sees it: its banner on top, the
	// page in an iframe of the same origin, its scripts run with pywb's
	// client-side rewriting (wombat). An unframed mp_ URL opened in a top
	// window is sent to this one by wombat anyway.
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	shots := artifactsDir(t)
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var buf []byte
			if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644)
		})
	}
	replayURL := wayback + "/crawl/" + captures[base+page].Time.Format(warc.CDXJTimeLayout) + "/" + base + page
	var got struct {
		Ready string   `json:"ready"`
		Title string   `json:"title"`
		Text  string   `json:"text"`
		Hrefs []string `json:"hrefs"`
	}
	var frames, anchors []*cdp.Node
	wctx, done := context.WithTimeout(bctx, 30*time.Second)
	defer done()
	err = chromedp.Run(wctx,
		chromedp.Navigate(replayURL),
		chromedp.Poll(`(() => {
			const f = document.querySelector("#replay_iframe");
			const d = f && f.contentDocument;
			const r = d && d.querySelector("#root[data-ready]");
			return r && {ready: r.dataset.ready, title: d.title, text: r.innerText, hrefs: [...r.querySelectorAll("a")].map((a) => a.href)};
		})()`, &got, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0)),
		chromedp.Nodes(`#replay_iframe`, &frames, chromedp.ByQuery),
		chromedp.ActionFunc(func(ctx context.Context) error {
			return chromedp.Nodes(`#root a`, &anchors, chromedp.ByQueryAll, chromedp.AtLeast(0), chromedp.FromNode(frames[0])).Do(ctx)
		}),
		// The shot once pywb's banner has taken its loading spinner off the
		// page; a spinner that stays only spoils the picture.
		chromedp.ActionFunc(func(ctx context.Context) error {
			err := chromedp.Poll(`!document.querySelector('[class*="loading-spinner-mask-"]:not([class*="hidden-"])')`, nil,
				chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second)).Do(ctx)
			if errors.Is(err, chromedp.ErrPollingTimeout) {
				t.Logf("pywb's loading spinner still shows")
				return nil
			}
			return err
		}),
		shot("replay-item-1"))
	if err != nil {
		var doc string
		_ = chromedp.Run(bctx, shot("replay-item-1-failed"), chromedp.Evaluate(`(() => {
			const f = document.querySelector("#replay_iframe");
			return (f && f.contentDocument ? f.contentDocument : document).documentElement.outerHTML;
		})()`, &doc))
		t.Fatalf("replay %s: the page never got ready: %v (page errors: %v)\n%s", replayURL, err, pageErrors(), doc)
	}
	t.Logf("replayed %s: title %q", replayURL, got.Title)
	if got.Ready != "1" {
		// app.js says data-ready="error" when a JSON fetch failed: pywb
		// did not serve it from the archive.
		t.Fatalf("replayed %s: #root data-ready=%q: %s (page errors: %v)", page, got.Ready, got.Text, pageErrors())
	}

	if tok := site.Token(page); !strings.Contains(got.Text, tok) {
		t.Errorf("replayed %s lacks its token %s; its text:\n%s", page, tok, got.Text)
	}
	if got.Title != site.Title(page) {
		t.Errorf("replayed %s has title %q, want %q", page, got.Title, site.Title(page))
	}
	// The links as the page's scripts see them (wombat answers with the
	// original URL) and as the DOM holds them: pywb rewrote each into the
	// collection, the site's link after the timestamp and modifier.
	want := site.Links(page)
	var seen []string
	for _, h := range got.Hrefs {
		seen = append(seen, strings.TrimPrefix(h, base))
	}
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Errorf("replayed %s: its script sees links %v, want %s + %v", page, got.Hrefs, base, want)
	}
	inArchive := regexp.MustCompile(`^/crawl/[0-9]{14}(?:[a-z]{2}_)?/` + regexp.QuoteMeta(base) + `(/.*)$`)
	var attrs, links []string
	for _, a := range anchors {
		h := a.AttributeValue("href")
		attrs = append(attrs, h)
		if m := inArchive.FindStringSubmatch(h); m != nil {
			links = append(links, m[1])
		}
	}
	slices.Sort(links)
	if len(links) != len(attrs) || !slices.Equal(links, want) {
		t.Errorf("replayed %s: its DOM links %v, want the collection's replays of %v", page, attrs, want)
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Logf("page errors during replay: %v", errs)
	}

	// Everything came from the archive: the site saw nothing new.
	for p, n := range site.Requests() {
		if n != crawled[p] {
			t.Errorf("the live site answered %s %d times during the replay", p, n-crawled[p])
		}
	}
}

// recordAt reads the record the CDXJ line c points at in dir.
func recordAt(t *testing.T, dir string, c warc.CDXJ) warc.Record {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, c.Filename))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := warc.ReadRecord(io.NewSectionReader(f, c.Offset, c.Length), 1<<24)
	if err != nil {
		t.Fatalf("record of %s at %s:%d+%d: %v", c.URL, c.Filename, c.Offset, c.Length, err)
	}
	return rec
}
