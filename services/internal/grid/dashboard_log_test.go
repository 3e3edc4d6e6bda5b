package grid

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// releaseSite is a loopback site whose start page links to pages /p1 to
// /pN; a request for one of them waits for a token on release (or for the
// client to give up), so that the test lets the crawl advance one page at a
// time. Anything else (robots.txt, sitemap probes) is not found at once.
type releaseSite struct {
	pages   int
	release chan struct{}
}

func (s *releaseSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var links []string
	switch {
	case r.URL.Path == "/":
		for i := 1; i <= s.pages; i++ {
			links = append(links, fmt.Sprintf("/p%d", i))
		}
	case strings.HasPrefix(r.URL.Path, "/p"):
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, html(links...))
}

// slowAPI holds the page's API requests in Chromium for a while before
// they reach the grid, as a slow network or a slow backend would: the
// timeline and reports by reports, the crawl log by log. It counts the
// requests of each report held at once.
type slowAPI struct {
	reports, log time.Duration
	mu           sync.Mutex
	held         map[string]int // path → requests held now
	most         map[string]int // path → most requests held at once
}

// install intercepts the page's API requests in the browser of bctx.
// The held timeline and report requests are counted; a status is let
// through at once.
func (s *slowAPI) install(t *testing.T, bctx context.Context) {
	t.Helper()
	s.held, s.most = map[string]int{}, map[string]int{}
	chromedp.ListenTarget(bctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		u, err := url.Parse(e.Request.URL)
		if err != nil {
			t.Errorf("paused request %q: %v", e.Request.URL, err)
			return
		}
		var wait time.Duration
		side := strings.HasSuffix(u.Path, "/timeline") || strings.Contains(u.Path, "/reports/")
		switch {
		case side:
			wait = s.reports
		case strings.HasSuffix(u.Path, "/urls") && !u.Query().Has("url"):
			wait = s.log
		}
		if side {
			s.mu.Lock()
			s.held[u.Path]++
			s.most[u.Path] = max(s.most[u.Path], s.held[u.Path])
			s.mu.Unlock()
		}
		go func() { // never block the event loop
			time.Sleep(wait)
			if side {
				s.mu.Lock()
				s.held[u.Path]--
				s.mu.Unlock()
			}
			if err := chromedp.Run(bctx, fetch.ContinueRequest(e.RequestID)); err != nil && bctx.Err() == nil {
				t.Logf("continue %s: %v", u.Path, err)
			}
		}()
	})
	if err := chromedp.Run(bctx, fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/v1/crawls/*"}})); err != nil {
		t.Fatalf("intercept the page's requests: %v", err)
	}
}

// mostHeld returns, for each timeline or report path held more than once
// at a time, the most requests held at once.
func (s *slowAPI) mostHeld() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for p, n := range s.most {
		if n > 1 {
			out[p] = n
		}
	}
	return out
}

// logView is the crawl page's count cards and crawl log, read in one go:
// the page redraws at every poll, so both come from the same instant.
type logView struct {
	CardIndexed int64    `json:"cardIndexed"`
	CardFinal   int64    `json:"cardFinal"`
	Log         []string `json:"log"`    // the status of each row of the log
	Filter      string   `json:"filter"` // the log's status filter as shown
	Badge       string   `json:"badge"`
}

const logViewJS = `(() => {
  const n = (k) => { const e = document.querySelector('#counts [data-count="' + k + '"]'); return e ? Number(e.textContent.replace(/[^0-9]/g, "")) : -1; };
  const b = document.querySelector("#state .badge");
  return {cardIndexed: n("indexed"), cardFinal: n("indexed") + n("redirected") + n("failed") + n("excluded") + n("sitemap"),
    log: [...document.querySelectorAll("#crawl-log tbody tr")].map((tr) => tr.children[1].textContent),
    filter: document.querySelector("#crawl-log select").value, badge: b ? b.textContent : ""};
})()`

// final is the rows of the log in a final status, and those indexed.
func (v logView) final() (final, indexed int64) {
	for _, s := range v.Log {
		switch contracts.Status(s) {
		case contracts.Indexed:
			indexed++
			final++
		case contracts.Redirected, contracts.Failed, contracts.Sitemap:
			final++
		}
	}
	return final, indexed
}

// TestDashboardCountsAndLogAgree watches the crawl page while a crawl
// advances, its timeline and reports slowed down to 6 s and its crawl log
// to 300 ms in the browser. One page at a time: after the API counts N
// pages indexed, the count cards and the crawl log's first page both show
// those N within a few polls (the cards waited for the timeline and the
// reports, and the log followed only the crawl's state before). A status
// filter the user chose stays while the crawl advances. Then pages come
// every 100 ms: at every sample the cards never show fewer URLs in a final
// status than the log lists (the page shows one moment), and the timeline
// and each report are never asked twice at once.
func TestDashboardCountsAndLogAgree(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bctx, pageErrors := browser(t, ctx)
	d := &dashRun{t: t, bctx: bctx, shots: artifactsDir(t), pageErrors: pageErrors}
	const pages = 30 // with the start page and the sitemap probe, one page of the log
	site := &releaseSite{pages: pages, release: make(chan struct{})}
	start := serveSite(t, "release.test", site)
	t.Setenv("GRIDCRAWL_FETCH_TIMEOUT", "3m") // the site holds each page until the test releases it
	_, api := startGrid(t, testConfig(t, t.TempDir(), "release.test=127.0.0.1"))
	slow := &slowAPI{reports: 6 * time.Second, log: 300 * time.Millisecond}
	slow.install(t, bctx)

	p := contracts.Profile{Name: "one page at a time", StartURLs: []string{start}, MaxDepth: 1, Scope: contracts.ScopeHost,
		Politeness: contracts.Politeness{MinDelayMS: 10, MaxDelayMS: 10, DelayFactor: 0, Robots: contracts.RobotsObey}}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	id := created.CrawlID
	status := func() contracts.CrawlStatus {
		var st contracts.CrawlStatus
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
			t.Fatalf("GET crawl = %d", code)
		}
		return st
	}
	d.run("crawl page", chromedp.Navigate(api+"/#/crawl/"+url.PathEscape(id)),
		chromedp.WaitVisible(`#counts [data-count="indexed"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#crawl-log tbody tr`, chromedp.ByQuery))

	samples, ahead := 0, 0
	look := func() logView {
		t.Helper()
		var v logView
		d.run("read the page", chromedp.Evaluate(logViewJS, &v))
		samples++
		if final, _ := v.final(); v.CardFinal < final {
			if ahead++; ahead <= 3 {
				t.Errorf("the count cards show %d URLs in a final status, the crawl log lists %d: %+v", v.CardFinal, final, v)
			}
		}
		return v
	}
	// apiIndexed waits until the API counts n pages indexed.
	apiIndexed := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); status().Counts[contracts.Indexed] < n; time.Sleep(50 * time.Millisecond) {
			look()
			if time.Now().After(deadline) {
				t.Fatalf("the API counts %d indexed after a minute, want %d", status().Counts[contracts.Indexed], n)
			}
		}
	}
	// logIndexed waits up to a few polls (2 s each) until the page's
	// cards show n pages indexed and its log lists n indexed.
	logIndexed := func(n int64) logView {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v := look()
			if _, indexed := v.final(); indexed == n && v.CardIndexed == n {
				return v
			}
			if time.Now().After(deadline) {
				_ = chromedp.Run(bctx, d.shot(fmt.Sprintf("failed-log-%d-indexed", n)))
				t.Fatalf("10 s after the API counted %d indexed the page shows %d indexed on its cards and the log lists %v", n, v.CardIndexed, v.Log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The start page has no token to wait for.
	apiIndexed(1)
	logIndexed(1)
	for n := int64(2); n <= 3; n++ {
		site.release <- struct{}{}
		apiIndexed(n)
		logIndexed(n)
	}

	// A status filter the user chose stays while the crawl advances: the
	// log keeps listing what it listed.
	var onlyFiltered bool
	d.run("filter the log",
		chromedp.SetValue(`#crawl-log select`, string(contracts.ToBeLoaded), chromedp.ByQuery),
		chromedp.Click(`#crawl-log form button[type="submit"]`, chromedp.ByQuery),
		chromedp.Poll(`[...document.querySelectorAll("#crawl-log tbody tr")].every((tr) => tr.children[1].textContent === "to-be-loaded")`, &onlyFiltered,
			chromedp.WithPollingInterval(20*time.Millisecond)))
	filtered := look()
	site.release <- struct{}{}
	apiIndexed(4)
	time.Sleep(5 * time.Second) // more than two polls
	if v := look(); v.Filter != string(contracts.ToBeLoaded) || !slices.Equal(v.Log, filtered.Log) || v.CardIndexed != 4 {
		t.Errorf("with the log filtered on to-be-loaded, after one more page indexed the page shows filter %q, log %v, %d indexed; want the filter and log %v kept, 4 indexed",
			v.Filter, v.Log, v.CardIndexed, filtered.Log)
	}

	// Back to the whole log: it follows the crawl again. The rest of the
	// pages come one every 100 ms while the test samples the page.
	var cleared string
	d.run("clear the filter", // Chromium selects no option for value "": choose the first, "any status"
		chromedp.Evaluate(`(() => { const s = document.querySelector("#crawl-log select"); s.selectedIndex = 0; return s.value; })()`, &cleared),
		chromedp.Click(`#crawl-log form button[type="submit"]`, chromedp.ByQuery))
	logIndexed(4)
	released := make(chan struct{})
	go func() {
		defer close(released)
		for range pages - 3 { // three were released above
			select {
			case site.release <- struct{}{}:
			case <-ctx.Done():
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for done := false; !done; time.Sleep(50 * time.Millisecond) {
		select {
		case <-released:
			done = true
		default:
		}
		look()
	}
	st := waitFinished(t, api, id, time.Minute)
	v := logIndexed(pages + 1)
	for deadline := time.Now().Add(8 * time.Second); v.Badge != string(contracts.CrawlFinished); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("8 s after the crawl finished the page shows it %q", v.Badge)
		}
		v = look()
	}
	// The reports come last (6 s late here): the screenshot waits for the
	// hosts report to count every page fetched.
	var reported bool
	d.run("finished", chromedp.Poll(fmt.Sprintf(`(document.querySelector("#hosts .codes") || {}).textContent === "200×%d404×1"`, pages+1), &reported,
		chromedp.WithPollingInterval(50*time.Millisecond)),
		chromedp.Evaluate(`window.scrollTo(0, 0)`, nil), // the sticky menu would cover a card
		d.shot("crawl-counts-and-log"))
	v = look()
	final, indexed := v.final()
	if int64(len(v.Log)) != st.Total || final != st.Total || indexed != st.Counts[contracts.Indexed] || v.CardFinal != st.Total {
		t.Errorf("finished crawl: the log lists %d URLs, %d final, %d indexed; the cards %d final; the API counts %d URLs, %d indexed",
			len(v.Log), final, indexed, v.CardFinal, st.Total, st.Counts[contracts.Indexed])
	}
	if ahead > 0 {
		t.Errorf("%d of %d samples showed the log ahead of the cards", ahead, samples)
	}
	if most := slow.mostHeld(); len(most) > 0 {
		t.Errorf("the page asked for the timeline or a report again before the last answer: most requests at once %v", most)
	}
	t.Logf("%d samples of the cards and the log", samples)
	if errs := pageErrors(); len(errs) > 0 {
		t.Errorf("the dashboard logged script errors: %v", errs)
	}
}
