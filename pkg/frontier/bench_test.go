package frontier

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFrontier measures one URL's way through a frontier that holds
// many: filed in a contract's batch of 100 URLs, taken with the next URLs
// of its queue (a group's window is refilled 10 URLs at a time), removed in
// a flush's batch of 100. Each iteration is one URL;
// bytes/url is the database's size on disk per URL waiting in it.
//
//	go test -run '^$' -bench Frontier -benchtime 200000x ./pkg/frontier
func BenchmarkFrontier(b *testing.B) {
	for _, shape := range []struct {
		name           string
		groups, filled int
	}{
		{"broad-1000-groups-100k-waiting", 1000, 100_000},
		{"broad-1000-groups-1M-waiting", 1000, 1_000_000},
		{"deep-10-groups-1M-waiting", 10, 1_000_000},
	} {
		b.Run(shape.name, func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "f.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			seq := 0
			batch := func(n int) []Entry {
				es := make([]Entry, n)
				for i := range es {
					g := fmt.Sprintf("h%04d.sim.test", rng.IntN(shape.groups))
					seq++
					es[i] = Entry{Group: g, Crawl: "crawl-20261202-0001", URL: fmt.Sprintf("http://%s/p/%d.html?session=%08d", g, seq, seq),
						Depth: 3, Hops: 3}
				}
				return es
			}
			for filled := 0; filled < shape.filled; filled += 1000 {
				if _, err := s.File(b.Context(), batch(1000)); err != nil {
					b.Fatal(err)
				}
			}
			ids := make([]QueueID, 0, shape.groups)
			for _, q := range s.Queues() {
				ids = append(ids, q.QueueID)
			}
			bytesPerURL := float64(s.Bytes()) / float64(shape.filled)
			now := time.Now().Add(time.Hour)
			b.ResetTimer()
			var tFile, tTake, tDone time.Duration
			cpu0 := cpuTime()
			for done := 0; done < b.N; done += 100 {
				t0 := time.Now()
				if _, err := s.File(b.Context(), batch(100)); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				tFile += t1.Sub(t0)
				var taken []Entry
				for len(taken) < 100 {
					got, err := s.Take(b.Context(), ids[rng.IntN(len(ids))], min(10, 100-len(taken)), now)
					if err != nil {
						b.Fatal(err)
					}
					taken = append(taken, got...)
				}
				t2 := time.Now()
				tTake += t2.Sub(t1)
				if err := s.Done(b.Context(), taken); err != nil {
					b.Fatal(err)
				}
				tDone += time.Since(t2)
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/url")
			b.ReportMetric(float64(tFile.Nanoseconds())/float64(b.N), "file-ns/url")
			b.ReportMetric(float64(tTake.Nanoseconds())/float64(b.N), "take-ns/url")
			b.ReportMetric(float64(tDone.Nanoseconds())/float64(b.N), "done-ns/url")
			b.ReportMetric(bytesPerURL, "bytes/url")
		})
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
