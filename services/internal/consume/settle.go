package consume

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

// settler settles deliveries by verdict. It does not depend on the
// contract type, so the settling code is one, whatever the stage.
type settler struct {
	queue string
	gate  *outage.Gate
	log   *slog.Logger
}

// Settle settles ds by v, as the shell settles a handler's verdict: a
// handler that returned Hold settles its deliveries with it later. The
// deliveries of one Retry share one probe of the backends, and one wait for
// them when one is down.
func (s *settler) Settle(ctx context.Context, v Verdict, ds ...queue.Delivery) {
	s.settle(ctx, v, len(ds), func(i int) queue.Delivery { return ds[i] })
}

// Parts returns the settlement of a held delivery d whose contract has n
// parts that end apart (the URLs of a loader contract): see Parts.
func (s *settler) Parts(d queue.Delivery, n int) *Parts {
	p := &Parts{s: s, d: d}
	p.left.Store(int32(n))
	return p
}

// Parts settles a delivery held (Hold) until each part of its contract has
// ended. The last part to end settles it by the shell's rules: Ack when
// every part's effects are durable, otherwise Retry with the first part's
// error (postponed while a backend is down). Unlike the shell's own
// settles, it does not then wait for the backends: the goroutine that ends
// the last part is not the one that takes deliveries. It is safe for
// concurrent use.
type Parts struct {
	s    *settler
	d    queue.Delivery
	left atomic.Int32

	mu  sync.Mutex
	err error // the first part's failure
	// settled runs once the delivery is settled or given up.
	settled func()
}

// OnSettled makes f run once the delivery is settled (Done) or given up
// (Drop). It must be called before any part ends.
func (p *Parts) OnSettled(f func()) { p.settled = f }

// Done ends one part, whose effects are durable (err nil) or failed with
// err; the last part settles the delivery.
func (p *Parts) Done(ctx context.Context, err error) {
	p.mu.Lock()
	if err != nil && p.err == nil {
		p.err = err
	}
	first := p.err
	p.mu.Unlock()
	if p.left.Add(-1) != 0 {
		return
	}
	v := Ack()
	if first != nil {
		v = Retry(first)
	}
	p.s.settleNoWait(ctx, v, 1, func(int) queue.Delivery { return p.d })
	if p.settled != nil {
		p.settled()
	}
}

// Drop gives up one part without an outcome, because the queue took the
// delivery back (queue.Lost): it is delivered again, maybe to another
// consumer, and cannot be settled here. The last part to end (given up or
// done) releases what the delivery held without settling it.
func (p *Parts) Drop() {
	if p.left.Add(-1) != 0 {
		return
	}
	if p.settled != nil {
		p.settled()
	}
}

// ackGrace bounds the acks of work done when the shell stops.
const ackGrace = 5 * time.Second

// graceful returns a context that ends grace after ctx ends: what was
// started under ctx gets that long to finish once ctx is cancelled.
func graceful(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(gctx, func() { t.Stop() })
	})
	return gctx, func() {
		stop()
		cancel()
	}
}

// settle settles the n deliveries at returns by v; after a Retry while a
// backend is down it takes no new delivery until the backends answer.
func (s *settler) settle(ctx context.Context, v Verdict, n int, at func(int) queue.Delivery) {
	if s.settleNoWait(ctx, v, n, at) {
		_ = s.gate.Wait(ctx) // take no new delivery until the backends are back
	}
}

// settleNoWait settles the n deliveries at returns by v, and reports
// whether they were postponed because a backend is down.
func (s *settler) settleNoWait(ctx context.Context, v Verdict, n int, at func(int) queue.Delivery) (down bool) {
	switch v.kind {
	case kindHold:
	case kindAck:
		// Work done is acked even when the shell is stopping, or stops
		// while the ack is under way: its contract back in the queue
		// would be done again.
		actx, cancel := graceful(ctx, ackGrace)
		defer cancel()
		for i := range n {
			if err := s.gate.Settle(actx, at(i).Ack); err != nil && actx.Err() == nil {
				s.log.Error("ack contract", "queue", s.queue, "err", err)
			}
		}
	case kindDeadLetter:
		for i := range n {
			d := at(i)
			s.log.Warn("dead-letter contract", "queue", s.queue, "reason", v.reason)
			err := s.gate.Settle(ctx, func(ctx context.Context) error { return d.DeadLetter(ctx, v.reason) })
			if err != nil && ctx.Err() == nil {
				s.log.Error("dead-letter contract", "queue", s.queue, "err", err)
			}
		}
	default:
		err := v.err
		if v.kind == kindNone {
			err = errNoVerdict
			s.log.Error("settle contract", "queue", s.queue, "err", err)
		}
		return s.failed(ctx, err, n, at)
	}
	return false
}

// failed settles the n deliveries at returns, whose work failed with err,
// and reports whether a backend is down.
func (s *settler) failed(ctx context.Context, err error, n int, at func(int) queue.Delivery) bool {
	if ctx.Err() != nil {
		return false // shutting down: the deliveries go back to the queue
	}
	s.gate.Note(err)
	down := s.gate.Down(ctx)
	for i := range n {
		d := at(i)
		var serr error
		if len(down) > 0 { // the outage's failure, not the contract's
			serr = s.gate.Settle(ctx, func(ctx context.Context) error { return d.Postpone(ctx, postponeDelay) })
		} else {
			serr = s.gate.Settle(ctx, func(ctx context.Context) error { return d.Retry(ctx, queue.RetryDelay(d.Attempt())) })
		}
		if serr != nil && ctx.Err() == nil {
			s.log.Error("retry contract", "queue", s.queue, "attempt", d.Attempt(), "err", serr)
		}
	}
	return len(down) > 0
}
