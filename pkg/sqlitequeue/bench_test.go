package sqlitequeue

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// benchBody is about the size of a crawl contract.
var benchBody = bytes.Repeat([]byte(`{"url":"https://example.com/a"}`), 8)

var benchHeaders = map[string]string{"crawl-id": "c-1", "content-type": "application/json"}

// indexBody is about the size of an index contract of one page of 20 KB.
var indexBody = bytes.Repeat([]byte(`{"text":"lorem ipsum dolor sit amet"}`), 540)

// BenchmarkRoundTrip measures publish + consume + ack throughput: one
// publisher sends b.N messages in Publish calls of batch messages while
// consumers (prefetch 64, each delivery acked by its own goroutine, as a
// worker pool would) ack them. Messages are as large as a crawl contract,
// or as an index contract (body=20KB).
func BenchmarkRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		batch, consumers int
		body             []byte
	}{
		{1, 1, benchBody}, {100, 1, benchBody}, {1, 4, benchBody}, {100, 4, benchBody}, {1, 4, indexBody},
	} {
		name := fmt.Sprintf("batch=%d/consumers=%d", tc.batch, tc.consumers)
		if len(tc.body) > len(benchBody) {
			name += fmt.Sprintf("/body=%dKB", len(tc.body)>>10)
		}
		b.Run(name, func(b *testing.B) {
			benchRoundTrip(b, tc.batch, tc.consumers, 64, tc.body)
		})
	}
}

func benchRoundTrip(b *testing.B, batch, consumers, prefetch int, body []byte) {
	q, err := Open(filepath.Join(benchDir(b), "bench.db"), Options{})
	if err != nil {
		b.Fatalf("Open() = %v", err)
	}
	defer q.Close()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()

	var acked atomic.Int64
	allDone := make(chan struct{})
	var wg sync.WaitGroup
	for range consumers {
		ch, err := q.Consume(ctx, "bench", queue.ConsumeOptions{Prefetch: prefetch})
		if err != nil {
			b.Fatalf("Consume() = %v", err)
		}
		wg.Go(func() {
			var acks sync.WaitGroup
			defer acks.Wait()
			for d := range ch {
				acks.Go(func() {
					if err := d.Ack(ctx); err != nil {
						if ctx.Err() == nil {
							b.Errorf("Ack() = %v", err)
						}
						return
					}
					if acked.Add(1) == int64(b.N) {
						close(allDone)
					}
				})
			}
		})
	}

	msgs := make([]queue.Message, batch)
	for i := range msgs {
		msgs[i] = queue.Message{Body: body, Headers: benchHeaders}
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime(b)
	for sent := 0; sent < b.N; sent += batch {
		n := min(batch, b.N-sent)
		if err := q.Publish(ctx, "bench", msgs[:n]...); err != nil {
			b.Fatalf("Publish() = %v", err)
		}
	}
	select {
	case <-allDone:
	case <-time.After(time.Minute):
		b.Fatalf("acked %d of %d messages within a minute", acked.Load(), b.N)
	}
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
	cancel()
	wg.Wait()
	b.ReportMetric(float64(q.stats.writes.Load())/float64(q.stats.commits.Load()), "writes/commit")
	b.ReportMetric(float64(q.stats.claimed.Load())/float64(q.stats.claims.Load()), "msgs/claim")
}

// BenchmarkPingPong measures the latency of one message at a time: publish,
// receive, ack, repeat.
func BenchmarkPingPong(b *testing.B) {
	q, err := Open(filepath.Join(benchDir(b), "bench.db"), Options{})
	if err != nil {
		b.Fatalf("Open() = %v", err)
	}
	defer q.Close()
	ch, err := q.Consume(b.Context(), "bench", queue.ConsumeOptions{Prefetch: 1})
	if err != nil {
		b.Fatalf("Consume() = %v", err)
	}
	msg := queue.Message{Body: benchBody, Headers: benchHeaders}
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for range b.N {
		if err := q.Publish(b.Context(), "bench", msg); err != nil {
			b.Fatalf("Publish() = %v", err)
		}
		d := <-ch
		if err := d.Ack(b.Context()); err != nil {
			b.Fatalf("Ack() = %v", err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
}

// cpuTime returns the user and system CPU time of the process: on a shared
// machine it varies less than wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("Getrusage() = %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchDir is SQLITEQUEUE_BENCH_DIR if set (to compare file systems), or a
// temporary directory.
func benchDir(b *testing.B) string {
	if d := os.Getenv("SQLITEQUEUE_BENCH_DIR"); d != "" {
		d, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatalf("MkdirTemp() = %v", err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}
