// Package consume is the consumer shell every pipeline stage runs in: it
// takes a queue's deliveries, turns each into the stage's contract, hands
// the valid ones to the stage's handler and settles each delivery by the
// handler's verdict. A stage is then only its handler, as in watermill's
// Router, where a HandlerFunc runs inside poison-queue and retry middleware
// (https://github.com/ThreeDotsLabs/watermill).
//
// Delivery contract, for every stage:
//   - Each delivery's body is decoded as JSON into a new contract of the
//     stage's type. A body that does not decode, a contract whose schema
//     version (Config.Version) is not contracts.Version, and one the stage's
//     Config.Validate refuses are dead-lettered with the reason, logged as
//     "dead-letter contract" with the keys queue and reason. The handler
//     never sees them: poison input costs one dead-letter and nothing else.
//   - The handler gets every valid contract, in the order of delivery per
//     worker (Config.Workers run at once). The batch form gets, in one call,
//     the valid contracts of the deliveries available at once, at most
//     Batch.Max deliveries, and one verdict for all of them.
//   - The verdict settles the delivery (or every delivery of the batch):
//     Ack once the contract's effects are durable; Retry(err) when the work
//     failed: err is noted to the outage gate, which then probes the
//     backends, and while one of them is down the delivery is postponed
//     (delivered again soon, no attempt counted) and the shell takes no new
//     delivery until the backends answer again; otherwise it is retried
//     after queue.RetryDelay of its attempt, and the queue dead-letters it
//     once its attempts run out. DeadLetter(reason) moves it to the
//     dead-letter queue. Hold leaves it to the handler, which settles it
//     later: through Shell.Settle, by the same rules (the indexer, once the
//     contract's pages have moved on), or through Shell.Parts, once every
//     part of the contract has ended (the loader, once every URL of the
//     contract has an outcome).
//   - Every settle goes through outage.Gate.Settle: a settle that fails
//     because a backend is down (the queue's disk is full, its broker gone)
//     waits for the backend and is tried again, so no delivery is stranded
//     in the consumer.
//   - A Retry while the context is cancelled settles nothing: the service is
//     shutting down, and unsettled deliveries go back to the queue when the
//     consumer stops. A handler must therefore make its effects idempotent:
//     the same contract may come again.
//   - Settling never fails the shell: an error is logged ("ack contract",
//     "retry contract", "dead-letter contract" with the keys queue and err)
//     and the delivery is redelivered by the queue.
package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

// postponeDelay is how long a postponed delivery waits before it can be
// delivered again: short, since the shell holds back while the backend is
// down and the contract should be taken soon after its return.
const postponeDelay = time.Second

// errNoVerdict is the failure of a handler that returned the zero Verdict:
// a bug, retried rather than acked (its work may not be done) or held (no
// one would settle it).
var errNoVerdict = errors.New("handler returned no verdict")

// errNoQueue is Run's error when the shell was given no queue to consume.
var errNoQueue = errors.New("no queue configured")

type verdictKind uint8

const (
	kindNone verdictKind = iota
	kindAck
	kindRetry
	kindDeadLetter
	kindHold
)

// Verdict is what a handler decided about a delivery. The zero Verdict is
// no decision, which the shell treats as a failed attempt.
type Verdict struct {
	kind   verdictKind
	err    error
	reason string
}

// Ack is the verdict on a contract whose effects are durable.
func Ack() Verdict { return Verdict{kind: kindAck} }

// Retry is the verdict on a contract whose work failed with err: postponed
// while a backend is down, otherwise retried, counting an attempt.
func Retry(err error) Verdict { return Verdict{kind: kindRetry, err: err} }

// DeadLetter is the verdict on a contract that no attempt can process:
// it goes to the dead-letter queue with reason.
func DeadLetter(reason string) Verdict { return Verdict{kind: kindDeadLetter, reason: reason} }

// Hold is the verdict of a handler that keeps the delivery and settles it
// later with Shell.Settle.
func Hold() Verdict { return Verdict{kind: kindHold} }

// Handler processes one valid contract c, delivered as d, and returns the
// verdict on it. It must not settle d itself unless it returns Hold.
type Handler[T any] func(ctx context.Context, d queue.Delivery, c *T) Verdict

// Message is one valid delivery and its contract, as a batch handler gets it.
type Message[T any] struct {
	Delivery queue.Delivery
	Contract *T
}

// Batch is the batch form of a handler: the indexer stores the documents
// of every contract available at once in one write.
type Batch[T any] struct {
	// Max bounds the deliveries taken for one batch (invalid ones count);
	// 0 means 1.
	Max int
	// Handle processes the valid contracts of one batch and returns the
	// verdict on all of them. The slice is the shell's, reused for the next
	// batch: Handle must not keep it (the messages in it it may keep).
	Handle func(ctx context.Context, batch []Message[T]) Verdict
	// Tick, when set, runs every Every between batches, in the goroutine
	// that runs Handle: the handler settles there what it held.
	Tick  func(ctx context.Context)
	Every time.Duration
}

// Config configures a Shell.
type Config[T any] struct {
	// Queue is consumed by Run and RunBatch; Serve and ServeBatch, which
	// are handed deliveries, do not need it.
	Queue queue.Queue
	// QueueName names the queue consumed, in the shell's log lines too.
	QueueName string
	// Kind names the contract in dead-letter reasons: "crawler" gives
	// "undecodable crawler contract: ...".
	Kind string
	// Prefetch bounds the deliveries held unsettled (Run and RunBatch); 0
	// means 1.
	Prefetch int
	// Workers is how many handlers run at once in Run and Serve; 0 means 1.
	Workers int
	// Version returns the schema version of a decoded contract. Required.
	Version func(*T) int
	// Validate checks the required fields of a decoded contract of the
	// right version; its error is the dead-letter reason. Nil: every
	// contract of the right version is valid.
	Validate func(*T) error
	// Gate tells backend outages from failed work; nil knows of no
	// backend, and every failure counts an attempt.
	Gate   *outage.Gate
	Logger *slog.Logger
}

// Shell runs a stage's handler over a queue; see the package doc for its
// delivery contract. It is safe for concurrent use.
type Shell[T any] struct {
	settler
	source   queue.Queue
	kind     string
	prefetch int
	workers  int
	version  func(*T) int
	validate func(*T) error
}

// New returns a shell for contracts of type T. It panics when cfg.Version
// is nil: a shell that cannot check versions is a programming error.
func New[T any](cfg Config[T]) *Shell[T] {
	if cfg.Version == nil {
		panic("consume: Config.Version is nil")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Shell[T]{
		settler: settler{queue: cfg.QueueName, gate: cfg.Gate, log: log},
		source:  cfg.Queue, kind: cfg.Kind, prefetch: max(1, cfg.Prefetch), workers: max(1, cfg.Workers),
		version: cfg.Version, validate: cfg.Validate,
	}
}

// Run consumes the shell's queue and runs h on its contracts (see Serve)
// until ctx is cancelled or the queue closes the consumer.
func (s *Shell[T]) Run(ctx context.Context, h Handler[T]) error {
	deliveries, stop, err := s.consume(ctx)
	if err != nil {
		return err
	}
	defer stop()
	s.Serve(ctx, deliveries, h)
	return nil
}

// Serve runs h on the contracts of deliveries, consumed by the caller, in
// Config.Workers goroutines, until ctx is done or deliveries is closed.
// Deliveries still in the channel then stay unsettled.
func (s *Shell[T]) Serve(ctx context.Context, deliveries <-chan queue.Delivery, h Handler[T]) {
	var wg sync.WaitGroup
	for range s.workers - 1 {
		wg.Go(func() { s.serve(ctx, deliveries, h) })
	}
	s.serve(ctx, deliveries, h) // the caller's goroutine is one of the workers
	wg.Wait()
}

func (s *Shell[T]) serve(ctx context.Context, deliveries <-chan queue.Delivery, h Handler[T]) {
	work := queue.ConsumerOf(ctx, s.queue)
	for {
		select {
		case <-ctx.Done():
			return
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			if c, ok := s.decode(ctx, d); ok {
				s.Settle(ctx, h(work, d, c), d)
			}
		}
	}
}

// RunBatch consumes the shell's queue and runs b on its contracts (see
// ServeBatch) until ctx is cancelled or the queue closes the consumer.
func (s *Shell[T]) RunBatch(ctx context.Context, b Batch[T]) error {
	deliveries, stop, err := s.consume(ctx)
	if err != nil {
		return err
	}
	defer stop()
	s.ServeBatch(ctx, deliveries, b)
	return nil
}

// ServeBatch runs b.Handle, in the caller's goroutine, on batches of the
// deliveries available at once on deliveries, and b.Tick between them,
// until ctx is done or deliveries is closed.
func (s *Shell[T]) ServeBatch(ctx context.Context, deliveries <-chan queue.Delivery, b Batch[T]) {
	var tick <-chan time.Time
	if b.Tick != nil && b.Every > 0 {
		t := time.NewTicker(b.Every)
		defer t.Stop()
		tick = t.C
	}
	limit := max(1, b.Max)
	buf := make([]Message[T], 0, limit)
	work := queue.ConsumerOf(ctx, s.queue)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			b.Tick(ctx)
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			buf = s.add(ctx, buf, d)
		drain:
			for n := 1; n < limit; n++ {
				select {
				case d, ok := <-deliveries:
					if !ok {
						break drain // the next receive returns
					}
					buf = s.add(ctx, buf, d)
				default:
					break drain
				}
			}
			if len(buf) > 0 {
				v := b.Handle(work, buf)
				s.settle(ctx, v, len(buf), func(i int) queue.Delivery { return buf[i].Delivery })
				clear(buf) // drop the references until the slots are reused
				buf = buf[:0]
			}
		}
	}
}

// add appends d's contract to buf when it is valid.
func (s *Shell[T]) add(ctx context.Context, buf []Message[T], d queue.Delivery) []Message[T] {
	if c, ok := s.decode(ctx, d); ok {
		buf = append(buf, Message[T]{Delivery: d, Contract: c})
	}
	return buf
}

// consume starts the consumer of the shell's queue. It outlives ctx until
// stop is called: a consumer that stops gives its unsettled deliveries back
// to the queue, so it must stop only once the handlers have settled what
// they finished, not race their acks when ctx is cancelled.
func (s *Shell[T]) consume(ctx context.Context) (deliveries <-chan queue.Delivery, stop func(), err error) {
	if s.source == nil {
		return nil, nil, fmt.Errorf("consume %s: %w", s.queue, errNoQueue)
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	deliveries, err = s.source.Consume(cctx, s.queue, queue.ConsumeOptions{Prefetch: s.prefetch})
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("consume %s: %w", s.queue, err)
	}
	return deliveries, cancel, nil
}

// decode returns the valid contract of d; when d has none, it dead-letters
// d with the reason and returns false.
func (s *Shell[T]) decode(ctx context.Context, d queue.Delivery) (*T, bool) {
	c := new(T)
	var reason string
	if err := json.Unmarshal(d.Body(), c); err != nil {
		reason = "undecodable " + s.kind + " contract: " + err.Error()
	} else if v := s.version(c); v != contracts.Version {
		reason = fmt.Sprintf("%s contract of version %d, want %d", s.kind, v, contracts.Version)
	} else if s.validate != nil {
		if err := s.validate(c); err != nil {
			reason = "invalid " + s.kind + " contract: " + err.Error()
		}
	}
	if reason != "" {
		s.Settle(ctx, DeadLetter(reason), d)
		return nil, false
	}
	return c, true
}
