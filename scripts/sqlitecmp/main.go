// Command sqlitecmp measures what the embedded grid's SQLite work costs in
// CPU per item on two SQLite builds: documents of 15 KB of text into an
// external-content FTS5 index (title, body, url; unicode61 with diacritics
// removed, automerge 8, hashsize 8 MiB, as pkg/sqlitestore has it) in
// batches of 50, and transaction records (a create, then three transitions
// each read before it is written) in batches of 50. It is a module of its
// own, so that the cgo driver it compares with never enters gridcrawl's.
//
//	cd scripts/sqlitecmp
//	go build -o /tmp/sc-modernc . && go build -tags "cgosqlite sqlite_fts5" -o /tmp/sc-mattn .
//	for i in 1 2 3; do /tmp/sc-modernc; /tmp/sc-mattn; done
//	FTSOPT=', detail=none' /tmp/sc-modernc   # an FTS5 option added to the table
//
// With -tags bleve and -bleve it indexes the same documents with Bleve
// (github.com/blevesearch/bleve/v2, the other full-text engine the design
// allows) instead: title, body and url as text with term positions (which
// phrase queries need), the unicode tokenizer, lower case and ASCII
// folding, nothing stored, in batches of 50, the index closed (persisted)
// inside the measurement.
//
//	go build -tags bleve -o /tmp/sc-bleve . && /tmp/sc-bleve -bleve
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	n := flag.Int("n", 3000, "docs")
	useBleve := flag.Bool("bleve", false, "index the documents with Bleve (build with -tags bleve) instead of SQLite")
	flag.Parse()
	dir, _ := os.MkdirTemp("", "sqlcmp")
	defer os.RemoveAll(dir)
	db, err := sql.Open(driverName, dsn(filepath.Join(dir, "s.db")))
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`PRAGMA journal_mode=WAL`, `PRAGMA synchronous=NORMAL`,
		`CREATE TABLE web (rid INTEGER PRIMARY KEY, id TEXT UNIQUE, title TEXT, body TEXT, url TEXT, doc TEXT)`,
		"CREATE VIRTUAL TABLE web_fts USING fts5(title, body, url, content='web', content_rowid='rid', tokenize='unicode61 remove_diacritics 2'" + os.Getenv("FTSOPT") + ")",
		`INSERT INTO web_fts (web_fts, rank) VALUES ('automerge', 8)`,
		`INSERT INTO web_fts (web_fts, rank) VALUES ('hashsize', 8388608)`,
		`CREATE TABLE tx (key TEXT PRIMARY KEY, status TEXT, status_time INTEGER, rec TEXT) WITHOUT ROWID`,
		`CREATE INDEX tx_status ON tx(status, status_time)`,
	} {
		if _, err := db.Exec(q); err != nil {
			panic(fmt.Sprint(q, err))
		}
	}
	r := rand.New(rand.NewSource(1))
	words := make([]string, 20000)
	for i := range words {
		b := make([]byte, 3+r.Intn(8))
		for j := range b {
			b[j] = byte('a' + r.Intn(26))
		}
		words[i] = string(b)
	}
	text := func(size int) string {
		var sb strings.Builder
		for sb.Len() < size {
			sb.WriteString(words[int(r.ExpFloat64()*2000)%len(words)])
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	texts := make([]string, 200)
	for i := range texts {
		texts[i] = text(15000)
	}
	if *useBleve {
		c0, t0 := cpu(), time.Now()
		if err := indexBleve(filepath.Join(dir, "bleve"), texts, *n); err != nil {
			panic(err)
		}
		fmt.Printf("bleve: fts %.3f cpu-ms/doc, wall %v\n", float64((cpu()-c0).Microseconds())/1000/float64(*n), time.Since(t0).Round(time.Millisecond))
		return
	}
	rec := strings.Repeat(`{"k":"v","n":1},`, 20)
	// FTS docs in batches of 50
	c0, t0 := cpu(), time.Now()
	for i := 0; i < *n; i += 50 {
		tx, _ := db.Begin()
		for j := i; j < i+50; j++ {
			res, err := tx.Exec(`INSERT INTO web (id, title, body, url, doc) VALUES (?, ?, ?, ?, ?)`, fmt.Sprint("id", j), "title words here", texts[j%len(texts)], fmt.Sprintf("http://h%d.test/p/%d.html", j%100, j), rec)
			if err != nil {
				panic(err)
			}
			rid, _ := res.LastInsertId()
			if _, err := tx.Exec(`INSERT INTO web_fts (rowid, title, body, url) VALUES (?, ?, ?, ?)`, rid, "title words here", texts[j%len(texts)], fmt.Sprintf("http://h%d.test/p/%d.html", j%100, j)); err != nil {
				panic(err)
			}
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
	}
	fts := cpu() - c0
	// tx records: create + 3 transitions, batches of 50
	c1 := cpu()
	for i := 0; i < *n; i += 50 {
		tx, _ := db.Begin()
		for j := i; j < i+50; j++ {
			tx.Exec(`INSERT INTO tx (key, status, status_time, rec) VALUES (?, 'l', ?, ?)`, fmt.Sprint("k", j), j, rec)
		}
		tx.Commit()
	}
	for _, st := range []string{"p", "i", "x"} {
		for i := 0; i < *n; i += 50 {
			tx, _ := db.Begin()
			for j := i; j < i+50; j++ {
				var got string
				tx.QueryRow(`SELECT rec FROM tx WHERE key = ?`, fmt.Sprint("k", j)).Scan(&got)
				tx.Exec(`UPDATE tx SET status = ?, status_time = ?, rec = ? WHERE key = ?`, st, j+1, got, fmt.Sprint("k", j))
			}
			tx.Commit()
		}
	}
	txc := cpu() - c1
	fmt.Printf("%s: fts %.3f cpu-ms/doc, tx %.3f cpu-ms/record (4 writes+3 reads), wall %v\n", driverName, float64(fts.Microseconds())/1000/float64(*n), float64(txc.Microseconds())/1000/float64(*n), time.Since(t0).Round(time.Millisecond))
}
