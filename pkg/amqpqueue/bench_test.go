package amqpqueue

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// benchBody is about the size of a crawl contract.
var benchBody = bytes.Repeat([]byte(`{"url":"https://example.com/a"}`), 8)

var benchHeaders = map[string]string{"crawl-id": "c-1", "content-type": "application/json"}

// BenchmarkRoundTrip measures publish + consume + ack throughput against the
// broker: one publisher sends b.N messages in Publish calls of batch
// messages (each call waits for its confirms) while consumers with prefetch
// 64 ack every delivery from a goroutine of its own, as a worker pool would.
func BenchmarkRoundTrip(b *testing.B) {
	url := brokerURL(b)
	for _, tc := range []struct{ batch, consumers int }{
		{1, 1}, {100, 1}, {1, 4}, {100, 4},
	} {
		b.Run(fmt.Sprintf("batch=%d/consumers=%d", tc.batch, tc.consumers), func(b *testing.B) {
			benchRoundTrip(b, url, tc.batch, tc.consumers, 64)
		})
	}
}

func benchRoundTrip(b *testing.B, url string, batch, consumers, prefetch int) {
	q := mustOpen(b, Options{URL: url})
	defer q.Close()
	name := uniqueName(b, url)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()

	var acked atomic.Int64
	allDone := make(chan struct{})
	var wg sync.WaitGroup
	for range consumers {
		ch, err := q.Consume(ctx, name, queue.ConsumeOptions{Prefetch: prefetch})
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
		msgs[i] = queue.Message{Body: benchBody, Headers: benchHeaders}
	}
	b.SetBytes(int64(len(benchBody)))
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; sent += batch {
		n := min(batch, b.N-sent)
		if err := q.Publish(ctx, name, msgs[:n]...); err != nil {
			b.Fatalf("Publish() = %v", err)
		}
	}
	select {
	case <-allDone:
	case <-time.After(time.Minute):
		b.Fatalf("acked %d of %d messages within a minute", acked.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	cancel()
	wg.Wait()
}

// BenchmarkPublish measures confirmed publishing alone, in batches.
func BenchmarkPublish(b *testing.B) {
	url := brokerURL(b)
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			q := mustOpen(b, Options{URL: url})
			defer q.Close()
			name := uniqueName(b, url)
			msgs := make([]queue.Message, batch)
			for i := range msgs {
				msgs[i] = queue.Message{Body: benchBody, Headers: benchHeaders}
			}
			b.SetBytes(int64(len(benchBody)))
			b.ResetTimer()
			for sent := 0; sent < b.N; sent += batch {
				if err := q.Publish(b.Context(), name, msgs[:min(batch, b.N-sent)]...); err != nil {
					b.Fatalf("Publish() = %v", err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
