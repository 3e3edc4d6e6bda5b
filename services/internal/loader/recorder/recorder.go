// Package recorder is the loader's recorder and publisher: it writes the
// exchanges of fetched pages (and of robots.txt and rendered pages'
// requests) as WARC records into segment objects of the asset store, with
// their CDXJ index; deduplicates payloads across crawls (profile dedupe);
// applies each outcome's transition in the transaction index, one batch
// per flush; and publishes the crawler contracts of each recorded batch
// before it ends the batch's tasks through Deps.Settle, so that an acked
// loader contract always has its crawler contracts.
package recorder

import (
	"context"
	"log/slog"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

// Config is what the recorder takes of the loader's configuration (the
// loader's Config documents each setting).
type Config struct {
	// Loader is the loader's ID, and Run names its process, in WARC
	// segment keys and metadata.
	Loader, Run     string
	Gzip            bool
	SegmentBytes    int64
	SegmentAge      time.Duration
	FlushInterval   time.Duration
	RecordBytes     int64
	RecoveryLease   time.Duration
	DedupMaxEntries int64
	DedupCheckTTL   time.Duration
	// Shards is the number of loader queue shards, for the logs.
	Shards int
}

// Handoff receives stored responses for a crawler in the same process.
// Put must not modify response, and may keep it: the loader does not touch
// it afterwards. WaitRoom waits until the handoff can keep size more bytes
// (or keeping them is not worth waiting for: nobody takes them), or ctx is
// done; the loader calls it before it hands over a batch's responses, so a
// crawler that falls behind makes its loader wait (crawler.Handoff).
type Handoff interface {
	Put(ref contracts.AssetRef, ip string, response []byte)
	WaitRoom(ctx context.Context, size int64) error
}

// Deps are the recorder's backends, and the end of a recorded task.
type Deps struct {
	Queue  crawlerQueue
	Assets assets.Store
	Tx     Index
	// Digests is the payload-digest index of deduplication across crawls;
	// nil: every response is stored in full.
	Digests digests.Index
	// Handoff, when not nil, takes the responses of the pages moved to
	// to-be-parsed, once recorded and before their crawler contracts go.
	Handoff Handoff
	Gate    *outage.Gate
	Logger  *slog.Logger
	Metrics *metrics.Loader
	// Settle ends a task whose outcome is recorded (err nil) or could not
	// be (err).
	Settle func(ctx context.Context, t *queueing.Task, err error)
}

// New returns a recorder and its publisher.
func New(cfg Config, deps Deps) *Recorder {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pub := newPublisher(deps.Queue, deps.Handoff, deps.Gate, log, deps.Settle)
	pub.snapshot = func(key string) *contracts.Snapshot { return txindex.Snapshot(deps.Tx, key) }
	return newRecorder(recorderDeps{
		segments: newSegmentWriter(deps.Assets, segmentConfig{
			loader: cfg.Loader, run: cfg.Run, gzip: cfg.Gzip, bytes: cfg.SegmentBytes, age: cfg.SegmentAge,
		}, deps.Metrics, log),
		index:         deps.Tx,
		dedup:         newDedup(deps.Digests, deps.Assets, cfg.DedupMaxEntries, cfg.DedupCheckTTL, deps.Metrics, log),
		metrics:       deps.Metrics,
		publisher:     pub,
		gate:          deps.Gate,
		log:           log,
		settle:        deps.Settle,
		keepResponses: deps.Handoff != nil,
		flushInterval: cfg.FlushInterval,
		maxHeld:       cfg.RecordBytes,
		lease:         cfg.RecoveryLease,
		shards:        cfg.Shards,
	})
}

// Publish publishes and settles the recorded batches, in order, until
// StopPublishing (see publisher).
func (r *Recorder) Publish(ctx context.Context) { r.publisher.run(ctx) }

// StopPublishing returns once every batch recorded before it is published
// and settled (or the context of Publish has ended).
func (r *Recorder) StopPublishing() { r.publisher.close() }

// DedupReport is the dedupe part of the frontier report; nil without a
// digest index.
func (r *Recorder) DedupReport() *contracts.FrontierDedup { return r.dedup.report() }
