// Package digests is the payload-digest index behind gridcrawl's
// URL-agnostic deduplication across crawls: for each scope (a crawl, or a
// collection of crawls) and payload digest, where the first response
// record with that payload was stored, so that a later response with the
// same payload is written as a WARC revisit record that refers to it.
//
// The embedded implementation is sqlitestore.Digests, the grid-mode one
// esindex.Digests; digeststest is the conformance suite both pass.
package digests

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limits of an entry's fields, checked by Validate.
const (
	MaxScopeLen  = 256
	MaxDigestLen = 128
	MaxURILen    = 8192
	MaxFieldLen  = 1024 // record id and asset key
)

// Ref names one entry: a payload digest within a scope.
type Ref struct {
	// Scope is what deduplication spans: "crawl:<crawl id>" or
	// "collection:<name>" (see the loader).
	Scope string
	// Digest is the payload digest as in WARC-Payload-Digest
	// ("sha1:<base32>").
	Digest string
}

// Entry is the original response record of a payload in a scope.
type Entry struct {
	Ref
	// URI, Date and RecordID are the original's WARC-Target-URI,
	// WARC-Date and WARC-Record-ID: what a revisit record refers to.
	URI      string
	Date     time.Time
	RecordID string
	// Key, Offset and Length say where the original's record lies in the
	// asset store, so that a reader of a revisit finds the payload and a
	// writer can check that the original is still there.
	Key    string
	Offset int64
	Length int64
}

// ErrInvalid is wrapped by the errors of entries that Validate refuses.
var ErrInvalid = errors.New("invalid digest entry")

// Validate checks the fields an index stores.
func (e Entry) Validate() error {
	switch {
	case e.Scope == "" || len(e.Scope) > MaxScopeLen:
		return fmt.Errorf("%w: scope must have 1 to %d bytes", ErrInvalid, MaxScopeLen)
	case e.Digest == "" || len(e.Digest) > MaxDigestLen:
		return fmt.Errorf("%w: digest must have 1 to %d bytes", ErrInvalid, MaxDigestLen)
	case e.URI == "" || len(e.URI) > MaxURILen:
		return fmt.Errorf("%w: uri must have 1 to %d bytes", ErrInvalid, MaxURILen)
	case e.RecordID == "" || len(e.RecordID) > MaxFieldLen, e.Key == "" || len(e.Key) > MaxFieldLen:
		return fmt.Errorf("%w: record id and key must have 1 to %d bytes", ErrInvalid, MaxFieldLen)
	case e.Offset < 0 || e.Length <= 0:
		return fmt.Errorf("%w: offset must not be negative and length must be positive", ErrInvalid)
	case e.Date.IsZero():
		return fmt.Errorf("%w: date must be set", ErrInvalid)
	}
	return nil
}

// Index is a payload-digest index. It is safe for concurrent use, also by
// several processes on one backend.
//
// The contract:
//   - First writer wins: Add creates an entry only where its Ref has none,
//     atomically, so two writers adding one Ref at once (two loaders
//     storing the same payload) see exactly one of them added. The entry
//     of a Ref never changes; it is only removed (Remove) and then may be
//     added anew.
//   - Add and Remove are atomic per entry and decide against every entry
//     added before, in any process. Lookup may be stale: it sees the
//     entries added up to the backend's last refresh (at once in SQLite;
//     within Elasticsearch's refresh interval, 1 s by default), so a
//     payload stored twice within it is stored twice, never referred to
//     wrongly. Count sees every entry added before it.
//   - Calls are batched: one Lookup or Add is one round trip to the
//     backend whatever the number of entries (up to the backend's request
//     size).
//   - A call whose context ends returns its error; an Add that fails may
//     have added some entries, which a Lookup then shows.
//   - Times come back in UTC, to the microsecond at least.
type Index interface {
	// Lookup returns the entries of refs that exist, by Ref. Refs that are
	// not valid (empty, too long) have none.
	Lookup(ctx context.Context, refs []Ref) (map[Ref]Entry, error)
	// Add adds the entries whose Ref has none, and reports for each
	// whether it was added; of two entries of one Ref in one call the
	// first is added. An entry that Validate refuses fails the whole call
	// before anything is added.
	Add(ctx context.Context, entries []Entry) (added []bool, err error)
	// Remove removes, for each of stale, the entry of its Ref if that
	// entry is stale's (the same RecordID): an original found deleted or
	// unreadable makes room for the next one, and a newer entry that
	// another writer added meanwhile stays.
	Remove(ctx context.Context, stale []Entry) error
	// Count returns the number of entries in the index, all scopes
	// together.
	Count(ctx context.Context) (int64, error)
}
