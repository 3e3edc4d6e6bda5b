package amqpqueue

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
)

// brokerURL returns the broker of GRIDCRAWL_AMQP_URL, its first entry when
// it lists several. Without it the test is skipped, or fails in CI and when
// GRIDCRAWL_REQUIRE_BACKENDS=1.
func brokerURL(t testing.TB) string {
	t.Helper()
	first, _, _ := strings.Cut(testenv.Backend(t, "GRIDCRAWL_AMQP_URL")[0], ",")
	return strings.TrimSpace(first)
}

// logBuffer collects log lines; unlike t.Log it may be written to after the
// test ends, by goroutines that outlive it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testLogger returns a logger whose output is printed if t fails.
func testLogger(t testing.TB) (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("queue log:\n%s", b.String())
		}
	})
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func mustOpen(t testing.TB, opts Options) *Queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", redact(opts.URL), err)
	}
	return q
}

// deleteQueues deletes the named queues, their wait queues, and nothing
// else. It runs in cleanups, after the test's context is cancelled.
func deleteQueues(t testing.TB, url string, names []string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Errorf("dial to delete queues: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("open channel to delete queues: %v", err)
		return
	}
	for _, n := range names {
		for _, name := range append([]string{n}, waitQueueNames(n)...) {
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				t.Errorf("delete queue %q: %v", name, err)
				return
			}
		}
	}
}

// uniqueName returns a fresh queue name that is deleted with its satellite
// queues when t ends.
func uniqueName(t testing.TB, url string) string {
	t.Helper()
	base := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	n := "amqpqueue-test." + base + "." + randomHex(t)
	t.Cleanup(func() { deleteQueues(t, url, []string{n, queue.DeadLetterQueue(n)}) })
	return n
}

// randomHex returns 8 random hex digits.
func randomHex(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("rand.Read() = %v", err)
	}
	return hex.EncodeToString(b[:])
}

func TestConformance(t *testing.T) {
	url := brokerURL(t)
	tests := []struct {
		name string
		opts Options
		want int // MaxAttempts the queue should apply
	}{
		{"default options", Options{URL: url}, DefaultMaxAttempts},
		{"max attempts 2", Options{URL: url, MaxAttempts: 2}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Logger, _ = testLogger(t)
			queuetest.Run(t, queuetest.Harness{
				New: func(t *testing.T) queue.Queue { return mustOpen(t, opts) },
				Reopen: func(t *testing.T, old queue.Queue) queue.Queue {
					if err := old.Close(); err != nil {
						t.Fatalf("Close() = %v, want nil", err)
					}
					return mustOpen(t, opts)
				},
				MaxAttempts:  tt.want,
				DeleteQueues: func(t *testing.T, names []string) { deleteQueues(t, url, names) },
			})
		})
	}
}

func expectClosed(t testing.TB, ch <-chan queue.Delivery) {
	t.Helper()
	timer := time.NewTimer(queuetest.DeliveryTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("consumer channel not closed within %v", queuetest.DeliveryTimeout)
		}
	}
}

func publish(t testing.TB, q queue.Queue, name string, msgs ...queue.Message) {
	t.Helper()
	if err := q.Publish(t.Context(), name, msgs...); err != nil {
		t.Fatalf("Publish(%q, %d messages) = %v, want nil", name, len(msgs), err)
	}
}

func consume(t testing.TB, q queue.Queue, name string, prefetch int) (<-chan queue.Delivery, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ch, err := q.Consume(ctx, name, queue.ConsumeOptions{Prefetch: prefetch})
	if err != nil {
		cancel()
		t.Fatalf("Consume(%q) = %v, want nil", name, err)
	}
	return ch, cancel
}

func ack(t testing.TB, d queue.Delivery) {
	t.Helper()
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack(%q) = %v, want nil", d.Body(), err)
	}
}

func eventuallyLen(t testing.TB, q queue.Queue, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(queuetest.DeliveryTimeout)
	for {
		n, err := q.Len(t.Context(), name)
		if err != nil {
			t.Fatalf("Len(%q) = %v, want nil", name, err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Len(%q) = %d after %v, want %d", name, n, queuetest.DeliveryTimeout, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rawChannel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp.Dial() = %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("Channel() = %v", err)
	}
	return ch
}

// TestTopology checks the declarations and message properties that the
// package doc promises, from a separate connection.
func TestTopology(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	name := uniqueName(t, url)
	publish(t, q, name, queue.Message{Body: []byte("a"), Headers: map[string]string{"k": "v"}})
	ch, stop := consume(t, q, name, 1)
	if err := queuetest.Receive(t, ch).Retry(t.Context(), 2*time.Second); err != nil {
		t.Fatalf("Retry(2s) = %v, want nil", err)
	}
	// Stopping the only consumer stops the wait queue's mover, which hands
	// back what it holds.
	stop()
	for range ch {
	}

	raw := rawChannel(t, url)
	// Redeclaring with the same arguments succeeds; with others it fails.
	wq := waitQueueName(name, bucket{2 * time.Second, "2s"})
	declares := []struct {
		name   string
		target target
		ok     bool
	}{
		{"main as quorum", q.mainTarget(name), true},
		{"wait queue of 2s", q.waitTarget(name, bucket{2 * time.Second, "2s"}), true},
		{"main as classic", target{name, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeClassic}}, false},
		{"wait queue with a TTL", target{wq, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, amqp.QueueMessageTTLArg: int64(2000)}}, false},
	}
	for _, tt := range declares {
		_, err := raw.QueueDeclare(tt.target.name, true, false, false, false, tt.target.args)
		if (err == nil) != tt.ok {
			t.Errorf("%s: QueueDeclare(%q, %v) = %v, want ok %v", tt.name, tt.target.name, tt.target.args, err, tt.ok)
		}
		if err != nil {
			raw = rawChannel(t, url) // the broker closed the channel
		}
	}

	// The retried message waits in the 2s wait queue, persistent, with its
	// attempt, headers, due time and release.
	var m amqp.Delivery
	deadline := time.Now().Add(queuetest.DeliveryTimeout)
	for {
		var ok bool
		var err error
		m, ok, err = raw.Get(wq, false)
		if err != nil {
			t.Fatalf("Get(%q) = %v", wq, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get(%q): no message after %v", wq, queuetest.DeliveryTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m.DeliveryMode != amqp.Persistent {
		t.Errorf("DeliveryMode of the delayed message = %d, want %d", m.DeliveryMode, amqp.Persistent)
	}
	if n, _ := intHeader(m.Headers, HeaderAttempt); n != 2 || m.Headers["k"] != "v" {
		t.Errorf("headers of the delayed message = %v, want %s=2 and k=v", m.Headers, HeaderAttempt)
	}
	due, _ := intHeader(m.Headers, HeaderDue)
	rel, _ := intHeader(m.Headers, HeaderRelease)
	if due == 0 || rel != due {
		t.Errorf("%s = %d, %s = %d, want equal and set", HeaderDue, due, HeaderRelease, rel)
	}
	if err := m.Nack(false, true); err != nil {
		t.Fatalf("Nack() = %v", err)
	}
	// A consumer's mover moves the retried message back to name.
	ch, _ = consume(t, q, name, 1)
	d := queuetest.Receive(t, ch)
	if d.Attempt() != 2 {
		t.Errorf("Attempt() after Retry = %d, want 2", d.Attempt())
	}
	if got := time.Now().UnixMilli(); got < due {
		t.Errorf("retried message delivered at %d, before its due time %d", got, due)
	}
	ack(t, d)
}

func TestConsumeRejectsQueueOfOtherType(t *testing.T) {
	url := brokerURL(t)
	name := uniqueName(t, url)
	if _, err := rawChannel(t, url).QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatalf("declare classic queue: %v", err)
	}
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	if _, err := q.Consume(t.Context(), name, queue.ConsumeOptions{}); err == nil {
		t.Errorf("Consume() of a classic queue = nil error, want a precondition error")
	}
	if err := q.Publish(t.Context(), name, queue.Message{Body: []byte("x")}); err == nil {
		t.Errorf("Publish() to a classic queue = nil error, want a precondition error")
	}
	// The queue still works for other queues.
	other := uniqueName(t, url)
	publish(t, q, other, queue.Message{Body: []byte("y")})
}

// TestUnroutableIsError deletes a queue behind the back of a Queue that has
// declared it: the broker returns the next message, and Publish says so.
func TestUnroutableIsError(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	name := uniqueName(t, url)
	publish(t, q, name, queue.Message{Body: []byte("1")})
	if _, err := rawChannel(t, url).QueueDelete(name, false, false, false); err != nil {
		t.Fatalf("QueueDelete(%q) = %v", name, err)
	}
	err := q.Publish(t.Context(), name, queue.Message{Body: []byte("2")}, queue.Message{Body: []byte("3")})
	if err == nil || !strings.Contains(err.Error(), "unroutable") {
		t.Fatalf("Publish() to a deleted queue = %v, want an unroutable error", err)
	}
	// The next Publish declares the queue again.
	publish(t, q, name, queue.Message{Body: []byte("4")})
	eventuallyLen(t, q, name, 1)
}

func TestRedeliveryLimit(t *testing.T) {
	url := brokerURL(t)
	const limit = 2
	q := mustOpen(t, Options{URL: url, MaxRedeliveries: limit})
	defer q.Close()
	name := uniqueName(t, url)
	publish(t, q, name, queue.Message{Body: []byte("crasher"), Headers: map[string]string{"h": "1"}})
	// Each consumer stops holding the message, which goes back.
	for i := range limit + 1 {
		ch, cancel := consume(t, q, name, 1)
		d := queuetest.Receive(t, ch)
		if got, want := d.Redelivered(), i > 0; got != want {
			t.Errorf("delivery %d: Redelivered() = %v, want %v", i+1, got, want)
		}
		cancel()
		expectClosed(t, ch)
	}
	ch, _ := consume(t, q, name, 1)
	queuetest.ExpectNone(t, ch)
	eventuallyLen(t, q, name, 0)

	dch, _ := consume(t, q, queue.DeadLetterQueue(name), 1)
	d := queuetest.Receive(t, dch)
	want := map[string]string{
		"h":                     "1",
		queue.HeaderReason:      ReasonRedeliveries,
		queue.HeaderSourceQueue: name,
		HeaderAttempts:          "1",
		HeaderRedeliveries:      fmt.Sprint(limit + 1),
	}
	if diff := cmp.Diff(want, d.Headers()); diff != "" {
		t.Errorf("dead letter Headers() (-want +got):\n%s", diff)
	}
	ack(t, d)
}

// TestDueHeaderHolds publishes a message that carries a due time, as a retry
// longer than the longest bucket does: consumers must not see it before then.
func TestDueHeaderHolds(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	name := uniqueName(t, url)
	ch, _ := consume(t, q, name, 1) // declares name
	const wait = 700 * time.Millisecond
	due := time.Now().Add(wait)
	raw := rawChannel(t, url)
	if err := raw.Publish("", name, true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		Headers:      amqp.Table{HeaderDue: due.UnixMilli(), HeaderAttempt: int64(3), "k": "v"},
		Body:         []byte("later"),
	}); err != nil {
		t.Fatalf("raw Publish() = %v", err)
	}
	d := queuetest.Receive(t, ch)
	if now := time.Now(); now.Before(due) {
		t.Errorf("message due at %v delivered %v early", due.Format(time.StampMilli), due.Sub(now))
	}
	if d.Attempt() != 3 {
		t.Errorf("Attempt() = %d, want 3", d.Attempt())
	}
	if diff := cmp.Diff(map[string]string{"k": "v"}, d.Headers()); diff != "" {
		t.Errorf("Headers() (-want +got):\n%s", diff)
	}
	ack(t, d)
}

// TestLongRetryWaitsInLongestBucket retries with a delay beyond the longest
// bucket: the message waits in that bucket's wait queue with its due time,
// released at the bucket's end, and is not held by the consumer's mover (so
// Len counts it).
func TestLongRetryWaitsInLongestBucket(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	name := uniqueName(t, url)
	publish(t, q, name, queue.Message{Body: []byte("x")})
	ch, _ := consume(t, q, name, 1)
	const delay = 5 * time.Hour
	before := time.Now()
	if err := queuetest.Receive(t, ch).Retry(t.Context(), delay); err != nil {
		t.Fatalf("Retry(%v) = %v, want nil", delay, err)
	}
	after := time.Now()
	eventuallyLen(t, q, name, 1)
	longest := buckets[len(buckets)-1]
	wq := waitQueueName(name, longest)
	m, ok, err := rawChannel(t, url).Get(wq, false)
	if err != nil || !ok {
		t.Fatalf("Get(%q) = %v, %v, want a message", wq, ok, err)
	}
	due, _ := intHeader(m.Headers, HeaderDue)
	if lo, hi := before.Add(delay).UnixMilli(), after.Add(delay).UnixMilli(); due < lo || due > hi {
		t.Errorf("%s = %d, want in [%d, %d]", HeaderDue, due, lo, hi)
	}
	rel, _ := intHeader(m.Headers, HeaderRelease)
	if lo, hi := before.Add(longest.d).UnixMilli(), after.Add(longest.d).UnixMilli(); rel < lo || rel > hi {
		t.Errorf("%s = %d, want in [%d, %d] (the end of the longest bucket)", HeaderRelease, rel, lo, hi)
	}
}

func TestPublishRejectsReservedHeaders(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	name := uniqueName(t, url)
	for _, h := range []string{HeaderAttempt, HeaderDue, "x-delivery-count", "x-death", "x-first-death-reason", ""} {
		err := q.Publish(t.Context(), name, queue.Message{Body: []byte("x"), Headers: map[string]string{h: "1"}})
		if err == nil {
			t.Errorf("Publish() with header %q = nil error, want an error", h)
		}
	}
	if n, err := q.Len(t.Context(), name); err != nil || n != 0 {
		t.Errorf("Len() after rejected publishes = %d, %v, want 0, nil", n, err)
	}
}

func TestOpenRefusesBadCredentials(t *testing.T) {
	url := brokerURL(t)
	bad := strings.Replace(url, "guest:guest@", "guest:wrong-password@", 1)
	if bad == url {
		t.Skip("GRIDCRAWL_AMQP_URL has no guest:guest credentials to spoil")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	q, err := Open(ctx, Options{URL: bad})
	if err == nil {
		q.Close()
		t.Fatal("Open() with a wrong password = nil error, want an error")
	}
	if ctx.Err() != nil {
		t.Errorf("Open() with a wrong password kept retrying until its context ended: %v", err)
	}
	if strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("Open() error %q shows the password", err)
	}
}

// TestStaleDeliveryAfterClose checks that Retry and DeadLetter, like Ack,
// fail on a delivery whose consumer is gone, and publish nothing.
func TestStaleDeliveryAfterClose(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	name := uniqueName(t, url)
	publish(t, q, name, queue.Message{Body: []byte("x")})
	ch, _ := consume(t, q, name, 1)
	d := queuetest.Receive(t, ch)
	if err := q.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := d.Retry(t.Context(), 0); !errors.Is(err, queue.ErrSettled) {
		t.Errorf("Retry() after Close() = %v, want %v", err, queue.ErrSettled)
	}
	if err := d.DeadLetter(t.Context(), "x"); !errors.Is(err, queue.ErrSettled) {
		t.Errorf("DeadLetter() after Close() = %v, want %v", err, queue.ErrSettled)
	}
	q2 := mustOpen(t, Options{URL: url})
	defer q2.Close()
	eventuallyLen(t, q2, name, 1)
	eventuallyLen(t, q2, queue.DeadLetterQueue(name), 0)
}

// TestSingleActiveConsumer checks that a queue named by Options.SingleActive
// delivers to one consumer only, and fails over when that consumer stops.
func TestSingleActiveConsumer(t *testing.T) {
	url := brokerURL(t)
	name := uniqueName(t, url)
	opts := Options{URL: url, SingleActive: func(q string) bool { return q == name }}
	opts.Logger, _ = testLogger(t)
	a, b := mustOpen(t, opts), mustOpen(t, opts)
	chA, stopA := consume(t, a, name, 10)
	time.Sleep(200 * time.Millisecond) // a registers first and becomes the active consumer
	chB, _ := consume(t, b, name, 10)
	for i := range 6 {
		if err := a.Publish(t.Context(), name, queue.Message{Body: []byte{byte('0' + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		ack(t, queuetest.Receive(t, chA))
	}
	select {
	case d := <-chB:
		t.Fatalf("standby consumer received %q while the active one runs", d.Body())
	case <-time.After(queuetest.QuietWindow):
	}
	stopA()
	if err := a.Publish(t.Context(), name, queue.Message{Body: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if d := queuetest.Receive(t, chB); string(d.Body()) != "after" {
		t.Errorf("standby received %q after failover, want %q", d.Body(), "after")
	} else {
		ack(t, d)
	}
}

// A quorum queue declared a moment ago may nack the first messages routed
// to it; concurrent delayed publishes to a wait queue that does not exist
// yet must all succeed anyway (seen as parked URLs refused on a fresh
// broker).
func TestConcurrentDelayedPublishToNewDelayQueue(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	for round := range 3 {
		name := uniqueName(t, url)
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				if err := q.Publish(t.Context(), name, queue.Message{Body: []byte("x"), Delay: 30 * time.Second}); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: Publish(delay 30s) to a new wait queue = %v, want nil", round, err)
		}
	}
}
