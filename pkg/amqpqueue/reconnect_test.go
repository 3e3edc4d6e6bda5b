package amqpqueue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
)

// gen returns the generation of q's connection: 1 until the first reconnect.
func gen(q *Queue) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.gen
}

// waitReconnected waits until q has connected again after generation g.
func waitReconnected(t testing.TB, q *Queue, g uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		q.mu.Lock()
		up := q.gen > g && q.link != nil && !q.link.conn.IsClosed()
		q.mu.Unlock()
		if up {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected within %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outage is one way of taking the broker away from a Queue and giving it
// back.
type outage struct {
	// cut drops the connection; the broker may stay unreachable until restore.
	cut func(t *testing.T)
	// restore makes the broker reachable again.
	restore func(t *testing.T)
	// unreachable reports that the broker cannot be reached between cut and
	// restore, so a Publish must block meanwhile.
	unreachable bool
	// within bounds the wait for reconnection after restore.
	within time.Duration
	// down, if not nil, checks q between cut and restore; up, if not nil,
	// checks q at the end, after it has reconnected.
	down, up func(t *testing.T, q *Queue)
}

// testReconnect holds deliveries and loses the connection: settling them
// must then fail, the consumer must go on, every message must be delivered
// at least once, and a Publish during the outage must complete afterwards.
func testReconnect(t *testing.T, brokerURL string, opts Options, o outage) {
	q := mustOpen(t, opts)
	defer q.Close()
	name := uniqueName(t, brokerURL)
	const before, during = 10, 5
	var msgs []queue.Message
	want := map[string]bool{}
	for i := range before {
		msgs = append(msgs, queue.Message{Body: fmt.Appendf(nil, "before-%d", i)})
	}
	publish(t, q, name, msgs...)
	ch, _ := consume(t, q, name, 4)
	held := make([]queue.Delivery, 4)
	for i := range held {
		held[i] = queuetest.Receive(t, ch)
	}
	for _, d := range held {
		if queue.Lost(d) {
			t.Errorf("delivery %q reports Lost while its connection is up", d.Body())
		}
	}
	ack(t, held[0])
	ack(t, held[1])
	for i := 2; i < before; i++ {
		want[fmt.Sprintf("before-%d", i)] = true
	}

	g := gen(q)
	o.cut(t)
	if o.down != nil {
		o.down(t, q)
	}
	var duringMsgs []queue.Message
	for i := range during {
		b := fmt.Sprintf("during-%d", i)
		duringMsgs = append(duringMsgs, queue.Message{Body: []byte(b)})
		want[b] = true
	}
	pubDone := make(chan error, 1)
	go func() { pubDone <- q.Publish(t.Context(), name, duringMsgs...) }()
	if o.unreachable {
		select {
		case err := <-pubDone:
			t.Fatalf("Publish() while the broker is unreachable = %v, want it to block", err)
		case <-time.After(queuetest.QuietWindow):
		}
	}
	o.restore(t)
	select {
	case err := <-pubDone:
		if err != nil {
			t.Fatalf("Publish() across the outage = %v, want nil", err)
		}
	case <-time.After(o.within):
		t.Fatalf("Publish() across the outage not done within %v", o.within)
	}
	waitReconnected(t, q, g, o.within)

	for _, d := range held[2:] {
		select {
		case <-d.(queue.Revocable).Lost():
		case <-time.After(o.within):
			t.Errorf("delivery %q from the lost connection does not report Lost within %v", d.Body(), o.within)
		}
		if err := d.Ack(t.Context()); !errors.Is(err, queue.ErrSettled) {
			t.Errorf("Ack(%q) of a delivery from the lost connection = %v, want %v", d.Body(), err, queue.ErrSettled)
		}
	}
	// The same consumer channel goes on delivering. A message acked just
	// before the outage may come again: AMQP acks are not confirmed, and one
	// still in flight when the connection dropped is lost (at least once).
	got := map[string]int{}
	for missing := len(want); missing > 0; {
		var d queue.Delivery
		select {
		case dd, ok := <-ch:
			if !ok {
				t.Fatal("consumer channel closed after reconnect")
			}
			d = dd
		case <-time.After(o.within):
			t.Fatalf("after reconnect got %d of %d messages within %v: %v", len(got), len(want), o.within, got)
		}
		b := string(d.Body())
		if !want[b] && b != "before-0" && b != "before-1" {
			t.Errorf("unexpected delivery %q (never published)", b)
		}
		if want[b] && got[b] == 0 {
			missing--
		}
		got[b]++
		ack(t, d)
	}
	// Whatever comes now is a duplicate, which the consumer acks.
	for {
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatal("consumer channel closed after reconnect")
			}
			ack(t, d)
			continue
		case <-time.After(queuetest.QuietWindow):
		}
		break
	}
	eventuallyLen(t, q, name, 0)
	if o.up != nil {
		o.up(t, q)
	}
}

// TestReconnectAfterBrokerClosesConnection closes the Queue's connection
// with rabbitmqctl, as an operator or a broker failure would.
func TestReconnectAfterBrokerClosesConnection(t *testing.T) {
	brokerURL := brokerURL(t)
	ctl := newRabbitmqctl(t)
	logger, logs := testLogger(t)
	connName := "amqpqueue-test-" + randomHex(t)
	opts := Options{URL: brokerURL, ConnectionName: connName, Logger: logger, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 500 * time.Millisecond}
	testReconnect(t, brokerURL, opts, outage{
		cut: func(t *testing.T) {
			ctl.closeConnection(t, connName)
		},
		restore: func(*testing.T) {},
		within:  30 * time.Second,
	})
	if !strings.Contains(logs.String(), "amqp reconnected") {
		t.Errorf("log has no reconnection:\n%s", logs.String())
	}
}

// TestReconnectThroughOutage puts a TCP proxy between the Queue and the
// broker, cuts its connections and refuses new ones for a while.
func TestReconnectThroughOutage(t *testing.T) {
	brokerURL := brokerURL(t)
	p := newProxy(t, brokerURL)
	logger, _ := testLogger(t)
	opts := Options{URL: p.url, Logger: logger, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}
	testReconnect(t, brokerURL, opts, outage{
		cut:         func(*testing.T) { p.cut() },
		restore:     func(*testing.T) { p.restore() },
		unreachable: true,
		within:      30 * time.Second,
	})
}

// TestRepublishUnconfirmed loses the connection after the broker has
// enqueued a batch but before its confirms reached the Queue: Publish must
// publish the whole batch again on the new connection.
func TestRepublishUnconfirmed(t *testing.T) {
	brokerURL := brokerURL(t)
	p := newProxy(t, brokerURL)
	logger, logs := testLogger(t)
	q := mustOpen(t, Options{URL: p.url, Logger: logger, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	defer q.Close()
	direct := mustOpen(t, Options{URL: brokerURL})
	defer direct.Close()
	name := uniqueName(t, brokerURL)
	publish(t, q, name, queue.Message{Body: []byte("declares the queue")})

	const n = 20
	var msgs []queue.Message
	for i := range n {
		msgs = append(msgs, queue.Message{Body: fmt.Appendf(nil, "m%d", i)})
	}
	p.stall()
	pubDone := make(chan error, 1)
	go func() { pubDone <- q.Publish(t.Context(), name, msgs...) }()
	eventuallyLen(t, direct, name, 1+n) // the broker has every message
	select {
	case err := <-pubDone:
		t.Fatalf("Publish() without confirms = %v, want it to block", err)
	default:
	}
	p.cut()
	p.restore()
	select {
	case err := <-pubDone:
		if err != nil {
			t.Fatalf("Publish() across the lost connection = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Publish() across the lost connection not done within 30s")
	}
	eventuallyLen(t, direct, name, 1+2*n) // every message twice: at least once
	if !strings.Contains(logs.String(), "unconfirmed=20") {
		t.Errorf("log does not say that 20 messages were published again:\n%s", logs.String())
	}
}

// TestPublishDuringOutageHonoursContext checks that a Publish blocked by an
// outage returns when its context ends.
func TestPublishDuringOutageHonoursContext(t *testing.T) {
	brokerURL := brokerURL(t)
	p := newProxy(t, brokerURL)
	q := mustOpen(t, Options{URL: p.url, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	defer q.Close()
	name := uniqueName(t, brokerURL)
	publish(t, q, name, queue.Message{Body: []byte("up")})
	p.cut()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := q.Publish(ctx, name, queue.Message{Body: []byte("down")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Publish() during an outage with a deadline = %v, want %v", err, context.DeadlineExceeded)
	}
	if _, err := q.Len(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Len() during an outage with a deadline = %v, want %v", err, context.DeadlineExceeded)
	}
	// Close does not wait for the broker.
	if err := q.Close(); err != nil {
		t.Errorf("Close() during an outage = %v, want nil", err)
	}
	p.restore()
}

// TestBrokerRestart stops and starts the local RabbitMQ with
// scripts/services/rabbitmq.sh. It disrupts every other user of the broker,
// so it only runs with GRIDCRAWL_AMQP_RESTART_TEST=1.
func TestBrokerRestart(t *testing.T) {
	brokerURL := brokerURL(t)
	if os.Getenv("GRIDCRAWL_AMQP_RESTART_TEST") != "1" {
		t.Skip("GRIDCRAWL_AMQP_RESTART_TEST not 1: restarting the broker disrupts other tests")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "services", "rabbitmq.sh"))
	if err != nil {
		t.Fatalf("filepath.Abs() = %v", err)
	}
	run := func(t *testing.T, args ...string) {
		t.Helper()
		for _, a := range args {
			cmd := exec.CommandContext(t.Context(), script, a)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s %s = %v\n%s", script, a, err, out)
			}
		}
	}
	logger, logs := testLogger(t)
	opts := Options{URL: brokerURL, Logger: logger, ReconnectMin: 50 * time.Millisecond, ReconnectMax: time.Second}
	testReconnect(t, brokerURL, opts, outage{
		cut:         func(t *testing.T) { run(t, "stop") },
		restore:     func(t *testing.T) { run(t, "start", "check") },
		unreachable: true,
		within:      2 * time.Minute,
	})
	if !strings.Contains(logs.String(), "amqp reconnected") {
		t.Errorf("log has no reconnection:\n%s", logs.String())
	}
}

// rabbitmqctl runs the broker's CLI against the node that
// scripts/services/rabbitmq.sh starts.
type rabbitmqctl struct {
	bin string
	env []string
}

// newRabbitmqctl returns a working rabbitmqctl, or skips the test (fails it
// when backends are required).
func newRabbitmqctl(t *testing.T) *rabbitmqctl {
	t.Helper()
	bin := "/usr/lib/rabbitmq/bin/rabbitmqctl" // the wrapper in /usr/sbin switches user
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("rabbitmqctl"); err != nil {
			testenv.Unavailable(t, "rabbitmqctl not installed")
		}
	}
	dir := os.Getenv("GRIDCRAWL_SERVICES_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			testenv.Unavailable(t, "no home directory to find the broker's Erlang cookie: %v", err)
		}
		dir = filepath.Join(home, ".cache", "gridcrawl-services")
	}
	c := &rabbitmqctl{bin: bin, env: append(os.Environ(),
		"HOME="+filepath.Join(dir, "rabbitmq", "home"),
		"RABBITMQ_NODENAME=gridcrawl@localhost",
		"ERL_EPMD_ADDRESS=127.0.0.1",
	)}
	if out, err := c.run(t, "-q", "list_connections", "pid"); err != nil {
		testenv.Unavailable(t, "rabbitmqctl cannot reach the node of scripts/services/rabbitmq.sh: %v\n%s", err, out)
	}
	return c
}

func (c *rabbitmqctl) run(t *testing.T, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// closeConnection closes the connections whose name is connName.
func (c *rabbitmqctl) closeConnection(t *testing.T, connName string) {
	t.Helper()
	out, err := c.run(t, "-q", "list_connections", "pid", "client_properties")
	if err != nil {
		t.Fatalf("rabbitmqctl list_connections = %v\n%s", err, out)
	}
	closed := 0
	for _, line := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(line, "\t")
		if !ok || !strings.Contains(props, `"`+connName+`"`) {
			continue
		}
		if out, err := c.run(t, "close_connection", pid, "closed by amqpqueue test"); err != nil {
			t.Fatalf("rabbitmqctl close_connection %s = %v\n%s", pid, err, out)
		}
		closed++
	}
	if closed != 1 {
		t.Fatalf("closed %d connections named %q, want 1; connections:\n%s", closed, connName, out)
	}
}

// proxy forwards loopback TCP connections to the broker, and can cut them.
type proxy struct {
	url    string
	target string
	ln     net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
	// stalled, while not nil, holds back what the broker sends until it is
	// closed (by restore) or the connections are cut.
	stalled chan struct{}
}

func newProxy(t *testing.T, brokerURL string) *proxy {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatalf("url.Parse(%q) = %v", redact(brokerURL), err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen() = %v", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5672")
	}
	u.Host = ln.Addr().String()
	p := &proxy{url: u.String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c) })
	}
}

func (p *proxy) pipe(c net.Conn) {
	defer p.drop(c)
	u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		u.Close()
		return
	}
	p.conns[u] = true
	p.mu.Unlock()
	defer p.drop(u)
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { p.copyDown(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	<-done
}

func (p *proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// copyDown copies what the broker sends to the client, holding it back
// while the proxy is stalled.
func (p *proxy) copyDown(c, u net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled := p.stalled
			p.mu.Unlock()
			if stalled != nil {
				<-stalled
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stall holds back everything the broker sends (replies, confirms,
// deliveries, heartbeats) while letting the client's traffic through.
func (p *proxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// restore accepts connections again and ends a stall.
func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}
