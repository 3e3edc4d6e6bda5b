package amqpqueue

import (
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
)

// TestWaitQueueMovedByAnotherProcess publishes delayed messages from one
// Queue that never consumes and closes; a consumer in another Queue finds
// the wait queue and moves every message back once, none before its time.
func TestWaitQueueMovedByAnotherProcess(t *testing.T) {
	url := brokerURL(t)
	name := uniqueName(t, url)
	const n = 30
	delays := map[string]time.Duration{}
	var msgs []queue.Message
	for i := range n {
		d := time.Duration(300+20*i) * time.Millisecond
		body := fmt.Sprintf("m%d", i)
		delays[body] = d
		msgs = append(msgs, queue.Message{Body: []byte(body), Delay: d})
	}
	a := mustOpen(t, Options{URL: url})
	start := time.Now()
	publish(t, a, name, msgs...)
	if err := a.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	b := mustOpen(t, Options{URL: url})
	defer b.Close()
	ch, _ := consume(t, b, name, n)
	seen := map[string]bool{}
	for range n {
		d := queuetest.Receive(t, ch)
		body := string(d.Body())
		if seen[body] {
			t.Errorf("%s delivered twice", body)
		}
		seen[body] = true
		if elapsed := time.Since(start); elapsed < delays[body] {
			t.Errorf("%s delivered after %v, before its delay %v", body, elapsed, delays[body])
		}
		ack(t, d)
	}
	queuetest.ExpectNone(t, ch)
	eventuallyLen(t, b, name, 0)
}

// TestWaitBeyondRelease puts a message into a wait queue, as a wait longer
// than the longest bucket leaves it, whose release comes before its due
// time: the mover must put it into the wait queue of what remains, not hand
// it out at its release.
func TestWaitBeyondRelease(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url})
	defer q.Close()
	name := uniqueName(t, url)
	publish(t, q, name, queue.Message{Body: []byte("declares the queue")})
	ch, _ := consume(t, q, name, 1)
	ack(t, queuetest.Receive(t, ch))

	now := time.Now()
	due := now.Add(1500 * time.Millisecond)
	b := bucket{time.Second, "1s"}
	raw := rawChannel(t, url)
	if _, err := raw.QueueDeclare(waitQueueName(name, b), true, false, false, false, q.waitTarget(name, b).args); err != nil {
		t.Fatalf("declare wait queue: %v", err)
	}
	h := amqp.Table{HeaderDue: due.UnixMilli(), HeaderRelease: now.Add(200 * time.Millisecond).UnixMilli(), HeaderAttempt: int64(3), "k": "v"}
	if err := raw.Publish("", waitQueueName(name, b), true, false, amqp.Publishing{Headers: h, DeliveryMode: amqp.Persistent, Body: []byte("late")}); err != nil {
		t.Fatalf("publish into the wait queue: %v", err)
	}
	q.nudge(name, waitQueueName(name, b)) // as if this process had put it there

	d := queuetest.Receive(t, ch)
	if got := time.Now(); got.Before(due) {
		t.Errorf("delivered at %v, %v before its due time", got, due.Sub(got))
	}
	if string(d.Body()) != "late" || d.Attempt() != 3 || d.Headers()["k"] != "v" {
		t.Errorf("delivery = %q attempt %d headers %v, want %q attempt 3 with k=v", d.Body(), d.Attempt(), d.Headers(), "late")
	}
	ack(t, d)
}

// TestWaitSurvivesLostConnection loses the connection while the mover
// holds a retried message until its due time: the broker hands it back to
// the wait queue, and the mover of the new connection moves it; it is
// delivered, once.
func TestWaitSurvivesLostConnection(t *testing.T) {
	brokerURL := brokerURL(t)
	p := newProxy(t, brokerURL)
	logger, _ := testLogger(t)
	q := mustOpen(t, Options{URL: p.url, Logger: logger, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	defer q.Close()
	direct := mustOpen(t, Options{URL: brokerURL})
	defer direct.Close()
	name := uniqueName(t, brokerURL)
	publish(t, q, name, queue.Message{Body: []byte("x")})
	ch, _ := consume(t, q, name, 1)
	start := time.Now()
	if err := queuetest.Receive(t, ch).Retry(t.Context(), 2*time.Second); err != nil {
		t.Fatalf("Retry(2s) = %v", err)
	}
	// The mover takes the message at once and holds it: the wait queue
	// shows no ready message.
	eventuallyLen(t, direct, name, 0)
	g := gen(q)
	p.cut()
	p.restore()
	waitReconnected(t, q, g, 30*time.Second)

	d := queuetest.Receive(t, ch)
	if elapsed := time.Since(start); elapsed < 2*time.Second {
		t.Errorf("delivered after %v, before its delay of 2s", elapsed)
	}
	if d.Attempt() != 2 {
		t.Errorf("Attempt() = %d, want 2", d.Attempt())
	}
	ack(t, d)
	queuetest.ExpectNone(t, ch)
	eventuallyLen(t, direct, name, 0)
}
