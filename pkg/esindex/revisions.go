package esindex

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Revisions of TxIndex, and Peek. A record's revision is the
// sequence number and primary term of its version, "seq:term": the
// condition of modify's writes. A stage that learns the version another
// process wrote from its contract transitions the record without the
// realtime get that would otherwise make the shard refresh.

var _ txindex.Revisions = (*TxIndex)(nil)

// Known returns the version of key this process last read or wrote.
func (x *TxIndex) Known(key string) (txindex.Record, string, bool) {
	v, ok := x.cache.get(key)
	if !ok {
		return txindex.Record{}, "", false
	}
	return v.rec, strconv.FormatInt(v.seqNo, 10) + ":" + strconv.FormatInt(v.primaryTerm, 10), true
}

// Learn remembers r at revision rev, unless a later version of it is
// known.
func (x *TxIndex) Learn(r txindex.Record, rev string) error {
	seq, term, ok := strings.Cut(rev, ":")
	s, err1 := strconv.ParseInt(seq, 10, 64)
	t, err2 := strconv.ParseInt(term, 10, 64)
	if !ok || err1 != nil || err2 != nil || s < 0 || t < 1 || r.Key == "" {
		return fmt.Errorf("learn record %q: malformed revision %q", r.Key, rev)
	}
	x.cache.put(version{seqNo: s, primaryTerm: t, rec: r})
	return nil
}

// Peek returns the records among keys as the last refresh shows them, with
// an ids search: unlike a realtime get, it never makes the shard refresh.
// It reads only the fields txindex.Pipeline.Peek promises (decoding whole
// records cost the crawler a fifth of its time), so the records it finds
// are not remembered: a write needs them whole.
func (x *TxIndex) Peek(ctx context.Context, keys []string) (map[string]txindex.Record, error) {
	vs, err := x.searchIDs(ctx, keys, peekFields)
	if err != nil {
		return nil, fmt.Errorf("peek %d records: %w", len(keys), err)
	}
	out := make(map[string]txindex.Record, len(vs))
	for k, v := range vs {
		out[k] = v.rec
	}
	return out, nil
}

// peekFields are the record fields Peek reads (txindex.Pipeline.Peek).
var peekFields = []string{"key", "crawl_id", "url", "host", "chg", "depth", "hops", "referrer", "status"}

// viewVersions returns the versions of the records among keys that the
// index's last refresh shows, whole, with their sequence numbers and
// primary terms: an ids search, which unlike a realtime get never makes
// the shard refresh. A version may be older than the record's current one.
func (x *TxIndex) viewVersions(ctx context.Context, keys []string) (map[string]version, error) {
	vs, err := x.searchIDs(ctx, keys, nil)
	if err != nil {
		return nil, fmt.Errorf("read %d records: %w", len(keys), err)
	}
	return vs, nil
}

// searchIDs returns the records among keys that the index's last refresh
// shows: with fields, only those fields (and no sequence number or primary
// term); with none, whole and with them.
func (x *TxIndex) searchIDs(ctx context.Context, keys, fields []string) (map[string]version, error) {
	hits, err := x.c.searchIDs(ctx, x.c.txIndex, keys, fields, fields == nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]version, len(hits))
	for _, h := range hits {
		var r txindex.Record
		if err := json.Unmarshal(h.Source, &r); err != nil {
			return nil, fmt.Errorf("record %q: decode: %w", h.ID, err)
		}
		out[h.ID] = version{seqNo: h.SeqNo, primaryTerm: h.PrimaryTerm, rec: r}
	}
	return out, nil
}

// possibleIDs returns the keys a document can have: an id that none can
// have would fail a whole search.
func possibleIDs(keys []string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if k != "" && len(k) <= maxIDBytes {
			out = append(out, k)
		}
	}
	return out
}
