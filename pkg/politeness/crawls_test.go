package politeness

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// addCrawl adds n items https://<host>/<crawl>/<i> of crawl.
func addCrawl(t *testing.T, s *Scheduler, crawl, host string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		mustAdd(t, s, Item{URL: fmt.Sprintf("https://%s/%s/%d", host, crawl, i), Group: host, Crawl: crawl})
	}
}

// drainCrawls hands out and releases every ready item and counts them per
// crawl.
func drainCrawls(t *testing.T, s *Scheduler) map[string]int {
	t.Helper()
	got := map[string]int{}
	for {
		l, ok := s.TryNext()
		if !ok {
			return got
		}
		got[l.Item.Crawl]++
		mustRelease(t, s, l, Outcome{Status: 200})
	}
}

// retiredOf drains the retired items and counts them per crawl.
func retiredOf(s *Scheduler) map[string]int {
	got := map[string]int{}
	for _, it := range s.DrainRetired(1 << 20) {
		got[it.Crawl]++
	}
	return got
}

func budgetTotal(n int64) *Budget { return &Budget{BalanceReplenish: NoLimit, TotalBudget: n} }

func TestCrawlBudgetsAreApart(t *testing.T) {
	// The user report: crawl A of host h without a budget fetched 28 pages;
	// then crawl B of h with a total budget of 20 fetched nothing, and
	// crawl C without a budget was retired too.
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0)})
	addCrawl(t, s, "A", "h", 28)
	if got := drainCrawls(t, s); got["A"] != 28 {
		t.Fatalf("crawl A fetched %v, want 28", got)
	}
	s.SetCrawlBudget("h", "h", "B", budgetTotal(20))
	addCrawl(t, s, "B", "h", 30)
	got := drainCrawls(t, s)
	if got["B"] != 20 {
		t.Errorf("crawl B (total budget 20) after A's 28 fetches fetched %d, want 20", got["B"])
	}
	if r := retiredOf(s); !cmp.Equal(r, map[string]int{"B": 10}) {
		t.Errorf("retired items = %v, want B: 10", r)
	}
	addCrawl(t, s, "C", "h", 15)
	if got := drainCrawls(t, s); got["C"] != 15 {
		t.Errorf("crawl C (no budget) after B's budget was spent fetched %d, want 15", got["C"])
	}
	if r := retiredOf(s); len(r) != 0 {
		t.Errorf("retired items after crawl C = %v, want none", r)
	}
	// B's later items are retired at once; C's are not.
	addCrawl(t, s, "B", "h", 2)
	if r := retiredOf(s); !cmp.Equal(r, map[string]int{"B": 2}) {
		t.Errorf("retired items after two more of B = %v, want B: 2", r)
	}
	rep, _ := s.Group("h")
	if rep.State == StateRetired {
		t.Errorf("Group(h).State = %q: the group itself must not retire for one crawl's budget", rep.State)
	}
	byCrawl := map[string]CrawlUse{}
	for _, u := range rep.Crawls {
		byCrawl[u.Crawl] = u
	}
	if u := byCrawl["B"]; u.Spent != 20 || u.Budget == nil || u.Budget.TotalBudget != 20 || !u.Exhausted || u.Retired != 12 {
		t.Errorf("report of crawl B = %+v, want spent 20 of budget 20, spent, 12 retired", u)
	}
	if u := byCrawl["A"]; u.Spent != 28 || u.Budget != nil || u.Exhausted {
		t.Errorf("report of crawl A = %+v, want spent 28, no budget", u)
	}
}

func TestCrawlBudgetsShareOneSchedule(t *testing.T) {
	// Two crawls at once in one group: one item at a time, each group
	// delay kept, and each crawl limited by its own budget only.
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(time.Second)})
	s.SetCrawlBudget("h", "h", "B", budgetTotal(3))
	for i := 1; i <= 6; i++ {
		mustAdd(t, s, Item{URL: fmt.Sprintf("https://h/A/%d", i), Group: "h", Crawl: "A"},
			Item{URL: fmt.Sprintf("https://h/B/%d", i), Group: "h", Crawl: "B"})
	}
	got := map[string]int{}
	var last time.Time
	for range 100 {
		l, ok := s.TryNext()
		if !ok {
			if s.Counts().Queued == 0 {
				break
			}
			clk.Advance(100 * time.Millisecond)
			continue
		}
		if _, ok := s.TryNext(); ok {
			t.Fatal("two items of one group handed out at once")
		}
		if now := clk.Now(); !last.IsZero() && now.Sub(last) < time.Second {
			t.Fatalf("items %v apart, want at least the group delay of 1s", now.Sub(last))
		}
		last = clk.Now()
		got[l.Item.Crawl]++
		mustRelease(t, s, l, Outcome{Status: 200})
	}
	if want := map[string]int{"A": 6, "B": 3}; !cmp.Equal(got, want) {
		t.Errorf("fetched per crawl = %v, want %v", got, want)
	}
	if r := retiredOf(s); !cmp.Equal(r, map[string]int{"B": 3}) {
		t.Errorf("retired = %v, want B: 3", r)
	}
}

func TestCrawlBudgetRaisedAndForgotten(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0)})
	s.SetCrawlBudget("h", "h", "B", budgetTotal(2))
	addCrawl(t, s, "B", "h", 5)
	if got := drainCrawls(t, s); got["B"] != 2 {
		t.Fatalf("fetched %v, want B: 2", got)
	}
	if r := retiredOf(s); r["B"] != 3 {
		t.Fatalf("retired %v, want B: 3", r)
	}
	// Raised: the items added again (as a PATCH unretires them) are fetched
	// up to the new total.
	s.SetCrawlBudget("h", "h", "B", budgetTotal(4))
	addCrawl(t, s, "B", "h", 3)
	if got := drainCrawls(t, s); got["B"] != 2 {
		t.Errorf("after raising to 4: fetched %v, want B: 2", got)
	}
	if r := retiredOf(s); r["B"] != 1 {
		t.Errorf("after raising to 4: retired %v, want B: 1", r)
	}
	if !slices.Contains(s.Crawls(), "B") {
		t.Errorf("Crawls() = %v, want B in it", s.Crawls())
	}
	s.ForgetCrawl("B")
	if slices.Contains(s.Crawls(), "B") {
		t.Errorf("Crawls() after ForgetCrawl(B) = %v, want B gone", s.Crawls())
	}
	if rep, _ := s.Group("h"); len(rep.Crawls) != 0 {
		t.Errorf("Group(h).Crawls after ForgetCrawl(B) = %+v, want none", rep.Crawls)
	}
	// A crawl of the same id starts afresh: no spend carried over.
	s.SetCrawlBudget("h", "h", "B", budgetTotal(2))
	addCrawl(t, s, "B", "h", 2)
	if got := drainCrawls(t, s); got["B"] != 2 {
		t.Errorf("after ForgetCrawl: fetched %v, want B: 2", got)
	}
}

func TestCrawlBudgetSessionBalance(t *testing.T) {
	// B's session balance of 2 rotates the group out after two of B's
	// items; A's group is then served, and h comes back with a fresh
	// balance for B.
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0), Budget: noBudget})
	s.SetCrawlBudget("h", "h", "B", &Budget{BalanceReplenish: 2, TotalBudget: NoLimit})
	addCrawl(t, s, "B", "h", 4)
	addCrawl(t, s, "A", "g", 1)
	var got []string
	for {
		l, ok := s.TryNext()
		if !ok {
			break
		}
		got = append(got, l.Item.URL[len("https://"):])
		mustRelease(t, s, l, Outcome{Status: 200})
	}
	want := []string{"h/B/1", "g/A/1", "h/B/2", "h/B/3", "h/B/4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hand-outs (-want +got):\n%s", diff)
	}
}

func TestSetCrawlDelayTakesEffectAtOnce(t *testing.T) {
	// A PATCH lowering a crawl's delay from 500ms to 50ms: the group that
	// just fetched is eligible 50ms after that fetch, not 500ms.
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{})
	slow := DelayPolicy{Min: 500 * time.Millisecond, Max: 10 * time.Second, Version: 1}
	addCrawl(t, s, "A", "h", 3)
	l := mustNext(t, s, "https://h/A/1")
	mustRelease(t, s, l, Outcome{Status: 200, Duration: 10 * time.Millisecond, Policy: &slow})
	clk.Advance(60 * time.Millisecond)
	mustNone(t, s)
	fast := DelayPolicy{Min: 50 * time.Millisecond, Max: 10 * time.Second, Version: 2}
	s.SetCrawlDelay("A", fast)
	l = mustNext(t, s, "https://h/A/2")
	rep, _ := s.Group("h")
	if rep.PolicyVersion != 2 || rep.Crawl != "A" || rep.Delay != 50*time.Millisecond {
		t.Errorf("Group(h) = policy version %d of crawl %q, delay %v; want version 2 of A, 50ms", rep.PolicyVersion, rep.Crawl, rep.Delay)
	}
	mustRelease(t, s, l, Outcome{Status: 200, Duration: 10 * time.Millisecond, Policy: &fast})
	// Raising it applies at once too: the group waits the new delay.
	s.SetCrawlDelay("A", DelayPolicy{Min: 2 * time.Second, Max: 10 * time.Second, Version: 3})
	clk.Advance(time.Second)
	mustNone(t, s)
	clk.Advance(time.Second)
	mustNext(t, s, "https://h/A/3")
	// Another crawl's policy change leaves the group alone.
	s2 := newTestScheduler(t, newFakeClock(), Config{})
	addCrawl(t, s2, "A", "h", 2)
	l = mustNext(t, s2, "https://h/A/1")
	mustRelease(t, s2, l, Outcome{Status: 200, Policy: &slow})
	s2.SetCrawlDelay("B", fast)
	if rep, _ := s2.Group("h"); rep.PolicyVersion != 1 || rep.Delay != 500*time.Millisecond {
		t.Errorf("after crawl B's change: Group(h) = version %d delay %v, want 1, 500ms", rep.PolicyVersion, rep.Delay)
	}
}

func TestCrawlBudgetFutureItemsRetired(t *testing.T) {
	// Items not due yet of a spent crawl are retired too, and counted
	// right.
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0)})
	s.SetCrawlBudget("h", "h", "B", budgetTotal(1))
	mustAdd(t, s, Item{URL: "https://h/B/now", Group: "h", Crawl: "B"},
		Item{URL: "https://h/B/later", Group: "h", Crawl: "B", NotBefore: t0.Add(time.Hour)},
		Item{URL: "https://h/A/later", Group: "h", Crawl: "A", NotBefore: t0.Add(time.Hour)})
	l := mustNext(t, s, "https://h/B/now")
	mustRelease(t, s, l, Outcome{Status: 200})
	clk.Advance(2 * time.Hour)
	mustNext(t, s, "https://h/A/later")
	c := s.Counts()
	if c.Queued != 0 || c.RetiredItems != 1 {
		t.Errorf("Counts() = %+v, want 0 queued, 1 retired", c)
	}
	if r := retiredOf(s); !cmp.Equal(r, map[string]int{"B": 1}) {
		t.Errorf("retired = %v, want B: 1", r)
	}
	if c := s.Counts(); c.RetiredItems != 0 {
		t.Errorf("Counts().RetiredItems after DrainRetired = %d, want 0", c.RetiredItems)
	}
}
