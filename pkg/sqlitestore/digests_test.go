package sqlitestore

import (
	"path/filepath"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/digests/digeststest"
)

func TestDigestsConformance(t *testing.T) {
	digeststest.Run(t, digeststest.Harness{New: func(t *testing.T) digests.Index {
		return open(t, filepath.Join(t.TempDir(), "digests.db"), OpenDigests)
	}})
}
