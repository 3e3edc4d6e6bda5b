package amqpqueue

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// maxPrefetch is the largest prefetch count AMQP can express.
const maxPrefetch = 1<<16 - 1

// consumer is one Consume call.
type consumer struct {
	q        *Queue
	queue    string
	prefetch int
	out      chan queue.Delivery
}

// session is one channel a consumer reads from. Its deliveries can be
// settled while it is alive; once dead, the broker has handed them back.
type session struct {
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	// closes is closed (after receiving the error, if any) when the channel
	// closes for any reason.
	closes chan *amqp.Error

	mu   sync.RWMutex
	dead bool
	// lost is closed when s dies: its deliveries are back in the queue.
	lost     chan struct{}
	lostOnce sync.Once
}

// kill marks s dead and closes its channel, which hands its unsettled
// deliveries back to the queue.
func (s *session) kill() {
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
	_ = s.ch.Close()
	s.lostOnce.Do(func() { close(s.lost) })
}

// ack acks tag unless s is dead; it reports whether s was alive.
func (s *session) ack(tag uint64) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.dead {
		return false, nil
	}
	return true, s.ch.Ack(tag, false)
}

// alive reports whether s still holds its deliveries.
func (s *session) alive() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return !s.dead && !s.ch.IsClosed()
}

// Consume delivers messages of name on the returned channel until ctx is
// cancelled or the queue is closed. The consumer survives reconnections: it
// consumes again on a new channel, and deliveries from the old one fail to
// settle with an error wrapping queue.ErrSettled.
func (q *Queue) Consume(ctx context.Context, name string, opts queue.ConsumeOptions) (<-chan queue.Delivery, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	prefetch := opts.Prefetch
	if prefetch < 0 || prefetch > maxPrefetch {
		return nil, fmt.Errorf("consume %q: prefetch %d: want 0 to %d", name, prefetch, maxPrefetch)
	}
	if prefetch == 0 {
		prefetch = 1
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("consume %q: %w", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &consumer{q: q, queue: name, prefetch: prefetch, out: make(chan queue.Delivery)}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("consume %q: %w", name, queue.ErrClosed)
	}
	q.cancels[c] = cancel
	q.consumers.Add(1)
	q.watchLocked(name)
	l := q.link
	q.mu.Unlock()

	// Report at once what a retry would not fix, such as a queue declared
	// with other arguments; while disconnected, the consumer starts later.
	var s *session
	if l != nil && !l.conn.IsClosed() {
		var err error
		s, err = c.open(l)
		if err != nil && !connectionLost(l, err) {
			c.stop(cancel)
			return nil, fmt.Errorf("consume %q: %w", name, err)
		}
	}
	go c.run(ctx, cancel, s)
	return c.out, nil
}

// stop unregisters c.
func (c *consumer) stop(cancel context.CancelFunc) {
	c.q.mu.Lock()
	delete(c.q.cancels, c)
	c.q.unwatchLocked(c.queue)
	c.q.mu.Unlock()
	cancel()
	c.q.consumers.Done()
}

// open starts consuming on a new channel of l.
func (c *consumer) open(l *link) (*session, error) {
	ch, err := l.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Qos(c.prefetch, 0, false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("set prefetch %d: %w", c.prefetch, err)
	}
	if err := c.q.declare(l, ch, c.q.mainTarget(c.queue)); err != nil {
		_ = ch.Close()
		return nil, err
	}
	deliveries, err := ch.Consume(c.queue, "", false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("consume queue %q: %w", c.queue, err)
	}
	return &session{ch: ch, deliveries: deliveries, closes: closes, lost: make(chan struct{})}, nil
}

// run hands deliveries out until ctx is done, opening a new session whenever
// the current one is lost. s is the first session, or nil.
func (c *consumer) run(ctx context.Context, cancel context.CancelFunc, s *session) {
	defer c.stop(cancel)
	defer close(c.out) // before stop, so that Close returns with it closed
	backoff := c.q.opts.ReconnectMin
	for {
		if s == nil {
			l, err := c.q.current(ctx)
			if err != nil {
				return
			}
			if s, err = c.open(l); err != nil {
				if !connectionLost(l, err) {
					c.q.log.Error("amqp consume failed", "queue", c.queue, "err", err)
				}
				if !sleep(ctx, jitter(backoff), nil) {
					return
				}
				backoff = min(2*backoff, c.q.opts.ReconnectMax)
				continue
			}
			backoff = c.q.opts.ReconnectMin
		}
		c.serve(ctx, s)
		// Close the channel before the consumer channel closes, so that a
		// stopped consumer's deliveries are back in the queue by then.
		s.kill()
		if ctx.Err() != nil {
			return
		}
		c.q.log.Warn("amqp consumer channel lost; consuming again", "queue", c.queue)
		s = nil
	}
}

// serve hands out the deliveries of s until ctx is done or s is lost.
func (c *consumer) serve(ctx context.Context, s *session) {
	for {
		select {
		case <-ctx.Done():
			return
		case d, ok := <-s.deliveries:
			if !ok {
				return
			}
			if !c.handle(ctx, s, d) {
				return
			}
		}
	}
}

// handle hands d out, or settles it itself when it was redelivered too often
// or is not due yet. It returns false when ctx is done or s is lost.
func (c *consumer) handle(ctx context.Context, s *session, ad amqp.Delivery) bool {
	d := newDelivery(c, s, ad)
	if limit := c.q.opts.MaxRedeliveries; limit > 0 {
		if n, ok := intHeader(ad.Headers, "x-delivery-count"); ok && n > int64(limit) {
			c.q.log.Warn("amqp message redelivered too often; dead-lettering it", "queue", c.queue, "redeliveries", n, "attempt", d.attempt)
			extra := amqp.Table{HeaderRedeliveries: strconv.FormatInt(n, 10)}
			if err := d.deadLetter(ctx, "dead-letter", ReasonRedeliveries, extra); err != nil {
				c.q.log.Error("amqp dead-letter failed", "queue", c.queue, "err", err)
			}
			return ctx.Err() == nil
		}
	}
	if due, ok := intHeader(ad.Headers, HeaderDue); ok {
		if time.Until(time.UnixMilli(due)) > 0 {
			if err := d.delay(ctx, time.UnixMilli(due)); err != nil {
				c.q.log.Error("amqp delay failed", "queue", c.queue, "attempt", d.attempt, "err", err)
			}
			return ctx.Err() == nil
		}
	}
	select {
	case c.out <- d:
		return true
	case <-ctx.Done():
		return false
	case <-s.closes:
		return false
	}
}

// delivery is one delivered message.
type delivery struct {
	c       *consumer
	s       *session
	raw     amqp.Delivery
	user    amqp.Table // headers that are not reserved
	headers map[string]string
	attempt int

	mu      sync.Mutex
	settled bool
}

var (
	_ queue.Delivery   = (*delivery)(nil)
	_ queue.Revocable  = (*delivery)(nil)
	_ queue.Resendable = (*delivery)(nil)
)

func newDelivery(c *consumer, s *session, ad amqp.Delivery) *delivery {
	d := &delivery{c: c, s: s, raw: ad, user: userTable(ad.Headers), attempt: 1}
	d.headers = stringHeaders(d.user)
	if n, ok := intHeader(ad.Headers, HeaderAttempt); ok && n > 1 {
		d.attempt = int(min(n, 1<<31-1))
	}
	return d
}

// Body returns the message body.
func (d *delivery) Body() []byte { return d.raw.Body }

// Headers returns the message headers, without those the broker or this
// package keep for themselves.
func (d *delivery) Headers() map[string]string { return maps.Clone(d.headers) }

// Attempt is 1 on the first delivery and grows with each Retry.
func (d *delivery) Attempt() int { return d.attempt }

// Redelivered reports the broker's redelivered flag: the message was
// delivered before and handed back unsettled.
func (d *delivery) Redelivered() bool { return d.raw.Redelivered }

// Resent reports a copy of the message that its publisher sent again, not
// knowing whether the broker had taken the first (queue.Resendable), or
// that Postpone published.
func (d *delivery) Resent() bool {
	_, ok := d.raw.Headers[HeaderResent]
	return ok
}

// Lost is closed once the delivery's channel has closed (connection lost,
// consumer stopped): the broker has handed the message back to the queue.
func (d *delivery) Lost() <-chan struct{} { return d.s.lost }

// Ack removes the message from its queue.
func (d *delivery) Ack(ctx context.Context) error {
	return d.settle(ctx, "ack", nil)
}

// Retry publishes the message to its queue's wait queue with its attempt
// incremented, then acks it; beyond the maximum attempts it dead-letters it.
func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	next := d.attempt + 1
	if next > d.c.q.opts.MaxAttempts {
		return d.deadLetter(ctx, "retry", queue.ReasonMaxAttempts, nil)
	}
	return d.requeue(ctx, "retry", next, delay)
}

// Postpone publishes the message to its queue's wait queue with its
// attempt unchanged, marked as resent (its work may have begun), then acks
// it.
func (d *delivery) Postpone(ctx context.Context, delay time.Duration) error {
	return d.requeue(ctx, "postpone", d.attempt, delay)
}

// requeue publishes the message again, to its queue or after delay to a
// wait queue, with attempt, then acks it. A copy with its attempt
// unchanged (Postpone) is marked with HeaderResent.
func (d *delivery) requeue(ctx context.Context, action string, attempt int, delay time.Duration) error {
	h := amqp.Table{}
	if attempt > 1 {
		h[HeaderAttempt] = int64(attempt)
	}
	if attempt == d.attempt {
		h[HeaderResent] = int64(1)
	}
	pub := d.publishing(h)
	t := d.c.q.mainTarget(d.c.queue)
	if delay > 0 {
		t, pub = d.c.q.waiting(d.c.queue, pub, time.Now(), delay)
	}
	err := d.settle(ctx, action, func(ctx context.Context) error {
		return d.c.q.publish(ctx, t, []amqp.Publishing{pub})
	})
	if err == nil && delay > 0 {
		d.c.q.nudge(d.c.queue, t.name)
	}
	return err
}

// DeadLetter moves the message to the dead-letter queue with reason.
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	return d.deadLetter(ctx, "dead-letter", reason, nil)
}

// deadLetter publishes the message to the dead-letter queue with reason and
// extra headers, then acks it.
func (d *delivery) deadLetter(ctx context.Context, action, reason string, extra amqp.Table) error {
	h := amqp.Table{
		queue.HeaderReason:      reason,
		queue.HeaderSourceQueue: d.c.queue,
		HeaderAttempts:          strconv.Itoa(d.attempt),
	}
	maps.Copy(h, extra)
	pub := d.publishing(h)
	t := d.c.q.mainTarget(queue.DeadLetterQueue(d.c.queue))
	return d.settle(ctx, action, func(ctx context.Context) error {
		return d.c.q.publish(ctx, t, []amqp.Publishing{pub})
	})
}

// delay puts a message that came back before its due time into a wait
// queue again, keeping its attempt. (Messages are moved back from wait
// queues when due; a message that arrives early was put back by a delay
// queue of an earlier release, which waited at most 4h at a time.)
func (d *delivery) delay(ctx context.Context, due time.Time) error {
	h := amqp.Table{}
	if d.attempt > 1 {
		h[HeaderAttempt] = int64(d.attempt)
	}
	if d.Resent() {
		h[HeaderResent] = int64(1)
	}
	t, pub := d.c.q.waitingUntil(d.c.queue, d.publishing(h), time.Now(), due)
	err := d.settle(ctx, "delay", func(ctx context.Context) error {
		return d.c.q.publish(ctx, t, []amqp.Publishing{pub})
	})
	if err == nil {
		d.c.q.nudge(d.c.queue, t.name)
	}
	return err
}

// publishing returns a copy of the message to publish again, with its user
// headers and extra.
func (d *delivery) publishing(extra amqp.Table) amqp.Publishing {
	return republishing(d.raw, d.user, extra)
}

// republishing returns a persistent copy of the delivered message r, with
// the headers user and extra.
func republishing(r amqp.Delivery, user, extra amqp.Table) amqp.Publishing {
	h := make(amqp.Table, len(user)+len(extra))
	maps.Copy(h, user)
	maps.Copy(h, extra)
	return amqp.Publishing{
		Headers:         h,
		ContentType:     r.ContentType,
		ContentEncoding: r.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        r.Priority,
		CorrelationId:   r.CorrelationId,
		ReplyTo:         r.ReplyTo,
		MessageId:       r.MessageId,
		Timestamp:       r.Timestamp,
		Type:            r.Type,
		AppId:           r.AppId,
		Body:            r.Body,
	}
}

// settle runs republish, if not nil, and then acks the delivery. A delivery
// whose channel has closed cannot be settled any more: the broker has handed
// it back to the queue, to be delivered again.
func (d *delivery) settle(ctx context.Context, action string, republish func(context.Context) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return fmt.Errorf("%s message of %q: %w", action, d.c.queue, queue.ErrSettled)
	}
	if !d.s.alive() {
		return d.handedBack(action)
	}
	if republish != nil {
		if err := republish(ctx); err != nil {
			return fmt.Errorf("%s message of %q: %w", action, d.c.queue, err)
		}
	}
	alive, err := d.s.ack(d.raw.DeliveryTag)
	if !alive {
		return d.handedBack(action)
	}
	if err != nil {
		return fmt.Errorf("%s message of %q: ack: %w", action, d.c.queue, err)
	}
	d.settled = true
	return nil
}

// handedBack is the error of settling a delivery whose channel has closed.
func (d *delivery) handedBack(action string) error {
	return fmt.Errorf("%s message of %q: returned to the queue when its consumer channel closed: %w", action, d.c.queue, queue.ErrSettled)
}
