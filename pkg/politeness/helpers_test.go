package politeness

import (
	"sync"
	"testing"
	"time"
)

// t0 is the fake clock's start: the t_now of Veidemann's crawl host group example.
var t0 = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is an injected clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// fixedDelay returns a delay policy that always waits d, with no backoff.
func fixedDelay(d time.Duration) *DelayPolicy {
	return &DelayPolicy{Min: d, Max: d}
}

// noBudget is a budget without rotation or retirement.
var noBudget = &Budget{BalanceReplenish: NoLimit, TotalBudget: NoLimit}

// newTestScheduler returns a scheduler on clk; cfg's Now is replaced.
func newTestScheduler(t *testing.T, clk *fakeClock, cfg Config) *Scheduler {
	t.Helper()
	cfg.Now = clk.Now
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0 }
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return s
}

func mustAdd(t *testing.T, s *Scheduler, items ...Item) {
	t.Helper()
	for _, it := range items {
		if err := s.Add(it); err != nil {
			t.Fatalf("Add(%+v) = %v", it, err)
		}
	}
}

// mustNext hands out the next item and checks its URL.
func mustNext(t *testing.T, s *Scheduler, wantURL string) Lease {
	t.Helper()
	l, ok := s.TryNext()
	if !ok {
		t.Fatalf("TryNext() = none, want %q", wantURL)
	}
	if l.Item.URL != wantURL {
		t.Fatalf("TryNext() = %q (group %q), want %q", l.Item.URL, l.Item.Group, wantURL)
	}
	return l
}

func mustNone(t *testing.T, s *Scheduler) {
	t.Helper()
	if l, ok := s.TryNext(); ok {
		t.Fatalf("TryNext() = %q (group %q), want none", l.Item.URL, l.Item.Group)
	}
}

func mustRelease(t *testing.T, s *Scheduler, l Lease, o Outcome) {
	t.Helper()
	if !s.Release(l, o) {
		t.Fatalf("Release(%q) = false, want true", l.Item.URL)
	}
}
