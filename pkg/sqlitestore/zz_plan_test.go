package sqlitestore

import (
	"path/filepath"
	"testing"
)

func TestZZPlan(t *testing.T) {
	x, err := OpenTxIndex(filepath.Join(t.TempDir(), "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	s, err := OpenSearch(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []struct {
		db   *store
		q    string
		args []any
	}{
		{x.st, `SELECT ` + recordCols + ` FROM records WHERE status IN ` + inFlightSQL + ` AND status_time < ? ORDER BY status_time, id LIMIT ?`, []any{1, 2}},
		{x.st, `SELECT ` + recordCols + ` FROM records WHERE crawl_id = ? AND status = ? AND key > ? ORDER BY key LIMIT ?`, []any{"a", "b", "", 3}},
		{x.st, `SELECT status, n FROM counts WHERE crawl_id = ? AND n <> 0`, []any{"a"}},
		{x.st, `SELECT key FROM records WHERE key IN (SELECT value FROM json_each(?))`, []any{"[]"}},
		{x.st, `SELECT ` + recordCols + ` FROM records INDEXED BY sqlite_autoindex_records_1 WHERE key > ?3 AND crawl_id = ?1 AND (?2 = '' OR status = ?2) ORDER BY key LIMIT ?4`, []any{"a", "b", "", 3}},
		{x.st, `SELECT ` + recordCols + ` FROM records INDEXED BY records_crawl_status WHERE crawl_id = ?1 AND key > ?3 ORDER BY key LIMIT ?4`, []any{"a", "b", "", 3}},
		{x.st, `UPDATE records SET status = ? WHERE key = ? AND status = ? RETURNING crawl_id`, []any{"a", "b", "c"}},
		{x.st, `SELECT count(*) FROM records WHERE crawl_id = ? AND host = ?`, []any{"a", "b"}},
		{s.st, `SELECT d.id, snippet(docs_fts, -1, '', '', '…', 24), rank FROM docs_fts JOIN docs d ON d.rid = docs_fts.rowid WHERE docs_fts MATCH ? AND d.crawl_id = ? ORDER BY rank LIMIT ? OFFSET ?`, []any{"x", "c", 10, 0}},
		{s.st, `SELECT d.id, snippet(docs_fts, -1, '', '', '…', 24), rank FROM docs_fts JOIN docs d ON d.rid = docs_fts.rowid WHERE docs_fts MATCH ? ORDER BY rank LIMIT ? OFFSET ?`, []any{"x", 10, 0}},
	} {
		rows, err := q.db.r.Query("EXPLAIN QUERY PLAN "+q.q, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(q.q)
		for rows.Next() {
			var id, parent, notused int
			var detail string
			rows.Scan(&id, &parent, &notused, &detail)
			t.Log("   ", detail)
		}
		rows.Close()
	}
}
