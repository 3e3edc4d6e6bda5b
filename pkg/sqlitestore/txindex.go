package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// inFlightSQL is the SQL list of the non-terminal statuses. The partial index
// for Stale and the Stale query must spell it identically for SQLite to use
// the index.
var inFlightSQL = func() string {
	var q []string
	for _, s := range contracts.Statuses {
		if !s.Terminal() {
			q = append(q, "'"+string(s)+"'")
		}
	}
	return "(" + strings.Join(q, ",") + ")"
}()

var txSchema = []string{
	`CREATE TABLE IF NOT EXISTS records (
		key          TEXT PRIMARY KEY,
		crawl_id     TEXT NOT NULL,
		url          TEXT NOT NULL,
		host         TEXT NOT NULL,
		chg          TEXT NOT NULL,
		depth        INTEGER NOT NULL,
		hops         INTEGER NOT NULL,
		referrer     TEXT NOT NULL,
		status       TEXT NOT NULL,
		status_time  INTEGER NOT NULL,
		attempts     INTEGER NOT NULL,
		error        TEXT NOT NULL,
		http_status  INTEGER NOT NULL,
		asset_key    TEXT NOT NULL,
		asset_offset INTEGER NOT NULL,
		asset_length INTEGER NOT NULL,
		created_at   INTEGER NOT NULL
	) WITHOUT ROWID`,
	// Both indexes end in the primary key (implicitly, in a WITHOUT ROWID
	// table), so List pages through one status of a crawl in key order.
	`CREATE INDEX IF NOT EXISTS records_crawl_status ON records (crawl_id, status)`,
	`CREATE INDEX IF NOT EXISTS records_crawl_host ON records (crawl_id, host)`,
	`CREATE INDEX IF NOT EXISTS records_stale ON records (status_time) WHERE status IN ` + inFlightSQL,
}

const recordCols = `key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
	attempts, error, http_status, asset_key, asset_offset, asset_length, created_at`

// TxIndex is the transaction index (txindex.Index) in one SQLite file.
type TxIndex struct {
	st *store
	wr *writer

	insert, transition                     *sql.Stmt
	get, counts, countHost, stale, listSts *sql.Stmt
}

var _ txindex.Index = (*TxIndex)(nil)

// OpenTxIndex opens or creates the transaction index in the SQLite file at
// path.
func OpenTxIndex(path string) (*TxIndex, error) {
	st, err := openStore(path, txSchema)
	if err != nil {
		return nil, err
	}
	x := &TxIndex{st: st}
	prep := []struct {
		dst **sql.Stmt
		db  *sql.DB
		q   string
	}{
		{&x.insert, st.w, `INSERT INTO records (` + recordCols + `)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (key) DO NOTHING`},
		// NULL outcome arguments leave the stored value alone.
		{&x.transition, st.w, `UPDATE records SET status = ?, status_time = ?,
			error = coalesce(?, error), http_status = coalesce(?, http_status),
			asset_key = coalesce(?, asset_key), asset_offset = coalesce(?, asset_offset),
			asset_length = coalesce(?, asset_length), attempts = attempts + ?
			WHERE key = ? AND status = ?`},
		{&x.get, st.r, `SELECT ` + recordCols + ` FROM records WHERE key = ?`},
		{&x.counts, st.r, `SELECT status, count(*) FROM records WHERE crawl_id = ? GROUP BY status`},
		{&x.countHost, st.r, `SELECT count(*) FROM records WHERE crawl_id = ? AND host = ?`},
		{&x.stale, st.r, `SELECT ` + recordCols + ` FROM records
			WHERE status IN ` + inFlightSQL + ` AND status_time < ? ORDER BY status_time, key LIMIT ?`},
		{&x.listSts, st.r, `SELECT ` + recordCols + ` FROM records
			WHERE crawl_id = ? AND status = ? AND key > ? ORDER BY key LIMIT ?`},
	}
	for _, p := range prep {
		s, err := p.db.Prepare(p.q)
		if err != nil {
			_ = st.close()
			return nil, fmt.Errorf("open txindex %q: prepare: %w", path, err)
		}
		*p.dst = s
	}
	x.wr = newWriter(st.w)
	return x, nil
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
	err := x.wr.do(ctx, func(tx *sql.Tx) error {
		ins := tx.Stmt(x.insert)
		defer ins.Close()
		for i, r := range recs {
			res, err := ins.Exec(r.Key, r.CrawlID, r.URL, r.Host, r.Group, r.Depth, r.Hops, r.Referrer,
				string(r.Status), nanos(r.StatusTime), r.Attempts, r.Error, r.HTTPStatus,
				r.Asset.Key, r.Asset.Offset, r.Asset.Length, nanos(r.CreatedAt))
			if err != nil {
				return fmt.Errorf("create record %q: %w", r.Key, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("create record %q: %w", r.Key, err)
			}
			created[i] = n == 1
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return created, nil
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
		now := nanos(time.Now())
		up := tx.Stmt(x.transition)
		defer up.Close()
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
			res, err := up.Exec(string(t.To), now, errText, httpStatus, assetKey, assetOff, assetLen, add,
				t.Key, string(t.From))
			if err != nil {
				return fmt.Errorf("transition record %q: %w", t.Key, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("transition record %q: %w", t.Key, err)
			}
			applied[i] = n == 1
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// Get returns the record with key, or txindex.ErrNotFound.
func (x *TxIndex) Get(ctx context.Context, key string) (txindex.Record, error) {
	r, err := scanRecord(x.get.QueryRowContext(ctx, key))
	if errors.Is(err, sql.ErrNoRows) {
		return txindex.Record{}, fmt.Errorf("get record %q: %w", key, txindex.ErrNotFound)
	}
	if err != nil {
		return txindex.Record{}, fmt.Errorf("get record %q: %w", key, err)
	}
	return r, nil
}

// getManyChunk bounds the number of keys bound to one query.
const getManyChunk = 500

// GetMany returns the records that exist among keys, keyed by key.
func (x *TxIndex) GetMany(ctx context.Context, keys []string) (map[string]txindex.Record, error) {
	out := make(map[string]txindex.Record, len(keys))
	for chunk := range slices.Chunk(keys, getManyChunk) {
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
		}
		rows, err := x.st.r.QueryContext(ctx,
			`SELECT `+recordCols+` FROM records WHERE key IN (`+placeholders(len(chunk))+`)`, args...)
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
	}
	return out, nil
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

// Stale returns up to limit records in a non-terminal status whose status
// time is before before, oldest first.
func (x *TxIndex) Stale(ctx context.Context, before time.Time, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := x.stale.QueryContext(ctx, nanos(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale records: %w", err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("list stale records: %w", err)
	}
	return recs, nil
}

// List returns up to limit records of crawlID after the key after, in key
// order; status filters when not empty.
func (x *TxIndex) List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	statuses := []contracts.Status{status}
	if status == "" {
		statuses = contracts.Statuses
	}
	// One index range per status, merged: cheaper than sorting the whole
	// crawl, and it needs no index of its own.
	var out []txindex.Record
	for _, s := range statuses {
		rows, err := x.listSts.QueryContext(ctx, crawlID, string(s), after, limit)
		if err != nil {
			return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
		}
		recs, err := scanRecords(rows)
		if err != nil {
			return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
		}
		out = append(out, recs...)
	}
	if len(statuses) > 1 {
		slices.SortFunc(out, func(a, b txindex.Record) int { return cmp.Compare(a.Key, b.Key) })
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Close stops the writer and closes the database. It is safe to call more
// than once.
func (x *TxIndex) Close() error {
	x.wr.close()
	for _, s := range []*sql.Stmt{x.insert, x.transition, x.get, x.counts, x.countHost, x.stale, x.listSts} {
		_ = s.Close()
	}
	return x.st.close()
}

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (txindex.Record, error) {
	var r txindex.Record
	var status string
	var statusTime, createdAt int64
	err := row.Scan(&r.Key, &r.CrawlID, &r.URL, &r.Host, &r.Group, &r.Depth, &r.Hops, &r.Referrer,
		&status, &statusTime, &r.Attempts, &r.Error, &r.HTTPStatus,
		&r.Asset.Key, &r.Asset.Offset, &r.Asset.Length, &createdAt)
	if err != nil {
		return txindex.Record{}, err
	}
	r.Status = contracts.Status(status)
	r.StatusTime = fromNanos(statusTime)
	r.CreatedAt = fromNanos(createdAt)
	return r, nil
}

func scanRecords(rows *sql.Rows) ([]txindex.Record, error) {
	defer rows.Close()
	var out []txindex.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
