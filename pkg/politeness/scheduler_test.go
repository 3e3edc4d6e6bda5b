package politeness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nc is a group's {n = next time, c = count} as Veidemann's crawl host group design draws it.
type nc struct {
	N time.Time
	C int
}

func groupNC(t *testing.T, s *Scheduler, ids ...string) map[string]nc {
	t.Helper()
	out := map[string]nc{}
	for _, id := range ids {
		r, ok := s.Group(id)
		if !ok {
			t.Fatalf("Group(%q) does not exist", id)
		}
		out[id] = nc{N: r.NextEligible, C: r.Queued}
	}
	return out
}

func checkStates(t *testing.T, s *Scheduler, step string, want States) {
	t.Helper()
	if diff := cmp.Diff(want, s.States()); diff != "" {
		t.Errorf("%s: States() mismatch (-want +got):\n%s", step, diff)
	}
}

// TestCrawlHostGroupExample replays the example of Veidemann's crawl host
// group design step by step.
func TestCrawlHostGroupExample(t *testing.T) {
	clk := newFakeClock()
	const busyTimeout = 5 * time.Minute
	s := newTestScheduler(t, clk, Config{BusyTimeout: busyTimeout, Delay: fixedDelay(time.Second), Budget: noBudget})
	tnow := t0
	t1, t2, t3, t4, t5 := tnow.Add(10*time.Second), tnow.Add(-5*time.Second), tnow.Add(20*time.Second), tnow.Add(-time.Second), tnow.Add(30*time.Second)
	mustAdd(t, s,
		Item{URL: "uri1", Group: "chg1", NotBefore: t1},
		Item{URL: "uri2", Group: "chg1", NotBefore: t2},
		Item{URL: "uri3", Group: "chg2", NotBefore: t3},
		Item{URL: "uri4", Group: "chg3", NotBefore: t4},
		Item{URL: "uri5", Group: "chg4", NotBefore: t5},
	)

	// "On insertion the uri2 and uri4's earliestFetchTimeStamp is set to the
	// current time t_now. The initial datastructure then becomes:"
	wantNC := map[string]nc{
		"chg1": {N: tnow, C: 2},
		"chg2": {N: t3, C: 1},
		"chg3": {N: tnow, C: 1},
		"chg4": {N: t5, C: 1},
	}
	if diff := cmp.Diff(wantNC, groupNC(t, s, "chg1", "chg2", "chg3", "chg4")); diff != "" {
		t.Errorf("after insertion, groups mismatch (-want +got):\n%s", diff)
	}
	checkStates(t, s, "after insertion", States{
		Ready:   []string{"chg1", "chg3"},
		Waiting: []Timed{{"chg2", t3}, {"chg4", t5}},
	})

	// "let uri2 be active in crawling"
	l2 := mustNext(t, s, "uri2")
	if l2.Item.Group != "chg1" || !l2.Deadline.Equal(tnow.Add(busyTimeout)) {
		t.Errorf("lease of uri2 = group %q deadline %v, want chg1, %v", l2.Item.Group, l2.Deadline, tnow.Add(busyTimeout))
	}
	checkStates(t, s, "with uri2 active", States{
		Waiting: []Timed{{"chg2", t3}, {"chg4", t5}},
		Busy:    []Timed{{"chg1", tnow.Add(busyTimeout)}},
		Ready:   []string{"chg3"},
	})

	// Continue: chg3 is handed out and released. Having no items left it is
	// idle, but remembers when it may be fetched again.
	l4 := mustNext(t, s, "uri4")
	mustRelease(t, s, l4, Outcome{Status: 200})
	mustNone(t, s)
	checkStates(t, s, "chg3 released", States{
		Waiting: []Timed{{"chg2", t3}, {"chg4", t5}},
		Busy:    []Timed{{"chg1", tnow.Add(busyTimeout)}},
		Idle:    []string{"chg3"},
	})
	if diff := cmp.Diff(map[string]nc{"chg3": {N: tnow.Add(time.Second), C: 0}}, groupNC(t, s, "chg3")); diff != "" {
		t.Errorf("chg3 released, mismatch (-want +got):\n%s", diff)
	}
	clk.Advance(2 * time.Second)

	// chg1 is released: its politeness delay ends before uri1's time, so it
	// waits until t1.
	mustRelease(t, s, l2, Outcome{Status: 200})
	if diff := cmp.Diff(map[string]nc{"chg1": {N: t1, C: 1}}, groupNC(t, s, "chg1")); diff != "" {
		t.Errorf("chg1 released, mismatch (-want +got):\n%s", diff)
	}
	checkStates(t, s, "chg1 released", States{
		Waiting: []Timed{{"chg1", t1}, {"chg2", t3}, {"chg4", t5}},
		Idle:    []string{"chg3"},
	})

	// The queue worker moves due groups to ready in time order.
	clk.Set(t3)
	mustNext(t, s, "uri1")
	checkStates(t, s, "at t3", States{
		Ready:   []string{"chg2"},
		Waiting: []Timed{{"chg4", t5}},
		Busy:    []Timed{{"chg1", t3.Add(busyTimeout)}},
		Idle:    []string{"chg3"},
	})
	mustNext(t, s, "uri3")
	mustNone(t, s)
	clk.Set(t5)
	mustNext(t, s, "uri5")
	if c := s.Counts(); c.Queued != 0 || c.Busy != 3 {
		t.Errorf("Counts() = %+v, want 0 queued and 3 busy", c)
	}
}

// TestHostReservationAlias replays Veidemann's host reservation with an alias.
func TestHostReservationAlias(t *testing.T) {
	a, err := ParseAliases("kommune=rana.kommune.no|vefsn.kommune.no")
	if err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{
		BusyTimeout: 2 * time.Minute,
		Delay:       fixedDelay(time.Second),
		Budget:      noBudget,
		Grouper:     NewGrouper(a, nil),
	})
	mustAdd(t, s,
		Item{URL: "https://rana.kommune.no/"},
		Item{URL: "https://vefsn.kommune.no/"},
		Item{URL: "https://nb.no/"},
	)
	checkStates(t, s, "host queue populated", States{Ready: []string{"kommune", "nb.no"}})

	// Reserve the first host: rana.kommune.no; its alias becomes busy.
	rana := mustNext(t, s, "https://rana.kommune.no/")
	if rana.Item.Group != "kommune" || rana.Item.Host != "rana.kommune.no" {
		t.Errorf("lease = group %q host %q, want kommune, rana.kommune.no", rana.Item.Group, rana.Item.Host)
	}
	// nb.no has no alias and is independent.
	nb := mustNext(t, s, "https://nb.no/")
	// vefsn.kommune.no is not handed out while its alias is busy.
	mustNone(t, s)
	checkStates(t, s, "kommune and nb.no busy", States{
		Busy: []Timed{{"kommune", t0.Add(2 * time.Minute)}, {"nb.no", t0.Add(2 * time.Minute)}},
	})

	// Releasing nb.no does not free the alias.
	mustRelease(t, s, nb, Outcome{Status: 200})
	clk.Advance(time.Second)
	mustNone(t, s)

	// Releasing the alias's host frees it after the politeness delay.
	mustRelease(t, s, rana, Outcome{Status: 200})
	mustNone(t, s)
	clk.Advance(time.Second)
	vefsn := mustNext(t, s, "https://vefsn.kommune.no/")
	if vefsn.Item.Group != "kommune" || vefsn.Item.Host != "vefsn.kommune.no" {
		t.Errorf("lease = group %q host %q, want kommune, vefsn.kommune.no", vefsn.Item.Group, vefsn.Item.Host)
	}
	r, _ := s.Group("kommune")
	if diff := cmp.Diff([]string{"rana.kommune.no", "vefsn.kommune.no"}, r.Hosts); diff != "" {
		t.Errorf("kommune hosts mismatch (-want +got):\n%s", diff)
	}

	// No alias stays busy forever: the busy timeout frees it.
	mustAdd(t, s, Item{URL: "https://rana.kommune.no/2"})
	clk.Advance(2*time.Minute - time.Nanosecond)
	mustNone(t, s)
	clk.Advance(time.Nanosecond)
	mustNext(t, s, "https://rana.kommune.no/2")
}

func TestBusyTimeoutAndLateRelease(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{BusyTimeout: time.Minute, Delay: fixedDelay(10 * time.Second), Budget: noBudget})
	mustAdd(t, s, Item{URL: "https://a.example/1"}, Item{URL: "https://a.example/2"}, Item{URL: "https://a.example/3"})
	first := mustNext(t, s, "https://a.example/1")
	mustNone(t, s)
	clk.Advance(59 * time.Second)
	mustNone(t, s)

	// The timeout passes: the group is ready again without Release.
	clk.Advance(time.Second)
	second := mustNext(t, s, "https://a.example/2")
	r, _ := s.Group("a.example")
	if r.Timeouts != 1 || r.LastError == "" || r.Fetches != 0 {
		t.Errorf("after timeout: timeouts %d last error %q fetches %d, want 1, an error, 0", r.Timeouts, r.LastError, r.Fetches)
	}

	// The first lease's late Release is ignored: the group stays busy with
	// the second lease and nothing about the first is recorded.
	if s.Release(first, Outcome{Status: 503, RetryAfter: "3600"}) {
		t.Error("Release(first) after its timeout = true, want false")
	}
	if r, _ := s.Group("a.example"); r.State != StateBusy || r.Fetches != 0 || r.Backoff.Level != 0 {
		t.Errorf("after late release: state %q fetches %d backoff %d, want busy, 0, 0", r.State, r.Fetches, r.Backoff.Level)
	}
	// A double Release of the current lease counts once.
	mustRelease(t, s, second, Outcome{Status: 200})
	if s.Release(second, Outcome{Status: 200}) {
		t.Error("second Release(second) = true, want false")
	}
	clk.Advance(10 * time.Second)
	third := mustNext(t, s, "https://a.example/3")

	// A Release that arrives after the deadline, before anyone noticed the
	// timeout, is ignored too and expires the lease.
	clk.Advance(time.Minute)
	if s.Release(third, Outcome{Status: 200}) {
		t.Error("Release(third) at its deadline = true, want false")
	}
	if r, _ := s.Group("a.example"); r.State != StateIdle || r.Timeouts != 2 || r.Fetches != 1 {
		t.Errorf("after expired release: state %q timeouts %d fetches %d, want idle, 2, 1", r.State, r.Timeouts, r.Fetches)
	}
	if s.Release(Lease{Item: Item{Group: "nope"}, Token: 1}, Outcome{}) {
		t.Error("Release of unknown group = true, want false")
	}
}

// TestNoHeadOfLineBlocking: a group with a huge backlog gets one turn per
// round like every other group.
func TestNoHeadOfLineBlocking(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0), Budget: noBudget})
	for i := range 10000 {
		mustAdd(t, s, Item{URL: fmt.Sprintf("https://big.example/%d", i)})
	}
	for _, h := range []string{"a", "b", "c", "d"} {
		mustAdd(t, s, Item{URL: "https://" + h + ".example/"})
	}
	seen := map[string]int{}
	for range 6 {
		l, ok := s.TryNext()
		if !ok {
			t.Fatal("TryNext() = none, want an item")
		}
		seen[l.Item.Group]++
		mustRelease(t, s, l, Outcome{Status: 200})
	}
	want := map[string]int{"big.example": 2, "a.example": 1, "b.example": 1, "c.example": 1, "d.example": 1}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("first six hand-outs by group mismatch (-want +got):\n%s", diff)
	}
}

// TestItemOrderWithinGroup: cheaper items first, FIFO among equal costs,
// future items when their time comes.
func TestItemOrderWithinGroup(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0), Budget: noBudget, Cost: WagCost{}})
	mustAdd(t, s,
		Item{URL: "https://a.example/list?p=2", Via: "https://a.example/list?p=1"}, // 3
		Item{URL: "https://a.example/search?q=x"},                                  // 2
		Item{URL: "https://a.example/later", NotBefore: t0.Add(time.Minute)},       // 1, future
		Item{URL: "https://a.example/one"},                                         // 1
		Item{URL: "https://a.example/two"},                                         // 1
	)
	var got []string
	var costs []int
	drain := func() {
		for {
			l, ok := s.TryNext()
			if !ok {
				return
			}
			got, costs = append(got, l.Item.URL), append(costs, l.Cost)
			mustRelease(t, s, l, Outcome{Status: 200})
		}
	}
	drain()
	clk.Advance(time.Minute)
	drain()
	wantURLs := []string{"https://a.example/one", "https://a.example/two", "https://a.example/search?q=x", "https://a.example/list?p=2", "https://a.example/later"}
	if diff := cmp.Diff(wantURLs, got); diff != "" {
		t.Errorf("hand-out order mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 1, 2, 3, 1}, costs); diff != "" {
		t.Errorf("costs mismatch (-want +got):\n%s", diff)
	}
}

// TestAddEarlierItemToWaitingGroup: a waiting group whose only item is in
// the future becomes ready when a due item arrives.
func TestAddEarlierItemToWaitingGroup(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0), Budget: noBudget})
	mustAdd(t, s, Item{URL: "https://a.example/later", NotBefore: t0.Add(time.Hour)})
	checkStates(t, s, "future item", States{Waiting: []Timed{{"a.example", t0.Add(time.Hour)}}})
	mustAdd(t, s, Item{URL: "https://a.example/sooner", NotBefore: t0.Add(time.Minute)})
	checkStates(t, s, "sooner item", States{Waiting: []Timed{{"a.example", t0.Add(time.Minute)}}})
	mustAdd(t, s, Item{URL: "https://a.example/now"})
	checkStates(t, s, "due item", States{Ready: []string{"a.example"}})
	mustNext(t, s, "https://a.example/now")
}

func TestAddErrors(t *testing.T) {
	s := newTestScheduler(t, newFakeClock(), Config{})
	err := s.Add(Item{URL: "/relative"})
	if !errors.Is(err, ErrNoGroup) {
		t.Errorf("Add(relative URL) = %v, want ErrNoGroup", err)
	}
	if err := s.Add(Item{URL: "/relative", Host: "A.example"}); err != nil {
		t.Errorf("Add(relative URL with host) = %v", err)
	}
	if err := s.Add(Item{URL: "x", Group: "g"}); err != nil {
		t.Errorf("Add(with group only) = %v", err)
	}
	l, ok := s.TryNext()
	if !ok || l.Item.Host != "a.example" {
		t.Errorf("TryNext() = %+v, %v, want host a.example", l.Item, ok)
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"bad delay", Config{Delay: &DelayPolicy{Factor: -1}}},
		{"negative busy timeout", Config{BusyTimeout: -time.Second}},
		{"empty override domain", Config{Overrides: []Override{{Domain: " . "}}}},
		{"duplicate override", Config{Overrides: []Override{{Domain: "a.example"}, {Domain: "A.example."}}}},
		{"bad override delay", Config{Overrides: []Override{{Domain: "a.example", Delay: &DelayPolicy{Jitter: 2}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Errorf("New(%+v) = nil error, want one", tt.cfg)
			}
		})
	}
}

func TestNextBlocksUntilReady(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(time.Hour), Budget: noBudget})

	// Cancelled context.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next(cancelled) = %v, want context.Canceled", err)
	}

	// An Add wakes a blocked Next.
	got := make(chan Lease, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := s.Next(t.Context())
		if err != nil {
			errc <- err
			return
		}
		got <- l
	}()
	mustAdd(t, s, Item{URL: "https://a.example/1"}, Item{URL: "https://a.example/2"})
	var l Lease
	select {
	case l = <-got:
	case err := <-errc:
		t.Fatalf("Next() = %v", err)
	}
	if l.Item.URL != "https://a.example/1" {
		t.Errorf("Next() = %q, want https://a.example/1", l.Item.URL)
	}

	// A waiting group is handed out once the (injected) clock passes its
	// time and Next is woken.
	mustRelease(t, s, l, Outcome{Status: 200})
	go func() {
		l, err := s.Next(t.Context())
		if err != nil {
			errc <- err
			return
		}
		got <- l
	}()
	clk.Advance(time.Hour)
	s.Wake()
	select {
	case l = <-got:
	case err := <-errc:
		t.Fatalf("Next() = %v", err)
	}
	if l.Item.URL != "https://a.example/2" {
		t.Errorf("Next() = %q, want https://a.example/2", l.Item.URL)
	}

	// Next returns the context's error when it ends while waiting.
	ctx, cancel = context.WithCancel(t.Context())
	go func() {
		_, err := s.Next(ctx)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Next() after cancel = %v, want context.Canceled", err)
	}
}

// TestNextWaitsOnRealClock: with the real clock a waiting group is handed
// out by its own timer, without Add or Wake.
func TestNextWaitsOnRealClock(t *testing.T) {
	s, err := New(Config{Delay: fixedDelay(20 * time.Millisecond), Budget: noBudget})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, Item{URL: "https://a.example/1"}, Item{URL: "https://a.example/2"})
	l, err := s.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	mustRelease(t, s, l, Outcome{Status: 200})
	l, err = s.Next(t.Context())
	if err != nil || l.Item.URL != "https://a.example/2" {
		t.Fatalf("Next() = %q, %v, want https://a.example/2", l.Item.URL, err)
	}
	if since := time.Since(released); since < 20*time.Millisecond {
		t.Errorf("second item handed out %v after release, before the 20ms delay", since)
	}
}

func TestReleaseWithOutcomePolicy(t *testing.T) {
	now := time.Unix(1000, 0)
	s, err := New(Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Item{URL: "http://a.test/1", Group: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Item{URL: "http://a.test/2", Group: "a"}); err != nil {
		t.Fatal(err)
	}
	l, ok := s.TryNext()
	if !ok {
		t.Fatal("no lease")
	}
	pol := DelayPolicy{Factor: 0, Min: 7 * time.Second, Max: 7 * time.Second}
	s.Release(l, Outcome{Duration: time.Millisecond, Status: 200, Policy: &pol})
	if _, ok := s.TryNext(); ok {
		t.Fatal("group handed out before the crawl's delay")
	}
	now = now.Add(7 * time.Second)
	if _, ok := s.TryNext(); !ok {
		t.Fatal("group not ready after the crawl's 7s delay")
	}
}

func TestReleaseUnfetchedRefundsAndOwesNoDelay(t *testing.T) {
	now := time.Unix(1000, 0)
	s, err := New(Config{Now: func() time.Time { return now }, Delay: &DelayPolicy{Min: time.Hour, Max: time.Hour},
		Budget: &Budget{BalanceReplenish: 100, TotalBudget: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_ = s.Add(Item{URL: fmt.Sprintf("http://a.test/%d", i), Group: "a"})
	}
	for i := range 5 { // held back five times: free, and no delay
		l, ok := s.TryNext()
		if !ok {
			t.Fatalf("hold %d: group not ready", i)
		}
		s.Release(l, Outcome{Unfetched: true})
		_ = s.Add(Item{URL: l.Item.URL, Group: "a"})
	}
	if r, _ := s.Group("a"); r.Spent != 0 {
		t.Errorf("spent after unfetched releases = %d, want 0", r.Spent)
	}
	l, ok := s.TryNext()
	if !ok {
		t.Fatal("group not ready after unfetched releases")
	}
	s.Release(l, Outcome{Status: 200})
	if _, ok := s.TryNext(); ok {
		t.Error("group ready right after a real fetch with a one-hour delay")
	}
}
