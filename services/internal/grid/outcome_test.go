package grid

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
)

// localSite serves a page linking to a second one, on loopback, as a new
// user's `python3 -m http.server` does.
func localSite(t *testing.T, robots string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, `<html><head><title>Home</title>%s</head><body><p>home page words</p><a href="/b.html">b</a></body></html>`, robots)
		case "/b.html":
			fmt.Fprintf(w, `<html><head><title>B</title>%s</head><body><p>second page words</p></body></html>`, robots)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// refusingGrid starts a grid whose loader allows no private network: the
// default a new user runs with.
func refusingGrid(t *testing.T) (*Grid, string) {
	t.Helper()
	testConfig(t, t.TempDir(), "")
	t.Setenv("GRIDCRAWL_ALLOW_NETS", "")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	return startGrid(t, cfg)
}

// TestRefusedCrawlOutcome crawls a site on loopback with the loader's
// default network guard: the crawl finishes, and its status must say that
// nothing was fetched because every start URL was refused, and name the
// setting that allows it, instead of looking like a success.
func TestRefusedCrawlOutcome(t *testing.T) {
	site := localSite(t, "")
	_, api := refusingGrid(t)
	var created contracts.CreateCrawlResponse
	p := contracts.Profile{StartURLs: []string{site.URL + "/"}, MaxDepth: 1,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1}}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	st := waitState(t, api, created.CrawlID, contracts.CrawlFinished)
	if st.Counts[contracts.Indexed] != 0 || st.Counts[contracts.Failed] == 0 {
		t.Fatalf("counts %v: want nothing indexed and the start URL failed", st.Counts)
	}
	if st.Outcome == nil {
		t.Fatalf("finished crawl with every start URL refused has no outcome: %+v", st)
	}
	if st.Outcome.Kind != contracts.OutcomeRefused {
		t.Errorf("outcome kind = %q, want %q", st.Outcome.Kind, contracts.OutcomeRefused)
	}
	for _, want := range []string{"nothing fetched", "refused", "GRIDCRAWL_ALLOW_NETS"} {
		if !strings.Contains(st.Outcome.Summary, want) {
			t.Errorf("outcome summary %q does not say %q", st.Outcome.Summary, want)
		}
	}
	// The list carries the same outcome.
	var list contracts.CrawlList
	apiDo(t, http.MethodGet, api+"/api/v1/crawls", nil, &list)
	if len(list.Crawls) != 1 || list.Crawls[0].Outcome == nil || list.Crawls[0].Outcome.Kind != contracts.OutcomeRefused {
		t.Errorf("crawl list = %+v, want the crawl with outcome refused", list.Crawls)
	}
	dashboardOutcome(t, api, created.CrawlID)
}

// dashboardOutcome opens the refused crawl in Chromium: its state badge
// must be a warning, not the green "finished" badge, on the crawl's page
// and in the crawl list, and the page must show the outcome's summary.
func dashboardOutcome(t *testing.T, api, id string) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	d := &dashRun{t: t, bctx: bctx, shots: artifactsDir(t), pageErrors: pageErrors}
	var badge, summary, listBadge string
	var green bool
	d.run("refused crawl page",
		chromedp.Navigate(api+"/#/crawl/"+url.PathEscape(id)),
		chromedp.WaitVisible(`#state .badge`, chromedp.ByQuery),
		chromedp.WaitVisible(`#outcome`, chromedp.ByQuery),
		// Read in one evaluation each: the page draws the heading and the
		// outcome anew at every poll, and a node found by one step may be
		// replaced before the next reads its text.
		chromedp.Evaluate(`document.querySelector("#state .badge")?.textContent ?? ""`, &badge),
		chromedp.Evaluate(`document.querySelector("#outcome")?.textContent ?? ""`, &summary),
		chromedp.Evaluate(`!!document.querySelector("#state .badge.finished")`, &green),
		d.shot("refused-crawl"))
	if green || !strings.Contains(badge, "nothing fetched") {
		t.Errorf("crawl page badge = %q (green %v), want a warning saying nothing was fetched", badge, green)
	}
	if !strings.Contains(summary, "GRIDCRAWL_ALLOW_NETS") {
		t.Errorf("crawl page outcome = %q, want it to name GRIDCRAWL_ALLOW_NETS", summary)
	}
	row := fmt.Sprintf(`tr[data-crawl="%s"]`, id)
	d.run("refused crawl in the list",
		chromedp.Navigate(api+"/#/"),
		chromedp.WaitVisible(row+` .badge`, chromedp.ByQuery),
		chromedp.Text(row+` .badge`, &listBadge, chromedp.ByQuery),
		chromedp.Evaluate(fmt.Sprintf(`!!document.querySelector('%s .badge.finished')`, row), &green),
		d.shot("refused-crawl-list"))
	if green || !strings.Contains(listBadge, "nothing fetched") {
		t.Errorf("crawl list badge = %q (green %v), want a warning saying nothing was fetched", listBadge, green)
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the dashboard logged script errors: %v", errs)
	}
}

// TestNoindexOutcome crawls a site whose pages all say noindex: they
// answered 200 and were parsed, so they are counted as excluded, apart
// from the failures, and the crawl's outcome says nothing was indexed.
func TestNoindexOutcome(t *testing.T) {
	site := localSite(t, `<meta name="robots" content="noindex">`)
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	var created contracts.CreateCrawlResponse
	p := contracts.Profile{StartURLs: []string{site.URL + "/"}, MaxDepth: 1, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1}}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	st := waitState(t, api, created.CrawlID, contracts.CrawlFinished)
	if st.Excluded != 2 || st.Counts[contracts.Failed] != 2 {
		t.Errorf("excluded %d of %d failed, want both pages excluded (counts %v)", st.Excluded, st.Counts[contracts.Failed], st.Counts)
	}
	if st.Outcome == nil || st.Outcome.Kind != contracts.OutcomeNothingIndexed || !strings.Contains(st.Outcome.Summary, contracts.ReasonExcluded) {
		t.Errorf("outcome = %+v, want nothing_indexed naming the reason %q", st.Outcome, contracts.ReasonExcluded)
	}
}

// putReport stores a loader's frontier report as a loader does.
func putReport(t *testing.T, g *Grid, l contracts.FrontierLoader, r politeness.Report) {
	t.Helper()
	rep, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	l.Report = rep
	body, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Backends.Assets.Put(t.Context(), contracts.FrontierReportPrefix+l.LoaderID+".json", bytes.NewReader(body), int64(len(body)), "application/json"); err != nil {
		t.Fatal(err)
	}
}

// TestFrontierDropsDeadLoaders stores the last report of a loader that is
// gone (a restart gives the loader a new id; the old one's report stays):
// many of its report intervals old, GET /api/v1/frontier must no longer
// list it, while the grid's own loader is listed.
func TestFrontierDropsDeadLoaders(t *testing.T) {
	g, api := startGrid(t, testConfig(t, t.TempDir(), "")) // loader reports every 200ms
	now := time.Now().UTC()
	dead := now.Add(-5 * time.Second) // 25 intervals, and past MCP's 2 s floor
	putReport(t, g, contracts.FrontierLoader{LoaderID: "loader-dead", Time: dead, IntervalMS: 200},
		politeness.Report{Time: dead, Groups: []politeness.GroupReport{}})
	var rep contracts.FrontierReport
	var ids []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code := apiDo(t, http.MethodGet, api+"/api/v1/frontier", nil, &rep); code != http.StatusOK {
			t.Fatalf("GET frontier = %d", code)
		}
		ids = ids[:0]
		for _, l := range rep.Loaders {
			ids = append(ids, l.LoaderID)
		}
		if len(ids) > 0 && !slices.Contains(ids, "loader-dead") || time.Now().After(deadline) {
			break
		}
	}
	if len(ids) != 1 || ids[0] == "loader-dead" {
		t.Errorf("frontier lists loaders %v, want only the grid's live loader, not loader-dead (its report is 25 intervals old)", ids)
	}
}

// TestDashboardFrontierNow shows the frontier page a report taken a moment
// ago: a group reported waiting until a time now past is ready, not
// "waiting until 5 s ago", and an idle group's last error is shown as an
// earlier one, not in red as if it were current.
func TestDashboardFrontierNow(t *testing.T) {
	g, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	now := time.Now().UTC()
	putReport(t, g, contracts.FrontierLoader{LoaderID: "loader-other", Time: now, IntervalMS: 60_000}, politeness.Report{Time: now,
		Groups: []politeness.GroupReport{
			{Group: "waited.test", State: politeness.StateWaiting, Hosts: []string{"waited.test"}, NextEligible: now.Add(-5 * time.Second), Queued: 3},
			{Group: "idle.test", State: politeness.StateIdle, Hosts: []string{"idle.test"}, NextEligible: now.Add(-time.Hour), LastError: "HTTP 404"},
		}})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	d := &dashRun{t: t, bctx: bctx, shots: artifactsDir(t), pageErrors: pageErrors}
	var view struct {
		WaitedState, WaitedNext, IdleError string
		IdleRed                            bool
	}
	d.run("frontier", chromedp.Navigate(api+"/#/frontier"),
		chromedp.WaitVisible(`tr[data-group="idle.test"]`, chromedp.ByQuery),
		chromedp.Evaluate(`(() => {
			const w = document.querySelector('tr[data-group="waited.test"]');
			const i = document.querySelector('tr[data-group="idle.test"]');
			const err = [...i.querySelectorAll("td")].find((td) => td.textContent.includes("404"));
			return {WaitedState: w.querySelector(".badge").textContent, WaitedNext: w.children[2].textContent,
				IdleError: err ? err.textContent : "", IdleRed: !!err && err.classList.contains("err")};
		})()`, &view),
		d.shot("frontier-now"))
	if view.WaitedState != "ready" || strings.Contains(view.WaitedNext, "ago") {
		t.Errorf("group waiting until 5 s ago shows %q, next eligible %q; want ready, eligible now", view.WaitedState, view.WaitedNext)
	}
	if view.IdleRed || !strings.Contains(view.IdleError, "earlier") {
		t.Errorf("idle group's old error shows %q (red %v), want it marked earlier, not red", view.IdleError, view.IdleRed)
	}
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the dashboard logged script errors: %v", errs)
	}
}

// TestStatusCodesDuringCrawl reads the HTTP status codes report of a slow
// crawl while it runs: URLs not fetched yet are no "no response", so the
// report's count without a status can never exceed the crawl's settled
// URLs (read after it: settled counts only grow in a one-shot crawl).
func TestStatusCodesDuringCrawl(t *testing.T) {
	site := localSite(t, "")
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	var created contracts.CreateCrawlResponse
	p := contracts.Profile{StartURLs: []string{site.URL + "/"}, MaxDepth: 1,
		Politeness: contracts.Politeness{MinDelayMS: 1500, MaxDelayMS: 1500}}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	for range 10 {
		var rep struct {
			Rows []struct {
				StatusCode *int  `json:"status_code"`
				Count      int64 `json:"count"`
			} `json:"rows"`
		}
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID+"/reports/status-codes", nil, &rep); code != http.StatusOK {
			t.Fatalf("GET status codes report = %d", code)
		}
		var st contracts.CrawlStatus
		apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID, nil, &st)
		var none int64
		for _, r := range rep.Rows {
			if r.StatusCode == nil {
				none += r.Count
			}
		}
		var settled int64
		for s, n := range st.Counts {
			if s.Terminal() {
				settled += n
			}
		}
		if none > settled {
			t.Fatalf("status codes report counts %d URLs without a response while only %d are settled (counts %v): unfetched URLs counted as no response", none, settled, st.Counts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
