package frontier

import (
	"context"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

func TestEnqueueLowersDepthOfURLsFoundNearer(t *testing.T) {
	f, q := newFrontier(t)
	ctx := context.Background()
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}}.WithDefaults()
	now := time.Now()
	mk := func(path string, s contracts.Status, errText string) txindex.Record {
		u := "http://a.test" + path
		return txindex.Record{Key: txindex.Key("c", u), CrawlID: "c", URL: u, Host: "a.test", Group: "a.test",
			Depth: 4, Referrer: "deep-page", Status: s, Error: errText, StatusTime: now, CreatedAt: now,
			HTTPStatus: 200, Asset: contracts.AssetRef{Key: "seg", Offset: 1, Length: 2}}
	}
	existing := map[string]txindex.Record{}
	for _, r := range []txindex.Record{
		mk("/loading", contracts.ToBeLoaded, ""),
		mk("/parsing", contracts.ToBeParsed, ""),
		mk("/indexed", contracts.Indexed, ""),
		mk("/noindex", contracts.Failed, contracts.ReasonExcluded),
		mk("/gone", contracts.Failed, "http 404"),
		mk("/near", contracts.Indexed, ""),
	} {
		existing[r.URL] = r
		if _, err := f.Tx.Create(ctx, []txindex.Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	cands := []Candidate{
		{URL: "http://a.test/loading", Depth: 2, Referrer: "near-page"},
		{URL: "http://a.test/parsing", Depth: 2, Referrer: "near-page"},
		{URL: "http://a.test/indexed", Depth: 2, Referrer: "near-page"},
		{URL: "http://a.test/noindex", Depth: 2, Referrer: "near-page"},
		{URL: "http://a.test/gone", Depth: 2, Referrer: "near-page"},
		{URL: "http://a.test/near", Depth: 4, Referrer: "near-page"}, // not nearer
		// A new URL found twice in one batch is recorded at the nearer depth.
		{URL: "http://a.test/new", Depth: 3, Referrer: "near-page"},
		{URL: "http://a.test/new", Depth: 2, Hops: 1, Referrer: "near-page"},
	}
	n, err := f.Enqueue(ctx, "c", p, cands)
	if err != nil || n != 1 {
		t.Fatalf("Enqueue = %d, %v; want 1 created", n, err)
	}
	want := map[string]struct {
		depth  int
		status contracts.Status
	}{
		"/loading": {2, contracts.ToBeLoaded},
		"/parsing": {2, contracts.ToBeParsed},
		"/indexed": {2, contracts.ToBeParsed}, // parsed again at depth 2
		"/noindex": {2, contracts.ToBeParsed}, // its links were followed: again
		"/gone":    {2, contracts.Failed},
		"/near":    {4, contracts.Indexed},
		"/new":     {2, contracts.ToBeLoaded},
	}
	for path, w := range want {
		r, err := f.Tx.Get(ctx, txindex.Key("c", "http://a.test"+path))
		if err != nil {
			t.Fatal(err)
		}
		if r.Depth != w.depth || r.Status != w.status {
			t.Errorf("%s after Enqueue = depth %d %s, want depth %d %s", path, r.Depth, r.Status, w.depth, w.status)
		}
	}
	// One crawler contract carries the three pages to parse at depth 2; one
	// loader contract the new URL.
	if got, err := q.Len(ctx, contracts.QueueCrawler); err != nil || got != 1 {
		t.Fatalf("crawler_pending holds %d messages (%v), want 1", got, err)
	}
	if got, err := q.Len(ctx, contracts.QueueLoader); err != nil || got != 1 {
		t.Errorf("loader_pending holds %d messages (%v), want 1", got, err)
	}
	// The same page again (a redelivery) changes and publishes nothing more.
	if n, err := f.Enqueue(ctx, "c", p, cands); err != nil || n != 0 {
		t.Fatalf("second Enqueue = %d, %v; want 0 created", n, err)
	}
	if got, err := q.Len(ctx, contracts.QueueCrawler); err != nil || got != 1 {
		t.Errorf("crawler_pending holds %d messages (%v) after a redelivery, want 1", got, err)
	}
}
