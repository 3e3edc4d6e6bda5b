// Package txindex defines the transaction index: one record per (crawl id,
// normalized URL) holding that URL's status in the pipeline. It is the source
// of truth for dedupe, recovery and crawl termination.
//
// The index has three parts, split by who uses them, like objstore's
// BucketReader and Bucket (https://github.com/thanos-io/objstore):
//   - Pipeline: the checked, idempotent writes of the stages and the
//     recovery sweep (Create, Transition, LowerDepth) and the reads that
//     decide them (Get, GetMany, Counts, CountHost, Stale).
//   - Scheduling: the due check of continuous crawls (Due, DueStats).
//   - Reads: reads for people and whole-crawl scans (List, Find and the
//     reports).
//
// Index is all three and Close; each part's doc comment is its contract.
// The rules a record follows (Apply, Lower, NextDue, AppendHistory) are
// functions here, so that every implementation follows the same ones.
package txindex

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// ErrNotFound is returned by Get for a key that has no record.
var ErrNotFound = errors.New("record not found")

// Key returns the record key of url in crawl: a hex SHA-256 prefix of both.
func Key(crawlID, url string) string {
	h := sha256.New()
	h.Write([]byte(crawlID))
	h.Write([]byte{0})
	h.Write([]byte(url))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Record is the state of one URL of one crawl.
type Record struct {
	Key     string `json:"key"`
	CrawlID string `json:"crawl_id"`
	URL     string `json:"url"`
	Host    string `json:"host"` // host name and port (urlnorm.HostPort); the name alone in records of older versions
	Group   string `json:"chg"`
	// Shard is the loader shard that serves the record's group, as
	// ShardID names it ("03/16"), set at creation; empty in records of
	// older versions and of stores without loader shards. The owner of a
	// shard rebuilds its frontier from it (Owners.Waiting), and the
	// recovery sweep leaves the to-be-loaded records of owned shards alone.
	Shard      string           `json:"loader_shard,omitempty"`
	Depth      int              `json:"depth"`
	Hops       int              `json:"hops"`
	Referrer   string           `json:"referrer,omitempty"`
	Status     contracts.Status `json:"status"`
	StatusTime time.Time        `json:"status_time"`
	Attempts   int              `json:"attempts"`
	Error      string           `json:"error,omitempty"`
	HTTPStatus int              `json:"http_status,omitempty"`
	// MIMEType is the media type of the fetched response, lower case and
	// without parameters; empty when there was none or it is unknown.
	MIMEType string `json:"mime_type,omitempty"`
	// Bytes is the size of the fetched response body as the server sent it
	// (still content-encoded, at most the loader's limit); nil when nothing
	// was fetched or the record predates the field.
	Bytes *int64 `json:"bytes,omitempty"`
	// Render is why the loader rendered the page in a headless browser
	// ("always", "auto: scripts and 12 characters of text", ...); empty
	// when it was not rendered. Like MIMEType and Bytes it describes the
	// last fetch that got a response (see Transition.Fetched).
	Render string             `json:"render,omitempty"`
	Asset  contracts.AssetRef `json:"asset"`
	// Sitemap is what the URL is as a sitemap: SitemapProbe, SitemapFile,
	// or empty for a page. The crawler reads a sitemap's response as a
	// sitemap instead of a page.
	Sitemap string `json:"sitemap,omitempty"`
	// Lastmod is the <lastmod> of the sitemap entry that created the
	// record (nil when none did), UTC, second precision.
	Lastmod *time.Time `json:"lastmod,omitempty"`
	// Recrawl is what the last fetch of a continuous crawl's URL left for
	// the next one; nil in one-shot crawls.
	Recrawl *Recrawl `json:"recrawl,omitempty"`
	// NextDue is when a continuous crawl fetches the URL again. It is set
	// (to Recrawl.Due) only while the record is settled in a terminal
	// status, and nil otherwise: see Apply.
	NextDue   *time.Time `json:"next_due,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	// History is the record's status history, oldest first: its status at
	// creation, then one event per applied transition that changed the
	// status (lease renewals add none), bounded by MaxHistory. Get and Find
	// fill it; reads on the crawl's hot path (GetMany, Stale, List,
	// LowerDepth's result) may leave it empty.
	History []Event `json:"history,omitempty"`
}

// Recrawl is the state a continuous crawl keeps per URL between fetches.
type Recrawl struct {
	// Fetched is when the URL was last fetched, and Status the HTTP status
	// of that fetch (304 included).
	Fetched time.Time `json:"fetched"`
	Status  int       `json:"status,omitempty"`
	// IntervalMS is the time from Fetched to the next fetch, in
	// milliseconds, and Due that time (Fetched plus the interval).
	IntervalMS int64     `json:"interval_ms"`
	Due        time.Time `json:"due"`
	// ETag and LastModified are the validators of the stored response,
	// sent back as If-None-Match and If-Modified-Since (empty: none, or
	// longer than MaxValidatorLen).
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	// Digest is the WARC payload digest of the stored response; RecordID
	// and Stored are its WARC-Record-ID and WARC-Date, which revisit
	// records refer to.
	Digest   string    `json:"digest,omitempty"`
	RecordID string    `json:"record_id,omitempty"`
	Stored   time.Time `json:"stored,omitzero"`
	// Changes counts the fetches that found new content after the first;
	// Revisits those that found it unchanged (304, or the same digest).
	Changes  int `json:"changes,omitempty"`
	Revisits int `json:"revisits,omitempty"`
}

// MaxValidatorLen bounds the ETag and Last-Modified values a record keeps:
// a longer one is not kept, and the next fetch is not conditional on it.
const MaxValidatorLen = 256

// Done reports whether a record in status s is settled and may be
// scheduled again by a continuous crawl.
func Done(s contracts.Status) bool { return s.Terminal() }

// Kinds of sitemap records (Record.Sitemap).
const (
	// SitemapProbe is a start host's /sitemap.xml, tried whether it exists
	// or not: a 4xx answer settles it as contracts.Sitemap, not failed.
	SitemapProbe = "probe"
	// SitemapFile is a sitemap named by robots.txt or by a sitemap index.
	SitemapFile = "sitemap"
)

// Event is one status change of a record.
type Event struct {
	Status contracts.Status `json:"status"`
	Time   time.Time        `json:"time"`
}

// MaxHistory bounds a record's History: the creation event and the latest
// MaxHistory-1 changes are kept.
const MaxHistory = 16

// AppendHistory returns h with e appended at millisecond precision, keeping
// the first event and the latest MaxHistory-1. It is the rule every
// implementation follows.
func AppendHistory(h []Event, e Event) []Event {
	e.Time = e.Time.UTC().Truncate(time.Millisecond)
	h = append(h, e)
	if len(h) > MaxHistory {
		h = append(h[:1], h[len(h)-MaxHistory+1:]...)
	}
	return h
}

// StartHistory returns the history of a record being created: the one
// given, or its status at its status time.
func StartHistory(r Record) []Event {
	if len(r.History) > 0 {
		return r.History
	}
	t := r.StatusTime
	if t.IsZero() {
		t = r.CreatedAt
	}
	return AppendHistory(nil, Event{Status: r.Status, Time: t})
}

// Transition moves one record from one status to another and sets the
// outcome fields that are non-zero.
type Transition struct {
	Key        string
	From, To   contracts.Status
	Error      string
	HTTPStatus int
	Asset      *contracts.AssetRef
	// MIMEType and Bytes describe the fetched response; empty and nil leave
	// the record's values alone.
	MIMEType string
	Bytes    *int64
	// Render is why the loader rendered the page in a headless browser,
	// empty when it fetched it over plain HTTP. Unlike the other outcome
	// fields, an empty Render is applied too when the transition carries a
	// fetch (Fetched): a page fetched again without a browser must not keep
	// the reason of an earlier rendering. A transition without a fetch (the
	// crawler's, the indexer's, a retry without a response) leaves it alone.
	Render string
	// AddAttempt increments the record's attempt count.
	AddAttempt bool
	// IfDepth, when not nil, is a second condition: the record's depth must
	// be *IfDepth. The crawler's outcome of a page parsed at a depth that
	// has since been lowered does not apply: the page is parsed again.
	IfDepth *int
	// Recrawl, when not nil, replaces the record's recrawl state (the
	// loader's, after a fetch of a continuous crawl).
	Recrawl *Recrawl
	// ResetAttempts sets the attempt count to 0 (a recrawl starts afresh);
	// ClearError empties the record's error (a fetch that succeeded).
	ResetAttempts bool
	ClearError    bool
}

// Fetched reports whether t records a fetch that got a response: its
// Bytes is set (the loader sets it whenever a response arrived) or its
// Render is. Such a transition sets the record's Render, empty included.
func (t Transition) Fetched() bool { return t.Bytes != nil || t.Render != "" }

// Apply changes r by t at time now. It is the rule every implementation of
// Transition follows: the status and status time, the non-zero outcome
// fields, and NextDue, which is Recrawl.Due while the record is in a
// terminal status and nil in any other. Render is set, empty included, by
// a transition that Fetched, and kept by any other.
func Apply(r *Record, t Transition, now time.Time) {
	if r.Status != t.To {
		r.History = AppendHistory(r.History, Event{Status: t.To, Time: now})
	}
	r.Status = t.To
	r.StatusTime = now
	switch {
	case t.Error != "":
		r.Error = t.Error
	case t.ClearError:
		r.Error = ""
	}
	if t.HTTPStatus != 0 {
		r.HTTPStatus = t.HTTPStatus
	}
	if t.Asset != nil {
		r.Asset = *t.Asset
	}
	if t.MIMEType != "" {
		r.MIMEType = t.MIMEType
	}
	if t.Bytes != nil {
		b := *t.Bytes
		r.Bytes = &b
	}
	if t.Fetched() {
		r.Render = t.Render
	}
	if t.ResetAttempts {
		r.Attempts = 0
	}
	if t.AddAttempt {
		r.Attempts++
	}
	if t.Recrawl != nil {
		rc := *t.Recrawl
		r.Recrawl = &rc
	}
	r.NextDue = NextDue(*r)
}

// NextDue returns when r is due again: its Recrawl.Due while it is in a
// terminal status, nil otherwise (in the pipeline, or never fetched by a
// continuous crawl).
func NextDue(r Record) *time.Time {
	if !Done(r.Status) || r.Recrawl == nil || r.Recrawl.Due.IsZero() {
		return nil
	}
	d := r.Recrawl.Due.UTC().Truncate(time.Millisecond)
	return &d
}

// Lowering lowers the depth of one record whose URL was found again on a
// shorter path from the start URLs.
type Lowering struct {
	Key   string
	Depth int
	// Hops counts the redirects at the end of the shorter path.
	Hops int
}

// Lowered is a record whose depth LowerDepth lowered, as it is now.
type Lowered struct {
	Record
	// From is the record's status before: a record in another status now
	// was sent back to to-be-parsed.
	From contracts.Status
}

// Reparse reports whether a record whose depth is lowered goes back to
// to-be-parsed: the crawler has already extracted its links, at a greater
// depth, and must extract them again at the new one. Those are the records
// it parsed (to-be-indexed, indexed, redirected) and the pages it parsed but
// did not index (failed with contracts.ReasonExcluded, whose links were
// followed). A to-be-parsed record stays as it is; the caller must make sure
// it is parsed (again) at its new depth.
func Reparse(r Record) bool {
	switch r.Status {
	case contracts.ToBeIndexed, contracts.Indexed, contracts.Redirected:
		return true
	case contracts.Failed:
		return r.Error == contracts.ReasonExcluded
	}
	return false
}

// Lower applies l to r when it lowers r's depth, and reports whether it did.
// A record that Reparse selects moves to to-be-parsed at now. It is the
// rule every implementation of LowerDepth follows.
func Lower(r *Record, l Lowering, now time.Time) bool {
	if l.Depth >= r.Depth {
		return false
	}
	if Reparse(*r) {
		r.Status, r.StatusTime = contracts.ToBeParsed, now
		r.History = AppendHistory(r.History, Event{Status: r.Status, Time: now})
		r.NextDue = nil
	}
	r.Depth, r.Hops = l.Depth, l.Hops
	return true
}

// Index is the transaction index: the three parts of it, each for one kind
// of caller, over one store. Wiring opens an Index; a caller takes the part
// it needs.
type Index interface {
	Pipeline
	Scheduling
	Reads
	Owners
	// Close releases resources.
	Close() error
}

// Pipeline is what the pipeline stages (loader, crawler, indexer) and the
// recovery sweep need of the transaction index: writes, and the reads that
// decide those writes.
//
// Writes are checked and idempotent, so that a redelivered contract or a
// retried call is safe:
//   - Create is create-if-absent, per record and atomically: of any number
//     of concurrent Creates of one key (in one batch or in several calls,
//     processes or replicas), exactly one reports created. An existing
//     record is never overwritten.
//   - Transition applies only when the record is in the transition's From
//     status (and at its IfDepth, when set). A transition from another
//     status, or of an absent record, is a no-op reported as not applied,
//     never an error. Of concurrent transitions that move one record out
//     of one status, at most one applies.
//   - LowerDepth applies only when the record's depth is greater than the
//     new one, so depths only ever decrease; lowering again is a no-op.
//
// Each record is written atomically; a batch is not: a call that fails may
// have applied any part of its batch. Calling it again is safe (the
// records it did write report not created, not applied), and a record left
// pending is found again by Stale.
//
// Reads are consistent with writes: whatever any caller, in any process,
// was told is done is durable and visible to every read that begins after,
// Counts, CountHost and Stale included.
type Pipeline interface {
	// Create writes each record whose key is absent and reports, per record,
	// whether it was created. Key, Status and times must be set by the
	// caller. Of two records of one batch with the same key, the first is
	// created.
	Create(ctx context.Context, recs []Record) (created []bool, err error)
	// Get returns the record with key, History filled, or ErrNotFound. The
	// loader reads a record before fetching its URL, and the operator's
	// view of one URL reads it with its history.
	Get(ctx context.Context, key string) (Record, error)
	// GetMany returns the records that exist among keys, keyed by key; it
	// may leave History empty.
	GetMany(ctx context.Context, keys []string) (map[string]Record, error)
	// Peek returns the records among keys as a read that may lag the
	// writes shows them: a record written a moment ago may be absent or
	// an older version. It fills Key, CrawlID, URL, Host, Group, Depth,
	// Hops, Referrer and Status, and may leave the other fields empty.
	// It is for reads whose
	// stale answer a checked write settles (the enqueuer's shortest-path
	// depth: a stale record can only show a greater depth, and LowerDepth
	// checks) and that a caller completes with GetMany for the keys Peek
	// did not find. A store whose every read is current may answer as
	// GetMany; Elasticsearch answers from its refreshed view, which costs no
	// refresh where a realtime read of a fresh record does.
	Peek(ctx context.Context, keys []string) (map[string]Record, error)
	// Transition applies each transition whose record is in its From status
	// (and at its IfDepth, when set), by Apply, in order, and reports, per
	// transition, whether it applied. StatusTime is set to now for applied
	// transitions (also when From == To, which renews a lease and adds no
	// History event).
	Transition(ctx context.Context, ts []Transition) (applied []bool, err error)
	// LowerDepth applies, each atomically, the lowerings whose record exists
	// with a greater depth (see Lower: depth and hops are set, and a record
	// already parsed goes back to to-be-parsed with status time now). Of
	// several lowerings of one key the smallest depth applies. It returns
	// the records it changed, keyed by key.
	LowerDepth(ctx context.Context, ls []Lowering) (map[string]Lowered, error)
	// Counts returns the number of records of crawlID per status: a crawl
	// is finished when none is pending.
	Counts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error)
	// PeekCounts is Counts as the lagging view of Peek shows the records.
	// It is for a check that runs often and only acts on a crawl out of
	// work, which it then confirms with Counts: a store whose reads are
	// current may answer as Counts; Elasticsearch answers without the
	// refresh that Counts makes.
	PeekCounts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error)
	// CountHost returns the number of records of crawlID whose host is host
	// (the crawler's per-host page limit).
	CountHost(ctx context.Context, crawlID, host string) (int64, error)
	// Stale returns up to limit records in a pending status (to-be-loaded,
	// to-be-parsed, to-be-indexed; not retired) whose status time is before
	// before, oldest first, of every crawl: the work the recovery sweep
	// publishes again. It leaves out the to-be-loaded records whose Shard
	// is among owned: the shards whose live owners keep those URLs in their
	// frontiers (Owners).
	Stale(ctx context.Context, before time.Time, limit int, owned []string) ([]Record, error)
}

// Revisions is implemented by stores whose checked writes are conditioned
// on the revision of the record they change (Elasticsearch's sequence
// number and primary term): such a store reads a record it does not know
// before it transitions it, and that read is what costs. A stage that
// transitions a record hands the record as written, with its revision, to
// the next stage in its contract (contracts.Snapshot), which teaches it to
// its own store before its transition: the write is then conditioned on a
// revision the writer was given, not one it read. A snapshot is only ever
// a guess: if the record changed since, the conditional write fails and
// the store reads the record and checks again, so a stale or duplicate
// snapshot costs a read, never a wrong write.
type Revisions interface {
	// Known returns the record of key as this process last read or wrote
	// it, and that version's revision; ok is false when it knows none.
	Known(key string) (r Record, rev string, ok bool)
	// Learn tells the store a version of r that another process wrote, at
	// revision rev. An older version than the one the store knows is
	// ignored; a malformed rev is an error.
	Learn(r Record, rev string) error
}

// Scheduling is what the due check of continuous crawls needs: the settled
// records whose next fetch has come (NextDue, which Apply keeps).
//
// Its reads are consistent with Pipeline's writes (whatever was reported
// done is visible), and they read an index on the due time: their cost
// follows the due records, not the crawl's size. They claim nothing: two
// callers are given the same records, and each takes them back into the
// pipeline with a Transition from their status, which at most one wins.
type Scheduling interface {
	// Due returns up to limit records of crawlID whose NextDue is at or
	// before before, earliest first.
	Due(ctx context.Context, crawlID string, before time.Time, limit int) ([]Record, error)
	// DueStats returns the number of records of crawlID due at before
	// (NextDue at or before it) and the earliest NextDue of the crawl, nil
	// when none is scheduled.
	DueStats(ctx context.Context, crawlID string, before time.Time) (due int64, next *time.Time, err error)
}

// Reads are the reads for people and for whole-crawl scans: listings in key
// order (a crawl's archive, or every record of a crawl in one status when
// the crawl is cancelled), the crawl log's filtered pages, and the reports.
// No pipeline stage waits on them; they may cost more than Pipeline's reads
// (Find fills History), and the reports are computed by the index
// (aggregations, GROUP BY), not by reading the records.
//
// Each call sees every write reported done before it began. A call is not
// a snapshot: writes made while it runs may or may not show, and so may
// those between the pages of a listing, except as Find promises.
type Reads interface {
	// List returns up to limit records of crawlID after the key after, in
	// key order; status filters when not empty. It may leave History empty.
	// CountMatching returns the number of records of crawlID that match
	// every non-empty field of f, as Find selects them: the crawl's status
	// counts the pages excluded on purpose (failed with
	// contracts.ReasonExcluded) apart with it.
	CountMatching(ctx context.Context, crawlID string, f Filter) (int64, error)
	List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]Record, error)
	// Find returns up to limit records of crawlID after the key after, in
	// key order, that match every non-empty field of f. A listing that
	// follows the last key of each page as the next after is stable: it
	// returns each record that existed when it began, and matched f all
	// along, exactly once, whatever is written meanwhile. It fills History.
	Find(ctx context.Context, crawlID string, f Filter, after string, limit int) ([]Record, error)
	// HostsReport returns, per host of crawlID, its records and what was
	// fetched of them: the limit hosts with the most records, by records
	// descending, then host.
	HostsReport(ctx context.Context, crawlID string, limit int) ([]HostRow, error)
	// MIMETypesReport returns, per media type of the responses of crawlID
	// (records with an HTTP status), their number and body bytes: the limit
	// types with the most records, by count descending, then type.
	MIMETypesReport(ctx context.Context, crawlID string, limit int) ([]MIMERow, error)
	// StatusCodesReport returns the number of records of crawlID per HTTP
	// status, by code; code 0 counts the records settled (in a terminal
	// status) without one. Records not fetched yet (pending, retired) count
	// nowhere: they are no "no response".
	StatusCodesReport(ctx context.Context, crawlID string) ([]StatusCodeRow, error)
	// FailureReasonsReport returns, per reason (Error) of the failed records
	// of crawlID, their number and up to MaxSamples of their URLs (the
	// first by key): the limit reasons with the most records, by count
	// descending, then reason.
	FailureReasonsReport(ctx context.Context, crawlID string, limit int) ([]ReasonRow, error)
}

// ShardID names loader shard i of n in Record.Shard and Lease.Shard: the
// number, two digits at least, and the count ("03/16"), so that a record
// written under another shard count names no shard of this one.
func ShardID(i, n int) string { return fmt.Sprintf("%02d/%d", i, max(n, 1)) }

// Owners is what the loaders' durable frontier needs of the transaction
// index (docs/architecture.md, the durable frontier): a lease per loader
// shard that makes one loader its owner, and the read that a shard's new
// owner rebuilds the shard's frontier from.
//
// A lease's times are the callers' clocks: a claim takes a shard whose
// Expires has passed by the claimant's clock. Owners renew well within
// the lease's time to live and stop taking work of a shard whose lease they
// could not renew in time, so that clocks apart by less than the margin
// never give a shard two working owners.
type Owners interface {
	// Claim makes owner the owner of shard until now+ttl when the shard is
	// free (never claimed, released, or its lease expired) or already
	// owner's, and reports whether it did. Epoch grows by one whenever the
	// shard changes owner; a claim by the owner it had keeps it (a loader
	// restarted on its own frontier store keeps the store). Of concurrent
	// claims of a free shard, exactly one succeeds.
	Claim(ctx context.Context, shard, owner string, ttl time.Duration) (Lease, bool, error)
	// Renew extends lease l until now+ttl if the shard is still l.Owner's
	// at l.Epoch, and reports whether it was; when not (expired and taken
	// over, or released) the shard is no longer l.Owner's.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, bool, error)
	// Release frees l's shard at once if it is still l.Owner's at l.Epoch,
	// keeping its owner and epoch: the next claim of another owner takes
	// the next epoch, a claim of the same owner keeps this one.
	Release(ctx context.Context, l Lease) error
	// Leases returns the lease of every shard ever claimed, live or not,
	// by shard.
	Leases(ctx context.Context) ([]Lease, error)
	// Waiting returns up to limit to-be-loaded records whose Shard is
	// shard and whose key is after after, in key order, of every crawl: the
	// URLs a shard's new owner files. A listing that follows the last key
	// of each page returns each record that was to-be-loaded all along
	// exactly once. It may leave History empty.
	Waiting(ctx context.Context, shard, after string, limit int) ([]Record, error)
}

// Lease is the ownership of one loader shard (see Owners).
type Lease struct {
	Shard   string    `json:"shard"`
	Owner   string    `json:"owner"`
	Epoch   int64     `json:"epoch"`
	Expires time.Time `json:"expires"`
	// Released is true once the owner gave the shard up (Release).
	Released bool `json:"released,omitempty"`
}

// Live reports whether l makes its owner the shard's owner at now.
func (l Lease) Live(now time.Time) bool { return !l.Released && now.Before(l.Expires) }

// Filter selects records in Find. Empty fields select every record.
type Filter struct {
	Status contracts.Status
	// Reason is the record's Error, exactly.
	Reason string
	Host   string
}

// MaxSamples is the number of sample URLs of a ReasonRow.
const MaxSamples = 3

// HostRow is one row of the hosts report.
type HostRow struct {
	Host string
	// URLs counts the records, Fetched those with an HTTP status (a
	// response arrived), Failed those in status failed but the ones a
	// cancel left unfetched (contracts.ReasonCancelled): no failure of the
	// host.
	URLs, Fetched, Failed int64
	// Bytes sums the body bytes of the records that know theirs.
	Bytes int64
	// StatusCodes counts the records per HTTP status, 0 excluded.
	StatusCodes map[int]int64
}

// MIMERow is one row of the MIME types report; MIMEType is empty for
// responses without a known type.
type MIMERow struct {
	MIMEType     string
	Count, Bytes int64
}

// StatusCodeRow is one row of the status codes report.
type StatusCodeRow struct {
	// StatusCode is 0 for records without an HTTP status.
	StatusCode int
	Count      int64
}

// ReasonRow is one row of the failure reasons report.
type ReasonRow struct {
	Reason     string
	Count      int64
	SampleURLs []string
}

// Snapshot returns the record of key as store (a caller's transaction
// index, or the part of it the caller holds) last wrote or read it, to
// carry in a contract to the next stage (see Revisions); nil when the
// store has no revisions or does not know the record. It carries the whole
// record, History included: the next stage's write replaces the record
// with the snapshot as its transition changes it.
func Snapshot(store any, key string) *contracts.Snapshot {
	rv, ok := store.(Revisions)
	if !ok {
		return nil
	}
	r, rev, ok := rv.Known(key)
	if !ok {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	return &contracts.Snapshot{Rev: rev, Record: b}
}

// Learn teaches store (as in Snapshot) the record a contract carries (see
// Revisions) and returns it; ok is false when s is nil, the store has no
// revisions, or s is malformed (the caller then reads the record). key is
// the record the contract is about: a snapshot of another record is not
// used ("": any record, which the caller checks).
func Learn(store any, key string, s *contracts.Snapshot) (r Record, ok bool) {
	rv, has := store.(Revisions)
	if s == nil || !has {
		return Record{}, false
	}
	if err := json.Unmarshal(s.Record, &r); err != nil || key != "" && r.Key != key || r.Key == "" || !r.Status.Valid() {
		return Record{}, false
	}
	if err := rv.Learn(r, s.Rev); err != nil {
		return Record{}, false
	}
	return r, true
}
