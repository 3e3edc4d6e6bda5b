package amqpqueue

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
)

// receive returns the next delivery of ch, failing t after
// queuetest.DeliveryTimeout.
func receive(t *testing.T, ch <-chan queue.Delivery, what string) queue.Delivery {
	t.Helper()
	select {
	case d, ok := <-ch:
		if !ok {
			t.Fatalf("consumer closed before %s", what)
		}
		return d
	case <-time.After(queuetest.DeliveryTimeout):
		t.Fatalf("no delivery of %s", what)
	}
	return nil
}

// TestResentAfterLostConfirm loses the connection of a publisher after the
// broker took its message and before the confirm arrived (as when the node
// it is connected to dies): Publish sends the message again, so the queue
// holds it twice, and the copy must say so (queue.SeenBefore), since the
// first may have been worked on already. In the cluster test a loader
// trusted such a copy's record snapshot and fetched its page a second time.
func TestResentAfterLostConfirm(t *testing.T) {
	brokerURL := brokerURL(t)
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.StartProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = p.Addr()
	log, _ := testLogger(t)
	q := mustOpen(t, Options{URL: viaProxy.String(), Logger: log, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	defer q.Close()
	direct := mustOpen(t, Options{URL: brokerURL})
	defer direct.Close()
	name := uniqueName(t, brokerURL)

	// The publishing channel is open and the queue declared before replies
	// are held: the next Publish needs no answer but its confirm.
	publish(t, q, name, queue.Message{Body: []byte("warm-up")})
	ch, _ := consume(t, direct, name, 10)
	ack(t, receive(t, ch, "warm-up"))

	p.HoldReplies()
	done := make(chan error, 1)
	go func() {
		done <- q.Publish(context.Background(), name, queue.Message{Body: []byte("m"), Headers: map[string]string{"k": "v"}})
	}()
	first := receive(t, ch, "the message") // taken by the broker; its confirm waits in the proxy
	p.Close()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Publish across the lost confirm = %v, want nil", err)
		}
	case <-time.After(queuetest.DeliveryTimeout):
		t.Fatal("Publish did not return after the reconnection")
	}
	copy := receive(t, ch, "the copy sent again")
	for _, d := range []queue.Delivery{first, copy} {
		if string(d.Body()) != "m" || d.Headers()["k"] != "v" || len(d.Headers()) != 1 {
			t.Errorf("delivery: body %q, headers %v; want %q, only k=v", d.Body(), d.Headers(), "m")
		}
	}
	if queue.SeenBefore(first) {
		t.Error("SeenBefore(first copy) = true, want false")
	}
	if !queue.SeenBefore(copy) {
		t.Error("SeenBefore(copy sent again after the lost confirm) = false, want true")
	}
	ack(t, first)
	ack(t, copy)
}

// TestPostponedCopySeenBefore: Postpone publishes a copy with the attempt
// unchanged; its consumer must not take it for a first delivery, since the
// work of the first may have begun. A retried copy (attempt 2) says so by
// its attempt.
func TestPostponedCopySeenBefore(t *testing.T) {
	brokerURL := brokerURL(t)
	q := mustOpen(t, Options{URL: brokerURL})
	defer q.Close()
	name := uniqueName(t, brokerURL)
	publish(t, q, name, queue.Message{Body: []byte("m")})
	ch, _ := consume(t, q, name, 1)
	d := receive(t, ch, "the message")
	if queue.SeenBefore(d) {
		t.Fatal("SeenBefore(first delivery) = true, want false")
	}
	if err := d.Postpone(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("Postpone = %v", err)
	}
	d = receive(t, ch, "the postponed copy")
	if d.Attempt() != 1 || !queue.SeenBefore(d) || len(d.Headers()) != 0 {
		t.Errorf("postponed copy: attempt %d, SeenBefore %v, headers %v; want 1, true, none", d.Attempt(), queue.SeenBefore(d), d.Headers())
	}
	ack(t, d)
}
