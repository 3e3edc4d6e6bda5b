package esindex

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRefresherCoalesces checks that callers arriving while a refresh runs
// share one later refresh, and that each caller's refresh starts after it
// arrived.
func TestRefresherCoalesces(t *testing.T) {
	r := newRefresher()
	var calls atomic.Int64
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	fn := func(context.Context) error {
		calls.Add(1)
		entered <- struct{}{}
		<-release
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.refresh(t.Context(), fn); err != nil {
			t.Errorf("first refresh error: %v", err)
		}
	})
	<-entered // the first refresh runs
	const n = 8
	for range n {
		wg.Go(func() {
			if err := r.refresh(t.Context(), fn); err != nil {
				t.Errorf("refresh error: %v", err)
			}
		})
	}
	// Wait until every caller has arrived and waits for the running refresh.
	for r.waiting.Load() != n {
		runtime.Gosched()
	}
	if got := r.started.Load(); got != 1 {
		t.Fatalf("%d refreshes started while the first ran, want 1", got)
	}
	close(release)
	wg.Wait()
	// The first refresh started before the callers arrived, so they need
	// one more, which they share.
	if got := calls.Load(); got != 2 {
		t.Errorf("%d concurrent refreshes during a running one made %d refresh calls, want 2", n, got)
	}
}

func TestRefresherRetriesAfterError(t *testing.T) {
	r := newRefresher()
	fail := errors.New("boom")
	if err := r.refresh(t.Context(), func(context.Context) error { return fail }); !errors.Is(err, fail) {
		t.Fatalf("refresh error = %v, want %v", err, fail)
	}
	calls := 0
	if err := r.refresh(t.Context(), func(context.Context) error { calls++; return nil }); err != nil || calls != 1 {
		t.Errorf("refresh after a failed one = %v with %d calls, want nil with 1", err, calls)
	}
	// Sequential callers each need their own refresh.
	if err := r.refresh(t.Context(), func(context.Context) error { calls++; return nil }); err != nil || calls != 2 {
		t.Errorf("sequential refresh = %v with %d calls, want nil with 2", err, calls)
	}
}
