package sqlitestore

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
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
	// A second open finds the current version and changes nothing.
	s.Close()
	s2 := open(t, path, OpenSearch)
	if n, err := s2.Count(t.Context(), ""); err != nil || n != 2 {
		t.Errorf("Count after reopening = %d, %v; want 2", n, err)
	}
}

// TestMigrateSearchV3 opens a version 3 search index holding a Japanese
// and a Latin-script document, indexed as version 3 did (the Japanese run
// one token), and finds both by their words after the migration, the index
// intact and kept in step when the Japanese document is replaced.
func TestMigrateSearchV3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "search.db")
	var v3 []string
	for _, stmt := range v2Schema {
		if !strings.Contains(stmt, "CREATE TRIGGER") {
			v3 = append(v3, stmt)
		}
	}
	db := oldIndex(t, path, v3, 3)
	for _, stmt := range []string{
		`INSERT INTO web (` + docCols + `) VALUES ('k1', 'c1', '富士山', '', '', '日本の富士山は高い。',
			'https://www.example.jp/fuji.html', 'www.example.jp', 'html', '', '{"id":"k1"}')`,
		`INSERT INTO web (` + docCols + `) VALUES ('k2', 'c1', 'The guide', '', '', 'Install the zymurgy kit.',
			'https://www.example.org/guide.html', 'www.example.org', 'html', '', '{"id":"k2"}')`,
		`INSERT INTO web_fts (rowid, ` + ftsCols + `) SELECT rid, ` + ftsCols + ` FROM web`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := open(t, path, OpenSearch)
	var version int
	if err := s.st.w.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != searchSchemaVersion {
		t.Errorf("user_version after migration = %d, %v; want %d", version, err, searchSchemaVersion)
	}
	ftsIntact(t, s)
	for q, want := range map[string]int64{"富士山": 1, "高い": 1, "zymurgy": 1, "富士山は高い": 1, "高山": 0} {
		if res, err := s.Search(t.Context(), search.Query{Q: q}); err != nil || res.Total != want {
			t.Errorf("Search(%q) after migration = %d, %v; want %d", q, res.Total, err, want)
		}
	}
	if err := s.Upsert(t.Context(), []contracts.Document{{ID: "k1", CrawlID: "c1", Text: "北京的故宫很有名。"}}); err != nil {
		t.Fatalf("Upsert after migration: %v", err)
	}
	ftsIntact(t, s)
	for q, want := range map[string]int64{"富士山": 0, "故宫": 1, "zymurgy": 1} {
		if res, err := s.Search(t.Context(), search.Query{Q: q}); err != nil || res.Total != want {
			t.Errorf("Search(%q) after replacing = %d, %v; want %d", q, res.Total, err, want)
		}
	}
}

// txV2Schema is the transaction index schema of version 2, before the
// response's media type and size and the status history.
var txV2Schema = []string{
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
		created_at   INTEGER NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS records_crawl_status ON records (crawl_id, status)`,
	`CREATE INDEX IF NOT EXISTS records_crawl_host ON records (crawl_id, host)`,
	`CREATE TABLE IF NOT EXISTS counts (
		crawl_id TEXT NOT NULL,
		status   TEXT NOT NULL,
		n        INTEGER NOT NULL,
		PRIMARY KEY (crawl_id, status)
	) WITHOUT ROWID`,
}

// TestMigrateTxV2 opens a version 2 transaction index holding a fetched
// and a failed record: they keep their fields, report unknown media type,
// size and history, count in the reports, and take the new fields and
// history from their next transition.
func TestMigrateTxV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	db := oldIndex(t, path, txV2Schema, 2)
	ts := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixNano()
	for _, r := range []struct {
		key, url, status, errText string
		code                      int
	}{
		{"k1", "http://a.test/1", "to-be-parsed", "", 200},
		{"k2", "http://a.test/2", "failed", "http 404", 404},
	} {
		if _, err := db.Exec(`INSERT INTO records (key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
			attempts, error, http_status, asset_key, asset_offset, asset_length, created_at)
			VALUES (?, 'c1', ?, 'a.test', 'a.test', 0, 0, '', ?, ?, 1, ?, ?, '', 0, 0, ?)`,
			r.key, r.url, r.status, ts, r.errText, r.code, ts); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO counts (crawl_id, status, n) VALUES ('c1', ?, 1)`, r.status); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	x := open(t, path, OpenTxIndex)
	r, err := x.Get(t.Context(), "k1")
	if err != nil {
		t.Fatalf("Get after migration: %v", err)
	}
	if r.URL != "http://a.test/1" || r.HTTPStatus != 200 || r.Bytes != nil || r.MIMEType != "" || len(r.History) != 0 {
		t.Errorf("migrated record = %+v; want its fields, no size, media type or history", r)
	}
	reasons, err := x.FailureReasonsReport(t.Context(), "c1", 10)
	if err != nil || len(reasons) != 1 || reasons[0].Reason != "http 404" || reasons[0].Count != 1 {
		t.Errorf("FailureReasonsReport after migration = %+v, %v; want the old failed record", reasons, err)
	}
	n := int64(512)
	if _, err := x.Transition(t.Context(), []txindex.Transition{{Key: "k1", From: contracts.ToBeParsed, To: contracts.ToBeIndexed, MIMEType: "text/html", Bytes: &n}}); err != nil {
		t.Fatal(err)
	}
	r = mustGetTx(t, x, "k1")
	if r.MIMEType != "text/html" || r.Bytes == nil || *r.Bytes != 512 || len(r.History) != 1 || r.History[0].Status != contracts.ToBeIndexed {
		t.Errorf("record after a transition = %+v; want the new fields and one history event", r)
	}
	// A second open finds the current version.
	x.Close()
	x2 := open(t, path, OpenTxIndex)
	if c, err := x2.Counts(t.Context(), "c1"); err != nil || c[contracts.Failed] != 1 {
		t.Errorf("Counts after reopening = %v, %v", c, err)
	}
}

func mustGetTx(t *testing.T, x *TxIndex, key string) txindex.Record {
	t.Helper()
	r, err := x.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return r
}

// TestMigrateTxV3 opens a version 3 transaction index (the current schema
// without the sitemap kind and lastmod columns) holding a record: it reads
// back as a page without lastmod, and new records keep both fields.
func TestMigrateTxV3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	v4 := txV4Schema(t)
	v3 := slices.Clone(v4)
	v3[0] = strings.Replace(v3[0], "history      TEXT NOT NULL DEFAULT '',\n\t\tsitemap      TEXT NOT NULL DEFAULT '',\n\t\tlastmod      INTEGER", "history      TEXT NOT NULL DEFAULT ''", 1)
	if v3[0] == v4[0] {
		t.Fatal("could not derive the version 3 schema from the current one")
	}
	db := oldIndex(t, path, v3, 3)
	ts := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixNano()
	if _, err := db.Exec(`INSERT INTO records (key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
		attempts, error, http_status, asset_key, asset_offset, asset_length, created_at)
		VALUES ('k1', 'c1', 'http://a.test/1', 'a.test', 'a.test', 0, 0, '', 'indexed', ?, 1, '', 200, '', 0, 0, ?)`, ts, ts); err != nil {
		t.Fatal(err)
	}
	db.Close()

	x := open(t, path, OpenTxIndex)
	if r := mustGetTx(t, x, "k1"); r.URL != "http://a.test/1" || r.Sitemap != "" || r.Lastmod != nil {
		t.Errorf("migrated record = %+v; want a page without lastmod", r)
	}
	lastmod := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	now := time.Now()
	if _, err := x.Create(t.Context(), []txindex.Record{{Key: "k2", CrawlID: "c1", URL: "http://a.test/sitemap.xml", Host: "a.test", Group: "a.test",
		Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now, Sitemap: txindex.SitemapProbe, Lastmod: &lastmod}}); err != nil {
		t.Fatal(err)
	}
	if r := mustGetTx(t, x, "k2"); r.Sitemap != txindex.SitemapProbe || r.Lastmod == nil || !r.Lastmod.Equal(lastmod) {
		t.Errorf("new record after migration = sitemap %q, lastmod %v; want %q, %v", r.Sitemap, r.Lastmod, txindex.SitemapProbe, lastmod)
	}
}

// txV5Schema returns the version 5 schema: the current one without the
// render column.
func txV5Schema(t *testing.T) []string {
	t.Helper()
	v6 := txV6Schema(t)
	v5 := slices.Clone(v6)
	v5[0] = strings.Replace(v5[0], "next_due     INTEGER,\n\t\trender       TEXT NOT NULL DEFAULT ''", "next_due     INTEGER", 1)
	if v5[0] == v6[0] {
		t.Fatal("could not derive the version 5 schema from the current one")
	}
	return v5
}

// txV6Schema returns the version 6 schema: the current one without the
// loader shard column, its index and the shard leases, and with the stale
// index of every pending record.
func txV6Schema(t *testing.T) []string {
	t.Helper()
	var v6 []string
	for _, stmt := range txSchema {
		switch {
		case strings.Contains(stmt, "records_loading") || strings.Contains(stmt, "shard_leases"):
		case strings.Contains(stmt, "records_stale"):
			v6 = append(v6, `CREATE INDEX IF NOT EXISTS records_stale ON records (status_time) WHERE status IN `+inFlightSQL)
		default:
			v6 = append(v6, stmt)
		}
	}
	v6[0] = strings.Replace(v6[0], "render       TEXT NOT NULL DEFAULT '',\n\t\tloader_shard TEXT NOT NULL DEFAULT ''", "render       TEXT NOT NULL DEFAULT ''", 1)
	if v6[0] == txSchema[0] || len(v6) != len(txSchema)-2 {
		t.Fatal("could not derive the version 6 schema from the current one")
	}
	return v6
}

// TestMigrateTxV6 opens a version 6 transaction index (without loader
// shards) holding a to-be-loaded record long past its lease: it reads back
// without a shard, the recovery sweep's query still finds it (also with
// every shard owned: no owner files it), and Waiting lists no shard's.
func TestMigrateTxV6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	db := oldIndex(t, path, txV6Schema(t), 6)
	ts := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixNano()
	if _, err := db.Exec(`INSERT INTO records (key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
		attempts, error, http_status, asset_key, asset_offset, asset_length, created_at)
		VALUES ('k1', 'c1', 'http://a.test/1', 'a.test', 'a.test', 0, 0, '', 'to-be-loaded', ?, 0, '', 0, '', 0, 0, ?)`, ts, ts); err != nil {
		t.Fatal(err)
	}
	db.Close()

	x := open(t, path, OpenTxIndex)
	if r := mustGetTx(t, x, "k1"); r.Shard != "" || r.Status != contracts.ToBeLoaded {
		t.Errorf("migrated record = shard %q, %s; want no shard, to-be-loaded", r.Shard, r.Status)
	}
	stale, err := x.Stale(t.Context(), time.Now(), 10, []string{txindex.ShardID(0, 1)})
	if err != nil || len(stale) != 1 || stale[0].Key != "k1" {
		t.Errorf("Stale after migration = %v, %v; want k1", stale, err)
	}
	if w, err := x.Waiting(t.Context(), txindex.ShardID(0, 1), "", 10); err != nil || len(w) != 0 {
		t.Errorf("Waiting after migration = %v, %v; want none", w, err)
	}
}

// txV4Schema returns the version 4 schema: version 5 without the recrawl
// state and due time columns and the due index.
func txV4Schema(t *testing.T) []string {
	t.Helper()
	v5 := txV5Schema(t)
	var v4 []string
	for _, stmt := range v5 {
		if !strings.Contains(stmt, "records_due") {
			v4 = append(v4, stmt)
		}
	}
	v4[0] = strings.Replace(v4[0], "lastmod      INTEGER,\n\t\trecrawl      TEXT,\n\t\tnext_due     INTEGER", "lastmod      INTEGER", 1)
	if v4[0] == v5[0] || len(v4) != len(v5)-1 {
		t.Fatal("could not derive the version 4 schema from the current one")
	}
	return v4
}

// TestMigrateTxV4 opens a version 4 transaction index (without the recrawl
// columns) holding an indexed record: it reads back without recrawl state
// and is not due, and once a continuous crawl settles it with a recrawl
// state it is due like a new one.
func TestMigrateTxV4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	db := oldIndex(t, path, txV4Schema(t), 4)
	ts := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixNano()
	if _, err := db.Exec(`INSERT INTO records (key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
		attempts, error, http_status, asset_key, asset_offset, asset_length, created_at)
		VALUES ('k1', 'c1', 'http://a.test/1', 'a.test', 'a.test', 0, 0, '', 'to-be-loaded', ?, 1, '', 0, '', 0, 0, ?)`, ts, ts); err != nil {
		t.Fatal(err)
	}
	db.Close()

	x := open(t, path, OpenTxIndex)
	if r := mustGetTx(t, x, "k1"); r.Recrawl != nil || r.NextDue != nil {
		t.Errorf("migrated record = recrawl %+v, next due %v; want neither", r.Recrawl, r.NextDue)
	}
	fetched := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	st := &txindex.Recrawl{Fetched: fetched, Status: 200, IntervalMS: 60_000, Due: fetched.Add(time.Minute), ETag: `"e"`}
	if ok, err := x.Transition(t.Context(), []txindex.Transition{{Key: "k1", From: contracts.ToBeLoaded, To: contracts.Indexed, Recrawl: st}}); err != nil || !ok[0] {
		t.Fatalf("Transition = %v, %v", ok, err)
	}
	due, err := x.Due(t.Context(), "c1", time.Now(), 10)
	if err != nil || len(due) != 1 || due[0].Recrawl == nil || due[0].Recrawl.ETag != `"e"` || !due[0].NextDue.Equal(st.Due) {
		t.Errorf("Due after migration = %+v, %v; want the record, due at %v", due, err, st.Due)
	}
}

// TestMigrateTxV5 opens a version 5 transaction index (without the render
// column) holding a fetched record: it reads back as not rendered, and a
// transition that fetched it again with a browser records why.
func TestMigrateTxV5(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	db := oldIndex(t, path, txV5Schema(t), 5)
	ts := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixNano()
	if _, err := db.Exec(`INSERT INTO records (key, crawl_id, url, host, chg, depth, hops, referrer, status, status_time,
		attempts, error, http_status, asset_key, asset_offset, asset_length, created_at, mime_type, bytes)
		VALUES ('k1', 'c1', 'http://a.test/1', 'a.test', 'a.test', 0, 0, '', 'to-be-loaded', ?, 1, '', 200, '', 0, 0, ?, 'text/html', 512)`, ts, ts); err != nil {
		t.Fatal(err)
	}
	db.Close()

	x := open(t, path, OpenTxIndex)
	var version int
	if err := x.st.w.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != txSchemaVersion {
		t.Errorf("user_version after migration = %d, %v; want %d", version, err, txSchemaVersion)
	}
	if r := mustGetTx(t, x, "k1"); r.Render != "" || r.MIMEType != "text/html" || r.Bytes == nil || *r.Bytes != 512 {
		t.Errorf("migrated record = render %q, mime type %q, bytes %v; want not rendered, its response kept", r.Render, r.MIMEType, r.Bytes)
	}
	n := int64(2048)
	if ok, err := x.Transition(t.Context(), []txindex.Transition{{Key: "k1", From: contracts.ToBeLoaded, To: contracts.ToBeParsed,
		HTTPStatus: 200, Bytes: &n, Render: "always"}}); err != nil || !ok[0] {
		t.Fatalf("Transition = %v, %v", ok, err)
	}
	if r := mustGetTx(t, x, "k1"); r.Render != "always" {
		t.Errorf("record after a rendered fetch: Render = %q, want %q", r.Render, "always")
	}
}
