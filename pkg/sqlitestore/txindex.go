package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// inFlightSQL is the SQL list of the pending statuses (retired is not). The partial index
// for Stale and the Stale query must spell it identically for SQLite to use
// the index.
var inFlightSQL = func() string {
	var q []string
	for _, s := range contracts.Statuses {
		if s.Pending() {
			q = append(q, "'"+string(s)+"'")
		}
	}
	return "(" + strings.Join(q, ",") + ")"
}()

// txSchemaVersion is stored in PRAGMA user_version. Files of versions 2 to
// 4 are migrated when opened (migrateTxV2).
const txSchemaVersion = 5

// Records get an integer rowid in creation order. Only the unique key index
// is keyed by the (random) record key; the other indexes end in the rowid,
// so new records and transitions of recent records touch few, hot pages,
// which keeps the WAL written per commit small. counts holds the number of
// records per crawl and status, kept in the transaction of every change, so
// that Counts reads a handful of rows however large the crawl.
var txSchema = []string{
	`CREATE TABLE IF NOT EXISTS records (
		id           INTEGER PRIMARY KEY,
		key          TEXT NOT NULL UNIQUE,
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
		created_at   INTEGER NOT NULL,
		mime_type    TEXT NOT NULL DEFAULT '',
		bytes        INTEGER,
		history      TEXT NOT NULL DEFAULT '',
		sitemap      TEXT NOT NULL DEFAULT '',
		lastmod      INTEGER,
		recrawl      TEXT,
		next_due     INTEGER
	)`,
	`CREATE INDEX IF NOT EXISTS records_crawl_status ON records (crawl_id, status)`,
	`CREATE INDEX IF NOT EXISTS records_crawl_host ON records (crawl_id, host)`,
	`CREATE INDEX IF NOT EXISTS records_stale ON records (status_time) WHERE status IN ` + inFlightSQL,
	// Only the records of continuous crawls that are settled have a due
	// time: the index holds those, in due order per crawl.
	`CREATE INDEX IF NOT EXISTS records_due ON records (crawl_id, next_due) WHERE next_due IS NOT NULL`,
	`CREATE TABLE IF NOT EXISTS counts (
		crawl_id TEXT NOT NULL,
		status   TEXT NOT NULL,
		n        INTEGER NOT NULL,
		PRIMARY KEY (crawl_id, status)
	) WITHOUT ROWID`,
}

const recordCols = `key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
	attempts, error, http_status, asset_key, asset_offset, asset_length, created_at, mime_type, bytes, history, sitemap, lastmod,
	recrawl, next_due`

// The history column holds the status history as fixed-width events of
// histEventLen characters: a status letter (histLetter) and 13 digits of
// unix milliseconds. Fixed width makes the bound cheap on the hot path:
// appendHistorySQL keeps the first event and the last MaxHistory-1 with
// substr, no parsing, in the UPDATE that changes the status.
const histEventLen = 14

// appendHistorySQL is the SQL form of txindex.AppendHistory for the
// event given as parameter ev (formatted by histEvent).
func appendHistorySQL(ev int) string {
	return fmt.Sprintf(`substr(history, 1, %d) || substr(substr(history, %d) || ?%d, -%d)`,
		histEventLen, histEventLen+1, ev, histEventLen*(txindex.MaxHistory-1))
}

// TxIndex is the transaction index (txindex.Index) in one SQLite file.
type TxIndex struct {
	st *store
	wr *writer

	existing, insert, transition, addCount    *sql.Stmt
	lockedGetMany, lower                      *sql.Stmt
	get, getMany, counts, countHost, stale    *sql.Stmt
	listByKey, listByStatus, listCrawl, total *sql.Stmt
	due, dueCount, dueNext                    *sql.Stmt
}

var _ txindex.Index = (*TxIndex)(nil)

// OpenTxIndex opens or creates the transaction index in the SQLite file at
// path.
func OpenTxIndex(path string) (*TxIndex, error) {
	if err := migrateTxV2(path); err != nil {
		return nil, err
	}
	st, err := openStore(path, txSchemaVersion, txSchema)
	if err != nil {
		return nil, err
	}
	x := &TxIndex{st: st}
	prep := []struct {
		dst **sql.Stmt
		db  *sql.DB
		q   string
	}{
		{&x.existing, st.w, `SELECT key FROM records WHERE key IN (SELECT value FROM json_each(?))`},
		{&x.insert, st.w, `INSERT INTO records (` + recordCols + `)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (key) DO NOTHING`},
		// NULL outcome arguments leave the stored value alone. A change of
		// status (not a lease renewal) appends to the history in the same
		// write. next_due follows txindex.Apply: the recrawl state's due
		// time in a terminal status (?17 true), NULL in any other.
		{&x.transition, st.w, `UPDATE records SET status = ?1, status_time = ?2,
			error = CASE WHEN ?16 THEN '' ELSE coalesce(?3, error) END, http_status = coalesce(?4, http_status),
			asset_key = coalesce(?5, asset_key), asset_offset = coalesce(?6, asset_offset),
			asset_length = coalesce(?7, asset_length), attempts = CASE WHEN ?15 THEN 0 ELSE attempts END + ?8,
			mime_type = coalesce(?12, mime_type), bytes = coalesce(?13, bytes),
			history = CASE WHEN status = ?1 THEN history ELSE ` + appendHistorySQL(14) + ` END,
			recrawl = coalesce(?18, recrawl),
			next_due = CASE WHEN ?17 THEN json_extract(coalesce(?18, recrawl), '$.due_ms') END
			WHERE key = ?9 AND status = ?10 AND (?11 IS NULL OR depth = ?11) RETURNING crawl_id`},
		{&x.lockedGetMany, st.w, `SELECT ` + recordCols + ` FROM records WHERE key IN (SELECT value FROM json_each(?))`},
		{&x.lower, st.w, `UPDATE records SET depth = ?1, hops = ?2, status = ?3, status_time = ?4,
			history = CASE WHEN status = ?3 THEN history ELSE ` + appendHistorySQL(6) + ` END, next_due = ?7 WHERE key = ?5`},
		{&x.addCount, st.w, `INSERT INTO counts (crawl_id, status, n) VALUES (?, ?, ?)
			ON CONFLICT (crawl_id, status) DO UPDATE SET n = n + excluded.n`},
		{&x.get, st.r, `SELECT ` + recordCols + ` FROM records WHERE key = ?`},
		{&x.getMany, st.r, `SELECT ` + recordCols + ` FROM records WHERE key IN (SELECT value FROM json_each(?))`},
		{&x.counts, st.r, `SELECT status, n FROM counts WHERE crawl_id = ? AND n <> 0`},
		{&x.countHost, st.r, `SELECT count(*) FROM records WHERE crawl_id = ? AND host = ?`},
		{&x.stale, st.r, `SELECT ` + recordCols + ` FROM records
			WHERE status IN ` + inFlightSQL + ` AND status_time < ? ORDER BY status_time, id LIMIT ?`},
		{&x.total, st.r, `SELECT coalesce(sum(n), 0) FROM counts`},
		{&x.due, st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY records_due
			WHERE crawl_id = ?1 AND next_due IS NOT NULL AND next_due <= ?2 ORDER BY next_due, id LIMIT ?3`},
		{&x.dueCount, st.r, `SELECT count(*) FROM records INDEXED BY records_due
			WHERE crawl_id = ?1 AND next_due IS NOT NULL AND next_due <= ?2`},
		{&x.dueNext, st.r, `SELECT min(next_due) FROM records INDEXED BY records_due
			WHERE crawl_id = ?1 AND next_due IS NOT NULL`},
		// The two ways of listing; see List.
		{&x.listByKey, st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY sqlite_autoindex_records_1
			WHERE key > ?3 AND crawl_id = ?1 AND (?2 = '' OR status = ?2) ORDER BY key LIMIT ?4`},
		{&x.listByStatus, st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY records_crawl_status
			WHERE crawl_id = ?1 AND status = ?2 AND key > ?3 ORDER BY key LIMIT ?4`},
		{&x.listCrawl, st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY records_crawl_status
			WHERE crawl_id = ?1 AND key > ?3 ORDER BY key LIMIT ?4`},
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
				encodeHistory(txindex.StartHistory(r)), r.Sitemap, lastmod, recrawl, nextDue)
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
			var ifDepth, mimeType, bytes any
			if t.IfDepth != nil {
				ifDepth = *t.IfDepth
			}
			if t.MIMEType != "" {
				mimeType = t.MIMEType
			}
			if t.Bytes != nil {
				bytes = *t.Bytes
			}
			recrawl, err := encodeRecrawl(t.Recrawl)
			if err != nil {
				return fmt.Errorf("transition record %q: %w", t.Key, err)
			}
			var crawlID string
			err = up.QueryRow(string(t.To), now, errText, httpStatus, assetKey, assetOff, assetLen, add,
				t.Key, string(t.From), ifDepth, mimeType, bytes, histEvent(t.To, nowMS),
				t.ResetAttempts, t.ClearError, txindex.Done(t.To), recrawl).Scan(&crawlID)
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

// Due returns up to limit records of crawlID whose due time is at or before
// before, earliest first, through the due index.
func (x *TxIndex) Due(ctx context.Context, crawlID string, before time.Time, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := x.due.QueryContext(ctx, crawlID, before.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("list due records of crawl %q: %w", crawlID, err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("list due records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// DueStats returns the number of records of crawlID due at before and the
// earliest due time, both from the due index.
func (x *TxIndex) DueStats(ctx context.Context, crawlID string, before time.Time) (int64, *time.Time, error) {
	var n int64
	if err := x.dueCount.QueryRowContext(ctx, crawlID, before.UnixMilli()).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("count due records of crawl %q: %w", crawlID, err)
	}
	var next sql.NullInt64
	if err := x.dueNext.QueryRowContext(ctx, crawlID).Scan(&next); err != nil {
		return 0, nil, fmt.Errorf("next due record of crawl %q: %w", crawlID, err)
	}
	if !next.Valid {
		return n, nil, nil
	}
	t := time.UnixMilli(next.Int64).UTC()
	return n, &t, nil
}

// storedRecrawl is the stored form of a record's recrawl state: JSON with
// the due time also in unix milliseconds, which the transition statement
// copies into next_due.
type storedRecrawl struct {
	txindex.Recrawl
	DueMS *int64 `json:"due_ms,omitempty"`
}

// encodeRecrawl returns the stored form of r, nil for nil.
func encodeRecrawl(r *txindex.Recrawl) (any, error) {
	if r == nil {
		return nil, nil
	}
	st := storedRecrawl{Recrawl: *r}
	if !r.Due.IsZero() {
		ms := r.Due.UnixMilli()
		st.DueMS = &ms
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode recrawl state: %w", err)
	}
	return string(b), nil
}

// decodeRecrawl is the inverse of encodeRecrawl.
func decodeRecrawl(s string) (*txindex.Recrawl, error) {
	var st storedRecrawl
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("decode recrawl state: %w", err)
	}
	return &st.Recrawl, nil
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
//
// No index orders a crawl's records by key (one would be written at a random
// place for every record), so List picks the cheaper of two ways per call:
// walking the key index from after and skipping other crawls and statuses,
// which costs about limit × all records / matching records; or reading every
// matching record through the crawl/status index and sorting, which costs
// about the matching records. The counts table gives both sizes.
func (x *TxIndex) List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	counts, err := x.Counts(ctx, crawlID)
	if err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	var matching int64
	for s, n := range counts {
		if status == "" || s == status {
			matching += n
		}
	}
	if matching == 0 {
		return nil, nil
	}
	var all int64
	if err := x.total.QueryRowContext(ctx).Scan(&all); err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	byKey := matching*matching > int64(limit)*all
	return x.list(ctx, crawlID, status, after, limit, byKey)
}

func (x *TxIndex) list(ctx context.Context, crawlID string, status contracts.Status, after string, limit int, byKey bool) ([]txindex.Record, error) {
	st := x.listByKey
	switch {
	case byKey:
	case status == "":
		st = x.listCrawl
	default:
		st = x.listByStatus
	}
	rows, err := st.QueryContext(ctx, crawlID, string(status), after, limit)
	if err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// Close stops the writer and closes the database. It is safe to call more
// than once.
func (x *TxIndex) Close() error {
	x.wr.close()
	for _, s := range []*sql.Stmt{x.existing, x.insert, x.transition, x.addCount, x.lockedGetMany, x.lower, x.get, x.getMany,
		x.counts, x.countHost, x.stale, x.listByKey, x.listByStatus, x.listCrawl, x.total, x.due, x.dueCount, x.dueNext} {
		if s != nil {
			_ = s.Close()
		}
	}
	return x.st.close()
}

type scanner interface{ Scan(dest ...any) error }

// scanRecord reads one record; it decodes the history only when asked,
// which the reads of a crawl's hot path are not.
func scanRecord(row scanner, history bool) (txindex.Record, error) {
	var r txindex.Record
	var status string
	var statusTime, createdAt int64
	var bytes, lastmod, nextDue sql.NullInt64
	var recrawl sql.NullString
	var hist sql.RawBytes
	var histStr string
	histDst := any(&hist)
	if history {
		histDst = &histStr
	}
	err := row.Scan(&r.Key, &r.CrawlID, &r.URL, &r.Host, &r.Group, &r.Depth, &r.Hops, &r.Referrer,
		&status, &statusTime, &r.Attempts, &r.Error, &r.HTTPStatus,
		&r.Asset.Key, &r.Asset.Offset, &r.Asset.Length, &createdAt, &r.MIMEType, &bytes, histDst, &r.Sitemap, &lastmod,
		&recrawl, &nextDue)
	if err != nil {
		return txindex.Record{}, err
	}
	r.Status = contracts.Status(status)
	r.StatusTime = fromNanos(statusTime)
	r.CreatedAt = fromNanos(createdAt)
	if bytes.Valid {
		r.Bytes = &bytes.Int64
	}
	if lastmod.Valid {
		t := fromNanos(lastmod.Int64)
		r.Lastmod = &t
	}
	if recrawl.Valid {
		if r.Recrawl, err = decodeRecrawl(recrawl.String); err != nil {
			return txindex.Record{}, fmt.Errorf("record %q: %w", r.Key, err)
		}
	}
	if nextDue.Valid {
		t := time.UnixMilli(nextDue.Int64).UTC()
		r.NextDue = &t
	}
	if history {
		if r.History, err = decodeHistory(histStr); err != nil {
			return txindex.Record{}, fmt.Errorf("record %q: %w", r.Key, err)
		}
	}
	return r, nil
}

// histLetter maps each status to its letter in the history column and
// histStatus back.
var histLetter, histStatus = func() (map[contracts.Status]byte, map[byte]contracts.Status) {
	l, st := map[contracts.Status]byte{}, map[byte]contracts.Status{}
	for i, s := range contracts.Statuses {
		l[s], st['a'+byte(i)] = 'a'+byte(i), s
	}
	return l, st
}()

// histEvent returns the stored form of one event.
func histEvent(s contracts.Status, ms int64) string {
	b := make([]byte, 0, histEventLen)
	b = append(b, histLetter[s])
	d := strconv.AppendInt(nil, max(ms, 0), 10)
	for range histEventLen - 1 - len(d) {
		b = append(b, '0')
	}
	return string(append(b, d...))
}

// encodeHistory returns the stored form of h.
func encodeHistory(h []txindex.Event) string {
	var b strings.Builder
	for _, e := range h {
		b.WriteString(histEvent(e.Status, e.Time.UnixMilli()))
	}
	return b.String()
}

// decodeHistory is the inverse of encodeHistory.
func decodeHistory(s string) ([]txindex.Event, error) {
	if len(s)%histEventLen != 0 {
		return nil, fmt.Errorf("decode history: length %d is not a multiple of %d", len(s), histEventLen)
	}
	out := make([]txindex.Event, 0, len(s)/histEventLen)
	for ; len(s) > 0; s = s[histEventLen:] {
		st, ok := histStatus[s[0]]
		ms, err := strconv.ParseInt(s[1:histEventLen], 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("decode history: bad event %q", s[:histEventLen])
		}
		out = append(out, txindex.Event{Status: st, Time: time.UnixMilli(ms).UTC()})
	}
	return out, nil
}

func scanRecords(rows *sql.Rows) ([]txindex.Record, error) {
	return scanRecordsHistory(rows, false)
}

func scanRecordsHistory(rows *sql.Rows, history bool) ([]txindex.Record, error) {
	defer rows.Close()
	var out []txindex.Record
	for rows.Next() {
		r, err := scanRecord(rows, history)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
