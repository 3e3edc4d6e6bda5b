// Package sqlitequeue is gridcrawl's embedded queue.Queue: durable queues kept
// in one SQLite file through the pure-Go driver modernc.org/sqlite.
//
// Every message is a row of one table. A row is ready, held by a consumer, or
// delayed by a Retry; Ack deletes it. The file is opened in WAL mode with
// synchronous=NORMAL, so a committed Publish or settle survives the process
// being killed (not a power loss), and with an exclusive lock, so that a
// second process cannot open the same file and steal held messages. On Open,
// every row still marked held (its process died) becomes ready again with
// Redelivered set.
//
// Consumers are woken in-process when messages become ready (Publish, Retry,
// released deliveries), one sleeping consumer per ready message, so nothing
// polls; one scheduler goroutine sleeps until the earliest delayed message of
// any queue is due. All writes go through one writer goroutine on one
// connection, which commits whatever writes are waiting in one transaction
// (group commit): a lone write waits for no one, concurrent ones share a
// commit. Publish writes all its messages in one transaction, and a consumer
// claims up to its free prefetch slots in one statement.
package sqlitequeue

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/gridcrawl/gridcrawl/pkg/queue"

	"github.com/gridcrawl/gridcrawl/pkg/privfile"
)

// Row states.
const (
	stateReady   = 0
	stateHeld    = 1
	stateDelayed = 2
)

// Defaults of Options.
const (
	DefaultMaxAttempts = 5
	DefaultBusyTimeout = 5 * time.Second
)

// The table has no AUTOINCREMENT: a new rowid is always above every live
// row's, which is all FIFO needs, and reusing the id of a deleted row is
// harmless because deliveries are matched by id and claim token.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS messages (
		id          INTEGER PRIMARY KEY,
		queue       TEXT    NOT NULL,
		body        BLOB    NOT NULL,
		headers     TEXT,
		attempt     INTEGER NOT NULL DEFAULT 1,
		redelivered INTEGER NOT NULL DEFAULT 0,
		state       INTEGER NOT NULL DEFAULT 0,
		ready_at    INTEGER NOT NULL DEFAULT 0,
		token       INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE INDEX IF NOT EXISTS messages_state ON messages (state, queue, id)`,
}

// Prepared statements, by index into Queue.stmts.
const (
	stInsert = iota
	stInsertDelayed
	stClaim
	stDelete
	stRelease
	stReleaseClaim
	stRetry
	stPostpone
	stPromote
	stNextDelayed
	stLen
	numStmts
)

var stmtSQL = [numStmts]string{
	stInsert:        `INSERT INTO messages (queue, body, headers) VALUES (?, ?, ?)`,
	stInsertDelayed: `INSERT INTO messages (queue, body, headers, state, ready_at) VALUES (?, ?, ?, 2, ?)`,
	stClaim: `UPDATE messages SET state = 1, token = ?1
		WHERE id IN (SELECT id FROM messages WHERE state = 0 AND queue = ?2 ORDER BY id LIMIT ?3)
		RETURNING id, body, headers, attempt, redelivered`,
	stDelete: `DELETE FROM messages WHERE id = ? AND token = ? AND state = 1`,
	stRelease: `UPDATE messages SET state = 0, token = 0, redelivered = MAX(redelivered, ?)
		WHERE id = ? AND token = ? AND state = 1`,
	stReleaseClaim: `UPDATE messages SET state = 0, token = 0 WHERE token = ? AND state = 1`,
	stRetry: `UPDATE messages SET state = ?, ready_at = ?, attempt = attempt + 1, redelivered = 0, token = 0
		WHERE id = ? AND token = ? AND state = 1`,
	stPostpone: `UPDATE messages SET state = ?, ready_at = ?, redelivered = 0, token = 0
		WHERE id = ? AND token = ? AND state = 1`,
	stPromote:     `UPDATE messages SET state = 0, ready_at = 0 WHERE state = 2 AND queue = ? AND ready_at <= ?`,
	stNextDelayed: `SELECT MIN(ready_at) FROM messages WHERE state = 2 AND queue = ?`,
	stLen:         `SELECT COUNT(*) FROM messages WHERE state IN (0, 2) AND queue = ?`,
}

// Options configure a Queue.
type Options struct {
	// MaxAttempts is the number of deliveries a message gets before Retry
	// dead-letters it; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// Logger receives errors the queue handles itself; nil discards them.
	Logger *slog.Logger
	// BusyTimeout is how long Open waits for a lock held by another process
	// before failing; 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
}

// Queue is a queue.Queue stored in one SQLite file. It is safe for
// concurrent use and must be closed.
type Queue struct {
	db          *sql.DB
	log         *slog.Logger
	maxAttempts int
	stmts       [numStmts]*sql.Stmt

	// closeMu guards closed; operations hold it for reading while they run,
	// so that Close waits for them before stopping goroutines and the
	// database.
	closeMu    sync.RWMutex
	closed     bool
	closeOnce  sync.Once
	closeErr   error
	done       chan struct{}  // closed by Close: consumers and the scheduler stop
	workers    sync.WaitGroup // consumers and the scheduler
	writes     chan writeReq
	stopWrites chan struct{}
	writer     sync.WaitGroup

	tokens atomic.Int64 // claim tokens; unique within this process
	stats  stats

	mu      sync.Mutex
	waits   map[string]*waitq // per queue with consumers
	delayed map[string]int64  // per queue, earliest ready_at (unix ns) of its delayed messages
	kick    chan struct{}     // tells the scheduler that delayed changed
}

var _ queue.Queue = (*Queue)(nil)

// stats count what the benchmarks report about batching.
type stats struct {
	commits, writes, claims, claimed atomic.Int64
}

// Open opens or creates the queue file at path.
func Open(path string, opts Options) (*Queue, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open queue %q: path must be non-empty and contain no '?' or '#'", path)
	}
	if strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("open queue %q: want a file path, not a URI or memory database", path)
	}
	if err := privfile.Touch(path); err != nil {
		return nil, fmt.Errorf("open queue %q: %w", path, err)
	}
	if opts.MaxAttempts < 0 {
		return nil, fmt.Errorf("open queue %q: negative MaxAttempts %d", path, opts.MaxAttempts)
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// The driver applies busy_timeout, then _pragma, then journal_mode and
	// synchronous: exclusive locking is thus set before WAL, so SQLite keeps
	// the WAL index in process memory and holds the file lock while open.
	dsn := fmt.Sprintf("%s?_busy_timeout=%d&_pragma=locking_mode(EXCLUSIVE)&_journal_mode=WAL&_synchronous=NORMAL",
		path, opts.BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open queue %q: %w", path, err)
	}
	// One connection: SQLite has one writer anyway, and the exclusive lock
	// belongs to a connection.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)

	q := &Queue{
		db:          db,
		log:         opts.Logger,
		maxAttempts: opts.MaxAttempts,
		done:        make(chan struct{}),
		writes:      make(chan writeReq, maxBatch),
		stopWrites:  make(chan struct{}),
		waits:       make(map[string]*waitq),
		delayed:     make(map[string]int64),
		kick:        make(chan struct{}, 1),
	}
	if err := q.init(); err != nil {
		return nil, errors.Join(fmt.Errorf("open queue %q: %w", path, err), q.closeDB())
	}
	q.writer.Add(1)
	go q.writeLoop()
	q.workers.Add(1)
	go q.scheduleLoop()
	return q, nil
}

// init creates the schema, recovers held messages and prepares statements.
func (q *Queue) init() error {
	ctx := context.Background()
	for _, s := range schema {
		if _, err := q.db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	// The process that held these is gone.
	if _, err := q.db.ExecContext(ctx,
		`UPDATE messages SET state = 0, token = 0, redelivered = 1 WHERE state = 1`); err != nil {
		return fmt.Errorf("recover held messages: %w", err)
	}
	rows, err := q.db.QueryContext(ctx,
		`SELECT queue, MIN(ready_at) FROM messages WHERE state = 2 GROUP BY queue`)
	if err != nil {
		return fmt.Errorf("load delayed messages: %w", err)
	}
	for rows.Next() {
		var name string
		var at int64
		if err := rows.Scan(&name, &at); err != nil {
			rows.Close()
			return fmt.Errorf("load delayed messages: %w", err)
		}
		q.delayed[name] = at
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("load delayed messages: %w", err)
	}
	for i, s := range stmtSQL {
		if q.stmts[i], err = q.db.PrepareContext(ctx, s); err != nil {
			return fmt.Errorf("prepare %q: %w", s, err)
		}
	}
	return nil
}

// closeDB closes the prepared statements and the database.
func (q *Queue) closeDB() error {
	var errs []error
	for _, s := range q.stmts {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	errs = append(errs, q.db.Close())
	return errors.Join(errs...)
}

// Close stops every consumer, returning their unsettled deliveries to their
// queues, waits for the queue's goroutines and closes the file. Operations
// that are running finish first; later ones return queue.ErrClosed.
func (q *Queue) Close() error {
	q.closeOnce.Do(func() {
		q.closeMu.Lock()
		q.closed = true
		q.closeMu.Unlock()
		close(q.done)
		q.workers.Wait()
		close(q.stopWrites)
		q.writer.Wait()
		q.closeErr = q.closeDB()
		if q.closeErr != nil {
			q.closeErr = fmt.Errorf("close queue: %w", q.closeErr)
		}
	})
	return q.closeErr
}

// enter registers a running operation, or returns queue.ErrClosed.
func (q *Queue) enter() error {
	q.closeMu.RLock()
	if q.closed {
		q.closeMu.RUnlock()
		return queue.ErrClosed
	}
	return nil
}

// leave ends an operation started by a successful enter.
func (q *Queue) leave() { q.closeMu.RUnlock() }

// Publish durably enqueues msgs on name in one transaction.
func (q *Queue) Publish(ctx context.Context, name string, msgs ...queue.Message) error {
	if err := q.enter(); err != nil {
		return fmt.Errorf("publish to %q: %w", name, err)
	}
	defer q.leave()
	if name == "" {
		return errors.New("publish: empty queue name")
	}
	if len(msgs) == 0 {
		return nil
	}
	headers := make([]any, len(msgs))
	for i, m := range msgs {
		h, err := encodeHeaders(m.Headers)
		if err != nil {
			return fmt.Errorf("publish to %q: %w", name, err)
		}
		headers[i] = h
	}
	now := time.Now()
	ready, earliest := 0, int64(0)
	err := q.write(ctx, len(msgs) > 1, func(w *wtx) error {
		ready, earliest = 0, 0
		ins, insDelayed := w.stmt(stInsert), w.stmt(stInsertDelayed)
		for i, m := range msgs {
			var err error
			if m.Delay > 0 {
				at := now.Add(m.Delay).UnixNano()
				if earliest == 0 || at < earliest {
					earliest = at
				}
				_, err = insDelayed.ExecContext(w.ctx, name, blob(m.Body), headers[i], at)
			} else {
				ready++
				_, err = ins.ExecContext(w.ctx, name, blob(m.Body), headers[i])
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("publish %d messages to %q: %w", len(msgs), name, err)
	}
	if earliest != 0 {
		q.schedule(name, earliest)
	}
	if ready > 0 {
		q.notify(name, ready)
	}
	return nil
}

// Len returns the number of ready and delayed messages of name.
func (q *Queue) Len(ctx context.Context, name string) (int, error) {
	if err := q.enter(); err != nil {
		return 0, fmt.Errorf("count queue %q: %w", name, err)
	}
	defer q.leave()
	var n int
	if err := q.stmts[stLen].QueryRowContext(ctx, name).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queue %q: %w", name, err)
	}
	return n, nil
}

// Consume starts a consumer of name; see queue.Queue.
func (q *Queue) Consume(ctx context.Context, name string, opts queue.ConsumeOptions) (<-chan queue.Delivery, error) {
	if err := q.enter(); err != nil {
		return nil, fmt.Errorf("consume %q: %w", name, err)
	}
	defer q.leave()
	if name == "" {
		return nil, errors.New("consume: empty queue name")
	}
	if opts.Prefetch < 0 {
		return nil, fmt.Errorf("consume %q: negative prefetch %d", name, opts.Prefetch)
	}
	c := &consumer{
		q:        q,
		queue:    name,
		prefetch: max(opts.Prefetch, 1),
		held:     make(map[int64]*delivery),
		space:    make(chan struct{}, 1),
		wake:     make(chan struct{}, 1),
	}
	out := make(chan queue.Delivery)
	q.attach(c)
	q.workers.Add(1)
	go c.run(ctx, out)
	return out, nil
}

// maxBatch bounds the writes committed in one transaction.
const maxBatch = 256

// writeReq is one write waiting for its group commit.
type writeReq struct {
	fn     func(w *wtx) error
	atomic bool // fn runs several statements that must not be committed in part
	done   chan error
}

// wtx is the transaction of one group commit.
type wtx struct {
	ctx   context.Context
	tx    *sql.Tx
	q     *Queue
	stmts [numStmts]*sql.Stmt
}

// stmt returns prepared statement i bound to the transaction.
func (w *wtx) stmt(i int) *sql.Stmt {
	if w.stmts[i] == nil {
		w.stmts[i] = w.tx.StmtContext(w.ctx, w.q.stmts[i])
	}
	return w.stmts[i]
}

// write runs fn in the next group commit and returns once that commit is
// done. ctx bounds only the wait for a place in the queue of writes: a write
// that has started is not abandoned, so that its outcome is known.
func (q *Queue) write(ctx context.Context, atomic bool, fn func(w *wtx) error) error {
	r := writeReq{fn: fn, atomic: atomic, done: make(chan error, 1)}
	select {
	case q.writes <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-r.done
}

// writeLoop commits writes in groups: whatever arrived while the previous
// commit ran goes into the next one, so a lone write waits for nothing.
func (q *Queue) writeLoop() {
	defer q.writer.Done()
	batch := make([]writeReq, 0, maxBatch)
	for {
		select {
		case <-q.stopWrites:
			return
		case r := <-q.writes:
			batch = append(batch[:0], r)
		}
		// Let writers that are ready to run join this commit: a yield
		// costs far less than a commit.
		for range 2 {
			runtime.Gosched()
		fill:
			for len(batch) < maxBatch {
				select {
				case r := <-q.writes:
					batch = append(batch, r)
				default:
					break fill
				}
			}
		}
		q.commit(batch)
	}
}

// commit runs batch in one transaction and answers each write. A failed
// write does not fail the others; atomic ones are rolled back to a
// savepoint.
func (q *Queue) commit(batch []writeReq) {
	q.stats.commits.Add(1)
	q.stats.writes.Add(int64(len(batch)))
	ctx := context.Background()
	errs := make([]error, len(batch))
	tx, err := q.db.BeginTx(ctx, nil)
	if err == nil {
		w := &wtx{ctx: ctx, tx: tx, q: q}
		if len(batch) == 1 {
			// Alone, a failed write rolls back the transaction.
			err = batch[0].fn(w)
		} else {
			for i, r := range batch {
				if errs[i], err = w.run(r); err != nil {
					break
				}
			}
		}
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		} else {
			err = tx.Commit()
		}
	}
	for i, r := range batch {
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
	}
}

// run runs one write of a batch. It returns the write's own error, and an
// error that dooms the whole transaction.
func (w *wtx) run(r writeReq) (opErr, txErr error) {
	if !r.atomic {
		return r.fn(w), nil
	}
	if _, err := w.tx.ExecContext(w.ctx, "SAVEPOINT w"); err != nil {
		return nil, err
	}
	if opErr = r.fn(w); opErr != nil {
		if _, err := w.tx.ExecContext(w.ctx, "ROLLBACK TO w"); err != nil {
			return opErr, err
		}
	}
	_, txErr = w.tx.ExecContext(w.ctx, "RELEASE w")
	return opErr, txErr
}

// waitq is the consumers of one queue that wait for messages.
type waitq struct {
	consumers int         // attached consumers
	seq       uint64      // count of notifies
	unserved  uint64      // seq of the last notify that woke fewer consumers than it announced messages
	waiters   []*consumer // waiting, first come first woken
}

// attach registers c as a consumer of its queue.
func (q *Queue) attach(c *consumer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.waits[c.queue]
	if !ok {
		w = &waitq{}
		q.waits[c.queue] = w
	}
	w.consumers++
}

// detach unregisters c. A wake-up c got but did not use goes to another
// consumer.
func (q *Queue) detach(c *consumer) {
	q.mu.Lock()
	w := q.waits[c.queue]
	w.waiters = slices.DeleteFunc(w.waiters, func(o *consumer) bool { return o == c })
	if w.consumers--; w.consumers == 0 {
		delete(q.waits, c.queue)
	}
	q.mu.Unlock()
	select {
	case <-c.wake:
		q.notify(c.queue, 1)
	default:
	}
}

// seq returns the notify count of c's queue, to pass to sleep.
func (q *Queue) seq(c *consumer) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waits[c.queue].seq
}

// sleep queues c for a wake-up, unless a notify since seq announced
// messages that no consumer was woken for: such a notify, coming between a
// consumer's look at the queue and its sleep, is not lost. Messages that
// consumers were woken for are theirs to claim.
func (q *Queue) sleep(c *consumer, seq uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.waits[c.queue]
	if w.unserved > seq {
		return false
	}
	w.waiters = append(w.waiters, c)
	return true
}

// notify tells the consumers of name that n more messages are ready. It
// wakes up to n sleeping consumers rather than all, so that one message does
// not send every consumer to look for it.
func (q *Queue) notify(name string, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, ok := q.waits[name]; ok {
		w.notify(n)
	}
}

// notify is Queue.notify with q.mu held.
func (w *waitq) notify(n int) {
	w.seq++
	k := min(n, len(w.waiters))
	if k < n {
		w.unserved = w.seq
	}
	for _, c := range w.waiters[:k] {
		c.wake <- struct{}{} // cannot block: c was a waiter, so its buffer is empty
	}
	w.waiters = slices.Delete(w.waiters, 0, k)
}

// claim marks up to n ready messages of c's queue held by c.
func (q *Queue) claim(ctx context.Context, c *consumer, n int) ([]*delivery, error) {
	token := q.tokens.Add(1)
	var ds []*delivery
	err := q.write(ctx, false, func(w *wtx) error {
		ds = ds[:0]
		rows, err := w.stmt(stClaim).QueryContext(w.ctx, token, c.queue, n)
		if err != nil {
			return err
		}
		for rows.Next() {
			d := &delivery{c: c, token: token}
			var headers sql.NullString
			if err = rows.Scan(&d.id, &d.body, &headers, &d.attempt, &d.redelivered); err != nil {
				break
			}
			if d.headers, err = decodeHeaders(headers); err != nil {
				err = fmt.Errorf("message %d: %w", d.id, err)
				break
			}
			ds = append(ds, d)
		}
		if err = errors.Join(err, rows.Err(), rows.Close()); err != nil {
			// Hand back what the claim marked before it failed.
			_, rerr := w.stmt(stReleaseClaim).ExecContext(w.ctx, token)
			return errors.Join(err, rerr)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim from %q: %w", c.queue, err)
	}
	q.stats.claims.Add(1)
	q.stats.claimed.Add(int64(len(ds)))
	// RETURNING gives no order.
	slices.SortFunc(ds, func(a, b *delivery) int { return cmp.Compare(a.id, b.id) })
	return ds, nil
}

// releaseAll makes ds ready again; redelivered marks them as seen by the
// consumer's user.
func (q *Queue) releaseAll(ctx context.Context, name string, ds []*delivery, redelivered bool) {
	if len(ds) == 0 {
		return
	}
	flag := 0
	if redelivered {
		flag = 1
	}
	err := q.write(ctx, len(ds) > 1, func(w *wtx) error {
		rel := w.stmt(stRelease)
		for _, d := range ds {
			if _, err := rel.ExecContext(w.ctx, flag, d.id, d.token); err != nil {
				return fmt.Errorf("message %d: %w", d.id, err)
			}
		}
		return nil
	})
	if err != nil {
		// They are still marked held, and so recovered at the next Open.
		q.log.Error("release deliveries", "queue", name, "count", len(ds), "err", err)
		return
	}
	q.notify(name, len(ds))
}

// schedule makes the scheduler wake name's consumers at readyAt.
func (q *Queue) schedule(name string, readyAt int64) {
	q.mu.Lock()
	if at, ok := q.delayed[name]; !ok || readyAt < at {
		q.delayed[name] = readyAt
	}
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// scheduleLoop makes delayed messages ready when they are due, sleeping on a
// single timer until the earliest one.
func (q *Queue) scheduleLoop() {
	defer q.workers.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		next, ok := int64(0), false
		for _, at := range q.delayed {
			if !ok || at < next {
				next, ok = at, true
			}
		}
		q.mu.Unlock()
		var due <-chan time.Time
		if ok {
			timer.Reset(time.Until(time.Unix(0, next)))
			due = timer.C
		} else {
			timer.Stop()
		}
		select {
		case <-q.done:
			return
		case <-q.kick:
		case <-due:
			q.promoteDue()
		}
	}
}

// promoteDue makes the due delayed messages of every queue ready.
func (q *Queue) promoteDue() {
	now := time.Now().UnixNano()
	var names []string
	q.mu.Lock()
	for name, at := range q.delayed {
		if at <= now {
			names = append(names, name)
			// Taken out before querying, so a Retry committed after the
			// query below re-adds its own entry.
			delete(q.delayed, name)
		}
	}
	q.mu.Unlock()
	for _, name := range names {
		var promoted int64
		var next sql.NullInt64
		err := q.write(context.Background(), false, func(w *wtx) error {
			res, err := w.stmt(stPromote).ExecContext(w.ctx, name, now)
			if err != nil {
				return err
			}
			if promoted, err = res.RowsAffected(); err != nil {
				return err
			}
			return w.stmt(stNextDelayed).QueryRowContext(w.ctx, name).Scan(&next)
		})
		if err != nil {
			q.log.Error("promote delayed messages", "queue", name, "err", err)
			q.schedule(name, now+int64(time.Second))
			continue
		}
		if promoted > 0 {
			q.notify(name, int(promoted))
		}
		if next.Valid {
			q.schedule(name, next.Int64)
		}
	}
}

// errNotHeld reports a settle of a row that its delivery no longer holds,
// which the consumer bookkeeping should make impossible.
var errNotHeld = errors.New("message no longer held by this delivery")

// consumer is one Consume call.
type consumer struct {
	q        *Queue
	queue    string
	prefetch int
	space    chan struct{} // signalled when a delivery is settled
	wake     chan struct{} // signalled by notify when c sleeps

	mu      sync.Mutex
	held    map[int64]*delivery // claimed and not settled, sent or not
	stopped bool
}

// run claims and sends deliveries until ctx is cancelled or the queue closes,
// then returns unsettled deliveries to the queue and closes out.
func (c *consumer) run(ctx context.Context, out chan<- queue.Delivery) {
	q := c.q
	defer q.workers.Done()
	defer close(out)
	defer c.stop(context.WithoutCancel(ctx))
	// Claims must not be cut short by cancellation: the outcome of a
	// committed claim has to be known to be handed back.
	dbctx := context.WithoutCancel(ctx)
	var retryAfter time.Duration
	for {
		c.mu.Lock()
		free := c.prefetch - len(c.held)
		c.mu.Unlock()
		if free <= 0 {
			select {
			case <-ctx.Done():
				return
			case <-q.done:
				return
			case <-c.space:
			}
			continue
		}
		seq := q.seq(c)
		ds, err := q.claim(dbctx, c, free)
		if err != nil {
			retryAfter = min(max(2*retryAfter, 50*time.Millisecond), 5*time.Second)
			q.log.Error("claim messages", "queue", c.queue, "err", err, "retry_in", retryAfter)
			select {
			case <-ctx.Done():
				return
			case <-q.done:
				return
			case <-time.After(retryAfter):
			}
			continue
		}
		retryAfter = 0
		c.mu.Lock()
		for _, d := range ds {
			c.held[d.id] = d
		}
		c.mu.Unlock()
		for _, d := range ds {
			select {
			case out <- d:
				d.sent = true
			case <-ctx.Done():
				return
			case <-q.done:
				return
			}
		}
		if len(ds) == free || !q.sleep(c, seq) {
			continue
		}
		// The queue was empty: settles free no messages to claim, only
		// a notify brings news.
		select {
		case <-ctx.Done():
			return
		case <-q.done:
			return
		case <-c.wake:
		}
	}
}

// stop hands the consumer's unsettled deliveries back to the queue. A
// delivery being settled right now is left to its settle, which hands it back
// itself if it fails.
func (c *consumer) stop(ctx context.Context) {
	c.q.detach(c)
	var sent, unsent []*delivery
	c.mu.Lock()
	c.stopped = true
	for id, d := range c.held {
		if d.busy {
			continue
		}
		d.done, d.released = true, true
		delete(c.held, id)
		if d.sent {
			sent = append(sent, d)
		} else {
			unsent = append(unsent, d)
		}
	}
	c.mu.Unlock()
	c.q.releaseAll(ctx, c.queue, sent, true)
	c.q.releaseAll(ctx, c.queue, unsent, false)
}

// delivery is a queue.Delivery of a row held under a claim token.
type delivery struct {
	c           *consumer
	id, token   int64
	body        []byte
	headers     map[string]string
	attempt     int
	redelivered bool
	sent        bool // only touched by the consumer goroutine

	// Guarded by c.mu.
	busy     bool // a settle is running
	done     bool // settled or handed back
	released bool // handed back to the queue when the consumer stopped
}

// Body returns the message body.
func (d *delivery) Body() []byte { return d.body }

// Headers returns a copy of the message headers.
func (d *delivery) Headers() map[string]string { return maps.Clone(d.headers) }

// Attempt returns 1 on the first delivery and grows with each Retry.
func (d *delivery) Attempt() int { return d.attempt }

// Redelivered reports that the message was delivered before and not settled.
func (d *delivery) Redelivered() bool { return d.redelivered }

// Ack deletes the message; it returns once its group commit is done.
func (d *delivery) Ack(ctx context.Context) error {
	return d.settle(ctx, "ack", func(q *Queue) error {
		return q.write(ctx, false, func(w *wtx) error {
			return checkHeld(w.stmt(stDelete).ExecContext(w.ctx, d.id, d.token))
		})
	})
}

// Retry makes the message deliverable again after delay, or dead-letters it
// when its attempts are used up.
func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	return d.settle(ctx, "retry", func(q *Queue) error {
		if d.attempt >= q.maxAttempts {
			return q.deadLetter(ctx, d, queue.ReasonMaxAttempts)
		}
		return q.requeue(ctx, d, stRetry, delay)
	})
}

// Postpone makes the message deliverable again after delay without counting
// an attempt.
func (d *delivery) Postpone(ctx context.Context, delay time.Duration) error {
	return d.settle(ctx, "postpone", func(q *Queue) error {
		return q.requeue(ctx, d, stPostpone, delay)
	})
}

// requeue releases d's row with statement st (stRetry counts an attempt,
// stPostpone does not), ready after delay.
func (q *Queue) requeue(ctx context.Context, d *delivery, st int, delay time.Duration) error {
	state, readyAt := stateReady, int64(0)
	if delay > 0 {
		state, readyAt = stateDelayed, time.Now().Add(delay).UnixNano()
	}
	err := q.write(ctx, false, func(w *wtx) error {
		return checkHeld(w.stmt(st).ExecContext(w.ctx, state, readyAt, d.id, d.token))
	})
	if err != nil {
		return err
	}
	if state == stateDelayed {
		q.schedule(d.c.queue, readyAt)
	} else {
		q.notify(d.c.queue, 1)
	}
	return nil
}

// DeadLetter moves the message to the dead-letter queue with reason.
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	return d.settle(ctx, "dead-letter", func(q *Queue) error {
		return q.deadLetter(ctx, d, reason)
	})
}

// checkHeld turns the result of a statement on a held row into an error
// unless it changed exactly that row.
func checkHeld(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(errNotHeld, err)
	}
	return nil
}

// deadLetter moves d's row to the end of its dead-letter queue.
func (q *Queue) deadLetter(ctx context.Context, d *delivery, reason string) error {
	h := maps.Clone(d.headers)
	if h == nil {
		h = make(map[string]string, 2)
	}
	h[queue.HeaderReason] = reason
	h[queue.HeaderSourceQueue] = d.c.queue
	headers, err := encodeHeaders(h)
	if err != nil {
		return err
	}
	dlq := queue.DeadLetterQueue(d.c.queue)
	err = q.write(ctx, true, func(w *wtx) error {
		if err := checkHeld(w.stmt(stDelete).ExecContext(w.ctx, d.id, d.token)); err != nil {
			return err
		}
		_, err := w.stmt(stInsert).ExecContext(w.ctx, dlq, blob(d.body), headers)
		return err
	})
	if err != nil {
		return err
	}
	q.notify(dlq, 1)
	return nil
}

// settle runs op as the one settle of d.
func (d *delivery) settle(ctx context.Context, action string, op func(q *Queue) error) error {
	c, q := d.c, d.c.q
	if err := q.enter(); err != nil {
		return fmt.Errorf("%s message %d: %w", action, d.id, err)
	}
	defer q.leave()
	c.mu.Lock()
	switch {
	case d.released:
		c.mu.Unlock()
		return fmt.Errorf("%s message %d: returned to queue %q when its consumer stopped: %w", action, d.id, c.queue, queue.ErrSettled)
	case d.done || d.busy:
		c.mu.Unlock()
		return fmt.Errorf("%s message %d: %w", action, d.id, queue.ErrSettled)
	}
	d.busy = true
	c.mu.Unlock()

	err := op(q)

	handBack := false
	c.mu.Lock()
	d.busy = false
	switch {
	case err == nil:
		d.done = true
		delete(c.held, d.id)
	case c.stopped:
		// The consumer is gone and skipped d while it was busy.
		d.done, d.released, handBack = true, true, true
		delete(c.held, d.id)
	}
	c.mu.Unlock()
	if err == nil {
		select {
		case c.space <- struct{}{}:
		default:
		}
	}
	if handBack {
		q.releaseAll(context.WithoutCancel(ctx), c.queue, []*delivery{d}, true)
	}
	if err != nil {
		return fmt.Errorf("%s message %d of %q: %w", action, d.id, c.queue, err)
	}
	return nil
}

// encodeHeaders returns h as JSON, or nil when empty.
func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return string(b), nil
}

// decodeHeaders parses headers stored by encodeHeaders.
func decodeHeaders(s sql.NullString) (map[string]string, error) {
	if !s.Valid || s.String == "" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s.String), &h); err != nil {
		return nil, fmt.Errorf("decode headers: %w", err)
	}
	return h, nil
}

// blob returns b, never nil: the body column is NOT NULL.
func blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
