package esindex

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/pkg/digests"
)

// Digests is the payload-digest index (digests.Index) in the index
// "<prefix>-digests": one document per (scope, digest), whose id is a
// hash of both, created with op_type create so that the first writer wins.
// A Lookup is one ids search per flush of a loader: it reads the refreshed
// view, as a dedupe hint may be stale (docs/architecture.md), where a
// realtime get would make the shard refresh at every flush of every
// loader, and it loads the entries that exist only (most payloads are new),
// where an mget reads every id it is given. So a Lookup sees the entries
// added up to the index's last refresh (refresh_interval, 1 s by default),
// and a payload stored twice within it is stored twice.
type Digests struct{ c *Client }

// Refresh makes every entry added so far visible to Lookup.
func (d *Digests) Refresh(ctx context.Context) error {
	if err := d.c.do(ctx, esapi.IndicesRefreshRequest{Index: []string{d.c.digestsIndex}}, nil); err != nil {
		return fmt.Errorf("refresh payload digests: %w", err)
	}
	return nil
}

var _ digests.Index = (*Digests)(nil)

// digestsMapping maps the entries; only scope and digest are searched
// (nothing searches them today, but an operator may).
var digestsMapping = map[string]any{
	"scope":     map[string]any{"type": "keyword"},
	"digest":    map[string]any{"type": "keyword"},
	"uri":       map[string]any{"type": "keyword", "index": false, "doc_values": false},
	"date":      map[string]any{"type": "long", "index": false},
	"record_id": map[string]any{"type": "keyword", "index": false, "doc_values": false},
	"key":       map[string]any{"type": "keyword", "index": false, "doc_values": false},
	"offset":    map[string]any{"type": "long", "index": false},
	"length":    map[string]any{"type": "long", "index": false},
}

// digestDoc is an entry's document; date is in unix nanoseconds (an
// Elasticsearch date keeps milliseconds only).
type digestDoc struct {
	Scope    string `json:"scope"`
	Digest   string `json:"digest"`
	URI      string `json:"uri"`
	Date     int64  `json:"date"`
	RecordID string `json:"record_id"`
	Key      string `json:"key"`
	Offset   int64  `json:"offset"`
	Length   int64  `json:"length"`
}

// digestID is the document id of ref.
func digestID(ref digests.Ref) string {
	h := sha256.Sum256([]byte(ref.Scope + "\x00" + ref.Digest))
	return hex.EncodeToString(h[:])
}

// Lookup returns the entries of refs that exist, with one ids search per
// maxMgetIDs refs.
func (d *Digests) Lookup(ctx context.Context, refs []digests.Ref) (map[digests.Ref]digests.Entry, error) {
	out := make(map[digests.Ref]digests.Entry, len(refs))
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		if r.Scope == "" || r.Digest == "" || len(r.Scope) > digests.MaxScopeLen || len(r.Digest) > digests.MaxDigestLen {
			continue
		}
		ids = append(ids, digestID(r))
	}
	if len(ids) == 0 {
		return out, nil
	}
	hits, err := d.c.searchIDs(ctx, d.c.digestsIndex, ids, nil, false)
	if err != nil {
		return nil, fmt.Errorf("look up payload digests: %w", err)
	}
	for _, h := range hits {
		var src digestDoc
		if err := json.Unmarshal(h.Source, &src); err != nil {
			return nil, fmt.Errorf("look up payload digests: decode %q: %w", h.ID, err)
		}
		e := digests.Entry{Ref: digests.Ref{Scope: src.Scope, Digest: src.Digest}, URI: src.URI, Date: fromUnixNanos(src.Date),
			RecordID: src.RecordID, Key: src.Key, Offset: src.Offset, Length: src.Length}
		out[e.Ref] = e
	}
	return out, nil
}

// Add creates the entries whose Ref has none, in one bulk request: a
// create of an existing id fails with a conflict, which means "not added".
func (d *Digests) Add(ctx context.Context, entries []digests.Entry) ([]bool, error) {
	added := make([]bool, len(entries))
	ops := make([]bulkOp, 0, len(entries))
	idx := make([]int, 0, len(entries))
	seen := make(map[digests.Ref]bool, len(entries))
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("add payload digests: %w", err)
		}
		if seen[e.Ref] { // one operation per document in a bulk: the first wins
			continue
		}
		seen[e.Ref] = true
		src, err := json.Marshal(digestDoc{Scope: e.Scope, Digest: e.Digest, URI: e.URI, Date: e.Date.UnixNano(),
			RecordID: e.RecordID, Key: e.Key, Offset: e.Offset, Length: e.Length})
		if err != nil {
			return nil, fmt.Errorf("add payload digests: %w", err)
		}
		ops = append(ops, bulkOp{op: "create", action: bulkAction{Index: d.c.digestsIndex, ID: digestID(e.Ref)}, source: src})
		idx = append(idx, i)
	}
	if len(ops) == 0 {
		return added, nil
	}
	items, err := d.c.bulk(ctx, ops)
	if err != nil {
		return nil, fmt.Errorf("add payload digests: %w", err)
	}
	for j, it := range items {
		switch {
		case it.Status == http.StatusConflict:
		case it.err() != nil:
			return nil, fmt.Errorf("add payload digest %q: %w", entries[idx[j]].Digest, it.err())
		default:
			added[idx[j]] = true
		}
	}
	return added, nil
}

// Remove deletes the entries of stale whose document still holds their
// record, each conditioned on the sequence number it was read at, so that
// an entry added since by another writer stays.
func (d *Digests) Remove(ctx context.Context, stale []digests.Entry) error {
	if len(stale) == 0 {
		return nil
	}
	ids := make([]string, 0, len(stale))
	want := make(map[string]string, len(stale))
	for _, e := range stale {
		id := digestID(e.Ref)
		ids = append(ids, id)
		want[id] = e.RecordID
	}
	docs, err := d.c.mget(ctx, d.c.digestsIndex, ids)
	if err != nil {
		return fmt.Errorf("remove payload digests: %w", err)
	}
	var ops []bulkOp
	for id, doc := range docs {
		var src digestDoc
		if err := json.Unmarshal(doc.Source, &src); err != nil {
			return fmt.Errorf("remove payload digests: decode %q: %w", id, err)
		}
		if src.RecordID != want[id] {
			continue
		}
		seq, term := doc.SeqNo, doc.PrimaryTerm
		ops = append(ops, bulkOp{op: "delete", action: bulkAction{Index: d.c.digestsIndex, ID: id, IfSeqNo: &seq, IfPrimaryTerm: &term}})
	}
	if len(ops) == 0 {
		return nil
	}
	items, err := d.c.bulk(ctx, ops)
	if err != nil {
		return fmt.Errorf("remove payload digests: %w", err)
	}
	for _, it := range items {
		// A conflict or a missing document: another writer got there first.
		if it.Status != http.StatusConflict && it.Status != http.StatusNotFound && it.err() != nil {
			return fmt.Errorf("remove payload digests: %w", it.err())
		}
	}
	return nil
}

// Count returns the number of entries, after a refresh when the policy
// leaves that to readers.
func (d *Digests) Count(ctx context.Context) (int64, error) {
	if err := d.c.readRefresh(ctx, d.c.digestsIndex); err != nil {
		return 0, fmt.Errorf("count payload digests: %w", err)
	}
	n, err := d.c.count(ctx, d.c.digestsIndex)
	if err != nil {
		return 0, fmt.Errorf("count payload digests: %w", err)
	}
	return n, nil
}

// fromUnixNanos is the inverse of time.Time.UnixNano, in UTC.
func fromUnixNanos(n int64) time.Time { return time.Unix(0, n).UTC() }
