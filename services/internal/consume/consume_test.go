package consume

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

const jobs = "jobs"

// job is the contract of the tests' stage.
type job struct {
	V  int    `json:"v"`
	ID string `json:"id"`
}

func validJob(j *job) error {
	if j.ID == "" {
		return errors.New("no id")
	}
	return nil
}

func newQueue(t *testing.T) *sqlitequeue.Queue {
	t.Helper()
	q, err := sqlitequeue.Open(filepath.Join(t.TempDir(), "queue.db"), sqlitequeue.Options{MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func newShell(q queue.Queue, gate *outage.Gate, workers int) *Shell[job] {
	return New(Config[job]{Queue: q, QueueName: jobs, Kind: "job", Prefetch: 8, Workers: workers,
		Version: func(j *job) int { return j.V }, Validate: validJob, Gate: gate})
}

func body(t *testing.T, id string) []byte {
	t.Helper()
	b, err := json.Marshal(job{V: contracts.Version, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func publish(t *testing.T, q queue.Queue, bodies ...[]byte) {
	t.Helper()
	for _, b := range bodies {
		if err := q.Publish(t.Context(), jobs, queue.Message{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs s with h on jobs until the test ends.
func run(t *testing.T, s *Shell[job], h Handler[job]) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, h) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(stop) })
	return func() { once.Do(stop) }
}

// call is one call of a handler.
type call struct {
	id          string
	attempt     int
	redelivered bool
	at          time.Time
}

func next(t *testing.T, calls <-chan call) call {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(15 * time.Second):
		t.Fatal("handler not called within 15s")
		return call{}
	}
}

func length(t *testing.T, q queue.Queue, name string) int {
	t.Helper()
	n, err := q.Len(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// deadReasons consumes the dead-letter queue of jobs and returns the
// reasons of its n messages.
func deadReasons(t *testing.T, q queue.Queue, n int) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ds, err := q.Consume(ctx, queue.DeadLetterQueue(jobs), queue.ConsumeOptions{Prefetch: n})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for range n {
		select {
		case d := <-ds:
			reasons = append(reasons, d.Headers()[queue.HeaderReason])
		case <-time.After(10 * time.Second):
			t.Fatalf("dead-letter queue holds %d messages, want %d", len(reasons), n)
		}
	}
	return reasons
}

// TestPoison checks that deliveries without a valid contract are
// dead-lettered with their reason and never reach the handler.
func TestPoison(t *testing.T) {
	wrongVersion, _ := json.Marshal(job{V: contracts.Version + 1, ID: "new"})
	noID, _ := json.Marshal(job{V: contracts.Version})
	poison := []struct {
		name   string
		body   []byte
		reason string
	}{
		{"undecodable", []byte(`{"v":1,"id":`), "undecodable job contract: "},
		{"not an object", []byte(`[1,2]`), "undecodable job contract: "},
		{"wrong version", wrongVersion, "job contract of version 2, want 1"},
		{"no version", []byte(`{"id":"old"}`), "job contract of version 0, want 1"},
		{"invalid", noID, "invalid job contract: no id"},
	}
	q := newQueue(t)
	for _, p := range poison {
		publish(t, q, p.body)
	}
	publish(t, q, body(t, "good"))
	calls := make(chan call, 10)
	run(t, newShell(q, nil, 1), func(ctx context.Context, d queue.Delivery, j *job) Verdict {
		calls <- call{id: j.ID}
		return Ack()
	})
	// One worker takes first deliveries in order: the poison is settled
	// when the good contract comes.
	if c := next(t, calls); c.id != "good" {
		t.Fatalf("handler called with %q, want only the valid contract", c.id)
	}
	reasons := deadReasons(t, q, len(poison))
	for i, p := range poison {
		if !strings.HasPrefix(reasons[i], p.reason) {
			t.Errorf("%s: dead-letter reason %q, want prefix %q", p.name, reasons[i], p.reason)
		}
	}
	select {
	case c := <-calls:
		t.Errorf("handler called again with %q", c.id)
	default:
	}
}

// TestVerdicts checks how each verdict of a handler settles its delivery.
func TestVerdicts(t *testing.T) {
	t.Run("ack", func(t *testing.T) {
		q := newQueue(t)
		publish(t, q, body(t, "a"))
		got := make(chan queue.Delivery, 10)
		stop := run(t, newShell(q, nil, 2), func(ctx context.Context, d queue.Delivery, j *job) Verdict {
			got <- d
			return Ack()
		})
		d := <-got
		// The handler hands d over before it returns its verdict: wait
		// for the shell to settle it (stopping the shell first would race
		// the ack with the consumer's shutdown, which gives unsettled
		// deliveries back to the queue).
		n, dead := 0, 0
		for deadline := time.Now().Add(10 * time.Second); ; {
			n, dead = length(t, q, jobs), length(t, q, queue.DeadLetterQueue(jobs))
			if n == 0 && dead == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n != 0 || dead != 0 {
			t.Errorf("after Ack: %d messages in the queue, %d dead, want none", n, dead)
		}
		stop()
		if err := d.Ack(t.Context()); !errors.Is(err, queue.ErrSettled) {
			t.Errorf("Ack after the verdict Ack = %v, want %v", err, queue.ErrSettled)
		}
	})
	for _, tc := range []struct {
		name string
		v    Verdict
	}{
		{"retry", Retry(errors.New("page failed"))},
		{"no verdict", Verdict{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			publish(t, q, body(t, "a"))
			calls := make(chan call, 10)
			run(t, newShell(q, nil, 1), func(ctx context.Context, d queue.Delivery, j *job) Verdict {
				calls <- call{id: j.ID, attempt: d.Attempt(), at: time.Now()}
				if d.Attempt() == 1 {
					return tc.v
				}
				return Ack()
			})
			first, second := next(t, calls), next(t, calls)
			if second.attempt != 2 {
				t.Errorf("attempt after %s = %d, want 2", tc.name, second.attempt)
			}
			// A queue may deliver late, never early: the delay is a lower bound.
			if wait, want := second.at.Sub(first.at), queue.RetryDelay(1); wait < want-100*time.Millisecond {
				t.Errorf("delivered again after %v, want at least queue.RetryDelay(1) = %v", wait, want)
			}
		})
	}
	t.Run("dead-letter", func(t *testing.T) {
		q := newQueue(t)
		publish(t, q, body(t, "a"))
		calls := make(chan call, 10)
		run(t, newShell(q, nil, 1), func(ctx context.Context, d queue.Delivery, j *job) Verdict {
			calls <- call{id: j.ID}
			return DeadLetter("not wanted")
		})
		next(t, calls)
		if r := deadReasons(t, q, 1); r[0] != "not wanted" {
			t.Errorf("dead-letter reason %q, want %q", r[0], "not wanted")
		}
	})
	t.Run("hold", func(t *testing.T) {
		q := newQueue(t)
		publish(t, q, body(t, "a"))
		held := make(chan queue.Delivery, 1)
		s := newShell(q, nil, 1)
		run(t, s, func(ctx context.Context, d queue.Delivery, j *job) Verdict {
			held <- d
			return Hold()
		})
		var d queue.Delivery
		select {
		case d = <-held:
		case <-time.After(10 * time.Second):
			t.Fatal("handler not called")
		}
		// The shell left d to the handler: it is not settled yet.
		if err := d.Ack(t.Context()); err != nil {
			t.Errorf("Ack of a held delivery = %v, want nil", err)
		}
	})
	t.Run("settle held", func(t *testing.T) {
		q := newQueue(t)
		publish(t, q, body(t, "a"))
		held := make(chan queue.Delivery, 1)
		s := newShell(q, nil, 1)
		stop := run(t, s, func(ctx context.Context, d queue.Delivery, j *job) Verdict {
			held <- d
			return Hold()
		})
		d := <-held
		s.Settle(t.Context(), DeadLetter("later"), d)
		stop()
		if r := deadReasons(t, q, 1); r[0] != "later" {
			t.Errorf("dead-letter reason %q, want %q", r[0], "later")
		}
		if n := length(t, q, jobs); n != 0 {
			t.Errorf("%d messages in the queue, want 0", n)
		}
	})
	t.Run("ack while stopping", func(t *testing.T) {
		// The shell stops while the ack of work done is under way (the
		// queue is slow to answer): the ack still lands, the contract is
		// not delivered again.
		inner := newQueue(t)
		publish(t, inner, body(t, "a"))
		q := &slowAcks{acking: make(chan struct{}), release: make(chan struct{})}
		s := newShell(queuetest.Wrap(inner, func(d queue.Delivery) queue.Delivery { return &slowAck{Delivery: d, q: q} }), nil, 1)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- s.Run(ctx, func(ctx context.Context, d queue.Delivery, j *job) Verdict { return Ack() })
		}()
		select {
		case <-q.acking:
		case <-time.After(15 * time.Second):
			t.Fatal("the shell did not ack")
		}
		cancel()
		close(q.release)
		if err := <-done; err != nil {
			t.Fatalf("Run() = %v", err)
		}
		if n, dead := length(t, inner, jobs), length(t, inner, queue.DeadLetterQueue(jobs)); n != 0 || dead != 0 {
			t.Errorf("after an ack under way while stopping: %d messages in the queue, %d dead, want none", n, dead)
		}
	})
	t.Run("retry while stopping", func(t *testing.T) {
		q := newQueue(t)
		publish(t, q, body(t, "a"))
		calls := make(chan call, 10)
		s := newShell(q, nil, 1)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- s.Run(ctx, func(ctx context.Context, d queue.Delivery, j *job) Verdict {
				calls <- call{id: j.ID}
				cancel() // the service stops while the contract is processed
				return Retry(ctx.Err())
			})
		}()
		next(t, calls)
		if err := <-done; err != nil {
			t.Fatalf("Run() = %v", err)
		}
		// Not retried: delivered again as it was, not counting an attempt.
		run(t, s, func(ctx context.Context, d queue.Delivery, j *job) Verdict {
			calls <- call{id: j.ID, attempt: d.Attempt(), redelivered: d.Redelivered()}
			return Ack()
		})
		if c := next(t, calls); c.attempt != 1 || !c.redelivered {
			t.Errorf("after a failure while stopping: attempt %d, redelivered %v; want 1, true", c.attempt, c.redelivered)
		}
	})
}

// slowAcks makes acks wait, once they have started, until release is
// closed: acking is closed when the first one starts.
type slowAcks struct {
	acking, release chan struct{}
	once            sync.Once
}

type slowAck struct {
	queue.Delivery
	q *slowAcks
}

func (d *slowAck) Ack(ctx context.Context) error {
	d.q.once.Do(func() { close(d.q.acking) })
	<-d.q.release
	return d.Delivery.Ack(ctx)
}

var errFull = errors.New("disk full")

// disk is a backend check whose verdict the test sets: after freeAfter
// probes it answers again.
type disk struct {
	full      atomic.Bool
	probes    atomic.Int32
	freeAfter atomic.Int32
}

func (d *disk) gate() *outage.Gate {
	return outage.New([]metrics.Check{{Backend: "disk", Probe: func(context.Context) error {
		if n := d.probes.Add(1); d.freeAfter.Load() > 0 && n >= d.freeAfter.Load() {
			d.full.Store(false)
		}
		if d.full.Load() {
			return errFull
		}
		return nil
	}}}, nil)
}

// TestPostponeWhileBackendDown checks that a contract that failed while a
// backend is down comes back without counting an attempt, and that the
// shell takes no other contract until the backend is back.
func TestPostponeWhileBackendDown(t *testing.T) {
	q := newQueue(t)
	publish(t, q, body(t, "a"), body(t, "b"))
	dk := &disk{}
	calls := make(chan call, 10)
	type seen struct {
		id      string
		attempt int
		full    bool
	}
	var log []seen
	run(t, newShell(q, dk.gate(), 1), func(ctx context.Context, d queue.Delivery, j *job) Verdict {
		log = append(log, seen{j.ID, d.Attempt(), dk.full.Load()})
		calls <- call{id: j.ID}
		if j.ID == "a" && d.Attempt() == 1 && len(log) == 1 {
			dk.full.Store(true) // the disk fills while a is processed
			dk.freeAfter.Store(dk.probes.Load() + 3)
			return Retry(errFull)
		}
		return Ack()
	})
	next(t, calls)
	next(t, calls)
	next(t, calls)
	if len(log) != 3 {
		t.Fatalf("handler calls %v, want 3", log)
	}
	for _, s := range log[1:] {
		if s.full {
			t.Errorf("contract %s handled while the disk was full: the shell did not wait for the backend", s.id)
		}
		if s.attempt != 1 {
			t.Errorf("contract %s on attempt %d, want 1: a postponed contract counts no attempt", s.id, s.attempt)
		}
	}
}

// TestBatch checks the batch form: it takes the deliveries available at
// once up to Max, leaves the invalid ones out, settles a batch by its
// verdict, probes the backends once for a failed batch, and runs Tick in
// the handler's goroutine.
func TestBatch(t *testing.T) {
	q := newQueue(t)
	publish(t, q, body(t, "a"), []byte("poison"), body(t, "b"), body(t, "c"), body(t, "d"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	consumed, err := q.Consume(ctx, jobs, queue.ConsumeOptions{Prefetch: 8})
	if err != nil {
		t.Fatal(err)
	}
	// Every delivery is available at once. The channel stays open: the
	// handler's Tick ends the run once it has settled what it held.
	deliveries := make(chan queue.Delivery, 8)
	for range 5 {
		deliveries <- <-consumed
	}

	dk := &disk{}
	g := dk.gate()
	g.Down(ctx) // a first verdict: up
	s := newShell(q, g, 1)
	var batches [][]string
	var held []queue.Delivery
	var d queue.Delivery // the last one held
	probes := int32(0)
	serveCtx, stop := context.WithTimeout(ctx, 15*time.Second)
	defer stop()
	s.ServeBatch(serveCtx, deliveries, Batch[job]{Max: 4,
		Handle: func(ctx context.Context, batch []Message[job]) Verdict {
			var ids []string
			for _, m := range batch {
				ids = append(ids, m.Contract.ID)
			}
			batches = append(batches, ids)
			if len(batches) == 1 {
				probes = dk.probes.Load()
				return Retry(errors.New("store failed"))
			}
			for _, m := range batch {
				held = append(held, m.Delivery) // not synchronised: Tick runs in this goroutine
				d = m.Delivery
			}
			return Hold()
		},
		Every: time.Millisecond,
		Tick: func(ctx context.Context) {
			if len(held) > 0 {
				s.Settle(ctx, Ack(), held...)
				held = nil
				stop()
			}
		},
	})
	if serveCtx.Err() == context.DeadlineExceeded {
		t.Fatal("Tick did not settle the held delivery within 15s")
	}
	if got := strings.Join(batches[0], ","); len(batches) != 2 || got != "a,b,c" || batches[1][0] != "d" {
		t.Fatalf("batches %v, want [[a b c] [d]]: four deliveries, one of them poison, then one", batches)
	}
	if n := dk.probes.Load() - probes; n != 1 {
		t.Errorf("a failed batch of 3 probed the backends %d times, want 1", n)
	}
	if err := d.Ack(ctx); !errors.Is(err, queue.ErrSettled) {
		t.Errorf("Ack of the delivery Tick settled = %v, want %v", err, queue.ErrSettled)
	}
	// a, b and c wait for their retry.
	if n := length(t, q, jobs); n != 3 {
		t.Errorf("%d messages in the queue, want 3: the failed batch's, retried", n)
	}
	if r := deadReasons(t, q, 1); !strings.HasPrefix(r[0], "undecodable job contract") {
		t.Errorf("dead-letter reason %q, want undecodable", r[0])
	}
}

// TestHandlerWorksOnItsQueue: the context a handler (and a batch handler)
// runs under is marked as work on the shell's queue, so that a bounded
// queue it publishes back to does not make it wait on itself.
func TestHandlerWorksOnItsQueue(t *testing.T) {
	q := newQueue(t)
	publish(t, q, body(t, "a"))
	marked := make(chan bool, 1)
	stop := run(t, newShell(q, nil, 1), func(ctx context.Context, d queue.Delivery, j *job) Verdict {
		marked <- queue.IsConsumerOf(ctx, jobs) && !queue.IsConsumerOf(ctx, "other")
		return Ack()
	})
	if !<-marked {
		t.Error("the handler's context is not marked as work on its queue alone")
	}
	stop()

	publish(t, q, body(t, "b"))
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	consumed, err := q.Consume(ctx, jobs, queue.ConsumeOptions{Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	newShell(q, nil, 1).ServeBatch(ctx, consumed, Batch[job]{Max: 1, Handle: func(bctx context.Context, _ []Message[job]) Verdict {
		marked <- queue.IsConsumerOf(bctx, jobs)
		cancel()
		return Ack()
	}})
	if !<-marked {
		t.Error("the batch handler's context is not marked as work on its queue")
	}
}
