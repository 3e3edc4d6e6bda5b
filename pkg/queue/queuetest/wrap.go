package queuetest

import (
	"context"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// Wrap returns q with every delivery of its consumers passed through wrap:
// tests use it to watch or alter how deliveries are settled. A delivery not
// yet handed on when the consumer's context ends goes back to the queue
// with the consumer.
func Wrap(q queue.Queue, wrap func(queue.Delivery) queue.Delivery) queue.Queue {
	return &wrapped{Queue: q, wrap: wrap}
}

type wrapped struct {
	queue.Queue
	wrap func(queue.Delivery) queue.Delivery
}

func (w *wrapped) Consume(ctx context.Context, name string, opts queue.ConsumeOptions) (<-chan queue.Delivery, error) {
	in, err := w.Queue.Consume(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	out := make(chan queue.Delivery)
	go func() {
		defer close(out)
		for d := range in {
			select {
			case out <- w.wrap(d):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
