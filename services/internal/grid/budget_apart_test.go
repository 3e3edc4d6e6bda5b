package grid

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestBudgetsOfCrawlsApart runs three crawls of one host in turn on one
// grid: A without a budget, B with a total budget of 20, C without one.
// Each crawl's budget is its own: B is not charged A's 31 fetches, and C
// is not limited by B's spent budget (before, B fetched nothing and C was
// retired too, until the grid restarted).
func TestBudgetsOfCrawlsApart(t *testing.T) {
	site := newTimedSite(t, 30) // 31 pages
	port, pages := site.port, func() int { return site.since(time.Time{}) }
	g, api := startGrid(t, testConfig(t, t.TempDir(), "*.budget.test=127.0.0.1"))
	profile := func(budget *contracts.Budget) contracts.Profile {
		return contracts.Profile{
			StartURLs:  []string{fmt.Sprintf("http://flat.budget.test:%d/", port)},
			MaxDepth:   2,
			Sitemaps:   new(bool),
			Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1},
			Budget:     budget,
		}
	}
	run := func(name string, budget *contracts.Budget) (string, map[contracts.Status]int, int) {
		t.Helper()
		before := pages()
		var created contracts.CreateCrawlResponse
		if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", profile(budget), &created); code != http.StatusCreated {
			t.Fatalf("POST crawl %s = %d", name, code)
		}
		waitState(t, api, created.CrawlID, contracts.CrawlFinished)
		return created.CrawlID, hostCounts(t, g, created.CrawlID, "flat.budget.test"), pages() - before
	}
	_, a, fa := run("A", nil)
	if a[contracts.Indexed] != 31 || fa != 31 {
		t.Fatalf("crawl A (no budget) = %v with %d pages requested, want 31 indexed and requested", a, fa)
	}
	bID, b, fb := run("B", &contracts.Budget{TotalBudget: 20})
	if b[contracts.Indexed] != 20 || b[contracts.Retired] != 11 || fb != 20 {
		t.Errorf("crawl B (total budget 20) after A = %v with %d pages requested, want 20 indexed, 11 retired, 20 requested", b, fb)
	}
	_, c, fc := run("C", nil)
	if c[contracts.Indexed] != 31 || fc != 31 {
		t.Errorf("crawl C (no budget) after B = %v with %d pages requested, want 31 indexed and requested", c, fc)
	}

	// The frontier report shows each crawl's use of the group, and B's
	// ends with B: the loaders look at their crawls every second.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		uses := frontierUses(t, api, bID)
		if len(uses) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the frontier still reports finished crawl B: %+v", uses)
			break
		}
	}
}

// frontierGroup is a group of GET /api/v1/frontier, with the fields the
// tests here read.
type frontierGroup struct {
	Group          string   `json:"chg"`
	DelayMS        *float64 `json:"delay_ms"`
	CrawlID        *string  `json:"crawl_id"`
	ProfileVersion *int     `json:"profile_version"`
	Crawls         []struct {
		CrawlID string `json:"crawl_id"`
		Fetches int64  `json:"fetches"`
		Spent   int64  `json:"spent"`
		Budget  *struct {
			TotalBudget *int64 `json:"total_budget"`
		} `json:"budget"`
		Retired     int64 `json:"retired"`
		BudgetSpent bool  `json:"budget_spent"`
	} `json:"crawls"`
}

// frontierGroups returns the groups of every loader's frontier report.
func frontierGroups(t *testing.T, api string) []frontierGroup {
	t.Helper()
	var rep contracts.FrontierReport
	apiDo(t, http.MethodGet, api+"/api/v1/frontier", nil, &rep)
	var out []frontierGroup
	for _, l := range rep.Loaders {
		var r struct {
			Groups []frontierGroup `json:"groups"`
		}
		if err := json.Unmarshal(l.Report, &r); err != nil {
			t.Fatalf("loader report: %v", err)
		}
		out = append(out, r.Groups...)
	}
	return out
}

// frontierUses returns the groups that report a use of crawl id.
func frontierUses(t *testing.T, api, id string) []string {
	t.Helper()
	var out []string
	for _, gr := range frontierGroups(t, api) {
		for _, u := range gr.Crawls {
			if u.CrawlID == id {
				out = append(out, gr.Group)
			}
		}
	}
	return out
}
