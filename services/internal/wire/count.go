package wire

import (
	"context"
	"sync/atomic"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// countingQueue counts the messages a process publishes, for its shutdown
// report and the grid benchmark.
type countingQueue struct {
	queue.Queue
	published atomic.Int64
}

func (c *countingQueue) Publish(ctx context.Context, name string, msgs ...queue.Message) error {
	err := c.Queue.Publish(ctx, name, msgs...)
	if err == nil {
		c.published.Add(int64(len(msgs)))
	}
	return err
}

// Published returns the number of messages this process published.
func (s *Set) Published() int64 {
	if c, ok := s.Queue.(*countingQueue); ok {
		return c.published.Load()
	}
	return 0
}
