package sqlitestore

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// Benchmarks report throughput as custom metrics (records/s, docs/s,
// pages/s). Run them with, for example:
//
//	go test -run '^$' -bench . -benchtime 1s ./pkg/sqlitestore/

func benchRecord(crawl string, i int64, s contracts.Status, now time.Time) txindex.Record {
	host := fmt.Sprintf("host%d.example", i%500)
	u := fmt.Sprintf("https://%s/section/%d/page-%d.html?ref=bench", host, i%97, i)
	return txindex.Record{
		Key: txindex.Key(crawl, u), CrawlID: crawl, URL: u, Host: host, Group: host,
		Depth: 3, Referrer: "https://" + host + "/", Status: s, StatusTime: now, CreatedAt: now,
	}
}

func openBenchTx(b *testing.B) *TxIndex {
	b.Helper()
	x, err := OpenTxIndex(filepath.Join(b.TempDir(), "tx.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.Close() })
	return x
}

// BenchmarkTxCreate creates batches of 100 new records, from one goroutine
// and from several at once (which group commit merges).
func BenchmarkTxCreate(b *testing.B) {
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch100/goroutines%d", par), func(b *testing.B) {
			x := openBenchTx(b)
			var next atomic.Int64
			now := time.Now()
			start := time.Now()
			runPar(b, par, func() {
				batch := make([]txindex.Record, 100)
				for i := range batch {
					batch[i] = benchRecord("bench", next.Add(1), contracts.ToBeLoaded, now)
				}
				if _, err := x.Create(b.Context(), batch); err != nil {
					b.Error(err)
				}
			})
			b.ReportMetric(float64(next.Load())/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkTxCreateMostlyExisting creates batches of 100 discovered links of
// which 90 are already known, as a crawler does deep into a site.
func BenchmarkTxCreateMostlyExisting(b *testing.B) {
	x := openBenchTx(b)
	now := time.Now()
	const known = 50_000
	seed := make([]txindex.Record, 0, 1000)
	for i := range int64(known) {
		seed = append(seed, benchRecord("bench", i, contracts.ToBeLoaded, now))
		if len(seed) == cap(seed) {
			if _, err := x.Create(b.Context(), seed); err != nil {
				b.Fatal(err)
			}
			seed = seed[:0]
		}
	}
	var next atomic.Int64
	next.Store(known)
	var n atomic.Int64
	start := time.Now()
	runPar(b, 4, func() {
		r := rand.New(rand.NewPCG(uint64(next.Load()), 1))
		batch := make([]txindex.Record, 100)
		for i := range batch {
			if i < 10 {
				batch[i] = benchRecord("bench", next.Add(1), contracts.ToBeLoaded, now)
			} else {
				batch[i] = benchRecord("bench", r.Int64N(known), contracts.ToBeLoaded, now)
			}
		}
		if _, err := x.Create(b.Context(), batch); err != nil {
			b.Error(err)
		}
		n.Add(int64(len(batch)))
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "records/s")
}

// BenchmarkTxTransition moves records along the pipeline in batches of 1
// and 100, from 8 goroutines.
func BenchmarkTxTransition(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch%d/goroutines8", size), func(b *testing.B) {
			x := openBenchTx(b)
			now := time.Now()
			const pool = 100_000
			recs := make([]txindex.Record, 0, 1000)
			for i := range int64(pool) {
				recs = append(recs, benchRecord("bench", i, contracts.ToBeLoaded, now))
				if len(recs) == cap(recs) {
					if _, err := x.Create(b.Context(), recs); err != nil {
						b.Fatal(err)
					}
					recs = recs[:0]
				}
			}
			var next, applied atomic.Int64
			start := time.Now()
			runPar(b, 8, func() {
				ts := make([]txindex.Transition, size)
				for i := range ts {
					j := next.Add(1)
					// Cycle loaded -> parsed -> indexed-pending -> loaded.
					round := (j / pool) % 3
					from := []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed, contracts.ToBeIndexed}[round]
					to := []contracts.Status{contracts.ToBeParsed, contracts.ToBeIndexed, contracts.ToBeLoaded}[round]
					ts[i] = txindex.Transition{Key: benchRecord("bench", j%pool, "", now).Key, From: from, To: to, HTTPStatus: 200}
				}
				got, err := x.Transition(b.Context(), ts)
				if err != nil {
					b.Error(err)
				}
				for _, ok := range got {
					if ok {
						applied.Add(1)
					}
				}
			})
			b.ReportMetric(float64(next.Load())/time.Since(start).Seconds(), "transitions/s")
			b.ReportMetric(float64(applied.Load())/float64(max(next.Load(), 1)), "applied-ratio")
		})
	}
}

// BenchmarkTxPage does one page's worth of transaction index work per
// iteration, from 16 goroutines: create its 40 links, of which 4 are new
// (every URL is created once and loaded once, so in a long crawl about one
// link per page is new), then three transitions of single records. The
// target is 1,000 pages/s.
func BenchmarkTxPage(b *testing.B) {
	for _, existing := range []int64{0, 300_000} {
		b.Run(fmt.Sprintf("existing%d", existing), func(b *testing.B) {
			x := openBenchTx(b)
			now := time.Now()
			fill(b, x, "old", existing, now)
			var pages, next atomic.Int64
			start := time.Now()
			runPar(b, 16, func() {
				p := pages.Add(1)
				links := make([]txindex.Record, 40)
				for i := range links {
					var id int64
					if i < 4 {
						id = next.Add(1)
					} else {
						id = max(next.Load()-int64(i*37), 0)
					}
					links[i] = benchRecord("bench", id, contracts.ToBeLoaded, now)
				}
				if _, err := x.Create(b.Context(), links); err != nil {
					b.Error(err)
				}
				key := benchRecord("bench", p, "", now).Key
				for _, tr := range [][2]contracts.Status{
					{contracts.ToBeLoaded, contracts.ToBeParsed},
					{contracts.ToBeParsed, contracts.ToBeIndexed},
					{contracts.ToBeIndexed, contracts.Indexed},
				} {
					if _, err := x.Transition(b.Context(), []txindex.Transition{{Key: key, From: tr[0], To: tr[1]}}); err != nil {
						b.Error(err)
					}
				}
			})
			b.ReportMetric(float64(pages.Load())/time.Since(start).Seconds(), "pages/s")
		})
	}
}

// fill creates n records of crawl in batches of 1000.
func fill(b *testing.B, x *TxIndex, crawl string, n int64, now time.Time) {
	b.Helper()
	recs := make([]txindex.Record, 0, 1000)
	for i := range n {
		recs = append(recs, benchRecord(crawl, i, contracts.Statuses[i%int64(len(contracts.Statuses))], now))
		if len(recs) == cap(recs) || i == n-1 {
			if _, err := x.Create(b.Context(), recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
}

// BenchmarkTxCounts counts the statuses of a crawl of 200,000 records.
func BenchmarkTxCounts(b *testing.B) {
	x := openBenchTx(b)
	now := time.Now()
	recs := make([]txindex.Record, 0, 1000)
	for i := range int64(200_000) {
		recs = append(recs, benchRecord("bench", i, contracts.Statuses[i%int64(len(contracts.Statuses))], now))
		if len(recs) == cap(recs) {
			if _, err := x.Create(b.Context(), recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	for b.Loop() {
		if _, err := x.Counts(b.Context(), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// vocabulary is a fixed pseudo-language whose word frequencies follow
// Zipf's law, as natural text does.
type vocabulary struct {
	words []string
	zipf  *rand.Zipf
	mu    sync.Mutex
}

func newVocabulary(seed uint64) *vocabulary {
	r := rand.New(rand.NewPCG(seed, 2))
	v := &vocabulary{zipf: rand.NewZipf(r, 1.1, 1, 19_999)}
	letters := "abcdefghijklmnopqrstuvwxyz"
	for range 20_000 {
		n := 2 + r.IntN(9)
		var sb strings.Builder
		for range n {
			sb.WriteByte(letters[r.IntN(len(letters))])
		}
		v.words = append(v.words, sb.String())
	}
	return v
}

func (v *vocabulary) text(bytes int) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var sb strings.Builder
	for sb.Len() < bytes {
		sb.WriteString(v.words[v.zipf.Uint64()])
		sb.WriteByte(' ')
	}
	return sb.String()
}

func benchDoc(v *vocabulary, crawl string, i int64) contracts.Document {
	u := fmt.Sprintf("https://host%d.example/page-%d.html", i%500, i)
	return contracts.Document{
		ID: txindex.Key(crawl, u), CrawlID: crawl, URL: u, Host: fmt.Sprintf("host%d.example", i%500),
		Title: []string{v.text(40)}, Description: []string{v.text(120)}, H1: []string{v.text(30)}, H2: []string{v.text(30)},
		Text: v.text(5000), ContentType: []string{"text/html"}, HTTPStatus: 200, LoadDate: time.Now(), LastModified: time.Now(),
		InboundLinks: []string{"https://example.com/a", "https://example.com/b"}, InboundAnchorText: []string{"", ""},
		OutboundLinks: []string{}, OutboundAnchorText: []string{}, Images: []string{}, FileExt: "html",
	}
}

func openBenchSearch(b *testing.B) *Search {
	b.Helper()
	s, err := OpenSearch(filepath.Join(b.TempDir(), "search.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkSearchUpsert stores documents of 5 KB and of 15 KB of text (the
// text of a 20 KB page) in batches of 1, 50 and 500, from one goroutine,
// and in batches of 50 from four. cpu-ms/doc is the process's CPU time per
// stored document, the figure to compare.
func BenchmarkSearchUpsert(b *testing.B) {
	v := newVocabulary(1)
	for _, text := range []int{5000, 15000} {
		// Text is made in advance, so that only storing it is measured.
		templates := make([]contracts.Document, 500)
		for i := range templates {
			templates[i] = benchDoc(v, "bench", int64(i))
			templates[i].Text = v.text(text)
		}
		for _, tc := range []struct{ batch, par int }{{1, 1}, {50, 1}, {500, 1}, {50, 4}} {
			b.Run(fmt.Sprintf("text%dKB/batch%d/goroutines%d", text/1000, tc.batch, tc.par), func(b *testing.B) {
				s := openBenchSearch(b)
				var next atomic.Int64
				start, cpu0 := time.Now(), cpuTime()
				runPar(b, tc.par, func() {
					docs := make([]contracts.Document, tc.batch)
					for i := range docs {
						j := next.Add(1)
						docs[i] = templates[j%int64(len(templates))]
						docs[i].ID = txindex.Key("bench", fmt.Sprint(j))
					}
					if err := s.Upsert(b.Context(), docs); err != nil {
						b.Error(err)
					}
				})
				n := float64(next.Load())
				b.ReportMetric(n/time.Since(start).Seconds(), "docs/s")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/n, "cpu-ms/doc")
			})
		}
	}
}

// BenchmarkSearchQuery queries an index of 10,000 documents of 5 KB with
// one rare word, one common word, and two words, with and without a crawl
// filter.
func BenchmarkSearchQuery(b *testing.B) {
	v := newVocabulary(1)
	s := openBenchSearch(b)
	docs := make([]contracts.Document, 0, 100)
	for i := range int64(10_000) {
		crawl := "bench"
		if i%10 == 0 {
			crawl = "other"
		}
		docs = append(docs, benchDoc(v, crawl, i))
		if len(docs) == cap(docs) {
			if err := s.Upsert(b.Context(), docs); err != nil {
				b.Fatal(err)
			}
			docs = docs[:0]
		}
	}
	for _, tc := range []struct {
		name string
		q    search.Query
	}{
		{"common", search.Query{Q: v.words[0], Limit: 10}},
		{"medium", search.Query{Q: v.words[30], Limit: 10}},
		{"rare", search.Query{Q: v.words[3000], Limit: 10}},
		{"two words", search.Query{Q: v.words[5] + " " + v.words[40], Limit: 10}},
		{"common in crawl", search.Query{Q: v.words[0], CrawlID: "other", Limit: 10}},
		{"common page 5", search.Query{Q: v.words[0], Offset: 40, Limit: 10}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var total int64
			for b.Loop() {
				res, err := s.Search(b.Context(), tc.q)
				if err != nil {
					b.Fatal(err)
				}
				total = res.Total
			}
			b.ReportMetric(float64(total), "matches")
		})
	}
}

// runPar calls f b.N times in total from par goroutines. Besides wall time
// it reports the process's CPU time per call (cpu-ns/op), which a machine
// shared with other work disturbs less.
func runPar(b *testing.B, par int, f func()) {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(b.N))
	cpu0 := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				f()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
}

// cpuTime returns the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
