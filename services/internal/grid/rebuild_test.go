package grid

import (
	"context"
	"net/http"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// TestRestartRebuildsMemoryQueues kills the grid process (SIGKILL) while
// pages wait in its in-memory crawler and index queues
// (GRIDCRAWL_EMBEDDED_MEMORY_QUEUES, the default), restarts it on the same
// data directory and checks that the crawl finishes with every page of the
// link graph indexed, exactly one document each, and no page fetched again
// but those whose fetch was in flight at the kill.
//
// The recovery lease is an hour: the recovery sweep cannot republish the
// lost contracts within the test, only the start-up rebuild
// (coordinator.RebuildQueues) can.
func TestRestartRebuildsMemoryQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the grid binary")
	}
	// Many hosts and a short delay: the loader fetches faster than the
	// crawler and the indexer keep up, so their queues hold pages.
	web := websim.NewWeb(websim.WebConfig{Hosts: 24, PagesPerHost: 30, LinksPerPage: 6, CrossHostLinks: 2, Seed: 11})
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	const depth = 4
	starts := web.StartURLs()[:8]
	want := expectedWeb(web, starts, depth)

	bin := buildGrid(t)
	data := t.TempDir()
	front := newCountingFront(t, web)
	env := []string{
		"GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT=",
		"GRIDCRAWL_EMBEDDED_MEMORY_QUEUES=true",
		"GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE=" + front.resolve,
		"GRIDCRAWL_RECOVERY_LEASE=1h", "GRIDCRAWL_RECOVERY_INTERVAL=500ms", "GRIDCRAWL_WARC_FLUSH_INTERVAL=50ms",
		"GRIDCRAWL_CRAWLER_WORKERS=1",
	}
	p := startGridProc(t, bin, data, env)
	profile := contracts.Profile{StartURLs: starts, MaxDepth: depth, Scope: contracts.ScopeDomain, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 5, DelayFactor: 1}}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, p.api+"/api/v1/crawls", profile, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	// Kill once some pages are indexed while others wait to be parsed or
	// indexed, some of them to be indexed (their contracts are rebuilt as
	// reindex contracts: the crawler parses the stored page again).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st contracts.CrawlStatus
		apiDo(t, http.MethodGet, p.api+"/api/v1/crawls/"+created.CrawlID, nil, &st)
		if st.State != contracts.CrawlRunning {
			t.Fatalf("crawl ended (%s) before the kill; make the web larger", st.State)
		}
		inFlight := st.Counts[contracts.ToBeParsed] + st.Counts[contracts.ToBeIndexed]
		if st.Counts[contracts.Indexed] >= int64(len(want)/10) && inFlight >= 5 && st.Counts[contracts.ToBeIndexed] > 0 {
			t.Logf("killing the grid at %v", st.Counts)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw pages waiting to be parsed or indexed: %v", st.Counts)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	fetchedAtKill := front.counts()
	atKill := snapshotCrawl(t, data, front.resolve, created.CrawlID)
	waiting, inFlightFetches := 0, 0
	for _, u := range want {
		switch st := atKill.status[u]; {
		case st == contracts.ToBeParsed || st == contracts.ToBeIndexed:
			waiting++
		case (st == "" || st == contracts.ToBeLoaded) && fetchedAtKill[u] > 0:
			inFlightFetches++ // fetched, not recorded: may be fetched again
		}
	}
	if waiting == 0 {
		t.Fatalf("no record to-be-parsed or to-be-indexed at the kill: nothing for the rebuild to do")
	}
	t.Logf("at the kill: %d pages to parse or index, %d fetches in flight", waiting, inFlightFetches)

	p = startGridProc(t, bin, data, env)
	st := waitFinished(t, p.api, created.CrawlID, 3*time.Minute)
	if st.State != contracts.CrawlFinished {
		t.Fatalf("crawl after restart = %s", st.State)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("grid exit after SIGTERM: %v", err)
	}

	cfg := testConfig(t, data, front.resolve)
	g, err := Open(cfg, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Backends.Close()
	ctx := context.Background()
	var got []string
	after := ""
	for {
		recs, err := g.Backends.Tx.List(ctx, created.CrawlID, "", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Status != contracts.Indexed {
				t.Errorf("record %s = %s (%s), want indexed", r.URL, r.Status, r.Error)
			}
			if r.Attempts != 0 && (atKill.status[r.URL] == contracts.ToBeParsed || atKill.status[r.URL] == contracts.ToBeIndexed) {
				t.Errorf("record %s: %d recovery attempts, want 0 (a lost queue is not the record's failure)", r.URL, r.Attempts)
			}
			got = append(got, r.URL)
		}
		after = recs[len(recs)-1].Key
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("crawled URLs differ from the link graph (-want +got):\n%s", diff)
	}
	if n, err := g.Backends.Search.Count(ctx, created.CrawlID); err != nil || n != int64(len(want)) {
		t.Errorf("documents = %d (%v), want %d", n, err, len(want))
	}
	fetched := front.counts()
	dup := 0
	for _, u := range want {
		dup += max(0, fetched[u]-1)
	}
	if dup > inFlightFetches {
		t.Errorf("%d pages fetched again, want at most the %d whose fetch was in flight at the kill", dup, inFlightFetches)
	}
	checkDuplicates(t, want, fetchedAtKill, fetched, atKill, func(key string) int64 {
		n, err := g.Backends.Search.Writes(ctx, key)
		if err != nil {
			t.Errorf("document writes of %s: %v", key, err)
		}
		return n
	})
}
