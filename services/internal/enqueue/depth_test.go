package enqueue

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
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
	if got, err := q.Len(ctx, contracts.QueueLoader); err != nil || got != 1 {
		t.Errorf("loader_pending holds %d messages (%v), want 1 (the new URL)", got, err)
	}
	// The same page again (a redelivery) changes and publishes nothing more.
	if n, err := f.Enqueue(ctx, "c", p, cands); err != nil || n != 0 {
		t.Fatalf("second Enqueue = %d, %v; want 0 created", n, err)
	}
	// The page being parsed is parsed again in full; the settled pages are
	// relinked (their documents are indexed already).
	got := map[string]bool{} // path → relink
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ds, err := q.Consume(cctx, contracts.QueueCrawler, queue.ConsumeOptions{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	for len(got) < 3 {
		d, ok := <-ds
		if !ok {
			break
		}
		var k contracts.CrawlerContract
		if err := json.Unmarshal(d.Body(), &k); err != nil {
			t.Fatal(err)
		}
		for _, pg := range k.Pages {
			if pg.Depth != 2 {
				t.Errorf("crawler contract page %s at depth %d, want 2", pg.URL, pg.Depth)
			}
			got[strings.TrimPrefix(pg.URL, "http://a.test")] = k.Relink
		}
		_ = d.Ack(ctx)
	}
	if diff := cmp.Diff(map[string]bool{"/parsing": false, "/indexed": true, "/noindex": true}, got); diff != "" {
		t.Errorf("crawler contracts (path → relink) (-want +got):\n%s", diff)
	}
	if n, err := q.Len(ctx, contracts.QueueCrawler); err != nil || n != 0 {
		t.Errorf("crawler_pending holds %d more messages (%v), want none (a redelivery publishes nothing)", n, err)
	}
}
