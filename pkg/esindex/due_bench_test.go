package esindex

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/txindex/txindextest"
)

// dueRecords are the crawl sizes BenchmarkDue measures. Loading records
// into Elasticsearch takes a while (1,000,000 take minutes on two cores),
// so the default is small; make bench-due asks for 10,000, 100,000 and
// 1,000,000:
//
//	go test -run '^$' -bench BenchmarkDue -benchtime 2s ./pkg/esindex/ -due.records 10000,100000,1000000
var dueRecords = flag.String("due.records", "10000", "BenchmarkDue: crawl sizes in records, comma-separated")

// The due-work fixture is txindextest's (DueRecord and its constants).
var dueNow = txindextest.DueNow

const (
	dueCrawl    = txindextest.DueCrawl
	dueSpread   = txindextest.DueSpread
	dueFraction = txindextest.DueFraction
	dueBatch    = txindextest.DueBatch
	duePermStep = txindextest.DuePermStep
	dueRounds   = txindextest.DueRounds
)

func dueRecord(i, n int64) txindex.Record { return txindextest.DueRecord(i, n) }

func dueSizes(b *testing.B) []int64 { return txindextest.DueSizes(b, *dueRecords) }

// Loading: dueLoadBatch records go in one Create (one bulk request of
// about 5 MB, under maxBulkBytes), dueLoaders Creates at once; the scan
// reads pages of dueScanPage, Elasticsearch's largest.
const (
	dueLoadBatch = 5000
	dueLoaders   = 2
	dueScanPage  = maxPage
)

// loadDue creates the n records of the fixture with dueLoaders concurrent
// Creates of dueLoadBatch records each.
func loadDue(b *testing.B, x *TxIndex, n int64) {
	b.Helper()
	start := time.Now()
	batches := make(chan int64)
	errs := make(chan error, dueLoaders)
	var wg sync.WaitGroup
	for range dueLoaders {
		wg.Go(func() {
			recs := make([]txindex.Record, 0, dueLoadBatch)
			for lo := range batches {
				recs = recs[:0]
				for i := lo; i < min(lo+dueLoadBatch, n); i++ {
					recs = append(recs, dueRecord(i, n))
				}
				created, err := x.Create(b.Context(), recs)
				if err == nil && slices.Contains(created, false) {
					err = fmt.Errorf("record %d not created", lo+int64(slices.Index(created, false)))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var failed error
feed:
	for lo := int64(0); lo < n; lo += dueLoadBatch {
		select {
		case batches <- lo:
		case failed = <-errs:
			break feed
		}
	}
	close(batches)
	wg.Wait()
	if failed == nil {
		select {
		case failed = <-errs:
		default:
		}
	}
	if failed != nil {
		b.Fatalf("load %d records: %v", n, failed)
	}
	due, _, err := x.DueStats(b.Context(), dueCrawl, dueNow)
	if err != nil || due != n/dueFraction {
		b.Fatalf("after loading %d records: DueStats = %d, %v; want %d", n, due, err, n/dueFraction)
	}
	b.Logf("loaded %d records in %s (%.0f records/s)", n, time.Since(start).Round(time.Millisecond),
		float64(n)/time.Since(start).Seconds())
}

// BenchmarkDue measures finding due work in continuous crawls of
// -due.records records, 1% of them due, through the next_due field, each
// size in an index of its own (deleted afterwards), with the default
// refresh policy:
//
//   - due: Due(crawl, now, 1000), what the MCP's due ticker asks each tick;
//   - due-query: the same without the refresh request that RefreshOnRead
//     sends before every read;
//   - find: Due's query without the records' sources, reporting also the
//     time Elasticsearch spent (took): the cost of finding, without
//     fetching and decoding the records found;
//   - stats: DueStats(crawl, now), the crawl status's due count and next due
//     time;
//   - tick: Due and the Transition of its batch back to to-be-loaded, the
//     whole transaction index work of a tick (each batch is settled again,
//     untimed, and forgotten by the version cache, so every iteration finds
//     the same work and reads its records as a ticker that did not write
//     them does; the refresh that the writes cause falls on the next Due,
//     timed);
//   - scan: what finding the same batch costs without the field: every
//     record of the crawl read through List, the due ones picked in Go.
//
// Each reports ns/due-url, the time per due record found (per record
// counted, for stats); scan reports scan/due, its time over due's.
func BenchmarkDue(b *testing.B) {
	for _, n := range dueSizes(b) {
		x := open(b, RefreshOnRead).TxIndex()
		loadDue(b, x, n)
		var dueNS float64
		b.Run(fmt.Sprintf("records=%d/due", n), func(b *testing.B) {
			var found int
			cpu := cpuTime()
			for b.Loop() {
				recs, err := x.Due(b.Context(), dueCrawl, dueNow, dueBatch)
				if err != nil {
					b.Fatal(err)
				}
				found += len(recs)
			}
			want := min(int(n/dueFraction), dueBatch)
			if found != b.N*want {
				b.Fatalf("Due found %d records in %d calls, want %d per call", found, b.N, want)
			}
			dueNS = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			reportDue(b, found, cpuTime()-cpu)
		})
		// The same query through a client that leaves refreshes to
		// writers: Due without its refresh request, which RefreshOnRead
		// sends before every read (nothing to refresh here, but a round
		// trip through the shard's refresh all the same).
		noRefresh := openPrefix(b, Options{URL: esURL(b), Prefix: strings.TrimSuffix(x.c.txIndex, "-transactions"), Refresh: RefreshOnWrite}, false).TxIndex()
		b.Run(fmt.Sprintf("records=%d/due-query", n), func(b *testing.B) {
			var found int
			cpu := cpuTime()
			for b.Loop() {
				recs, err := noRefresh.Due(b.Context(), dueCrawl, dueNow, dueBatch)
				if err != nil {
					b.Fatal(err)
				}
				found += len(recs)
			}
			reportDue(b, found, cpuTime()-cpu)
		})
		b.Run(fmt.Sprintf("records=%d/find", n), func(b *testing.B) {
			// Due's query without the records' sources: the finding, and
			// the time Elasticsearch reports for it (took), without
			// fetching and decoding the records found.
			body, err := json.Marshal(map[string]any{
				"size": dueBatch, "_source": false, "track_total_hits": false,
				"query": map[string]any{"bool": map[string]any{"filter": dueFilters(dueCrawl, dueNow)}},
				"sort":  []any{map[string]any{"next_due": "asc"}, map[string]any{"key": "asc"}},
			})
			if err != nil {
				b.Fatal(err)
			}
			var found int
			var took time.Duration
			cpu := cpuTime()
			for b.Loop() {
				var res struct {
					Took int64 `json:"took"`
					Hits struct {
						Hits []struct {
							ID string `json:"_id"`
						} `json:"hits"`
					} `json:"hits"`
				}
				req := esapi.SearchRequest{Index: []string{x.c.txIndex}, Body: bytes.NewReader(body)}
				if err := x.c.do(b.Context(), req, &res); err != nil {
					b.Fatal(err)
				}
				found += len(res.Hits.Hits)
				took += time.Duration(res.Took) * time.Millisecond
			}
			reportDue(b, found, cpuTime()-cpu)
			if found > 0 {
				b.ReportMetric(float64(took.Nanoseconds())/float64(found), "es-took-ns/due-url")
			}
		})
		b.Run(fmt.Sprintf("records=%d/stats", n), func(b *testing.B) {
			var counted int64
			cpu := cpuTime()
			for b.Loop() {
				due, next, err := x.DueStats(b.Context(), dueCrawl, dueNow)
				if err != nil || next == nil {
					b.Fatalf("DueStats = %d, %v, %v", due, next, err)
				}
				counted += due
			}
			if counted != int64(b.N)*(n/dueFraction) {
				b.Fatalf("DueStats counted %d in %d calls, want %d per call", counted, b.N, n/dueFraction)
			}
			reportDue(b, int(counted), cpuTime()-cpu)
		})
		b.Run(fmt.Sprintf("records=%d/tick", n), func(b *testing.B) {
			forget := func(recs []txindex.Record) {
				for _, r := range recs {
					x.cache.drop(r.Key)
				}
			}
			b.StopTimer()
			first, err := x.Due(b.Context(), dueCrawl, dueNow, dueBatch)
			if err != nil {
				b.Fatal(err)
			}
			forget(first)
			b.StartTimer()
			var moved int
			var cpu time.Duration
			for range b.N {
				cpu -= cpuTime()
				recs, err := x.Due(b.Context(), dueCrawl, dueNow, dueBatch)
				if err != nil {
					b.Fatal(err)
				}
				ts := make([]txindex.Transition, len(recs))
				for i, r := range recs {
					ts[i] = txindex.Transition{Key: r.Key, From: r.Status, To: contracts.ToBeLoaded, ResetAttempts: true}
				}
				ok, err := x.Transition(b.Context(), ts)
				if err != nil {
					b.Fatal(err)
				}
				if i := slices.Index(ok, false); i >= 0 {
					b.Fatalf("tick: transition of due record %s not applied", ts[i].Key)
				}
				moved += len(recs)
				cpu += cpuTime()
				b.StopTimer()
				for i, r := range recs {
					ts[i] = txindex.Transition{Key: r.Key, From: contracts.ToBeLoaded, To: r.Status, Recrawl: r.Recrawl}
				}
				if _, err := x.Transition(b.Context(), ts); err != nil {
					b.Fatal(err)
				}
				forget(recs)
				b.StartTimer()
			}
			reportDue(b, moved, cpu)
		})
		b.Run(fmt.Sprintf("records=%d/scan", n), func(b *testing.B) {
			var found int
			cpu := cpuTime()
			for b.Loop() {
				found += len(scanDue(b, x, n))
			}
			reportDue(b, found, cpuTime()-cpu)
			if dueNS > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/dueNS, "scan/due")
			}
		})
		// Free the index (and its disk) before the next size loads.
		if err := x.c.DeleteIndices(b.Context()); err != nil {
			b.Fatalf("DeleteIndices: %v", err)
		}
	}
}

// scanDue reads the whole crawl to find the batch Due returns.
func scanDue(b *testing.B, x *TxIndex, n int64) []txindex.Record {
	return txindextest.DueScan(b, x, n, dueScanPage)
}

// reportDue reports the time and CPU time per due record (the client's share: Elasticsearch's own is not counted).
func reportDue(b *testing.B, records int, cpu time.Duration) {
	txindextest.ReportDue(b, records, cpu, "client-cpu-ns/due-url")
}

// cpuTime returns the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
