// Package memqueue is a queue.Queue that keeps chosen queues in memory,
// bounded, and passes every other queue to a durable queue.Queue.
//
// It is meant for the embedded grid, where the loader, the crawler and the
// indexer run in one process: there the queues between them need not be
// durable, because the transaction index already is. A page whose contract
// is lost with the process is still to-be-parsed or to-be-indexed in the
// index, and the coordinator republishes that work when the grid starts
// again. Keeping those queues in memory spares every page the writes,
// claims and deletes of a queue table.
//
// An in-memory queue keeps every promise of the queue.Queue contract but
// durability: delivery is at least once within the process, a consumer
// holds at most its prefetch count of unsettled deliveries, first
// deliveries are FIFO, Retry and Postpone delay a message (Retry counting
// an attempt, dead-lettering past Options.MaxAttempts), settling twice
// returns queue.ErrSettled, and the unsettled deliveries of a stopped
// consumer go back to the queue. Messages do not survive Close or the
// process.
//
// Dead letters are the exception to "lost with the process": they are
// what an operator must be able to look at, so DeadLetter publishes the
// message to the durable queue, on queue.DeadLetterQueue of its queue, with
// the usual headers (queue.HeaderReason, queue.HeaderSourceQueue).
//
// Each in-memory queue is bounded: it holds at most its bound of messages,
// ready, delayed and unsettled together, and Publish blocks (until its
// context is done) while the queue is full and has a consumer. That is the
// pipeline's back-pressure: a loader that outruns the crawler waits
// instead of filling memory. A queue without a consumer cannot make room,
// so Publish does not wait there: at shutdown the consumers stop before
// the publishers' last flush, which would otherwise stall until its
// deadline for messages that are lost with the process anyway. Blocking publishes cannot deadlock as long as no cycle
// of stages publishes into each other's bounded queues. In the grid:
//
//	loader  → crawler_pending (bounded)
//	crawler → index_pending (bounded), loader_pending (durable, unbounded)
//	indexer → nothing
//	coordinator (start-up rebuild, recovery sweep) → crawler_pending (bounded), loader_pending (durable)
//
// The indexer always drains index_pending, so the crawler's publishes
// complete; then the crawler drains crawler_pending, so the loader's and
// the coordinator's complete. Retry, Postpone and a stopped consumer's
// returns never need room: the message is already counted.
package memqueue

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// Defaults of Options.
const (
	DefaultMaxAttempts = 5
	DefaultBound       = 1024
)

// Options configure a Queue.
type Options struct {
	// Durable holds every queue that InMemory does not accept, and receives
	// the dead letters of the in-memory ones. The Queue owns it: Close
	// closes it. Required.
	Durable queue.Queue
	// InMemory reports whether the queue named name is kept in memory; nil
	// keeps every queue but the dead-letter queues (queue.DeadLetterQueue)
	// in memory.
	InMemory func(name string) bool
	// Bound returns the most messages the in-memory queue name holds (ready,
	// delayed and unsettled); nil, or a result below 1, means DefaultBound.
	Bound func(name string) int
	// MaxBytes returns the most body bytes the in-memory queue name holds
	// (ready, delayed and unsettled), a second bound beside Bound for
	// queues whose messages vary in size (documents); nil, or a result
	// below 1, means none. A message larger than it is taken into an
	// empty queue.
	MaxBytes func(name string) int64
	// MaxAttempts is the number of deliveries after which Retry
	// dead-letters instead; 0 means DefaultMaxAttempts.
	MaxAttempts int
}

// Queue is a queue.Queue whose chosen queues live in memory. It is safe
// for concurrent use.
type Queue struct {
	durable     queue.Queue
	inMemory    func(string) bool
	bound       func(string) int
	maxBytes    func(string) int64
	maxAttempts int

	mu     sync.Mutex
	queues map[string]*memq
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

var _ queue.Queue = (*Queue)(nil)

// New returns a Queue over opts.Durable.
func New(opts Options) (*Queue, error) {
	if opts.Durable == nil {
		return nil, errors.New("memqueue: Options.Durable is nil (dead letters need a durable queue)")
	}
	q := &Queue{
		durable: opts.Durable, inMemory: opts.InMemory, bound: opts.Bound, maxBytes: opts.MaxBytes, maxAttempts: opts.MaxAttempts,
		queues: map[string]*memq{}, done: make(chan struct{}),
	}
	if q.maxAttempts <= 0 {
		q.maxAttempts = DefaultMaxAttempts
	}
	return q, nil
}

// memq is one in-memory queue. Its fields are guarded by Queue.mu.
type memq struct {
	name  string
	bound int
	// maxBytes bounds bytes, the body bytes of the messages m holds
	// (ready, delayed, unsettled); 0: no bound.
	maxBytes, bytes int64
	ready           fifo
	delayed         delayHeap
	// unsettled counts deliveries handed to a consumer (or on their way to
	// it) and not yet settled.
	unsettled int
	// consumers counts the running consumers.
	consumers int
	// changed is closed, and replaced, whenever something a waiting
	// publisher or consumer may be waiting for happens: a message became
	// ready, room was made, a consumer's delivery was settled.
	changed chan struct{}
	seq     uint64 // orders delayed messages due at the same time
}

// message is one message in memory.
type message struct {
	body        []byte
	headers     map[string]string
	attempt     int
	redelivered bool
	readyAt     time.Time
	seq         uint64
}

// again returns a copy of msg delivered again: the delivery that held
// msg may still read it, without the lock.
func (msg *message) again() *message {
	c := *msg
	c.redelivered = true
	return &c
}

func (m *memq) total() int { return m.ready.len() + len(m.delayed) + m.unsettled }

// broadcast wakes every waiter of m. Callers hold Queue.mu.
func (m *memq) broadcast() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// promote moves the delayed messages due by now to the ready ones and
// returns the time the next delayed message is due (zero if none).
func (m *memq) promote(now time.Time) time.Time {
	for len(m.delayed) > 0 {
		next := m.delayed[0]
		if next.readyAt.After(now) {
			return next.readyAt
		}
		heap.Pop(&m.delayed)
		m.ready.push(next)
	}
	return time.Time{}
}

// delay puts msg back after d. Callers hold Queue.mu.
func (m *memq) delay(msg *message, d time.Duration) {
	if d <= 0 {
		msg.readyAt = time.Time{}
		m.ready.push(msg)
		return
	}
	m.seq++
	msg.readyAt, msg.seq = time.Now().Add(d), m.seq
	heap.Push(&m.delayed, msg)
}

// get returns the in-memory queue name, creating it. Callers hold q.mu.
func (q *Queue) get(name string) *memq {
	m := q.queues[name]
	if m == nil {
		b := 0
		if q.bound != nil {
			b = q.bound(name)
		}
		if b < 1 {
			b = DefaultBound
		}
		m = &memq{name: name, bound: b, changed: make(chan struct{})}
		if q.maxBytes != nil {
			m.maxBytes = max(q.maxBytes(name), 0)
		}
		q.queues[name] = m
	}
	return m
}

// memory reports whether name is one of the in-memory queues.
func (q *Queue) memory(name string) bool {
	if q.inMemory == nil {
		return !isDeadLetterQueue(name)
	}
	return q.inMemory(name)
}

// isDeadLetterQueue reports whether name is the dead-letter queue of some
// queue.
func isDeadLetterQueue(name string) bool {
	base := queue.DeadLetterQueue("")
	return len(name) > len(base) && name[len(name)-len(base):] == base
}

// Publish enqueues msgs on name. On an in-memory queue it blocks while the
// queue is full and has a consumer, until ctx is done, unless ctx is work on
// the queue's own deliveries (queue.ConsumerOf), which the queue then takes
// beyond its bounds; messages that found room before ctx
// ended stay enqueued (the caller publishes again, and at-least-once
// delivery allows the duplicates). Bodies are kept, not copied: callers
// must not change them afterwards.
func (q *Queue) Publish(ctx context.Context, name string, msgs ...queue.Message) error {
	if !q.memory(name) {
		if err := q.open(); err != nil {
			return err
		}
		return q.durable.Publish(ctx, name, msgs...)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(msgs) > 0 {
		if q.closed {
			return queue.ErrClosed
		}
		m := q.get(name)
		n := min(len(msgs), m.bound-m.total())
		if m.maxBytes > 0 {
			// As many as fit the byte bound, and one into an empty queue.
			room, fit := m.maxBytes-m.bytes, 0
			for fit < n && (int64(len(msgs[fit].Body)) <= room || m.total() == 0 && fit == 0) {
				room -= int64(len(msgs[fit].Body))
				fit++
			}
			n = fit
		}
		if m.consumers == 0 || queue.IsConsumerOf(ctx, name) {
			// Nobody would make room, or only the caller's own work,
			// which waits here.
			n = len(msgs)
		}
		if n > 0 {
			for _, msg := range msgs[:n] {
				mm := &message{body: msg.Body, headers: maps.Clone(msg.Headers), attempt: 1}
				m.bytes += int64(len(msg.Body))
				m.delay(mm, msg.Delay)
			}
			msgs = msgs[n:]
			m.broadcast()
			continue
		}
		wait := m.changed
		q.mu.Unlock()
		select {
		case <-wait:
		case <-q.done:
		case <-ctx.Done():
			q.mu.Lock()
			return fmt.Errorf("publish to %s: wait for room: %w", name, ctx.Err())
		}
		q.mu.Lock()
	}
	return nil
}

// Len returns the number of ready and delayed messages of name.
func (q *Queue) Len(ctx context.Context, name string) (int, error) {
	if !q.memory(name) {
		if err := q.open(); err != nil {
			return 0, err
		}
		return q.durable.Len(ctx, name)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, queue.ErrClosed
	}
	m := q.queues[name]
	if m == nil {
		return 0, nil
	}
	return m.ready.len() + len(m.delayed), nil
}

// open returns queue.ErrClosed once the queue is closed.
func (q *Queue) open() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return queue.ErrClosed
	}
	return nil
}

// Consume starts a consumer of name; see queue.Queue.
func (q *Queue) Consume(ctx context.Context, name string, opts queue.ConsumeOptions) (<-chan queue.Delivery, error) {
	if !q.memory(name) {
		if err := q.open(); err != nil {
			return nil, err
		}
		return q.durable.Consume(ctx, name, opts)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, queue.ErrClosed
	}
	c := &consumer{q: q, m: q.get(name), prefetch: max(opts.Prefetch, 1), held: map[*delivery]struct{}{}}
	c.m.consumers++
	out := make(chan queue.Delivery)
	q.wg.Go(func() { c.run(ctx, out) })
	return out, nil
}

// Close stops every consumer and closes the durable queue. The messages
// in memory are dropped.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.done)
	q.mu.Unlock()
	q.wg.Wait()
	return q.durable.Close()
}

// consumer is one Consume call. held is guarded by Queue.mu.
type consumer struct {
	q        *Queue
	m        *memq
	prefetch int
	held     map[*delivery]struct{}
	stopped  bool
}

func (c *consumer) run(ctx context.Context, out chan<- queue.Delivery) {
	defer close(out)
	defer c.stop()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.q.mu.Lock()
		if c.q.closed || ctx.Err() != nil {
			c.q.mu.Unlock()
			return
		}
		next := c.m.promote(time.Now())
		if len(c.held) < c.prefetch && c.m.ready.len() > 0 {
			msg := c.m.ready.pop()
			c.m.unsettled++
			d := &delivery{c: c, msg: msg}
			c.held[d] = struct{}{}
			c.q.mu.Unlock()
			select {
			case out <- d:
				continue
			case <-ctx.Done():
			case <-c.q.done:
			}
			// Never handed over: back to the head of the queue as it was.
			c.q.mu.Lock()
			delete(c.held, d)
			c.m.unsettled--
			c.m.ready.pushFront(msg)
			c.m.broadcast()
			c.q.mu.Unlock()
			return
		}
		wait := c.m.changed
		c.q.mu.Unlock()
		var due <-chan time.Time
		if !next.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(next))
			} else {
				timer.Reset(time.Until(next))
			}
			due = timer.C
		}
		select {
		case <-wait:
		case <-due:
		case <-ctx.Done():
		case <-c.q.done:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// stop returns the consumer's unsettled deliveries to the queue, marked
// redelivered; settling them from now on fails.
func (c *consumer) stop() {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	c.stopped = true
	c.m.consumers--
	for d := range c.held {
		if d.state != held {
			continue // a dead letter on its way: its settle decides
		}
		d.state = lost
		c.m.unsettled--
		c.m.ready.pushFront(d.msg.again())
	}
	clear(c.held)
	c.m.broadcast()
}

// Delivery states.
const (
	held     = iota // with the consumer
	settling        // being dead-lettered to the durable queue
	settled
	lost // its consumer stopped before it was settled
)

// delivery is one delivered message; state is guarded by Queue.mu.
type delivery struct {
	c     *consumer
	msg   *message
	state int
}

// Body returns the message body.
func (d *delivery) Body() []byte { return d.msg.body }

// Headers returns a copy of the message headers.
func (d *delivery) Headers() map[string]string { return maps.Clone(d.msg.headers) }

// Attempt returns 1 on the first delivery and grows with each Retry.
func (d *delivery) Attempt() int { return d.msg.attempt }

// Redelivered reports that the message was delivered before and not settled.
func (d *delivery) Redelivered() bool { return d.msg.redelivered }

// take checks that d can be settled now and removes it from its consumer.
// Callers hold Queue.mu.
func (d *delivery) take() error {
	if d.c.q.closed {
		return queue.ErrClosed
	}
	if d.state != held {
		return queue.ErrSettled
	}
	d.state = settled
	delete(d.c.held, d)
	d.c.m.unsettled--
	return nil
}

// Ack drops the message.
func (d *delivery) Ack(context.Context) error {
	q := d.c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := d.take(); err != nil {
		return err
	}
	d.c.m.bytes -= int64(len(d.msg.body))
	d.c.m.broadcast()
	return nil
}

// Retry makes the message deliverable again after delay with its attempt
// incremented, or dead-letters it when its attempts are used up.
func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	if d.msg.attempt >= d.c.q.maxAttempts {
		return d.DeadLetter(ctx, queue.ReasonMaxAttempts)
	}
	return d.requeue(delay, 1)
}

// Postpone makes the message deliverable again after delay without
// counting an attempt.
func (d *delivery) Postpone(_ context.Context, delay time.Duration) error {
	return d.requeue(delay, 0)
}

func (d *delivery) requeue(delay time.Duration, attempts int) error {
	q := d.c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := d.take(); err != nil {
		return err
	}
	m := d.c.m
	msg := &message{body: d.msg.body, headers: d.msg.headers, attempt: d.msg.attempt + attempts}
	m.delay(msg, delay)
	m.broadcast()
	return nil
}

// DeadLetter publishes the message to the dead-letter queue of its queue
// on the durable queue, with reason. If that fails the delivery stays
// unsettled (or, when its consumer stopped meanwhile, goes back to the
// queue), so the message is never lost.
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	q, m := d.c.q, d.c.m
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return queue.ErrClosed
	}
	if d.state != held {
		q.mu.Unlock()
		return queue.ErrSettled
	}
	d.state = settling
	q.mu.Unlock()

	h := maps.Clone(d.msg.headers)
	if h == nil {
		h = map[string]string{}
	}
	h[queue.HeaderReason], h[queue.HeaderSourceQueue] = reason, m.name
	err := q.durable.Publish(ctx, queue.DeadLetterQueue(m.name), queue.Message{Body: d.msg.body, Headers: h})

	q.mu.Lock()
	defer q.mu.Unlock()
	defer m.broadcast()
	switch {
	case err == nil:
		d.state = settled
		delete(d.c.held, d)
		m.unsettled--
		m.bytes -= int64(len(d.msg.body))
		return nil
	case d.c.stopped:
		d.state = lost
		m.unsettled--
		m.ready.pushFront(d.msg.again())
	default:
		d.state = held
	}
	return fmt.Errorf("dead-letter to %s: %w", queue.DeadLetterQueue(m.name), err)
}

// fifo is a queue of messages: a slice with a moving head, compacted when
// the head has passed half of it.
type fifo struct {
	items []*message
	head  int
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(m *message) { f.items = append(f.items, m) }

func (f *fifo) pushFront(m *message) {
	if f.head > 0 {
		f.head--
		f.items[f.head] = m
		return
	}
	f.items = append([]*message{m}, f.items...)
}

func (f *fifo) pop() *message {
	m := f.items[f.head]
	f.items[f.head] = nil
	f.head++
	if f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	} else if f.head > 32 && f.head*2 > len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return m
}

// delayHeap orders delayed messages by due time, then by when they were
// delayed.
type delayHeap []*message

func (h delayHeap) Len() int { return len(h) }
func (h delayHeap) Less(i, j int) bool {
	if !h[i].readyAt.Equal(h[j].readyAt) {
		return h[i].readyAt.Before(h[j].readyAt)
	}
	return h[i].seq < h[j].seq
}
func (h delayHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)   { *h = append(*h, x.(*message)) }
func (h *delayHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return m
}
