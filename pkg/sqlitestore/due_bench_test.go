package sqlitestore

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/txindex/txindextest"
)

// dueRecords are the crawl sizes BenchmarkDue measures. make bench-due asks
// for 10,000, 100,000 and 1,000,000:
//
//	go test -run '^$' -bench BenchmarkDue -benchtime 2s ./pkg/sqlitestore/ -due.records 10000,100000,1000000
var dueRecords = flag.String("due.records", "10000,100000", "BenchmarkDue: crawl sizes in records, comma-separated")

// dueCache keeps BenchmarkDue's databases between runs, in os.TempDir (a
// database of 1,000,000 records takes minutes to build and about 1.2 GB);
// false builds them in the benchmark's temporary directory.
var dueCache = flag.Bool("due.cache", true, "BenchmarkDue: keep the databases between runs in the system's temporary directory")

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

// dueFixtureVersion names the fixture in the cached databases' names: a
// change of txindextest.DueRecord must change it.
const dueFixtureVersion = 2

// openDueFixture opens the due-work database of n records: the cached one
// when it is intact (every record settled and n/dueFraction due, which an
// interrupted tick benchmark would have broken), else a newly built one.
func openDueFixture(b *testing.B, n int64) *TxIndex {
	b.Helper()
	dir := b.TempDir()
	if *dueCache {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("gridcrawl-bench-due-v%d-f%d-%d.db", txSchemaVersion, dueFixtureVersion, n))
	if x, err := OpenTxIndex(path); err == nil {
		due, _, errStats := x.DueStats(b.Context(), dueCrawl, dueNow)
		counts, errCounts := x.Counts(b.Context(), dueCrawl)
		if errStats == nil && errCounts == nil && due == n/dueFraction && counts[contracts.Indexed] == n && len(counts) == 1 {
			b.Cleanup(func() { _ = x.Close() })
			return x
		}
		_ = x.Close()
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			b.Fatal(err)
		}
	}
	x, err := OpenTxIndex(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.Close() })
	start := time.Now()
	buildDueFixture(b, x, n)
	b.Logf("built %d records in %s: %s", n, time.Since(start).Round(time.Millisecond), path)
	return x
}

// buildDueFixture creates the n records of the fixture, in batches.
func buildDueFixture(b *testing.B, x *TxIndex, n int64) {
	b.Helper()
	recs := make([]txindex.Record, 0, dueBatch)
	for lo := int64(0); lo < n; lo += dueBatch {
		recs = recs[:0]
		for i := lo; i < min(lo+dueBatch, n); i++ {
			recs = append(recs, dueRecord(i, n))
		}
		created, err := x.Create(b.Context(), recs)
		if err != nil {
			b.Fatal(err)
		}
		if i := slices.Index(created, false); i >= 0 {
			b.Fatalf("create %s: not created", recs[i].Key)
		}
	}
}

// BenchmarkDue measures finding due work in continuous crawls of
// -due.records records, 1% of them due, through the due index:
//
//   - due: Due(crawl, now, 1000), what the MCP's due ticker asks each tick;
//   - find: Due's query reading the index only (the rowids of the batch):
//     the cost of finding, without reading the records found;
//   - stats: DueStats(crawl, now), the crawl status's due count and next due
//     time (a count over the due records);
//   - tick: Due and the Transition of its batch back to to-be-loaded, the
//     whole transaction index work of a tick (each batch is settled again,
//     untimed, so every iteration finds the same amount of work);
//   - scan: what finding the same batch costs without the index: every
//     record of the crawl read through List, the due ones picked in Go.
//
// Each reports ns/due-url, the time per due record found (per record
// counted, for stats); scan reports scan/due, its time over due's. Per due
// URL the indexed costs stay flat as the crawl grows; the scan's grows with
// it.
func BenchmarkDue(b *testing.B) {
	for _, n := range dueSizes(b) {
		x := openDueFixture(b, n)
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
		b.Run(fmt.Sprintf("records=%d/find", n), func(b *testing.B) {
			// Due's query reading only the index: the finding, without
			// reading and decoding the records found.
			find, err := x.st.r.PrepareContext(b.Context(), `SELECT id FROM records INDEXED BY records_due
				WHERE crawl_id = ?1 AND next_due IS NOT NULL AND next_due <= ?2 ORDER BY next_due, id LIMIT ?3`)
			if err != nil {
				b.Fatal(err)
			}
			defer find.Close()
			var found int
			cpu := cpuTime()
			for b.Loop() {
				rows, err := find.QueryContext(b.Context(), dueCrawl, dueNow.UnixMilli(), dueBatch)
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
					found++
				}
				if err := errors.Join(rows.Err(), rows.Close()); err != nil {
					b.Fatal(err)
				}
			}
			reportDue(b, found, cpuTime()-cpu)
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
	}
}

// scanDue reads the whole crawl to find the batch Due returns.
func scanDue(b *testing.B, x *TxIndex, n int64) []txindex.Record {
	return txindextest.DueScan(b, x, n, 1000)
}

// reportDue reports the time and CPU time per due record (SQLite runs in this process).
func reportDue(b *testing.B, records int, cpu time.Duration) {
	txindextest.ReportDue(b, records, cpu, "cpu-ns/due-url")
}
