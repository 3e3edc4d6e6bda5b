// Package queuetest is the conformance suite that every queue.Queue
// implementation runs, embedded or backed by a real broker.
//
// The suite only assumes what the queue.Queue doc comment promises. It names
// every queue uniquely per test, bounds every wait (a delivery that does not
// come within DeliveryTimeout fails the test), checks "nothing arrives" over
// short windows only, and asserts delays loosely: a retried message must not
// come back before its delay, and must come back eventually.
package queuetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// Bounds of the suite's waits.
const (
	// DeliveryTimeout bounds every wait for a delivery or a closed channel.
	DeliveryTimeout = 10 * time.Second
	// QuietWindow is how long the suite watches a consumer to check that
	// nothing (more) arrives.
	QuietWindow = 300 * time.Millisecond
	// timingSlack absorbs clock granularity when checking that a retry did
	// not come back before its delay.
	timingSlack = 50 * time.Millisecond
)

// Harness tells Run how to build the queue under test. Subtests run in
// parallel, each on its own queue from New, so New, Reopen and DeleteQueues
// must be safe for concurrent use.
type Harness struct {
	// New returns a fresh queue; the suite closes it.
	New func(t *testing.T) queue.Queue
	// Reopen closes q and returns a new Queue on the same storage/broker
	// (restart survival); nil skips those subtests with t.Skip("no reopen").
	Reopen func(t *testing.T, q queue.Queue) queue.Queue
	// MaxAttempts is the maximum attempts the queue under test was configured
	// with (Retry beyond → dead letter).
	MaxAttempts int
	// DeleteQueues, if not nil, removes the named queues (and whatever the
	// implementation keeps beside them) when a subtest ends. Broker-backed
	// implementations set it so that test queues do not pile up; embedded
	// ones that store each test in a temporary directory leave it nil.
	DeleteQueues func(t *testing.T, queues []string)
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("queuetest.Harness.New is nil")
	}
	if h.MaxAttempts < 1 {
		t.Fatalf("queuetest.Harness.MaxAttempts = %d, want >= 1", h.MaxAttempts)
	}
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"PublishConsumeAckFIFO", testFIFO},
		{"ConcurrentPublishersAndConsumers", testConcurrent},
		{"PrefetchBound", testPrefetch},
		{"RedeliverOnCancel", testRedeliverOnCancel},
		{"CancelClosesChannel", testCancelClosesChannel},
		{"CloseClosesConsumers", testCloseClosesConsumers},
		{"QueuesAreSeparate", testQueuesAreSeparate},
		{"RetryWithDelay", testRetryDelay},
		{"PublishDelayed", testPublishDelayed},
		{"MaxAttemptsDeadLetters", testMaxAttempts},
		{"PostponeKeepsAttempt", testPostpone},
		{"DeadLetter", testDeadLetter},
		{"DoubleSettle", testDoubleSettle},
		{"HeadersRoundTrip", testHeaders},
		{"LenCountsReadyAndDelayed", testLen},
		{"ClosedQueue", testClosed},
		{"ReopenKeepsMessages", testReopenKeepsMessages},
		{"ReopenRedeliversUnsettled", testReopenRedeliversUnsettled},
		{"ReopenKeepsDelayedRetry", testReopenKeepsDelayedRetry},
		{"ReopenKeepsDeadLetters", testReopenKeepsDeadLetters},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

// env is one subtest's queue under test, its names, and its cleanup.
type env struct {
	t  *testing.T
	h  Harness
	mu sync.Mutex
	q  queue.Queue // current queue; nil once closed by the test
}

// newEnv returns a fresh queue that is closed (and whose queues are deleted)
// when t ends.
func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	e := &env{t: t, h: h, q: h.New(t)}
	t.Cleanup(func() {
		e.mu.Lock()
		q := e.q
		e.q = nil
		e.mu.Unlock()
		if q != nil {
			if err := q.Close(); err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
		}
	})
	return e
}

// queue returns the current queue under test.
func (e *env) queue() queue.Queue {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.q
}

// close closes the queue under test; the cleanup will not close it again.
func (e *env) close() error {
	e.mu.Lock()
	q := e.q
	e.q = nil
	e.mu.Unlock()
	return q.Close()
}

// reopen restarts the queue under test, or skips the test without Reopen.
func (e *env) reopen() queue.Queue {
	e.t.Helper()
	if e.h.Reopen == nil {
		e.t.Skip("no reopen")
	}
	e.mu.Lock()
	old := e.q
	e.q = nil
	e.mu.Unlock()
	q := e.h.Reopen(e.t, old)
	e.mu.Lock()
	e.q = q
	e.mu.Unlock()
	return q
}

// name returns a queue name unique to this test run, and registers it and
// its dead-letter queue for deletion.
func (e *env) name() string {
	e.t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		e.t.Fatalf("rand.Read() = %v", err)
	}
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, e.t.Name())
	if len(base) > 100 {
		base = base[len(base)-100:]
	}
	n := "qt." + base + "." + hex.EncodeToString(b[:])
	if e.h.DeleteQueues != nil {
		e.t.Cleanup(func() { e.h.DeleteQueues(e.t, []string{n, queue.DeadLetterQueue(n)}) })
	}
	return n
}

// publish publishes msgs on name and fails the test on error.
func (e *env) publish(name string, msgs ...queue.Message) {
	e.t.Helper()
	if err := e.queue().Publish(e.t.Context(), name, msgs...); err != nil {
		e.t.Fatalf("Publish(%q, %d messages) = %v, want nil", name, len(msgs), err)
	}
}

// consume starts a consumer on name that stops when the test ends or cancel
// is called.
func (e *env) consume(name string, prefetch int) (<-chan queue.Delivery, context.CancelFunc) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	e.t.Cleanup(cancel)
	ch, err := e.queue().Consume(ctx, name, queue.ConsumeOptions{Prefetch: prefetch})
	if err != nil {
		cancel()
		e.t.Fatalf("Consume(%q, prefetch %d) = %v, want nil", name, prefetch, err)
	}
	return ch, cancel
}

// eventuallyLen waits until Len(name) == want.
func (e *env) eventuallyLen(name string, want int) {
	e.t.Helper()
	deadline := time.Now().Add(DeliveryTimeout)
	for {
		n, err := e.queue().Len(e.t.Context(), name)
		if err != nil {
			e.t.Fatalf("Len(%q) = %v, want nil", name, err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("Len(%q) = %d after %v, want %d", name, n, DeliveryTimeout, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Receive waits for one delivery on ch and fails t after DeliveryTimeout.
func Receive(t testing.TB, ch <-chan queue.Delivery) queue.Delivery {
	t.Helper()
	timer := time.NewTimer(DeliveryTimeout)
	defer timer.Stop()
	select {
	case d, ok := <-ch:
		if !ok {
			t.Fatal("consumer channel closed while waiting for a delivery")
		}
		return d
	case <-timer.C:
		t.Fatalf("no delivery within %v", DeliveryTimeout)
	}
	return nil
}

// receiveN waits for n deliveries on ch.
func receiveN(t *testing.T, ch <-chan queue.Delivery, n int) []queue.Delivery {
	t.Helper()
	ds := make([]queue.Delivery, 0, n)
	for range n {
		ds = append(ds, Receive(t, ch))
	}
	return ds
}

// ExpectNone checks that nothing is delivered on ch for QuietWindow.
func ExpectNone(t testing.TB, ch <-chan queue.Delivery) {
	t.Helper()
	timer := time.NewTimer(QuietWindow)
	defer timer.Stop()
	select {
	case d, ok := <-ch:
		if ok {
			t.Fatalf("unexpected delivery of %q (attempt %d, redelivered %v)", d.Body(), d.Attempt(), d.Redelivered())
		}
		t.Fatal("consumer channel closed unexpectedly")
	case <-timer.C:
	}
}

// expectClosed waits until ch is closed, discarding what is still delivered.
func expectClosed(t *testing.T, ch <-chan queue.Delivery) {
	t.Helper()
	timer := time.NewTimer(DeliveryTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("consumer channel not closed within %v", DeliveryTimeout)
		}
	}
}

// ack acks d and fails the test on error.
func ack(t *testing.T, d queue.Delivery) {
	t.Helper()
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack(%q) = %v, want nil", d.Body(), err)
	}
}

// bodies returns the bodies of ds as strings.
func bodies(ds []queue.Delivery) []string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = string(d.Body())
	}
	return s
}

// numbered returns n messages with bodies prefix0 … prefix(n-1).
func numbered(prefix string, n int) ([]queue.Message, []string) {
	msgs := make([]queue.Message, n)
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("%s%d", prefix, i)
		msgs[i] = queue.Message{Body: []byte(want[i])}
	}
	return msgs, want
}

func testFIFO(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	msgs, want := numbered("m", 20)
	e.publish(name, msgs[:1]...)
	e.publish(name, msgs[1:12]...)
	for _, m := range msgs[12:] {
		e.publish(name, m)
	}
	ch, _ := e.consume(name, 5)
	var got []string
	for range len(want) {
		d := Receive(t, ch)
		if d.Attempt() != 1 || d.Redelivered() {
			t.Errorf("first delivery of %q: Attempt() = %d, Redelivered() = %v, want 1, false", d.Body(), d.Attempt(), d.Redelivered())
		}
		got = append(got, string(d.Body()))
		ack(t, d)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivery order (-want +got):\n%s", diff)
	}
	ExpectNone(t, ch)
	e.eventuallyLen(name, 0)
}

func testConcurrent(t *testing.T, h Harness) {
	const (
		publishers = 2
		perPub     = 250
		batch      = 25
		consumers  = 4
		prefetch   = 8
		total      = publishers * perPub
	)
	e := newEnv(t, h)
	name := e.name()

	var (
		mu       sync.Mutex
		acked    = make(map[string]int)
		done     = make(chan struct{})
		doneOnce sync.Once
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for i := range consumers {
		ch, err := e.queue().Consume(ctx, name, queue.ConsumeOptions{Prefetch: prefetch})
		if err != nil {
			t.Fatalf("Consume(%q) #%d = %v, want nil", name, i, err)
		}
		wg.Go(func() {
			for d := range ch {
				if err := d.Ack(ctx); err != nil {
					if ctx.Err() == nil {
						t.Errorf("Ack(%q) = %v, want nil", d.Body(), err)
					}
					continue
				}
				mu.Lock()
				acked[string(d.Body())]++
				if len(acked) == total {
					doneOnce.Do(func() { close(done) })
				}
				mu.Unlock()
			}
		})
	}
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Go(func() {
			for b := 0; b < perPub; b += batch {
				msgs := make([]queue.Message, batch)
				for i := range msgs {
					msgs[i] = queue.Message{Body: fmt.Appendf(nil, "p%d-%d", p, b+i)}
				}
				if err := e.queue().Publish(ctx, name, msgs...); err != nil {
					t.Errorf("Publish(%q) = %v, want nil", name, err)
					return
				}
			}
		})
	}
	pubs.Wait()
	timer := time.NewTimer(3 * DeliveryTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		t.Errorf("acked %d distinct messages within %v, want %d", n, 3*DeliveryTimeout, total)
	}
	// Give duplicates, if any, a chance to show up before counting.
	time.Sleep(QuietWindow)
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for p := range publishers {
		for i := range perPub {
			body := fmt.Sprintf("p%d-%d", p, i)
			if n := acked[body]; n != 1 {
				t.Errorf("message %q acked %d times, want 1", body, n)
			}
		}
	}
	e.eventuallyLen(name, 0)
}

func testPrefetch(t *testing.T, h Harness) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("prefetch=%d", n), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, h)
			name := e.name()
			msgs, want := numbered("m", 3*n)
			e.publish(name, msgs...)
			ch, _ := e.consume(name, n)
			held := receiveN(t, ch, n)
			ExpectNone(t, ch)
			e.eventuallyLen(name, 2*n)

			// Every ack frees exactly one slot.
			got := bodies(held)
			for len(got) < len(want) {
				ack(t, held[0])
				held = held[1:]
				d := Receive(t, ch)
				held = append(held, d)
				got = append(got, string(d.Body()))
				if len(got) < len(want) {
					ExpectNone(t, ch)
				}
			}
			for _, d := range held {
				ack(t, d)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("deliveries (-want +got):\n%s", diff)
			}
			ExpectNone(t, ch)
		})
	}
	t.Run("prefetch=0 means 1", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, h)
		name := e.name()
		msgs, _ := numbered("m", 3)
		e.publish(name, msgs...)
		ch, _ := e.consume(name, 0)
		d := Receive(t, ch)
		ExpectNone(t, ch)
		ack(t, d)
		ack(t, Receive(t, ch))
	})
}

func testRedeliverOnCancel(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	hdr := map[string]string{"k": "v"}
	e.publish(name,
		queue.Message{Body: []byte("a"), Headers: hdr},
		queue.Message{Body: []byte("b"), Headers: hdr},
		queue.Message{Body: []byte("c"), Headers: hdr},
	)
	ch1, cancel1 := e.consume(name, 3)
	ds := receiveN(t, ch1, 3)
	ack(t, ds[0])
	cancel1()
	expectClosed(t, ch1)

	ch2, _ := e.consume(name, 3)
	got := receiveN(t, ch2, 2)
	for _, d := range got {
		if !d.Redelivered() {
			t.Errorf("Redelivered() of %q after its consumer stopped = false, want true", d.Body())
		}
		if d.Attempt() != 1 {
			t.Errorf("Attempt() of redelivered %q = %d, want 1", d.Body(), d.Attempt())
		}
		if diff := cmp.Diff(hdr, d.Headers()); diff != "" {
			t.Errorf("Headers() of redelivered %q (-want +got):\n%s", d.Body(), diff)
		}
	}
	if diff := cmp.Diff([]string{"b", "c"}, bodies(got), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("redelivered bodies (-want +got):\n%s", diff)
	}
	// The stale deliveries went back to the queue: settling them must not
	// succeed, or the message would count as done while it is redelivered.
	if err := ds[1].Ack(t.Context()); err == nil {
		t.Errorf("Ack(%q) of a delivery whose consumer stopped = nil, want an error", ds[1].Body())
	}
	for _, d := range got {
		ack(t, d)
	}
	ExpectNone(t, ch2)
	e.eventuallyLen(name, 0)
}

func testCancelClosesChannel(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	ch, cancel := e.consume(name, 1)
	cancel()
	expectClosed(t, ch)

	// A consumer started with a cancelled context stops at once too.
	ctx, cancel2 := context.WithCancel(t.Context())
	cancel2()
	ch2, err := e.queue().Consume(ctx, name, queue.ConsumeOptions{Prefetch: 1})
	if err == nil {
		expectClosed(t, ch2)
	}
}

func testCloseClosesConsumers(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	e.publish(name, queue.Message{Body: []byte("held")})
	ch1, _ := e.consume(name, 1)
	d := Receive(t, ch1)
	ch2, _ := e.consume(name, 1)
	if err := e.close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	expectClosed(t, ch1)
	expectClosed(t, ch2)
	if err := d.Ack(t.Context()); err == nil {
		t.Error("Ack() after Close() = nil, want an error")
	}
}

func testQueuesAreSeparate(t *testing.T, h Harness) {
	e := newEnv(t, h)
	a, b := e.name(), e.name()
	chA, _ := e.consume(a, 4)
	chB, _ := e.consume(b, 4)
	e.publish(a, queue.Message{Body: []byte("to a")})
	e.publish(b, queue.Message{Body: []byte("to b")})
	da, db := Receive(t, chA), Receive(t, chB)
	if string(da.Body()) != "to a" || string(db.Body()) != "to b" {
		t.Errorf("bodies on %q, %q = %q, %q, want %q, %q", a, b, da.Body(), db.Body(), "to a", "to b")
	}
	ack(t, da)
	ack(t, db)
	ExpectNone(t, chA)
	ExpectNone(t, chB)
}

func testRetryDelay(t *testing.T, h Harness) {
	const delay = 400 * time.Millisecond
	if h.MaxAttempts < 2 {
		t.Skip("MaxAttempts < 2: Retry dead-letters")
	}
	e := newEnv(t, h)
	name := e.name()
	hdr := map[string]string{"trace": "x1"}
	e.publish(name, queue.Message{Body: []byte("r"), Headers: hdr})
	ch, _ := e.consume(name, 1)

	d := Receive(t, ch)
	if d.Attempt() != 1 {
		t.Fatalf("Attempt() = %d, want 1", d.Attempt())
	}
	start := time.Now()
	if err := d.Retry(t.Context(), delay); err != nil {
		t.Fatalf("Retry(%v) = %v, want nil", delay, err)
	}
	d2 := Receive(t, ch)
	if elapsed := time.Since(start); elapsed < delay-timingSlack {
		t.Errorf("retried message back after %v, want not before %v", elapsed, delay)
	}
	if d2.Attempt() != 2 {
		t.Errorf("Attempt() after one Retry = %d, want 2", d2.Attempt())
	}
	if d2.Redelivered() {
		t.Error("Redelivered() after Retry = true, want false (Retry settles)")
	}
	if string(d2.Body()) != "r" {
		t.Errorf("Body() after Retry = %q, want %q", d2.Body(), "r")
	}
	if diff := cmp.Diff(hdr, d2.Headers()); diff != "" {
		t.Errorf("Headers() after Retry (-want +got):\n%s", diff)
	}

	// A zero delay makes it deliverable again at once.
	if err := d2.Retry(t.Context(), 0); err != nil {
		t.Fatalf("Retry(0) = %v, want nil", err)
	}
	if want := 3; want <= h.MaxAttempts {
		d3 := Receive(t, ch)
		if d3.Attempt() != want {
			t.Errorf("Attempt() after two Retries = %d, want %d", d3.Attempt(), want)
		}
		ack(t, d3)
	}
	ExpectNone(t, ch)
}

// testPublishDelayed checks Message.Delay: a delayed message is counted by
// Len, is not delivered before its delay, and does not hold up the
// undelayed messages published with it.
func testPublishDelayed(t *testing.T, h Harness) {
	const delay = 600 * time.Millisecond
	e := newEnv(t, h)
	name := e.name()
	start := time.Now()
	e.publish(name, queue.Message{Body: []byte("later"), Headers: map[string]string{"k": "v"}, Delay: delay}, queue.Message{Body: []byte("now")})
	e.eventuallyLen(name, 2)
	ch, _ := e.consume(name, 2)
	first := Receive(t, ch)
	if string(first.Body()) != "now" {
		t.Fatalf("first delivery = %q, want the undelayed %q", first.Body(), "now")
	}
	ack(t, first)
	second := Receive(t, ch)
	if elapsed := time.Since(start); elapsed < delay-timingSlack {
		t.Errorf("delayed message delivered after %v, want not before %v", elapsed, delay)
	}
	if string(second.Body()) != "later" || second.Headers()["k"] != "v" || second.Attempt() != 1 {
		t.Errorf("delayed delivery = %q %v attempt %d", second.Body(), second.Headers(), second.Attempt())
	}
	ack(t, second)
	ExpectNone(t, ch)
}

func testMaxAttempts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	hdr := map[string]string{"keep": "me"}
	e.publish(name, queue.Message{Body: []byte("poison"), Headers: hdr})
	ch, _ := e.consume(name, 1)
	for attempt := 1; attempt <= h.MaxAttempts; attempt++ {
		d := Receive(t, ch)
		if d.Attempt() != attempt {
			t.Fatalf("Attempt() = %d, want %d", d.Attempt(), attempt)
		}
		if err := d.Retry(t.Context(), 10*time.Millisecond); err != nil {
			t.Fatalf("Retry() at attempt %d = %v, want nil", attempt, err)
		}
	}
	ExpectNone(t, ch)

	dlq := queue.DeadLetterQueue(name)
	dch, _ := e.consume(dlq, 1)
	d := Receive(t, dch)
	if string(d.Body()) != "poison" {
		t.Errorf("dead-lettered Body() = %q, want %q", d.Body(), "poison")
	}
	want := map[string]string{
		"keep":                  "me",
		queue.HeaderReason:      queue.ReasonMaxAttempts,
		queue.HeaderSourceQueue: name,
	}
	if diff := cmp.Diff(want, d.Headers(), ignoreOtherHeaders(want)); diff != "" {
		t.Errorf("dead-lettered Headers() (-want +got):\n%s", diff)
	}
	ack(t, d)
	e.eventuallyLen(name, 0)
	e.eventuallyLen(dlq, 0)
}

// testPostpone: a postponed message comes back after its delay with its
// headers and its attempt unchanged, however often it is postponed: more
// postponements than MaxAttempts never dead-letter it, and a Retry after
// them counts from the attempt it had.
func testPostpone(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	hdr := map[string]string{"keep": "me"}
	e.publish(name, queue.Message{Body: []byte("waits"), Headers: hdr})
	ch, _ := e.consume(name, 1)
	d := Receive(t, ch)
	if err := d.Retry(t.Context(), 0); err != nil {
		t.Fatalf("Retry(0) = %v, want nil", err)
	}
	const delay = 200 * time.Millisecond
	for i := range h.MaxAttempts + 2 {
		d = Receive(t, ch)
		if d.Attempt() != 2 || string(d.Body()) != "waits" || d.Headers()["keep"] != "me" {
			t.Fatalf("delivery after %d postponements: attempt %d body %q headers %v, want attempt 2", i, d.Attempt(), d.Body(), d.Headers())
		}
		start := time.Now()
		if err := d.Postpone(t.Context(), delay); err != nil {
			t.Fatalf("Postpone(%v) = %v, want nil", delay, err)
		}
		if i == 0 {
			d = Receive(t, ch)
			if elapsed := time.Since(start); elapsed < delay-timingSlack {
				t.Errorf("postponed message delivered after %v, want not before %v", elapsed, delay)
			}
			if err := d.Postpone(t.Context(), 0); err != nil {
				t.Fatalf("Postpone(0) = %v, want nil", err)
			}
		}
	}
	d = Receive(t, ch)
	if err := d.Retry(t.Context(), 0); err != nil {
		t.Fatalf("Retry(0) = %v, want nil", err)
	}
	if h.MaxAttempts > 2 {
		if d = Receive(t, ch); d.Attempt() != 3 {
			t.Errorf("Attempt() after a Retry following postponements = %d, want 3", d.Attempt())
		}
		ack(t, d)
		e.eventuallyLen(queue.DeadLetterQueue(name), 0)
	} else {
		ExpectNone(t, ch) // the second Retry used up the attempts
		e.eventuallyLen(queue.DeadLetterQueue(name), 1)
	}
	e.eventuallyLen(name, 0)
}

func testDeadLetter(t *testing.T, h Harness) {
	const reason = "undecodable: bad JSON at byte 7"
	e := newEnv(t, h)
	name := e.name()
	hdr := map[string]string{"a": "1", "content-type": "application/json"}
	e.publish(name,
		queue.Message{Body: []byte("bad"), Headers: hdr},
		queue.Message{Body: []byte("good")},
	)
	ch, _ := e.consume(name, 2)
	ds := receiveN(t, ch, 2)
	if err := ds[0].DeadLetter(t.Context(), reason); err != nil {
		t.Fatalf("DeadLetter() = %v, want nil", err)
	}
	ack(t, ds[1])
	ExpectNone(t, ch)
	e.eventuallyLen(name, 0)

	dlq := queue.DeadLetterQueue(name)
	e.eventuallyLen(dlq, 1)
	dch, _ := e.consume(dlq, 1)
	d := Receive(t, dch)
	if string(d.Body()) != "bad" {
		t.Errorf("dead-lettered Body() = %q, want %q", d.Body(), "bad")
	}
	want := map[string]string{
		"a":                     "1",
		"content-type":          "application/json",
		queue.HeaderReason:      reason,
		queue.HeaderSourceQueue: name,
	}
	if diff := cmp.Diff(want, d.Headers(), ignoreOtherHeaders(want)); diff != "" {
		t.Errorf("dead-lettered Headers() (-want +got):\n%s", diff)
	}
	ack(t, d)
	ExpectNone(t, dch)
}

// ignoreOtherHeaders ignores headers an implementation adds beyond want
// (a broker may record its own dead-letter history).
func ignoreOtherHeaders(want map[string]string) cmp.Option {
	return cmpopts.IgnoreMapEntries(func(k, _ string) bool {
		_, ok := want[k]
		return !ok
	})
}

func testDoubleSettle(t *testing.T, h Harness) {
	type settle struct {
		name string
		do   func(ctx context.Context, d queue.Delivery) error
	}
	settles := []settle{
		{"Ack", func(ctx context.Context, d queue.Delivery) error { return d.Ack(ctx) }},
		{"Retry", func(ctx context.Context, d queue.Delivery) error { return d.Retry(ctx, time.Hour) }},
		{"Postpone", func(ctx context.Context, d queue.Delivery) error { return d.Postpone(ctx, time.Hour) }},
		{"DeadLetter", func(ctx context.Context, d queue.Delivery) error { return d.DeadLetter(ctx, "test") }},
	}
	for _, first := range settles {
		for _, second := range settles {
			t.Run(first.name+"Then"+second.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, h)
				name := e.name()
				e.publish(name, queue.Message{Body: []byte("once")})
				ch, _ := e.consume(name, 1)
				d := Receive(t, ch)
				if err := first.do(t.Context(), d); err != nil {
					t.Fatalf("%s() = %v, want nil", first.name, err)
				}
				if err := second.do(t.Context(), d); !errors.Is(err, queue.ErrSettled) {
					t.Errorf("%s() after %s() = %v, want %v", second.name, first.name, err, queue.ErrSettled)
				}
			})
		}
	}
}

func testHeaders(t *testing.T, h Harness) {
	tests := []struct {
		name string
		msg  queue.Message
	}{
		{"no headers", queue.Message{Body: []byte("plain")}},
		{"empty headers", queue.Message{Body: []byte("plain"), Headers: map[string]string{}}},
		{"several", queue.Message{Body: []byte("x"), Headers: map[string]string{"a": "1", "b": "", "crawl-id": "c-42"}}},
		{"unicode", queue.Message{Body: []byte("ü"), Headers: map[string]string{"naïve": "日本語 ✓", "quote": `"x" \ y`}}},
		{"long value", queue.Message{Body: []byte("l"), Headers: map[string]string{"v": strings.Repeat("0123456789", 400)}}},
		{"empty body", queue.Message{Body: nil, Headers: map[string]string{"k": "v"}}},
		{"binary body", queue.Message{Body: []byte{0, 1, 2, 0xff, 0xfe, 0, '\n'}}},
		{"large body", queue.Message{Body: bytes.Repeat([]byte("abcdefgh"), 64<<10)}},
	}
	e := newEnv(t, h)
	name := e.name()
	for _, tt := range tests {
		e.publish(name, tt.msg)
	}
	ch, _ := e.consume(name, 1)
	for _, tt := range tests {
		d := Receive(t, ch)
		if !bytes.Equal(d.Body(), tt.msg.Body) {
			t.Errorf("%s: Body() = %q (len %d), want %q (len %d)", tt.name, trim(d.Body()), len(d.Body()), trim(tt.msg.Body), len(tt.msg.Body))
		}
		if diff := cmp.Diff(tt.msg.Headers, d.Headers(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Headers() (-want +got):\n%s", tt.name, diff)
		}
		ack(t, d)
	}
}

// trim shortens b for failure messages.
func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func testLen(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	e.eventuallyLen(name, 0)
	msgs, _ := numbered("m", 4)
	e.publish(name, msgs...)
	e.eventuallyLen(name, 4)

	ch, _ := e.consume(name, 2)
	ds := receiveN(t, ch, 2)
	e.eventuallyLen(name, 2) // unsettled deliveries are not counted
	if err := ds[0].Retry(t.Context(), time.Hour); err != nil {
		t.Fatalf("Retry(1h) = %v, want nil", err)
	}
	ack(t, ds[1])
	// Two ready, of which the consumer now holds two, and one delayed.
	held := receiveN(t, ch, 2)
	e.eventuallyLen(name, 1)
	for _, d := range held {
		ack(t, d)
	}
	ExpectNone(t, ch)
	e.eventuallyLen(name, 1)
}

func testClosed(t *testing.T, h Harness) {
	e := newEnv(t, h)
	name := e.name()
	e.publish(name, queue.Message{Body: []byte("before")})
	closed := e.queue()
	if err := e.close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	ctx := t.Context()
	if err := closed.Publish(ctx, name, queue.Message{Body: []byte("after")}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Publish() after Close() = %v, want %v", err, queue.ErrClosed)
	}
	if _, err := closed.Consume(ctx, name, queue.ConsumeOptions{}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Consume() after Close() = %v, want %v", err, queue.ErrClosed)
	}
	if _, err := closed.Len(ctx, name); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Len() after Close() = %v, want %v", err, queue.ErrClosed)
	}
}

func testReopenKeepsMessages(t *testing.T, h Harness) {
	e := newEnv(t, h)
	if h.Reopen == nil {
		t.Skip("no reopen")
	}
	name := e.name()
	hdr := map[string]string{"h": "1"}
	msgs, want := numbered("m", 5)
	for i := range msgs {
		msgs[i].Headers = hdr
	}
	e.publish(name, msgs...)
	e.reopen()
	e.eventuallyLen(name, 5)
	ch, _ := e.consume(name, 5)
	ds := receiveN(t, ch, 5)
	if diff := cmp.Diff(want, bodies(ds)); diff != "" {
		t.Errorf("bodies after reopen (-want +got):\n%s", diff)
	}
	for _, d := range ds {
		if d.Attempt() != 1 {
			t.Errorf("Attempt() of %q after reopen = %d, want 1", d.Body(), d.Attempt())
		}
		if diff := cmp.Diff(hdr, d.Headers()); diff != "" {
			t.Errorf("Headers() of %q after reopen (-want +got):\n%s", d.Body(), diff)
		}
		ack(t, d)
	}
	ExpectNone(t, ch)
}

func testReopenRedeliversUnsettled(t *testing.T, h Harness) {
	e := newEnv(t, h)
	if h.Reopen == nil {
		t.Skip("no reopen")
	}
	name := e.name()
	msgs, _ := numbered("m", 4)
	e.publish(name, msgs...)
	ch, _ := e.consume(name, 3)
	ds := receiveN(t, ch, 3)
	ack(t, ds[0])
	e.reopen()
	if err := ds[1].Ack(t.Context()); err == nil {
		t.Errorf("Ack(%q) of a delivery from before reopen = nil, want an error", ds[1].Body())
	}

	ch2, _ := e.consume(name, 3)
	got := receiveN(t, ch2, 3)
	redelivered := map[string]bool{}
	for _, d := range got {
		redelivered[string(d.Body())] = d.Redelivered()
		ack(t, d)
	}
	for _, b := range []string{"m1", "m2"} {
		if r, ok := redelivered[b]; !ok || !r {
			t.Errorf("unsettled %q after reopen: delivered %v, Redelivered() %v, want true, true", b, ok, r)
		}
	}
	if _, ok := redelivered["m3"]; !ok {
		t.Errorf("never delivered %q missing after reopen", "m3")
	}
	ExpectNone(t, ch2)
}

func testReopenKeepsDelayedRetry(t *testing.T, h Harness) {
	const delay = 500 * time.Millisecond
	e := newEnv(t, h)
	if h.Reopen == nil {
		t.Skip("no reopen")
	}
	if h.MaxAttempts < 2 {
		t.Skip("MaxAttempts < 2: Retry dead-letters")
	}
	name := e.name()
	e.publish(name, queue.Message{Body: []byte("later")})
	ch, _ := e.consume(name, 1)
	d := Receive(t, ch)
	start := time.Now()
	if err := d.Retry(t.Context(), delay); err != nil {
		t.Fatalf("Retry(%v) = %v, want nil", delay, err)
	}
	e.reopen()
	e.eventuallyLen(name, 1)
	ch2, _ := e.consume(name, 1)
	d2 := Receive(t, ch2)
	if elapsed := time.Since(start); elapsed < delay-timingSlack {
		t.Errorf("retried message back after %v, want not before %v", elapsed, delay)
	}
	if string(d2.Body()) != "later" || d2.Attempt() != 2 {
		t.Errorf("after reopen Body(), Attempt() = %q, %d, want %q, 2", d2.Body(), d2.Attempt(), "later")
	}
	ack(t, d2)
	ExpectNone(t, ch2)
}

func testReopenKeepsDeadLetters(t *testing.T, h Harness) {
	e := newEnv(t, h)
	if h.Reopen == nil {
		t.Skip("no reopen")
	}
	name := e.name()
	e.publish(name, queue.Message{Body: []byte("dead")})
	ch, _ := e.consume(name, 1)
	if err := Receive(t, ch).DeadLetter(t.Context(), "because"); err != nil {
		t.Fatalf("DeadLetter() = %v, want nil", err)
	}
	e.reopen()
	dch, _ := e.consume(queue.DeadLetterQueue(name), 1)
	d := Receive(t, dch)
	if string(d.Body()) != "dead" || d.Headers()[queue.HeaderReason] != "because" {
		t.Errorf("after reopen dead letter Body(), reason = %q, %q, want %q, %q", d.Body(), d.Headers()[queue.HeaderReason], "dead", "because")
	}
	ack(t, d)
}
