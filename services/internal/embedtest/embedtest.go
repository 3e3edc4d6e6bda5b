// Package embedtest opens the embedded backends for a test, each in the
// test's temporary directory and closed when the test ends: the real
// stores a service runs on in the embedded grid, for tests that wrap one of
// them in a narrow fake or look into it.
package embedtest

import (
	"path/filepath"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
)

// Stores are the embedded backends of one test.
type Stores struct {
	Queue    *sqlitequeue.Queue
	Tx       *sqlitestore.TxIndex
	Profiles *sqlitestore.Profiles
	Search   *sqlitestore.Search
	Assets   *fsassets.Store
}

// Open opens every embedded backend in a new temporary directory of t.
func Open(t testing.TB) *Stores {
	t.Helper()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	var s Stores
	var err error
	check := func(what string, close func() error) {
		t.Helper()
		if err != nil {
			t.Fatalf("open the embedded %s: %v", what, err)
		}
		t.Cleanup(func() { close() })
	}
	s.Queue, err = sqlitequeue.Open(path("queue.db"), sqlitequeue.Options{})
	check("queue", func() error { return s.Queue.Close() })
	s.Tx, err = sqlitestore.OpenTxIndex(path("tx.db"))
	check("transaction index", func() error { return s.Tx.Close() })
	s.Profiles, err = sqlitestore.OpenProfiles(path("profiles.db"))
	check("profiles", func() error { return s.Profiles.Close() })
	s.Search, err = sqlitestore.OpenSearch(path("search.db"))
	check("search index", func() error { return s.Search.Close() })
	s.Assets, err = fsassets.Open(path("assets"))
	check("asset store", func() error { return s.Assets.Close() })
	return &s
}
