package politeness

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSnapshot(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{
		Delay: &DelayPolicy{
			Factor: 2, Min: time.Second, Max: 10 * time.Second, RetryAfterCap: time.Minute,
			BackoffBase: 5 * time.Second, BackoffMultiplier: 2, ForgiveAfter: time.Minute,
		},
		Budget: &Budget{BalanceReplenish: 100, TotalBudget: 1000},
	})
	addN(t, s, "a.example", 15)
	statuses := []int{200, 200, 404, 200, 200, 200, 200, 200, 200, 200, 200, 503}
	var released time.Time
	for i, st := range statuses {
		if i > 0 {
			clk.Advance(time.Minute)
		}
		l, ok := s.TryNext()
		if !ok || l.Item.Group != "a.example" {
			t.Fatalf("TryNext() = %q, %v, want an item of a.example", l.Item.Group, ok)
		}
		clk.Advance(100 * time.Millisecond)
		released = clk.Now()
		o := Outcome{Duration: 100 * time.Millisecond, Status: st}
		if st == 503 {
			o.RetryAfter = "30"
		}
		mustRelease(t, s, l, o)
	}
	addN(t, s, "b.example", 20)

	got, ok := s.Group("a.example")
	if !ok {
		t.Fatal("Group(a.example) does not exist")
	}
	want := GroupReport{
		Group:        "a.example",
		State:        StateWaiting,
		Hosts:        []string{"a.example"},
		NextEligible: released.Add(30 * time.Second),
		Delay:        30 * time.Second,
		Why:          WhyRetryAfter,
		Decision: Decision{
			Delay: 30 * time.Second, Why: WhyRetryAfter, Factor: 200 * time.Millisecond, Base: time.Second,
			RetryAfter: 30 * time.Second, BackoffLevel: 1,
		},
		Queued:         3,
		Enqueued:       15,
		Fetches:        12,
		LastFetch:      100 * time.Millisecond,
		SessionBalance: 88,
		Spent:          12,
		Budget:         Budget{BalanceReplenish: 100, TotalBudget: 1000},
		LastCost:       1,
		AvgCost:        1,
		RecentStatus:   []int{404, 200, 200, 200, 200, 200, 200, 200, 200, 503},
		LastError:      "http status 503",
		Backoff:        Backoff{Level: 1, LastTrouble: released},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Group(a.example) mismatch (-want +got):\n%s", diff)
	}

	r := s.Snapshot(1)
	wantCounts := Counts{Groups: 2, Ready: 1, Waiting: 1, Queued: 23}
	if diff := cmp.Diff(wantCounts, r.Counts); diff != "" {
		t.Errorf("Snapshot(1).Counts mismatch (-want +got):\n%s", diff)
	}
	if len(r.Groups) != 1 || r.Groups[0].Group != "b.example" || !r.Truncated {
		t.Errorf("Snapshot(1) = %d groups, first %q, truncated %v, want 1, b.example, true", len(r.Groups), r.Groups[0].Group, r.Truncated)
	}
	if r := s.Snapshot(0); len(r.Groups) != 2 || r.Truncated || r.Groups[1].Group != "a.example" {
		t.Errorf("Snapshot(0) = %d groups, truncated %v, want 2 with a.example second, not truncated", len(r.Groups), r.Truncated)
	}
	b, err := json.Marshal(s.Snapshot(0))
	if err != nil {
		t.Fatalf("json.Marshal(Snapshot) = %v", err)
	}
	for _, want := range []string{`"chg":"a.example"`, `"why":"retry-after"`, `"state":"waiting"`, `"recent_status":[404,`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON report %s lacks %s", b, want)
		}
	}
	if _, ok := s.Group("nope"); ok {
		t.Error("Group(nope) exists, want not")
	}
}

func TestSnapshotBusyAndIdle(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{BusyTimeout: time.Minute, Delay: fixedDelay(5 * time.Second)})
	addN(t, s, "a", 1)
	addN(t, s, "b", 1)
	la := mustNext(t, s, "https://a/1")
	lb := mustNext(t, s, "https://b/1")
	mustRelease(t, s, lb, Outcome{Err: errors.New("fetch: test error"), ErrKind: ErrorOther})
	a, _ := s.Group("a")
	if a.State != StateBusy || !a.BusyUntil.Equal(la.Deadline) || !a.NextEligible.IsZero() {
		t.Errorf("busy group: state %q busy until %v next %v, want busy, %v, zero", a.State, a.BusyUntil, a.NextEligible, la.Deadline)
	}
	b, _ := s.Group("b")
	if b.State != StateIdle || !b.NextEligible.Equal(t0.Add(5*time.Second)) || b.LastError != "fetch: test error" || len(b.RecentStatus) != 1 || b.RecentStatus[0] != 0 {
		t.Errorf("idle group = %+v, want idle, next t0+5s, error text, status [0]", b)
	}
	if b.SessionBalance != DefaultBudget().BalanceReplenish-1 {
		t.Errorf("session balance = %d, want %d", b.SessionBalance, DefaultBudget().BalanceReplenish-1)
	}
}
