package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
)

// ErrClosed is returned by a write submitted after Close.
var ErrClosed = errors.New("sqlitestore: closed")

// maxGroup bounds how many submitted writes one transaction merges.
const maxGroup = 256

// writer is a group-commit writer: one goroutine owns the single writer
// connection and runs every write submitted while the previous transaction
// was committing in one transaction. Concurrent callers thus share the cost
// of a commit (the WAL append of every page they dirty) instead of queueing
// for one each.
type writer struct {
	db   *sql.DB
	jobs chan *job
	quit chan struct{}
	done chan struct{}
}

// job is one submitted write. run must derive all its results from what it
// reads in tx, because a failed group is retried job by job.
type job struct {
	// ctx is the submitter's context, checked before the job runs; it never
	// reaches SQLite, where cancelling it would interrupt the whole group.
	ctx    context.Context
	run    func(tx *sql.Tx) error
	result chan error
}

func newWriter(db *sql.DB) *writer {
	w := &writer{
		db:   db,
		jobs: make(chan *job),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go w.loop()
	return w
}

// do runs fn in a write transaction and returns once it is committed. When
// ctx ends after submission the write may still happen; do then returns the
// context's error.
func (w *writer) do(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := &job{ctx: ctx, run: fn, result: make(chan error, 1)}
	select {
	case w.jobs <- j:
	case <-w.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-j.result:
		return err
	case <-ctx.Done():
		return fmt.Errorf("write outcome unknown: %w", ctx.Err())
	}
}

// close stops the loop after the group in progress and waits for it.
func (w *writer) close() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

func (w *writer) loop() {
	defer close(w.done)
	group := make([]*job, 0, maxGroup)
	for {
		group = group[:0]
		select {
		case j := <-w.jobs:
			group = append(group, j)
		case <-w.quit:
			return
		}
		// Yield so that callers about to submit can, while more arrive.
		for round := 0; round < 4 && len(group) < maxGroup; round++ {
			runtime.Gosched()
			n := len(group)
		gather:
			for len(group) < maxGroup {
				select {
				case j := <-w.jobs:
					group = append(group, j)
				default:
					break gather
				}
			}
			if len(group) == n {
				break
			}
		}
		w.commit(group)
	}
}

// commit runs the live jobs of group in one transaction. If anything fails,
// the transaction is rolled back and every job is retried alone, so one bad
// write fails only its own caller.
func (w *writer) commit(group []*job) {
	live := group[:0]
	for _, j := range group {
		if err := j.ctx.Err(); err != nil {
			j.result <- err
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	if len(live) > 1 {
		if err := w.inTx(live); err == nil {
			for _, j := range live {
				j.result <- nil
			}
			return
		}
	}
	for _, j := range live {
		j.result <- w.inTx([]*job{j})
	}
}

func (w *writer) inTx(jobs []*job) error {
	ctx := context.Background()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin write: %w", err)
	}
	for _, j := range jobs {
		if err := j.run(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit write: %w", err)
	}
	return nil
}
