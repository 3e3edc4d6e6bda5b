// Package amqpqueue is gridcrawl's queue.Queue on RabbitMQ, through
// github.com/rabbitmq/amqp091-go.
//
// Topology. Every queue q is a durable quorum queue (x-queue-type=quorum,
// and x-quorum-initial-group-size when Options.QuorumInitialGroupSize sets
// it), declared on the first Publish or Consume. Quorum
// queues are replicated when the broker is a cluster, and they count how
// often each message was handed back unsettled (the x-delivery-count header),
// which bounds redeliveries below. Its dead-letter queue
// queue.DeadLetterQueue(q) = q+".dead" is declared the same way. Delayed
// retries, postponements and delayed publishes wait in wait queues
// q+".wait."+bucket (for the buckets 100ms, 500ms, 1s, 2s, 5s, 10s, 30s, 1m,
// 5m, 15m, 1h and 4h), quorum queues like q, declared on first use, whose
// messages carry their due time (HeaderDue) and release time
// (HeaderRelease). A delay is put into the shortest bucket at least as long
// as it. Every process that consumes q moves the messages of q's wait queues
// back into q when due (wait.go): never early, and at least once. A delay
// beyond 4h waits 4h at a time. Wait queues have no TTL and no dead-letter
// exchange: the broker's at-least-once dead-lettering, which moved delayed
// messages back before, stopped doing so for good on a RabbitMQ 3.10 cluster
// with one node down (rabbitmq/rabbitmq-server#16652).
//
// Publishing. Messages are persistent (delivery mode 2) and published with
// mandatory set on channels in confirm mode, 256 at a time before waiting
// for their confirms; Publish returns once the broker has confirmed every
// message, and a message the broker returns as unroutable is an error.
// Messages the broker nacks (a quorum queue without a leader does, see
// Clusters) are published again, on a new channel, with backoff, for up to
// 30 s before Publish gives up with an error. If the connection drops,
// Publish waits for the reconnection and publishes again the messages whose
// confirms had not arrived, until its context is done: a message may then be
// enqueued twice (at least once).
//
// Consuming. Each Consume has its own channel, with basic.qos set to its
// prefetch and manual acks. Retry publishes the message, with HeaderAttempt
// incremented, to its wait queue (or straight back to q for a delay <= 0)
// and then acks the delivery; DeadLetter publishes it to q+".dead" with
// queue.HeaderReason, queue.HeaderSourceQueue, HeaderAttempts and the
// original headers, and then acks it. Both wait for the broker's confirm
// before acking, so a failure in between leaves a duplicate rather than a
// loss.
//
// Bounded redelivery. A message that is delivered and handed back unsettled
// (its consumer stopped, its connection dropped, its process died) counts one
// more delivery in the quorum queue's x-delivery-count header. A consumer
// that receives a message whose count exceeds Options.MaxRedeliveries
// dead-letters it with ReasonRedeliveries instead of handing it out, so a
// message that kills its consumers cannot loop forever. (The broker's own
// x-delivery-limit is not used because the broker would drop the message, or
// dead-letter it through a dead-letter exchange without queue.HeaderReason;
// RabbitMQ 3.10 sets no limit unless asked, RabbitMQ 4 defaults to 20.) A
// node that dies hands back the deliveries of the consumers connected to
// it, so each such failure adds at most one to the count of the messages
// then in flight.
//
// Reconnection. One goroutine owns the connection: when it drops, it
// reconnects (see Endpoints), with exponential backoff and jitter once no
// endpoint answered. Declarations are made again
// on the new connection as queues are next used, consumers open a new
// channel and consume again, deliveries of the old channel fail to settle
// (the broker has already handed them back), and waiting publishes resume.
//
// Endpoints. Options.URL may list the AMQP URLs of several nodes of one
// cluster, separated by commas. Open connects to the first that answers.
// When the connection drops, the queue tries the endpoints in turn,
// beginning with the one after the endpoint it lost (not always the first:
// a dead first node would cost every reconnection a dial), and trying last
// those whose previous attempt failed; it waits its backoff only after a
// round in which none answered. It logs "amqp reconnected" with the
// endpoint's URL (without password) and whether it moved. Everything that
// survives a reconnection survives a move to another node: consumers
// consume again, publishes waiting for confirms publish again, queues are
// declared again (the cluster shares them). While some endpoint is
// connected, Len answers (the readiness probe of the services is a Len, so
// a backend is "down" only while no endpoint answers); while none is, Len
// and Publish wait for one until their context ends.
//
// Clusters. With RabbitMQ's quorum queues (Raft), on a cluster:
//   - Replicas: 0 for Options.QuorumInitialGroupSize leaves the count to the
//     broker: RabbitMQ 3.10's quorum_cluster_size setting, 3 by default,
//     capped by the number of cluster nodes (stopped members included), so
//     one replica on each node of a three-node cluster. The leader starts on
//     the node of the declaring connection (queue_leader_locator
//     client-local, the default).
//   - A confirmed publish was written by a majority of the queue's replicas:
//     it survives as long as a majority of them is not lost for good. An
//     unconfirmed one may be lost; Publish returns nil only once the broker
//     has confirmed every message.
//   - When the leader's node dies, the followers elect a new leader among
//     themselves (under a second when a node of scripts/cluster is killed);
//     until then the queue nacks publishes (retried as above) and delivers
//     nothing. Consumers whose channels were on the dead node's connection
//     lose them: the broker hands their unacknowledged messages back, to be
//     delivered again (at least once); consumers on other nodes go on with
//     the new leader, and may also see a message again.
//   - A queue whose majority of replicas is down accepts no publish and
//     delivers nothing until a majority is back; a network partition leaves
//     the minority side unable to write: the contents of a quorum queue do
//     not split, whatever the cluster_partition_handling mode (3.10 default:
//     ignore).
//   - A passive declaration, which Len uses, counts 0 messages for a quorum
//     queue whose leader does not answer within 250 ms (RabbitMQ 3.10's
//     rabbit_quorum_queue:stat): during an election, Len may say 0 of a
//     queue that holds messages, and does not fail.
//
// Len is the sum of the ready messages of q and of its wait queues, read by
// passive declarations (a queue that does not exist counts 0). A message
// that a mover holds until its release (due within 10 minutes) is not
// ready, and not counted, like an unsettled delivery.
package amqpqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// Defaults of Options.
const (
	DefaultMaxAttempts     = 5
	DefaultMaxRedeliveries = 10
	DefaultConnectionName  = "gridcrawl"
	DefaultReconnectMin    = 100 * time.Millisecond
	DefaultReconnectMax    = 2 * time.Second
	DefaultDialTimeout     = 10 * time.Second
	DefaultHeartbeat       = 10 * time.Second
)

// confirmWindow bounds the messages a publishing channel has sent and not
// yet seen confirmed; it is also the capacity of the channel's returns
// buffer, so the client library never blocks delivering a return.
const confirmWindow = 256

// maxIdlePublishers bounds the idle publishing channels kept open.
const maxIdlePublishers = 16

// Options configure a Queue.
type Options struct {
	// URL is the broker's AMQP URL, such as amqp://guest:guest@127.0.0.1:5672/,
	// or a comma-separated list of the URLs of the nodes of one cluster
	// (spaces around an entry are ignored; a comma in a password is written
	// %2C). The queue connects to the first node that answers and, when
	// its connection drops, to the next one that answers (see the package
	// documentation, Endpoints).
	URL string
	// MaxAttempts is the number of deliveries a message gets before Retry
	// dead-letters it with queue.ReasonMaxAttempts; 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// SingleActive names the queues declared with single active consumer
	// (one consumer receives at a time; the broker fails over to another
	// when it goes away). Nil: none.
	SingleActive func(queue string) bool
	// MaxRedeliveries bounds how often a message may be handed back
	// unsettled before it is dead-lettered with ReasonRedeliveries; 0 means
	// DefaultMaxRedeliveries, a negative value means no bound. (RabbitMQ 4
	// gives quorum queues a default x-delivery-limit of 20 and then drops
	// the message: keep this bound below the broker's.)
	MaxRedeliveries int
	// Logger receives connection events and errors the queue handles
	// itself; nil discards them.
	Logger *slog.Logger
	// ConnectionName is the connection_name client property, shown by
	// rabbitmqctl and the management UI; "" means DefaultConnectionName.
	ConnectionName string
	// ReconnectMin and ReconnectMax bound the backoff between connection
	// attempts; 0 means DefaultReconnectMin and DefaultReconnectMax.
	ReconnectMin, ReconnectMax time.Duration
	// DialTimeout bounds one TCP connection attempt; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// Heartbeat is the AMQP heartbeat interval, which detects a dead
	// connection; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	// QuorumInitialGroupSize, when above 0, declares every queue with
	// x-quorum-initial-group-size set to it: the number of replicas of a
	// new quorum queue, capped by the number of nodes in the cluster. 0
	// leaves it to the broker (RabbitMQ 3.10: its quorum_cluster_size
	// setting, 3 by default, so one replica on each node of a three-node
	// cluster). The broker checks this argument like the others when a
	// queue is declared again: every client of one broker must use the
	// same value, and changing it makes the declarations of existing queues
	// fail with PRECONDITION_FAILED.
	QuorumInitialGroupSize int

	// urls are the entries of URL, set by withDefaults.
	urls []string
}

// withDefaults returns o with its zero fields set to their defaults, or an
// error for invalid fields.
func (o Options) withDefaults() (Options, error) {
	urls, err := splitURLs(o.URL)
	if err != nil {
		return o, err
	}
	o.urls = urls
	if o.MaxAttempts < 0 {
		return o, fmt.Errorf("MaxAttempts %d: want >= 0", o.MaxAttempts)
	}
	if o.QuorumInitialGroupSize < 0 {
		return o, fmt.Errorf("QuorumInitialGroupSize %d: want >= 0", o.QuorumInitialGroupSize)
	}
	if o.ReconnectMin < 0 || o.ReconnectMax < 0 || o.DialTimeout < 0 || o.Heartbeat < 0 {
		return o, errors.New("negative duration in options")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxRedeliveries == 0 {
		o.MaxRedeliveries = DefaultMaxRedeliveries
	}
	if o.ConnectionName == "" {
		o.ConnectionName = DefaultConnectionName
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	def(&o.ReconnectMin, DefaultReconnectMin)
	def(&o.ReconnectMax, DefaultReconnectMax)
	def(&o.DialTimeout, DefaultDialTimeout)
	def(&o.Heartbeat, DefaultHeartbeat)
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = o.ReconnectMin
	}
	return o, nil
}

// splitURLs returns the entries of a comma-separated list of AMQP URLs,
// each checked.
func splitURLs(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("empty URL")
	}
	entries := strings.Split(list, ",")
	urls := make([]string, len(entries))
	for i, e := range entries {
		u := strings.TrimSpace(e)
		name := fmt.Sprintf("URL %q", redact(u))
		if len(entries) > 1 {
			name = fmt.Sprintf("URL %d of %d (%q)", i+1, len(entries), redact(u))
		}
		if u == "" {
			return nil, fmt.Errorf("URL %d of %d is empty", i+1, len(entries))
		}
		if _, err := amqp.ParseURI(u); err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		urls[i] = u
	}
	return urls, nil
}

// redact returns u without its password, for messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// redactList returns a comma-separated list of URLs without their
// passwords, for messages.
func redactList(list string) string {
	entries := strings.Split(list, ",")
	for i, e := range entries {
		entries[i] = redact(strings.TrimSpace(e))
	}
	return strings.Join(entries, ",")
}

// link is one connection to the broker.
type link struct {
	conn *amqp.Connection
	gen  uint64
	// endpoint is the index in Options.URL of the node conn goes to.
	endpoint int
	// lost is closed once the owner has seen the connection drop.
	lost chan struct{}
}

// Queue is a queue.Queue on a RabbitMQ broker. It is safe for concurrent use
// and must be closed.
type Queue struct {
	opts Options
	log  *slog.Logger
	// done is closed by Close.
	done chan struct{}
	// owner is the goroutine that keeps the connection up.
	owner sync.WaitGroup
	// consumers are the goroutines of the open consumers.
	consumers sync.WaitGroup
	// movers are the goroutines that move messages back from wait queues.
	movers sync.WaitGroup

	mu     sync.Mutex
	closed bool
	link   *link // nil while disconnected
	// linked is closed when a link is up; a new one is made when it drops.
	linked   chan struct{}
	gen      uint64
	declared map[string]bool // queues declared on the current link
	idle     []*publisher    // idle publishing channels of the current link
	cancels  map[*consumer]context.CancelFunc
	waiters  map[string]*waiter // the wait queues' movers, per queue consumed

	// aux is the Queue of the wait queues' movers, on a connection of its
	// own, opened on first use (see wait.go); auxReady is closed once
	// Open has returned aux or auxErr.
	auxOnce  sync.Once
	auxReady chan struct{}
	aux      *Queue
	auxErr   error

	// opsMu guards ops, the channel that Len reads counts on.
	opsMu sync.Mutex
	ops   *amqp.Channel

	// failed marks the endpoints whose last connection attempt failed; a
	// round of attempts tries them last. Only Open and then the owner use it.
	failed []bool
}

var _ queue.Queue = (*Queue)(nil)

// Open connects to the broker at opts.URL, to the first of its endpoints
// that answers. While none can be reached it keeps trying, with backoff,
// until ctx is done; errors that a new attempt cannot fix (a bad URL,
// credentials an endpoint refuses) fail at once.
func Open(ctx context.Context, opts Options) (*Queue, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open amqp queue: %w", err)
	}
	q := &Queue{
		opts:     opts,
		log:      opts.Logger,
		done:     make(chan struct{}),
		linked:   make(chan struct{}),
		declared: map[string]bool{},
		cancels:  map[*consumer]context.CancelFunc{},
		waiters:  map[string]*waiter{},
		auxReady: make(chan struct{}),
		failed:   make([]bool, len(opts.urls)),
	}
	backoff := opts.ReconnectMin
	for {
		conn, i, err := q.dialRound(0, true, ctx.Done(), "amqp connect failed")
		if err == nil {
			q.up(conn, i)
			q.log.Info("amqp connected", "url", redact(q.opts.urls[i]), "endpoint", i+1, "endpoints", len(q.opts.urls))
			break
		}
		if permanent(err) {
			return nil, fmt.Errorf("connect to %s: %w", q.endpoint(i), err)
		}
		if !sleep(ctx, jitter(backoff), nil) {
			return nil, fmt.Errorf("connect to %q: %w (last error: %w)", redactList(opts.URL), ctx.Err(), err)
		}
		backoff = min(2*backoff, opts.ReconnectMax)
	}
	q.owner.Add(1)
	go q.keepConnected()
	return q, nil
}

// endpoint names the endpoint of index i in messages: its URL without the
// password, and its place in the list if there are several.
func (q *Queue) endpoint(i int) string {
	if len(q.opts.urls) == 1 {
		return fmt.Sprintf("%q", redact(q.opts.urls[i]))
	}
	return fmt.Sprintf("%q (endpoint %d of %d)", redact(q.opts.urls[i]), i+1, len(q.opts.urls))
}

// dialRound tries each endpoint once, beginning with the endpoint of index
// first and going round the list, those whose last attempt failed at the
// end, so that a dead node costs a dial only when no other answers. It
// returns the first connection made and its endpoint's index, or the errors
// of every endpoint. With failFast, an error that a new attempt cannot fix
// ends the round at once, with the index of its endpoint. Each failure is
// logged with msg. A round ends early when stop or q.done is closed.
func (q *Queue) dialRound(first int, failFast bool, stop <-chan struct{}, msg string) (*amqp.Connection, int, error) {
	n := len(q.opts.urls)
	order := make([]int, 0, n)
	for _, failed := range []bool{false, true} {
		for k := range n {
			if i := (first + k) % n; q.failed[i] == failed {
				order = append(order, i)
			}
		}
	}
	var errs []error
	stopped := func() error {
		if len(errs) == 0 {
			return errStopped
		}
		return errors.Join(errs...)
	}
	for _, i := range order {
		select {
		case <-stop:
			return nil, -1, stopped()
		case <-q.done:
			return nil, -1, stopped()
		default:
		}
		conn, err := q.dial(q.opts.urls[i])
		if err == nil {
			q.failed[i] = false
			return conn, i, nil
		}
		q.failed[i] = true
		q.log.Warn(msg, "url", redact(q.opts.urls[i]), "endpoint", i+1, "endpoints", n, "err", err)
		if failFast && permanent(err) {
			return nil, i, err
		}
		if n > 1 {
			err = fmt.Errorf("%s: %w", q.endpoint(i), err)
		}
		errs = append(errs, err)
	}
	return nil, -1, errors.Join(errs...)
}

// errStopped ends a round of connection attempts stopped before its first.
var errStopped = errors.New("connection attempts stopped")

// dial opens one connection to url.
func (q *Queue) dial(url string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(q.opts.ConnectionName)
	return amqp.DialConfig(url, amqp.Config{
		Heartbeat:  q.opts.Heartbeat,
		Locale:     "en_US",
		Properties: props,
		Dial:       amqp.DefaultDial(q.opts.DialTimeout),
	})
}

// permanent reports whether a connection error will not go away by trying
// again: the broker refused the credentials or the virtual host.
func permanent(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.AccessRefused
}

// up makes conn, to the endpoint of index endpoint, the current connection.
func (q *Queue) up(conn *amqp.Connection, endpoint int) *link {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	l := &link{conn: conn, gen: q.gen, endpoint: endpoint, lost: make(chan struct{})}
	q.link = l
	q.declared = map[string]bool{}
	q.idle = nil
	close(q.linked)
	return l
}

// keepConnected watches the current connection and, when it drops,
// connects again, until Close: to the endpoints in turn, beginning with the
// one after that of the lost connection, and with backoff between rounds in
// which none answered.
func (q *Queue) keepConnected() {
	defer q.owner.Done()
	q.mu.Lock()
	l := q.link
	q.mu.Unlock()
	for {
		closes := l.conn.NotifyClose(make(chan *amqp.Error, 1))
		blocks := l.conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	watch:
		for {
			select {
			case <-q.done:
				return
			case b, ok := <-blocks:
				if ok {
					q.log.Warn("amqp connection flow control", "blocked", b.Active, "reason", b.Reason)
					continue
				}
				blocks = nil
			case err := <-closes:
				q.log.Warn("amqp connection lost", "url", redact(q.opts.urls[l.endpoint]), "err", err)
				break watch
			}
		}
		q.mu.Lock()
		q.link = nil
		q.linked = make(chan struct{})
		q.idle = nil
		q.mu.Unlock()
		close(l.lost)

		lost := l.endpoint
		backoff := q.opts.ReconnectMin
		for {
			conn, i, err := q.dialRound((lost+1)%len(q.opts.urls), false, nil, "amqp reconnect failed")
			if err == nil {
				q.mu.Lock()
				closed := q.closed
				q.mu.Unlock()
				if closed {
					_ = conn.Close()
					return
				}
				l = q.up(conn, i)
				q.log.Info("amqp reconnected", "url", redact(q.opts.urls[i]), "endpoint", i+1, "endpoints", len(q.opts.urls), "moved", i != lost)
				break
			}
			if !sleep(context.Background(), jitter(backoff), q.done) {
				return
			}
			backoff = min(2*backoff, q.opts.ReconnectMax)
		}
	}
}

// jitter returns d plus up to a quarter of d, so that clients that lost the
// same broker do not come back in lockstep.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + rand.N(d/4+1)
}

// sleep waits d; it returns false if ctx or stop ended the wait first.
func sleep(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// current returns the live connection, waiting for one while disconnected.
func (q *Queue) current(ctx context.Context) (*link, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, queue.ErrClosed
		}
		l, linked := q.link, q.linked
		q.mu.Unlock()
		wait := linked
		if l != nil {
			if !l.conn.IsClosed() {
				return l, nil
			}
			wait = l.lost
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.done:
			return nil, queue.ErrClosed
		}
	}
}

// isClosed reports whether Close was called.
func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// declare declares t on ch unless it was declared on link l already.
func (q *Queue) declare(l *link, ch *amqp.Channel, t target) error {
	q.mu.Lock()
	done := q.link == l && q.declared[t.name]
	q.mu.Unlock()
	if done {
		return nil
	}
	if _, err := ch.QueueDeclare(t.name, true, false, false, false, t.args); err != nil {
		return fmt.Errorf("declare queue %q: %w", t.name, err)
	}
	q.mu.Lock()
	if q.link == l {
		q.declared[t.name] = true
	}
	q.mu.Unlock()
	return nil
}

// forget drops name from the declared queues, so that its next use declares
// it again (after the broker returned a message as unroutable to it).
func (q *Queue) forget(name string) {
	q.mu.Lock()
	delete(q.declared, name)
	q.mu.Unlock()
}

// connectionLost reports whether err came from l having dropped (and so a
// retry on a new connection may succeed), as opposed to a channel error such
// as a refused declaration.
func connectionLost(l *link, err error) bool {
	if l.conn.IsClosed() {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, queue.ErrClosed) {
		return false
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.NotFound, amqp.AccessRefused, amqp.PreconditionFailed, amqp.ResourceLocked, amqp.NotAllowed, amqp.SyntaxError, amqp.CommandInvalid, amqp.NotImplemented:
			return false
		}
		return true
	}
	// A failed socket write: the client library is closing the connection.
	return true
}

// Len returns the ready messages of name and of its wait queues.
func (q *Queue) Len(ctx context.Context, name string) (int, error) {
	if err := checkName(name); err != nil {
		return 0, fmt.Errorf("len: %w", err)
	}
	names := append([]string{name}, waitQueueNames(name)...)
	for {
		l, err := q.current(ctx)
		if err != nil {
			return 0, fmt.Errorf("len of %q: %w", name, err)
		}
		n, err := q.count(l, names)
		if err == nil {
			return n, nil
		}
		if !connectionLost(l, err) {
			return 0, fmt.Errorf("len of %q: %w", name, err)
		}
		if !sleep(ctx, jitter(q.opts.ReconnectMin), q.done) {
			if q.isClosed() {
				return 0, fmt.Errorf("len of %q: %w", name, queue.ErrClosed)
			}
			return 0, fmt.Errorf("len of %q: %w", name, ctx.Err())
		}
	}
}

// count sums the ready messages of the named queues on l; a queue that does
// not exist counts 0.
func (q *Queue) count(l *link, names []string) (int, error) {
	total := 0
	for _, name := range names {
		n, _, err := q.inspect(l, name)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// inspect returns the ready messages of the queue name on l, and whether it
// exists, by a passive declaration.
func (q *Queue) inspect(l *link, name string) (int, bool, error) {
	q.opsMu.Lock()
	defer q.opsMu.Unlock()
	if q.ops == nil || q.ops.IsClosed() {
		ch, err := l.conn.Channel()
		if err != nil {
			return 0, false, fmt.Errorf("open channel: %w", err)
		}
		q.ops = ch
	}
	info, err := q.ops.QueueDeclarePassive(name, true, false, false, false, nil)
	var ae *amqp.Error
	switch {
	case err == nil:
		return info.Messages, true, nil
	case errors.As(err, &ae) && ae.Code == amqp.NotFound && !l.conn.IsClosed():
		// The broker closed the channel; the next inspection opens another.
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("inspect queue %q: %w", name, err)
	}
}

// exists reports whether the queue name exists, waiting for a connection
// while there is none.
func (q *Queue) exists(ctx context.Context, name string) (bool, error) {
	l, err := q.current(ctx)
	if err != nil {
		return false, err
	}
	_, ok, err := q.inspect(l, name)
	return ok, err
}

// Close stops the consumers (their unsettled deliveries go back to their
// queues), then closes the channels and the connection. Operations on a
// closed Queue fail with queue.ErrClosed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.done)
	for _, cancel := range q.cancels {
		cancel()
	}
	for _, w := range q.waiters {
		w.cancel()
	}
	q.mu.Unlock()

	q.consumers.Wait()
	q.movers.Wait()
	q.auxOnce.Do(func() { close(q.auxReady) }) // never opened: nothing to close
	if q.aux != nil {
		_ = q.aux.Close()
	}
	q.owner.Wait()

	q.mu.Lock()
	l, idle := q.link, q.idle
	q.link, q.idle = nil, nil
	q.mu.Unlock()
	for _, p := range idle {
		_ = p.ch.Close()
	}
	q.opsMu.Lock()
	if q.ops != nil {
		_ = q.ops.Close()
		q.ops = nil
	}
	q.opsMu.Unlock()
	if l != nil && !l.conn.IsClosed() {
		if err := l.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			return fmt.Errorf("close amqp connection: %w", err)
		}
	}
	return nil
}
