// Package queue defines the message queue capability that carries crawl
// contracts between gridcrawl's services.
//
// Delivery contract, for every implementation:
//   - Publish returns nil only once every message is durable (written to the
//     embedded store, or confirmed by the broker). Messages survive a restart.
//   - Delivery is at least once. A delivery that is neither acked, retried nor
//     dead-lettered before its consumer stops (context cancelled, connection
//     lost, process killed) is delivered again, to some consumer.
//   - A consumer never holds more than its prefetch count of unsettled
//     deliveries.
//   - Order is FIFO per queue for first deliveries; retries and redeliveries
//     may overtake or fall behind.
//   - Retry settles a delivery and makes its message deliverable again after a
//     delay with Attempt incremented. When Attempt would exceed the queue's
//     maximum, the message is dead-lettered instead with reason ReasonMaxAttempts.
//   - Postpone settles a delivery and makes its message deliverable again
//     after a delay with Attempt unchanged: the delivery could not be
//     processed for a reason that is not the message's (a backend is down),
//     so it must not use up the message's attempts.
//   - DeadLetter settles a delivery by moving its message to DeadLetterQueue(q)
//     with the reason in the header HeaderReason.
//   - Settling a delivery twice returns ErrSettled.
package queue

import (
	"context"
	"errors"
	"time"
)

// Headers that implementations set on dead-lettered messages.
const (
	HeaderReason      = "x-gridcrawl-reason"
	HeaderSourceQueue = "x-gridcrawl-queue"
	ReasonMaxAttempts = "max attempts exceeded"
)

// Sentinel errors.
var (
	// ErrSettled is returned when a delivery is acked, retried or dead-lettered twice.
	ErrSettled = errors.New("delivery already settled")
	// ErrClosed is returned by operations on a closed queue.
	ErrClosed = errors.New("queue closed")
)

// DeadLetterQueue returns the name of the dead-letter queue of q.
func DeadLetterQueue(q string) string { return q + ".dead" }

// Message is one message to publish.
type Message struct {
	Body    []byte
	Headers map[string]string
	// Delay, when positive, makes the message deliverable only after it has
	// passed (implementations may round it up, never down). Len counts a
	// delayed message from the moment Publish returns.
	Delay time.Duration
}

// Delivery is one delivered message. Exactly one of Ack, Retry, Postpone or
// DeadLetter must be called on it.
type Delivery interface {
	Body() []byte
	Headers() map[string]string
	// Attempt is 1 on the first delivery and grows with each Retry.
	Attempt() int
	// Redelivered reports that the message was delivered before and not settled.
	Redelivered() bool
	Ack(ctx context.Context) error
	Retry(ctx context.Context, delay time.Duration) error
	Postpone(ctx context.Context, delay time.Duration) error
	DeadLetter(ctx context.Context, reason string) error
}

// Revocable is implemented by deliveries that the queue can take back
// before they are settled: a broker whose connection to the consumer is lost
// hands its unsettled deliveries to the queue again, and so to another
// consumer. Lost is closed once that has happened; from then on the
// delivery cannot be settled (ErrSettled) and its message may already be in
// another consumer's hands, so the work it asked for must not be started.
type Revocable interface {
	Lost() <-chan struct{}
}

// Lost reports whether d has been taken back by its queue (see Revocable).
// Deliveries that cannot be taken back are never lost.
func Lost(d Delivery) bool {
	r, ok := d.(Revocable)
	if !ok {
		return false
	}
	select {
	case <-r.Lost():
		return true
	default:
		return false
	}
}

// Resendable is implemented by deliveries of queues whose publishers send a
// message again when they cannot tell whether the broker took it: a
// connection lost before its confirm, a nack (a quorum queue may nack a
// message its new leader enqueues nonetheless). Such a copy may follow one
// that was delivered and worked on already, yet arrives as a first
// delivery; Resent reports it, and a copy made by Postpone, whose original
// was worked on too.
type Resendable interface {
	Resent() bool
}

// SeenBefore reports whether the message of d may have been delivered, and
// worked on, before: redelivered, retried, or a copy sent again (see
// Resendable). A consumer that trusts what a message says of the state of
// its work (a snapshot of a record) does so only when this is false.
func SeenBefore(d Delivery) bool {
	if d.Redelivered() || d.Attempt() > 1 {
		return true
	}
	r, ok := d.(Resendable)
	return ok && r.Resent()
}

// ConsumeOptions configure one consumer.
type ConsumeOptions struct {
	// Prefetch bounds the unsettled deliveries held by the consumer; 0 means 1.
	Prefetch int
}

// Queue is a durable, at-least-once message queue.
type Queue interface {
	// Publish durably enqueues msgs on queue, declaring it if needed.
	Publish(ctx context.Context, queue string, msgs ...Message) error
	// Consume delivers messages of queue on the returned channel until ctx is
	// cancelled or the queue is closed; then the channel is closed and
	// unsettled deliveries go back to the queue.
	Consume(ctx context.Context, queue string, opts ConsumeOptions) (<-chan Delivery, error)
	// Len returns the number of messages in queue that are ready or waiting
	// for a retry delay, not counting unsettled deliveries.
	Len(ctx context.Context, queue string) (int, error)
	// Close releases the queue's resources. Open consumer channels are closed.
	Close() error
}

// RetryDelay is the delay a consumer passes to Delivery.Retry for a message
// whose processing failed on its attempt-th delivery: growing with the
// attempts, at most 30 seconds.
func RetryDelay(attempt int) time.Duration {
	return min(time.Duration(attempt)*2*time.Second, 30*time.Second)
}

// consumerKey marks a context as one of work on deliveries of a queue.
type consumerKey struct{}

// ConsumerOf returns ctx marked as the context of work on the deliveries of
// queue name. A queue that makes publishers wait for room (a bounded queue
// in memory) must not make a publish to name under such a context wait:
// the room it waits for could only come from the work that waits. The
// crawler, which publishes the pages to parse again (relinks) to the queue
// it consumes, waited so on itself once its queue was full, and every
// stage stopped behind it.
func ConsumerOf(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, consumerKey{}, name)
}

// IsConsumerOf reports whether ctx is marked (ConsumerOf) as the context of
// work on the deliveries of queue name.
func IsConsumerOf(ctx context.Context, name string) bool {
	n, ok := ctx.Value(consumerKey{}).(string)
	return ok && n == name
}
