package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Pipeline methods of TxIndex: the checked writes, each batch
// one transaction of the single writer, and the reads that decide them.

// countKey names one row of the counts table.
type countKey struct {
	crawl  string
	status contracts.Status
}

// addCounts applies the deltas of one job to the counts table.
func (x *TxIndex) addCounts(tx *sql.Tx, deltas map[countKey]int64) error {
	if len(deltas) == 0 {
		return nil
	}
	add := tx.Stmt(x.addCount)
	defer add.Close()
	for k, d := range deltas {
		if d == 0 {
			continue
		}
		if _, err := add.Exec(k.crawl, string(k.status), d); err != nil {
			return fmt.Errorf("update counts of crawl %q: %w", k.crawl, err)
		}
	}
	return nil
}

// Create writes each record whose key is absent, in one transaction, and
// reports per record whether it was created. Of two records of one batch with
// the same key, the first is created.
func (x *TxIndex) Create(ctx context.Context, recs []txindex.Record) ([]bool, error) {
	created := make([]bool, len(recs))
	if len(recs) == 0 {
		return created, nil
	}
	for _, r := range recs {
		if r.Key == "" || r.CrawlID == "" || !r.Status.Valid() {
			return nil, fmt.Errorf("create record %q: key, crawl id and a valid status are required", r.Key)
		}
	}
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	keysJSON, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("create %d records: %w", len(recs), err)
	}
	err = x.wr.do(ctx, func(tx *sql.Tx) error {
		// One query finds the records that exist already, which in a crawl
		// are most of them; the write lock, held since BEGIN IMMEDIATE, keeps
		// the answer true until commit.
		seen, err := queryKeys(tx.Stmt(x.existing), string(keysJSON))
		if err != nil {
			return fmt.Errorf("create %d records: %w", len(recs), err)
		}
		ins := tx.Stmt(x.insert)
		defer ins.Close()
		deltas := map[countKey]int64{}
		for i, r := range recs {
			created[i] = false
			if _, ok := seen[r.Key]; ok {
				continue
			}
			seen[r.Key] = struct{}{}
			var bytes, lastmod, nextDue any
			if r.Bytes != nil {
				bytes = *r.Bytes
			}
			if r.Lastmod != nil {
				lastmod = nanos(*r.Lastmod)
			}
			recrawl, err := encodeRecrawl(r.Recrawl)
			if err != nil {
				return fmt.Errorf("create record %q: %w", r.Key, err)
			}
			if d := txindex.NextDue(r); d != nil {
				nextDue = d.UnixMilli()
			}
			res, err := ins.Exec(r.Key, r.CrawlID, r.URL, r.Host, r.Group, r.Depth, r.Hops, r.Referrer,
				string(r.Status), nanos(r.StatusTime), r.Attempts, r.Error, r.HTTPStatus,
				r.Asset.Key, r.Asset.Offset, r.Asset.Length, nanos(r.CreatedAt), r.MIMEType, bytes,
				encodeHistory(txindex.StartHistory(r)), r.Sitemap, lastmod, recrawl, nextDue, r.Render, r.Shard)
			if err != nil {
				return fmt.Errorf("create record %q: %w", r.Key, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("create record %q: %w", r.Key, err)
			}
			if created[i] = n == 1; created[i] {
				deltas[countKey{r.CrawlID, r.Status}]++
			}
		}
		return x.addCounts(tx, deltas)
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

func queryKeys(st *sql.Stmt, keysJSON string) (map[string]struct{}, error) {
	defer st.Close()
	rows, err := st.Query(keysJSON)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]struct{}{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out[k] = struct{}{}
	}
	return out, rows.Err()
}

// Transition applies, in one transaction and in order, each transition whose
// record is in its From status, and reports per transition whether it
// applied.
func (x *TxIndex) Transition(ctx context.Context, ts []txindex.Transition) ([]bool, error) {
	applied := make([]bool, len(ts))
	if len(ts) == 0 {
		return applied, nil
	}
	for _, t := range ts {
		if !t.To.Valid() {
			return nil, fmt.Errorf("transition record %q: invalid status %q", t.Key, t.To)
		}
	}
	err := x.wr.do(ctx, func(tx *sql.Tx) error {
		nowT := time.Now()
		now, nowMS := nanos(nowT), nowT.UnixMilli()
		up := tx.Stmt(x.transition)
		defer up.Close()
		deltas := map[countKey]int64{}
		for i, t := range ts {
			var errText, httpStatus, assetKey, assetOff, assetLen any
			if t.Error != "" {
				errText = t.Error
			}
			if t.HTTPStatus != 0 {
				httpStatus = t.HTTPStatus
			}
			if t.Asset != nil {
				assetKey, assetOff, assetLen = t.Asset.Key, t.Asset.Offset, t.Asset.Length
			}
			add := 0
			if t.AddAttempt {
				add = 1
			}
			var ifDepth, mimeType, bytes, render any
			if t.IfDepth != nil {
				ifDepth = *t.IfDepth
			}
			if t.MIMEType != "" {
				mimeType = t.MIMEType
			}
			if t.Bytes != nil {
				bytes = *t.Bytes
			}
			if t.Fetched() {
				render = t.Render
			}
			recrawl, err := encodeRecrawl(t.Recrawl)
			if err != nil {
				return fmt.Errorf("transition record %q: %w", t.Key, err)
			}
			var crawlID string
			err = up.QueryRow(string(t.To), now, errText, httpStatus, assetKey, assetOff, assetLen, add,
				t.Key, string(t.From), ifDepth, mimeType, bytes, histEvent(t.To, nowMS),
				t.ResetAttempts, t.ClearError, txindex.Done(t.To), recrawl, render).Scan(&crawlID)
			if errors.Is(err, sql.ErrNoRows) {
				applied[i] = false
				continue
			}
			if err != nil {
				return fmt.Errorf("transition record %q: %w", t.Key, err)
			}
			applied[i] = true
			if t.From != t.To {
				deltas[countKey{crawlID, t.From}]--
				deltas[countKey{crawlID, t.To}]++
			}
		}
		return x.addCounts(tx, deltas)
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// LowerDepth applies, in one transaction, each lowering whose record has a
// greater depth (txindex.Lower), and returns the changed records. The write
// lock, held from the read of the records to the commit, makes each
// read-modify-write atomic.
func (x *TxIndex) LowerDepth(ctx context.Context, ls []txindex.Lowering) (map[string]txindex.Lowered, error) {
	if len(ls) == 0 {
		return map[string]txindex.Lowered{}, nil
	}
	keys := make([]string, len(ls))
	for i, l := range ls {
		keys[i] = l.Key
	}
	keysJSON, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("lower depth of %d records: %w", len(ls), err)
	}
	var out map[string]txindex.Lowered
	err = x.wr.do(ctx, func(tx *sql.Tx) error {
		out = map[string]txindex.Lowered{}
		get := tx.Stmt(x.lockedGetMany)
		defer get.Close()
		rows, err := get.Query(string(keysJSON))
		if err != nil {
			return fmt.Errorf("lower depth of %d records: %w", len(ls), err)
		}
		recs, err := scanRecords(rows)
		if err != nil {
			return fmt.Errorf("lower depth of %d records: %w", len(ls), err)
		}
		byKey := make(map[string]txindex.Record, len(recs))
		for _, r := range recs {
			byKey[r.Key] = r
		}
		now := fromNanos(time.Now().UnixNano()) // as stored
		up := tx.Stmt(x.lower)
		defer up.Close()
		deltas := map[countKey]int64{}
		for _, l := range ls {
			r, ok := byKey[l.Key]
			if !ok {
				continue
			}
			from := r.Status
			if prev, ok := out[l.Key]; ok {
				from = prev.From // lowered before in this call
			}
			if !txindex.Lower(&r, l, now) {
				continue
			}
			var nextDue any
			if r.NextDue != nil {
				nextDue = r.NextDue.UnixMilli()
			}
			if _, err := up.Exec(r.Depth, r.Hops, string(r.Status), nanos(r.StatusTime), r.Key, histEvent(r.Status, r.StatusTime.UnixMilli()), nextDue); err != nil {
				return fmt.Errorf("lower depth of record %q: %w", r.Key, err)
			}
			if was := byKey[l.Key].Status; was != r.Status {
				deltas[countKey{r.CrawlID, was}]--
				deltas[countKey{r.CrawlID, r.Status}]++
			}
			byKey[l.Key], out[l.Key] = r, txindex.Lowered{Record: r, From: from}
		}
		return x.addCounts(tx, deltas)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get returns the record with key, or txindex.ErrNotFound.
func (x *TxIndex) Get(ctx context.Context, key string) (txindex.Record, error) {
	r, err := scanRecord(x.get.QueryRowContext(ctx, key), true)
	if errors.Is(err, sql.ErrNoRows) {
		return txindex.Record{}, fmt.Errorf("get record %q: %w", key, txindex.ErrNotFound)
	}
	if err != nil {
		return txindex.Record{}, fmt.Errorf("get record %q: %w", key, err)
	}
	return r, nil
}

// GetMany returns the records that exist among keys, keyed by key.
func (x *TxIndex) GetMany(ctx context.Context, keys []string) (map[string]txindex.Record, error) {
	out := make(map[string]txindex.Record, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	keysJSON, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("get %d records: %w", len(keys), err)
	}
	rows, err := x.getMany.QueryContext(ctx, string(keysJSON))
	if err != nil {
		return nil, fmt.Errorf("get %d records: %w", len(keys), err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("get %d records: %w", len(keys), err)
	}
	for _, r := range recs {
		out[r.Key] = r
	}
	return out, nil
}

// Peek is GetMany: every read of the embedded index is current, and no
// cheaper.
func (x *TxIndex) Peek(ctx context.Context, keys []string) (map[string]txindex.Record, error) {
	return x.GetMany(ctx, keys)
}

// PeekCounts is Counts: every read of the embedded index is current.
func (x *TxIndex) PeekCounts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error) {
	return x.Counts(ctx, crawlID)
}

// Counts returns the number of records of crawlID per status; statuses
// without records are absent.
func (x *TxIndex) Counts(ctx context.Context, crawlID string) (map[contracts.Status]int64, error) {
	rows, err := x.counts.QueryContext(ctx, crawlID)
	if err != nil {
		return nil, fmt.Errorf("count records of crawl %q: %w", crawlID, err)
	}
	defer rows.Close()
	out := make(map[contracts.Status]int64)
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count records of crawl %q: %w", crawlID, err)
		}
		out[contracts.Status(s)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count records of crawl %q: %w", crawlID, err)
	}
	return out, nil
}

// CountHost returns the number of records of crawlID whose host is host.
func (x *TxIndex) CountHost(ctx context.Context, crawlID, host string) (int64, error) {
	var n int64
	if err := x.countHost.QueryRowContext(ctx, crawlID, host).Scan(&n); err != nil {
		return 0, fmt.Errorf("count records of host %q: %w", host, err)
	}
	return n, nil
}
