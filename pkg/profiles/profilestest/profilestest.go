// Package profilestest is the conformance suite of profiles.Store: every
// implementation, embedded or remote, must pass Run.
//
// The suite tolerates a store shared with other tests: it uses crawl ids of
// its own and checks List only for the order of its own crawls.
package profilestest

import (
	"crypto/rand"
	"errors"
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
		{"SetState", testSetState},
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

func testSetState(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	finished := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	for _, step := range []struct {
		name     string
		state    contracts.CrawlState
		finished *time.Time
	}{
		{"finish", contracts.CrawlFinished, &finished},
		{"resume clears finished time", contracts.CrawlRunning, nil},
		{"cancel", contracts.CrawlCancelled, &finished},
	} {
		if err := s.SetState(t.Context(), c.ID, step.state, step.finished); err != nil {
			t.Fatalf("%s: SetState(%q) error: %v", step.name, c.ID, err)
		}
		want := c
		want.State, want.FinishedAt = step.state, step.finished
		if diff := cmp.Diff(want, mustGet(t, s, c.ID), cmpTime); diff != "" {
			t.Errorf("%s: Get(%q) (-want +got):\n%s", step.name, c.ID, diff)
		}
	}
	missing := "pt-missing-" + rand.Text()
	if err := s.SetState(t.Context(), missing, contracts.CrawlFinished, &finished); !errors.Is(err, profiles.ErrNotFound) {
		t.Errorf("SetState(%q) error = %v, want ErrNotFound", missing, err)
	}
	if _, err := s.Get(t.Context(), missing); !errors.Is(err, profiles.ErrNotFound) {
		t.Errorf("Get(%q) after SetState error = %v, want ErrNotFound", missing, err)
	}
}

func testSetProfile(t *testing.T, h Harness) {
	s := h.New(t)
	c := crawl(time.Now())
	mustPut(t, s, c)
	finished := time.Now().Truncate(time.Millisecond)
	if err := s.SetState(t.Context(), c.ID, contracts.CrawlPaused, &finished); err != nil {
		t.Fatalf("SetState error: %v", err)
	}
	p := c.Profile
	p.Version++
	p.Politeness.MinDelayMS = 1234
	p.Budget = &contracts.Budget{TotalBudget: 7, Overrides: []contracts.BudgetOverride{{Domain: "example.org", TotalBudget: 9}}}
	if err := s.SetProfile(t.Context(), c.ID, p); err != nil {
		t.Fatalf("SetProfile(%q) error: %v", c.ID, err)
	}
	want := c
	want.Profile, want.State, want.FinishedAt = p, contracts.CrawlPaused, &finished
	if diff := cmp.Diff(want, mustGet(t, s, c.ID), cmpTime); diff != "" {
		t.Errorf("Get(%q) after SetProfile (-want +got):\n%s", c.ID, diff)
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
	if err := s.SetState(t.Context(), a.ID, contracts.CrawlFinished, &finished); err != nil {
		t.Fatalf("SetState error: %v", err)
	}
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
