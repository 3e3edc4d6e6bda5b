package enqueue

import (
	"context"
	"fmt"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

func newFrontier(t *testing.T) (*Enqueuer, queue.Queue) {
	t.Helper()
	s := embedtest.Open(t)
	return &Enqueuer{Tx: s.Tx, Queue: s.Queue, Group: routing.HostGrouper}, s.Queue
}

func TestEnqueueDedupesAndRepublishesOnlyForTheSameReferrer(t *testing.T) {
	f, q := newFrontier(t)
	ctx := context.Background()
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}}.WithDefaults()
	cands := []Candidate{{URL: "http://a.test/1", Depth: 1, Referrer: "page-x"}, {URL: "http://a.test/1", Depth: 1, Referrer: "page-x"}, {URL: "http://a.test/2", Depth: 1, Referrer: "page-x"}}
	n, err := f.Enqueue(ctx, "c", p, cands)
	if err != nil || n != 2 {
		t.Fatalf("Enqueue = %d, %v; want 2 created", n, err)
	}
	// The same page again (a redelivery): nothing new, but its URLs are
	// published again since they are still to-be-loaded.
	if n, err := f.Enqueue(ctx, "c", p, cands); err != nil || n != 0 {
		t.Fatalf("second Enqueue = %d, %v; want 0 created", n, err)
	}
	// Another page finding the same URLs publishes nothing.
	other := []Candidate{{URL: "http://a.test/1", Depth: 1, Referrer: "page-y"}}
	if n, err := f.Enqueue(ctx, "c", p, other); err != nil || n != 0 {
		t.Fatalf("third Enqueue = %d, %v; want 0 created", n, err)
	}
	if got, err := q.Len(ctx, contracts.QueueLoader); err != nil || got != 2 {
		t.Errorf("loader_pending holds %d messages (%v), want 2 (first and redelivered page)", got, err)
	}
}

func TestEnqueueLimits(t *testing.T) {
	f, _ := newFrontier(t)
	ctx := context.Background()
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}, MaxPages: 5, MaxPagesPerHost: 3, Scope: contracts.ScopeAny}.WithDefaults()
	var cands []Candidate
	for _, h := range []string{"a.test", "b.test"} {
		for i := range 4 {
			cands = append(cands, Candidate{URL: fmt.Sprintf("http://%s/%d", h, i), Depth: 1})
		}
	}
	n, err := f.Enqueue(ctx, "c", p, cands)
	if err != nil || n != 5 {
		t.Fatalf("Enqueue = %d, %v; want 5 (max_pages)", n, err)
	}
	for _, h := range []string{"a.test", "b.test"} {
		if c, _ := f.Tx.CountHost(ctx, "c", h); c > 3 {
			t.Errorf("host %s has %d records, want at most 3", h, c)
		}
	}
	if n, _ := f.Enqueue(ctx, "c", p, []Candidate{{URL: "http://c.test/", Depth: 1}}); n != 0 {
		t.Errorf("Enqueue past max_pages created %d", n)
	}
}
