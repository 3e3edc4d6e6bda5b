package esindex

import (
	"context"
	"sync/atomic"
)

// refresher coalesces the refreshes of one index that readers ask for. A
// reader needs a refresh that starts after it asked, so that every write
// acknowledged before is visible to it; readers that arrive while a refresh
// runs share the next one instead of sending one each. Refreshes run one at a
// time.
type refresher struct {
	sem     chan struct{} // holds a token while a refresh runs
	started atomic.Uint64 // refreshes started so far
	// done is the number (in start order) of the last refresh that
	// succeeded; guarded by sem.
	done uint64
	// waiting counts the callers waiting for a running refresh to end.
	waiting atomic.Int64
}

func newRefresher() *refresher {
	return &refresher{sem: make(chan struct{}, 1)}
}

// refresh returns once a refresh that started after the call has
// succeeded, running refreshFn itself unless another caller did.
func (r *refresher) refresh(ctx context.Context, refreshFn func(context.Context) error) error {
	arrived := r.started.Load()
	r.waiting.Add(1)
	select {
	case r.sem <- struct{}{}:
		r.waiting.Add(-1)
	case <-ctx.Done():
		r.waiting.Add(-1)
		return ctx.Err()
	}
	defer func() { <-r.sem }()
	if r.done > arrived {
		return nil // a refresh that started after we arrived has succeeded
	}
	n := r.started.Add(1)
	if err := refreshFn(ctx); err != nil {
		return err
	}
	r.done = n
	return nil
}
