package grid

import (
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
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
	profile := contracts.Profile{StartURLs: starts, MaxDepth: depth, Scope: contracts.ScopeDomain, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 5, DelayFactor: 1}}
	// Kill once some pages are indexed while others wait to be parsed or
	// indexed, some of them to be indexed (their contracts are rebuilt as
	// reindex contracts: the crawler parses the stored page again).
	run := killAndRestart(t, bin, data, env, front, profile, func(st contracts.CrawlStatus) bool {
		inFlight := st.Counts[contracts.ToBeParsed] + st.Counts[contracts.ToBeIndexed]
		return st.Counts[contracts.Indexed] >= int64(len(want)/10) && inFlight >= 5 && st.Counts[contracts.ToBeIndexed] > 0
	})
	waiting, inFlightFetches := 0, 0
	for _, u := range want {
		switch st := run.atKill.status[u]; {
		case st == contracts.ToBeParsed || st == contracts.ToBeIndexed:
			waiting++
		case (st == "" || st == contracts.ToBeLoaded) && run.fetchedAtKill[u] > 0:
			inFlightFetches++ // fetched, not recorded: may be fetched again
		}
	}
	if waiting == 0 {
		t.Fatalf("no record to-be-parsed or to-be-indexed at the kill: nothing for the rebuild to do")
	}
	t.Logf("at the kill: %d pages to parse or index, %d fetches in flight", waiting, inFlightFetches)

	run.check(t, want, func(r txindex.Record) {
		if st := run.atKill.status[r.URL]; r.Attempts != 0 && (st == contracts.ToBeParsed || st == contracts.ToBeIndexed) {
			t.Errorf("record %s: %d recovery attempts, want 0 (a lost queue is not the record's failure)", r.URL, r.Attempts)
		}
	})
	fetched := front.counts()
	dup := 0
	for _, u := range want {
		dup += max(0, fetched[u]-1)
	}
	if dup > inFlightFetches {
		t.Errorf("%d pages fetched again, want at most the %d whose fetch was in flight at the kill", dup, inFlightFetches)
	}
}
