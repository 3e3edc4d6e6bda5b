// Package hcf defines the Hub Crawl Frontier (HCF): persistent, shared
// storage for crawl schedulers, organised in projects, frontiers and slots
// (https://doc.scrapinghub.com/hcf.html). Each slot holds a set of fingerprints and a priority queue of
// requests cut into batches of at most 100.
//
// Contract, for every Store implementation:
//   - Add enqueues a request only if its fingerprint was never added to the
//     slot before, even if the batch that held it was deleted since; a
//     fingerprint repeated inside one call counts once (its first occurrence
//     wins). The returned count is the number of requests enqueued.
//   - Batches are formed when requests are added, never later: the requests
//     of one Add with the same priority fill batches of that priority in the
//     order of the call, up to MaxBatch each. A batch never changes after
//     the Add that made it returns, so reading the queue twice without
//     deleting gives the same batches with the same ids, also after a
//     restart.
//   - Batch ids are BatchID strings: priority, then creation time, then a
//     sequence number, so sorting ids gives the read order (lowest priority
//     first, earlier before later).
//   - Everything a call reports as done is durable and visible to every
//     following call, on any Store of the same storage.
//   - Cancelling the context of a write may leave it done or not done, never
//     half done (see each implementation for the limits of that promise).
//   - Invalid arguments (see Slot.Validate and Request.Validate) fail with an
//     error wrapping ErrInvalid before anything is written.
package hcf

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits of the frontier.
const (
	// MaxBatch is the most requests one batch holds.
	MaxBatch = 100
	// MaxPriority is the largest priority: it is one byte of a batch id.
	MaxPriority = 255
	// MaxFPBytes bounds the length of a fingerprint, so that every store can
	// index and sort it (Lucene refuses terms over 32766 bytes).
	MaxFPBytes = 8191
	// MaxNameBytes bounds project, frontier and slot names.
	MaxNameBytes = 512
)

// ErrInvalid is wrapped by the errors of invalid arguments.
var ErrInvalid = errors.New("invalid argument")

// Slot names one slot of one frontier of one project.
type Slot struct {
	Project, Frontier, Name string
}

// String returns the slot as project/frontier/name.
func (s Slot) String() string { return s.Project + "/" + s.Frontier + "/" + s.Name }

// Validate checks that every name is valid UTF-8, non-empty and at most
// MaxNameBytes long.
func (s Slot) Validate() error {
	for _, n := range []struct{ what, v string }{{"project", s.Project}, {"frontier", s.Frontier}, {"slot", s.Name}} {
		if err := ValidateName(n.what, n.v); err != nil {
			return err
		}
	}
	return nil
}

// ValidateName checks one project, frontier or slot name; what names it in
// the error.
func ValidateName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalid, what)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: %s name is longer than %d bytes", ErrInvalid, what, MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s name is not valid UTF-8", ErrInvalid, what)
	}
	return nil
}

// Request is one request to enqueue.
type Request struct {
	// FP is the fingerprint: any non-empty UTF-8 string of at most
	// MaxFPBytes.
	FP string
	// QData is JSON kept with the request in the queue, byte for byte; nil
	// (or JSON null) for none.
	QData json.RawMessage
	// FData is JSON kept with the fingerprint in the fingerprint set, byte
	// for byte; nil (or JSON null) for none.
	FData json.RawMessage
	// P is the priority, 0 to MaxPriority; lower is read first.
	P int
}

// Validate checks r.
func (r Request) Validate() error {
	switch {
	case r.FP == "":
		return fmt.Errorf("%w: fp is empty", ErrInvalid)
	case len(r.FP) > MaxFPBytes:
		return fmt.Errorf("%w: fp is longer than %d bytes", ErrInvalid, MaxFPBytes)
	case !utf8.ValidString(r.FP):
		return fmt.Errorf("%w: fp is not valid UTF-8", ErrInvalid)
	case r.P < 0 || r.P > MaxPriority:
		return fmt.Errorf("%w: p %d is not between 0 and %d", ErrInvalid, r.P, MaxPriority)
	case r.QData != nil && !json.Valid(r.QData):
		return fmt.Errorf("%w: qdata is not valid JSON", ErrInvalid)
	case r.FData != nil && !json.Valid(r.FData):
		return fmt.Errorf("%w: fdata is not valid JSON", ErrInvalid)
	}
	return nil
}

// Data returns raw, or nil when raw is empty or JSON null: the form stores
// keep.
func Data(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// Queued is one request of a batch.
type Queued struct {
	FP    string
	QData json.RawMessage // nil for none
}

// Batch is a group of up to MaxBatch queued requests.
type Batch struct {
	ID       string
	Requests []Queued
}

// Fingerprint is one member of a slot's fingerprint set.
type Fingerprint struct {
	FP    string
	FData json.RawMessage // nil for none
}

// Store is a Hub Crawl Frontier. It is safe for concurrent use; see the
// package documentation for its contract.
type Store interface {
	// Add enqueues the requests whose fingerprints the slot has not seen,
	// adds them to its fingerprint set, and returns how many it enqueued. It
	// is all or nothing: an error means none was added.
	Add(ctx context.Context, slot Slot, reqs []Request) (newCount int, err error)
	// Batches calls fn with the slot's batches in id order, until they hold
	// mincount requests at least (so at most mincount+MaxBatch-1), or with
	// all of them when mincount <= 0. Reading deletes nothing. An error of fn
	// stops the reading and is returned.
	Batches(ctx context.Context, slot Slot, mincount int, fn func(Batch) error) error
	// DeleteBatches deletes the batches with the given ids from the slot's
	// queue. Unknown ids, also ids that are not BatchIDs, are ignored; the
	// fingerprints stay in the set.
	DeleteBatches(ctx context.Context, slot Slot, ids []string) error
	// Fingerprints calls fn with the slot's fingerprint set in byte order of
	// the fingerprints. An error of fn stops the reading and is returned.
	Fingerprints(ctx context.Context, slot Slot, fn func(Fingerprint) error) error
	// DeleteSlot deletes the slot's queue and fingerprint set. Deleting an
	// absent slot is not an error.
	DeleteSlot(ctx context.Context, slot Slot) error
	// Frontiers returns the names of the project's frontiers that have at
	// least one slot, sorted.
	Frontiers(ctx context.Context, project string) ([]string, error)
	// Slots returns the names of the frontier's slots, sorted. A slot exists
	// from the first Add that enqueues into it until DeleteSlot.
	Slots(ctx context.Context, project, frontier string) ([]string, error)
	// Close releases the store's resources.
	Close() error
}

// BatchIDLen is the length of a batch id: 9 bytes in lower-case hex.
const BatchIDLen = 18

// maxMillis is the largest time a batch id holds: 6 bytes of milliseconds.
const maxMillis = 1<<48 - 1

// FormatBatchID returns the id of a batch of priority p made at unix
// millisecond ms with sequence number seq: one byte of priority, six of
// milliseconds and two of sequence, big-endian, in lower-case hex, such as
// "01013967d8af7e0001".
func FormatBatchID(p int, ms int64, seq uint16) string {
	var b [9]byte
	b[0] = byte(p)
	for i := 6; i >= 1; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	b[7], b[8] = byte(seq>>8), byte(seq)
	return hex.EncodeToString(b[:])
}

// ParseBatchID splits an id made by FormatBatchID; ok is false for anything
// else (upper-case hex included, so that every batch has one id).
func ParseBatchID(id string) (p int, ms int64, seq uint16, ok bool) {
	if len(id) != BatchIDLen {
		return 0, 0, 0, false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, 0, 0, false
		}
	}
	var b [9]byte
	if _, err := hex.Decode(b[:], []byte(id)); err != nil {
		return 0, 0, 0, false
	}
	for i := 1; i <= 6; i++ {
		ms = ms<<8 | int64(b[i])
	}
	return int(b[0]), ms, uint16(b[7])<<8 | uint16(b[8]), true
}

// IDGen makes batch ids whose time and sequence never go back, even when
// the clock does: an id is later than every id it made or observed before.
// It is safe for concurrent use.
type IDGen struct {
	now func() time.Time

	mu  sync.Mutex
	ms  int64
	seq uint16
}

// NewIDGen returns a generator reading the time from now (time.Now when
// nil).
func NewIDGen(now func() time.Time) *IDGen {
	if now == nil {
		now = time.Now
	}
	return &IDGen{now: now}
}

// Next returns a new batch id of priority p: the clock's millisecond and
// sequence 1, or, when that is not later than the last id, the last id's
// millisecond and the next sequence number.
func (g *IDGen) Next(p int) string {
	ms := min(max(g.now().UnixMilli(), 0), maxMillis)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case ms > g.ms:
		g.ms, g.seq = ms, 1
	case g.seq < 0xffff:
		g.seq++
	default:
		g.ms, g.seq = g.ms+1, 1
	}
	return FormatBatchID(p, g.ms, g.seq)
}

// Observe makes every later id of g later than id. Ids that are not
// BatchIDs are ignored.
func (g *IDGen) Observe(id string) {
	_, ms, seq, ok := ParseBatchID(id)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if ms > g.ms || ms == g.ms && seq > g.seq {
		g.ms, g.seq = ms, seq
	}
}

// Dedupe returns reqs without the requests whose fingerprint occurred
// earlier in reqs.
func Dedupe(reqs []Request) []Request {
	seen := make(map[string]struct{}, len(reqs))
	out := make([]Request, 0, len(reqs))
	for _, r := range reqs {
		if _, ok := seen[r.FP]; ok {
			continue
		}
		seen[r.FP] = struct{}{}
		out = append(out, r)
	}
	return out
}

// NewBatches cuts the new requests of one Add into batches: requests of one
// priority, in the order of reqs, MaxBatch at most, each batch with an id
// from gen taken when its first request comes up. The batches come in the
// order of their ids' creation.
func NewBatches(gen *IDGen, reqs []Request) []Batch {
	var out []Batch
	open := map[int]int{} // priority → index in out of its open batch
	for _, r := range reqs {
		i, ok := open[r.P]
		if !ok || len(out[i].Requests) == MaxBatch {
			out = append(out, Batch{ID: gen.Next(r.P), Requests: make([]Queued, 0, min(MaxBatch, len(reqs)))})
			i = len(out) - 1
			open[r.P] = i
		}
		out[i].Requests = append(out[i].Requests, Queued{FP: r.FP, QData: Data(r.QData)})
	}
	return out
}

// ValidateAll validates slot and every request, naming the first invalid
// request's index.
func ValidateAll(slot Slot, reqs []Request) error {
	if err := slot.Validate(); err != nil {
		return err
	}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}
