package grid

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// chromiumPath returns the browser the dashboard test drives: GRIDCRAWL_CHROMIUM
// or Debian's /usr/bin/chromium (scripts/services/chromium.sh installs it).
// Without one the test skips, or fails where a browser is required (CI).
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("GRIDCRAWL_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err == nil {
		return p
	}
	msg := fmt.Sprintf("no browser at %s: install it with scripts/services/chromium.sh install (or set GRIDCRAWL_CHROMIUM)", p)
	if os.Getenv("GRIDCRAWL_REQUIRE_BACKENDS") == "1" || os.Getenv("GRIDCRAWL_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// artifactsDir is where the test leaves its screenshots:
// $GRIDCRAWL_ARTIFACTS/dashboard, or a new directory under the system's
// temporary directory that outlives the test.
func artifactsDir(t *testing.T) string {
	t.Helper()
	var dir string
	var err error
	if base := os.Getenv("GRIDCRAWL_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, "dashboard")
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "gridcrawl-dashboard-")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard screenshots in %s", dir)
	return dir
}

// browser starts a headless Chromium with a new empty profile and returns
// its context; page script errors are collected into errs.
func browser(t *testing.T, ctx context.Context) (context.Context, func() []string) {
	t.Helper()
	// Not t.TempDir: Chromium's helper processes may still write to their
	// profile for a moment after the browser is gone, which would fail the
	// test at its cleanup. The directory is removed once they are done.
	profile, err := os.MkdirTemp("", "gridcrawl-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if err := os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("chromium profile %s left behind", profile)
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	var mu sync.Mutex
	var errs []string
	chromedp.ListenTarget(bctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			mu.Lock()
			errs = append(errs, ev.ExceptionDetails.Error())
			mu.Unlock()
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("console.error %s", argsText(ev.Args)))
				mu.Unlock()
			}
		case *page.EventJavascriptDialogOpening:
			// The dashboard never blocks on a dialog: one would hang the test.
			mu.Lock()
			errs = append(errs, "dialog "+ev.Message)
			mu.Unlock()
			go func() { _ = chromedp.Run(bctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	if err := chromedp.Run(bctx); err != nil {
		msg := fmt.Sprintf("start chromium: %v", err)
		if os.Getenv("GRIDCRAWL_REQUIRE_BACKENDS") == "1" || os.Getenv("GRIDCRAWL_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if a.Description != "" {
			parts = append(parts, a.Description)
		} else {
			parts = append(parts, string(a.Value))
		}
	}
	return strings.Join(parts, " ")
}

var digits = regexp.MustCompile(`[^0-9]`)

// countOf reads a number the dashboard shows as "1,234".
func countOf(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(digits.ReplaceAllString(s, ""), 10, 64)
	if err != nil {
		t.Fatalf("count %q on the page: %v", s, err)
	}
	return n
}

// TestDashboardInBrowser drives the dashboard in a real Chromium against an
// embedded grid crawling the awkward test site: it submits a crawl through
// the form (after the API refused an invalid one next to its field),
// watches it finish, compares the counts on the page with the API and with
// the site's oracle, opens a failed URL's reason, pauses, resumes, changes
// and cancels (two clicks) a second crawl from the frontier page, and searches.
func TestDashboardInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	shots := artifactsDir(t)

	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	const depth = 3
	exp := site.Expect(depth)
	t.Setenv("GRIDCRAWL_TIMELINE_INTERVAL", "100ms") // a plot with points for a crawl of seconds
	g, api := startGrid(t, testConfig(t, t.TempDir(), site.Resolve()))

	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var buf []byte
			if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644)
		})
	}
	run := func(step string, actions ...chromedp.Action) {
		t.Helper()
		sctx, done := context.WithTimeout(bctx, 2*time.Minute)
		defer done()
		if err := chromedp.Run(sctx, actions...); err != nil {
			var html string
			_ = chromedp.Run(bctx, shot("failed-"+strings.ReplaceAll(step, " ", "-")), chromedp.Evaluate(`document.querySelector("main").innerText`, &html))
			t.Fatalf("%s: %v (page errors: %v)\npage text:\n%s", step, err, pageErrors(), html)
		}
	}

	// An invalid start URL: the API's error shows next to the field.
	var fieldErr string
	run("invalid form",
		chromedp.Navigate(api+"/#/new"),
		chromedp.WaitVisible(`#f-start_urls`, chromedp.ByQuery),
		chromedp.SendKeys(`#f-start_urls`, "ftp://files.example.test/", chromedp.ByQuery),
		chromedp.Click(`#submit`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-for="start_urls"] .field-error`, chromedp.ByQuery),
		chromedp.Text(`[data-for="start_urls"] .field-error`, &fieldErr, chromedp.ByQuery),
		shot("new-crawl-error"))
	if !strings.Contains(fieldErr, "start_urls[0]") || !strings.Contains(fieldErr, "scheme") {
		t.Errorf("field error next to start_urls = %q, want the API's start_urls[0] scheme error", fieldErr)
	}

	// The crawl submitted through the form.
	var hash string
	run("submit crawl",
		chromedp.SetValue(`#f-start_urls`, site.StartURL(), chromedp.ByQuery),
		chromedp.SetValue(`#f-name`, "test site", chromedp.ByQuery),
		chromedp.SetValue(`#f-max_depth`, strconv.Itoa(depth), chromedp.ByQuery),
		chromedp.SetValue(`#f-scope`, "domain", chromedp.ByQuery),
		chromedp.SetValue(`#f-politeness-min_delay_ms`, "60", chromedp.ByQuery),
		chromedp.SetValue(`#f-politeness-max_delay_ms`, "200", chromedp.ByQuery),
		chromedp.SetValue(`#f-politeness-delay_factor`, "1", chromedp.ByQuery),
		chromedp.SetValue(`#f-sitemaps`, "on", chromedp.ByQuery),
		chromedp.SetValue(`#f-sitemap_depth`, "1", chromedp.ByQuery),
		shot("new-crawl"),
		chromedp.Click(`#submit`, chromedp.ByQuery),
		chromedp.WaitVisible(`#counts`, chromedp.ByQuery),
		chromedp.Evaluate(`location.hash`, &hash))
	id, err := url.PathUnescape(strings.TrimPrefix(hash, "#/crawl/"))
	if err != nil || id == "" || id == hash {
		t.Fatalf("after submitting, the page is at %q, want #/crawl/ID", hash)
	}

	// Watch it finish, then read the counts off the page.
	pageCounts := map[string]string{}
	keys := []string{"indexed", "redirected", "failed", "excluded", "sitemap", "to-be-loaded", "documents", "total"}
	actions := []chromedp.Action{chromedp.WaitVisible(`#state .badge.finished`, chromedp.ByQuery),
		chromedp.WaitVisible(`#failure-reasons table`, chromedp.ByQuery)}
	vals := make([]string, len(keys))
	for i, k := range keys {
		actions = append(actions, chromedp.Text(fmt.Sprintf(`[data-count="%s"]`, k), &vals[i], chromedp.ByQuery))
	}
	top := chromedp.ActionFunc(func(ctx context.Context) error { // the first screen, for the README
		var buf []byte
		if err := chromedp.CaptureScreenshot(&buf).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(shots, "crawl-detail-top.png"), buf, 0o644)
	})
	run("watch the crawl finish", append(actions, chromedp.Sleep(2500*time.Millisecond), shot("crawl-detail"), top)...)
	for i, k := range keys {
		pageCounts[k] = vals[i]
	}
	var st contracts.CrawlStatus
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
		t.Fatalf("GET crawl = %d", code)
	}
	// A noindex page answered 200 and was parsed: it is excluded on
	// purpose, shown apart from the failures.
	want := map[string]int64{
		"indexed": int64(len(exp.Indexed)), "redirected": int64(len(exp.Redirected)),
		"failed": int64(len(exp.Failed)), "excluded": int64(len(exp.NoIndex)), "sitemap": int64(len(exp.SitemapProbes)), "to-be-loaded": 0,
		"documents": int64(len(exp.Indexed)), "total": int64(len(exp.Fetched) + len(exp.RobotsDenied) + len(exp.SitemapProbes)),
	}
	api2page := map[string]int64{"indexed": st.Counts[contracts.Indexed], "redirected": st.Counts[contracts.Redirected],
		"failed": st.Counts[contracts.Failed] - st.Excluded, "excluded": st.Excluded, "sitemap": st.Counts[contracts.Sitemap],
		"to-be-loaded": st.Counts[contracts.ToBeLoaded], "documents": st.Documents, "total": st.Total}
	if !st.Profile.SitemapsEnabled() || st.Profile.SitemapDepth != 1 {
		t.Errorf("the form's sitemap fields gave sitemaps %v, sitemap depth %d; want on, 1", st.Profile.Sitemaps, st.Profile.SitemapDepth)
	}
	for _, k := range keys {
		got := countOf(t, pageCounts[k])
		if got != api2page[k] {
			t.Errorf("page shows %s = %d, the API says %d", k, got, api2page[k])
		}
		if got != want[k] {
			t.Errorf("page shows %s = %d, the site's oracle says %d", k, got, want[k])
		}
	}

	// The crawl's WACZ is a link in its heading, and it downloads with the
	// page's own session.
	var waczHref, waczLabel, waczGot string
	run("download wacz",
		chromedp.AttributeValue(`#download-wacz`, "href", &waczHref, nil, chromedp.ByQuery),
		chromedp.Text(`#download-wacz`, &waczLabel, chromedp.ByQuery),
		chromedp.Evaluate(`fetch(document.querySelector("#download-wacz").href).then(async r =>
			r.status + " " + r.headers.get("Content-Type") + " " + new TextDecoder().decode((await r.arrayBuffer()).slice(0, 2)))`, &waczGot,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
		chromedp.ScrollIntoView(`#download-wacz`, chromedp.ByQuery), shot("crawl-detail-wacz"))
	if want := "/api/v1/crawls/" + url.PathEscape(id) + "/wacz"; waczHref != want || waczLabel != "Download WACZ" {
		t.Errorf("WACZ link %q to %q, want \"Download WACZ\" to %q", waczLabel, waczHref, want)
	}
	if waczGot != "200 application/wacz+zip PK" {
		t.Errorf("the WACZ link answers %q, want a 200 application/wacz+zip ZIP", waczGot)
	}

	// The same page on a phone: nothing may overflow the viewport.
	var overflow bool
	run("narrow crawl detail",
		chromedp.EmulateViewport(390, 844),
		chromedp.Sleep(500*time.Millisecond),
		chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow),
		shot("crawl-detail-narrow"),
		chromedp.EmulateViewport(1360, 900))
	if overflow {
		t.Errorf("the crawl detail page is wider than a 390 px viewport")
	}

	// The crawls list shows the crawl finished with the same counts, and
	// its columns add up to its total.
	listCols := []string{"indexed", "redirected", "failed", "excluded", "sitemap", "pending", "retired", "total"}
	var listVals map[string]string
	run("crawls list",
		chromedp.Navigate(api+"/#/"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-crawl="%s"][data-state="finished"]`, id), chromedp.ByQuery),
		chromedp.Evaluate(fmt.Sprintf(`Object.fromEntries([...document.querySelectorAll('tr[data-crawl="%s"] [data-count]')].map((e) => [e.dataset.count, e.textContent]))`, id), &listVals),
		shot("crawls"))
	var sum int64
	for _, k := range listCols {
		if _, ok := listVals[k]; !ok {
			t.Fatalf("crawls list row has no %s column: %v", k, listVals)
		}
		if k != "total" {
			sum += countOf(t, listVals[k])
		}
	}
	if got := countOf(t, listVals["indexed"]); got != st.Counts[contracts.Indexed] {
		t.Errorf("crawls list shows %d indexed, want %d", got, st.Counts[contracts.Indexed])
	}
	if total := countOf(t, listVals["total"]); sum != total || total != st.Total {
		t.Errorf("crawls list columns %v add up to %d, its total is %d, the API's %d", listVals, sum, total, st.Total)
	}

	// A failed URL's reason, reached from the failure report's sample.
	var sampleHref, reason, shownURL string
	run("open a failed url",
		chromedp.Navigate(api+"/#/crawl/"+url.PathEscape(id)),
		chromedp.WaitVisible(`#failure-reasons a[href^="#/url"]`, chromedp.ByQuery),
		chromedp.AttributeValue(`#failure-reasons a[href^="#/url"]`, "href", &sampleHref, nil, chromedp.ByQuery),
		chromedp.Click(`#failure-reasons a[href^="#/url"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#url-reason`, chromedp.ByQuery),
		chromedp.Text(`#url-reason`, &reason, chromedp.ByQuery),
		chromedp.Text(`#url-record h2`, &shownURL, chromedp.ByQuery),
		shot("url"))
	rec, err := g.Backends.Tx.Get(ctx, txindex.Key(id, shownURL))
	if err != nil {
		t.Fatalf("record of %q shown on the URL page: %v", shownURL, err)
	}
	if rec.Status != contracts.Failed || strings.TrimSpace(reason) != rec.Error || reason == "" {
		t.Errorf("URL page of %s shows reason %q, the transaction index has %s %q", shownURL, reason, rec.Status, rec.Error)
	}
	if !slices.Contains(exp.Failed, shownURL) && !slices.Contains(exp.NoIndex, shownURL) {
		t.Errorf("failure sample %s is not a URL the oracle expects to fail", shownURL)
	}

	// An indexed page, which the site's oracle says was fetched (over
	// plain HTTP: the loader renders none yet), shows it was not rendered.
	if len(exp.Indexed) == 0 {
		t.Fatal("the test site has no indexed pages")
	}
	page := exp.Indexed[0]
	var renderLine string
	run("open an indexed url",
		chromedp.Navigate(api+"/#/url?crawl="+url.QueryEscape(id)+"&url="+url.QueryEscape(page)),
		chromedp.WaitVisible(`#url-render`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => { const dd = document.getElementById("url-render");
  return dd.previousElementSibling.textContent + ": " + dd.textContent; })()`, &renderLine),
		shot("url-indexed"))
	if renderLine != "Rendered: no" {
		t.Errorf("URL page of indexed page %s shows %q, want %q", page, renderLine, "Rendered: no")
	}
	// The record's attempts count the recovery sweep's redeliveries: a page
	// fetched on its first delivery shows none, not "Attempts 0".
	var redeliveries string
	run("redeliveries", chromedp.Evaluate(`(() => { const dd = document.getElementById("url-attempts");
  return dd ? dd.previousElementSibling.textContent + ": " + dd.textContent : "no #url-attempts"; })()`, &redeliveries))
	if prec, err := g.Backends.Tx.Get(ctx, txindex.Key(id, page)); err != nil || prec.Attempts != 0 || redeliveries != "Redeliveries: none" {
		t.Errorf("URL page of indexed page %s shows %q (record attempts %d, %v), want %q", page, redeliveries, prec.Attempts, err, "Redeliveries: none")
	}

	// Search finds the page holding a word of the site.
	if len(exp.Words) == 0 {
		t.Fatal("the test site has no words to search")
	}
	w := exp.Words[0]
	var hitURLs []string
	run("search",
		chromedp.Navigate(api+"/#/search"),
		chromedp.WaitVisible(`#q`, chromedp.ByQuery),
		chromedp.SendKeys(`#q`, w.Word+"\n", chromedp.ByQuery),
		chromedp.WaitVisible(`#results .hit`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#results .hit .u")].map(e => e.textContent)`, &hitURLs),
		shot("search"))
	if !slices.Contains(hitURLs, w.URL) {
		t.Errorf("search %q in the browser = %v, want %s", w.Word, hitURLs, w.URL)
	}
	// The result's WARC record link serves the page's response record.
	var warc string
	run("warc link", chromedp.Evaluate(`fetch(document.querySelector('#results .hit a[href*="/warc?key="]').href)
		.then(r => r.text().then(t => r.status + " " + t.slice(0, 600)))`, &warc, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	if !strings.HasPrefix(warc, "200 WARC/1.") || !strings.Contains(warc, "WARC-Target-URI: "+hitURLs[0]) {
		t.Errorf("WARC record link of %s = %.200q, want 200 with its WARC record", hitURLs[0], warc)
	}

	// A slow second crawl to pause, resume, change and cancel from the
	// frontier page.
	slow := contracts.Profile{Name: "slow", StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 3000, MaxDelayMS: 3000, DelayFactor: 0, Robots: contracts.RobotsObey}}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", slow, &created); code != http.StatusCreated {
		t.Fatalf("POST slow crawl = %d", code)
	}
	state := func() contracts.CrawlStatus {
		var s contracts.CrawlStatus
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID, nil, &s); code != http.StatusOK {
			t.Fatalf("GET slow crawl = %d", code)
		}
		return s
	}
	// A running crawl's pages/s shows a rate from the first poll on.
	var firstRate string
	run("running crawl's rate",
		chromedp.Navigate(api+"/#/"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-crawl="%s"][data-state="running"] td[data-rate]`, created.CrawlID), chromedp.ByQuery),
		chromedp.Text(fmt.Sprintf(`tr[data-crawl="%s"] td[data-rate]`, created.CrawlID), &firstRate, chromedp.ByQuery))
	if _, err := strconv.ParseFloat(firstRate, 64); err != nil {
		t.Errorf("pages/s of the running crawl on the list's first poll = %q, want a number", firstRate)
	}
	var redErrors []string
	var loadersLine string
	var groupsScroll float64
	run("frontier",
		chromedp.Navigate(api+"/#/frontier"),
		chromedp.WaitVisible(`#groups tr[data-group]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls #pause:not([disabled])`, chromedp.ByQuery),
		shot("frontier"),
		chromedp.Text(`#frontier-time`, &loadersLine, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#groups td.err")].map((e) => e.textContent).filter((t) => /http status 4(?!29)\d\d/.test(t))`, &redErrors),
		chromedp.Evaluate(`(() => { const w = document.querySelector("#groups .tablewrap"); return w ? w.scrollWidth - w.clientWidth : -1; })()`, &groupsScroll),
		chromedp.Click(`#controls #pause`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls .badge.paused`, chromedp.ByQuery))
	if groupsScroll != 0 {
		t.Errorf("the frontier's groups table scrolls sideways by %v px (or is missing: -1) at the test's width", groupsScroll)
	}
	if s := state(); s.State != contracts.CrawlPaused {
		t.Errorf("after Pause on the frontier page the crawl is %s, want paused", s.State)
	}
	run("resume", chromedp.Click(`#controls #resume:not([disabled])`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls .badge.running`, chromedp.ByQuery))
	if s := state(); s.State != contracts.CrawlRunning {
		t.Errorf("after Resume on the frontier page the crawl is %s, want running", s.State)
	}
	run("change politeness",
		chromedp.SetValue(`#patch-form [data-field="politeness.min_delay_ms"]`, "2500", chromedp.ByQuery),
		chromedp.SetValue(`#patch-form [data-field="budget.total_budget"]`, "40", chromedp.ByQuery),
		chromedp.Click(`#patch-form button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#toast:not([hidden])`, chromedp.ByQuery),
		chromedp.Sleep(300*time.Millisecond), shot("frontier-changed"))
	s := state()
	if s.Profile.Politeness.MinDelayMS != 2500 || s.Profile.Budget == nil || s.Profile.Budget.TotalBudget != 40 || s.Profile.Version != 1 {
		t.Errorf("after the change the profile has min delay %d, budget %+v, version %d; want 2500, total 40, version 1",
			s.Profile.Politeness.MinDelayMS, s.Profile.Budget, s.Profile.Version)
	}
	// The change reaches the crawl's group within seconds: its row shows
	// the profile version that decides its delay, and the crawl's budget.
	var budgetCell string
	run("group runs version 1",
		chromedp.WaitVisible(`#groups tr[data-group] td[data-version="1"]`, chromedp.ByQuery),
		chromedp.Text(fmt.Sprintf(`#groups tr[data-group] div[data-crawl="%s"]`, created.CrawlID), &budgetCell, chromedp.ByQuery),
		shot("frontier-version"))
	if !strings.HasSuffix(strings.TrimSpace(budgetCell), "/ 40") {
		t.Errorf("the slow crawl's spend in its group = %q, want it against its total budget of 40", budgetCell)
	}
	run("cancel", chromedp.WaitVisible(`//*[@id="controls"]//*[contains(text(), "Profile version 1.")]`, chromedp.BySearch),
		chromedp.Click(`#controls #cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls #cancel.armed`, chromedp.ByQuery),
		chromedp.Click(`#controls #cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls .empty`, chromedp.ByQuery))
	if loadersLine != "1 loader reporting" {
		t.Errorf("frontier says %q, want %q (the embedded grid has one loader)", loadersLine, "1 loader reporting")
	}
	if len(redErrors) > 0 {
		t.Errorf("the frontier shows 4xx answers as errors, in red: %q", redErrors)
	}
	cancelled := state()
	if cancelled.State != contracts.CrawlCancelled {
		t.Errorf("after Cancel on the frontier page the crawl is %s, want cancelled", cancelled.State)
	}
	if cancelled.Cancelled == 0 || cancelled.Cancelled > cancelled.Counts[contracts.Failed] {
		t.Errorf("the cancelled crawl counts %d cancelled of %d failed, want some, at most the failed", cancelled.Cancelled, cancelled.Counts[contracts.Failed])
	}

	// The crawl list at a laptop's and a small window's width: every column
	// in view without a horizontal scroll bar, crawl ids on one line, the
	// cancelled crawl's unfetched URLs counted as cancelled, not failed.
	for _, width := range []int64{1400, 1024} {
		var m struct {
			Scroll, Client           float64
			FinishedRight, WrapRight float64
			IDHeights                []float64
			LineHeight               float64
			Counts                   map[string]string
		}
		run(fmt.Sprintf("crawls list at %d px", width),
			chromedp.EmulateViewport(width, 900),
			chromedp.Navigate(api+"/#/"),
			chromedp.WaitVisible(fmt.Sprintf(`tr[data-crawl="%s"][data-state="cancelled"]`, created.CrawlID), chromedp.ByQuery),
			chromedp.Sleep(300*time.Millisecond),
			chromedp.Evaluate(fmt.Sprintf(`(() => {
  const wrap = document.querySelector("#crawls").parentElement;
  const fin = [...document.querySelectorAll("#crawls th")].find((e) => e.textContent.trim() === "Finished");
  const ids = [...document.querySelectorAll("#crawls .crawl-id")];
  return { Scroll: wrap.scrollWidth, Client: wrap.clientWidth,
    FinishedRight: fin.getBoundingClientRect().right, WrapRight: wrap.getBoundingClientRect().right,
    IDHeights: ids.map((e) => e.getBoundingClientRect().height),
    LineHeight: ids.length ? parseFloat(getComputedStyle(ids[0]).lineHeight) : 0,
    Counts: Object.fromEntries([...document.querySelectorAll('tr[data-crawl="%s"] [data-count]')].map((e) => [e.dataset.count, e.textContent])) };
})()`, created.CrawlID), &m),
			shot(fmt.Sprintf("crawls-%d", width)))
		if m.Scroll > m.Client {
			t.Errorf("at %d px the crawl list scrolls sideways: scrollWidth %v > clientWidth %v", width, m.Scroll, m.Client)
		}
		if m.FinishedRight > m.WrapRight+1 {
			t.Errorf("at %d px the Finished column ends at %v px, past the list's edge at %v px", width, m.FinishedRight, m.WrapRight)
		}
		if len(m.IDHeights) < 2 {
			t.Errorf("at %d px the list shows %d crawl ids, want one per crawl", width, len(m.IDHeights))
		}
		for _, ht := range m.IDHeights {
			if m.LineHeight == 0 || ht > 1.5*m.LineHeight {
				t.Errorf("at %d px a crawl id is %v px high, more than one line of %v px: it wraps", width, ht, m.LineHeight)
			}
		}
		if width == 1400 {
			var tile string
			run("cancelled crawl detail",
				chromedp.Navigate(api+"/#/crawl/"+url.PathEscape(created.CrawlID)),
				// The tile is drawn before the crawl's counts arrive, and drawn
				// again with every refresh: wait for its number, as a person
				// would, and read it in the same look.
				chromedp.Poll(`(() => { const e = document.querySelector('#counts [data-count="cancelled"]');
  return e && /\d/.test(e.textContent) ? e.textContent : false; })()`, &tile,
					chromedp.WithPollingInterval(50*time.Millisecond)),
				shot("crawl-detail-cancelled"))
			if countOf(t, tile) != cancelled.Cancelled {
				t.Errorf("the cancelled crawl's page shows %s cancelled, the API %d", tile, cancelled.Cancelled)
			}
			failed := cancelled.Counts[contracts.Failed] - cancelled.Excluded - cancelled.Cancelled
			// The chart of URLs per status draws the URLs the cancel left
			// unfetched as cancelled too, not as failed.
			var legend string
			run("cancelled crawl's timeline",
				chromedp.Poll(`(() => { const e = document.querySelector('#chart-status');
  return e && /cancelled/.test(e.textContent) ? e.textContent : false; })()`, &legend,
					chromedp.WithPollingInterval(100*time.Millisecond)))
			if failed == 0 && regexp.MustCompile(`failed[^0-9]*[1-9]`).MatchString(legend) {
				t.Errorf("the cancelled crawl's status chart reads %q: its cancelled URLs drawn as failed", legend)
			}
			if c, f := countOf(t, m.Counts["cancelled"]), countOf(t, m.Counts["failed"]); c != cancelled.Cancelled || f != failed {
				t.Errorf("the cancelled crawl's row shows %d cancelled, %d failed; the API says %d cancelled, %d other failures", c, f, cancelled.Cancelled, failed)
			}
		}
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the dashboard logged script errors: %v", errs)
	}
}

// TestDashboardLoginInBrowser logs in to a grid that has an API token through
// the login form, uses the dashboard on the session cookie, and logs out.
func TestDashboardLoginInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	shots := artifactsDir(t)
	const token = "browser-test-token"
	t.Setenv("GRIDCRAWL_API_TOKEN", token)
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var buf []byte
			if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644)
		})
	}
	var loginURL, afterLogin, afterLogout, cookieJS, errText string
	err := chromedp.Run(bctx,
		chromedp.Navigate(api+"/"),
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.Location(&loginURL),
		chromedp.SendKeys(`#token`, "wrong", chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`.field-error`, chromedp.ByQuery),
		chromedp.Text(`.field-error`, &errText, chromedp.ByQuery),
		shot("login"),
		chromedp.SetValue(`#token`, token, chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`#crawls`, chromedp.ByQuery),
		chromedp.WaitVisible(`#crawls .empty`, chromedp.ByQuery),
		chromedp.Location(&afterLogin),
		chromedp.Evaluate(`document.cookie`, &cookieJS),
		chromedp.WaitVisible(`#logout button`, chromedp.ByQuery),
		chromedp.Click(`#logout button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.Location(&afterLogout),
	)
	if err != nil {
		t.Fatalf("login in the browser: %v (page errors: %v)", err, pageErrors())
	}
	if !strings.HasSuffix(loginURL, "/login") || !strings.HasSuffix(afterLogin, "/") || !strings.HasSuffix(afterLogout, "/login") {
		t.Errorf("pages = %s, then %s after login, %s after logout; want /login, /, /login", loginURL, afterLogin, afterLogout)
	}
	if !strings.Contains(errText, "Wrong token") {
		t.Errorf("wrong token shows %q, want an error", errText)
	}
	if cookieJS != "" {
		t.Errorf("document.cookie = %q: the session cookie must be HttpOnly", cookieJS)
	}
	// Logged out, the API refuses the browser again.
	var status int
	if err := chromedp.Run(bctx, chromedp.Evaluate(`fetch("/api/v1/crawls").then(r => r.status)`, &status, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusUnauthorized {
		t.Errorf("fetch after logout = %d, want 401", status)
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the dashboard logged script errors: %v", errs)
	}
}

// dashRun is a dashboard test's way of taking steps in the browser: each
// step fails the test with a screenshot, the page's script errors and its
// text.
type dashRun struct {
	t          *testing.T
	bctx       context.Context
	shots      string
	pageErrors func() []string
}

// shot saves a screenshot of the whole page as name.png.
func (d *dashRun) shot(name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var buf []byte
		if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(d.shots, name+".png"), buf, 0o644)
	})
}

// run takes the step named step.
func (d *dashRun) run(step string, actions ...chromedp.Action) {
	d.t.Helper()
	sctx, done := context.WithTimeout(d.bctx, 2*time.Minute)
	defer done()
	if err := chromedp.Run(sctx, actions...); err != nil {
		var text string
		_ = chromedp.Run(d.bctx, d.shot("failed-"+strings.ReplaceAll(step, " ", "-")), chromedp.Evaluate(`document.querySelector("main").innerText`, &text))
		d.t.Fatalf("%s: %v (page errors: %v)\npage text:\n%s", step, err, d.pageErrors(), text)
	}
}

// continuousView is what the crawl page shows of a continuous crawl, read
// in one go (the page redraws at every poll).
type continuousView struct {
	Badge    string `json:"badge"`
	Schedule string `json:"schedule"`
	Due      string `json:"due"`
	Next     string `json:"next"`
	Note     string `json:"note"`
	Pause    bool   `json:"pause"`
	Resume   bool   `json:"resume"`
	Cancel   bool   `json:"cancel"`
}

// continuousViewJS reads a continuousView off the crawl page when its
// state badge says state; null otherwise.
const continuousViewJS = `(() => {
  const b = document.querySelector("#state .badge");
  const t = (sel) => { const e = document.querySelector(sel); return e ? e.textContent : ""; };
  const on = (sel) => { const e = document.querySelector(sel); return !!e && !e.disabled; };
  if (!b || b.textContent !== %q || !document.querySelector("#recrawl")) return null;
  return {badge: b.textContent, schedule: t("#recrawl-schedule"), due: t("#recrawl-due"), next: t("#recrawl-next"),
    note: t("#recrawl-note"), pause: on("#pause"), resume: on("#resume"), cancel: on("#cancel")};
})()`

// TestDashboardContinuousCrawl drives the dashboard through a continuous
// crawl (recrawl every 2 s) of the changing site: the form refuses an
// invalid interval next to its field and starts the crawl; the crawl page
// shows it up_to_date as a live crawl (Pause and Cancel enabled) with its
// schedule, due count and relative next due time; the frontier controls
// list it and change its schedule to 1 h; the URL page shows each page's
// recrawl state, compared with the site's own count of its fetches; pause,
// resume and cancel work from the buttons.
func TestDashboardContinuousCrawl(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	d := &dashRun{t: t, bctx: bctx, shots: artifactsDir(t), pageErrors: pageErrors}
	site := &changingSite{fetches: map[string]int{}}
	start := serveSite(t, "recrawl.test", site)
	base := strings.TrimSuffix(start, "/")
	t.Setenv("GRIDCRAWL_DUE_CHECK_INTERVAL", "100ms")
	t.Setenv("GRIDCRAWL_TIMELINE_INTERVAL", "100ms")
	_, api := startGrid(t, testConfig(t, t.TempDir(), "recrawl.test=127.0.0.1"))

	// An interval the API refuses shows next to its field; a valid one
	// starts the crawl.
	var fieldErr, hash string
	d.run("invalid recrawl interval",
		chromedp.Navigate(api+"/#/new"),
		chromedp.WaitVisible(`#f-recrawl-interval`, chromedp.ByQuery),
		chromedp.SetValue(`#f-start_urls`, start, chromedp.ByQuery),
		chromedp.SetValue(`#f-name`, "continuous", chromedp.ByQuery),
		chromedp.SetValue(`#f-max_depth`, "2", chromedp.ByQuery),
		chromedp.SetValue(`#f-politeness-min_delay_ms`, "20", chromedp.ByQuery),
		chromedp.SetValue(`#f-politeness-max_delay_ms`, "20", chromedp.ByQuery),
		chromedp.SetValue(`#f-politeness-delay_factor`, "0", chromedp.ByQuery),
		chromedp.SetValue(`#f-recrawl-interval`, "daily", chromedp.ByQuery),
		chromedp.Click(`#submit`, chromedp.ByQuery),
		chromedp.WaitVisible(`[data-for="recrawl.interval"] .field-error`, chromedp.ByQuery),
		chromedp.Text(`[data-for="recrawl.interval"] .field-error`, &fieldErr, chromedp.ByQuery),
		d.shot("new-continuous-crawl-error"))
	if !strings.Contains(fieldErr, "recrawl.interval") || !strings.Contains(fieldErr, `"daily"`) {
		t.Errorf("field error next to the recrawl interval = %q, want the API's recrawl.interval error", fieldErr)
	}
	d.run("submit continuous crawl",
		chromedp.SetValue(`#f-recrawl-interval`, "2s", chromedp.ByQuery),
		d.shot("new-continuous-crawl"),
		chromedp.Click(`#submit`, chromedp.ByQuery),
		chromedp.WaitVisible(`#recrawl`, chromedp.ByQuery),
		chromedp.Evaluate(`location.hash`, &hash))
	id, err := url.PathUnescape(strings.TrimPrefix(hash, "#/crawl/"))
	if err != nil || id == "" || id == hash {
		t.Fatalf("after submitting, the page is at %q, want #/crawl/ID", hash)
	}
	status := func() contracts.CrawlStatus {
		var st contracts.CrawlStatus
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
			t.Fatalf("GET crawl = %d", code)
		}
		return st
	}
	if st := status(); st.Profile.Recrawl == nil || st.Profile.Recrawl.Interval != "2s" {
		t.Fatalf("the form's crawl has recrawl %+v, want every 2s", st.Profile.Recrawl)
	}

	// Between two rounds the crawl is up to date: a live crawl. The page
	// shows it when one of its polls falls between two rounds (a window
	// of the interval less a round's time): wait for one, up to the
	// step's limit.
	var v continuousView
	d.run("up to date", chromedp.Poll(fmt.Sprintf(continuousViewJS, "up_to_date"), &v,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)),
		d.shot("continuous-up-to-date"))
	if v.Schedule != "every 2s" || !regexp.MustCompile(`^\d+$`).MatchString(v.Due) || !regexp.MustCompile(`^(in [12] s|due now)$`).MatchString(v.Next) ||
		!strings.HasPrefix(v.Note, "Up to date") {
		t.Errorf("up to date crawl shows schedule %q, due %q, next due %q, note %q; want every 2s, a count, in 1 or 2 s, up to date",
			v.Schedule, v.Due, v.Next, v.Note)
	}
	if !v.Pause || !v.Cancel || v.Resume {
		t.Errorf("up to date crawl: pause enabled %v, cancel %v, resume %v; want pause and cancel enabled, resume not", v.Pause, v.Cancel, v.Resume)
	}

	// Two rounds: /a changed, /c answered 304.
	record := func(path string) contracts.URLRecord {
		var rec contracts.URLRecord
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/urls?"+url.Values{"url": {base + path}}.Encode(), nil, &rec); code != http.StatusOK {
			return contracts.URLRecord{}
		}
		return rec
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		a, c := record("/a").Recrawl, record("/c").Recrawl
		if a != nil && c != nil && a.Changes >= 1 && c.Revisits >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second round after 2 min: /a %+v, /c %+v", a, c)
		}
	}

	// The frontier controls list the crawl and change its schedule. The
	// crawl goes from running to up_to_date and back at every round: the
	// state shown changes, the value being typed stays.
	var interval, typed, firstState string
	var flipped bool
	d.run("frontier controls",
		chromedp.Navigate(api+"/#/frontier"),
		chromedp.WaitVisible(`#patch-form [data-field="recrawl.interval"]`, chromedp.ByQuery),
		chromedp.Value(`#patch-form [data-field="recrawl.interval"]`, &interval, chromedp.ByQuery),
		chromedp.WaitVisible(`#control-head #cancel:not([disabled])`, chromedp.ByQuery),
		chromedp.SetValue(`#patch-form [data-field="recrawl.interval"]`, "1h", chromedp.ByQuery),
		chromedp.Text(`#control-head .badge`, &firstState, chromedp.ByQuery),
		chromedp.ActionFunc(func(ctx context.Context) error { // built once firstState is read
			return chromedp.Poll(fmt.Sprintf(`document.querySelector("#control-head .badge").textContent !== %q`, firstState), &flipped,
				chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)).Do(ctx)
		}),
		chromedp.Value(`#patch-form [data-field="recrawl.interval"]`, &typed, chromedp.ByQuery),
		d.shot("frontier-continuous"),
		chromedp.Click(`#patch-form button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#toast:not([hidden])`, chromedp.ByQuery))
	if interval != "2s" || typed != "1h" {
		t.Errorf("the controls show recrawl interval %q, and %q after the crawl's state changed from %s; want 2s, then 1h as typed", interval, typed, firstState)
	}
	if st := status(); st.Profile.Recrawl == nil || st.Profile.Recrawl.Interval != "1h" || st.Profile.Version != 1 {
		t.Fatalf("after the change the crawl has recrawl %+v, version %d; want every 1h, version 1", st.Profile.Recrawl, st.Profile.Version)
	}
	// Each page is fetched once more and then due in an hour: the crawl
	// stays up to date and the site is still.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st := status()
		if st.State == contracts.CrawlUpToDate && st.Recrawl != nil && st.Recrawl.NextDue != nil && time.Until(*st.Recrawl.NextDue) > 30*time.Minute {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not up to date for an hour after 2 min: %+v, recrawl %+v", st, st.Recrawl)
		}
	}

	d.run("crawl page, due in an hour",
		chromedp.Navigate(api+"/#/crawl/"+url.PathEscape(id)),
		chromedp.Poll(fmt.Sprintf(continuousViewJS, "up_to_date"), &v, chromedp.WithPollingInterval(20*time.Millisecond)),
		chromedp.WaitVisible(`#failure-reasons .empty`, chromedp.ByQuery),
		chromedp.Sleep(2500*time.Millisecond), d.shot("crawl-continuous"),
		chromedp.ActionFunc(func(ctx context.Context) error { // the first screen, for the README
			var buf []byte
			if err := chromedp.CaptureScreenshot(&buf).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(d.shots, "crawl-continuous-top.png"), buf, 0o644)
		}))
	if v.Schedule != "every 1h" || v.Due != "0" || !regexp.MustCompile(`^in (59|60) min$`).MatchString(v.Next) {
		t.Errorf("crawl due in an hour shows schedule %q, due %q, next due %q; want every 1h, 0, in 59 or 60 min", v.Schedule, v.Due, v.Next)
	}

	// The URL page: each page's recrawl state, against the site's count of
	// its fetches (the first fetch, then one per round).
	site.mu.Lock()
	fetches := maps.Clone(site.fetches)
	site.mu.Unlock()
	type urlView struct {
		Fetched   string `json:"fetched"`
		Next      string `json:"next"`
		Interval  string `json:"interval"`
		Changes   string `json:"changes"`
		Revisits  string `json:"revisits"`
		ETag      string `json:"etag"`
		LastMod   string `json:"lastmod"`
		RecordURL string `json:"url"`
	}
	const urlViewJS = `(() => { const t = (id) => document.getElementById(id).textContent;
  return {fetched: t("rc-fetched"), next: t("rc-next"), interval: t("rc-interval"), changes: t("rc-changes"),
    revisits: t("rc-revisits"), etag: t("rc-etag"), lastmod: t("rc-last-modified"), url: document.querySelector("#url-record h2").textContent}; })()`
	// The site's oracle: /a's text is a number word of its fetch, the
	// same from the ninth on (see changingSite); /c answers 304.
	aChanges := min(fetches["/a"], 9) - 1
	for _, tt := range []struct {
		path              string
		changes, revisits int
		etag              string
	}{
		{"/a", aChanges, fetches["/a"] - 1 - aChanges, "none"},
		{"/c", 0, fetches["/c"] - 1, `"c1"`},
	} {
		var uv urlView
		d.run("url "+tt.path,
			chromedp.Navigate(api+"/"+"#/url?crawl="+url.QueryEscape(id)+"&url="+url.QueryEscape(base+tt.path)),
			chromedp.WaitVisible(`#url-recrawl`, chromedp.ByQuery),
			chromedp.Evaluate(urlViewJS, &uv),
			d.shot("url-recrawl"+strings.ReplaceAll(tt.path, "/", "-")))
		if uv.RecordURL != base+tt.path {
			t.Errorf("URL page shows %q, want %s", uv.RecordURL, base+tt.path)
		}
		if got := countOf(t, uv.Changes); got != int64(tt.changes) {
			t.Errorf("%s: URL page shows %d changes, the site served %d fetches: want %d", tt.path, got, fetches[tt.path], tt.changes)
		}
		if got := countOf(t, uv.Revisits); got != int64(tt.revisits) {
			t.Errorf("%s: URL page shows %d revisits, the site served %d fetches: want %d", tt.path, got, fetches[tt.path], tt.revisits)
		}
		if uv.ETag != tt.etag || uv.Interval != "1 h" || !regexp.MustCompile(`^in (59|60) min \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$`).MatchString(uv.Next) ||
			!strings.Contains(uv.Fetched, "ago") || !strings.HasSuffix(uv.Fetched, "HTTP 200") && !strings.HasSuffix(uv.Fetched, "HTTP 304") {
			t.Errorf("%s: URL page shows ETag %q, interval %q, next due %q, last fetch %q; want %s, 1 h, in an hour, a fetch with its status",
				tt.path, uv.ETag, uv.Interval, uv.Next, uv.Fetched, tt.etag)
		}
	}

	// The crawls list: up to date, next due in an hour.
	var listNext string
	d.run("crawls list",
		chromedp.Navigate(api+"/#/"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-crawl="%s"][data-state="up_to_date"] .badge.up_to_date`, id), chromedp.ByQuery),
		chromedp.Text(fmt.Sprintf(`tr[data-crawl="%s"] td[data-next]`, id), &listNext, chromedp.ByQuery),
		d.shot("crawls-continuous"))
	if !regexp.MustCompile(`^continuous · next in (59|60) min$`).MatchString(listNext) {
		t.Errorf("crawls list shows %q for the continuous crawl, want its next due time", listNext)
	}

	// On a phone nothing overflows the crawl page.
	var overflow bool
	d.run("narrow continuous crawl",
		chromedp.Navigate(api+"/#/crawl/"+url.PathEscape(id)),
		chromedp.EmulateViewport(390, 844),
		chromedp.WaitVisible(`#recrawl`, chromedp.ByQuery),
		chromedp.Sleep(500*time.Millisecond),
		chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow),
		d.shot("crawl-continuous-narrow"),
		chromedp.EmulateViewport(1360, 900))
	if overflow {
		t.Errorf("the continuous crawl's page is wider than a 390 px viewport")
	}

	// Pause and resume from the crawl page; cancel from the controls.
	d.run("pause", chromedp.Click(`#pause:not([disabled])`, chromedp.ByQuery),
		chromedp.Poll(fmt.Sprintf(continuousViewJS, "paused"), &v, chromedp.WithPollingInterval(20*time.Millisecond)))
	if st := status(); st.State != contracts.CrawlPaused || !v.Resume || v.Pause || !strings.HasPrefix(v.Note, "Paused") {
		t.Errorf("after Pause the crawl is %s, page: %+v; want paused, with Resume enabled", st.State, v)
	}
	d.run("resume", chromedp.Click(`#resume:not([disabled])`, chromedp.ByQuery),
		chromedp.Poll(fmt.Sprintf(continuousViewJS, "up_to_date"), &v, chromedp.WithPollingInterval(20*time.Millisecond)))
	if st := status(); st.State != contracts.CrawlUpToDate {
		t.Errorf("after Resume the crawl is %s, want up_to_date (nothing is due)", st.State)
	}
	d.run("cancel",
		chromedp.Navigate(api+"/#/frontier"),
		chromedp.WaitVisible(`#controls .badge.up_to_date`, chromedp.ByQuery),
		chromedp.Click(`#controls #cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls #cancel.armed`, chromedp.ByQuery),
		chromedp.Click(`#controls #cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls .empty`, chromedp.ByQuery))
	if st := status(); st.State != contracts.CrawlCancelled {
		t.Errorf("after Cancel the crawl is %s, want cancelled", st.State)
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the dashboard logged script errors: %v", errs)
	}
}
