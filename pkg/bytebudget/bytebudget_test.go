package bytebudget

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadersShareTheBudget: readers of bodies larger than their free bytes
// never hold more than the budget together; each reads its whole body once
// another has released; a small body never waits.
func TestReadersShareTheBudget(t *testing.T) {
	const total, free, body = 4 << 20, 256 << 10, 3 << 20
	b := New(total, free)
	var held atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r := b.Reader(t.Context(), bytes.NewReader(make([]byte, body)))
			buf := make([]byte, 64<<10)
			var n int
			for {
				k, err := r.Read(buf)
				n += k
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
			if n != body {
				t.Errorf("read %d bytes, want %d", n, body)
			}
			if v := held.Add(r.Held()); v > total {
				t.Errorf("readers hold %d bytes together, budget %d", v, total)
			}
			time.Sleep(10 * time.Millisecond)
			held.Add(-r.Held())
			r.Release()
		})
	}
	wg.Wait()
	if v := b.sem.TryAcquire(total); !v {
		t.Fatalf("budget not whole after every reader released")
	}
	b.sem.Release(total)
	// A body within the free bytes takes nothing, even with the budget gone.
	if !b.sem.TryAcquire(total) {
		t.Fatal("budget not whole")
	}
	r := b.Reader(t.Context(), bytes.NewReader(make([]byte, free)))
	if n, err := io.Copy(io.Discard, r); err != nil || n != free || r.Held() != 0 {
		t.Errorf("small body: read %d, %v, held %d; want %d, nil, 0", n, err, r.Held(), free)
	}
	// A larger one waits, and gives up when its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	r = b.Reader(ctx, bytes.NewReader(make([]byte, free+1)))
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("body beyond the free bytes with no budget left: %v, want the context's deadline", err)
	}
	b.sem.Release(total)
}

// TestBodyLargerThanTheBudget fails the read rather than waiting forever.
func TestBodyLargerThanTheBudget(t *testing.T) {
	b := New(2<<20, 0)
	r := b.Reader(t.Context(), bytes.NewReader(make([]byte, 3<<20)))
	defer r.Release()
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want ErrTooLarge", err)
	}
}

// TestReserve: room reserved ahead of reading takes its share of the budget
// at once (another reader cannot have it meanwhile), reading into it takes
// nothing more, and Release gives it back.
func TestReserve(t *testing.T) {
	const total, free = 4 << 20, 256 << 10
	b := New(total, free)
	r1 := b.Reader(t.Context(), bytes.NewReader(make([]byte, 3<<20)))
	if err := r1.Reserve(3 << 20); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	held := r1.Held()
	if held < 3<<20-free || held > total {
		t.Errorf("Held after Reserve(3 MiB) = %d, want at least %d", held, 3<<20-free)
	}
	if _, err := io.Copy(io.Discard, r1); err != nil {
		t.Fatal(err)
	}
	if r1.Held() != held {
		t.Errorf("Held after reading the reserved bytes = %d, want %d as before", r1.Held(), held)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	r2 := b.Reader(cancelled, bytes.NewReader(nil))
	if err := r2.Reserve(3 << 20); !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve beyond what is left = %v, want to wait (and fail with the cancelled context)", err)
	}
	r1.Release()
	r3 := b.Reader(t.Context(), bytes.NewReader(nil))
	if err := r3.Reserve(3 << 20); err != nil {
		t.Errorf("Reserve once released: %v", err)
	}
	r3.Release()
	if err := b.Reader(t.Context(), nil).Reserve(total + free + 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Reserve over the whole budget = %v, want ErrTooLarge", err)
	}
}
