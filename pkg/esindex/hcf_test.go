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

func TestHCFIndexNames(t *testing.T) {
	c := open(t, RefreshOnRead)
	fp, b := c.HCF().IndexNames()
	tx, _, _ := c.IndexNames()
	prefix := tx[:len(tx)-len("-transactions")]
	if fp != prefix+"-hcf-fingerprints" || b != prefix+"-hcf-batches" {
		t.Errorf("HCF().IndexNames() = %q, %q, want %q, %q", fp, b, prefix+"-hcf-fingerprints", prefix+"-hcf-batches")
	}
}
