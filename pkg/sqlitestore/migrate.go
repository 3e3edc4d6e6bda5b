package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/extract"
	"github.com/gridcrawl/gridcrawl/pkg/yacydoc"
)

// v1Document is the document shape of search schema version 1, as stored
// in the meta column of docs (its text was the body column).
type v1Document struct {
	ID          string             `json:"id"`
	CrawlID     string             `json:"crawl_id"`
	URL         string             `json:"url"`
	Title       string             `json:"title"`
	Description string             `json:"description"`
	Language    string             `json:"language"`
	Headings    []string           `json:"headings"`
	Links       []contracts.Link   `json:"links"`
	ContentType string             `json:"content_type"`
	StatusCode  int                `json:"status_code"`
	Depth       int                `json:"depth"`
	FetchTime   string             `json:"fetch_time"`
	Asset       contracts.AssetRef `json:"asset"`
}

// migrateSearchV1 turns a search index of schema version 1 (gridcrawl's
// first document shape, table docs) into version 2 (YaCy web documents,
// table web) in one transaction, so that an upgrade keeps every indexed
// document. Fields version 1 did not keep stay empty (images, keywords,
// author, charset, size, response time, IP, referrer, robots bits); its
// headings, whose levels it did not keep, become h2_txt. A missing file or
// a database of another version is left alone.
func migrateSearchV1(path string) error {
	db, err := openForMigration(path)
	if db == nil || err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	var version, docs int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("migrate search index: read version: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'docs'`).Scan(&docs); err != nil {
		return fmt.Errorf("migrate search index: read schema: %w", err)
	}
	if version > 1 || docs == 0 {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate search index: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, stmt := range searchSchema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate search index: create schema: %w", err)
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT body, meta FROM docs ORDER BY rid`)
	if err != nil {
		return fmt.Errorf("migrate search index: read documents: %w", err)
	}
	var converted [][]any
	for rows.Next() {
		var body, meta string
		if err := rows.Scan(&body, &meta); err != nil {
			rows.Close()
			return fmt.Errorf("migrate search index: read document: %w", err)
		}
		args, err := convertV1(body, meta)
		if err != nil {
			rows.Close()
			return fmt.Errorf("migrate search index: %w", err)
		}
		converted = append(converted, args)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate search index: read documents: %w", err)
	}
	for _, args := range converted {
		if _, err := tx.ExecContext(ctx, `INSERT INTO web (`+rowCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (id) DO NOTHING`, args...); err != nil {
			return fmt.Errorf("migrate search index: store document %v: %w", args[0], err)
		}
	}
	// The rows went in without touching web_fts: index them all at once.
	if _, err := tx.ExecContext(ctx, `INSERT INTO web_fts (web_fts) VALUES ('rebuild')`); err != nil {
		return fmt.Errorf("migrate search index: index documents: %w", err)
	}
	for _, stmt := range []string{`DROP TRIGGER IF EXISTS docs_ai`, `DROP TRIGGER IF EXISTS docs_ad`,
		`DROP TRIGGER IF EXISTS docs_au`, `DROP TABLE IF EXISTS docs_fts`, `DROP TABLE docs`,
		fmt.Sprintf(`PRAGMA user_version = %d`, searchSchemaVersion)} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate search index: %s: %w", stmt, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate search index: %w", err)
	}
	return nil
}

// migrateSearchV2 turns a search index of schema version 2 or 3 into
// version 4 in one transaction: it drops the triggers of version 2 that
// indexed each row of web as it was written (Search.Upsert indexes a batch
// itself now), marks the documents that hold CJK text (column cjk) and
// indexes every document again into a web_fts over web_text, so that those
// are found by their words (see cjkSplit). Reindexing takes about as long
// as indexing the documents took. A missing file or a database of another
// version is left alone.
func migrateSearchV2(path string) error {
	db, err := openForMigration(path)
	if db == nil || err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate search index: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("migrate search index: read version: %w", err)
	}
	if version != 2 && version != 3 {
		return nil
	}
	// web_fts is made anew over web_text, with the documents that hold CJK
	// text marked first, so that they are indexed by their characters.
	stmts := []string{`DROP TRIGGER IF EXISTS web_ai`, `DROP TRIGGER IF EXISTS web_ad`, `DROP TRIGGER IF EXISTS web_au`,
		`ALTER TABLE web ADD COLUMN cjk INTEGER NOT NULL DEFAULT 0`,
		`UPDATE web SET cjk = 1 WHERE ` + hasCJKFunc + `(title) OR ` + hasCJKFunc + `(description) OR ` +
			hasCJKFunc + `(headings) OR ` + hasCJKFunc + `(body)`,
		`DROP TABLE web_fts`}
	stmts = append(stmts, searchSchema...)
	stmts = append(stmts, `INSERT INTO web_fts (web_fts) VALUES ('rebuild')`)
	for _, stmt := range append(stmts, fmt.Sprintf(`PRAGMA user_version = %d`, searchSchemaVersion)) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate search index to version %d: %w", searchSchemaVersion, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate search index: %w", err)
	}
	return nil
}

// migrateTxV2 turns a transaction index of schema version 2 to 5 into the
// current version in one transaction. Version 2 gets the columns of the
// fetched response's media type and size (NULL size: unknown, as for every
// record fetched before) and of the status history (empty for older
// records); versions 2 and 3 get the sitemap kind (empty: a page) and the
// sitemap lastmod (NULL: none); versions 2 to 4 get the recrawl state and
// the due time (NULL: none, as in every one-shot crawl); versions 2 to 5
// get the render reason (empty: not rendered, as no page was before the
// loader could render); versions 2 to 6 get the loader shard (empty: none,
// so the recovery sweep treats their pending records as before). Adding columns with constant defaults
// rewrites no row. A missing file or a database of another version is left
// alone.
func migrateTxV2(path string) error {
	db, err := openForMigration(path)
	if db == nil || err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate transaction index: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("migrate transaction index: read version: %w", err)
	}
	var stmts []string
	switch version {
	case 2:
		stmts = append(stmts,
			`ALTER TABLE records ADD COLUMN mime_type TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE records ADD COLUMN bytes INTEGER`,
			`ALTER TABLE records ADD COLUMN history TEXT NOT NULL DEFAULT ''`)
		fallthrough
	case 3:
		stmts = append(stmts,
			`ALTER TABLE records ADD COLUMN sitemap TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE records ADD COLUMN lastmod INTEGER`)
		fallthrough
	case 4:
		stmts = append(stmts,
			`ALTER TABLE records ADD COLUMN recrawl TEXT`,
			`ALTER TABLE records ADD COLUMN next_due INTEGER`)
		fallthrough
	case 5:
		stmts = append(stmts,
			`ALTER TABLE records ADD COLUMN render TEXT NOT NULL DEFAULT ''`)
		fallthrough
	case 6:
		// Records of older versions have no loader shard: every pending
		// one stays in records_stale, which is made again for its new
		// condition.
		stmts = append(stmts,
			`ALTER TABLE records ADD COLUMN loader_shard TEXT NOT NULL DEFAULT ''`,
			`DROP INDEX IF EXISTS records_stale`)
	default:
		return nil
	}
	for _, stmt := range append(append(stmts, txSchema...), fmt.Sprintf(`PRAGMA user_version = %d`, txSchemaVersion)) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate transaction index to version %d: %w", txSchemaVersion, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate transaction index: %w", err)
	}
	return nil
}

// convertV1 returns the web row of a version 1 document.
func convertV1(body, meta string) ([]any, error) {
	var old v1Document
	if err := json.Unmarshal([]byte(meta), &old); err != nil {
		return nil, fmt.Errorf("decode document: %w", err)
	}
	u, err := url.Parse(old.URL)
	if err != nil {
		return nil, fmt.Errorf("document %q: url: %w", old.ID, err)
	}
	var fetched contracts.CrawlerPage
	if err := json.Unmarshal([]byte(`{"fetched_at":"`+old.FetchTime+`"}`), &fetched); err != nil {
		return nil, fmt.Errorf("document %q: fetch time: %w", old.ID, err)
	}
	fetched.URL, fetched.Depth, fetched.StatusCode, fetched.Asset = old.URL, old.Depth, old.StatusCode, old.Asset
	mt, _, _ := mime.ParseMediaType(old.ContentType)
	res := extract.Result{Title: old.Title, Description: old.Description, Language: old.Language,
		Headings: old.Headings, Text: body, Links: old.Links}
	for range old.Headings {
		res.HeadingLevels = append(res.HeadingLevels, 2)
	}
	d := yacydoc.Build(yacydoc.Page{Key: old.ID, CrawlID: old.CrawlID, URL: u, Fetched: fetched,
		Header: http.Header{}, MediaType: strings.ToLower(mt)}, &res)
	return rowArgs(*d)
}

// openForMigration opens the index at path with one connection whose
// transactions take the write lock at once; it returns nil, nil when there
// is no file to migrate.
func openForMigration(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("migrate %q: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
