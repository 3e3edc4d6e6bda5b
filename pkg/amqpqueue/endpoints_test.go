package amqpqueue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
)

func TestSplitURLs(t *testing.T) {
	got, err := splitURLs(" amqp://u:p@127.0.0.1:5701/ ,amqp://u:p@127.0.0.1:5702/,amqp://u:p@127.0.0.1:5703/")
	if err != nil {
		t.Fatalf("splitURLs(three URLs) = %v", err)
	}
	want := []string{"amqp://u:p@127.0.0.1:5701/", "amqp://u:p@127.0.0.1:5702/", "amqp://u:p@127.0.0.1:5703/"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("splitURLs(three URLs) = %q, want %q", got, want)
	}
	if got, err := splitURLs("amqp://127.0.0.1/"); err != nil || len(got) != 1 {
		t.Errorf("splitURLs(one URL) = %q, %v; want it alone", got, err)
	}
	tests := []struct {
		name, list, want string
	}{
		{"empty", "", "empty URL"},
		{"blank", "  ", "empty URL"},
		{"empty entry", "amqp://u:secret@127.0.0.1:5701/,,amqp://u:secret@127.0.0.1:5703/", "URL 2 of 3 is empty"},
		{"trailing comma", "amqp://u:secret@127.0.0.1:5701/,", "URL 2 of 2 is empty"},
		{"bad entry", "amqp://u:secret@127.0.0.1:5701/,http://u:secret@127.0.0.1:5702/", "URL 2 of 2"},
		{"bad single", "http://u:secret@127.0.0.1/", "parse URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := splitURLs(tt.list)
			if err == nil {
				t.Fatalf("splitURLs(%q) = nil error, want one", tt.list)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("splitURLs(%q) = %v, want it to say %q", tt.list, err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("splitURLs(%q) = %v: shows the password", tt.list, err)
			}
			if _, err := Open(t.Context(), Options{URL: tt.list}); err == nil {
				t.Errorf("Open(%q) = nil error, want one", tt.list)
			}
		})
	}
	if _, err := (Options{URL: "amqp://127.0.0.1/", QuorumInitialGroupSize: -1}).withDefaults(); err == nil {
		t.Error("withDefaults() with QuorumInitialGroupSize -1 = nil error, want one")
	}
}

// TestOpenAllEndpointsDown opens a list where nothing listens: Open keeps
// trying until its context ends, and its error names no password.
func TestOpenAllEndpointsDown(t *testing.T) {
	list := deadURL(t, "amqp://u:secret@127.0.0.1/") + "," + deadURL(t, "amqp://u:secret@127.0.0.1/")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	q, err := Open(ctx, Options{URL: list, ReconnectMin: 10 * time.Millisecond})
	if err == nil {
		q.Close()
		t.Fatal("Open() with no endpoint up = nil error, want an error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open() with no endpoint up = %v, want %v", err, context.DeadlineExceeded)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("Open() error %q shows the password", err)
	}
}

// deadURL returns brokerURL with its host replaced by a loopback port
// where nothing listens: a dead node.
func deadURL(t *testing.T, brokerURL string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen() = %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatalf("url.Parse(%q) = %v", redact(brokerURL), err)
	}
	u.Host = addr
	return u.String()
}

// endpointOf returns the index of the endpoint q is connected to, or -1.
func endpointOf(q *Queue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.link == nil || q.link.conn.IsClosed() {
		return -1
	}
	return q.link.endpoint
}

// cluster is a list of endpoints in front of the single broker: a dead one
// first, then two proxies that can be cut like nodes dying.
type cluster struct {
	brokerURL string
	dead      string
	a, b      *proxy
}

func newCluster(t *testing.T) *cluster {
	brokerURL := brokerURL(t)
	return &cluster{brokerURL: brokerURL, dead: deadURL(t, brokerURL), a: newProxy(t, brokerURL), b: newProxy(t, brokerURL)}
}

// list is the URL list "dead,A,B".
func (c *cluster) list() string { return c.dead + "," + c.a.url + "," + c.b.url }

// logLines returns the log lines with msg.
func logLines(logs *logBuffer, msg string) []string {
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="`+msg+`"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestOpenSkipsDeadEndpoint gives Open a list whose first node is dead: it
// connects to the second, and the queue works.
func TestOpenSkipsDeadEndpoint(t *testing.T) {
	c := newCluster(t)
	logger, logs := testLogger(t)
	q := mustOpen(t, Options{URL: c.list(), Logger: logger, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	defer q.Close()
	if e := endpointOf(q); e != 1 {
		t.Fatalf("connected to endpoint %d, want 1 (the first that answers)", e)
	}
	failed := logLines(logs, "amqp connect failed")
	if len(failed) != 1 || !strings.Contains(failed[0], "endpoint=1 ") {
		t.Errorf("failed connection attempts logged: %q, want one to endpoint 1", failed)
	}
	connected := logLines(logs, "amqp connected")
	if len(connected) != 1 || !strings.Contains(connected[0], "endpoint=2 ") {
		t.Errorf("connections logged: %q, want one to endpoint 2", connected)
	}
	name := uniqueName(t, c.brokerURL)
	publish(t, q, name, queue.Message{Body: []byte("through A")})
	ch, _ := consume(t, q, name, 1)
	d := queuetest.Receive(t, ch)
	if string(d.Body()) != "through A" {
		t.Errorf("received %q, want %q", d.Body(), "through A")
	}
	ack(t, d)
	eventuallyLen(t, q, name, 0)
}

// TestMoveToNextEndpoint kills the node the queue is on (proxy A) while a
// publisher and a consumer stream messages: the queue moves to B, without
// trying the dead first endpoint or A again, and every confirmed message is
// delivered and acked; only messages in flight at the kill come twice.
func TestMoveToNextEndpoint(t *testing.T) {
	c := newCluster(t)
	logger, logs := testLogger(t)
	q := mustOpen(t, Options{URL: c.list(), Logger: logger, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	defer q.Close()
	if e := endpointOf(q); e != 1 {
		t.Fatalf("connected to endpoint %d, want 1", e)
	}
	name := uniqueName(t, c.brokerURL)
	const prefetch = 10
	ch, _ := consume(t, q, name, prefetch)

	// The publisher publishes one message at a time, each confirmed, until
	// told to stop; it stops by itself after 5000.
	var (
		mu        sync.Mutex
		confirmed = map[string]bool{}
	)
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() {
		for i := range 5000 {
			select {
			case <-stop:
				pubDone <- nil
				return
			default:
			}
			b := fmt.Sprintf("m%04d", i)
			if err := q.Publish(t.Context(), name, queue.Message{Body: []byte(b)}); err != nil {
				pubDone <- fmt.Errorf("Publish(%s) = %w", b, err)
				return
			}
			mu.Lock()
			confirmed[b] = true
			mu.Unlock()
		}
		pubDone <- nil
	}()
	nConfirmed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed)
	}

	acked := map[string]int{}       // successful acks per body
	redelivered := map[string]int{} // deliveries flagged redelivered per body
	stale := 0                      // acks refused: the delivery's channel was lost
	receive := func() {
		t.Helper()
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatal("consumer channel closed")
			}
			b := string(d.Body())
			if d.Redelivered() {
				redelivered[b]++
			}
			switch err := d.Ack(t.Context()); {
			case err == nil:
				acked[b]++
			case errors.Is(err, queue.ErrSettled):
				stale++
			default:
				t.Fatalf("Ack(%s) = %v", b, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no delivery within 10s; acked %d of %d confirmed", len(acked), nConfirmed())
		}
	}
	for len(acked) < 100 {
		receive()
	}
	g := gen(q)
	killedAt := len(logs.String())
	c.a.cut() // node A dies mid-stream
	// The stream goes on through B: 100 more messages acked after the kill.
	for target := len(acked) + 100; len(acked) < target; {
		receive()
	}
	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	waitReconnected(t, q, g, 10*time.Second)
	if e := endpointOf(q); e != 2 {
		t.Errorf("after A died, connected to endpoint %d, want 2 (B)", e)
	}
	after := logs.String()[killedAt:]
	if !regexp.MustCompile(`msg="amqp reconnected" url=\S+ endpoint=3 endpoints=3 moved=true`).MatchString(after) {
		t.Errorf("log after the kill does not show the move to endpoint 3:\n%s", after)
	}
	if strings.Contains(after, "amqp reconnect failed") {
		t.Errorf("after A died the queue tried a dead endpoint before B:\n%s", after)
	}
	// Health: the queue answers while one endpoint does.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if _, err := q.Len(ctx, name); err != nil {
		t.Errorf("Len() on B = %v, want nil", err)
	}

	// Every confirmed message is delivered and acked.
	mu.Lock()
	want := len(confirmed)
	mu.Unlock()
	deadline := time.After(15 * time.Second)
	for missing := want - countAcked(acked, confirmed); missing > 0; missing = want - countAcked(acked, confirmed) {
		select {
		case <-deadline:
			t.Fatalf("%d of %d confirmed messages never acked", missing, want)
		default:
		}
		receive()
	}
	// Duplicates, which the consumer acks, end the stream.
	for {
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatal("consumer channel closed")
			}
			b := string(d.Body())
			if d.Redelivered() {
				redelivered[b]++
			}
			if err := d.Ack(t.Context()); err != nil {
				t.Fatalf("Ack(%s) = %v", b, err)
			}
			acked[b]++
			continue
		case <-time.After(queuetest.QuietWindow):
		}
		break
	}
	eventuallyLen(t, q, name, 0)
	dups := 0
	for b, n := range acked {
		if !confirmed[b] {
			t.Errorf("acked %q, never confirmed", b)
		}
		dups += n - 1
	}
	// A message acked on A just before the kill may have been lost with the
	// connection, and so come again (at most the prefetch); a message whose
	// confirm was lost was published again (at most one: one at a time).
	if dups > prefetch+1 {
		t.Errorf("%d messages acked twice, want at most %d (in flight at the kill)", dups, prefetch+1)
	}
	t.Logf("%d messages confirmed and acked, %d acked twice, %d redelivered, %d acks refused on the lost channel", want, dups, len(redelivered), stale)
}

// countAcked returns the confirmed messages acked at least once.
func countAcked(acked map[string]int, confirmed map[string]bool) int {
	n := 0
	for b := range confirmed {
		if acked[b] > 0 {
			n++
		}
	}
	return n
}

// TestAllEndpointsDown kills both live nodes: while none answers the health
// probe fails and Publish waits (or fails with its context), as with one
// URL and a broker down; when B comes back, everything resumes there.
func TestAllEndpointsDown(t *testing.T) {
	c := newCluster(t)
	logger, logs := testLogger(t)
	probe := uniqueName(t, c.brokerURL)
	opts := Options{URL: c.list(), Logger: logger, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}
	testReconnect(t, c.brokerURL, opts, outage{
		cut: func(*testing.T) {
			c.a.cut()
			c.b.cut()
		},
		down: func(t *testing.T, q *Queue) {
			// The readiness probe (metrics.BackendChecks) is a Len.
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			if _, err := q.Len(ctx, probe); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Len() with every endpoint down = %v, want %v", err, context.DeadlineExceeded)
			}
			ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			if err := q.Publish(ctx, probe, queue.Message{Body: []byte("down")}); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Publish() with every endpoint down and a deadline = %v, want %v", err, context.DeadlineExceeded)
			}
		},
		restore:     func(*testing.T) { c.b.restore() },
		unreachable: true,
		within:      15 * time.Second,
		up: func(t *testing.T, q *Queue) {
			if e := endpointOf(q); e != 2 {
				t.Errorf("after B came back, connected to endpoint %d, want 2 (B)", e)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			if _, err := q.Len(ctx, probe); err != nil {
				t.Errorf("Len() after B came back = %v, want nil", err)
			}
		},
	})
	if !regexp.MustCompile(`msg="amqp reconnected" url=\S+ endpoint=3 endpoints=3 moved=true`).MatchString(logs.String()) {
		t.Errorf("log has no reconnection to endpoint 3:\n%s", logs.String())
	}
}

// TestQuorumInitialGroupSize declares queues with an initial group size of
// 3 on the single node, where the broker caps it at 1, and checks that the
// broker compares the argument on later declarations: a client without the
// setting cannot use the queue, as the package doc warns.
func TestQuorumInitialGroupSize(t *testing.T) {
	url := brokerURL(t)
	q := mustOpen(t, Options{URL: url, QuorumInitialGroupSize: 3})
	defer q.Close()
	name := uniqueName(t, url)
	publish(t, q, name, queue.Message{Body: []byte("now")}, queue.Message{Body: []byte("later"), Delay: time.Minute})
	eventuallyLen(t, q, name, 2) // one ready, one delayed

	raw := rawChannel(t, url)
	declares := []struct {
		name   string
		target target
		ok     bool
	}{
		{"main with the same size", q.mainTarget(name), true},
		{"wait queue with the same size", q.waitTarget(name, bucket{time.Minute, "1m"}), true},
		{"main without a size", target{name, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}}, false},
		{"main with another size", target{name, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, argInitialGroupSize: int64(5)}}, false},
		{"wait queue without a size", (&Queue{}).waitTarget(name, bucket{time.Minute, "1m"}), false},
	}
	for _, tt := range declares {
		_, err := raw.QueueDeclare(tt.target.name, true, false, false, false, tt.target.args)
		if (err == nil) != tt.ok {
			t.Errorf("%s: QueueDeclare(%q, %v) = %v, want ok %v", tt.name, tt.target.name, tt.target.args, err, tt.ok)
		}
		if err != nil {
			if !strings.Contains(err.Error(), argInitialGroupSize) {
				t.Errorf("%s: QueueDeclare() = %v, want it to name %s", tt.name, err, argInitialGroupSize)
			}
			raw = rawChannel(t, url) // the broker closed the channel
		}
	}

	// A queue opened without the setting gets the broker's refusal at once,
	// not an endless retry.
	other := mustOpen(t, Options{URL: url})
	defer other.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := other.Publish(ctx, name, queue.Message{Body: []byte("mismatch")})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "PRECONDITION_FAILED") {
		t.Errorf("Publish() from a queue without the group size = %v, want PRECONDITION_FAILED at once", err)
	}
}
