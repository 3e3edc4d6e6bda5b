// Package profilestest is the conformance suite of profiles.Store: every
// implementation, embedded or remote, must pass Run.
//
// The suite tolerates a store shared with other tests: it uses crawl ids of
// its own and checks List only for the order of its own crawls.
package profilestest

import (
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// Harness makes the stores under test.
type Harness struct {
	// New returns a store, closed by the harness when t ends.
	New func(t *testing.T) profiles.Store
	// Reopen closes x and returns a new store on the same storage. Nil skips
	// the restart test.
	Reopen func(t *testing.T, x profiles.Store) profiles.Store
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"PutGet", testPutGet},
		{"PutExisting", testPutExisting},
		{"ListNewestFirst", testList},
		{"Transition", testTransition},
		{"TransitionConflict", testTransitionConflict},
		{"TransitionConcurrent", testTransitionConcurrent},
		{"SetProfile", testSetProfile},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

var cmpTime = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// crawl returns a running crawl with a full profile, an id of its own and
// the creation time created (at millisecond precision, which every store
// keeps).
func crawl(created time.Time) profiles.Crawl {
	id := "pt-" + rand.Text()
	return profiles.Crawl{
		ID: id,
		Profile: contracts.Profile{
			Name:              "test " + id,
			StartURLs:         []string{"https://example.com/", "https://example.org/a?b=c"},
			MaxDepth:          3,
			Scope:             contracts.ScopeDomain,
			CrawlMustMatch:    `^https://example\.(com|org)/`,
			CrawlMustNotMatch: `\.pdf$`,
			IndexMustMatch:    ".*",
			IndexMustNotMatch: "/private/",
			MaxPages:          1000,
			MaxPagesPerHost:   100,
			UserAgent:         "testbot/1.0",
			Politeness:        contracts.Politeness{MinDelayMS: 250, MaxDelayMS: 5000, DelayFactor: 1.5, Robots: contracts.RobotsObey},
			Priority:          4,
		},
		State:     contracts.CrawlRunning,
		CreatedAt: created.Truncate(time.Millisecond),
	}
}

func mustPut(t *testing.T, s profiles.Store, c profiles.Crawl) {
	t.Helper()
	if err := s.Put(t.Context(), c); err != nil {
		t.Fatalf("Put(%q) error: %v", c.ID, err)
	}
}

func mustGet(t *testing.T, s profiles.Store, id string) profiles.Crawl {
	t.Helper()
	c, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%q) error: %v", id, err)
	}
	return c
}

func testPutGet(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	if diff := cmp.Diff(c, mustGet(t, s, c.ID), cmpTime); diff != "" {
		t.Errorf("Get(%q) (-want +got):\n%s", c.ID, diff)
	}
	missing := "pt-missing-" + rand.Text()
	if _, err := s.Get(t.Context(), missing); !errors.Is(err, profiles.ErrNotFound) {
		t.Errorf("Get(%q) error = %v, want ErrNotFound", missing, err)
	}
}

func testPutExisting(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	again := c
	again.Profile.MaxDepth = 9
	again.State = contracts.CrawlFinished
	if err := s.Put(t.Context(), again); !errors.Is(err, profiles.ErrExists) {
		t.Errorf("Put(%q) again error = %v, want ErrExists", c.ID, err)
	}
	if diff := cmp.Diff(c, mustGet(t, s, c.ID), cmpTime); diff != "" {
		t.Errorf("Get(%q) after a refused Put (-want +got):\n%s", c.ID, diff)
	}
}

func testList(t *testing.T, h Harness) {
	s := h.New(t)
	now := time.Now()
	oldest, middle, newest := crawl(now.Add(-2*time.Second)), crawl(now.Add(-time.Second)), crawl(now)
	// Stored out of order, so that insertion order cannot pass for age.
	for _, c := range []profiles.Crawl{middle, newest, oldest} {
		mustPut(t, s, c)
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List error: %v", err)
	}
	var ours []profiles.Crawl
	for i, c := range list {
		if i > 0 && c.CreatedAt.After(list[i-1].CreatedAt) {
			t.Errorf("List[%d] created %v is newer than List[%d] created %v", i, c.CreatedAt, i-1, list[i-1].CreatedAt)
		}
		switch c.ID {
		case oldest.ID, middle.ID, newest.ID:
			ours = append(ours, c)
		}
	}
	if diff := cmp.Diff([]profiles.Crawl{newest, middle, oldest}, ours, cmpTime); diff != "" {
		t.Errorf("List, this test's crawls (-want +got):\n%s", diff)
	}
}

func mustTransition(t *testing.T, s profiles.Store, id string, from, to contracts.CrawlState, at time.Time) {
	t.Helper()
	if err := s.Transition(t.Context(), id, from, to, at); err != nil {
		t.Fatalf("Transition(%q, %s, %s) error: %v", id, from, to, err)
	}
}

func testTransition(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	at := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	for _, step := range []struct {
		name     string
		from, to contracts.CrawlState
		finished *time.Time
	}{
		{"pause", contracts.CrawlRunning, contracts.CrawlPaused, nil},
		{"resume", contracts.CrawlPaused, contracts.CrawlRunning, nil},
		{"finish sets the finished time", contracts.CrawlRunning, contracts.CrawlFinished, &at},
	} {
		if err := s.Transition(t.Context(), c.ID, step.from, step.to, at); err != nil {
			t.Fatalf("%s: Transition(%q, %s, %s) error: %v", step.name, c.ID, step.from, step.to, err)
		}
		want := c
		want.State, want.FinishedAt = step.to, step.finished
		if diff := cmp.Diff(want, mustGet(t, s, c.ID), cmpTime); diff != "" {
			t.Errorf("%s: Get(%q) (-want +got):\n%s", step.name, c.ID, diff)
		}
	}
	cancelled := crawl(time.Now())
	mustPut(t, s, cancelled)
	mustTransition(t, s, cancelled.ID, contracts.CrawlRunning, contracts.CrawlPaused, at)
	mustTransition(t, s, cancelled.ID, contracts.CrawlPaused, contracts.CrawlCancelled, at)
	want := cancelled
	want.State, want.FinishedAt = contracts.CrawlCancelled, &at
	if diff := cmp.Diff(want, mustGet(t, s, cancelled.ID), cmpTime); diff != "" {
		t.Errorf("cancel a paused crawl: Get(%q) (-want +got):\n%s", cancelled.ID, diff)
	}
	missing := "pt-missing-" + rand.Text()
	if err := s.Transition(t.Context(), missing, contracts.CrawlRunning, contracts.CrawlFinished, at); !errors.Is(err, profiles.ErrNotFound) {
		t.Errorf("Transition(%q) error = %v, want ErrNotFound", missing, err)
	}
	if _, err := s.Get(t.Context(), missing); !errors.Is(err, profiles.ErrNotFound) {
		t.Errorf("Get(%q) after Transition error = %v, want ErrNotFound", missing, err)
	}
}

// testTransitionConflict checks that a transition from a state the crawl is
// not in changes nothing.
func testTransitionConflict(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	at := time.Now().Truncate(time.Millisecond)
	mustTransition(t, s, c.ID, contracts.CrawlRunning, contracts.CrawlFinished, at)
	want := c
	want.State, want.FinishedAt = contracts.CrawlFinished, &at
	for _, tr := range []struct{ from, to contracts.CrawlState }{
		{contracts.CrawlRunning, contracts.CrawlPaused},
		{contracts.CrawlRunning, contracts.CrawlFinished},
		{contracts.CrawlPaused, contracts.CrawlRunning},
		{contracts.CrawlCancelled, contracts.CrawlRunning},
	} {
		err := s.Transition(t.Context(), c.ID, tr.from, tr.to, at.Add(time.Hour))
		if !errors.Is(err, profiles.ErrConflict) {
			t.Errorf("Transition(%q, %s, %s) of a finished crawl error = %v, want ErrConflict", c.ID, tr.from, tr.to, err)
		}
		if diff := cmp.Diff(want, mustGet(t, s, c.ID), cmpTime); diff != "" {
			t.Errorf("Get(%q) after a refused Transition(%s, %s) (-want +got):\n%s", c.ID, tr.from, tr.to, diff)
		}
	}
}

// testTransitionConcurrent races transitions of one crawl from the same
// state: exactly one applies, the others fail with ErrConflict.
func testTransitionConcurrent(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	to := []contracts.CrawlState{contracts.CrawlPaused, contracts.CrawlFinished, contracts.CrawlCancelled}
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Transition(t.Context(), c.ID, contracts.CrawlRunning, to[i%len(to)], time.Now()) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("transitions %d and %d both applied", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, profiles.ErrConflict):
			t.Errorf("transition %d error = %v, want nil or ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no transition applied")
	}
	if got := mustGet(t, s, c.ID); got.State != to[won%len(to)] {
		t.Errorf("state after the race = %s, want %s (the winner's)", got.State, to[won%len(to)])
	}
}

func testSetProfile(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	mustTransition(t, s, c.ID, contracts.CrawlRunning, contracts.CrawlPaused, time.Now())
	p := c.Profile
	p.Version++
	p.Politeness.MinDelayMS = 1234
	p.Budget = &contracts.Budget{TotalBudget: 7, Overrides: []contracts.BudgetOverride{{Domain: "example.org", TotalBudget: 9}}}
	if err := s.SetProfile(t.Context(), c.ID, p); err != nil {
		t.Fatalf("SetProfile(%q) error: %v", c.ID, err)
	}
	want := c
	want.Profile, want.State = p, contracts.CrawlPaused
	if diff := cmp.Diff(want, mustGet(t, s, c.ID), cmpTime); diff != "" {
		t.Errorf("Get(%q) after SetProfile (-want +got):\n%s", c.ID, diff)
	}
	// A transition keeps the profile.
	mustTransition(t, s, c.ID, contracts.CrawlPaused, contracts.CrawlRunning, time.Now())
	want.State = contracts.CrawlRunning
	if diff := cmp.Diff(want, mustGet(t, s, c.ID), cmpTime); diff != "" {
		t.Errorf("Get(%q) after SetProfile and Transition (-want +got):\n%s", c.ID, diff)
	}
	missing := "pt-missing-" + rand.Text()
	if err := s.SetProfile(t.Context(), missing, p); !errors.Is(err, profiles.ErrNotFound) {
		t.Errorf("SetProfile(%q) error = %v, want ErrNotFound", missing, err)
	}
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("harness has no Reopen")
	}
	s := h.New(t)
	a, b := crawl(time.Now().Add(-time.Second)), crawl(time.Now())
	mustPut(t, s, a)
	mustPut(t, s, b)
	finished := time.Now().Truncate(time.Millisecond)
	mustTransition(t, s, a.ID, contracts.CrawlRunning, contracts.CrawlFinished, finished)
	a.State, a.FinishedAt = contracts.CrawlFinished, &finished

	s = h.Reopen(t, s)
	for _, want := range []profiles.Crawl{a, b} {
		if diff := cmp.Diff(want, mustGet(t, s, want.ID), cmpTime); diff != "" {
			t.Errorf("Get(%q) after reopen (-want +got):\n%s", want.ID, diff)
		}
	}
	if err := s.Put(t.Context(), b); !errors.Is(err, profiles.ErrExists) {
		t.Errorf("Put(%q) after reopen error = %v, want ErrExists", b.ID, err)
	}
}
