package grid

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// budgetSite serves ok1/ok2.budget.test (6 pages each) and
// trap.budget.test, an endless calendar.
func budgetSite(t *testing.T) (port int) {
	t.Helper()
	port, _ = countedBudgetSite(t)
	return port
}

// countedBudgetSite is budgetSite with a count of the requests for each
// host and path with query ("trap.budget.test/cal?m=3").
func countedBudgetSite(t *testing.T) (port int, fetches func(hostPath string) int) {
	t.Helper()
	var mu sync.Mutex
	count := map[string]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		mu.Lock()
		count[host+r.URL.RequestURI()]++
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>")
		switch {
		case host == "trap.budget.test":
			m, _ := strconv.Atoi(r.URL.Query().Get("m"))
			fmt.Fprintf(w, `<a href="/cal?m=%d">next</a> <a href="/cal?m=%d">after</a>`, m+1, m+2)
		case r.URL.Path == "/":
			for i := range 5 {
				fmt.Fprintf(w, `<a href="/p%d">p%d</a> `, i, i)
			}
			fmt.Fprintf(w, `<a href="http://trap.budget.test:%s/cal?m=0">calendar</a>`, strings.TrimPrefix(r.Host, host+":"))
		}
		io.WriteString(w, "</body></html>")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, func(hostPath string) int {
		mu.Lock()
		defer mu.Unlock()
		return count[hostPath]
	}
}

// hostCounts counts a crawl's records of host by status.
func hostCounts(t *testing.T, g *Grid, crawlID, host string) map[contracts.Status]int {
	t.Helper()
	out := map[contracts.Status]int{}
	for _, r := range crawlRecords(t, g.Backends.Tx, crawlID, "") {
		// The record's host carries the test site's port.
		if name, _, _ := strings.Cut(r.Host, ":"); name == host {
			out[r.Status]++
		}
	}
	return out
}

func waitState(t *testing.T, api, id string, want contracts.CrawlState) contracts.CrawlStatus {
	t.Helper()
	var st contracts.CrawlStatus
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st)
		if st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl %s = %s %v, want %s", id, st.State, st.Counts, want)
		}
	}
}

func budgetProfile(port int, pause bool, trapBudget int64) contracts.Profile {
	return contracts.Profile{
		StartURLs:  []string{fmt.Sprintf("http://ok1.budget.test:%d/", port), fmt.Sprintf("http://ok2.budget.test:%d/", port)},
		MaxDepth:   60,
		Scope:      contracts.ScopeDomain,
		Sitemaps:   new(bool), // the budgets below count the link graph's pages
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1},
		Budget: &contracts.Budget{PauseAtFinish: pause,
			Overrides: []contracts.BudgetOverride{{Domain: "trap.budget.test", TotalBudget: trapBudget}}},
	}
}

func TestBudgetRetiresTrapWhileOthersFinish(t *testing.T) {
	port := budgetSite(t)
	g, api := startGrid(t, testConfig(t, t.TempDir(), "*.budget.test=127.0.0.1"))
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", budgetProfile(port, false, 5), &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	st := waitState(t, api, created.CrawlID, contracts.CrawlFinished)
	trap := hostCounts(t, g, created.CrawlID, "trap.budget.test")
	if trap[contracts.Indexed] != 5 || trap[contracts.Retired] == 0 {
		t.Errorf("trap host = %v, want 5 indexed (its total budget) and the rest retired", trap)
	}
	for _, h := range []string{"ok1.budget.test", "ok2.budget.test"} {
		if c := hostCounts(t, g, created.CrawlID, h); c[contracts.Indexed] != 6 || len(c) != 1 {
			t.Errorf("host %s = %v, want 6 indexed", h, c)
		}
	}
	if st.Pending != 0 || st.Retired != int64(trap[contracts.Retired]) {
		t.Errorf("finished crawl: pending %d retired %d, want 0 and %d", st.Pending, st.Retired, trap[contracts.Retired])
	}
}

func TestBudgetRaisedMidCrawlAndPauseAtFinish(t *testing.T) {
	port, fetches := countedBudgetSite(t)
	g, api := startGrid(t, testConfig(t, t.TempDir(), "*.budget.test=127.0.0.1"))
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", budgetProfile(port, true, 4), &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	id := created.CrawlID
	// Out of work with pause_at_finish: paused, not finished.
	st := waitState(t, api, id, contracts.CrawlPaused)
	if trap := hostCounts(t, g, id, "trap.budget.test"); trap[contracts.Indexed] != 4 {
		t.Fatalf("trap host before the raise = %v, want 4 indexed", trap)
	}
	if st.Retired == 0 {
		t.Fatalf("paused crawl has no retired URLs: %v", st.Counts)
	}
	// Raise the trap's budget and resume: it is crawled up to the new budget.
	patch := contracts.ProfilePatch{Budget: &contracts.Budget{PauseAtFinish: true,
		Overrides: []contracts.BudgetOverride{{Domain: "trap.budget.test", TotalBudget: 10}}}}
	if code := apiDo(t, http.MethodPatch, api+"/api/v1/crawls/"+id, patch, &st); code != http.StatusOK {
		t.Fatalf("PATCH crawl = %d", code)
	}
	if st.Profile.Version != 1 || st.Profile.Budget.Overrides[0].TotalBudget != 10 {
		t.Errorf("patched profile = %+v", st.Profile)
	}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls/"+id+"/resume", nil, &st); code != http.StatusOK {
		t.Fatalf("resume = %d", code)
	}
	waitState(t, api, id, contracts.CrawlRunning)
	st = waitState(t, api, id, contracts.CrawlPaused)
	if trap := hostCounts(t, g, id, "trap.budget.test"); trap[contracts.Indexed] != 10 {
		t.Errorf("trap host after the raise = %v, want 10 indexed", trap)
	}
	// Every indexed trap page was fetched exactly once, as the site saw it:
	// raising the budget must not fetch again what was fetched before.
	indexed := 0
	for m := range 20 {
		u := fmt.Sprintf("http://trap.budget.test:%d/cal?m=%d", port, m)
		r, err := g.Backends.Tx.Get(t.Context(), txindex.Key(id, u))
		if err != nil || r.Status != contracts.Indexed {
			continue
		}
		indexed++
		if n := fetches(fmt.Sprintf("trap.budget.test/cal?m=%d", m)); n != 1 {
			t.Errorf("%s fetched %d times, want once", u, n)
		}
	}
	if indexed != 10 {
		t.Errorf("%d trap pages indexed among the first 20, want 10", indexed)
	}
	// A bad patch names its field.
	var e contracts.ErrorResponse
	bad := contracts.ProfilePatch{Budget: &contracts.Budget{CostPolicy: "random"}}
	if code := apiDo(t, http.MethodPatch, api+"/api/v1/crawls/"+id, bad, &e); code != http.StatusBadRequest || e.Field != "budget.cost_policy" {
		t.Errorf("PATCH bad cost policy = %d %+v", code, e)
	}
}
