package grid

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// lifecycleSite starts the test site and returns it with the expected crawl
// at depth.
func lifecycleSite(t *testing.T, depth int) (*websim.Site, websim.Expect) {
	t.Helper()
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	return site, site.Expect(depth)
}

// createCrawl posts p and returns the crawl id.
func createCrawl(t *testing.T, api string, p contracts.Profile) string {
	t.Helper()
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	return created.CrawlID
}

// pendingRecords counts the crawl's pending records in the transaction index.
func pendingRecords(t *testing.T, g *Grid, id string) int64 {
	t.Helper()
	counts, err := g.Backends.Tx.Counts(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for s, c := range counts {
		if s.Pending() {
			n += c
		}
	}
	return n
}

// TestPausedCrawlSurvivesRecoverySweeps pauses a crawl that has URLs
// waiting, runs more recovery passes than the recovery attempts allow, each
// after the lease, and resumes: the crawl completes with every page the
// site's oracle expects, and no URL failed as stalled.
func TestPausedCrawlSurvivesRecoverySweeps(t *testing.T) {
	const depth = 4
	site, exp := lifecycleSite(t, depth)
	cfg := testConfig(t, t.TempDir(), site.Resolve())
	cfg.Coordinator.RecoveryLease = time.Second
	cfg.Coordinator.RecoveryAttempts = 2
	cfg.Coordinator.RecoveryInterval = time.Hour // the test runs the passes
	g, api := startGrid(t, cfg)
	id := createCrawl(t, api, contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 200, MaxDelayMS: 200, DelayFactor: 1, Robots: contracts.RobotsObey}})
	var st contracts.CrawlStatus
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls/"+id+"/pause", nil, &st); code != http.StatusOK || st.State != contracts.CrawlPaused {
		t.Fatalf("pause = %d %s, want 200 paused", code, st.State)
	}
	if pendingRecords(t, g, id) == 0 {
		t.Fatal("no URL is waiting in the paused crawl; make the site slower")
	}
	for pass := range cfg.Coordinator.RecoveryAttempts + 2 {
		time.Sleep(cfg.Coordinator.RecoveryLease + 100*time.Millisecond) // every waiting record is past its lease
		if _, err := g.Coordinator.Sweep(t.Context()); err != nil {
			t.Fatalf("sweep %d: %v", pass, err)
		}
	}
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls/"+id+"/resume", nil, &st); code != http.StatusOK || st.State != contracts.CrawlRunning {
		t.Fatalf("resume = %d %s, want 200 running", code, st.State)
	}
	st = waitFinished(t, api, id, 2*time.Minute)
	if st.State != contracts.CrawlFinished {
		t.Fatalf("crawl after resume = %s, want finished", st.State)
	}
	if got, want := st.Counts[contracts.Indexed], int64(len(exp.Indexed)); got != want {
		t.Errorf("indexed records = %d, want %d (the oracle's)", got, want)
	}
	recs, err := g.Backends.Tx.List(t.Context(), id, contracts.Failed, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.HasPrefix(r.Error, "stalled") {
			t.Errorf("record %s failed %q while its crawl was paused", r.URL, r.Error)
		}
	}
}

// TestDeletePausedCrawlCancels cancels a paused crawl: it becomes cancelled
// (not paused), resume is refused, and no record is left pending.
func TestDeletePausedCrawlCancels(t *testing.T) {
	site, _ := lifecycleSite(t, 4)
	g, api := startGrid(t, testConfig(t, t.TempDir(), site.Resolve()))
	id := createCrawl(t, api, contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: 4, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 300, MaxDelayMS: 300, DelayFactor: 1}})
	var st contracts.CrawlStatus
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls/"+id+"/pause", nil, &st); code != http.StatusOK {
		t.Fatalf("pause = %d", code)
	}
	if code := apiDo(t, http.MethodDelete, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK || st.State != contracts.CrawlCancelled {
		t.Fatalf("DELETE paused crawl = %d %s, want 200 cancelled", code, st.State)
	}
	var e contracts.ErrorResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls/"+id+"/resume", nil, &e); code != http.StatusConflict {
		t.Errorf("resume of a cancelled crawl = %d %+v, want 409", code, e)
	}
	c, err := g.Backends.Profiles.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != contracts.CrawlCancelled || c.FinishedAt == nil {
		t.Errorf("stored crawl = %s finished at %v, want cancelled with a time", c.State, c.FinishedAt)
	}
	// Work in flight settles as failed; nothing stays pending.
	for deadline := time.Now().Add(30 * time.Second); pendingRecords(t, g, id) != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cancelled crawl still has %d pending records", pendingRecords(t, g, id))
		}
	}
}

// TestCrawlFinishesWithoutBeingRead runs a crawl that nobody reads: the work
// decides that it finished (the stored state changes with no GET), and a
// PATCH of the finished crawl is refused.
func TestCrawlFinishesWithoutBeingRead(t *testing.T) {
	const depth = 2
	site, exp := lifecycleSite(t, depth)
	g, api := startGrid(t, testConfig(t, t.TempDir(), site.Resolve()))
	id := createCrawl(t, api, contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1, Robots: contracts.RobotsObey}})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		c, err := g.Backends.Profiles.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State == contracts.CrawlFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored crawl = %s with %d pending records after a minute, want finished without any GET", c.State, pendingRecords(t, g, id))
		}
	}
	if n := pendingRecords(t, g, id); n != 0 {
		t.Errorf("finished crawl has %d pending records", n)
	}
	counts, err := g.Backends.Tx.Counts(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := counts[contracts.Indexed], int64(len(exp.Indexed)); got != want {
		t.Errorf("indexed records = %d, want %d (the oracle's)", got, want)
	}
	var e contracts.ErrorResponse
	patch := contracts.ProfilePatch{Politeness: &contracts.PolitenessPatch{MinDelayMS: new(10), MaxDelayMS: new(20), DelayFactor: new(1.0)}}
	if code := apiDo(t, http.MethodPatch, api+"/api/v1/crawls/"+id, patch, &e); code != http.StatusConflict {
		t.Errorf("PATCH of a finished crawl = %d %+v, want 409", code, e)
	}
}

// TestEmptyPatchRefused sends PATCH {}: 400 naming that nothing changes, and
// the profile version stays.
func TestEmptyPatchRefused(t *testing.T) {
	site, _ := lifecycleSite(t, 4)
	_, api := startGrid(t, testConfig(t, t.TempDir(), site.Resolve()))
	id := createCrawl(t, api, contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: 4, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 300, MaxDelayMS: 300, DelayFactor: 1}})
	var e contracts.ErrorResponse
	if code := apiDo(t, http.MethodPatch, api+"/api/v1/crawls/"+id, map[string]any{}, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "nothing to change") {
		t.Errorf("PATCH {} = %d %+v, want 400 naming nothing to change", code, e)
	}
	var st contracts.CrawlStatus
	apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st)
	if st.Profile.Version != 0 {
		t.Errorf("profile version after PATCH {} = %d, want 0", st.Profile.Version)
	}
}
