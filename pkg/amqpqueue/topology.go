package amqpqueue

import (
	"fmt"
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
	// HeaderDue carries the time (Unix milliseconds) before which a retried
	// message must not be handed to a consumer, on retries whose delay
	// exceeds the longest delay bucket. Internal like HeaderAttempt.
	HeaderDue = "x-gridcrawl-due"
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

// bucket is one delay queue length: a retry waits in the delay queue of the
// shortest bucket at least as long as its delay.
type bucket struct {
	d    time.Duration
	name string
}

// buckets are the delay queue lengths, shortest first. Each is a quorum queue
// per source queue, created on the first retry that uses it. A retry's delay
// is rounded up to a bucket, so it never comes back early, and every message
// in one delay queue has the same TTL, so an expired message is never stuck
// behind one that expires later (TTL is only enforced at the head of a queue).
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

// delaySuffix separates a queue's name from its bucket in a delay queue name.
const delaySuffix = ".delay."

// longestSuffix is the longest name a queue's own name is extended by:
// the delay queue of its dead-letter queue.
var longestSuffix = len(".dead") + len(delaySuffix) + len("500ms")

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

// delayQueueName returns the name of the delay queue of b for queue.
func delayQueueName(queue string, b bucket) string {
	return queue + delaySuffix + b.name
}

// delayQueueNames returns the names of every delay queue queue may have.
func delayQueueNames(queue string) []string {
	names := make([]string, len(buckets))
	for i, b := range buckets {
		names[i] = delayQueueName(queue, b)
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

// delayTarget returns the declaration of the delay queue of b for queue: a
// durable quorum queue without consumers whose messages expire after b and
// are then dead-lettered by the broker into queue through the default
// exchange. The at-least-once dead-letter strategy keeps an expired message
// in the delay queue until queue has confirmed it (it requires the
// reject-publish overflow mode; no length limit is set, so it never rejects).
func (q *Queue) delayTarget(queue string, b bucket) target {
	args := q.quorumArgs()
	args[amqp.QueueMessageTTLArg] = b.d.Milliseconds()
	args["x-dead-letter-exchange"] = ""
	args["x-dead-letter-routing-key"] = queue
	args["x-dead-letter-strategy"] = "at-least-once"
	args[amqp.QueueOverflowArg] = amqp.QueueOverflowRejectPublish
	return target{name: delayQueueName(queue, b), args: args}
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
	case HeaderAttempt, HeaderDue, HeaderResent, "x-delivery-count", "x-death":
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
