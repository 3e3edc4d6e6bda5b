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
// Consumers are woken in-process by Publish, Retry and released deliveries,
// so a ready message is claimed without polling; one scheduler goroutine
// sleeps until the earliest delayed message of any queue is due. Writes go
// through a single connection; Publish writes all its messages in one
// transaction, consumers claim up to their free prefetch slots in one
// statement, and concurrent Acks are committed together.
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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// Row states.
const (
	stateReady   = 0
	stateHeld    = 1
	stateDelayed = 2
)

// maxAckBatch bounds the acks committed in one transaction.
const maxAckBatch = 256

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

// SQL of the prepared statements.
const (
	sqlInsert = `INSERT INTO messages (queue, body, headers) VALUES (?, ?, ?)`
	sqlClaim  = `UPDATE messages SET state = 1, token = ?1
		WHERE id IN (SELECT id FROM messages WHERE state = 0 AND queue = ?2 ORDER BY id LIMIT ?3)
		RETURNING id, body, headers, attempt, redelivered`
	sqlDelete  = `DELETE FROM messages WHERE id = ? AND token = ? AND state = 1`
	sqlRelease = `UPDATE messages SET state = 0, token = 0, redelivered = MAX(redelivered, ?)
		WHERE id = ? AND token = ? AND state = 1`
	sqlRetry = `UPDATE messages SET state = ?, ready_at = ?, attempt = attempt + 1, redelivered = 0, token = 0
		WHERE id = ? AND token = ? AND state = 1`
	sqlLen = `SELECT COUNT(*) FROM messages WHERE state IN (0, 2) AND queue = ?`
)

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

	insert, claim, del, release, retry, length *sql.Stmt

	// closeMu guards closed; operations hold it for reading while they run,
	// so that Close waits for them before stopping goroutines and the
	// database.
	closeMu   sync.RWMutex
	closed    bool
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}  // closed by Close: consumers and the scheduler stop
	consumers sync.WaitGroup // consumer goroutines
	acks      chan ackReq
	stopAcks  chan struct{}
	workers   sync.WaitGroup // ack batcher and scheduler

	tokens atomic.Int64 // claim tokens; unique within this process

	mu      sync.Mutex
	wake    map[string]chan struct{} // per queue, closed when it has news; present only while someone waits
	delayed map[string]int64         // per queue, earliest ready_at (unix ns) of its delayed messages
	kick    chan struct{}            // tells the scheduler that delayed changed
}

var _ queue.Queue = (*Queue)(nil)

// Open opens or creates the queue file at path.
func Open(path string, opts Options) (*Queue, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open queue %q: path must be non-empty and contain no '?' or '#'", path)
	}
	if strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("open queue %q: want a file path, not a URI or memory database", path)
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
		acks:        make(chan ackReq, maxAckBatch),
		stopAcks:    make(chan struct{}),
		wake:        make(map[string]chan struct{}),
		delayed:     make(map[string]int64),
		kick:        make(chan struct{}, 1),
	}
	if err := q.init(); err != nil {
		return nil, errors.Join(fmt.Errorf("open queue %q: %w", path, err), q.closeDB())
	}
	q.workers.Add(2)
	go q.ackLoop()
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
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&q.insert, sqlInsert}, {&q.claim, sqlClaim}, {&q.del, sqlDelete},
		{&q.release, sqlRelease}, {&q.retry, sqlRetry}, {&q.length, sqlLen},
	} {
		s, err := q.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.stmt = s
	}
	return nil
}

// closeDB closes the prepared statements and the database.
func (q *Queue) closeDB() error {
	var errs []error
	for _, s := range []*sql.Stmt{q.insert, q.claim, q.del, q.release, q.retry, q.length} {
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
		q.consumers.Wait()
		close(q.stopAcks)
		q.workers.Wait()
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
	if len(msgs) == 1 {
		if _, err := q.insert.ExecContext(ctx, name, blob(msgs[0].Body), headers[0]); err != nil {
			return fmt.Errorf("publish to %q: %w", name, err)
		}
	} else if err := q.inTx(ctx, func(tx *sql.Tx) error {
		ins := tx.StmtContext(ctx, q.insert)
		for i, m := range msgs {
			if _, err := ins.ExecContext(ctx, name, blob(m.Body), headers[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("publish %d messages to %q: %w", len(msgs), name, err)
	}
	q.notify(name)
	return nil
}

// Len returns the number of ready and delayed messages of name.
func (q *Queue) Len(ctx context.Context, name string) (int, error) {
	if err := q.enter(); err != nil {
		return 0, fmt.Errorf("count queue %q: %w", name, err)
	}
	defer q.leave()
	var n int
	if err := q.length.QueryRowContext(ctx, name).Scan(&n); err != nil {
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
	}
	out := make(chan queue.Delivery)
	q.consumers.Add(1)
	go c.run(ctx, out)
	return out, nil
}

// inTx runs f in a transaction and commits it.
func (q *Queue) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// notify wakes the consumers waiting for messages on name.
func (q *Queue) notify(name string) {
	q.mu.Lock()
	if ch, ok := q.wake[name]; ok {
		close(ch)
		delete(q.wake, name)
	}
	q.mu.Unlock()
}

// waitChan returns a channel closed at the next notify of name. Taking it
// before looking for messages means no notify can be missed.
func (q *Queue) waitChan(name string) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch, ok := q.wake[name]
	if !ok {
		ch = make(chan struct{})
		q.wake[name] = ch
	}
	return ch
}

// claimBatch marks up to n ready messages of c's queue held by c.
func (q *Queue) claimBatch(ctx context.Context, c *consumer, n int) ([]*delivery, error) {
	token := q.tokens.Add(1)
	rows, err := q.claim.QueryContext(ctx, token, c.queue, n)
	if err != nil {
		return nil, fmt.Errorf("claim from %q: %w", c.queue, err)
	}
	var ds []*delivery
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
		// The claim may have been committed: hand its rows back.
		_, rerr := q.db.ExecContext(ctx, `UPDATE messages SET state = 0, token = 0 WHERE token = ? AND state = 1`, token)
		return nil, errors.Join(fmt.Errorf("claim from %q: %w", c.queue, err), rerr)
	}
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
	err := q.inTx(ctx, func(tx *sql.Tx) error {
		rel := tx.StmtContext(ctx, q.release)
		for _, d := range ds {
			if _, err := rel.ExecContext(ctx, flag, d.id, d.token); err != nil {
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
	q.notify(name)
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
	ctx := context.Background()
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
		res, err := q.db.ExecContext(ctx,
			`UPDATE messages SET state = 0, ready_at = 0 WHERE state = 2 AND queue = ? AND ready_at <= ?`, name, now)
		if err != nil {
			q.log.Error("promote delayed messages", "queue", name, "err", err)
			q.schedule(name, now+int64(time.Second))
			continue
		}
		if n, _ := res.RowsAffected(); n > 0 {
			q.notify(name)
		}
		var next sql.NullInt64
		if err := q.db.QueryRowContext(ctx,
			`SELECT MIN(ready_at) FROM messages WHERE state = 2 AND queue = ?`, name).Scan(&next); err != nil {
			q.log.Error("find next delayed message", "queue", name, "err", err)
			q.schedule(name, now+int64(time.Second))
			continue
		}
		if next.Valid {
			q.schedule(name, next.Int64)
		}
	}
}

// ackReq is one Ack waiting for its group commit.
type ackReq struct {
	id, token int64
	done      chan error
}

// errNotHeld reports a settle of a row that its delivery no longer holds,
// which the consumer bookkeeping should make impossible.
var errNotHeld = errors.New("message no longer held by this delivery")

// ackLoop commits acks in groups: whatever arrived while the previous commit
// ran goes into the next one, so a lone Ack waits for nothing.
func (q *Queue) ackLoop() {
	defer q.workers.Done()
	batch := make([]ackReq, 0, maxAckBatch)
	for {
		select {
		case <-q.stopAcks:
			return
		case r := <-q.acks:
			batch = append(batch[:0], r)
		}
	fill:
		for len(batch) < maxAckBatch {
			select {
			case r := <-q.acks:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		q.commitAcks(batch)
	}
}

// commitAcks deletes the acked rows in one transaction and answers each Ack.
func (q *Queue) commitAcks(batch []ackReq) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	err := q.inTx(ctx, func(tx *sql.Tx) error {
		del := tx.StmtContext(ctx, q.del)
		for i, r := range batch {
			res, err := del.ExecContext(ctx, r.id, r.token)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				errs[i] = errors.Join(errNotHeld, err)
			}
		}
		return nil
	})
	for i, r := range batch {
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
	}
}

// consumer is one Consume call.
type consumer struct {
	q        *Queue
	queue    string
	prefetch int
	space    chan struct{} // signalled when a delivery is settled

	mu      sync.Mutex
	held    map[int64]*delivery // claimed and not settled, sent or not
	stopped bool
}

// run claims and sends deliveries until ctx is cancelled or the queue closes,
// then returns unsettled deliveries to the queue and closes out.
func (c *consumer) run(ctx context.Context, out chan<- queue.Delivery) {
	q := c.q
	defer q.consumers.Done()
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
		wake := q.waitChan(c.queue)
		ds, err := q.claimBatch(dbctx, c, free)
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
		if len(ds) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-q.done:
				return
			case <-wake:
			}
			continue
		}
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
	}
}

// stop hands the consumer's unsettled deliveries back to the queue. A
// delivery being settled right now is left to its settle, which hands it back
// itself if it fails.
func (c *consumer) stop(ctx context.Context) {
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
		r := ackReq{id: d.id, token: d.token, done: make(chan error, 1)}
		select {
		case q.acks <- r:
		case <-ctx.Done():
			return ctx.Err()
		}
		return <-r.done
	})
}

// Retry makes the message deliverable again after delay, or dead-letters it
// when its attempts are used up.
func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	return d.settle(ctx, "retry", func(q *Queue) error {
		if d.attempt >= q.maxAttempts {
			return q.deadLetter(ctx, d, queue.ReasonMaxAttempts)
		}
		state, readyAt := stateReady, int64(0)
		if delay > 0 {
			state, readyAt = stateDelayed, time.Now().Add(delay).UnixNano()
		}
		res, err := q.retry.ExecContext(ctx, state, readyAt, d.id, d.token)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(errNotHeld, err)
		}
		if state == stateDelayed {
			q.schedule(d.c.queue, readyAt)
		} else {
			q.notify(d.c.queue)
		}
		return nil
	})
}

// DeadLetter moves the message to the dead-letter queue with reason.
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	return d.settle(ctx, "dead-letter", func(q *Queue) error {
		return q.deadLetter(ctx, d, reason)
	})
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
	err = q.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, q.del).ExecContext(ctx, d.id, d.token)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(errNotHeld, err)
		}
		_, err = tx.StmtContext(ctx, q.insert).ExecContext(ctx, dlq, blob(d.body), headers)
		return err
	})
	if err != nil {
		return err
	}
	q.notify(dlq)
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
	if err == nil || handBack {
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
