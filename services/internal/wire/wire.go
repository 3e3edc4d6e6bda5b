// Package wire turns backend configuration into concrete backends. It is the
// only package besides tests that imports backend implementations.
package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/amqpqueue"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/pkg/memqueue"
	"github.com/gridcrawl/gridcrawl/pkg/minioassets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/diskspace"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"

	"github.com/gridcrawl/gridcrawl/pkg/privfile"
)

// Backends selects and configures the backends. Each real backend is chosen
// by setting its URL; what is left unset is embedded under DataDir.
type Backends struct {
	DataDir string `env:"GRIDCRAWL_DATA" envDefault:"./data"`
	// MinFreeDisk is the least free space of the data directory's file
	// system (bytes with a unit, or a percentage of its size; "0": none)
	// while embedded backends write there: below it, or after a write
	// failed for lack of space, the disk check fails (diskspace.Watch).
	MinFreeDisk      string `env:"GRIDCRAWL_MIN_FREE_DISK" envDefault:"64MiB"`
	QueueMaxAttempts int    `env:"GRIDCRAWL_QUEUE_MAX_ATTEMPTS" envDefault:"5"`
	// EmbeddedMemoryQueues keeps the crawler and index queues
	// (crawler_pending, index_pending) in memory when the queue is embedded
	// (no GRIDCRAWL_AMQP_URL): bounded (1024 and 256 contracts; a full
	// queue makes its publisher wait), dead letters still written to the
	// embedded queue file like every other queue. The transaction index
	// holds what they carried: when the grid starts, the coordinator
	// republishes the work of every to-be-parsed and to-be-indexed record
	// of a running crawl. It needs the crawler and the indexer in the
	// process that publishes to them, as in the grid binary: set it false
	// to run a single service on embedded backends, or to compare with the
	// queue file.
	EmbeddedMemoryQueues bool `env:"GRIDCRAWL_EMBEDDED_MEMORY_QUEUES" envDefault:"true"`

	// AMQPURL is the RabbitMQ URL (`amqp://user:password@host:5672/vhost`),
	// or the URLs of several nodes of one cluster separated by commas (a
	// comma inside a password is written %2C); set: the queues are on
	// RabbitMQ, reached through one of the nodes that answers (see
	// amqpqueue.Options.URL).
	AMQPURL string `env:"GRIDCRAWL_AMQP_URL"`
	// AMQPConnectionName names the process's broker connection (rabbitmqctl
	// list_connections, the management UI); "" means "gridcrawl".
	AMQPConnectionName string `env:"GRIDCRAWL_AMQP_CONNECTION_NAME"`

	// ESURL is the Elasticsearch URL (`http://[user:password@]host:9200`),
	// or the URLs of several nodes of one cluster separated by commas (a
	// comma inside a password is written %2C); set: the transaction,
	// profile, search and HCF indices are on Elasticsearch. Requests are
	// spread over the nodes, and one that cannot reach a node (or gets
	// 502, 503 or 504) is sent to another; a failed node rests for a
	// minute, doubling up to 32 minutes while it keeps failing.
	ESURL    string `env:"GRIDCRAWL_ES_URL"`
	ESPrefix string `env:"GRIDCRAWL_ES_PREFIX" envDefault:"gridcrawl"`
	// ESReplicas is the number of replicas (index.number_of_replicas) of
	// the transaction, profile, search, digest and HCF indices. Unset,
	// indices are created with 0 (the HCF index with auto_expand_replicas
	// 0-1) and existing ones keep theirs; set, it is also applied to
	// existing indices whose number differs (a dynamic setting, logged).
	// A cluster of three nodes wants 1: every shard survives the loss of
	// one node.
	ESReplicas string `env:"GRIDCRAWL_ES_REPLICAS"`
	// ESShards is the number of primary shards of the search index when
	// it is created; an existing index keeps its number (a warning names
	// it when it differs). The transaction, profile, digest and HCF
	// indices have one shard. 0 means 1.
	ESShards int `env:"GRIDCRAWL_ES_SHARDS" envDefault:"1"`
	// ESWaitForActiveShards is the wait_for_active_shards of writes: how
	// many copies of a shard (the primary and its replicas) must be active
	// before a write starts, a number from 1 to replicas + 1 or "all";
	// empty means Elasticsearch's default, 1. It is checked before the
	// write only: Elasticsearch acknowledges a write once the primary and
	// every in-sync replica have it, and a replica that fails to write is
	// taken out of the in-sync set by the master. "all" makes writes wait
	// (and time out after a minute) while a node holding a copy is down.
	ESWaitForActiveShards string `env:"GRIDCRAWL_ES_WAIT_FOR_ACTIVE_SHARDS"`

	// S3Endpoint is the MinIO/S3 endpoint (`host:port`, or an http(s)
	// URL), or several endpoints of one server (the nodes of a distributed
	// MinIO) separated by commas; set: WARC segments and reports are
	// objects in the bucket. An operation that cannot reach an endpoint,
	// or gets a server error (5xx), is tried on the next, once per
	// endpoint, and the first that answers serves the following ones.
	S3Endpoint  string `env:"GRIDCRAWL_S3_ENDPOINT"`
	S3AccessKey string `env:"GRIDCRAWL_S3_ACCESS_KEY"`
	S3SecretKey string `env:"GRIDCRAWL_S3_SECRET_KEY"`
	S3Bucket    string `env:"GRIDCRAWL_S3_BUCKET" envDefault:"gridcrawl"`
	S3Secure    bool   `env:"GRIDCRAWL_S3_SECURE"`
	S3Region    string `env:"GRIDCRAWL_S3_REGION"`
}

// Embedded reports whether every backend is embedded.
func (b *Backends) Embedded() bool { return b.AMQPURL == "" && b.ESURL == "" && b.S3Endpoint == "" }

// usesDataDir reports whether any backend is embedded.
func (b *Backends) usesDataDir() bool { return b.AMQPURL == "" || b.ESURL == "" || b.S3Endpoint == "" }

// Validate checks b.
func (b *Backends) Validate() error {
	if b.DataDir == "" {
		return errors.New("GRIDCRAWL_DATA must not be empty")
	}
	if _, err := b.diskFloor(); err != nil {
		return err
	}
	if b.QueueMaxAttempts < 1 {
		return errors.New("GRIDCRAWL_QUEUE_MAX_ATTEMPTS must be at least 1")
	}
	if b.S3Endpoint != "" && (b.S3AccessKey == "" || b.S3SecretKey == "" || b.S3Bucket == "") {
		return errors.New("GRIDCRAWL_S3_ACCESS_KEY, GRIDCRAWL_S3_SECRET_KEY and GRIDCRAWL_S3_BUCKET are required with GRIDCRAWL_S3_ENDPOINT")
	}
	for _, l := range []struct{ name, list string }{
		{"GRIDCRAWL_AMQP_URL", b.AMQPURL}, {"GRIDCRAWL_ES_URL", b.ESURL}, {"GRIDCRAWL_S3_ENDPOINT", b.S3Endpoint},
	} {
		if l.list != "" && len(esindex.SplitURLs(l.list)) == 0 {
			return fmt.Errorf("%s lists no address", l.name)
		}
	}
	replicas, err := b.esReplicas()
	if err != nil {
		return err
	}
	if b.ESShards < 0 {
		return errors.New("GRIDCRAWL_ES_SHARDS must not be negative")
	}
	if err := esindex.CheckWaitForActiveShards(b.ESWaitForActiveShards, replicas); err != nil {
		return fmt.Errorf("GRIDCRAWL_ES_WAIT_FOR_ACTIVE_SHARDS: %w", err)
	}
	return nil
}

// esReplicas returns the number of GRIDCRAWL_ES_REPLICAS, 0 when unset.
func (b *Backends) esReplicas() (int, error) {
	if b.ESReplicas == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(b.ESReplicas)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("GRIDCRAWL_ES_REPLICAS %q: want a number of 0 or more", b.ESReplicas)
	}
	return n, nil
}

// diskFloor returns the floor of GRIDCRAWL_MIN_FREE_DISK; "" means the
// default.
func (b *Backends) diskFloor() (diskspace.Floor, error) {
	s := b.MinFreeDisk
	if s == "" {
		s = diskspace.DefaultFloor
	}
	f, err := diskspace.ParseFloor(s)
	if err != nil {
		return f, fmt.Errorf("GRIDCRAWL_MIN_FREE_DISK: %w", err)
	}
	return f, nil
}

// ErrLocked is returned when another process holds the embedded data directory.
var ErrLocked = errors.New("data directory is in use by another gridcrawl process (embedded backends serve one process; use real backends for separate services)")

// Set is one opened set of backends.
type Set struct {
	Queue    queue.Queue
	Tx       txindex.Index
	Profiles profiles.Store
	Search   search.Index
	Assets   assets.Store
	// HCF is the store of the Hub Crawl Frontier API.
	HCF hcf.Store
	// Digests is the payload-digest index of deduplication across crawls.
	Digests digests.Index
	// Embedded is true when every backend lives in DataDir in this process.
	Embedded bool
	// Metrics is the registry the backends report to (see Instrument);
	// nil until Instrument.
	Metrics *metrics.Registry
	// Disk watches the data directory's free space when a backend is
	// embedded there; nil otherwise.
	Disk *diskspace.Watch
	// MemoryQueues is true when the crawler and index queues are in
	// memory (Backends.EmbeddedMemoryQueues): their messages are lost with
	// the process, and the coordinator rebuilds them at start-up.
	MemoryQueues bool

	// durableQueue is the queue file under the in-memory queues, which the
	// readiness check probes: memory is always ready, the file may not be.
	durableQueue queue.Queue
	// esReads returns the Elasticsearch client's reads; nil without
	// Elasticsearch.
	esReads func() []esindex.Read

	closers []func() error
	lock    *os.File
}

// Open opens the configured backends. Its errors never hold a credential
// (Backends.Redact).
func Open(ctx context.Context, b Backends, log *slog.Logger) (*Set, error) {
	s, err := open(ctx, b, log)
	return s, b.Redact(err)
}

func open(ctx context.Context, b Backends, log *slog.Logger) (*Set, error) {
	s := &Set{Embedded: b.Embedded()}
	if b.usesDataDir() {
		if err := privfile.MkdirAll(b.DataDir); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
		lock, err := lockDir(b.DataDir)
		if err != nil {
			return nil, err
		}
		s.lock = lock
		floor, err := b.diskFloor()
		if err != nil {
			return nil, err
		}
		s.Disk = diskspace.New(b.DataDir, floor)
	}
	fail := func(err error) (*Set, error) {
		_ = s.Close()
		return nil, err
	}
	if b.AMQPURL != "" {
		q, err := amqpqueue.Open(ctx, amqpqueue.Options{URL: b.AMQPURL, ConnectionName: b.AMQPConnectionName, MaxAttempts: b.QueueMaxAttempts, Logger: log,
			SingleActive: routing.IsShardQueue}) // each loader shard has one owner
		if err != nil {
			return fail(fmt.Errorf("open rabbitmq queue: %w", err))
		}
		s.Queue, s.closers = q, append(s.closers, q.Close)
	} else {
		q, err := sqlitequeue.Open(filepath.Join(b.DataDir, "queue.db"), sqlitequeue.Options{MaxAttempts: b.QueueMaxAttempts, Logger: log})
		if err != nil {
			return fail(fmt.Errorf("open embedded queue: %w", err))
		}
		s.Queue, s.closers = q, append(s.closers, q.Close)
		if b.EmbeddedMemoryQueues {
			mq, err := memqueue.New(memqueue.Options{Durable: q, InMemory: inMemory, Bound: memoryBound, MaxBytes: memoryMaxBytes, MaxAttempts: b.QueueMaxAttempts})
			if err != nil {
				return fail(fmt.Errorf("open in-memory queues: %w", err))
			}
			// mq owns q: closing it closes both.
			s.Queue, s.closers[len(s.closers)-1] = mq, mq.Close
			s.MemoryQueues, s.durableQueue = true, q
		}
	}
	if b.ESURL != "" {
		replicas, err := b.esReplicas()
		if err != nil {
			return fail(err)
		}
		es, err := esindex.Open(ctx, esindex.Options{URL: b.ESURL, Prefix: b.ESPrefix, Logger: log,
			Replicas: replicas, UpdateReplicas: b.ESReplicas != "", Shards: b.ESShards, WaitForActiveShards: b.ESWaitForActiveShards})
		if err != nil {
			return fail(fmt.Errorf("open elasticsearch: %w", err))
		}
		s.Tx, s.Profiles, s.Search, s.HCF, s.Digests = es.TxIndex(), es.Profiles(), es.Search(), es.HCF(), es.Digests()
		s.esReads = es.Reads
		s.closers = append(s.closers, func() error { es.Close(); return nil })
	} else {
		tx, err := sqlitestore.OpenTxIndex(filepath.Join(b.DataDir, "transactions.db"))
		if err != nil {
			return fail(fmt.Errorf("open embedded transaction index: %w", err))
		}
		s.Tx, s.closers = tx, append(s.closers, tx.Close)
		ps, err := sqlitestore.OpenProfiles(filepath.Join(b.DataDir, "profiles.db"))
		if err != nil {
			return fail(fmt.Errorf("open embedded profile store: %w", err))
		}
		s.Profiles, s.closers = ps, append(s.closers, ps.Close)
		si, err := sqlitestore.OpenSearch(filepath.Join(b.DataDir, "search.db"))
		if err != nil {
			return fail(fmt.Errorf("open embedded search index: %w", err))
		}
		s.Search, s.closers = si, append(s.closers, si.Close)
		hs, err := sqlitestore.OpenHCF(filepath.Join(b.DataDir, "hcf.db"))
		if err != nil {
			return fail(fmt.Errorf("open embedded hub crawl frontier: %w", err))
		}
		s.HCF, s.closers = hs, append(s.closers, hs.Close)
		ds, err := sqlitestore.OpenDigests(filepath.Join(b.DataDir, "digests.db"))
		if err != nil {
			return fail(fmt.Errorf("open embedded payload-digest index: %w", err))
		}
		s.Digests, s.closers = ds, append(s.closers, ds.Close)
	}
	if b.S3Endpoint != "" {
		as, err := minioassets.Open(ctx, minioassets.Options{Endpoint: b.S3Endpoint, AccessKey: b.S3AccessKey, SecretKey: b.S3SecretKey,
			Bucket: b.S3Bucket, Secure: b.S3Secure, Region: b.S3Region, Logger: log})
		if err != nil {
			return fail(fmt.Errorf("open minio assets: %w", err))
		}
		s.Assets, s.closers = as, append(s.closers, as.Close)
	} else {
		as, err := fsassets.Open(filepath.Join(b.DataDir, "assets"))
		if err != nil {
			return fail(fmt.Errorf("open embedded asset store: %w", err))
		}
		s.Assets, s.closers = as, append(s.closers, as.Close)
	}
	s.Queue = newCountingQueue(s.Queue, b.QueueMaxAttempts, nil)
	return s, nil
}

// Bounds of the in-memory queues (Backends.EmbeddedMemoryQueues): enough
// contracts to keep the crawler's and the indexer's workers busy, few
// enough that a backlog waits in the transaction index and the durable
// loader queue instead of in memory. An index contract carries a parsed
// document, so its queue is the shorter, and bounded by bytes: when
// indexing trails, the documents waiting in it were the embedded grid's
// largest share of memory (1,000 hosts x 20 pages of 20 KB: peak RSS
// 527-553 MiB at 32 MiB, 458 at 16, 424-440 at 8, CPU per page unchanged;
// docs/benchmarks.md).
const (
	crawlerQueueBound  = 1024
	indexQueueBound    = 256
	indexQueueMaxBytes = 8 << 20
)

// inMemory reports whether the queue named name is kept in memory when
// Backends.EmbeddedMemoryQueues is set: the crawler and index queues, whose
// work the coordinator can rebuild from the transaction index. The loader
// queue and its shards (parked URLs, budgets, retries), the dead-letter
// queues and every other queue stay in the durable queue.
func inMemory(name string) bool {
	return name == contracts.QueueCrawler || name == contracts.QueueIndex
}

// memoryBound returns the bound of in-memory queue name.
// memoryMaxBytes bounds the bytes of the in-memory index queue: its
// messages carry documents, whose text makes one message of a large
// crawler contract megabytes; 256 of them held gigabytes.
func memoryMaxBytes(name string) int64 {
	if name == contracts.QueueIndex {
		return indexQueueMaxBytes
	}
	return 0
}

func memoryBound(name string) int {
	if name == contracts.QueueIndex {
		return indexQueueBound
	}
	return crawlerQueueBound
}

// Close closes the backends in reverse order of opening.
func (s *Set) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	return errors.Join(errs...)
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, privfile.FileMode)
	if err != nil {
		return nil, fmt.Errorf("open data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return f, nil
}

// Checks returns the readiness checks of the set's backends (see
// metrics.BackendChecks); the search index only when withSearch, since
// only MCP uses it.
func (s *Set) Checks(withSearch bool) []metrics.Check {
	var si search.Index
	if withSearch {
		si = s.Search
	}
	q := s.Queue
	if s.durableQueue != nil {
		q = s.durableQueue
	}
	cs := metrics.BackendChecks(q, s.Tx, s.Profiles, s.Assets, si)
	if s.Disk != nil {
		cs = append(cs, s.Disk.Check())
	}
	return cs
}

// Gate returns an outage gate over the set's checks (see Checks) that
// also counts a write's failure for lack of disk space as an outage.
func (s *Set) Gate(withSearch bool, log *slog.Logger) *outage.Gate {
	g := outage.New(s.Checks(withSearch), log)
	if s.Disk != nil {
		g.Notice(s.Disk.Note)
		g.Watch(s.Disk.Check())
	}
	return g
}
