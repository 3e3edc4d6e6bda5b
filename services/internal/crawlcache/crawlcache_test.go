package crawlcache

import (
	"context"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestProfilesResolve(t *testing.T) {
	c := NewProfiles(nil)
	p := &contracts.Profile{Name: "x"}
	if got, err := c.Resolve(context.Background(), "c", p); err != nil || got != p {
		t.Errorf("Resolve(inline) = %v, %v", got, err)
	}
	if _, err := c.Resolve(context.Background(), "c", nil); err == nil {
		t.Errorf("Resolve(unknown crawl) succeeded")
	}
}
