package grid

import (
	"context"
	"fmt"
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
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
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
	keys := []string{"indexed", "redirected", "failed", "to-be-loaded", "documents", "total"}
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
	want := map[string]int64{
		"indexed": int64(len(exp.Indexed)), "redirected": int64(len(exp.Redirected)),
		"failed": int64(len(exp.Failed) + len(exp.NoIndex)), "to-be-loaded": 0,
		"documents": int64(len(exp.Indexed)), "total": int64(len(exp.Fetched) + len(exp.RobotsDenied) + len(exp.SitemapProbes)),
	}
	api2page := map[string]int64{"indexed": st.Counts[contracts.Indexed], "redirected": st.Counts[contracts.Redirected],
		"failed": st.Counts[contracts.Failed], "to-be-loaded": st.Counts[contracts.ToBeLoaded], "documents": st.Documents, "total": st.Total}
	for _, k := range keys {
		got := countOf(t, pageCounts[k])
		if got != api2page[k] {
			t.Errorf("page shows %s = %d, the API says %d", k, got, api2page[k])
		}
		if got != want[k] {
			t.Errorf("page shows %s = %d, the site's oracle says %d", k, got, want[k])
		}
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

	// The crawls list shows the crawl finished with the same counts.
	var listIndexed string
	run("crawls list",
		chromedp.Navigate(api+"/#/"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-crawl="%s"][data-state="finished"]`, id), chromedp.ByQuery),
		chromedp.Text(fmt.Sprintf(`tr[data-crawl="%s"] [data-count="indexed"]`, id), &listIndexed, chromedp.ByQuery),
		shot("crawls"))
	if got := countOf(t, listIndexed); got != st.Counts[contracts.Indexed] {
		t.Errorf("crawls list shows %d indexed, want %d", got, st.Counts[contracts.Indexed])
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
	run("frontier",
		chromedp.Navigate(api+"/#/frontier"),
		chromedp.WaitVisible(`#groups tr[data-group]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls #pause:not([disabled])`, chromedp.ByQuery),
		shot("frontier"),
		chromedp.Click(`#controls #pause`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls .badge.paused`, chromedp.ByQuery))
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
	run("cancel", chromedp.WaitVisible(`//*[@id="controls"]//*[contains(text(), "Profile version 1.")]`, chromedp.BySearch),
		chromedp.Click(`#controls #cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls #cancel.armed`, chromedp.ByQuery),
		chromedp.Click(`#controls #cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`#controls .empty`, chromedp.ByQuery))
	if s := state(); s.State != contracts.CrawlCancelled {
		t.Errorf("after Cancel on the frontier page the crawl is %s, want cancelled", s.State)
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
