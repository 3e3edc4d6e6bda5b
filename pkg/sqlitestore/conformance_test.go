package sqlitestore

import (
	"path/filepath"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/profiles/profilestest"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/search/searchtest"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/txindex/txindextest"
)

// open opens a store at path with openFn and closes it when t ends.
func open[T interface{ Close() error }](t *testing.T, path string, openFn func(string) (T, error)) T {
	t.Helper()
	x, err := openFn(path)
	if err != nil {
		t.Fatalf("open %q: %v", path, err)
	}
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Errorf("Close(%q): %v", path, err)
		}
	})
	return x
}

func reopen[T interface{ Close() error }](t *testing.T, x T, path string, openFn func(string) (T, error)) T {
	t.Helper()
	if err := x.Close(); err != nil {
		t.Fatalf("Close(%q): %v", path, err)
	}
	return open(t, path, openFn)
}

func TestConformance(t *testing.T) {
	t.Run("TxIndex", func(t *testing.T) {
		txindextest.Run(t, txindextest.Harness[txindex.Index]{
			New: func(t *testing.T) txindex.Index {
				return open(t, filepath.Join(t.TempDir(), "tx.db"), OpenTxIndex)
			},
			Reopen: func(t *testing.T, x txindex.Index) txindex.Index {
				return reopen(t, x.(*TxIndex), x.(*TxIndex).st.path, OpenTxIndex)
			},
		})
	})
	t.Run("Profiles", func(t *testing.T) {
		profilestest.Run(t, profilestest.Harness{
			New: func(t *testing.T) profiles.Store {
				return open(t, filepath.Join(t.TempDir(), "profiles.db"), OpenProfiles)
			},
			Reopen: func(t *testing.T, x profiles.Store) profiles.Store {
				return reopen(t, x.(*Profiles), x.(*Profiles).st.path, OpenProfiles)
			},
		})
	})
	t.Run("Search", func(t *testing.T) {
		searchtest.Run(t, searchtest.Harness{
			New: func(t *testing.T) search.Index {
				return open(t, filepath.Join(t.TempDir(), "search.db"), OpenSearch)
			},
			Reopen: func(t *testing.T, x search.Index) search.Index {
				return reopen(t, x.(*Search), x.(*Search).st.path, OpenSearch)
			},
		})
	})
}
