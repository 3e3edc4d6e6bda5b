package sqlitestore

import (
	"database/sql"
	"encoding/json"
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
// 6 are migrated when opened (migrateTxV2).
const txSchemaVersion = 7

// staleSQL and loadingSQL are the conditions of the two partial indexes of
// pending records: records_stale holds those the recovery sweep reads by
// status time alone, records_loading the to-be-loaded records of a loader
// shard, by shard and status time, which the sweep reads for the shards
// without a live owner only. Queries must spell them identically for
// SQLite to use the indexes.
var (
	staleSQL   = `(status IN ` + inFlightSQL + ` AND NOT (status = 'to-be-loaded' AND loader_shard <> ''))`
	loadingSQL = `(status = 'to-be-loaded' AND loader_shard <> '')`
)

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
		next_due     INTEGER,
		render       TEXT NOT NULL DEFAULT '',
		loader_shard TEXT NOT NULL DEFAULT ''
	)`,
	`CREATE INDEX IF NOT EXISTS records_crawl_status ON records (crawl_id, status)`,
	`CREATE INDEX IF NOT EXISTS records_crawl_host ON records (crawl_id, host)`,
	`CREATE INDEX IF NOT EXISTS records_stale ON records (status_time) WHERE ` + staleSQL,
	`CREATE INDEX IF NOT EXISTS records_loading ON records (loader_shard, status_time) WHERE ` + loadingSQL,
	// Only the records of continuous crawls that are settled have a due
	// time: the index holds those, in due order per crawl.
	`CREATE INDEX IF NOT EXISTS records_due ON records (crawl_id, next_due) WHERE next_due IS NOT NULL`,
	`CREATE TABLE IF NOT EXISTS counts (
		crawl_id TEXT NOT NULL,
		status   TEXT NOT NULL,
		n        INTEGER NOT NULL,
		PRIMARY KEY (crawl_id, status)
	) WITHOUT ROWID`,
	// One row per loader shard ever claimed (txindex.Owners).
	`CREATE TABLE IF NOT EXISTS shard_leases (
		shard    TEXT PRIMARY KEY,
		owner    TEXT NOT NULL,
		epoch    INTEGER NOT NULL,
		expires  INTEGER NOT NULL,
		released INTEGER NOT NULL
	) WITHOUT ROWID`,
}

const recordCols = `key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
	attempts, error, http_status, asset_key, asset_offset, asset_length, created_at, mime_type, bytes, history, sitemap, lastmod,
	recrawl, next_due, render, loader_shard`

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
	loadingShards, staleLoading, waiting      *sql.Stmt
	lease, putLease                           *sql.Stmt
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
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (key) DO NOTHING`},
		// NULL outcome arguments leave the stored value alone. A change of
		// status (not a lease renewal) appends to the history in the same
		// write. next_due follows txindex.Apply: the recrawl state's due
		// time in a terminal status (?17 true), NULL in any other. render
		// is set, empty included, by a transition that carries a fetch
		// (?19 not NULL: txindex.Transition.Fetched).
		{&x.transition, st.w, `UPDATE records SET status = ?1, status_time = ?2,
			error = CASE WHEN ?16 THEN '' ELSE coalesce(?3, error) END, http_status = coalesce(?4, http_status),
			asset_key = coalesce(?5, asset_key), asset_offset = coalesce(?6, asset_offset),
			asset_length = coalesce(?7, asset_length), attempts = CASE WHEN ?15 THEN 0 ELSE attempts END + ?8,
			mime_type = coalesce(?12, mime_type), bytes = coalesce(?13, bytes),
			history = CASE WHEN status = ?1 THEN history ELSE ` + appendHistorySQL(14) + ` END,
			recrawl = coalesce(?18, recrawl), render = coalesce(?19, render),
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
		{&x.stale, st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY records_stale
			WHERE ` + staleSQL + ` AND status_time < ? ORDER BY status_time, id LIMIT ?`},
		// The shards that have to-be-loaded records, one index seek each
		// (a skip scan of records_loading), and a shard's stale ones.
		{&x.loadingShards, st.r, `WITH RECURSIVE s(v) AS (
			SELECT (SELECT min(loader_shard) FROM records INDEXED BY records_loading WHERE ` + loadingSQL + `)
			UNION ALL
			SELECT (SELECT min(loader_shard) FROM records INDEXED BY records_loading WHERE ` + loadingSQL + ` AND loader_shard > v)
			FROM s WHERE v IS NOT NULL)
			SELECT v FROM s WHERE v IS NOT NULL`},
		{&x.staleLoading, st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY records_loading
			WHERE ` + loadingSQL + ` AND loader_shard = ? AND status_time < ? ORDER BY status_time, id LIMIT ?`},
		// A shard's waiting records, in key order: a listing reads the
		// table once in key order, whatever its pages.
		{&x.waiting, st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY sqlite_autoindex_records_1
			WHERE key > ? AND status = 'to-be-loaded' AND loader_shard = ? ORDER BY key LIMIT ?`},
		{&x.lease, st.w, `SELECT owner, epoch, expires, released FROM shard_leases WHERE shard = ?`},
		{&x.putLease, st.w, `INSERT INTO shard_leases (shard, owner, epoch, expires, released) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (shard) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch,
			expires = excluded.expires, released = excluded.released`},
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

// Close stops the writer and closes the database. It is safe to call more
// than once.
func (x *TxIndex) Close() error {
	x.wr.close()
	for _, s := range []*sql.Stmt{x.existing, x.insert, x.transition, x.addCount, x.lockedGetMany, x.lower, x.get, x.getMany,
		x.counts, x.countHost, x.stale, x.listByKey, x.listByStatus, x.listCrawl, x.total, x.due, x.dueCount, x.dueNext,
		x.loadingShards, x.staleLoading, x.waiting, x.lease, x.putLease} {
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
		&recrawl, &nextDue, &r.Render, &r.Shard)
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
