package esindex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Pipeline methods of TxIndex: the checked writes (through
// modify, without scripts) and the reads that decide them.

// maxTransitionRounds bounds how often modify re-reads records that
// changed concurrently. Each round but the last has a winner per contended
// record, so this is only reached by more concurrent lease renewals of one
// record than rounds.
const maxTransitionRounds = 64

// Create writes each record whose key is absent with one bulk request of
// create operations, and reports per record whether it was created: the
// op_type create makes Elasticsearch refuse (409) a document whose id
// exists, atomically. Of two records of one batch with the same key, the
// first is created. When the request was sent again after an attempt that
// may have been applied (retries.go), the records refused are read, and
// those that hold this call's write id were created by it.
func (x *TxIndex) Create(ctx context.Context, recs []txindex.Record) ([]bool, error) {
	created := make([]bool, len(recs))
	if len(recs) == 0 {
		return created, nil
	}
	seen := make(map[string]bool, len(recs))
	ops := make([]bulkOp, 0, len(recs))
	pos := make([]int, 0, len(recs)) // record index of each op
	made := make([]txindex.Record, 0, len(recs))
	wid := newWriteID()
	for i, r := range recs {
		if r.Key == "" || r.CrawlID == "" || !r.Status.Valid() {
			return nil, fmt.Errorf("create record %q: key, crawl id and a valid status are required", r.Key)
		}
		if seen[r.Key] {
			continue
		}
		seen[r.Key] = true
		r.History = txindex.StartHistory(r)
		r.NextDue = txindex.NextDue(r) // the rule of Apply: due only while settled
		src, err := json.Marshal(txDoc{Record: r, Write: wid})
		if err != nil {
			return nil, fmt.Errorf("create record %q: %w", r.Key, err)
		}
		ops = append(ops, bulkOp{op: "create", action: bulkAction{Index: x.c.txIndex, ID: r.Key}, source: src})
		pos = append(pos, i)
		made = append(made, r)
	}
	items, maybeApplied, err := x.c.bulkTracked(ctx, ops)
	if err != nil {
		return nil, fmt.Errorf("create %d records: %w", len(recs), err)
	}
	var refused []string // keys whose create may have applied before its 409
	for j, it := range items {
		switch {
		case it.Status == http.StatusConflict:
			if maybeApplied {
				refused = append(refused, made[j].Key)
			}
		case it.err() != nil:
			return nil, fmt.Errorf("create record %q: %w", recs[pos[j]].Key, it.err())
		default:
			created[pos[j]] = true
			x.cache.put(version{seqNo: it.SeqNo, primaryTerm: it.PrimaryTerm, rec: made[j]})
		}
	}
	if len(refused) > 0 {
		docs, err := x.c.mget(ctx, x.c.txIndex, refused)
		if err != nil {
			return nil, fmt.Errorf("create %d records: read the refused ones: %w", len(recs), err)
		}
		for j := range items {
			d, ok := docs[made[j].Key]
			if !ok || items[j].Status != http.StatusConflict {
				continue
			}
			var doc txDoc
			if err := json.Unmarshal(d.Source, &doc); err != nil {
				return nil, fmt.Errorf("create record %q: decode: %w", made[j].Key, err)
			}
			if doc.Write == wid {
				created[pos[j]] = true
				x.cache.put(version{seqNo: d.SeqNo, primaryTerm: d.PrimaryTerm, rec: doc.Record})
			}
		}
	}
	return created, nil
}

// Get returns the record with key, or txindex.ErrNotFound. It is realtime.
func (x *TxIndex) Get(ctx context.Context, key string) (txindex.Record, error) {
	docs, err := x.c.mget(ctx, x.c.txIndex, []string{key})
	if err != nil {
		return txindex.Record{}, fmt.Errorf("get record %q: %w", key, err)
	}
	d, ok := docs[key]
	if !ok {
		return txindex.Record{}, fmt.Errorf("get record %q: %w", key, txindex.ErrNotFound)
	}
	var r txindex.Record
	if err := json.Unmarshal(d.Source, &r); err != nil {
		return txindex.Record{}, fmt.Errorf("get record %q: decode: %w", key, err)
	}
	x.cache.put(version{seqNo: d.SeqNo, primaryTerm: d.PrimaryTerm, rec: r})
	return r, nil
}

// GetMany returns the records that exist among keys, keyed by key, with
// realtime mget requests of up to 1000 keys.
func (x *TxIndex) GetMany(ctx context.Context, keys []string) (map[string]txindex.Record, error) {
	out := make(map[string]txindex.Record, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	docs, err := x.c.mget(ctx, x.c.txIndex, keys)
	if err != nil {
		return nil, fmt.Errorf("get %d records: %w", len(keys), err)
	}
	for k, d := range docs {
		var r txindex.Record
		if err := json.Unmarshal(d.Source, &r); err != nil {
			return nil, fmt.Errorf("get record %q: decode: %w", k, err)
		}
		x.cache.put(version{seqNo: d.SeqNo, primaryTerm: d.PrimaryTerm, rec: r})
		out[k] = r
	}
	return out, nil
}

// Transition applies each transition whose record is in its From status,
// in order, and reports per transition whether it applied. StatusTime of
// applied transitions is now, at millisecond precision. See modify for how
// concurrent changes are resolved: a transition is reported applied only
// when this call's write won.
func (x *TxIndex) Transition(ctx context.Context, ts []txindex.Transition) ([]bool, error) {
	applied := make([]bool, len(ts))
	if len(ts) == 0 {
		return applied, nil
	}
	byKey := make(map[string][]int, len(ts))
	var keys []string
	for i, t := range ts {
		if !t.To.Valid() {
			return nil, fmt.Errorf("transition record %q: invalid status %q", t.Key, t.To)
		}
		if _, ok := byKey[t.Key]; !ok {
			keys = append(keys, t.Key)
		}
		byKey[t.Key] = append(byKey[t.Key], i)
	}
	// result holds the outcome per transition of the last version of its
	// record that modify saw, which is the one written if any was.
	result := make([]bool, len(ts))
	won, err := x.modify(ctx, keys, func(r *txindex.Record, now time.Time) bool {
		changed := false
		for _, i := range byKey[r.Key] {
			t := ts[i]
			result[i] = r.Status == t.From && (t.IfDepth == nil || r.Depth == *t.IfDepth)
			if result[i] {
				txindex.Apply(r, t, now)
				changed = true
			}
		}
		return changed
	})
	if err != nil {
		return nil, fmt.Errorf("transition records: %w", err)
	}
	for k, is := range byKey {
		if _, ok := won[k]; ok {
			for _, i := range is {
				applied[i] = result[i]
			}
		}
	}
	return applied, nil
}

// LowerDepth applies each lowering whose record has a greater depth
// (txindex.Lower), each record atomically through modify, and returns the
// changed records.
func (x *TxIndex) LowerDepth(ctx context.Context, ls []txindex.Lowering) (map[string]txindex.Lowered, error) {
	out := map[string]txindex.Lowered{}
	if len(ls) == 0 {
		return out, nil
	}
	byKey := make(map[string][]txindex.Lowering, len(ls))
	var keys []string
	for _, l := range ls {
		if _, ok := byKey[l.Key]; !ok {
			keys = append(keys, l.Key)
		}
		byKey[l.Key] = append(byKey[l.Key], l)
	}
	from := map[string]contracts.Status{} // of the last version modify saw
	won, err := x.modify(ctx, keys, func(r *txindex.Record, now time.Time) bool {
		from[r.Key] = r.Status
		changed := false
		for _, l := range byKey[r.Key] {
			if txindex.Lower(r, l, now) {
				changed = true
			}
		}
		return changed
	})
	if err != nil {
		return nil, fmt.Errorf("lower depth of %d records: %w", len(keys), err)
	}
	for k, r := range won {
		out[k] = txindex.Lowered{Record: r, From: from[k]}
	}
	return out, nil
}

// modify changes the records of keys with fn and returns those it wrote,
// as written. fn changes the record it is given and reports whether it did;
// it is not called for absent keys.
//
// modify writes the changed records with one bulk request of index
// operations conditioned on the sequence number and primary term of the
// version fn was given (optimistic concurrency, no scripts). That version
// is the one this process last read or wrote (versionCache) when it has
// one, and fn changes it: then the record is not read at all. Otherwise,
// and for cached records that fn leaves alone (the cache may be behind),
// the record is read (realtime mget). A record that changed in between
// fails its condition (409); modify reads it again and calls fn again on
// what it finds, so the last call of fn for a key is on the version
// written, if any, or on a version read from the index. now is the same
// for the records of one round, at millisecond precision.
//
// Reading first is what costs in Elasticsearch: a realtime get of a
// document written since the last refresh makes the shard refresh. A
// process transitions records it has just read (the loader gets a record
// before fetching its page, the crawler before parsing it), so the cache
// spares those reads.
func (x *TxIndex) modify(ctx context.Context, keys []string, fn func(r *txindex.Record, now time.Time) bool) (map[string]txindex.Record, error) {
	won := map[string]txindex.Record{}
	pending := keys
	useCache := true
	// lost holds the write id of the last write of each pending key,
	// which failed its condition: if the record read holds it, that
	// write applied after all (see txDoc).
	lost := map[string]string{}
	for round := 0; len(pending) > 0; round++ {
		if round == maxTransitionRounds {
			return nil, fmt.Errorf("%d records still changing concurrently after %d rounds", len(pending), round)
		}
		if round > 0 {
			// Spread the retries of contending callers.
			d := time.Duration(rand.Int64N(int64(min(round, 10)) * int64(time.Millisecond)))
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		wid := newWriteID()
		var ops []bulkOp
		var opVers []version
		add := func(v version) error {
			src, err := json.Marshal(txDoc{Record: v.rec, Write: wid})
			if err != nil {
				return fmt.Errorf("record %q: %w", v.rec.Key, err)
			}
			seq, term := v.seqNo, v.primaryTerm
			ops = append(ops, bulkOp{op: "index", source: src, action: bulkAction{
				Index: x.c.txIndex, ID: v.rec.Key, IfSeqNo: &seq, IfPrimaryTerm: &term,
			}})
			opVers = append(opVers, v)
			return nil
		}
		read := pending
		if useCache {
			read = nil
			var unknown []string
			for _, k := range pending {
				v, ok := x.cache.get(k)
				if !ok {
					unknown = append(unknown, k)
					continue
				}
				if !fn(&v.rec, now) {
					read = append(read, k)
					continue
				}
				if err := add(v); err != nil {
					return nil, err
				}
			}
			// Records this process does not know are taken from the
			// refreshed view, which costs no refresh: a version written
			// since fails its condition and is read in the next round.
			// One the view shows fn leaving alone is read at once (the
			// view may be behind).
			if len(unknown) > 0 {
				seen, err := x.viewVersions(ctx, unknown)
				if err != nil {
					return nil, err
				}
				for _, k := range unknown {
					v, ok := seen[k]
					if !ok || !fn(&v.rec, now) {
						read = append(read, k)
						continue
					}
					if err := add(v); err != nil {
						return nil, err
					}
				}
			}
		}
		useCache = false // retries read: the cache failed them
		if len(read) > 0 {
			docs, err := x.c.mget(ctx, x.c.txIndex, read)
			if err != nil {
				return nil, err
			}
			for _, k := range read {
				d, ok := docs[k]
				if !ok {
					x.cache.drop(k)
					continue // no record: nothing to change
				}
				var doc txDoc
				if err := json.Unmarshal(d.Source, &doc); err != nil {
					return nil, fmt.Errorf("record %q: decode: %w", k, err)
				}
				r := doc.Record
				x.cache.put(version{seqNo: d.SeqNo, primaryTerm: d.PrimaryTerm, rec: r})
				if w, ok := lost[k]; ok && doc.Write == w {
					// The last write applied and was sent again.
					won[k] = r
					continue
				}
				if !fn(&r, now) {
					continue
				}
				if err := add(version{seqNo: d.SeqNo, primaryTerm: d.PrimaryTerm, rec: r}); err != nil {
					return nil, err
				}
			}
		}
		pending = pending[:0:0]
		clear(lost)
		if len(ops) == 0 {
			break
		}
		items, err := x.c.bulk(ctx, ops)
		if err != nil {
			return nil, err
		}
		for j, it := range items {
			r := opVers[j].rec
			switch {
			case it.Status == http.StatusConflict:
				x.cache.drop(r.Key)
				pending = append(pending, r.Key)
				lost[r.Key] = wid
			case it.err() != nil:
				x.cache.drop(r.Key)
				return nil, fmt.Errorf("record %q: %w", r.Key, it.err())
			default:
				x.cache.put(version{seqNo: it.SeqNo, primaryTerm: it.PrimaryTerm, rec: r})
				won[r.Key] = r
			}
		}
	}
	return won, nil
}

// Counts returns the number of records of crawlID per status, from a terms
// aggregation on status, after a refresh.
func (x *TxIndex) Counts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error) {
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return nil, fmt.Errorf("count records of crawl %q: %w", crawlID, err)
	}
	return x.PeekCounts(ctx, crawlID)
}

// PeekCounts is Counts without the refresh: as of the index's last one.
func (x *TxIndex) PeekCounts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error) {
	body, err := json.Marshal(map[string]any{
		"size":             0,
		"track_total_hits": false,
		"query":            map[string]any{"bool": map[string]any{"filter": []any{term("crawl_id", crawlID)}}},
		"aggs": map[string]any{"status": map[string]any{
			"terms": map[string]any{"field": "status", "size": 2 * len(contracts.Statuses)},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("count records of crawl %q: %w", crawlID, err)
	}
	var res struct {
		Aggregations struct {
			Status struct {
				Buckets []struct {
					Key      contracts.Status `json:"key"`
					DocCount int64            `json:"doc_count"`
				} `json:"buckets"`
			} `json:"status"`
		} `json:"aggregations"`
	}
	req := esapi.SearchRequest{Index: []string{x.c.txIndex}, Body: bytes.NewReader(body), FilterPath: []string{"aggregations"}}
	if err := x.c.do(ctx, req, &res); err != nil {
		return nil, fmt.Errorf("count records of crawl %q: %w", crawlID, err)
	}
	out := make(map[contracts.Status]int64, len(res.Aggregations.Status.Buckets))
	for _, b := range res.Aggregations.Status.Buckets {
		out[b.Key] = b.DocCount
	}
	return out, nil
}

// CountHost returns the number of records of crawlID whose host is host.
func (x *TxIndex) CountHost(ctx context.Context, crawlID, host string) (int64, error) {
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return 0, fmt.Errorf("count records of host %q: %w", host, err)
	}
	n, err := x.c.count(ctx, x.c.txIndex, term("crawl_id", crawlID), term("host", host))
	if err != nil {
		return 0, fmt.Errorf("count records of host %q: %w", host, err)
	}
	return n, nil
}

// count returns the number of documents of index that match every filter.
func (c *Client) count(ctx context.Context, index string, filters ...any) (int64, error) {
	q := map[string]any{"match_all": map[string]any{}}
	if len(filters) > 0 {
		q = map[string]any{"bool": map[string]any{"filter": filters}}
	}
	body, err := json.Marshal(map[string]any{"query": q})
	if err != nil {
		return 0, err
	}
	var res struct {
		Count int64 `json:"count"`
	}
	if err := c.do(ctx, esapi.CountRequest{Index: []string{index}, Body: bytes.NewReader(body)}, &res); err != nil {
		return 0, err
	}
	return res.Count, nil
}

// Stale returns up to limit records in a non-terminal status whose status
// time is before before, oldest first, but for the to-be-loaded records of
// the shards owned (a must_not of both). Elasticsearch keeps times at
// millisecond precision, so before counts from its millisecond.
func (x *TxIndex) Stale(ctx context.Context, before time.Time, limit int, owned []string) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return nil, fmt.Errorf("list stale records: %w", err)
	}
	b := map[string]any{"filter": []any{
		map[string]any{"terms": map[string]any{"status": inFlight()}},
		map[string]any{"range": map[string]any{"status_time": map[string]any{
			"lt": before.UnixMilli(), "format": "epoch_millis",
		}}},
	}}
	if len(owned) > 0 {
		b["must_not"] = []any{map[string]any{"bool": map[string]any{"filter": []any{
			term("status", string(contracts.ToBeLoaded)),
			map[string]any{"terms": map[string]any{"loader_shard": owned}},
		}}}}
	}
	query := map[string]any{"bool": b}
	sort := []any{map[string]any{"status_time": "asc"}, map[string]any{"key": "asc"}}
	recs, err := x.search(ctx, query, sort, nil, limit)
	if err != nil {
		return nil, fmt.Errorf("list stale records: %w", err)
	}
	return recs, nil
}
