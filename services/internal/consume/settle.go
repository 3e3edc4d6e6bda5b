package consume

import (
	"context"
	"log/slog"
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

// settle settles the n deliveries at returns by v.
func (s *settler) settle(ctx context.Context, v Verdict, n int, at func(int) queue.Delivery) {
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
		s.failed(ctx, err, n, at)
	}
}

// failed settles the n deliveries at returns, whose work failed with err.
func (s *settler) failed(ctx context.Context, err error, n int, at func(int) queue.Delivery) {
	if ctx.Err() != nil {
		return // shutting down: the deliveries go back to the queue
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
	if len(down) > 0 {
		_ = s.gate.Wait(ctx) // take no new delivery until the backends are back
	}
}
