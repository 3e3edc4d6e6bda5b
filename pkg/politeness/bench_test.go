package politeness

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// benchClock is a clock the benchmark moves by hand, without locking.
type benchClock struct{ ns int64 }

func (c *benchClock) Now() time.Time { return time.Unix(0, c.ns) }

// BenchmarkAddNextRelease measures one Add, one TryNext and one Release per
// iteration on one goroutine. Each group waits half a round after a fetch,
// so about half of the groups sit in the wait heap and half in the ready
// FIFO. cycles/s counts iterations, ops/s the three operations separately,
// and cpu-ns/cycle the process's CPU time per iteration.
//
//	go test -run '^$' -bench AddNextRelease -benchtime 1s -cpu 1 ./pkg/politeness/
func BenchmarkAddNextRelease(b *testing.B) {
	for _, groups := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			const step = time.Microsecond
			clk := &benchClock{ns: t0.UnixNano()}
			s, err := New(Config{
				Now:         clk.Now,
				Delay:       fixedDelay(time.Duration(groups/2) * step),
				Budget:      noBudget,
				BusyTimeout: time.Hour,
			})
			if err != nil {
				b.Fatal(err)
			}
			hosts := make([]string, groups)
			for g := range hosts {
				hosts[g] = fmt.Sprintf("h%d.example", g)
			}
			urls := make([]string, 4096)
			for i := range urls {
				urls[i] = fmt.Sprintf("https://h.example/section/page-%07d.html", i)
			}
			for g, h := range hosts {
				for k := range 2 {
					if err := s.Add(Item{URL: urls[(g+k)&4095], Host: h, Group: h}); err != nil {
						b.Fatal(err)
					}
				}
			}
			o := Outcome{Status: 200, Duration: 10 * time.Millisecond}
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			i := 0
			for b.Loop() {
				h := hosts[i%groups]
				if err := s.Add(Item{URL: urls[i&4095], Host: h, Group: h}); err != nil {
					b.Fatal(err)
				}
				l, ok := s.TryNext()
				if !ok {
					b.Fatalf("iteration %d: TryNext() = none", i)
				}
				if !s.Release(l, o) {
					b.Fatalf("iteration %d: Release = false", i)
				}
				clk.ns += int64(step)
				i++
			}
			b.ReportMetric(3*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			// On a shared machine wall time includes waiting for a core; the
			// process's CPU time (GC included) is the cost of the work itself.
			if cpu1, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/cycle")
			}
		})
	}
}

// BenchmarkMemoryPerURL queues 1,000,000 items and reports the heap the
// scheduler needs per queued URL: bytes/url excludes the URL's text (the
// caller allocated it), url-text-bytes is what that text took.
//
//	go test -run '^$' -bench MemoryPerURL -benchtime 1x ./pkg/politeness/
func BenchmarkMemoryPerURL(b *testing.B) {
	const n = 1_000_000
	for _, groups := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			for range b.N {
				hosts := make([]string, groups)
				for g := range hosts {
					hosts[g] = fmt.Sprintf("h%d.example", g)
				}
				var m0, m1, m2 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				urls := make([]string, n)
				for i := range urls {
					urls[i] = fmt.Sprintf("https://%s/section/page-%07d.html", hosts[i%groups], i)
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				s, err := New(Config{Budget: noBudget})
				if err != nil {
					b.Fatal(err)
				}
				for i, u := range urls {
					h := hosts[i%groups]
					if err := s.Add(Item{URL: u, Host: h, Group: h}); err != nil {
						b.Fatal(err)
					}
				}
				urls = nil
				runtime.GC()
				runtime.ReadMemStats(&m2)
				if c := s.Counts(); c.Queued != n {
					b.Fatalf("Counts().Queued = %d, want %d", c.Queued, n)
				}
				// m1-m0 holds the URL slice (16 bytes a URL) and the text; the
				// slice is freed by m2.
				text := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)-16*n) / n
				b.ReportMetric(float64(int64(m2.HeapAlloc)-int64(m1.HeapAlloc)+16*n)/n, "bytes/url")
				b.ReportMetric(text, "url-text-bytes")
				runtime.KeepAlive(s)
			}
		})
	}
}
