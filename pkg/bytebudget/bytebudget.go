// Package bytebudget bounds the memory that concurrent readers of large
// bodies hold together.
//
// A service that reads many bodies at once (a loader's workers, a crawler
// decoding compressed pages) needs memory for each: most bodies are small,
// but a hostile web can send every worker a body at the size cap at the same
// time. A Budget lets every reader take its first bytes freely and makes the
// rest wait for a share of a fixed total, so that the bytes held by readers
// at once stay within workers × free + total, whatever the web sends.
package bytebudget

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sync/semaphore"

	"github.com/gridcrawl/gridcrawl/pkg/gcnudge"
)

// step is the share a reader takes at a time beyond its free bytes.
const step = 1 << 20

// ErrTooLarge is returned by a Reader whose body needs more than the whole
// budget.
var ErrTooLarge = errors.New("body larger than the memory budget")

// Budget is a total of bytes shared by readers. A nil Budget bounds nothing.
type Budget struct {
	sem   *semaphore.Weighted
	total int64
	free  int64
}

// New returns a budget of total bytes whose readers each read their first
// free bytes without taking any of it.
func New(total, free int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(total), total: total, free: free}
}

// Reader returns a reader of r that takes shares of b (waiting for them
// under ctx) as it reads beyond the free bytes. Release gives them back; the
// bytes read must not be held by the caller after it.
func (b *Budget) Reader(ctx context.Context, r io.Reader) *Reader {
	return &Reader{ctx: ctx, r: r, b: b}
}

// Reader reads through a Budget.
type Reader struct {
	ctx  context.Context
	r    io.Reader
	b    *Budget
	n    int64 // bytes read
	held int64 // bytes of the budget taken
	// holding: the reader holds a large buffer (gcnudge.Hold), from its
	// first share to Release.
	holding bool
}

// Read reads from the underlying reader, then takes what the budget must
// cover of what it read (at most one step more than the budget, per reader,
// is read before that).
func (r *Reader) Read(p []byte) (int, error) {
	if r.b == nil {
		return r.r.Read(p)
	}
	if len(p) > step {
		p = p[:step]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if cerr := r.cover(r.n); cerr != nil {
		return n, cerr
	}
	return n, err
}

// Reserve takes, waiting for them under the reader's context, the shares
// that cover n bytes (beyond the free ones), before the caller allocates
// room for them: a caller that allocates ahead of what it reads (a body of
// announced length) keeps its memory within the budget that way. Bytes read
// up to n take nothing more.
func (r *Reader) Reserve(n int64) error {
	if r.b == nil {
		return nil
	}
	return r.cover(n)
}

// cover takes shares until the reader holds what n bytes need beyond the
// free ones.
func (r *Reader) cover(n int64) error {
	for n > r.b.free+r.held {
		want := min(int64(step), r.b.total-r.held)
		if want <= 0 {
			return fmt.Errorf("%w (%d bytes)", ErrTooLarge, r.b.total)
		}
		if !r.holding {
			r.holding = true
			gcnudge.Hold()
		}
		if r.b.sem.TryAcquire(want) {
			r.held += want
			continue
		}
		// Waiting while holding a share could deadlock readers that each
		// hold part of the budget and want more: give the share back and
		// wait for all of it at once (the semaphore serves waiters in
		// order, so the reader is not starved by small requests).
		want += r.held
		r.b.sem.Release(r.held)
		r.held = 0
		if aerr := r.b.sem.Acquire(r.ctx, want); aerr != nil {
			return fmt.Errorf("wait for memory to read the body: %w", aerr)
		}
		r.held = want
	}
	return nil
}

// Held returns the bytes of the budget the reader holds.
func (r *Reader) Held() int64 { return r.held }

// Release gives back what the reader took of the budget. It may be called
// on a nil Reader.
func (r *Reader) Release() {
	if r == nil || r.b == nil {
		return
	}
	if r.held > 0 {
		r.b.sem.Release(r.held)
		r.held = 0
	}
	if r.holding {
		r.holding = false
		gcnudge.Unhold()
	}
}
