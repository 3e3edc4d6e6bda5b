package crawler

import (
	"context"
	"log/slog"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/enqueue"
)

func TestCanWait(t *testing.T) {
	doc := &contracts.Document{ID: "d"}
	link := []enqueue.Candidate{{URL: "http://a.test/x"}}
	for _, c := range []struct {
		name  string
		k     contracts.CrawlerContract
		pages []*parsed
		want  bool
	}{
		{"pages to be indexed", contracts.CrawlerContract{}, []*parsed{{final: contracts.ToBeIndexed, doc: doc, links: link}}, true},
		{"a failed page without links", contracts.CrawlerContract{}, []*parsed{{final: contracts.ToBeIndexed, doc: doc, links: link}, {final: contracts.Failed}}, true},
		{"an excluded page with links", contracts.CrawlerContract{}, []*parsed{{final: contracts.Failed, links: link}}, false},
		{"a page with links and no document", contracts.CrawlerContract{}, []*parsed{{final: contracts.ToBeIndexed, links: link}}, false},
		{"a relink", contracts.CrawlerContract{Relink: true}, []*parsed{{final: contracts.ToBeIndexed, doc: doc, links: link}}, false},
	} {
		if got := canWait(c.k, c.pages); got != c.want {
			t.Errorf("%s: canWait = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSettlerRunsWhatWaitsAtStop queues a batch and stops the settler: the
// batch must be settled before stop returns, and a settler that does not
// run must refuse work (its caller settles at once).
func TestSettlerRunsWhatWaitsAtStop(t *testing.T) {
	c := &Crawler{log: slog.New(slog.DiscardHandler), enq: &enqueue.Enqueuer{}}
	c.settle.c = c
	if c.settle.later(settleWork{}) {
		t.Fatal("a settler that does not run took work")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // shutting down: no wait for the view
	c.settle.start(ctx)
	for range 3 {
		if !c.settle.later(settleWork{k: contracts.CrawlerContract{CrawlID: "c"}, pages: []*parsed{{}}}) {
			t.Fatal("the running settler refused work")
		}
	}
	ch := c.settle.work
	c.settle.stop()
	if _, open := <-ch; open || len(ch) != 0 {
		t.Errorf("stop returned with %d batches waiting", len(ch))
	}
	if c.settle.later(settleWork{}) {
		t.Error("a stopped settler took work")
	}
}
