package wire

import (
	"path/filepath"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// resent marks a delivery as a copy its publisher sent again, as amqpqueue
// does with its resent header.
type resent struct{ queue.Delivery }

func (resent) Resent() bool { return true }

// TestCountingQueueKeepsResentMark: the counting wrapper of every service's
// queue must let queue.SeenBefore see a copy sent again, or the loader
// trusts the copy's record snapshots and fetches its pages a second time.
func TestCountingQueueKeepsResentMark(t *testing.T) {
	mq, err := sqlitequeue.Open(filepath.Join(t.TempDir(), "queue.db"), sqlitequeue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mq.Close() })
	marked := queuetest.Wrap(mq, func(d queue.Delivery) queue.Delivery {
		if d.Headers()["copy"] != "" {
			return resent{d}
		}
		return d
	})
	q := newCountingQueue(marked, 5, metrics.New())
	ctx := t.Context()
	if err := q.Publish(ctx, "q", queue.Message{Body: []byte("first")}, queue.Message{Body: []byte("copy"), Headers: map[string]string{"copy": "1"}}); err != nil {
		t.Fatal(err)
	}
	ch, err := q.Consume(ctx, "q", queue.ConsumeOptions{Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		d := <-ch
		if want := string(d.Body()) == "copy"; queue.SeenBefore(d) != want {
			t.Errorf("SeenBefore(%s) = %v, want %v", d.Body(), !want, want)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
