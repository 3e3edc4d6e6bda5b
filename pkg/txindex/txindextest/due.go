package txindextest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The due-work fixture of the backends' BenchmarkDue (the cost per due URL
// of finding due work, make bench-due): one continuous crawl whose records
// are all settled (indexed) with a recrawl state, their due times spread
// evenly over DueSpread in an order unrelated to their keys and creation
// order, such that 1 in DueFraction is due at DueNow. DueNow is a fixed
// instant, so that a cached fixture stays valid.
var DueNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// The fixture's constants.
const (
	DueCrawl    = "recrawl-bench"
	DueSpread   = 30 * 24 * time.Hour
	DueFraction = 100 // 1 in DueFraction is due at DueNow
	// DueBatch is how many due URLs one Due call of a tick takes.
	DueBatch = 1000
	// DuePermStep is a prime: for every size n that it does not divide,
	// i·DuePermStep mod n is a permutation of 0..n-1.
	DuePermStep = 999_983
	// DueRounds is how many times each record has been fetched before.
	DueRounds = 4
)

// DueRecord returns record i of n as a continuous crawl leaves it after a
// few rounds: settled (indexed), due at DueNow minus DueSpread/DueFraction
// plus (rank+1) steps of DueSpread/n, where rank is i's place in a
// permutation, so that exactly n/DueFraction records are due at DueNow;
// with a recrawl state and a status history as large as real ones (the
// history full after DueRounds fetches). NextDue is set as txindex.Apply
// sets it.
func DueRecord(i, n int64) txindex.Record {
	host := fmt.Sprintf("host%d.example", i%500)
	u := fmt.Sprintf("https://%s/section/%d/page-%d.html?ref=bench", host, i%97, i)
	rank := i * DuePermStep % n
	step := DueSpread / time.Duration(n)
	due := DueNow.Add(-DueSpread/DueFraction + time.Duration(rank+1)*step).Truncate(time.Millisecond)
	interval := 24 * time.Hour
	fetched := due.Add(-interval)
	created := fetched.Add(-DueRounds * interval)
	hist := txindex.StartHistory(txindex.Record{Status: contracts.ToBeLoaded, StatusTime: created})
	for round := range DueRounds + 1 {
		t := created.Add(time.Duration(round) * interval)
		if round > 0 {
			hist = txindex.AppendHistory(hist, txindex.Event{Status: contracts.ToBeLoaded, Time: t})
		}
		for _, s := range []contracts.Status{contracts.ToBeParsed, contracts.ToBeIndexed, contracts.Indexed} {
			t = t.Add(time.Second)
			hist = txindex.AppendHistory(hist, txindex.Event{Status: s, Time: t})
		}
	}
	size := 2000 + i%50_000
	r := txindex.Record{
		Key: txindex.Key(DueCrawl, u), CrawlID: DueCrawl, URL: u, Host: host, Group: host,
		Depth: 3, Referrer: "https://" + host + "/", Status: contracts.Indexed, StatusTime: hist[len(hist)-1].Time,
		CreatedAt: created, HTTPStatus: 200, MIMEType: "text/html", Bytes: &size,
		Asset: contracts.AssetRef{Key: fmt.Sprintf("warc/%s/%06d.warc.gz", DueCrawl, i/10_000), Offset: i * 4096, Length: 4000},
		Recrawl: &txindex.Recrawl{
			Fetched: fetched, Status: 200, IntervalMS: interval.Milliseconds(), Due: due,
			ETag: fmt.Sprintf(`W/"%x-%x"`, i, rank), LastModified: fetched.Add(-72 * time.Hour).Format(time.RFC1123),
			Digest:   fmt.Sprintf("sha1:%032X", i*2654435761),
			RecordID: fmt.Sprintf("<urn:uuid:%08x-0000-4000-8000-%012x>", i, rank), Stored: fetched,
			Changes: int(i % 3), Revisits: int(i % 5),
		},
		History: hist,
	}
	r.NextDue = txindex.NextDue(r)
	return r
}

// DueSizes parses a comma-separated list of fixture sizes (a
// -due.records flag): multiples of DueFraction that DuePermStep does not
// divide.
func DueSizes(tb testing.TB, spec string) []int64 {
	tb.Helper()
	var sizes []int64
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n <= 0 || n%DueFraction != 0 || n%DuePermStep == 0 {
			tb.Fatalf("-due.records %q: want multiples of %d (and not of %d)", spec, DueFraction, DuePermStep)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// DueScan finds the batch Due returns by reading every record of the
// fixture's crawl from x, in pages of page records, and keeping the
// DueBatch earliest due: what finding due work costs without an index. It
// fails tb unless it read n records.
func DueScan(tb testing.TB, x txindex.Reads, n int64, page int) []txindex.Record {
	tb.Helper()
	var due []txindex.Record
	after := ""
	seen := int64(0)
	for {
		recs, err := x.List(tb.Context(), DueCrawl, "", after, page)
		if err != nil {
			tb.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.NextDue != nil && !r.NextDue.After(DueNow) {
				due = append(due, r)
			}
		}
		seen += int64(len(recs))
		after = recs[len(recs)-1].Key
	}
	if seen != n {
		tb.Fatalf("scan read %d records, want %d", seen, n)
	}
	slices.SortFunc(due, func(a, c txindex.Record) int {
		if d := a.NextDue.Compare(*c.NextDue); d != 0 {
			return d
		}
		return strings.Compare(a.Key, c.Key)
	})
	return due[:min(len(due), DueBatch)]
}

// ReportDue reports, per due record of the benchmark's timed work, its time
// and the CPU time cpu the process spent on it, under the unit cpuUnit.
func ReportDue(b *testing.B, records int, cpu time.Duration, cpuUnit string) {
	b.ReportMetric(float64(records)/float64(b.N), "due/op")
	if records > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/due-url")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(records), cpuUnit)
	}
}
