package mcp

import (
	"net/http"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// fetchedAt settles every to-be-loaded record of the crawl as indexed with a
// recrawl state due at due, as the loader and the indexer would.
func (l *lifecycleMCP) fetchedAt(t *testing.T, id string, due time.Time) {
	t.Helper()
	for _, r := range l.records(t, id) {
		st := &txindex.Recrawl{Fetched: due.Add(-time.Hour), Status: 200, IntervalMS: time.Hour.Milliseconds(), Due: due}
		if _, err := l.set.Tx.Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: contracts.ToBeLoaded, To: contracts.Indexed, Recrawl: st}}); err != nil {
			t.Fatal(err)
		}
	}
}

func (l *lifecycleMCP) status(t *testing.T, id string) contracts.CrawlStatus {
	t.Helper()
	var st contracts.CrawlStatus
	if code := l.do(t, http.MethodGet, "/"+id, nil, &st); code != http.StatusOK {
		t.Fatalf("GET crawl = %d", code)
	}
	return st
}

// TestContinuousCrawlLifecycle walks a continuous crawl through its states:
// up to date when out of work (never finished), running again when the due
// check takes due URLs, left alone by the due check while paused or
// cancelled; PATCH changes its schedule, and is refused for a one-shot
// crawl.
func TestContinuousCrawlLifecycle(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	ctx := t.Context()
	id := l.create(t, contracts.Profile{Sitemaps: new(bool), Recrawl: &contracts.Recrawl{Interval: "1h"}})
	now := time.Now().UTC().Truncate(time.Millisecond)
	l.fetchedAt(t, id, now.Add(-time.Minute))

	if _, err := l.co.CheckFinished(ctx); err != nil {
		t.Fatal(err)
	}
	st := l.status(t, id)
	if st.State != contracts.CrawlUpToDate || st.FinishedAt != nil || st.Recrawl == nil || st.Recrawl.Due != 1 || st.Recrawl.NextDue == nil || !st.Recrawl.NextDue.Equal(now.Add(-time.Minute)) {
		t.Fatalf("out of work: state %s, finished at %v, recrawl %+v; want up_to_date, 1 due at now-1m", st.State, st.FinishedAt, st.Recrawl)
	}

	n, err := l.co.CheckDue(ctx, now)
	if err != nil || n != 1 {
		t.Fatalf("CheckDue = %d, %v; want 1", n, err)
	}
	st = l.status(t, id)
	if st.State != contracts.CrawlRunning || st.Counts[contracts.ToBeLoaded] != 1 || st.Recrawl.Due != 0 || st.Recrawl.NextDue != nil {
		t.Fatalf("after the due check: state %s, counts %v, recrawl %+v; want running, 1 to-be-loaded, nothing due", st.State, st.Counts, st.Recrawl)
	}
	for _, r := range l.records(t, id) {
		if r.Attempts != 0 || r.Recrawl == nil {
			t.Errorf("record taken back: attempts %d, recrawl %+v; want 0 and the state kept", r.Attempts, r.Recrawl)
		}
	}
	if n, err := l.co.CheckDue(ctx, now); err != nil || n != 0 {
		t.Errorf("second CheckDue = %d, %v; want 0 (nothing due)", n, err)
	}

	// Paused: the due check leaves it alone; resumed, it goes on.
	l.fetchedAt(t, id, now.Add(-time.Second))
	if code := l.do(t, http.MethodPost, "/"+id+"/pause", nil, nil); code/100 != 2 {
		t.Fatalf("pause = %d", code)
	}
	if n, err := l.co.CheckDue(ctx, now); err != nil || n != 0 {
		t.Errorf("CheckDue of a paused crawl = %d, %v; want 0", n, err)
	}
	if code := l.do(t, http.MethodPost, "/"+id+"/resume", nil, nil); code/100 != 2 {
		t.Fatalf("resume = %d", code)
	}
	if n, err := l.co.CheckDue(ctx, now); err != nil || n != 1 {
		t.Errorf("CheckDue after resume = %d, %v; want 1", n, err)
	}

	// PATCH of the schedule: a new profile version.
	if code := l.do(t, http.MethodPatch, "/"+id, map[string]any{"recrawl": map[string]any{"adaptive": map[string]string{"min": "1h", "max": "30d"}}}, nil); code/100 != 2 {
		t.Fatalf("PATCH recrawl = %d", code)
	}
	if st := l.status(t, id); st.Profile.Recrawl == nil || st.Profile.Recrawl.Adaptive == nil || st.Profile.Version != 1 {
		t.Errorf("after PATCH: recrawl %+v, version %d", st.Profile.Recrawl, st.Profile.Version)
	}
	var e contracts.ErrorResponse
	if code := l.do(t, http.MethodPatch, "/"+id, map[string]any{"recrawl": map[string]any{"interval": "1s", "adaptive": map[string]string{"min": "1h", "max": "2h"}}}, &e); code != http.StatusBadRequest || e.Field != "recrawl" {
		t.Errorf("PATCH with both schedules = %d %+v; want 400 naming recrawl", code, e)
	}
	oneShot := l.create(t, contracts.Profile{})
	if code := l.do(t, http.MethodPatch, "/"+oneShot, map[string]any{"recrawl": map[string]string{"interval": "1h"}}, &e); code != http.StatusBadRequest || e.Field != "recrawl" {
		t.Errorf("PATCH recrawl of a one-shot crawl = %d %+v; want 400 naming recrawl", code, e)
	}

	// Up to date, then cancelled: the due check leaves it alone for good.
	l.fetchedAt(t, id, now.Add(-time.Second))
	if _, err := l.co.CheckFinished(ctx); err != nil {
		t.Fatal(err)
	}
	if st := l.status(t, id); st.State != contracts.CrawlUpToDate {
		t.Fatalf("state = %s, want up_to_date", st.State)
	}
	if code := l.do(t, http.MethodDelete, "/"+id, nil, nil); code/100 != 2 {
		t.Fatalf("cancel = %d", code)
	}
	if n, err := l.co.CheckDue(ctx, now); err != nil || n != 0 {
		t.Errorf("CheckDue of a cancelled crawl = %d, %v; want 0", n, err)
	}
	if st := l.status(t, id); st.State != contracts.CrawlCancelled {
		t.Errorf("state = %s, want cancelled", st.State)
	}
}
