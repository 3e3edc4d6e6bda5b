package amqpqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// publisher is a channel in confirm mode.
type publisher struct {
	l  *link
	ch *amqp.Channel
	// returns receives the messages the broker returns as unroutable. Its
	// capacity is confirmWindow, and a publisher never has more messages
	// unconfirmed, so the client library never blocks on it.
	returns chan amqp.Return
	// closes receives the error that closed the channel, if any.
	closes chan *amqp.Error
}

// Publish durably enqueues msgs on name, declaring it if needed. It returns
// once the broker has confirmed every message, retrying across reconnections
// until ctx is done. Headers reserved for the broker (x-death,
// x-delivery-count, x-first-death-*, x-last-death-*) or for this package
// (HeaderAttempt, HeaderDue) are refused.
func (q *Queue) Publish(ctx context.Context, name string, msgs ...queue.Message) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if q.isClosed() {
		return fmt.Errorf("publish to %q: %w", name, queue.ErrClosed)
	}
	if len(msgs) == 0 {
		return nil
	}
	now := time.Now()
	var pubs []amqp.Publishing
	waits := map[string]target{}
	waiting := map[string][]amqp.Publishing{}
	for i, m := range msgs {
		h, err := publishHeaders(m.Headers)
		if err != nil {
			return fmt.Errorf("publish to %q: message %d: %w", name, i, err)
		}
		p := amqp.Publishing{Headers: h, DeliveryMode: amqp.Persistent, Timestamp: now, Body: m.Body}
		if m.Delay <= 0 {
			pubs = append(pubs, p)
			continue
		}
		// A delayed message waits in a wait queue, as retries do.
		t, p := q.waiting(name, p, now, m.Delay)
		waits[t.name] = t
		waiting[t.name] = append(waiting[t.name], p)
	}
	main := q.mainTarget(name)
	if err := q.publish(ctx, main, pubs); err != nil {
		return err
	}
	for n, ps := range waiting {
		if err := q.publish(ctx, waits[n], ps); err != nil {
			return err
		}
		q.nudge(name, n)
	}
	return nil
}

// publish declares t and publishes pubs to it, waiting for every confirm and
// publishing again, after a reconnection, what was not confirmed, and after a
// short wait, what the broker nacked (a quorum queue nacks while it has no
// leader: declared a moment ago, or its leader's node lost), for at most
// nackRetryFor.
func (q *Queue) publish(ctx context.Context, t target, pubs []amqp.Publishing) error {
	nacks := 0
	var firstNack time.Time
	for {
		p, err := q.publisher(ctx)
		if err == nil {
			var rest []amqp.Publishing
			rest, err = q.publishOn(ctx, p, t, pubs)
			if err == nil {
				q.release(p)
				return nil
			}
			if errors.Is(err, errNacked) && ctx.Err() == nil && (nacks == 0 || time.Since(firstNack) < nackRetryFor) {
				// A new channel: on RabbitMQ 3.10, in one run, a channel that
				// published to a quorum queue whose leader's node was killed
				// went on nacking for 25 s after a new leader was elected
				// (0.4 s after the kill); new channels took 0.2 s in three.
				_ = p.ch.Close()
				if nacks == 0 {
					firstNack = time.Now()
				}
				nacks++
				level := slog.LevelDebug
				if nacks == 1 {
					level = slog.LevelInfo
				}
				q.log.Log(ctx, level, "amqp publish nacked; publishing the nacked messages again", "queue", t.name, "nacked", len(rest), "attempt", nacks)
				pubs = markResent(rest)
				if !sleep(ctx, jitter(min(nackRetryBase<<min(nacks-1, 8), nackRetryMax)), q.done) {
					return err
				}
				continue
			}
			_ = p.ch.Close()
			if errors.Is(err, errRefused) || errors.Is(err, queue.ErrClosed) || ctx.Err() != nil || !connectionLost(p.l, err) {
				return err
			}
			// Warn: the broker may hold the first copies, so consumers may
			// get these twice (marked as resent, see markResent).
			q.log.Warn("amqp publish interrupted; publishing unconfirmed messages again", "queue", t.name, "unconfirmed", len(rest), "err", err)
			pubs = markResent(rest)
		} else if !errors.Is(err, errRetry) {
			return fmt.Errorf("publish to %q: %w", t.name, err)
		}
		if !sleep(ctx, jitter(q.opts.ReconnectMin), q.done) {
			if q.isClosed() {
				return fmt.Errorf("publish to %q: %w", t.name, queue.ErrClosed)
			}
			return fmt.Errorf("publish to %q: %w", t.name, ctx.Err())
		}
	}
}

// markResent returns copies of pubs marked with HeaderResent: the broker
// may have enqueued them already (a lost confirm; a quorum queue may even
// enqueue a message it nacked, when the leader that nacked it had
// replicated it), so a consumer of a copy must not take it for a first
// delivery (queue.SeenBefore).
func markResent(pubs []amqp.Publishing) []amqp.Publishing {
	out := make([]amqp.Publishing, len(pubs))
	for i, p := range pubs {
		h := make(amqp.Table, len(p.Headers)+1)
		maps.Copy(h, p.Headers)
		h[HeaderResent] = int64(1)
		p.Headers = h
		out[i] = p
	}
	return out
}

// errRetry marks a failure to open a channel that a new attempt may fix.
var errRetry = errors.New("connection lost")

// errRefused marks messages that the broker returned or kept nacking:
// publishing them again would not help.
var errRefused = errors.New("broker refused messages")

// errNacked marks messages the broker nacked: not enqueued, so publishing
// them again cannot duplicate them.
var errNacked = fmt.Errorf("%w: nacked", errRefused)

// Retries of nacked messages: after 50 ms, 100 ms, … then every second,
// until nackRetryFor has passed since the first nack. A quorum queue nacks
// while it has no leader, until one is elected: when it was just declared,
// and when its leader's node died (about 4 s on the three-node cluster of
// scripts/cluster, RabbitMQ 3.10, when the node was killed).
const (
	nackRetryBase = 50 * time.Millisecond
	nackRetryMax  = time.Second
	nackRetryFor  = 30 * time.Second
)

// publisher returns an idle publishing channel of the current connection, or
// opens one.
func (q *Queue) publisher(ctx context.Context) (*publisher, error) {
	l, err := q.current(ctx)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	if q.link == l && len(q.idle) > 0 {
		p := q.idle[len(q.idle)-1]
		q.idle = q.idle[:len(q.idle)-1]
		q.mu.Unlock()
		return p, nil
	}
	q.mu.Unlock()
	ch, err := l.conn.Channel()
	if err != nil {
		if connectionLost(l, err) {
			return nil, fmt.Errorf("open channel: %w: %w", errRetry, err)
		}
		return nil, fmt.Errorf("open channel: %w", err)
	}
	p := &publisher{
		l:       l,
		ch:      ch,
		returns: ch.NotifyReturn(make(chan amqp.Return, confirmWindow)),
		closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		if connectionLost(l, err) {
			return nil, fmt.Errorf("confirm mode: %w: %w", errRetry, err)
		}
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	return p, nil
}

// release keeps p for the next publish, or closes it.
func (q *Queue) release(p *publisher) {
	q.mu.Lock()
	keep := !q.closed && q.link == p.l && len(q.idle) < maxIdlePublishers && !p.ch.IsClosed()
	if keep {
		q.idle = append(q.idle, p)
	}
	q.mu.Unlock()
	if !keep {
		_ = p.ch.Close()
	}
}

// publishOn publishes pubs to t on p, confirmWindow messages at a time. On
// error it returns the messages whose fate is unknown (not confirmed).
func (q *Queue) publishOn(ctx context.Context, p *publisher, t target, pubs []amqp.Publishing) ([]amqp.Publishing, error) {
	if err := q.declare(p.l, p.ch, t); err != nil {
		return pubs, q.channelError(p, err)
	}
	for start := 0; start < len(pubs); start += confirmWindow {
		window := pubs[start:min(start+confirmWindow, len(pubs))]
		after := pubs[start+len(window):]
		dcs := make([]*amqp.DeferredConfirmation, 0, len(window))
		for i := range window {
			dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, "", t.name, true, false, window[i])
			if err != nil {
				return pubs[start:], q.channelError(p, fmt.Errorf("publish to %q: %w", t.name, err))
			}
			dcs = append(dcs, dc)
		}
		var unconfirmed, nacked []amqp.Publishing
		for i, dc := range dcs {
			select {
			case <-dc.Done():
			case <-ctx.Done():
				return pubs[start:], fmt.Errorf("publish to %q: wait for confirms: %w", t.name, ctx.Err())
			case <-q.done:
				return pubs[start:], fmt.Errorf("publish to %q: %w", t.name, queue.ErrClosed)
			}
			switch {
			case dc.Acked():
			case p.ch.IsClosed(): // the library nacks what was pending when the channel closed
				unconfirmed = append(unconfirmed, window[i])
			default:
				nacked = append(nacked, window[i])
			}
		}
		if len(unconfirmed) > 0 {
			rest := append(unconfirmed, after...)
			return rest, q.channelError(p, fmt.Errorf("publish to %q: channel closed with %d messages unconfirmed: %w", t.name, len(unconfirmed), amqp.ErrClosed))
		}
		// The broker sends a mandatory message's return before its confirm.
		returned, reply := 0, ""
	drain:
		for {
			select {
			case r, ok := <-p.returns:
				if !ok {
					break drain
				}
				returned++
				reply = fmt.Sprintf("%d %s", r.ReplyCode, r.ReplyText)
			default:
				break drain
			}
		}
		if returned > 0 {
			q.forget(t.name)
			return nil, fmt.Errorf("publish to %q: %w: %d of %d returned as unroutable (%s)", t.name, errRefused, returned, len(window), reply)
		}
		if len(nacked) > 0 {
			rest := append(nacked, after...)
			return rest, fmt.Errorf("publish to %q: %w: %d of %d nacked", t.name, errNacked, len(nacked), len(window))
		}
	}
	return nil, nil
}

// channelError returns the error that closed p's channel, if the broker
// closed it, wrapped around err; otherwise err.
func (q *Queue) channelError(p *publisher, err error) error {
	if !p.ch.IsClosed() {
		return err
	}
	select {
	case e, ok := <-p.closes:
		if ok && e != nil {
			return fmt.Errorf("%v: channel closed by broker: %w", err, e)
		}
	default:
	}
	return err
}
