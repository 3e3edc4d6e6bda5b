// Package sqlitestore implements gridcrawl's embedded indices on SQLite
// through the pure-Go driver modernc.org/sqlite: the transaction index
// (txindex.Index), the crawl profile store (profiles.Store) and the full-text
// search index (search.Index, on SQLite FTS5).
//
// Each index lives in its own database file, so that each has its own write
// lock and the three are written in parallel. Every file runs in WAL mode
// with synchronous=NORMAL: a committed write survives the death of the
// process (it is in the WAL, handed to the operating system), though not
// necessarily a power failure. All writes of one file go through one
// connection; reads use a small pool of read-only connections that never
// wait for the writer.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/gridcrawl/gridcrawl/pkg/privfile"
)

// busyTimeoutMS bounds how long a connection waits for a lock held by another
// connection (a checkpoint, or another process) before failing.
const busyTimeoutMS = 10000

// store is the pair of connection pools every index of this package keeps.
type store struct {
	path string
	// w has exactly one connection: SQLite allows one writer at a time, and
	// funnelling writes through one connection avoids SQLITE_BUSY entirely.
	w *sql.DB
	// r is read-only and may hold several connections; in WAL mode readers
	// see the last committed state and never block the writer.
	r *sql.DB

	closeOnce sync.Once
	closeErr  error
}

// openStore opens (creating if needed) the database file at path and applies
// schema, of the given version, on the writer connection.
func openStore(path string, version int, schema []string) (*store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite %q: path must be non-empty and contain no '?' or '#'", path)
	}
	if err := privfile.MkdirAll(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	if err := privfile.Touch(path); err != nil {
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	// The checkpoint runs every 10,000 WAL pages (SQLite's default is
	// 1,000): the stores' indexes are keyed by digests, whose inserts land on
	// random leaves, and a leaf dirtied by many commits between two
	// checkpoints is copied back once. 1 KiB and 16 KiB pages cost more CPU
	// per page crawled than the default 4 KiB (more writes, or more bytes
	// read per cache miss).
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=synchronous(NORMAL)&_pragma=temp_store(MEMORY)&_pragma=cache_size(-8000)", busyTimeoutMS)
	w, err := sql.Open("sqlite", path+"?"+common+"&_pragma=wal_autocheckpoint(10000)&_journal_mode=WAL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	ctx := context.Background()
	if err := applySchema(ctx, w, version, schema); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	r, err := sql.Open("sqlite", path+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	n := max(2, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxIdleTime(0)
	r.SetConnMaxLifetime(0)
	if err := r.PingContext(ctx); err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	return &store{path: path, w: w, r: r}, nil
}

// applySchema creates the schema in a new database, or checks that an
// existing one has the expected version.
func applySchema(ctx context.Context, w *sql.DB, version int, schema []string) error {
	var have, tables int
	if err := w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if err := w.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	// Version 1 schemas were first written without a version number.
	if tables > 0 && have != version && (have != 0 || version != 1) {
		return fmt.Errorf("database has schema version %d, want %d (it was made by another gridcrawl version; move it away to start afresh)", have, version)
	}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, stmt := range append(schema, fmt.Sprintf("PRAGMA user_version = %d", version)) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return nil
}

// close closes both pools; later calls return the first result.
func (s *store) close() error {
	s.closeOnce.Do(func() {
		rerr := s.r.Close()
		// A final checkpoint folds the WAL into the main file so that a
		// closed database is one file again.
		_, _ = s.w.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)")
		werr := s.w.Close()
		if err := errors.Join(werr, rerr); err != nil {
			s.closeErr = fmt.Errorf("close sqlite %q: %w", s.path, err)
		}
	})
	return s.closeErr
}

// nanos converts t to the stored form: unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos; times come back in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// placeholders returns "?,?,...,?" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}
