package politeness

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// addN adds n items https://<host>/<i> for i in 1..n.
func addN(t *testing.T, s *Scheduler, host string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		mustAdd(t, s, Item{URL: fmt.Sprintf("https://%s/%d", host, i)})
	}
}

// drainShort hands out and releases items while any is ready, returning
// them as "host/i" with the ".example" suffix dropped.
func drainShort(t *testing.T, s *Scheduler) []string {
	t.Helper()
	var got []string
	for {
		l, ok := s.TryNext()
		if !ok {
			return got
		}
		got = append(got, l.Item.URL[len("https://"):])
		mustRelease(t, s, l, Outcome{Status: 200})
	}
}

func TestRetirementAtTotalBudget(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0), Budget: &Budget{BalanceReplenish: NoLimit, TotalBudget: 3}})
	s.SetBudget("b", Budget{BalanceReplenish: NoLimit, TotalBudget: NoLimit})
	addN(t, s, "a", 5)
	addN(t, s, "b", 5)

	got := drainShort(t, s)
	want := []string{"a/1", "b/1", "a/2", "b/2", "a/3", "b/3", "b/4", "b/5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("hand-outs mismatch (-want +got):\n%s", diff)
	}
	wantCounts := Counts{Groups: 2, Retired: 1, Idle: 1, Queued: 0, RetiredItems: 2}
	if diff := cmp.Diff(wantCounts, s.Counts()); diff != "" {
		t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
	}
	if !s.Counts().Drained() {
		t.Error("Counts().Drained() = false with only retired items left, want true")
	}

	// A retired group keeps accepting items but is not scheduled.
	addN(t, s, "a", 1)
	mustNone(t, s)
	r, _ := s.Group("a")
	if r.State != StateRetired || r.Queued != 3 || r.Spent != 3 || r.Budget.TotalBudget != 3 {
		t.Errorf("Group(a) = state %q queued %d spent %d budget %d, want retired, 3, 3, 3", r.State, r.Queued, r.Spent, r.Budget.TotalBudget)
	}
	if c := s.Counts(); c.RetiredItems != 3 || c.Queued != 0 {
		t.Errorf("Counts() = %+v, want 3 retired items, 0 queued", c)
	}

	// Raising its budget brings it back, through the inactive FIFO.
	s.SetBudget("a", Budget{BalanceReplenish: NoLimit, TotalBudget: 5})
	checkStates(t, s, "budget raised", States{Inactive: []string{"a"}, Idle: []string{"b"}})
	if c := s.Counts(); c.RetiredItems != 0 || c.Queued != 3 {
		t.Errorf("Counts() = %+v, want 0 retired items, 3 queued", c)
	}
	got = drainShort(t, s)
	if diff := cmp.Diff([]string{"a/4", "a/5"}, got); diff != "" {
		t.Errorf("after raise, hand-outs mismatch (-want +got):\n%s", diff)
	}
	if r, _ := s.Group("a"); r.State != StateRetired || r.Queued != 1 {
		t.Errorf("Group(a) = state %q queued %d, want retired again with 1", r.State, r.Queued)
	}
}

func TestLoweringDefaultBudgetRetiresEagerly(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(time.Second), Budget: noBudget})
	addN(t, s, "a", 3) // will be waiting
	addN(t, s, "b", 3) // will be ready
	addN(t, s, "c", 3) // never fetched: spend 0
	l := mustNext(t, s, "https://a/1")
	mustRelease(t, s, l, Outcome{Status: 200})
	clk.Advance(time.Second)
	l = mustNext(t, s, "https://b/1")
	mustRelease(t, s, l, Outcome{Status: 200})
	clk.Advance(time.Second)
	checkStates(t, s, "before", States{Ready: []string{"c", "a"}, Waiting: []Timed{{"b", t0.Add(2 * time.Second)}}})

	s.SetBudget("", Budget{BalanceReplenish: NoLimit, TotalBudget: 1})
	checkStates(t, s, "after", States{Ready: []string{"c"}, Retired: []string{"a", "b"}})
	if c := s.Counts(); c.RetiredItems != 4 || c.Queued != 3 {
		t.Errorf("Counts() = %+v, want 4 retired items and 3 queued", c)
	}
	l = mustNext(t, s, "https://c/1")
	mustRelease(t, s, l, Outcome{Status: 200})
	clk.Advance(time.Hour)
	mustNone(t, s)
}

func TestZeroTotalBudgetRetiresBeforeFirstFetch(t *testing.T) {
	s := newTestScheduler(t, newFakeClock(), Config{Budget: &Budget{BalanceReplenish: NoLimit, TotalBudget: 0}})
	addN(t, s, "a", 2)
	mustNone(t, s)
	checkStates(t, s, "zero budget", States{Retired: []string{"a"}})
}

func TestBalanceReplenishRotation(t *testing.T) {
	s := newTestScheduler(t, newFakeClock(), Config{Delay: fixedDelay(0), Budget: &Budget{BalanceReplenish: 2, TotalBudget: NoLimit}})
	for _, h := range []string{"a", "b", "c"} {
		addN(t, s, h, 6)
	}
	got := drainShort(t, s)
	want := []string{
		"a/1", "b/1", "c/1", // all start active, round robin
		"a/2", "b/2", "c/2", // each spends its balance and goes inactive
		"a/3", "a/4", // nothing ready: a is activated with a fresh balance
		"b/3", "b/4",
		"c/3", "c/4",
		"a/5", "a/6",
		"b/5", "b/6",
		"c/5", "c/6",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hand-outs mismatch (-want +got):\n%s", diff)
	}
}

func TestBalanceRotationWithCosts(t *testing.T) {
	s := newTestScheduler(t, newFakeClock(), Config{Delay: fixedDelay(0), Budget: &Budget{BalanceReplenish: 3, TotalBudget: NoLimit}, Cost: WagCost{}})
	// a's URLs cost 3 (query, same page as via); b's cost 1.
	for i := 1; i <= 3; i++ {
		mustAdd(t, s, Item{URL: fmt.Sprintf("https://a/l?p=%d", i), Via: "https://a/l?p=0"})
	}
	addN(t, s, "b", 6)
	got := drainShort(t, s)
	want := []string{"a/l?p=1", "b/1", "b/2", "b/3", "a/l?p=2", "b/4", "b/5", "b/6", "a/l?p=3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hand-outs mismatch (-want +got):\n%s", diff)
	}
	r, _ := s.Group("a")
	if r.Spent != 9 || r.LastCost != 3 || r.AvgCost != 3 {
		t.Errorf("Group(a) spent %d last %d avg %v, want 9, 3, 3", r.Spent, r.LastCost, r.AvgCost)
	}
}

func TestHoldQueuesSiteFirst(t *testing.T) {
	s := newTestScheduler(t, newFakeClock(), Config{Delay: fixedDelay(0), Budget: noBudget, Cost: ZeroCost{}, HoldQueues: true})
	for _, h := range []string{"a", "b", "c"} {
		addN(t, s, h, 3)
	}
	checkStates(t, s, "held", States{Inactive: []string{"a", "b", "c"}})
	got := drainShort(t, s)
	want := []string{"a/1", "a/2", "a/3", "b/1", "b/2", "b/3", "c/1", "c/2", "c/3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hand-outs mismatch (-want +got):\n%s", diff)
	}
}

// TestHoldQueuesActivateWhenNeeded: a held group is activated when the
// active ones are all waiting, to keep fetchers busy.
func TestHoldQueuesActivateWhenNeeded(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(time.Second), Budget: noBudget, HoldQueues: true})
	for _, h := range []string{"a", "b", "c"} {
		addN(t, s, h, 2)
	}
	l := mustNext(t, s, "https://a/1")
	mustRelease(t, s, l, Outcome{Status: 200})
	l = mustNext(t, s, "https://b/1")
	mustRelease(t, s, l, Outcome{Status: 200})
	checkStates(t, s, "a and b activated", States{Inactive: []string{"c"}, Waiting: []Timed{{"a", t0.Add(time.Second)}, {"b", t0.Add(time.Second)}}})
	clk.Advance(time.Second)
	got := drainShort(t, s)
	if diff := cmp.Diff([]string{"a/2", "b/2", "c/1"}, got); diff != "" {
		t.Errorf("hand-outs mismatch (-want +got):\n%s", diff)
	}
}

func TestOverrides(t *testing.T) {
	clk := newFakeClock()
	aliases, err := ParseAliases("kommune=rana.kommune.no|vefsn.kommune.no")
	if err != nil {
		t.Fatal(err)
	}
	s := newTestScheduler(t, clk, Config{
		Delay:   fixedDelay(0),
		Budget:  noBudget,
		Grouper: NewGrouper(aliases, nil),
		Overrides: []Override{
			{Domain: "no", Budget: &Budget{BalanceReplenish: NoLimit, TotalBudget: 1}},
			{Domain: "slow.example", Delay: fixedDelay(time.Hour)},
			{Domain: "kommune", Budget: &Budget{BalanceReplenish: NoLimit, TotalBudget: 2}},
			{Domain: "Dear.Example.", Cost: CostFunc(func(string, string) int { return 7 })},
		},
	})
	mustAdd(t, s,
		Item{URL: "https://nb.no/1"}, Item{URL: "https://nb.no/2"},
		Item{URL: "https://rana.kommune.no/1"}, Item{URL: "https://vefsn.kommune.no/2"}, Item{URL: "https://rana.kommune.no/3"},
		Item{URL: "https://www.slow.example/1"}, Item{URL: "https://www.slow.example/2"},
		Item{URL: "https://dear.example/1"},
		Item{URL: "https://fast.example/1"}, Item{URL: "https://fast.example/2"},
	)
	got := drainShort(t, s)
	want := []string{
		"nb.no/1", "rana.kommune.no/1", "www.slow.example/1", "dear.example/1", "fast.example/1",
		"vefsn.kommune.no/2", "fast.example/2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hand-outs mismatch (-want +got):\n%s", diff)
	}
	tests := []struct {
		group     string
		wantState State
		wantSpent int64
	}{
		{"nb.no", StateRetired, 1},   // suffix "no"
		{"kommune", StateRetired, 2}, // exact group id beats the "no" suffix
		{"www.slow.example", StateWaiting, 1},
		{"dear.example", StateIdle, 7}, // cost override
		{"fast.example", StateIdle, 2},
	}
	for _, tt := range tests {
		r, _ := s.Group(tt.group)
		if r.State != tt.wantState || r.Spent != tt.wantSpent {
			t.Errorf("Group(%q) = state %q spent %d, want %q, %d", tt.group, r.State, r.Spent, tt.wantState, tt.wantSpent)
		}
	}
	if r, _ := s.Group("www.slow.example"); r.Delay != time.Hour {
		t.Errorf("Group(www.slow.example).Delay = %v, want 1h", r.Delay)
	}

	// Replacing the overrides re-evaluates retired groups.
	if err := s.SetOverrides([]Override{{Domain: "kommune.no", Budget: &Budget{BalanceReplenish: NoLimit, TotalBudget: 1}}}); err != nil {
		t.Fatal(err)
	}
	got = drainShort(t, s)
	if diff := cmp.Diff([]string{"nb.no/2"}, got); diff != "" {
		t.Errorf("after SetOverrides, hand-outs mismatch (-want +got):\n%s", diff)
	}
	if r, _ := s.Group("kommune"); r.State != StateRetired {
		t.Errorf("Group(kommune).State = %q, want retired (by its first host rana.kommune.no)", r.State)
	}
	if err := s.SetOverrides([]Override{{Domain: ""}}); err == nil {
		t.Error("SetOverrides(empty domain) = nil, want an error")
	}
}

func TestDrainRetired(t *testing.T) {
	now := time.Unix(1000, 0)
	s, err := New(Config{Now: func() time.Time { return now }, Delay: &DelayPolicy{}, Budget: &Budget{BalanceReplenish: 100, TotalBudget: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Add(Item{URL: fmt.Sprintf("http://trap.test/%d", i), Group: "trap", Payload: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Add(Item{URL: "http://ok.test/", Group: "ok", Payload: 99}); err != nil {
		t.Fatal(err)
	}
	handed := 0
	for range 3 {
		l, ok := s.TryNext()
		if !ok {
			break
		}
		if l.Item.Group == "trap" {
			handed++
		}
		s.Release(l, Outcome{Status: 200})
	}
	if handed != 2 {
		t.Fatalf("trap handed out %d times before retirement, want 2 (its total budget)", handed)
	}
	got := s.DrainRetired(10)
	if len(got) != 3 {
		t.Fatalf("DrainRetired = %d items, want the trap's 3 remaining", len(got))
	}
	for _, it := range got {
		if it.Group != "trap" || it.Payload.(int) < 2 {
			t.Errorf("drained %+v", it)
		}
	}
	if c := s.Counts(); c.RetiredItems != 0 || c.Retired != 1 {
		t.Errorf("counts after drain = %+v, want the group still retired with no items", c)
	}
	// A new item of the retired group is retired too, until the budget grows.
	_ = s.Add(Item{URL: "http://trap.test/new", Group: "trap"})
	if len(s.DrainRetired(10)) != 1 {
		t.Errorf("new item of a retired group not drained")
	}
	s.SetBudget("trap", Budget{BalanceReplenish: 100, TotalBudget: 10})
	_ = s.Add(Item{URL: "http://trap.test/again", Group: "trap"})
	if len(s.DrainRetired(10)) != 0 {
		t.Errorf("item drained after the budget was raised")
	}
	if l, ok := s.TryNext(); !ok || l.Item.URL != "http://trap.test/again" {
		t.Errorf("after raising the budget TryNext = %v, %v; want the trap's new item", l.Item.URL, ok)
	}
}

// runSlots hands out items to slots fetchers at a time (delay 0, fake
// clock): each round leases up to slots items, then releases them all. It
// returns the groups in hand-out order.
func runSlots(t *testing.T, s *Scheduler, slots int) []string {
	t.Helper()
	var order []string
	for {
		var ls []Lease
		for len(ls) < slots {
			l, ok := s.TryNext()
			if !ok {
				break
			}
			ls = append(ls, l)
			order = append(order, l.Item.Group)
		}
		if len(ls) == 0 {
			return order
		}
		for _, l := range ls {
			mustRelease(t, s, l, Outcome{Status: 200})
		}
	}
}

// maxOpen returns the most groups that were started (some item handed out)
// and not finished (some item still to come) at once in order: 1 for groups
// crawled strictly one after another, the number of groups when they are
// all interleaved.
func maxOpen(order []string) int {
	last := map[string]int{}
	for i, g := range order {
		last[g] = i
	}
	open, most := map[string]bool{}, 0
	for i, g := range order {
		open[g] = true
		most = max(most, len(open))
		if last[g] == i {
			delete(open, g)
		}
	}
	return most
}

// TestHoldQueuesPerGroupSiteFirst: with 2 fetch slots and 5 groups of 4
// items, groups whose budget holds queues are finished two at a time, one
// pair after another, instead of all five interleaved; the budget reaches
// them by default budget, by override and by SetBudget before the group's
// first item (as the loader sets a crawl's budget).
func TestHoldQueuesPerGroupSiteFirst(t *testing.T) {
	hosts := []string{"a", "b", "c", "d", "e"}
	hold := &Budget{BalanceReplenish: NoLimit, TotalBudget: NoLimit, HoldQueues: true}
	tests := []struct {
		name     string
		cfg      Config
		setup    func(s *Scheduler)
		wantOpen int
	}{
		{"no hold interleaves", Config{Budget: noBudget}, func(*Scheduler) {}, 5},
		{"default budget", Config{Budget: hold}, func(*Scheduler) {}, 2},
		{"scheduler-wide config", Config{Budget: noBudget, HoldQueues: true}, func(*Scheduler) {}, 2},
		{"per-group budgets", Config{Budget: noBudget}, func(s *Scheduler) {
			for _, h := range hosts {
				s.SetBudget(h, *hold)
			}
		}, 2},
		{"overrides", Config{Budget: noBudget, Overrides: []Override{
			{Domain: "a", Budget: hold}, {Domain: "b", Budget: hold}, {Domain: "c", Budget: hold}, {Domain: "d", Budget: hold}, {Domain: "e", Budget: hold},
		}}, func(*Scheduler) {}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Delay, cfg.Cost = fixedDelay(0), ZeroCost{}
			s := newTestScheduler(t, newFakeClock(), cfg)
			tt.setup(s)
			for _, h := range hosts {
				addN(t, s, h, 4)
			}
			order := runSlots(t, s, 2)
			if len(order) != 20 {
				t.Fatalf("handed out %d items, want 20: %v", len(order), order)
			}
			if got := maxOpen(order); got != tt.wantOpen {
				t.Errorf("groups open at once = %d, want %d; order %v", got, tt.wantOpen, order)
			}
		})
	}
}

// TestHoldQueuesSetBudget: a budget that turns HoldQueues on holds groups
// not started yet and leaves a started one active; turning it off releases
// the held groups.
func TestHoldQueuesSetBudget(t *testing.T) {
	s := newTestScheduler(t, newFakeClock(), Config{Delay: fixedDelay(0), Budget: noBudget, Cost: ZeroCost{}})
	for _, h := range []string{"a", "b", "c"} {
		addN(t, s, h, 2)
	}
	l := mustNext(t, s, "https://a/1")
	mustRelease(t, s, l, Outcome{Status: 200})
	checkStates(t, s, "before", States{Ready: []string{"b", "c", "a"}})
	s.SetBudget("", Budget{BalanceReplenish: NoLimit, TotalBudget: NoLimit, HoldQueues: true})
	checkStates(t, s, "held", States{Ready: []string{"a"}, Inactive: []string{"b", "c"}})
	if got := drainShort(t, s); !cmp.Equal(got, []string{"a/2", "b/1", "b/2", "c/1", "c/2"}) {
		t.Errorf("hand-outs after hold = %v, want a first, then b, then c", got)
	}

	s = newTestScheduler(t, newFakeClock(), Config{Delay: fixedDelay(0), Budget: noBudget, Cost: ZeroCost{}, HoldQueues: true})
	for _, h := range []string{"a", "b"} {
		addN(t, s, h, 2)
	}
	checkStates(t, s, "held by config", States{Inactive: []string{"a", "b"}})
	s.SetBudget("b", *noBudget)
	checkStates(t, s, "b released", States{Ready: []string{"b"}, Inactive: []string{"a"}})
	if r, _ := s.Group("a"); !r.Budget.HoldQueues {
		t.Errorf("Group(a).Budget = %+v, want HoldQueues", r.Budget)
	}
}
