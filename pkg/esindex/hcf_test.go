package esindex

import (
	"context"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/pkg/hcf/hcftest"
)

// newTestHCF returns an HCF on indices of a fresh name, deleted when t ends.
func newTestHCF(t *testing.T, c *Client, now func() time.Time) *HCF {
	t.Helper()
	h := c.newHCF(testPrefix()+"-hcf", now)
	t.Cleanup(func() {
		if err := h.DeleteIndices(context.Background()); err != nil {
			t.Errorf("delete hcf indices: %v", err)
		}
	})
	return h
}

func TestHCFConformance(t *testing.T) {
	for _, refresh := range []Refresh{RefreshOnRead, RefreshOnWrite} {
		t.Run(string(refresh), func(t *testing.T) {
			c := open(t, refresh)
			hcftest.Run(t, hcftest.Harness{
				New: func(t *testing.T, now func() time.Time) hcf.Store { return newTestHCF(t, c, now) },
				Reopen: func(t *testing.T, s hcf.Store, now func() time.Time) hcf.Store {
					old := s.(*HCF)
					return c.newHCF(old.fpIndex[:len(old.fpIndex)-len("-fingerprints")], now)
				},
			})
		})
	}
}

func TestHCFIndexName(t *testing.T) {
	c := open(t, RefreshOnRead)
	tx, _, _ := c.IndexNames()
	prefix := tx[:len(tx)-len("-transactions")]
	if got := c.HCF().IndexName(); got != prefix+"-hcf-fingerprints" {
		t.Errorf("HCF().IndexName() = %q, want %q", got, prefix+"-hcf-fingerprints")
	}
}
