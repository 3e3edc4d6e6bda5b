package sqlitestore

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
)

// v1Schema is the search schema of version 1, as gridcrawl made it before
// documents were YaCy documents.
var v1Schema = []string{
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

// oldIndex makes a search index at path with the schema of an earlier
// version and that version number, and returns it open.
func oldIndex(t *testing.T, path string, schema []string, version int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range append(slices.Clone(schema), fmt.Sprintf(`PRAGMA user_version = %d`, version)) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("version %d schema: %v", version, err)
		}
	}
	return db
}

// TestMigrateSearchV1 opens a version 1 search index, made with the old
// schema and an old document, and finds the document as a YaCy document.
func TestMigrateSearchV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "search.db")
	db := oldIndex(t, path, v1Schema, 1)
	meta := `{"id":"k1","crawl_id":"c1","url":"https://www.example.org/docs/guide.html","host":"www.example.org",` +
		`"title":"The guide","description":"How to","language":"en","headings":["Guide","Setup"],` +
		`"links":[{"url":"https://www.example.org/","text":"Home"},{"url":"https://other.test/","nofollow":true}],` +
		`"content_type":"text/html; charset=utf-8","status_code":200,"depth":2,"fetch_time":"2026-11-20T10:00:00Z",` +
		`"asset":{"key":"warc/a.warc.gz","offset":10,"length":200}}`
	if _, err := db.Exec(`INSERT INTO docs (id, crawl_id, title, description, headings, body, url, content_type, language, fetch_time, meta)
		VALUES ('k1', 'c1', 'The guide', 'How to', 'Guide
Setup', 'Install the zymurgy kit.', 'https://www.example.org/docs/guide.html', 'text/html', 'en', 0, ?)`, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO doc_writes (id, n) VALUES ('k1', 3)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open(t, path, OpenSearch)
	got, err := s.Get(t.Context(), "k1")
	if err != nil {
		t.Fatalf("Get after migration: %v", err)
	}
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	want := contracts.Document{ID: "k1", CrawlID: "c1", URL: "https://www.example.org/docs/guide.html",
		LastModified: at, LoadDate: at, ContentType: []string{"text/html"}, Title: []string{"The guide"},
		Host: "www.example.org", SSLD: "example.org", HostOrganization: "example", HTTPStatus: 200, FileExt: "html",
		InboundLinks: []string{"https://www.example.org/"}, InboundAnchorText: []string{"Home"},
		OutboundLinks: []string{"https://other.test/"}, OutboundAnchorText: []string{""}, Images: []string{},
		Text: "Install the zymurgy kit.", Description: []string{"How to"}, H2: []string{"Guide", "Setup"},
		Language: "en", CrawlDepth: 2, WordCount: 4, LinksCount: 2, LinksNofollowCount: 1, InboundLinksCount: 1,
		OutboundLinksCount: 1, OutboundLinksNofollowCount: 1, URLProtocol: "https", URLFileName: "guide",
		URLPaths: []string{"docs"}, WARCKey: "warc/a.warc.gz", WARCOffset: 10, WARCLength: 200}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("migrated document (-want +got):\n%s", diff)
	}
	res, err := s.Search(t.Context(), search.Query{Q: "zymurgy site:example.org filetype:html"})
	if err != nil || res.Total != 1 {
		t.Errorf("Search after migration = %+v, %v; want the document", res, err)
	}
	if n, err := s.Writes(t.Context(), "k1"); err != nil || n != 3 {
		t.Errorf("Writes after migration = %d, %v; want 3 (kept)", n, err)
	}
	ftsIntact(t, s)
	// A second open finds the current version and changes nothing.
	s.Close()
	s2 := open(t, path, OpenSearch)
	if n, err := s2.Count(t.Context(), ""); err != nil || n != 1 {
		t.Errorf("Count after reopening = %d, %v; want 1", n, err)
	}
}

// v2Schema is the search schema of version 2, whose triggers indexed each
// row of web as it was written.
var v2Schema = []string{
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
		doc         TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS web_crawl ON web (crawl_id)`,
	`CREATE INDEX IF NOT EXISTS web_host ON web (host)`,
	// doc_writes counts the stores of each document id (Writes).
	`CREATE TABLE IF NOT EXISTS doc_writes (
		id TEXT PRIMARY KEY,
		n  INTEGER NOT NULL
	) WITHOUT ROWID`,
	`CREATE VIRTUAL TABLE IF NOT EXISTS web_fts USING fts5 (
		title, description, headings, body, url,
		content = 'web', content_rowid = 'rid',
		tokenize = 'unicode61 remove_diacritics 2'
	)`,
	`CREATE TRIGGER IF NOT EXISTS web_ai AFTER INSERT ON web BEGIN
		INSERT INTO web_fts (rowid, title, description, headings, body, url)
		VALUES (new.rid, new.title, new.description, new.headings, new.body, new.url);
	END`,
	`CREATE TRIGGER IF NOT EXISTS web_ad AFTER DELETE ON web BEGIN
		INSERT INTO web_fts (web_fts, rowid, title, description, headings, body, url)
		VALUES ('delete', old.rid, old.title, old.description, old.headings, old.body, old.url);
	END`,
	`CREATE TRIGGER IF NOT EXISTS web_au AFTER UPDATE ON web BEGIN
		INSERT INTO web_fts (web_fts, rowid, title, description, headings, body, url)
		VALUES ('delete', old.rid, old.title, old.description, old.headings, old.body, old.url);
		INSERT INTO web_fts (rowid, title, description, headings, body, url)
		VALUES (new.rid, new.title, new.description, new.headings, new.body, new.url);
	END`,
	// Columns: title, description, headings, body, url.
	`INSERT INTO web_fts (web_fts, rank) VALUES ('rank', 'bm25(10.0, 4.0, 5.0, 1.0, 2.0)')`,
	// Merging fewer, larger runs of index segments costs less per document
	// (about 13% measured against the default of 4) at little cost to queries.
	`INSERT INTO web_fts (web_fts, rank) VALUES ('automerge', 8)`,
}

// TestMigrateSearchV2 opens a version 2 search index holding a document
// that its triggers indexed, and finds it at version 3 without triggers,
// its index intact and kept in step by later writes.
func TestMigrateSearchV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "search.db")
	db := oldIndex(t, path, v2Schema, 2)
	if _, err := db.Exec(`INSERT INTO web (` + docCols + `) VALUES ('k1', 'c1', 'The guide', '', '', 'Install the zymurgy kit.',
		'https://www.example.org/guide.html', 'www.example.org', 'html', '', '{"id":"k1"}')`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open(t, path, OpenSearch)
	var version, triggers int
	if err := s.st.w.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != searchSchemaVersion {
		t.Errorf("user_version after migration = %d, %v; want %d", version, err, searchSchemaVersion)
	}
	if err := s.st.w.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name IN ('web_ai', 'web_ad', 'web_au')`).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("full-text triggers after migration = %d, %v; want 0", triggers, err)
	}
	var hash string
	if err := s.st.w.QueryRow(`SELECT v FROM web_fts_config WHERE k = 'hashsize'`).Scan(&hash); err != nil || hash != "8388608" {
		t.Errorf("hashsize after migration = %q, %v; want 8388608", hash, err)
	}
	ftsIntact(t, s)
	res, err := s.Search(t.Context(), search.Query{Q: "zymurgy"})
	if err != nil || res.Total != 1 {
		t.Errorf("Search after migration = %+v, %v; want the document", res, err)
	}
	if err := s.Upsert(t.Context(), []contracts.Document{{ID: "k1", CrawlID: "c1", Text: "Brew the mead."},
		{ID: "k2", CrawlID: "c1", Text: "More zymurgy."}}); err != nil {
		t.Fatalf("Upsert after migration: %v", err)
	}
	ftsIntact(t, s)
	for q, want := range map[string]int64{"zymurgy": 1, "mead": 1, "install": 0} {
		if res, err := s.Search(t.Context(), search.Query{Q: q}); err != nil || res.Total != want {
			t.Errorf("Search(%q) after replacing = %d, %v; want %d", q, res.Total, err, want)
		}
	}
	// A second open finds version 3 and changes nothing.
	s.Close()
	s2 := open(t, path, OpenSearch)
	if n, err := s2.Count(t.Context(), ""); err != nil || n != 2 {
		t.Errorf("Count after reopening = %d, %v; want 2", n, err)
	}
}
