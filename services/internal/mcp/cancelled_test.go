package mcp

import (
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// TestCancelCountsCancelled cancels a crawl with pending URLs and checks
// that its status counts them as cancelled, apart from the URLs that
// failed before, while all of them stay failed (a terminal status).
func TestCancelCountsCancelled(t *testing.T) {
	for _, b := range storeBackends() {
		t.Run(b.name, func(t *testing.T) { testCancelCountsCancelled(t, newLifecycleMCPOn(t, lifecycleConfig(), b.new(t))) })
	}
}

func testCancelCountsCancelled(t *testing.T, l *lifecycleMCP) {
	starts := []string{"http://a.test/1", "http://a.test/2", "http://a.test/3", "http://a.test/4"}
	id := l.create(t, contracts.Profile{StartURLs: starts, Sitemaps: new(bool)})
	recs := l.records(t, id)
	if len(recs) != len(starts) {
		t.Fatalf("records = %d, want %d", len(recs), len(starts))
	}
	// One URL fails on its own before the cancel.
	var failed string
	for k := range recs {
		failed = k
		break
	}
	if _, err := l.set.Tx.Transition(t.Context(), []txindex.Transition{{Key: failed, From: contracts.ToBeLoaded, To: contracts.Failed, Error: "http 500", HTTPStatus: 500}}); err != nil {
		t.Fatal(err)
	}
	var before contracts.CrawlStatus
	l.do(t, "GET", "/"+id, nil, &before)
	if before.Cancelled != 0 {
		t.Errorf("running crawl: cancelled = %d, want 0", before.Cancelled)
	}
	var st contracts.CrawlStatus
	if code := l.do(t, "DELETE", "/"+id, nil, &st); code != 200 {
		t.Fatalf("DELETE = %d, want 200", code)
	}
	if st.State != contracts.CrawlCancelled || st.Counts[contracts.Failed] != 4 || st.Cancelled != 3 || st.Pending != 0 {
		t.Errorf("status after cancel: state %s, failed %d, cancelled %d, pending %d; want cancelled, 4, 3, 0",
			st.State, st.Counts[contracts.Failed], st.Cancelled, st.Pending)
	}
}
