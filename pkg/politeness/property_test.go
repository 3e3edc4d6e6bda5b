package politeness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"
)

// modelGroup is the test's own account of one group.
type modelGroup struct {
	next     time.Time // not before (politeness)
	backoff  Backoff
	leased   bool
	token    uint64
	deadline time.Time
	pending  map[string]time.Time // URL → NotBefore of items not handed out
}

// expire ends a lease whose busy timeout has passed, as the scheduler must:
// the group may be handed out again from the deadline on.
func (m *modelGroup) expire(now time.Time) {
	if m.leased && !now.Before(m.deadline) {
		m.leased = false
		m.next = m.deadline
	}
}

func (m *modelGroup) hasDue(now time.Time) bool {
	for _, nb := range m.pending {
		if !nb.After(now) {
			return true
		}
	}
	return false
}

// TestPropertyRandomOperations drives the scheduler with random adds,
// hand-outs, releases (current, duplicate and late) and clock moves, and
// checks against an independent model that it never hands out a group that
// holds an unexpired lease, never before the group's next time or an item's
// NotBefore, never an item twice, and always hands out something when some
// group is eligible.
func TestPropertyRandomOperations(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runProperty(t, seed, 5000)
		})
	}
}

func runProperty(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	const (
		groups      = 40
		busyTimeout = 2 * time.Second
		rnd         = 0.5
	)
	pol := DelayPolicy{
		Factor: 1, Min: 10 * time.Millisecond, Max: 500 * time.Millisecond,
		CrawlDelayCap: time.Second, RetryAfterCap: 2 * time.Second,
		BackoffBase: 50 * time.Millisecond, BackoffMultiplier: 2, BackoffMax: time.Second,
		Jitter: 0.3, ForgiveAfter: time.Second,
	}
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{
		BusyTimeout: busyTimeout,
		Delay:       &pol,
		Rand:        func() float64 { return rnd },
		Budget:      &Budget{BalanceReplenish: int64(1 + seed%4), TotalBudget: NoLimit},
		Cost:        WagCost{},
		HoldQueues:  seed%2 == 1,
	})
	model := map[string]*modelGroup{}
	handed := map[string]bool{}
	var leases []Lease
	pending, urls := 0, 0

	handOut := func(l Lease, now time.Time) {
		t.Helper()
		m := model[l.Item.Group]
		if m == nil {
			t.Fatalf("handed out %q of unknown group %q", l.Item.URL, l.Item.Group)
		}
		m.expire(now)
		if m.leased {
			t.Fatalf("at %v: group %q handed out while its lease (deadline %v) is current", now, l.Item.Group, m.deadline)
		}
		if now.Before(m.next) {
			t.Fatalf("at %v: group %q handed out before its next time %v", now, l.Item.Group, m.next)
		}
		nb, ok := m.pending[l.Item.URL]
		if !ok {
			t.Fatalf("handed out %q which is not pending (handed before: %v)", l.Item.URL, handed[l.Item.URL])
		}
		if nb.After(now) {
			t.Fatalf("at %v: handed out %q before its NotBefore %v", now, l.Item.URL, nb)
		}
		if want := now.Add(busyTimeout); !l.Deadline.Equal(want) {
			t.Fatalf("lease deadline %v, want %v", l.Deadline, want)
		}
		delete(m.pending, l.Item.URL)
		handed[l.Item.URL] = true
		pending--
		m.leased, m.token, m.deadline = true, l.Token, now.Add(busyTimeout)
		leases = append(leases, l)
	}

	release := func(i int, o Outcome, now time.Time) {
		t.Helper()
		l := leases[i]
		m := model[l.Item.Group]
		m.expire(now)
		current := m.leased && m.token == l.Token
		if got := s.Release(l, o); got != current {
			t.Fatalf("at %v: Release(%q, token %d) = %v, want %v", now, l.Item.URL, l.Token, got, current)
		}
		if current {
			m.leased = false
			m.next = now.Add(pol.Decide(&m.backoff, o, now, rnd).Delay)
		}
	}

	for step := range steps {
		now := clk.Now()
		switch op := rng.IntN(100); {
		case op < 35: // add
			id := fmt.Sprintf("g%d.example", rng.IntN(groups))
			urls++
			u := fmt.Sprintf("https://%s/p%d", id, urls)
			if rng.IntN(3) == 0 {
				u += "?q=1"
			}
			var nb time.Time
			switch rng.IntN(10) {
			case 0, 1:
				nb = now.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
			case 2:
				nb = now.Add(-time.Second)
			}
			mustAdd(t, s, Item{URL: u, NotBefore: nb})
			m := model[id]
			if m == nil {
				m = &modelGroup{pending: map[string]time.Time{}}
				model[id] = m
			}
			if nb.Before(now) {
				nb = now
			}
			m.pending[u] = nb
			pending++
		case op < 65: // hand out
			if l, ok := s.TryNext(); ok {
				handOut(l, now)
				break
			}
			for id, m := range model {
				m.expire(now)
				if !m.leased && !now.Before(m.next) && m.hasDue(now) {
					t.Fatalf("step %d at %v: TryNext() = none, but group %q is eligible", step, now, id)
				}
			}
		case op < 90: // release a lease: current, already released or expired
			if len(leases) == 0 {
				break
			}
			i := rng.IntN(len(leases))
			release(i, randomOutcome(rng, now), now)
			if rng.IntN(4) > 0 { // keep some for duplicate and late releases
				leases[i] = leases[len(leases)-1]
				leases = leases[:len(leases)-1]
			}
		default: // time passes
			d := time.Duration(rng.Int64N(int64(700 * time.Millisecond)))
			if rng.IntN(10) == 0 {
				d = 3 * time.Second
			}
			clk.Advance(d)
		}
		if c := s.Counts(); c.Queued != pending || c.Groups != len(model) {
			t.Fatalf("step %d: Counts() = %+v, want %d queued in %d groups", step, c, pending, len(model))
		}
	}

	// Drain: nothing is lost, nothing is handed out twice.
	clk.Advance(time.Hour)
	for i := range leases {
		release(i, Outcome{Status: 200}, clk.Now())
	}
	leases = nil
	for pending > 0 {
		l, ok := s.TryNext()
		if !ok {
			clk.Advance(time.Hour)
			if l, ok = s.TryNext(); !ok {
				t.Fatalf("drain: %d items pending but none handed out", pending)
			}
		}
		handOut(l, clk.Now())
		release(len(leases)-1, Outcome{Status: 200}, clk.Now())
	}
	if len(handed) != urls {
		t.Errorf("handed out %d distinct URLs, want %d", len(handed), urls)
	}
	if c := s.Counts(); !c.Drained() {
		t.Errorf("Counts() after drain = %+v, want drained", c)
	}
}

func randomOutcome(rng *rand.Rand, now time.Time) Outcome {
	o := Outcome{Duration: time.Duration(rng.Int64N(int64(600 * time.Millisecond)))}
	switch rng.IntN(12) {
	case 0:
		o.Status, o.RetryAfter = 503, "1"
	case 1:
		o.Status, o.RetryAfter = 429, now.Add(1500*time.Millisecond).Format(http.TimeFormat)
	case 2:
		o.Status, o.RetryAfter = 503, "later"
	case 3:
		o.ErrKind = ErrorTimeout
	case 4:
		o.ErrKind = ErrorReset
	case 5:
		o.Status = 404
	default:
		o.Status = 200
	}
	if rng.IntN(5) == 0 {
		o.CrawlDelay = time.Duration(rng.Int64N(int64(2 * time.Second)))
	}
	return o
}

// TestConcurrentWorkersNeverShareAGroup runs blocking Next workers on the
// real clock and checks that no two ever hold items of one group at once.
func TestConcurrentWorkersNeverShareAGroup(t *testing.T) {
	s, err := New(Config{Delay: fixedDelay(0), BusyTimeout: time.Hour, Budget: &Budget{BalanceReplenish: 3, TotalBudget: NoLimit}})
	if err != nil {
		t.Fatal(err)
	}
	const groups, perGroup, workers = 20, 50, 8
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var mu sync.Mutex
	holding := map[string]bool{}
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				l, err := s.Next(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				if holding[l.Item.Group] {
					t.Errorf("group %q handed out to two workers at once", l.Item.Group)
				}
				if seen[l.Item.URL] {
					t.Errorf("item %q handed out twice", l.Item.URL)
				}
				holding[l.Item.Group], seen[l.Item.URL] = true, true
				done := len(seen) == groups*perGroup
				mu.Unlock()
				runtime.Gosched() // "fetch", letting other workers run

				mu.Lock()
				holding[l.Item.Group] = false
				mu.Unlock()
				if !s.Release(l, Outcome{Status: 200}) {
					t.Errorf("Release(%q) = false", l.Item.URL)
				}
				if done {
					cancel()
				}
			}
		})
	}
	// Add while workers run.
	for i := range perGroup {
		for g := range groups {
			mustAdd(t, s, Item{URL: fmt.Sprintf("https://g%d.example/%d", g, i)})
		}
	}
	wg.Wait()
	if len(seen) != groups*perGroup {
		t.Errorf("handed out %d items, want %d", len(seen), groups*perGroup)
	}
}
