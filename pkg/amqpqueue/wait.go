package amqpqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Wait queues and their movers.
//
// A delayed message (Retry, Postpone, Publish with a Delay) waits in a wait
// queue of its queue q, q+".wait."+bucket, with its due time (HeaderDue) and
// its release time (HeaderRelease: the due time, or the end of the longest
// bucket for a longer delay). The queues themselves are plain quorum queues:
// no TTL, no dead-lettering. Every process that consumes q runs a mover for
// each wait queue of q that exists. A mover reads its wait queue from the
// head (basic.get), holds the head until its release, publishes it to q (or,
// when it is not due yet, to the wait queue of what remains), waits for the
// broker's confirm and only then acks it: a mover that dies, or whose node
// does, leaves the message in its wait queue for the next mover (at least
// once). A head released more than holdMax from now is handed back at once
// (basic.nack with requeue, which puts it back at the head of a quorum
// queue) and asked for again holdMax before its release, so that no message
// is held longer than RabbitMQ's consumer timeout allows (30 min by
// default).
//
// The messages of a wait queue are released in the order they came. All of
// them waited at least the previous bucket's length and at most their own
// bucket's, so one is held up behind an earlier one by less than the width
// of its bucket, and none is released early. A mover polls its empty queue
// every previous bucket's length (a message put into a bucket waits longer
// than that, so polling never makes it late) and at once when its own
// process has put a message into it.
//
// The movers of a process share a connection of their own, apart from its
// consumers and publishers: RabbitMQ 3.10 answers a basic.get on a quorum
// queue whose Raft member is not running (declared a moment ago, or during
// an election) with a connection error (541 INTERNAL_ERROR, noproc), which
// would otherwise take the consumers' deliveries down with it.
//
// This replaces the broker's expiry and at-least-once dead-lettering, which
// moved messages back before: on RabbitMQ 3.10.8, in the cluster test, some
// delay queues stopped moving messages for good while one node of three
// stayed down (rabbitmq/rabbitmq-server#16652).

const (
	// holdMax bounds how long a mover holds a message unacknowledged,
	// well below RabbitMQ's consumer_timeout (30 min by default), after
	// which the broker would close the mover's channel.
	holdMax = 10 * time.Minute
	// waitScan is how often a mover looks whether its wait queue exists,
	// while it does not (a process that puts a message into a wait queue
	// wakes its own mover at once).
	waitScan = 15 * time.Second
	// moveBatch bounds the released messages a mover publishes at once.
	moveBatch = 128
	// minPoll bounds how often a mover polls its empty wait queue.
	minPoll = 100 * time.Millisecond
)

// waiter runs the movers of the wait queues of one queue that this process
// consumes.
type waiter struct {
	refs   int
	cancel context.CancelFunc
	// wakes has a channel per bucket; a send wakes its mover.
	wakes []chan struct{}
}

// watchLocked starts the movers of name's wait queues, unless a consumer of
// name in this process has started them already. q.mu must be held.
func (q *Queue) watchLocked(name string) {
	w := q.waiters[name]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &waiter{cancel: cancel, wakes: make([]chan struct{}, len(buckets))}
		for i, b := range buckets {
			w.wakes[i] = make(chan struct{}, 1)
			poll := minPoll
			if i > 0 {
				poll = max(poll, buckets[i-1].d)
			}
			m := &mover{q: q, queue: name, name: waitQueueName(name, b), poll: poll, wake: w.wakes[i]}
			q.movers.Add(1)
			go m.run(ctx)
		}
		q.waiters[name] = w
	}
	w.refs++
}

// unwatchLocked stops the movers of name's wait queues when the last
// consumer of name in this process stops. q.mu must be held.
func (q *Queue) unwatchLocked(name string) {
	w := q.waiters[name]
	if w == nil {
		return
	}
	if w.refs--; w.refs <= 0 {
		w.cancel()
		delete(q.waiters, name)
	}
}

// nudge wakes the mover of the wait queue waitName of queue, if this
// process runs one: a message was just put into it.
func (q *Queue) nudge(queue, waitName string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.waiters[queue]
	if w == nil {
		return
	}
	for i, b := range buckets {
		if waitQueueName(queue, b) == waitName {
			select {
			case w.wakes[i] <- struct{}{}:
			default:
			}
			return
		}
	}
}

// waitsQueue returns the Queue the movers use, opening it on first use.
func (q *Queue) waitsQueue(ctx context.Context) (*Queue, error) {
	q.auxOnce.Do(func() {
		q.movers.Add(1)
		go q.openAux()
	})
	select {
	case <-q.auxReady:
		if q.aux == nil {
			return nil, fmt.Errorf("open connection for wait queues: %w", q.auxErr)
		}
		return q.aux, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// openAux opens the movers' Queue: q's options on a connection of its own,
// trying until it connects or q is closed.
func (q *Queue) openAux() {
	defer q.movers.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-q.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	opts := q.opts
	opts.ConnectionName += " wait queues"
	q.aux, q.auxErr = Open(ctx, opts)
	if q.auxErr != nil && ctx.Err() == nil {
		q.log.Error("amqp connection for wait queues failed", "err", q.auxErr)
	}
	close(q.auxReady)
}

// mover moves the messages of one wait queue back to its queue when due.
type mover struct {
	q     *Queue
	queue string // the queue messages go back to
	name  string // the wait queue
	poll  time.Duration
	wake  chan struct{}
}

// run moves messages until ctx ends: while the wait queue exists, on a
// channel of its own, opened again when lost.
func (m *mover) run(ctx context.Context) {
	defer m.q.movers.Done()
	aux, err := m.q.waitsQueue(ctx)
	if err != nil {
		return
	}
	backoff := m.q.opts.ReconnectMin
	for ctx.Err() == nil {
		exists, err := aux.exists(ctx, m.name)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			m.q.log.Debug("amqp wait queue not inspected", "queue", m.name, "err", err)
		case !exists:
			if !m.idle(ctx, waitScan) {
				return
			}
			continue
		default:
			err = m.serve(ctx, aux)
			if ctx.Err() != nil {
				return
			}
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound {
				continue // deleted: wait until it exists again
			}
			m.q.log.Info("amqp wait queue mover stopped; starting again", "queue", m.name, "err", err)
		}
		if !sleep(ctx, jitter(backoff), m.q.done) {
			return
		}
		backoff = min(2*backoff, m.q.opts.ReconnectMax)
	}
}

// idle waits d, or until a message is put into the wait queue by this
// process; it returns false when ctx ends first.
func (m *mover) idle(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.wake:
	case <-ctx.Done():
		return false
	}
	return true
}

// serve moves the messages of the wait queue, on a new channel, until ctx
// ends or the channel fails. Closing the channel hands back to the wait
// queue what it holds.
func (m *mover) serve(ctx context.Context, aux *Queue) error {
	l, err := aux.current(ctx)
	if err != nil {
		return err
	}
	ch, err := l.conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	var head *amqp.Delivery // the message held, not yet released
	for {
		if head == nil {
			d, ok, err := ch.Get(m.name, false)
			if err != nil {
				return fmt.Errorf("get from %q: %w", m.name, err)
			}
			if !ok {
				if !m.idle(ctx, m.poll) {
					return ctx.Err()
				}
				continue
			}
			head = &d
		}
		wait := time.Until(release(*head))
		if wait > holdMax {
			if err := ch.Nack(head.DeliveryTag, false, true); err != nil {
				return fmt.Errorf("hand back to %q: %w", m.name, err)
			}
			head = nil
			if !sleep(ctx, wait-holdMax, m.q.done) {
				return ctx.Err()
			}
			continue
		}
		if wait > 0 && !sleep(ctx, wait, m.q.done) {
			return ctx.Err()
		}
		// The head is released; so are those behind it whose time has come.
		batch := []amqp.Delivery{*head}
		head = nil
		for len(batch) < moveBatch {
			d, ok, err := ch.Get(m.name, false)
			if err != nil {
				return fmt.Errorf("get from %q: %w", m.name, err)
			}
			if !ok {
				break
			}
			if time.Until(release(d)) > 0 {
				head = &d
				break
			}
			batch = append(batch, d)
		}
		if err := m.move(ctx, aux, batch); err != nil {
			return err
		}
		// Acks the batch only: the held head came after it.
		if err := ch.Ack(batch[len(batch)-1].DeliveryTag, true); err != nil {
			return fmt.Errorf("ack %d messages moved from %q: %w", len(batch), m.name, err)
		}
	}
}

// move publishes released messages to their queue, or, those not due yet,
// to the wait queue of what remains, and waits for the confirms.
func (m *mover) move(ctx context.Context, aux *Queue, batch []amqp.Delivery) error {
	now := time.Now()
	var back []amqp.Publishing
	waits := map[string]target{}
	waiting := map[string][]amqp.Publishing{}
	for _, d := range batch {
		h := amqp.Table{}
		if n, ok := intHeader(d.Headers, HeaderAttempt); ok && n > 1 {
			h[HeaderAttempt] = n
		}
		// A message got again from its wait queue may have been moved
		// already by a mover whose ack was lost: its copy is resent.
		if _, ok := d.Headers[HeaderResent]; ok || d.Redelivered {
			h[HeaderResent] = int64(1)
		}
		pub := republishing(d, userTable(d.Headers), h)
		due, ok := intHeader(d.Headers, HeaderDue)
		if !ok || !now.Before(time.UnixMilli(due)) {
			back = append(back, pub)
			continue
		}
		t, pub := m.q.waitingUntil(m.queue, pub, now, time.UnixMilli(due))
		waits[t.name] = t
		waiting[t.name] = append(waiting[t.name], pub)
	}
	if len(back) > 0 {
		if err := aux.publish(ctx, m.q.mainTarget(m.queue), back); err != nil {
			return fmt.Errorf("move %d messages from %q: %w", len(back), m.name, err)
		}
	}
	for n, pubs := range waiting {
		if err := aux.publish(ctx, waits[n], pubs); err != nil {
			return fmt.Errorf("move %d messages from %q: %w", len(pubs), m.name, err)
		}
		m.q.nudge(m.queue, n)
	}
	return nil
}

// release returns when d leaves its wait queue: HeaderRelease, else
// HeaderDue, else now.
func release(d amqp.Delivery) time.Time {
	if ms, ok := intHeader(d.Headers, HeaderRelease); ok {
		return time.UnixMilli(ms)
	}
	if ms, ok := intHeader(d.Headers, HeaderDue); ok {
		return time.UnixMilli(ms)
	}
	return time.Now()
}
