package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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

// searchSchemaVersion is stored in PRAGMA user_version. Version 4 is
// version 3 with web's column cjk and web_fts indexing the view web_text,
// which splits CJK text into characters (see cjkSplit). Version 3 is
// version 2 without the triggers that kept web_fts in step with web, row by
// row (Upsert now writes web_fts itself, one statement per batch); version 2
// holds YaCy web documents (contracts.Document) in the table web; version 1
// held gridcrawl's earlier document shape in the table docs. Older versions
// are migrated when opened (migrateSearchV1, migrateSearchV2).
const searchSchemaVersion = 4

// The documents live in web, one row per document: the columns that queries
// filter and rank on, and the whole document as JSON (without its text,
// which is the body column). web_fts is an external-content FTS5 index over
// web's text columns as the view web_text shows them (split into characters
// where the document holds CJK text, cjk = 1), so that the text is stored
// once; Upsert keeps it in step with web. The rank is bm25 with the title
// weighted highest.
var searchSchema = []string{
	`CREATE TABLE IF NOT EXISTS web (
		rid         INTEGER PRIMARY KEY,
		id          TEXT NOT NULL UNIQUE,
		crawl_id    TEXT NOT NULL,
		title       TEXT NOT NULL,
		description TEXT NOT NULL,
		headings    TEXT NOT NULL,
		body        TEXT NOT NULL,
		url         TEXT NOT NULL,
		host        TEXT NOT NULL,
		file_ext    TEXT NOT NULL,
		collection  TEXT NOT NULL, -- "\n"-separated, with a leading and a trailing "\n"
		doc         TEXT NOT NULL,
		cjk         INTEGER NOT NULL DEFAULT 0 -- 1: the text holds CJK characters (search.HasCJK)
	)`,
	// A crawl's documents in id order (Documents pages through them):
	// with an index of crawl_id alone, each page read and sorted every
	// document of the crawl, a whole export's cost growing with the square
	// of its size.
	`CREATE INDEX IF NOT EXISTS web_crawl_id ON web (crawl_id, id)`,
	`DROP INDEX IF EXISTS web_crawl`,
	`CREATE INDEX IF NOT EXISTS web_host ON web (host)`,
	// doc_writes counts the stores of each document id (Writes).
	`CREATE TABLE IF NOT EXISTS doc_writes (
		id TEXT PRIMARY KEY,
		n  INTEGER NOT NULL
	) WITHOUT ROWID`,
	webTextView,
	`CREATE VIRTUAL TABLE IF NOT EXISTS web_fts USING fts5 (
		title, description, headings, body, url,
		content = 'web_text', content_rowid = 'rid',
		tokenize = 'unicode61 remove_diacritics 2'
	)`,
	// doc_counts counts each crawl's documents, kept by triggers in the
	// transaction of every change, so that Count reads one row however large
	// the crawl: counting web's rows took time in proportion to the crawl on
	// every status request.
	`CREATE TABLE IF NOT EXISTS doc_counts (
		crawl_id TEXT PRIMARY KEY,
		n        INTEGER NOT NULL
	) WITHOUT ROWID`,
	// An index made before doc_counts existed is counted once, here: an
	// empty doc_counts beside documents can only be that.
	`INSERT INTO doc_counts (crawl_id, n) SELECT crawl_id, count(*) FROM web
		WHERE NOT EXISTS (SELECT 1 FROM doc_counts) GROUP BY crawl_id`,
	`CREATE TRIGGER IF NOT EXISTS web_count_ai AFTER INSERT ON web BEGIN
		INSERT INTO doc_counts (crawl_id, n) VALUES (new.crawl_id, 1)
			ON CONFLICT (crawl_id) DO UPDATE SET n = n + 1;
	END`,
	`CREATE TRIGGER IF NOT EXISTS web_count_ad AFTER DELETE ON web BEGIN
		UPDATE doc_counts SET n = n - 1 WHERE crawl_id = old.crawl_id;
	END`,
	`CREATE TRIGGER IF NOT EXISTS web_count_au AFTER UPDATE OF crawl_id ON web
		WHEN new.crawl_id IS NOT old.crawl_id BEGIN
		UPDATE doc_counts SET n = n - 1 WHERE crawl_id = old.crawl_id;
		INSERT INTO doc_counts (crawl_id, n) VALUES (new.crawl_id, 1)
			ON CONFLICT (crawl_id) DO UPDATE SET n = n + 1;
	END`,
	// Columns: title, description, headings, body, url.
	`INSERT INTO web_fts (web_fts, rank) VALUES ('rank', 'bm25(10.0, 4.0, 5.0, 1.0, 2.0)')`,
	// Merging fewer, larger runs of index segments costs less per document
	// (about 13% measured against the default of 4) at little cost to queries.
	`INSERT INTO web_fts (web_fts, rank) VALUES ('automerge', 8)`,
	// FTS5 keeps the terms of new documents in memory and writes them out as
	// one index segment when a transaction commits or when they exceed the
	// hash size. The default of 1 MB held about 50 documents of 15 KB of
	// text, well short of one transaction's batch; fewer, larger segments
	// leave less to merge. It bounds memory, not what is durable.
	`INSERT INTO web_fts (web_fts, rank) VALUES ('hashsize', 8388608)`,
}

const docCols = `id, crawl_id, title, description, headings, body, url, host, file_ext, collection, doc`

// rowCols are the columns of web that Upsert writes: docCols and cjk.
const rowCols = docCols + `, cjk`

// webTextView is the content of web_fts: web's text columns, split by
// cjkSplit in the rows that hold CJK text. Every column of a row goes
// through the same function on indexing and on deleting, so that FTS5
// deletes exactly the tokens it indexed.
const webTextView = `CREATE VIEW IF NOT EXISTS web_text AS SELECT rid, id,
		iif(cjk, ` + cjkFunc + `(title), title) AS title,
		iif(cjk, ` + cjkFunc + `(description), description) AS description,
		iif(cjk, ` + cjkFunc + `(headings), headings) AS headings,
		iif(cjk, ` + cjkFunc + `(body), body) AS body,
		url FROM web`

// Search is the full-text document index (search.Index) in one SQLite file,
// on FTS5.
type Search struct {
	st *store
	wr *writer

	upsert, del, count, ftsDel, ftsAdd *sql.Stmt
}

// ftsCols are web_fts's columns, which are web_text's columns of the same
// names.
const ftsCols = `title, description, headings, body, url`

var _ search.Index = (*Search)(nil)

// OpenSearch opens or creates the search index in the SQLite file at path.
func OpenSearch(path string) (*Search, error) {
	if err := migrateSearchV1(path); err != nil {
		return nil, fmt.Errorf("open search %q: %w", path, err)
	}
	if err := migrateSearchV2(path); err != nil {
		return nil, fmt.Errorf("open search %q: %w", path, err)
	}
	st, err := openStore(path, searchSchemaVersion, searchSchema)
	if err != nil {
		return nil, err
	}
	s := &Search{st: st}
	if s.upsert, err = st.w.Prepare(`INSERT INTO web (` + rowCols + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (id) DO UPDATE SET crawl_id = excluded.crawl_id, title = excluded.title,
		description = excluded.description, headings = excluded.headings, body = excluded.body,
		url = excluded.url, host = excluded.host, file_ext = excluded.file_ext,
		collection = excluded.collection, doc = excluded.doc, cjk = excluded.cjk`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	if s.del, err = st.w.Prepare(`DELETE FROM web WHERE id = ?`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	if s.count, err = st.w.Prepare(`INSERT INTO doc_writes (id, n) VALUES (?, 1)
		ON CONFLICT (id) DO UPDATE SET n = n + 1`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	// Both take the ids of a batch as one JSON array. An external-content
	// index is told what to remove with the values it indexed, so ftsDel
	// runs before the rows change.
	if s.ftsDel, err = st.w.Prepare(`INSERT INTO web_fts (web_fts, rowid, ` + ftsCols + `)
		SELECT 'delete', rid, ` + ftsCols + ` FROM web_text WHERE id IN (SELECT value FROM json_each(?)) ORDER BY rid`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	if s.ftsAdd, err = st.w.Prepare(`INSERT INTO web_fts (rowid, ` + ftsCols + `)
		SELECT rid, ` + ftsCols + ` FROM web_text WHERE id IN (SELECT value FROM json_each(?)) ORDER BY rid`); err != nil {
		_ = st.close()
		return nil, fmt.Errorf("open search %q: prepare: %w", path, err)
	}
	s.wr = newWriter(st.w)
	return s, nil
}

// headings joins a document's headings of every level, one per line.
func headings(d *contracts.Document) string {
	var b strings.Builder
	for _, hs := range [][]string{d.H1, d.H2, d.H3, d.H4, d.H5, d.H6} {
		for _, h := range hs {
			b.WriteString(h)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// collections is the collection column of d: its collections between
// newlines, so that one is found with instr(collection, "\n"+name+"\n").
func collections(d *contracts.Document) string {
	if len(d.Collection) == 0 {
		return ""
	}
	return "\n" + strings.Join(d.Collection, "\n") + "\n"
}

// rowArgs returns the values of rowCols for d.
func rowArgs(d contracts.Document) ([]any, error) {
	body := d.Text
	d.Text = ""
	doc, err := json.Marshal(&d)
	if err != nil {
		return nil, err
	}
	title, desc, heads := strings.Join(d.Title, "\n"), strings.Join(d.Description, "\n"), headings(&d)
	cjk := search.HasCJK(title) || search.HasCJK(desc) || search.HasCJK(heads) || search.HasCJK(body)
	return []any{d.ID, d.CrawlID, title, desc, heads, body, d.URL, d.Host, d.FileExt, collections(&d), string(doc), cjk}, nil
}

// Upsert stores docs in one transaction, each replacing any document with
// its ID. A document marked NoIndex is not stored, and removes a stored
// document with its ID.
//
// The full-text index is written with one statement for the whole batch,
// not one per document: FTS5 writes its pending terms out as a new index
// segment at the start of every statement of a transaction that may need
// rolling back (it implements the statement's savepoint that way), so one
// statement per document made one segment per document, and merging those
// segments cost more than indexing the text.
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
	ids := make([]string, 0, len(last))
	rows := make([]row, len(docs))
	for i := range docs {
		d := docs[i]
		if d.ID == "" {
			return fmt.Errorf("upsert document of %q: empty id", d.URL)
		}
		// The ids reach SQLite as a JSON array, which cannot carry invalid
		// UTF-8 unchanged.
		if !utf8.ValidString(d.ID) {
			return fmt.Errorf("upsert document of %q: id %q is not valid UTF-8", d.URL, d.ID)
		}
		rows[i].id = d.ID
		rows[i].last = last[d.ID] == i
		if rows[i].last {
			ids = append(ids, d.ID)
		}
		if d.NoIndex {
			continue
		}
		args, err := rowArgs(d)
		if err != nil {
			return fmt.Errorf("upsert document %q: %w", d.ID, err)
		}
		rows[i].args = args
	}
	idList, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("upsert documents: %w", err)
	}
	return s.wr.do(ctx, func(tx *sql.Tx) error {
		// The index entries of the stored versions of ids go first, then
		// the rows change, then the rows of ids that are stored now are
		// indexed: each id once, whatever docs did to it in between.
		if _, err := tx.Stmt(s.ftsDel).Exec(idList); err != nil {
			return fmt.Errorf("upsert documents: unindex: %w", err)
		}
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
		if _, err := tx.Stmt(s.ftsAdd).Exec(idList); err != nil {
			return fmt.Errorf("upsert documents: index: %w", err)
		}
		return nil
	})
}

// Get returns the document with id, or search.ErrNotFound.
func (s *Search) Get(ctx context.Context, id string) (contracts.Document, error) {
	var d contracts.Document
	var body, doc string
	err := s.st.r.QueryRowContext(ctx, `SELECT body, doc FROM web WHERE id = ?`, id).Scan(&body, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return contracts.Document{}, fmt.Errorf("get document %q: %w", id, search.ErrNotFound)
	}
	if err != nil {
		return contracts.Document{}, fmt.Errorf("get document %q: %w", id, err)
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return contracts.Document{}, fmt.Errorf("get document %q: decode: %w", id, err)
	}
	d.Text = body
	return d, nil
}

// Documents returns up to limit documents of crawlID (all crawls if empty)
// with ids after after, in id order (see search.Index).
func (s *Search) Documents(ctx context.Context, crawlID, after string, limit int) ([]contracts.Document, error) {
	limit = min(max(limit, 1), search.MaxExportPage)
	q, args := documentsQuery(crawlID, after, limit)
	rows, err := s.st.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("export documents of crawl %q: %w", crawlID, err)
	}
	defer rows.Close()
	out := make([]contracts.Document, 0, limit)
	for rows.Next() {
		var body, doc string
		if err := rows.Scan(&body, &doc); err != nil {
			return nil, fmt.Errorf("export documents of crawl %q: %w", crawlID, err)
		}
		var d contracts.Document
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			return nil, fmt.Errorf("export documents of crawl %q: decode: %w", crawlID, err)
		}
		d.Text = body
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export documents of crawl %q: %w", crawlID, err)
	}
	return out, nil
}

// documentsQuery is the query of one page of Documents.
func documentsQuery(crawlID, after string, limit int) (string, []any) {
	if crawlID == "" {
		return `SELECT body, doc FROM web WHERE id > ? ORDER BY id LIMIT ?`, []any{after, limit}
	}
	return `SELECT body, doc FROM web WHERE crawl_id = ? AND id > ? ORDER BY id LIMIT ?`, []any{crawlID, after, limit}
}

// Search returns one page of the documents that match q.Q (see
// search.Parse: words, phrases, exclusions, site:, filetype:, inurl:),
// best first by bm25, or in the order they were stored when q.Q has only
// operators; one per URL unless q.AllCrawls (see search.Query). No input
// is a syntax error; a query that selects nothing (no words and no
// operators) finds nothing. Limit defaults to DefaultLimit
// and is capped at MaxLimit. Snippets are plain text.
func (s *Search) Search(ctx context.Context, q search.Query) (search.Result, error) {
	p := search.Parse(q.Q)
	if !p.Matches() {
		return search.Result{Hits: []contracts.SearchHit{}}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	offset := max(q.Offset, 0)

	from, args := s.where(p, q)
	snippet, order, rank := `substr(d.body, 1, 160)`, `d.rid`, `0.0`
	if p.HasTerms() {
		// ORDER BY rank lets FTS5 rank the matches itself and hand them over
		// in order, so LIMIT stops early and snippets are made only for the
		// page.
		// FTS5's snippet quotes web_text, whose CJK text is split by
		// spaces and cjkGap: a document with CJK text gets its snippet
		// from cjkSnippet.
		snippet, order, rank = `iif(d.cjk, d.body, snippet(web_fts, -1, '', '', '…', 24))`, `rank`, `rank`
	}
	hitCols := `SELECT d.id, d.crawl_id, d.url, d.title, d.description, d.host,
			coalesce(json_extract(d.doc, '$.content_type[0]'), ''), coalesce(json_extract(d.doc, '$.language_s'), ''),
			json_extract(d.doc, '$.load_date_dt'), json_extract(d.doc, '$.last_modified'),
			coalesce(json_extract(d.doc, '$.size_i'), 0), d.cjk, ` + snippet + `, `
	hitsQ := hitCols + rank + from + ` ORDER BY ` + order + ` LIMIT ? OFFSET ?`
	hitsArgs := append(append([]any(nil), args...), limit, offset)
	count := `count(*)`
	if q.Collapse() {
		// One hit per URL: the window numbers each URL's matches newest
		// first and keeps the best rank among them, the page is cut from the
		// first of each URL in the order of those ranks, and only the page's
		// rows are read whole (and snippets made) by the outer query, which
		// repeats the MATCH because snippet needs it.
		count = `count(DISTINCT d.url)`
		best := `min(` + rank + `) OVER (PARTITION BY d.url)`
		if !p.HasTerms() {
			best = `min(d.rid) OVER (PARTITION BY d.url)`
		}
		page := `WITH m AS (SELECT d.rid AS rid, d.id AS id, ` + best + ` AS best,
				row_number() OVER (PARTITION BY d.url
					ORDER BY julianday(json_extract(d.doc, '$.load_date_dt')) DESC, d.id) AS n` + from + `),
			page AS (SELECT rid, id, best FROM m WHERE n = 1 ORDER BY best, id LIMIT ? OFFSET ?) `
		if p.HasTerms() {
			hitsQ = page + hitCols + `page.best FROM page JOIN web_fts ON web_fts.rowid = page.rid
				JOIN web d ON d.rid = page.rid WHERE web_fts MATCH ? ORDER BY page.best, page.id`
			hitsArgs = append(hitsArgs, args[0]) // where puts the MATCH expression first
		} else {
			hitsQ = page + hitCols + `0.0 FROM page JOIN web d ON d.rid = page.rid ORDER BY page.best, page.id`
		}
	}

	// One read transaction, so that Total, Hits and Facets describe the
	// same state.
	tx, err := s.st.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	defer func() { _ = tx.Rollback() }()
	var res search.Result
	if err := tx.QueryRowContext(ctx, `SELECT `+count+from, args...).Scan(&res.Total); err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	res.Hits = []contracts.SearchHit{}
	if q.Facets {
		res.Facets = map[string][]search.FacetValue{}
		for name, col := range map[string]string{search.FacetHosts: "d.host", search.FacetFileTypes: "d.file_ext"} {
			vals, err := facet(ctx, tx, col, count, from, args)
			if err != nil {
				return search.Result{}, fmt.Errorf("search %q: facet %s: %w", q.Q, name, err)
			}
			res.Facets[name] = vals
		}
	}
	if res.Total <= int64(offset) {
		return res, nil
	}
	rows, err := tx.QueryContext(ctx, hitsQ, hitsArgs...)
	if err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	defer rows.Close()
	terms := slices.Concat(append([][]string{p.Words}, p.Phrases...)...)
	for rows.Next() {
		var h contracts.SearchHit
		var title, desc string
		var loaded, modified sql.NullString
		var rank float64
		var cjk bool
		if err := rows.Scan(&h.ID, &h.CrawlID, &h.URL, &title, &desc, &h.Host, &h.ContentType, &h.Language,
			&loaded, &modified, &h.Size, &cjk, &h.Snippet, &rank); err != nil {
			return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
		}
		if cjk && p.HasTerms() {
			h.Snippet = cjkSnippet(h.Snippet, terms)
		}
		h.Title, _, _ = strings.Cut(title, "\n")
		h.Description, _, _ = strings.Cut(desc, "\n")
		h.FetchTime, _ = time.Parse(time.RFC3339Nano, loaded.String)
		h.LastModified, _ = time.Parse(time.RFC3339Nano, modified.String)
		h.Score = -rank // bm25 is lower for better matches
		res.Hits = append(res.Hits, h)
	}
	if err := rows.Err(); err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	return res, nil
}

// where returns the FROM and WHERE clauses, from " FROM" on, that select
// the documents p and q's filters match, with their arguments.
func (s *Search) where(p search.Parsed, q search.Query) (string, []any) {
	var conds []string
	var args []any
	from := ` FROM web d`
	if p.HasTerms() {
		from = ` FROM web_fts JOIN web d ON d.rid = web_fts.rowid`
		expr := matchTerms(p.Words, p.Phrases)
		for _, x := range p.Exclude {
			expr += ` NOT ` + phrase(x)
		}
		conds, args = append(conds, `web_fts MATCH ?`), append(args, expr)
	} else if len(p.Exclude) > 0 {
		var ors []string
		for _, x := range p.Exclude {
			ors = append(ors, phrase(x))
		}
		conds = append(conds, `d.rid NOT IN (SELECT rowid FROM web_fts WHERE web_fts MATCH ?)`)
		args = append(args, strings.Join(ors, " OR "))
	}
	if q.CrawlID != "" {
		conds, args = append(conds, `d.crawl_id = ?`), append(args, q.CrawlID)
	}
	if q.Collection != "" {
		conds, args = append(conds, `instr(d.collection, ?) > 0`), append(args, "\n"+q.Collection+"\n")
	}
	if len(p.Sites) > 0 {
		var ors []string
		for _, site := range p.Sites {
			ors = append(ors, `d.host = ? OR substr(d.host, ?) = ?`)
			args = append(args, site, -(len(site) + 1), "."+site)
		}
		conds = append(conds, `(`+strings.Join(ors, ` OR `)+`)`)
	}
	if len(p.FileTypes) > 0 {
		conds = append(conds, `d.file_ext IN (?`+strings.Repeat(`,?`, len(p.FileTypes)-1)+`)`)
		for _, ft := range p.FileTypes {
			args = append(args, ft)
		}
	}
	for _, in := range p.InURL {
		conds, args = append(conds, `instr(lower(d.url), ?) > 0`), append(args, in)
	}
	if len(conds) == 0 {
		return from, args
	}
	return from + ` WHERE ` + strings.Join(conds, ` AND `), args
}

// facet counts the values of col among the documents that from selects,
// each value by count (documents, or distinct URLs).
func facet(ctx context.Context, tx *sql.Tx, col, count, from string, args []any) ([]search.FacetValue, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+col+`, `+count+` AS n`+from+andOrWhere(from)+col+` != ''
		GROUP BY `+col+` ORDER BY n DESC, `+col+` LIMIT ?`, append(args, search.MaxFacetValues)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vals := []search.FacetValue{}
	for rows.Next() {
		var v search.FacetValue
		if err := rows.Scan(&v.Value, &v.Count); err != nil {
			return nil, err
		}
		vals = append(vals, v)
	}
	return vals, rows.Err()
}

func andOrWhere(from string) string {
	if strings.Contains(from, " WHERE ") {
		return ` AND `
	}
	return ` WHERE `
}

// matchTerms is the FTS5 expression of all of words and phrases: each a
// quoted string, ANDed, with CJK characters split as web_text splits them
// (a word of CJK characters is the phrase of its characters). Words never
// hold a quote (search.Words).
func matchTerms(words []string, phrases [][]string) string {
	parts := make([]string, 0, len(words)+len(phrases))
	for _, w := range words {
		parts = append(parts, `"`+cjkSplit(w)+`"`)
	}
	for _, ph := range phrases {
		parts = append(parts, phrase(ph))
	}
	return `(` + strings.Join(parts, " ") + `)`
}

// phrase is the FTS5 string of words in order, CJK characters split as
// web_text splits them.
func phrase(words []string) string { return `"` + cjkSplit(strings.Join(words, " ")) + `"` }

// Count returns the number of documents of crawlID, or of all crawls when
// crawlID is empty.
func (s *Search) Count(ctx context.Context, crawlID string) (int64, error) {
	var n int64
	var err error
	if crawlID == "" {
		err = s.st.r.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0) FROM doc_counts`).Scan(&n)
	} else {
		err = s.st.r.QueryRowContext(ctx, `SELECT coalesce((SELECT n FROM doc_counts WHERE crawl_id = ?), 0)`, crawlID).Scan(&n)
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
	err := s.st.r.QueryRowContext(ctx, `SELECT w.n FROM web d JOIN doc_writes w ON w.id = d.id WHERE d.id = ?`, id).Scan(&n)
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
	_ = s.ftsDel.Close()
	_ = s.ftsAdd.Close()
	return s.st.close()
}
