package wire

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// countingQueue counts the messages a process publishes, for its shutdown
// report and the grid benchmark, and feeds the queue metrics: contracts
// published, consumed, acked, retried and dead-lettered per queue, and the
// latency of each operation.
type countingQueue struct {
	queue.Queue
	published atomic.Int64
	// maxAttempts is the queue's; a Retry at that attempt dead-letters.
	maxAttempts int

	m                                *metrics.Queue
	publish, ack, retry, dead, lenOp metrics.Op
}

func newCountingQueue(q queue.Queue, maxAttempts int, reg *metrics.Registry) *countingQueue {
	c := &countingQueue{Queue: q, maxAttempts: maxAttempts}
	c.instrument(reg)
	return c
}

// instrument points the queue's metrics at reg (nil: registered nowhere).
func (c *countingQueue) instrument(reg *metrics.Registry) {
	b := reg.Backend()
	c.m = reg.Queue()
	c.publish, c.ack, c.retry, c.dead, c.lenOp = b.Op("queue", "publish"), b.Op("queue", "ack"), b.Op("queue", "retry"), b.Op("queue", "dead-letter"), b.Op("queue", "len")
}

func (c *countingQueue) Publish(ctx context.Context, name string, msgs ...queue.Message) error {
	start := time.Now()
	err := c.Queue.Publish(ctx, name, msgs...)
	c.publish.Done(start, err)
	if err == nil {
		c.published.Add(int64(len(msgs)))
		c.m.For(name).Published.Add(float64(len(msgs)))
	}
	return err
}

func (c *countingQueue) Len(ctx context.Context, name string) (int, error) {
	start := time.Now()
	n, err := c.Queue.Len(ctx, name)
	c.lenOp.Done(start, err)
	return n, err
}

// Consume hands on the queue's deliveries, counted and wrapped so that
// their settlements are counted. A delivery the consumer no longer takes
// once ctx is done stays unsettled and goes back to the queue, as the
// queue's own deliveries do.
func (c *countingQueue) Consume(ctx context.Context, name string, opts queue.ConsumeOptions) (<-chan queue.Delivery, error) {
	in, err := c.Queue.Consume(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	qc := c.m.For(name)
	out := make(chan queue.Delivery)
	go func() {
		defer close(out)
		for d := range in {
			qc.Consumed.Inc()
			if d.Redelivered() {
				qc.Redelivered.Inc()
			}
			md := &meteredDelivery{Delivery: d, q: c, qc: qc}
			var wrapped queue.Delivery = md
			if _, ok := d.(queue.Revocable); ok {
				wrapped = revocableDelivery{md}
			}
			select {
			case out <- wrapped:
			case <-ctx.Done():
			}
		}
	}()
	return out, nil
}

// meteredDelivery counts how a delivery is settled.
type meteredDelivery struct {
	queue.Delivery
	q  *countingQueue
	qc *metrics.QueueCounters
}

// Resent hands on the queue's mark of a copy sent again (queue.Resendable),
// which queue.SeenBefore would not see through the wrapper.
func (d *meteredDelivery) Resent() bool {
	r, ok := d.Delivery.(queue.Resendable)
	return ok && r.Resent()
}

func (d *meteredDelivery) Ack(ctx context.Context) error {
	start := time.Now()
	err := d.Delivery.Ack(ctx)
	d.q.ack.Done(start, err)
	if err == nil {
		d.qc.Acked.Inc()
	}
	return err
}

func (d *meteredDelivery) Retry(ctx context.Context, delay time.Duration) error {
	start := time.Now()
	err := d.Delivery.Retry(ctx, delay)
	d.q.retry.Done(start, err)
	if err == nil {
		if d.Attempt() >= d.q.maxAttempts { // the queue dead-letters it (queue.ReasonMaxAttempts)
			d.qc.DeadLettered.Inc()
		} else {
			d.qc.Retried.Inc()
		}
	}
	return err
}

func (d *meteredDelivery) Postpone(ctx context.Context, delay time.Duration) error {
	start := time.Now()
	err := d.Delivery.Postpone(ctx, delay)
	d.q.retry.Done(start, err)
	if err == nil {
		d.qc.Postponed.Inc()
	}
	return err
}

func (d *meteredDelivery) DeadLetter(ctx context.Context, reason string) error {
	start := time.Now()
	err := d.Delivery.DeadLetter(ctx, reason)
	d.q.dead.Done(start, err)
	if err == nil {
		d.qc.DeadLettered.Inc()
	}
	return err
}

// revocableDelivery keeps queue.Revocable visible through the wrapper.
type revocableDelivery struct{ *meteredDelivery }

func (d revocableDelivery) Lost() <-chan struct{} { return d.Delivery.(queue.Revocable).Lost() }

// Published returns the number of messages this process published.
func (s *Set) Published() int64 {
	if c, ok := s.Queue.(*countingQueue); ok {
		return c.published.Load()
	}
	return 0
}
