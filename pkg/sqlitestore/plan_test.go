package sqlitestore

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestQueryPlans checks that the hot queries use their indexes: no full scan
// of a table and no sort where an index gives the order.
func TestQueryPlans(t *testing.T) {
	x := open(t, filepath.Join(t.TempDir(), "tx.db"), OpenTxIndex)
	s := open(t, filepath.Join(t.TempDir(), "search.db"), OpenSearch)
	tests := []struct {
		name   string
		db     *sql.DB
		q      string
		args   []any
		want   string // a line the plan must contain
		noSort bool
	}{
		{"existing keys", x.st.w, `SELECT key FROM records WHERE key IN (SELECT value FROM json_each(?))`, []any{"[]"},
			"USING COVERING INDEX sqlite_autoindex_records_1 (key=?)", false},
		{"get", x.st.r, `SELECT ` + recordCols + ` FROM records WHERE key = ?`, []any{"k"},
			"USING INDEX sqlite_autoindex_records_1 (key=?)", true},
		{"transition", x.st.w, `UPDATE records SET status = ? WHERE key = ? AND status = ? RETURNING crawl_id`, []any{"a", "b", "c"},
			"USING INDEX sqlite_autoindex_records_1 (key=?)", true},
		{"counts", x.st.r, `SELECT status, n FROM counts WHERE crawl_id = ? AND n <> 0`, []any{"c"},
			"USING PRIMARY KEY (crawl_id=?)", true},
		{"count host", x.st.r, `SELECT count(*) FROM records WHERE crawl_id = ? AND host = ?`, []any{"c", "h"},
			"USING COVERING INDEX records_crawl_host (crawl_id=? AND host=?)", true},
		{"stale", x.st.r, `SELECT ` + recordCols + ` FROM records WHERE ` + staleSQL + ` AND status_time < ? ORDER BY status_time, id LIMIT ?`, []any{1, 2},
			"USING INDEX records_stale (status_time<?)", true},
		{"stale of a shard", x.st.r, `SELECT ` + recordCols + ` FROM records WHERE ` + loadingSQL + ` AND loader_shard = ? AND status_time < ? ORDER BY status_time, id LIMIT ?`, []any{"00/1", 1, 2},
			"USING INDEX records_loading (loader_shard=? AND status_time<?)", true},
		{"waiting", x.st.r, `SELECT ` + recordCols + ` FROM records
			WHERE key > ? AND status = 'to-be-loaded' AND loader_shard = ? ORDER BY key LIMIT ?`, []any{"", "00/1", 2},
			"USING INDEX sqlite_autoindex_records_1 (key>?)", true},
		// The due queries as OpenTxIndex prepares them, and without the
		// INDEXED BY clause: the planner must choose records_due on its own
		// too (INDEXED BY turns a lost index into an error, not a scan), and
		// the index's order (next_due, then the rowid) must spare the sort.
		{"due", x.st.r, `SELECT ` + recordCols + ` FROM records INDEXED BY records_due
			WHERE crawl_id = ?1 AND next_due IS NOT NULL AND next_due <= ?2 ORDER BY next_due, id LIMIT ?3`, []any{"c", 1, 10},
			"USING INDEX records_due (crawl_id=? AND next_due>? AND next_due<?)", true},
		{"due unforced", x.st.r, `SELECT ` + recordCols + ` FROM records
			WHERE crawl_id = ?1 AND next_due IS NOT NULL AND next_due <= ?2 ORDER BY next_due, id LIMIT ?3`, []any{"c", 1, 10},
			"USING INDEX records_due (crawl_id=? AND next_due>? AND next_due<?)", true},
		{"due count", x.st.r, `SELECT count(*) FROM records INDEXED BY records_due
			WHERE crawl_id = ?1 AND next_due IS NOT NULL AND next_due <= ?2`, []any{"c", 1},
			"USING COVERING INDEX records_due (crawl_id=? AND next_due>? AND next_due<?)", true},
		{"due count unforced", x.st.r, `SELECT count(*) FROM records
			WHERE crawl_id = ?1 AND next_due IS NOT NULL AND next_due <= ?2`, []any{"c", 1},
			"USING COVERING INDEX records_due (crawl_id=? AND next_due>? AND next_due<?)", true},
		{"next due", x.st.r, `SELECT min(next_due) FROM records INDEXED BY records_due
			WHERE crawl_id = ?1 AND next_due IS NOT NULL`, []any{"c"},
			"USING COVERING INDEX records_due (crawl_id=? AND next_due>?)", true},
		{"next due unforced", x.st.r, `SELECT min(next_due) FROM records
			WHERE crawl_id = ?1 AND next_due IS NOT NULL`, []any{"c"},
			"USING COVERING INDEX records_due (crawl_id=? AND next_due>?)", true},
		// Upsert's full-text writes read the batch's rows through the
		// view web_text by id.
		{"index batch", s.st.w, `SELECT rid, ` + ftsCols + ` FROM web_text WHERE id IN (SELECT value FROM json_each(?)) ORDER BY rid`, []any{"[]"},
			"USING INDEX sqlite_autoindex_web_1 (id=?)", false},
		{"count documents", s.st.r, `SELECT coalesce((SELECT n FROM doc_counts WHERE crawl_id = ?), 0)`, []any{"c"},
			"USING PRIMARY KEY (crawl_id=?)", true},
		{"search", s.st.r, `SELECT d.id, snippet(web_fts, -1, '', '', '…', 24), rank FROM web_fts JOIN web d ON d.rid = web_fts.rowid
			WHERE web_fts MATCH ? AND d.crawl_id = ? ORDER BY rank LIMIT ? OFFSET ?`, []any{`"x"`, "c", 10, 0},
			"SCAN web_fts VIRTUAL TABLE", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := tc.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+tc.q, tc.args...)
			if err != nil {
				t.Fatalf("explain: %v", err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatalf("scan plan: %v", err)
				}
				plan = append(plan, detail)
			}
			text := strings.Join(plan, "\n")
			if !strings.Contains(text, tc.want) {
				t.Errorf("plan = %q, want a line with %q", text, tc.want)
			}
			for _, line := range plan {
				if line == "SCAN records" || line == "SCAN d" || line == "SCAN web" {
					t.Errorf("plan = %q, want no full table scan", text)
				}
			}
			if tc.noSort && strings.Contains(text, "TEMP B-TREE") {
				t.Errorf("plan = %q, want no sort", text)
			}
		})
	}
}
