package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
)

// Search limits.
const (
	// DefaultLimit is the page size of a query whose Limit is not positive.
	DefaultLimit = 10
	// MaxLimit caps the page size of a query.
	MaxLimit = 1000
	// MaxTerms caps the number of words of a query that are searched for.
	MaxTerms = search.MaxTerms
)

// searchSchemaVersion is stored in PRAGMA user_version.
const searchSchemaVersion = 1

// The documents live in docs; docs_fts is an external-content FTS5 index
// over docs' text columns, kept in step by triggers, so that the text is
// stored once. The rank is bm25 with the title weighted highest.
var searchSchema = []string{
	`CREATE TABLE IF NOT EXISTS docs (
		rid          INTEGER PRIMARY KEY,
		id           TEXT NOT NULL UNIQUE,
		crawl_id     TEXT NOT NULL,
		title        TEXT NOT NULL,
		description  TEXT NOT NULL,
		headings     TEXT NOT NULL,
		body         TEXT NOT NULL,
		url          TEXT NOT NULL,
		content_type TEXT NOT NULL,
		language     TEXT NOT NULL,
		fetch_time   INTEGER NOT NULL,
		meta         TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS docs_crawl ON docs (crawl_id)`,
	// doc_writes counts the stores of each document id (Writes). It is a
	// table of its own so that databases made before it need no migration.
	`CREATE TABLE IF NOT EXISTS doc_writes (
		id TEXT PRIMARY KEY,
		n  INTEGER NOT NULL
	) WITHOUT ROWID`,
	`CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5 (
		title, description, headings, body, url,
		content = 'docs', content_rowid = 'rid',
		tokenize = 'unicode61 remove_diacritics 2'
	)`,
	`CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
		INSERT INTO docs_fts (rowid, title, description, headings, body, url)
		VALUES (new.rid, new.title, new.description, new.headings, new.body, new.url);
	END`,
	`CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
		INSERT INTO docs_fts (docs_fts, rowid, title, description, headings, body, url)
		VALUES ('delete', old.rid, old.title, old.description, old.headings, old.body, old.url);
	END`,
	`CREATE TRIGGER IF NOT EXISTS docs_au AFTER UPDATE ON docs BEGIN
		INSERT INTO docs_fts (docs_fts, rowid, title, description, headings, body, url)
		VALUES ('delete', old.rid, old.title, old.description, old.headings, old.body, old.url);
		INSERT INTO docs_fts (rowid, title, description, headings, body, url)
		VALUES (new.rid, new.title, new.description, new.headings, new.body, new.url);
	END`,
	// Columns: title, description, headings, body, url.
	`INSERT INTO docs_fts (docs_fts, rank) VALUES ('rank', 'bm25(10.0, 4.0, 5.0, 1.0, 2.0)')`,
	// Merging fewer, larger runs of index segments costs less per document
	// (about 13% measured against the default of 4) at little cost to queries.
	`INSERT INTO docs_fts (docs_fts, rank) VALUES ('automerge', 8)`,
}

const docCols = `id, crawl_id, title, description, headings, body, url, content_type, language, fetch_time, meta`

// Search is the full-text document index (search.Index) in one SQLite file,
// on FTS5.
type Search struct {
	st *store
	wr *writer

	upsert, del, count *sql.Stmt
}

var _ search.Index = (*Search)(nil)

// OpenSearch opens or creates the search index in the SQLite file at path.
func OpenSearch(path string) (*Search, error) {
	st, err := openStore(path, searchSchemaVersion, searchSchema)
	if err != nil {
		return nil, err
	}
	s := &Search{st: st}
	if s.upsert, err = st.w.Prepare(`INSERT INTO docs (` + docCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (id) DO UPDATE SET crawl_id = excluded.crawl_id, title = excluded.title,
		description = excluded.description, headings = excluded.headings, body = excluded.body,
		url = excluded.url, content_type = excluded.content_type, language = excluded.language,
		fetch_time = excluded.fetch_time, meta = excluded.meta`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	if s.del, err = st.w.Prepare(`DELETE FROM docs WHERE id = ?`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	if s.count, err = st.w.Prepare(`INSERT INTO doc_writes (id, n) VALUES (?, 1)
		ON CONFLICT (id) DO UPDATE SET n = n + 1`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	s.wr = newWriter(st.w)
	return s, nil
}

// Upsert stores docs in one transaction, each replacing any document with
// its ID. A document marked NoIndex is not stored, and removes a stored
// document with its ID.
func (s *Search) Upsert(ctx context.Context, docs []contracts.Document) error {
	if len(docs) == 0 {
		return nil
	}
	type row struct {
		id   string
		args []any
		last bool // the last version of id in docs, the one Writes counts
	}
	last := make(map[string]int, len(docs))
	for i, d := range docs {
		last[d.ID] = i
	}
	rows := make([]row, len(docs))
	for i, d := range docs {
		if d.ID == "" {
			return fmt.Errorf("upsert document of %q: empty id", d.URL)
		}
		rows[i].id = d.ID
		rows[i].last = last[d.ID] == i
		if d.NoIndex {
			continue
		}
		body := d.Text
		d.Text = ""
		meta, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("upsert document %q: %w", d.ID, err)
		}
		rows[i].args = []any{d.ID, d.CrawlID, d.Title, d.Description, strings.Join(d.Headings, "\n"), body,
			d.URL, d.ContentType, d.Language, nanos(d.FetchTime), string(meta)}
	}
	return s.wr.do(ctx, func(tx *sql.Tx) error {
		up, del, count := tx.Stmt(s.upsert), tx.Stmt(s.del), tx.Stmt(s.count)
		defer up.Close()
		defer del.Close()
		defer count.Close()
		for _, r := range rows {
			var err error
			if r.args == nil {
				_, err = del.Exec(r.id)
			} else if _, err = up.Exec(r.args...); err == nil && r.last {
				_, err = count.Exec(r.id)
			}
			if err != nil {
				return fmt.Errorf("upsert document %q: %w", r.id, err)
			}
		}
		return nil
	})
}

// Get returns the document with id, or search.ErrNotFound.
func (s *Search) Get(ctx context.Context, id string) (contracts.Document, error) {
	var d contracts.Document
	var title, desc, headings, body, url, ctype, lang, meta string
	var crawlID string
	var fetch int64
	err := s.st.r.QueryRowContext(ctx, `SELECT `+docCols+` FROM docs WHERE id = ?`, id).
		Scan(&d.ID, &crawlID, &title, &desc, &headings, &body, &url, &ctype, &lang, &fetch, &meta)
	if errors.Is(err, sql.ErrNoRows) {
		return contracts.Document{}, fmt.Errorf("get document %q: %w", id, search.ErrNotFound)
	}
	if err != nil {
		return contracts.Document{}, fmt.Errorf("get document %q: %w", id, err)
	}
	if err := json.Unmarshal([]byte(meta), &d); err != nil {
		return contracts.Document{}, fmt.Errorf("get document %q: decode: %w", id, err)
	}
	d.Text = body
	return d, nil
}

// Search returns one page of the documents that contain every word of q.Q,
// best first. Words are letters and digits; everything else in q.Q separates
// words and has no meaning, so no input is a syntax error. A query without
// words finds nothing. Limit defaults to DefaultLimit and is capped at
// MaxLimit. Snippets are plain text.
func (s *Search) Search(ctx context.Context, q search.Query) (search.Result, error) {
	match := MatchExpr(q.Q)
	if match == "" {
		return search.Result{Hits: []contracts.SearchHit{}}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	offset := max(q.Offset, 0)

	countQ := `SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?`
	args := []any{match}
	filter := ""
	if q.CrawlID != "" {
		countQ = `SELECT count(*) FROM docs_fts JOIN docs d ON d.rid = docs_fts.rowid
			WHERE docs_fts MATCH ? AND d.crawl_id = ?`
		filter = ` AND d.crawl_id = ?`
		args = append(args, q.CrawlID)
	}
	// ORDER BY rank lets FTS5 rank the matches itself and hand them over in
	// order, so LIMIT stops early and snippets are made only for the page.
	hitsQ := `SELECT d.id, d.crawl_id, d.url, d.title, d.description, d.content_type, d.language, d.fetch_time,
			snippet(docs_fts, -1, '', '', '…', 24), rank
		FROM docs_fts JOIN docs d ON d.rid = docs_fts.rowid
		WHERE docs_fts MATCH ?` + filter + ` ORDER BY rank LIMIT ? OFFSET ?`

	// One read transaction, so that Total and Hits describe the same state.
	tx, err := s.st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	defer func() { _ = tx.Rollback() }()
	var res search.Result
	if err := tx.QueryRowContext(ctx, countQ, args...).Scan(&res.Total); err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	res.Hits = []contracts.SearchHit{}
	if res.Total <= int64(offset) {
		return res, nil
	}
	rows, err := tx.QueryContext(ctx, hitsQ, append(args, limit, offset)...)
	if err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	defer rows.Close()
	for rows.Next() {
		var h contracts.SearchHit
		var fetch int64
		var rank float64
		if err := rows.Scan(&h.ID, &h.CrawlID, &h.URL, &h.Title, &h.Description, &h.ContentType, &h.Language,
			&fetch, &h.Snippet, &rank); err != nil {
			return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
		}
		h.FetchTime = fromNanos(fetch)
		h.Score = -rank // bm25 is lower for better matches
		res.Hits = append(res.Hits, h)
	}
	if err := rows.Err(); err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	return res, nil
}

// Count returns the number of documents of crawlID, or of all crawls when
// crawlID is empty.
func (s *Search) Count(ctx context.Context, crawlID string) (int64, error) {
	var n int64
	var err error
	if crawlID == "" {
		err = s.st.r.QueryRowContext(ctx, `SELECT count(*) FROM docs`).Scan(&n)
	} else {
		err = s.st.r.QueryRowContext(ctx, `SELECT count(*) FROM docs WHERE crawl_id = ?`, crawlID).Scan(&n)
	}
	if err != nil {
		return 0, fmt.Errorf("count documents of crawl %q: %w", crawlID, err)
	}
	return n, nil
}

// Writes returns how many times the document with id has been stored, or
// search.ErrNotFound when none is stored.
func (s *Search) Writes(ctx context.Context, id string) (int64, error) {
	var n int64
	err := s.st.r.QueryRowContext(ctx, `SELECT w.n FROM docs d JOIN doc_writes w ON w.id = d.id WHERE d.id = ?`, id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("count writes of document %q: %w", id, search.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("count writes of document %q: %w", id, err)
	}
	return n, nil
}

// Close stops the writer and closes the database. It is safe to call more
// than once.
func (s *Search) Close() error {
	s.wr.close()
	_ = s.upsert.Close()
	_ = s.del.Close()
	_ = s.count.Close()
	return s.st.close()
}

// MatchExpr turns user input into an FTS5 query that cannot be a syntax
// error: each word (a run of letters, digits and combining marks holding at
// least one letter or digit) becomes a quoted string, and the strings are
// ANDed. At most MaxTerms words are kept. It returns "" when q has no word.
func MatchExpr(q string) string { return search.Quoted(q) }
