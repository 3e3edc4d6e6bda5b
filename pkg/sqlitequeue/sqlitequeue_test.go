package sqlitequeue

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/queue/queuetest"
)

// paths remembers the file of each queue the harness opened.
type paths struct {
	mu    sync.Mutex
	files map[queue.Queue]string
}

func (p *paths) get(q queue.Queue) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.files[q]
}

func (p *paths) set(q queue.Queue, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.files[q] = path
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want int // MaxAttempts the queue should apply
	}{
		{"default options", Options{}, DefaultMaxAttempts},
		{"max attempts 2", Options{MaxAttempts: 2}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := &paths{files: make(map[queue.Queue]string)}
			queuetest.Run(t, queuetest.Harness{
				New: func(t *testing.T) queue.Queue {
					path := filepath.Join(t.TempDir(), "queue.db")
					q := mustOpen(t, path, tt.opts)
					files.set(q, path)
					return q
				},
				Reopen: func(t *testing.T, old queue.Queue) queue.Queue {
					path := files.get(old)
					if err := old.Close(); err != nil {
						t.Fatalf("Close() = %v, want nil", err)
					}
					q := mustOpen(t, path, tt.opts)
					files.set(q, path)
					return q
				},
				MaxAttempts: tt.want,
			})
		})
	}
}

func mustOpen(t *testing.T, path string, opts Options) *Queue {
	t.Helper()
	q, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	return q
}

type delivered struct {
	Body        string
	Redelivered bool
	Attempt     int
}

// drain receives n deliveries, acks them and returns what they were.
func drain(t *testing.T, q queue.Queue, name string, n int) []delivered {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := q.Consume(ctx, name, queue.ConsumeOptions{Prefetch: n})
	if err != nil {
		t.Fatalf("Consume(%q) = %v, want nil", name, err)
	}
	var got []delivered
	for range n {
		d := queuetest.Receive(t, ch)
		got = append(got, delivered{string(d.Body()), d.Redelivered(), d.Attempt()})
		if err := d.Ack(t.Context()); err != nil {
			t.Fatalf("Ack(%q) = %v, want nil", d.Body(), err)
		}
	}
	return got
}

// TestOpenRecoversHeldMessages checks that rows a dead process held are
// delivered again, marked redelivered, in their original order.
func TestOpenRecoversHeldMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	q := mustOpen(t, path, Options{})
	if err := q.Publish(t.Context(), "work",
		queue.Message{Body: []byte("a")}, queue.Message{Body: []byte("b")}, queue.Message{Body: []byte("c")}); err != nil {
		t.Fatalf("Publish() = %v, want nil", err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}

	// Mark "a" and "c" held by a claim of a process that no longer exists.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v", path, err)
	}
	res, err := db.ExecContext(t.Context(), `UPDATE messages SET state = 1, token = 99 WHERE body IN (X'61', X'63')`)
	if err != nil {
		t.Fatalf("mark held: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Fatalf("mark held: %d rows, want 2", n)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("db.Close() = %v", err)
	}

	q = mustOpen(t, path, Options{})
	defer q.Close()
	if n, err := q.Len(t.Context(), "work"); err != nil || n != 3 {
		t.Errorf("Len() after recovery = %d, %v, want 3, nil", n, err)
	}
	want := []delivered{{"a", true, 1}, {"b", false, 1}, {"c", true, 1}}
	if diff := cmp.Diff(want, drain(t, q, "work", 3)); diff != "" {
		t.Errorf("deliveries after recovery (-want +got):\n%s", diff)
	}
}

const childEnv = "SQLITEQUEUE_TEST_CHILD_DB"

// TestSurvivesKill kills a process that holds deliveries and has just
// published, and checks that nothing is lost.
func TestSurvivesKill(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		runChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "queue.db")
	q := mustOpen(t, path, Options{})
	if err := q.Publish(t.Context(), "work",
		queue.Message{Body: []byte("m0")}, queue.Message{Body: []byte("m1")}, queue.Message{Body: []byte("m2")}); err != nil {
		t.Fatalf("Publish() = %v, want nil", err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("StdoutPipe() = %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "child:") {
				ready <- sc.Text()
				return
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if line != "child: holding" || !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q, want %q", line, "child: holding")
		}
	case <-time.After(queuetest.DeliveryTimeout):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child not ready within %v", queuetest.DeliveryTimeout)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	_ = cmd.Wait() // "signal: killed"

	q = mustOpen(t, path, Options{})
	defer q.Close()
	want := []delivered{{"m0", true, 1}, {"m1", true, 1}, {"m2", false, 1}, {"from child", false, 1}}
	if diff := cmp.Diff(want, drain(t, q, "work", 4)); diff != "" {
		t.Errorf("deliveries after kill (-want +got):\n%s", diff)
	}
}

// runChild holds two deliveries and a fresh publish, then waits to be killed.
func runChild(path string) {
	q, err := Open(path, Options{})
	if err != nil {
		fmt.Println("child: open:", err)
		return
	}
	ctx := context.Background()
	ch, err := q.Consume(ctx, "work", queue.ConsumeOptions{Prefetch: 2})
	if err != nil {
		fmt.Println("child: consume:", err)
		return
	}
	for range 2 {
		<-ch
	}
	if err := q.Publish(ctx, "work", queue.Message{Body: []byte("from child")}); err != nil {
		fmt.Println("child: publish:", err)
		return
	}
	fmt.Println("child: holding")
	time.Sleep(time.Minute) // killed long before
}

func TestOpenLocksFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	q := mustOpen(t, path, Options{})
	defer q.Close()
	q2, err := Open(path, Options{BusyTimeout: 50 * time.Millisecond})
	if err == nil {
		q2.Close()
		t.Fatalf("second Open(%q) while open = nil error, want an error", path)
	}
	// The first one still works.
	if err := q.Publish(t.Context(), "x", queue.Message{Body: []byte("1")}); err != nil {
		t.Errorf("Publish() after failed second Open = %v, want nil", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	dir := t.TempDir()
	opens := []struct {
		name string
		path string
		opts Options
	}{
		{"empty path", "", Options{}},
		{"query in path", filepath.Join(dir, "q.db?mode=ro"), Options{}},
		{"uri", "file:" + filepath.Join(dir, "q.db"), Options{}},
		{"memory", ":memory:", Options{}},
		{"missing directory", filepath.Join(dir, "no", "such", "q.db"), Options{}},
		{"negative max attempts", filepath.Join(dir, "q.db"), Options{MaxAttempts: -1}},
	}
	for _, tt := range opens {
		t.Run(tt.name, func(t *testing.T) {
			if q, err := Open(tt.path, tt.opts); err == nil {
				q.Close()
				t.Errorf("Open(%q, %+v) = nil error, want an error", tt.path, tt.opts)
			}
		})
	}

	q := mustOpen(t, filepath.Join(dir, "ok.db"), Options{})
	defer q.Close()
	ctx := t.Context()
	calls := []struct {
		name string
		call func() error
	}{
		{"publish empty name", func() error { return q.Publish(ctx, "", queue.Message{}) }},
		{"consume empty name", func() error { _, err := q.Consume(ctx, "", queue.ConsumeOptions{}); return err }},
		{"consume negative prefetch", func() error { _, err := q.Consume(ctx, "a", queue.ConsumeOptions{Prefetch: -1}); return err }},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err == nil {
				t.Errorf("%s = nil error, want an error", tt.name)
			}
		})
	}
}

func TestPublishNothing(t *testing.T) {
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{})
	defer q.Close()
	if err := q.Publish(t.Context(), "a"); err != nil {
		t.Errorf("Publish() of no messages = %v, want nil", err)
	}
	if n, err := q.Len(t.Context(), "a"); err != nil || n != 0 {
		t.Errorf("Len() = %d, %v, want 0, nil", n, err)
	}
}

func TestCloseTwice(t *testing.T) {
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{})
	if err := q.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if err := q.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

// TestAckAfterCancelReportsHandBack checks the error of a settle that comes
// after the consumer returned the delivery to the queue.
func TestAckAfterCancelReportsHandBack(t *testing.T) {
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{})
	defer q.Close()
	if err := q.Publish(t.Context(), "a", queue.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("Publish() = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := q.Consume(ctx, "a", queue.ConsumeOptions{})
	if err != nil {
		t.Fatalf("Consume() = %v", err)
	}
	d := queuetest.Receive(t, ch)
	cancel()
	for range ch {
	}
	if err := d.Ack(t.Context()); !errors.Is(err, queue.ErrSettled) || !strings.Contains(err.Error(), "returned to queue") {
		t.Errorf("Ack() after cancel = %v, want %v saying it was returned to the queue", err, queue.ErrSettled)
	}
	if got := drain(t, q, "a", 1); !got[0].Redelivered {
		t.Errorf("redelivery after cancel = %+v, want Redelivered", got[0])
	}
}

// sleepers returns how many consumers of name sleep waiting for messages.
func sleepers(q *Queue, name string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, ok := q.waits[name]; ok {
		return len(w.waiters)
	}
	return 0
}

// TestWakeUpPassesOn checks that a wake-up given to a consumer that stops
// before using it goes to another consumer.
func TestWakeUpPassesOn(t *testing.T) {
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{})
	defer q.Close()
	ctxA, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	chA, err := q.Consume(ctxA, "a", queue.ConsumeOptions{})
	if err != nil {
		t.Fatalf("Consume(A) = %v", err)
	}
	waitSleepers(t, q, "a", 1)
	chB, err := q.Consume(t.Context(), "a", queue.ConsumeOptions{})
	if err != nil {
		t.Fatalf("Consume(B) = %v", err)
	}
	waitSleepers(t, q, "a", 2) // A first in line, then B

	// A message that no notify announced yet.
	if _, err := q.stmts[stInsert].ExecContext(t.Context(), "a", []byte("m"), nil); err != nil {
		t.Fatalf("insert: %v", err)
	}
	// A stops, and is woken for the message before it can unregister: its
	// stop blocks on q.mu, held here.
	q.mu.Lock()
	cancelA()
	q.waits["a"].notify(1)
	q.mu.Unlock()
	for range chA {
		t.Error("A, cancelled, got a delivery")
	}
	d := queuetest.Receive(t, chB)
	if string(d.Body()) != "m" {
		t.Errorf("B got %q, want %q", d.Body(), "m")
	}
}

// waitSleepers waits until n consumers of name sleep.
func waitSleepers(t *testing.T, q *Queue, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(queuetest.DeliveryTimeout)
	for sleepers(q, name) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers of %q asleep, want %d", sleepers(q, name), name, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestManyConsumersOneByOne publishes messages one at a time to many
// sleeping consumers: each must be delivered exactly once.
func TestManyConsumersOneByOne(t *testing.T) {
	const consumers, messages = 8, 200
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{})
	defer q.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan string, messages*2)
	var wg sync.WaitGroup
	for range consumers {
		ch, err := q.Consume(ctx, "a", queue.ConsumeOptions{Prefetch: 1 + consumers%3})
		if err != nil {
			t.Fatalf("Consume() = %v", err)
		}
		wg.Go(func() {
			for d := range ch {
				if err := d.Ack(ctx); err != nil {
					t.Errorf("Ack(%q) = %v", d.Body(), err)
				}
				got <- string(d.Body())
			}
		})
	}
	for i := range messages {
		if err := q.Publish(ctx, "a", queue.Message{Body: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatalf("Publish() = %v", err)
		}
	}
	seen := map[string]int{}
	for range messages {
		select {
		case b := <-got:
			seen[b]++
		case <-time.After(queuetest.DeliveryTimeout):
			t.Fatalf("got %d of %d messages within %v", len(seen), messages, queuetest.DeliveryTimeout)
		}
	}
	cancel()
	wg.Wait()
	close(got)
	for b := range got {
		seen[b]++
	}
	for i := range messages {
		if b := fmt.Sprintf("m%d", i); seen[b] != 1 {
			t.Errorf("message %q delivered %d times, want 1", b, seen[b])
		}
	}
}

// TestDelayedRetriesOnManyQueues checks the one scheduler serves several
// queues with different delays.
func TestDelayedRetriesOnManyQueues(t *testing.T) {
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{})
	defer q.Close()
	delays := map[string]time.Duration{"a": 300 * time.Millisecond, "b": 100 * time.Millisecond, "c": 200 * time.Millisecond}
	chans := map[string]<-chan queue.Delivery{}
	for name, delay := range delays {
		if err := q.Publish(t.Context(), name, queue.Message{Body: []byte(name)}); err != nil {
			t.Fatalf("Publish(%q) = %v", name, err)
		}
		ch, err := q.Consume(t.Context(), name, queue.ConsumeOptions{})
		if err != nil {
			t.Fatalf("Consume(%q) = %v", name, err)
		}
		chans[name] = ch
		if err := queuetest.Receive(t, ch).Retry(t.Context(), delay); err != nil {
			t.Fatalf("Retry(%q, %v) = %v", name, delay, err)
		}
	}
	for name, ch := range chans {
		d := queuetest.Receive(t, ch)
		if string(d.Body()) != name || d.Attempt() != 2 {
			t.Errorf("queue %q: Body(), Attempt() = %q, %d, want %q, 2", name, d.Body(), d.Attempt(), name)
		}
	}
}

// TestSleepAfterNotify checks the protocol that keeps a consumer from
// sleeping through a notify that came while it looked at its queue.
func TestSleepAfterNotify(t *testing.T) {
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{})
	defer q.Close()
	newConsumer := func() *consumer {
		c := &consumer{q: q, queue: "a", prefetch: 1, held: map[int64]*delivery{},
			space: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
		q.attach(c)
		t.Cleanup(func() { q.detach(c) })
		return c
	}
	a, b := newConsumer(), newConsumer()

	// Nobody asleep: the notify is unserved, so A must look again.
	seq := q.seq(a)
	q.notify("a", 1)
	if q.sleep(a, seq) {
		t.Error("sleep() after an unserved notify = true, want false")
	}

	// B asleep and woken for the one message: A may sleep.
	seq = q.seq(a)
	if !q.sleep(b, q.seq(b)) {
		t.Fatal("sleep(B) with no notify = false, want true")
	}
	q.notify("a", 1)
	select {
	case <-b.wake:
	default:
		t.Fatal("notify(1) did not wake the sleeping consumer")
	}
	if !q.sleep(a, seq) {
		t.Error("sleep() after a notify served by another consumer = false, want true")
	}

	// A asleep, two messages: A is woken, and the second is unserved.
	seq = q.seq(b)
	q.notify("a", 2)
	select {
	case <-a.wake:
	default:
		t.Fatal("notify(2) did not wake the sleeping consumer")
	}
	if q.sleep(b, seq) {
		t.Error("sleep() after a notify with more messages than sleepers = true, want false")
	}
}

func TestPragmas(t *testing.T) {
	q := mustOpen(t, filepath.Join(t.TempDir(), "q.db"), Options{BusyTimeout: 1500 * time.Millisecond})
	defer q.Close()
	tests := []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "1"}, // NORMAL
		{"locking_mode", "exclusive"},
		{"busy_timeout", "1500"},
	}
	for _, tt := range tests {
		var got string
		if err := q.db.QueryRowContext(t.Context(), "PRAGMA "+tt.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", tt.pragma, err)
		}
		if got != tt.want {
			t.Errorf("PRAGMA %s = %q, want %q", tt.pragma, got, tt.want)
		}
	}
}
