package enqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// TestGatherPublishesConcurrentCallsTogether: with Gather, concurrent
// Enqueue calls of several crawls publish one loader contract per crawl
// (one shard here) instead of one per call, and each call returns with its
// records published.
func TestGatherPublishesConcurrentCallsTogether(t *testing.T) {
	f, q := newFrontier(t)
	f.Gather = 200 * time.Millisecond
	ctx := context.Background()
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}}.WithDefaults()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			crawl := []string{"c1", "c2"}[i%2]
			_, errs[i] = f.Enqueue(ctx, crawl, p, []Candidate{{URL: fmt.Sprintf("http://a.test/%d", i), Depth: 1, Referrer: "page"}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Enqueue %d: %v", i, err)
		}
	}
	n, err := q.Len(ctx, contracts.QueueLoader)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("loader_pending holds %d messages after 8 concurrent calls of 2 crawls, want 2", n)
	}
	// Every URL is in one of them.
	ch, err := q.Consume(ctx, contracts.QueueLoader, queueOpts(2))
	if err != nil {
		t.Fatal(err)
	}
	urls := 0
	for range 2 {
		d := <-ch
		var c contracts.LoaderContract
		if err := decodeJSON(d.Body(), &c); err != nil {
			t.Fatal(err)
		}
		urls += len(c.URLs)
		_ = d.Ack(ctx)
	}
	if urls != 8 {
		t.Errorf("the contracts carry %d URLs, want 8", urls)
	}
}

func queueOpts(prefetch int) queue.ConsumeOptions { return queue.ConsumeOptions{Prefetch: prefetch} }

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }
