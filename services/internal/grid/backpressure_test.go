package grid

import (
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// TestEmbeddedBoundHoldsBackTheLoader crawls a web whose pages the loader
// fetches faster than one crawler worker parses them and one indexer
// worker indexes them, through a handoff that holds a fifth of the crawl:
// the loader must wait for the crawler (Config.HandoffBytes,
// loader.Config.RecordBytes) instead of fetching ahead, so that the handoff
// never has to drop a response for lack of room, and the crawl must still
// finish with every page of the link graph indexed, once.
func TestEmbeddedBoundHoldsBackTheLoader(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls 720 pages")
	}
	web := websim.NewWeb(websim.WebConfig{Hosts: 24, PagesPerHost: 30, LinksPerPage: 6, CrossHostLinks: 2, PageBytes: 20 << 10, Seed: 5})
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	const depth = 6
	starts := web.StartURLs()
	want := expectedWeb(web, starts, depth)

	// 720 pages of 20 KiB (about 15 MB) through a 3 MiB handoff.
	t.Setenv("GRIDCRAWL_HANDOFF_BYTES", "3145728")
	t.Setenv("GRIDCRAWL_LOADER_RECORD_BYTES", "1048576")
	t.Setenv("GRIDCRAWL_CRAWLER_WORKERS", "1")
	t.Setenv("GRIDCRAWL_CRAWLER_PREFETCH", "1")
	t.Setenv("GRIDCRAWL_INDEXER_PREFETCH", "1")
	t.Setenv("GRIDCRAWL_INDEXER_BATCH", "1")
	cfg := testConfig(t, t.TempDir(), web.Resolve())
	g, api := startGrid(t, cfg)
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: starts, MaxDepth: depth, Scope: contracts.ScopeDomain, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, 5*time.Minute)

	var indexed []string
	for _, r := range crawlRecords(t, g.Backends.Tx, id, contracts.Indexed) {
		indexed = append(indexed, r.URL)
	}
	sort.Strings(indexed)
	if diff := cmp.Diff(want, indexed); diff != "" {
		t.Errorf("indexed pages (-link graph +indexed):\n%s", diff)
	}
	var st contracts.CrawlStatus
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id, nil, &st); code != http.StatusOK {
		t.Fatalf("GET crawl = %d", code)
	}
	if st.Documents != int64(len(want)) {
		t.Errorf("%d documents searchable, want %d (one per page)", st.Documents, len(want))
	}
	taken, dropped := g.Handoff.Counts()
	if dropped != 0 {
		t.Errorf("the handoff dropped %d responses for lack of room (%d taken), want none: the loader fetched ahead of the crawler", dropped, taken)
	}
	if taken != int64(len(want)) {
		t.Errorf("%d responses taken from the handoff, want %d (every page)", taken, len(want))
	}
}
