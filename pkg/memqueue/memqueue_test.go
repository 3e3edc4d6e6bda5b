package memqueue

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
)

// openDurable opens a sqlitequeue in a temporary directory: the durable
// queue of the grid's embedded mode.
func openDurable(t *testing.T, maxAttempts int) *sqlitequeue.Queue {
	t.Helper()
	d, err := sqlitequeue.Open(filepath.Join(t.TempDir(), "queue.db"), sqlitequeue.Options{MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatalf("sqlitequeue.Open() = %v", err)
	}
	return d
}

// newQueue returns a memqueue over a fresh durable queue, closed when t
// ends.
func newQueue(t *testing.T, opts Options) *Queue {
	t.Helper()
	if opts.Durable == nil {
		opts.Durable = openDurable(t, opts.MaxAttempts)
	}
	q, err := New(opts)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// TestConformance runs the queue conformance suite with every test queue
// in memory and the dead-letter queues on the durable sqlitequeue. The
// suite's Reopen sections (ReopenKeepsMessages, ReopenRedeliversUnsettled,
// ReopenKeepsDelayedRetry, ReopenKeepsDeadLetters) are skipped, Reopen
// being nil: messages in memory do not survive a restart by design, the
// transaction index does.
func TestConformance(t *testing.T) {
	for _, maxAttempts := range []int{0, 2} {
		want := maxAttempts
		if want == 0 {
			want = DefaultMaxAttempts
		}
		t.Run(fmt.Sprintf("max attempts %d", want), func(t *testing.T) {
			queuetest.Run(t, queuetest.Harness{
				New: func(t *testing.T) queue.Queue {
					durable, err := sqlitequeue.Open(filepath.Join(t.TempDir(), "queue.db"), sqlitequeue.Options{MaxAttempts: maxAttempts})
					if err != nil {
						t.Fatalf("sqlitequeue.Open() = %v", err)
					}
					q, err := New(Options{Durable: durable, MaxAttempts: maxAttempts})
					if err != nil {
						t.Fatalf("New() = %v", err)
					}
					return q
				},
				MaxAttempts: want,
			})
		})
	}
}

// publishAsync publishes msgs in a goroutine and returns the channel of
// its result.
func publishAsync(ctx context.Context, q queue.Queue, name string, msgs ...queue.Message) <-chan error {
	done := make(chan error, 1)
	go func() { done <- q.Publish(ctx, name, msgs...) }()
	return done
}

// expectBlocked checks that done has no result for a while.
func expectBlocked(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned %v while the queue was full, want it to block", what, err)
	case <-time.After(queuetest.QuietWindow):
	}
}

// expectReturned waits for done's result.
func expectReturned(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(queuetest.DeliveryTimeout):
		t.Fatalf("%s still blocked after %v", what, queuetest.DeliveryTimeout)
	}
	return nil
}

func wantLen(t *testing.T, q queue.Queue, name string, want int) {
	t.Helper()
	n, err := q.Len(t.Context(), name)
	if err != nil || n != want {
		t.Fatalf("Len(%q) = %d, %v, want %d", name, n, err, want)
	}
}

// consume starts a consumer of name that stops when t ends.
func consume(t *testing.T, q queue.Queue, name string, prefetch int) <-chan queue.Delivery {
	t.Helper()
	ch, err := q.Consume(t.Context(), name, queue.ConsumeOptions{Prefetch: prefetch})
	if err != nil {
		t.Fatalf("Consume(%q) = %v", name, err)
	}
	return ch
}

// TestPublishBlocksWhileFull: the bound counts ready, delayed and
// unsettled messages; Publish waits while the queue holds its bound and
// goes on when a delivery is settled.
func TestPublishBlocksWhileFull(t *testing.T) {
	const name = "bounded"
	q := newQueue(t, Options{Bound: func(n string) int {
		if n == name {
			return 3
		}
		return 0
	}})
	ctx := t.Context()
	ch := consume(t, q, name, 1)
	if err := q.Publish(ctx, name, queue.Message{Body: []byte("m0")}, queue.Message{Body: []byte("m1")}); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, name, queue.Message{Body: []byte("m2"), Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	done := publishAsync(ctx, q, name, queue.Message{Body: []byte("m3")})
	expectBlocked(t, done, "Publish on a queue holding 2 messages and 1 delayed of bound 3")

	d := queuetest.Receive(t, ch)
	// Delivered but unsettled: still counted.
	expectBlocked(t, done, "Publish while a delivery is unsettled")
	if err := d.Retry(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Retried: delayed, still counted.
	expectBlocked(t, done, "Publish after a Retry")
	d = queuetest.Receive(t, ch)
	if got := string(d.Body()); got != "m1" {
		t.Fatalf("second delivery = %q, want m1", got)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := expectReturned(t, done, "Publish after an Ack made room"); err != nil {
		t.Fatalf("Publish after an Ack made room = %v, want nil", err)
	}
	if d := queuetest.Receive(t, ch); string(d.Body()) != "m3" {
		t.Errorf("delivery after the Ack = %q, want m3", d.Body())
	}

	// A queue of another name has its own (default) bound.
	consume(t, q, "other", 1)
	if err := q.Publish(ctx, "other", queue.Message{Body: []byte("x")}, queue.Message{Body: []byte("y")}); err != nil {
		t.Fatalf("Publish(other) = %v, want nil", err)
	}
}

// TestPublishBlocksOverBytes: a queue with a byte bound takes messages
// while their bodies fit it, waits for room beyond, counts retried
// messages until they leave, and takes a message larger than the bound
// into an empty queue.
func TestPublishBlocksOverBytes(t *testing.T) {
	const name = "bytes"
	q := newQueue(t, Options{MaxBytes: func(n string) int64 {
		if n == name {
			return 10
		}
		return 0
	}})
	ctx := t.Context()
	ch := consume(t, q, name, 1)
	if err := q.Publish(ctx, name, queue.Message{Body: []byte("aaaa")}, queue.Message{Body: []byte("bbbb")}); err != nil {
		t.Fatal(err)
	}
	done := publishAsync(ctx, q, name, queue.Message{Body: []byte("cccc")})
	expectBlocked(t, done, "Publish of 4 bytes on a queue holding 8 of 10")
	d := queuetest.Receive(t, ch)
	if err := d.Retry(ctx, 0); err != nil {
		t.Fatal(err)
	}
	expectBlocked(t, done, "Publish after a Retry (the message is still held)")
	d = queuetest.Receive(t, ch)
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := expectReturned(t, done, "Publish after an Ack made room"); err != nil {
		t.Fatalf("Publish after an Ack made room = %v, want nil", err)
	}
	for range 2 {
		if err := queuetest.Receive(t, ch).Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Empty now: a message over the bound is taken, and the next waits.
	if err := expectReturned(t, publishAsync(ctx, q, name, queue.Message{Body: make([]byte, 64)}), "Publish of 64 bytes into an empty queue of 10"); err != nil {
		t.Fatalf("Publish of a message over the bound into an empty queue = %v, want nil", err)
	}
	expectBlocked(t, publishAsync(ctx, q, name, queue.Message{Body: []byte("d")}), "Publish behind a message over the bound")
}

// TestPublishWithoutConsumer: a queue nobody consumes cannot make room, so
// Publish does not wait for it; a Publish that waits goes on when the last
// consumer stops.
func TestPublishWithoutConsumer(t *testing.T) {
	const name = "bounded"
	q := newQueue(t, Options{Bound: func(string) int { return 1 }})
	ctx := t.Context()
	wait, cancel := context.WithTimeout(ctx, queuetest.DeliveryTimeout)
	defer cancel()
	if err := q.Publish(wait, name, queue.Message{Body: []byte("m0")}, queue.Message{Body: []byte("m1")}); err != nil {
		t.Fatalf("Publish of 2 messages on a bound of 1 without consumer = %v, want nil", err)
	}
	wantLen(t, q, name, 2)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := q.Consume(cctx, name, queue.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	queuetest.Receive(t, ch)
	done := publishAsync(ctx, q, name, queue.Message{Body: []byte("m2")})
	expectBlocked(t, done, "Publish on a full queue with a consumer")
	stop()
	if err := expectReturned(t, done, "Publish after the last consumer stopped"); err != nil {
		t.Fatalf("Publish after the last consumer stopped = %v, want nil", err)
	}
	wantLen(t, q, name, 3)
}

// TestPublishBatchLargerThanBound: a batch larger than the bound goes in
// as the consumer makes room, in order.
func TestPublishBatchLargerThanBound(t *testing.T) {
	const name = "bounded"
	q := newQueue(t, Options{Bound: func(string) int { return 2 }})
	ctx := t.Context()
	ch := consume(t, q, name, 1)
	var msgs []queue.Message
	var want []string
	for i := range 7 {
		want = append(want, fmt.Sprint("m", i))
		msgs = append(msgs, queue.Message{Body: []byte(want[i])})
	}
	done := publishAsync(ctx, q, name, msgs...)
	var got []string
	for range want {
		d := queuetest.Receive(t, ch)
		got = append(got, string(d.Body()))
		if n, err := q.Len(ctx, name); err != nil || n > 1 {
			t.Errorf("Len() = %d, %v while the consumer holds one of a bound of 2, want at most 1", n, err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := expectReturned(t, done, "Publish of 7 messages on a bound of 2"); err != nil {
		t.Fatalf("Publish = %v, want nil", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// TestPublishFullContextDone: a Publish waiting for room returns when its
// context ends, with the context's error, and enqueues nothing; Close ends
// it too.
func TestPublishFullContextDone(t *testing.T) {
	const name = "bounded"
	q := newQueue(t, Options{Bound: func(string) int { return 1 }})
	ch := consume(t, q, name, 1)
	if err := q.Publish(t.Context(), name, queue.Message{Body: []byte("m0")}); err != nil {
		t.Fatal(err)
	}
	queuetest.Receive(t, ch) // held, unsettled: the queue is full
	ctx, cancel := context.WithCancel(t.Context())
	done := publishAsync(ctx, q, name, queue.Message{Body: []byte("m1")})
	expectBlocked(t, done, "Publish on a full queue")
	cancel()
	if err := expectReturned(t, done, "Publish after its context was cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("Publish after its context was cancelled = %v, want %v", err, context.Canceled)
	}
	wantLen(t, q, name, 0)

	done = publishAsync(t.Context(), q, name, queue.Message{Body: []byte("m2")})
	expectBlocked(t, done, "Publish on a full queue")
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := expectReturned(t, done, "Publish after Close"); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Publish waiting for room when the queue closed = %v, want %v", err, queue.ErrClosed)
	}
}

// TestDeadLettersGoToDurable: DeadLetter and a Retry past the attempts
// put the message on the durable queue's dead-letter queue, with its
// headers and the reason; the in-memory queue keeps nothing of it.
func TestDeadLettersGoToDurable(t *testing.T) {
	const name = "mem"
	durable := openDurable(t, 2)
	q := newQueue(t, Options{Durable: durable, MaxAttempts: 2, InMemory: func(n string) bool { return n == name }})
	ctx := t.Context()
	if err := q.Publish(ctx, name, queue.Message{Body: []byte("bad"), Headers: map[string]string{"k": "v"}}, queue.Message{Body: []byte("poison")}); err != nil {
		t.Fatal(err)
	}
	wantLen(t, durable, name, 0) // in memory, not in the durable queue
	ch, err := q.Consume(ctx, name, queue.ConsumeOptions{Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := queuetest.Receive(t, ch).DeadLetter(ctx, "undecodable"); err != nil {
		t.Fatalf("DeadLetter() = %v, want nil", err)
	}
	for range 2 {
		if err := queuetest.Receive(t, ch).Retry(ctx, 0); err != nil {
			t.Fatalf("Retry() = %v, want nil", err)
		}
	}
	wantLen(t, q, name, 0)
	dlq := queue.DeadLetterQueue(name)
	wantLen(t, durable, dlq, 2)

	dch, err := durable.Consume(ctx, dlq, queue.ConsumeOptions{Prefetch: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for range 2 {
		d := queuetest.Receive(t, dch)
		got[string(d.Body())] = d.Headers()
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]map[string]string{
		"bad":    {"k": "v", queue.HeaderReason: "undecodable", queue.HeaderSourceQueue: name},
		"poison": {queue.HeaderReason: queue.ReasonMaxAttempts, queue.HeaderSourceQueue: name},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dead letters on the durable queue (-want +got):\n%s", diff)
	}
}

// TestOtherQueuesAreDurable: a queue InMemory does not accept is the
// durable queue's, for publishing, consuming and Len alike.
func TestOtherQueuesAreDurable(t *testing.T) {
	durable := openDurable(t, 0)
	q := newQueue(t, Options{Durable: durable, InMemory: func(n string) bool { return n == "mem" }})
	ctx := t.Context()
	if err := q.Publish(ctx, "disk", queue.Message{Body: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	wantLen(t, durable, "disk", 1)
	wantLen(t, q, "disk", 1)
	ch, err := durable.Consume(ctx, "disk", queue.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := queuetest.Receive(t, ch); string(d.Body()) != "d" {
		t.Errorf("durable delivery = %q, want %q", d.Body(), "d")
	}
}

// failingQueue is a durable queue whose Publish fails: a sink that is
// down.
type failingQueue struct{ queue.Queue }

var errDown = errors.New("sink down")

func (failingQueue) Publish(context.Context, string, ...queue.Message) error { return errDown }

// TestDeadLetterSinkFails: when the durable queue refuses a dead letter,
// DeadLetter fails and the message is not lost: the delivery can still be
// settled, and a stopped consumer's delivery goes back to the queue.
func TestDeadLetterSinkFails(t *testing.T) {
	const name = "mem"
	q := newQueue(t, Options{Durable: failingQueue{openDurable(t, 0)}})
	ctx := t.Context()
	if err := q.Publish(ctx, name, queue.Message{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	ch, err := q.Consume(cctx, name, queue.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := queuetest.Receive(t, ch)
	if err := d.DeadLetter(ctx, "bad"); !errors.Is(err, errDown) {
		t.Fatalf("DeadLetter() with the sink down = %v, want %v", err, errDown)
	}
	stop()
	for range ch {
	}
	if err := d.Ack(ctx); !errors.Is(err, queue.ErrSettled) {
		t.Errorf("Ack() of a stopped consumer's delivery = %v, want %v", err, queue.ErrSettled)
	}
	wantLen(t, q, name, 1)
	ch, err = q.Consume(ctx, name, queue.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d = queuetest.Receive(t, ch)
	if string(d.Body()) != "m" || !d.Redelivered() {
		t.Errorf("after a failed dead letter: Body() %q, Redelivered() %v, want %q, true", d.Body(), d.Redelivered(), "m")
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack() = %v, want nil", err)
	}
}

// TestConsumerPublishesToOwnQueue: work on a queue's deliveries
// (queue.ConsumerOf) publishes to that full queue without waiting, beyond
// its bounds; the mark of another queue does not waive the wait. The
// crawler publishes relinks to the queue it consumes: with every worker
// waiting for room only they could make, the whole grid stopped.
func TestConsumerPublishesToOwnQueue(t *testing.T) {
	const name = "bounded"
	q := newQueue(t, Options{Bound: func(string) int { return 1 }, MaxBytes: func(string) int64 { return 4 }})
	ch := consume(t, q, name, 1)
	if err := q.Publish(t.Context(), name, queue.Message{Body: []byte("m0")}); err != nil {
		t.Fatal(err)
	}
	d := queuetest.Receive(t, ch) // held, unsettled: the queue is full
	other := publishAsync(queue.ConsumerOf(t.Context(), "another"), q, name, queue.Message{Body: []byte("m1")})
	expectBlocked(t, other, "Publish on a full queue marked as work on another queue")
	own := publishAsync(queue.ConsumerOf(t.Context(), name), q, name, queue.Message{Body: []byte("m2")},
		queue.Message{Body: []byte("m3-longer-than-the-byte-bound")})
	if err := expectReturned(t, own, "Publish on a full queue by its own consumer's work"); err != nil {
		t.Fatal(err)
	}
	wantLen(t, q, name, 2)
	if err := d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		d := queuetest.Receive(t, ch)
		got = append(got, string(d.Body()))
		if err := d.Ack(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := expectReturned(t, other, "the waiting Publish once there was room"); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"m1", "m2", "m3-longer-than-the-byte-bound"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}
