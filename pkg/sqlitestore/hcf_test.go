package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/pkg/hcf/hcftest"
)

func TestHCFConformance(t *testing.T) {
	openClock := func(now func() time.Time) func(string) (*HCF, error) {
		return func(path string) (*HCF, error) { return OpenHCFClock(path, now) }
	}
	hcftest.Run(t, hcftest.Harness{
		New: func(t *testing.T, now func() time.Time) hcf.Store {
			return open(t, filepath.Join(t.TempDir(), "hcf.db"), openClock(now))
		},
		Reopen: func(t *testing.T, s hcf.Store, now func() time.Time) hcf.Store {
			return reopen(t, s.(*HCF), s.(*HCF).st.path, openClock(now))
		},
	})
}
