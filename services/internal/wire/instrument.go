package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Instrument makes the backends of s report to reg: queue contracts per
// queue and the latency of every queue, transaction index, asset store and
// search index operation (gridcrawl_backend_operation_duration_seconds).
// Call it once, before the services are built on s.
//
// The wrappers expose the capability interfaces only (and
// assets.Appender when the store has it, assets.Stater always): an optional interface asserted on
// a backend must be forwarded here too.
func (s *Set) Instrument(reg *metrics.Registry) {
	s.Metrics = reg
	if c, ok := s.Queue.(*countingQueue); ok {
		c.instrument(reg)
	}
	if s.esReads != nil {
		reads := s.esReads
		_ = reg.Register(metrics.ESReadsCollector(func() []metrics.ESRead {
			rs := reads()
			out := make([]metrics.ESRead, len(rs))
			for i, r := range rs {
				out[i] = metrics.ESRead{Index: r.Index, Kind: r.Kind, N: r.N}
			}
			return out
		}))
	}
	b := reg.Backend()
	s.Tx = newMeteredTx(s.Tx, b)
	s.Search = newMeteredSearch(s.Search, b)
	s.Assets = newMeteredAssets(s.Assets, b)
}

// meteredTx times every transaction index operation: each part of the
// index (txindex.Pipeline, Scheduling, Reads) by a wrapper of its own, so
// that a method added to a part is timed where that part is.
type meteredTx struct {
	*meteredPipeline
	*meteredScheduling
	*meteredReads
	*meteredOwners
	tx txindex.Index
}

var _ txindex.Index = (*meteredTx)(nil)

func newMeteredTx(tx txindex.Index, b *metrics.Backend) *meteredTx {
	op := func(name string) metrics.Op { return b.Op("txindex", name) }
	return &meteredTx{newMeteredPipeline(tx, op), newMeteredScheduling(tx, op), newMeteredReads(tx, op), newMeteredOwners(tx, op), tx}
}

// Close closes the index; it is not timed.
func (m *meteredTx) Close() error { return m.tx.Close() }

// timed runs f and records its duration and outcome on op.
func timed[T any](op metrics.Op, f func() (T, error)) (T, error) {
	start := time.Now()
	r, err := f()
	op.Done(start, err)
	return r, err
}

// meteredPipeline times the operations of txindex.Pipeline.
type meteredPipeline struct {
	p                                                                                   txindex.Pipeline
	create, get, getMany, peek, transition, lower, counts, peekCounts, countHost, stale metrics.Op
}

func newMeteredPipeline(p txindex.Pipeline, op func(string) metrics.Op) *meteredPipeline {
	return &meteredPipeline{p: p, create: op("create"), get: op("get"), getMany: op("get-many"), peek: op("peek"), transition: op("transition"),
		lower: op("lower-depth"), counts: op("counts"), peekCounts: op("peek-counts"), countHost: op("count-host"), stale: op("stale")}
}

func (m *meteredPipeline) Create(ctx context.Context, recs []txindex.Record) ([]bool, error) {
	return timed(m.create, func() ([]bool, error) { return m.p.Create(ctx, recs) })
}

func (m *meteredPipeline) Get(ctx context.Context, key string) (txindex.Record, error) {
	start := time.Now()
	r, err := m.p.Get(ctx, key)
	m.get.Done(start, notFoundIsNoError(err, txindex.ErrNotFound))
	return r, err
}

func (m *meteredPipeline) GetMany(ctx context.Context, keys []string) (map[string]txindex.Record, error) {
	return timed(m.getMany, func() (map[string]txindex.Record, error) { return m.p.GetMany(ctx, keys) })
}

func (m *meteredPipeline) Peek(ctx context.Context, keys []string) (map[string]txindex.Record, error) {
	return timed(m.peek, func() (map[string]txindex.Record, error) { return m.p.Peek(ctx, keys) })
}

// Known and Learn forward txindex.Revisions (not timed: they touch no
// backend); a store without revisions knows nothing and learns nothing.
func (m *meteredPipeline) Known(key string) (txindex.Record, string, bool) {
	if rv, ok := m.p.(txindex.Revisions); ok {
		return rv.Known(key)
	}
	return txindex.Record{}, "", false
}

func (m *meteredPipeline) Learn(r txindex.Record, rev string) error {
	if rv, ok := m.p.(txindex.Revisions); ok {
		return rv.Learn(r, rev)
	}
	return errNoRevisions
}

// errNoRevisions: the wrapped store does not take snapshots.
var errNoRevisions = errors.New("transaction index without revisions")

func (m *meteredPipeline) Transition(ctx context.Context, ts []txindex.Transition) ([]bool, error) {
	return timed(m.transition, func() ([]bool, error) { return m.p.Transition(ctx, ts) })
}

func (m *meteredPipeline) LowerDepth(ctx context.Context, ls []txindex.Lowering) (map[string]txindex.Lowered, error) {
	return timed(m.lower, func() (map[string]txindex.Lowered, error) { return m.p.LowerDepth(ctx, ls) })
}

func (m *meteredPipeline) PeekCounts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error) {
	return timed(m.peekCounts, func() (map[contracts.Status]int64, error) { return m.p.PeekCounts(ctx, crawlID) })
}

func (m *meteredPipeline) Counts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error) {
	return timed(m.counts, func() (map[contracts.Status]int64, error) { return m.p.Counts(ctx, crawlID) })
}

func (m *meteredPipeline) CountHost(ctx context.Context, crawlID, host string) (int64, error) {
	return timed(m.countHost, func() (int64, error) { return m.p.CountHost(ctx, crawlID, host) })
}

func (m *meteredPipeline) Stale(ctx context.Context, before time.Time, limit int, owned []string) ([]txindex.Record, error) {
	return timed(m.stale, func() ([]txindex.Record, error) { return m.p.Stale(ctx, before, limit, owned) })
}

// meteredOwners times the operations of txindex.Owners.
type meteredOwners struct {
	o                                      txindex.Owners
	claim, renew, release, leases, waiting metrics.Op
}

func newMeteredOwners(o txindex.Owners, op func(string) metrics.Op) *meteredOwners {
	return &meteredOwners{o: o, claim: op("claim"), renew: op("renew"), release: op("release"), leases: op("leases"), waiting: op("waiting")}
}

func (m *meteredOwners) Claim(ctx context.Context, shard, owner string, ttl time.Duration) (txindex.Lease, bool, error) {
	start := time.Now()
	l, ok, err := m.o.Claim(ctx, shard, owner, ttl)
	m.claim.Done(start, err)
	return l, ok, err
}

func (m *meteredOwners) Renew(ctx context.Context, l txindex.Lease, ttl time.Duration) (txindex.Lease, bool, error) {
	start := time.Now()
	got, ok, err := m.o.Renew(ctx, l, ttl)
	m.renew.Done(start, err)
	return got, ok, err
}

func (m *meteredOwners) Release(ctx context.Context, l txindex.Lease) error {
	start := time.Now()
	err := m.o.Release(ctx, l)
	m.release.Done(start, err)
	return err
}

func (m *meteredOwners) Leases(ctx context.Context) ([]txindex.Lease, error) {
	return timed(m.leases, func() ([]txindex.Lease, error) { return m.o.Leases(ctx) })
}

func (m *meteredOwners) Waiting(ctx context.Context, shard, after string, limit int) ([]txindex.Record, error) {
	return timed(m.waiting, func() ([]txindex.Record, error) { return m.o.Waiting(ctx, shard, after, limit) })
}

// meteredScheduling times the operations of txindex.Scheduling.
type meteredScheduling struct {
	s             txindex.Scheduling
	due, dueStats metrics.Op
}

func newMeteredScheduling(s txindex.Scheduling, op func(string) metrics.Op) *meteredScheduling {
	return &meteredScheduling{s: s, due: op("due"), dueStats: op("due-stats")}
}

func (m *meteredScheduling) Due(ctx context.Context, crawlID string, before time.Time, limit int) ([]txindex.Record, error) {
	return timed(m.due, func() ([]txindex.Record, error) { return m.s.Due(ctx, crawlID, before, limit) })
}

func (m *meteredScheduling) DueStats(ctx context.Context, crawlID string, before time.Time) (int64, *time.Time, error) {
	start := time.Now()
	n, next, err := m.s.DueStats(ctx, crawlID, before)
	m.dueStats.Done(start, err)
	return n, next, err
}

// meteredReads times the operations of txindex.Reads.
type meteredReads struct {
	r                                                                        txindex.Reads
	list, find, countMatching, hosts, mimeTypes, statusCodes, failureReasons metrics.Op
}

func newMeteredReads(r txindex.Reads, op func(string) metrics.Op) *meteredReads {
	return &meteredReads{r: r, list: op("list"), find: op("find"), countMatching: op("count-matching"), hosts: op("hosts-report"), mimeTypes: op("mime-types-report"),
		statusCodes: op("status-codes-report"), failureReasons: op("failure-reasons-report")}
}

func (m *meteredReads) List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]txindex.Record, error) {
	return timed(m.list, func() ([]txindex.Record, error) { return m.r.List(ctx, crawlID, status, after, limit) })
}

func (m *meteredReads) Find(ctx context.Context, crawlID string, f txindex.Filter, after string, limit int) ([]txindex.Record, error) {
	return timed(m.find, func() ([]txindex.Record, error) { return m.r.Find(ctx, crawlID, f, after, limit) })
}

func (m *meteredReads) CountMatching(ctx context.Context, crawlID string, f txindex.Filter) (int64, error) {
	return timed(m.countMatching, func() (int64, error) { return m.r.CountMatching(ctx, crawlID, f) })
}

func (m *meteredReads) HostsReport(ctx context.Context, crawlID string, limit int) ([]txindex.HostRow, error) {
	return timed(m.hosts, func() ([]txindex.HostRow, error) { return m.r.HostsReport(ctx, crawlID, limit) })
}

func (m *meteredReads) MIMETypesReport(ctx context.Context, crawlID string, limit int) ([]txindex.MIMERow, error) {
	return timed(m.mimeTypes, func() ([]txindex.MIMERow, error) { return m.r.MIMETypesReport(ctx, crawlID, limit) })
}

func (m *meteredReads) StatusCodesReport(ctx context.Context, crawlID string) ([]txindex.StatusCodeRow, error) {
	return timed(m.statusCodes, func() ([]txindex.StatusCodeRow, error) { return m.r.StatusCodesReport(ctx, crawlID) })
}

func (m *meteredReads) FailureReasonsReport(ctx context.Context, crawlID string, limit int) ([]txindex.ReasonRow, error) {
	return timed(m.failureReasons, func() ([]txindex.ReasonRow, error) { return m.r.FailureReasonsReport(ctx, crawlID, limit) })
}

// meteredSearch times every search index operation.
type meteredSearch struct {
	search.Index
	upsert, get, query, count, writes, documents metrics.Op
}

func newMeteredSearch(si search.Index, b *metrics.Backend) *meteredSearch {
	op := func(name string) metrics.Op { return b.Op("search", name) }
	return &meteredSearch{Index: si, upsert: op("upsert"), get: op("get"), query: op("search"), count: op("count"), writes: op("writes"), documents: op("documents")}
}

func (m *meteredSearch) Upsert(ctx context.Context, docs []contracts.Document) error {
	start := time.Now()
	err := m.Index.Upsert(ctx, docs)
	m.upsert.Done(start, err)
	return err
}

func (m *meteredSearch) Documents(ctx context.Context, crawlID, after string, limit int) ([]contracts.Document, error) {
	start := time.Now()
	docs, err := m.Index.Documents(ctx, crawlID, after, limit)
	m.documents.Done(start, err)
	return docs, err
}

func (m *meteredSearch) Get(ctx context.Context, id string) (contracts.Document, error) {
	start := time.Now()
	d, err := m.Index.Get(ctx, id)
	m.get.Done(start, notFoundIsNoError(err, search.ErrNotFound))
	return d, err
}

func (m *meteredSearch) Search(ctx context.Context, q search.Query) (search.Result, error) {
	start := time.Now()
	r, err := m.Index.Search(ctx, q)
	m.query.Done(start, err)
	return r, err
}

func (m *meteredSearch) Count(ctx context.Context, crawlID string) (int64, error) {
	start := time.Now()
	n, err := m.Index.Count(ctx, crawlID)
	m.count.Done(start, err)
	return n, err
}

func (m *meteredSearch) Writes(ctx context.Context, id string) (int64, error) {
	start := time.Now()
	n, err := m.Index.Writes(ctx, id)
	m.writes.Done(start, notFoundIsNoError(err, search.ErrNotFound))
	return n, err
}

// meteredAssets times every asset store operation. It is an
// assets.Stater whatever the store: over one that is not, Stat answers
// errors.ErrUnsupported.
type meteredAssets struct {
	assets.Store
	put, get, list, stat metrics.Op
}

// meteredAppender is a meteredAssets over a store that can append.
type meteredAppender struct {
	*meteredAssets
	app    assets.Appender
	append metrics.Op
}

func newMeteredAssets(st assets.Store, b *metrics.Backend) assets.Store {
	op := func(name string) metrics.Op { return b.Op("assets", name) }
	m := &meteredAssets{Store: st, put: op("put"), get: op("get"), list: op("list"), stat: op("stat")}
	if app, ok := st.(assets.Appender); ok {
		return &meteredAppender{meteredAssets: m, app: app, append: op("append")}
	}
	return m
}

func (m *meteredAssets) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	start := time.Now()
	err := m.Store.Put(ctx, key, r, size, contentType)
	m.put.Done(start, err)
	return err
}

// Get times the call up to the first byte available, not the read.
func (m *meteredAssets) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := m.Store.Get(ctx, key, offset, length)
	m.get.Done(start, notFoundIsNoError(err, assets.ErrNotFound))
	return rc, err
}

func (m *meteredAssets) List(ctx context.Context, prefix string) ([]string, error) {
	start := time.Now()
	r, err := m.Store.List(ctx, prefix)
	m.list.Done(start, err)
	return r, err
}

func (m *meteredAssets) Stat(ctx context.Context, key string) (assets.Info, error) {
	st, ok := m.Store.(assets.Stater)
	if !ok {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, errors.ErrUnsupported)
	}
	start := time.Now()
	info, err := st.Stat(ctx, key)
	m.stat.Done(start, notFoundIsNoError(err, assets.ErrNotFound))
	return info, err
}

func (m *meteredAppender) Append(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	start := time.Now()
	off, err := m.app.Append(ctx, key, r, size)
	m.append.Done(start, err)
	return off, err
}

// notFoundIsNoError keeps an expected "not found" out of the error counter.
func notFoundIsNoError(err, notFound error) error {
	if errors.Is(err, notFound) {
		return nil
	}
	return err
}
