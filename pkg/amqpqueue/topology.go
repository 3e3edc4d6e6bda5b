package amqpqueue

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Headers this package sets on messages besides those of package queue.
const (
	// HeaderAttempt carries the attempt of a message (absent means 1). It is
	// internal: Publish rejects it and Delivery.Headers hides it.
	HeaderAttempt = "x-gridcrawl-attempt"
	// HeaderDue carries the time (Unix milliseconds) before which a waiting
	// message must not be handed to a consumer: set on every message
	// published to a wait queue. Internal like HeaderAttempt.
	HeaderDue = "x-gridcrawl-due"
	// HeaderRelease carries the time (Unix milliseconds) at which a waiting
	// message leaves its wait queue: its due time, or, for a delay longer
	// than the longest bucket, the end of that bucket, when it goes on to
	// wait what remains. Internal like HeaderAttempt.
	HeaderRelease = "x-gridcrawl-release"
	// HeaderResent marks a message published again because the broker may
	// have taken an earlier copy (see queue.Resendable): one whose confirm
	// a lost connection kept away or that the broker nacked, and a copy
	// published by Postpone. Internal like HeaderAttempt.
	HeaderResent = "x-gridcrawl-resent"
	// HeaderAttempts, on a dead-lettered message, is the attempt it had
	// reached when it was dead-lettered.
	HeaderAttempts = "x-gridcrawl-attempts"
	// HeaderRedeliveries, on a message dead-lettered for ReasonRedeliveries,
	// is the broker's delivery count of the message.
	HeaderRedeliveries = "x-gridcrawl-redeliveries"
)

// ReasonRedeliveries is the dead-letter reason of a message that was
// delivered and not settled (its consumer died or stopped) more than
// Options.MaxRedeliveries times.
const ReasonRedeliveries = "redelivery limit exceeded"

// maxNameLen is the longest queue name RabbitMQ accepts (a short string).
const maxNameLen = 255

// bucket is one wait queue length: a delayed message waits in the wait
// queue of the shortest bucket at least as long as its delay.
type bucket struct {
	d    time.Duration
	name string
}

// buckets are the wait queue lengths, shortest first. Each is a quorum queue
// per source queue, created on the first delay that uses it. Messages of one
// wait queue are released in the order they came (the queue is read from its
// head), and all waited about as long, so a message is held up behind an
// earlier one for less than the bucket's width.
var buckets = []bucket{
	{100 * time.Millisecond, "100ms"},
	{500 * time.Millisecond, "500ms"},
	{time.Second, "1s"},
	{2 * time.Second, "2s"},
	{5 * time.Second, "5s"},
	{10 * time.Second, "10s"},
	{30 * time.Second, "30s"},
	{time.Minute, "1m"},
	{5 * time.Minute, "5m"},
	{15 * time.Minute, "15m"},
	{time.Hour, "1h"},
	{4 * time.Hour, "4h"},
}

// waitSuffix separates a queue's name from its bucket in a wait queue name.
// (Releases before wait queues had delay queues, q+".delay."+bucket, whose
// messages expired and were dead-lettered back by the broker; such queues
// left on a broker still move what they hold back by themselves.)
const waitSuffix = ".wait."

// longestSuffix is the longest name a queue's own name is extended by:
// the wait queue of its dead-letter queue.
var longestSuffix = len(".dead") + len(waitSuffix) + len("500ms")

// bucketFor returns the shortest bucket at least as long as d, or the longest
// bucket and false when d exceeds every bucket.
func bucketFor(d time.Duration) (bucket, bool) {
	for _, b := range buckets {
		if d <= b.d {
			return b, true
		}
	}
	return buckets[len(buckets)-1], false
}

// waitQueueName returns the name of the wait queue of b for queue.
func waitQueueName(queue string, b bucket) string {
	return queue + waitSuffix + b.name
}

// waitQueueNames returns the names of every wait queue queue may have.
func waitQueueNames(queue string) []string {
	names := make([]string, len(buckets))
	for i, b := range buckets {
		names[i] = waitQueueName(queue, b)
	}
	return names
}

// target is a queue to declare and publish to.
type target struct {
	name string
	args amqp.Table
}

// mainTarget returns the declaration of a queue that consumers read: a
// durable quorum queue with no broker-side dead-lettering, so that every
// dead letter goes through DeadLetter and carries its reason. Queues that
// Options.SingleActive names also get x-single-active-consumer: the broker
// delivers to one consumer at a time and fails over to the next when it
// goes away, which gives each such queue exactly one owner.
func (q *Queue) mainTarget(name string) target {
	args := q.quorumArgs()
	if q.opts.SingleActive != nil && q.opts.SingleActive(name) {
		args["x-single-active-consumer"] = true
	}
	return target{name: name, args: args}
}

// quorumArgs returns the arguments of every queue: quorum type, and the
// initial number of replicas when Options.QuorumInitialGroupSize sets it.
func (q *Queue) quorumArgs() amqp.Table {
	args := amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
	if n := q.opts.QuorumInitialGroupSize; n > 0 {
		args[argInitialGroupSize] = int64(n)
	}
	return args
}

// argInitialGroupSize is the queue argument that sets the number of
// replicas a quorum queue starts with.
const argInitialGroupSize = "x-quorum-initial-group-size"

// waitTarget returns the declaration of the wait queue of b for queue: a
// durable quorum queue like every other, with no TTL and no dead-lettering.
// The consumers of queue move its messages back when they are due (see
// wait.go): the broker's at-least-once dead-lettering, which did this before,
// stopped moving messages for good in the cluster test when a node stayed
// down (RabbitMQ 3.10.8; rabbitmq/rabbitmq-server#16652).
func (q *Queue) waitTarget(queue string, b bucket) target {
	return target{name: waitQueueName(queue, b), args: q.quorumArgs()}
}

// waiting returns pub, to wait delay from now in the wait queue it returns:
// with its due time and its release from that queue.
func (q *Queue) waiting(queue string, pub amqp.Publishing, now time.Time, delay time.Duration) (target, amqp.Publishing) {
	return q.waitingUntil(queue, pub, now, now.Add(delay))
}

// waitingUntil returns pub, to wait from now until due in the wait queue it
// returns.
func (q *Queue) waitingUntil(queue string, pub amqp.Publishing, now, due time.Time) (target, amqp.Publishing) {
	b, _ := bucketFor(due.Sub(now))
	release := min(due.UnixMilli(), now.Add(b.d).UnixMilli())
	h := make(amqp.Table, len(pub.Headers)+2)
	maps.Copy(h, pub.Headers)
	h[HeaderDue] = due.UnixMilli()
	h[HeaderRelease] = release
	pub.Headers = h
	return q.waitTarget(queue, b), pub
}

// checkName reports whether name can be a queue with all its satellites.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty queue name")
	case !utf8.ValidString(name):
		return fmt.Errorf("queue name %q is not UTF-8", name)
	case len(name)+longestSuffix > maxNameLen:
		return fmt.Errorf("queue name %q longer than %d bytes", name, maxNameLen-longestSuffix)
	}
	return nil
}

// reserved reports whether a header name is set by this package or by the
// broker, and so cannot be published by callers and is not shown to them.
func reserved(key string) bool {
	switch key {
	case HeaderAttempt, HeaderDue, HeaderRelease, HeaderResent, "x-delivery-count", "x-death":
		return true
	}
	return strings.HasPrefix(key, "x-first-death-") || strings.HasPrefix(key, "x-last-death-")
}

// publishHeaders converts caller headers to an AMQP table.
func publishHeaders(h map[string]string) (amqp.Table, error) {
	if len(h) == 0 {
		return nil, nil
	}
	t := make(amqp.Table, len(h))
	for k, v := range h {
		switch {
		case k == "" || len(k) > 255:
			return nil, fmt.Errorf("header name %q: want 1 to 255 bytes", k)
		case !utf8.ValidString(k):
			return nil, fmt.Errorf("header name %q is not UTF-8", k)
		case reserved(k):
			return nil, fmt.Errorf("header %q is reserved", k)
		}
		t[k] = v
	}
	return t, nil
}

// userTable returns the headers of t that are not reserved.
func userTable(t amqp.Table) amqp.Table {
	u := make(amqp.Table, len(t))
	for k, v := range t {
		if !reserved(k) {
			u[k] = v
		}
	}
	return u
}

// stringHeaders converts the user headers of a delivery to strings. Values
// that other publishers set with a non-string type are formatted; nested
// tables and arrays are left out.
func stringHeaders(t amqp.Table) map[string]string {
	if len(t) == 0 {
		return nil
	}
	h := make(map[string]string, len(t))
	for k, v := range t {
		switch v := v.(type) {
		case string:
			h[k] = v
		case []byte:
			h[k] = string(v)
		case bool, int, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, amqp.Decimal:
			h[k] = fmt.Sprint(v)
		case time.Time:
			h[k] = v.UTC().Format(time.RFC3339)
		}
	}
	if len(h) == 0 {
		return nil
	}
	return h
}

// intHeader returns the integer value of header key, and whether it holds one.
func intHeader(t amqp.Table, key string) (int64, bool) {
	switch v := t[key].(type) {
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case int16:
		return int64(v), true
	case int8:
		return int64(v), true
	case int:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}
