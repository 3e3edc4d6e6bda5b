package loader

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// TestPolitenessStateWrites counts the asset writes of the politeness
// state: none for groups at the crawl's minimum delay, one when a group
// learns a Crawl-delay, and the stored bound is that delay.
func TestPolitenessStateWrites(t *testing.T) {
	tests := []struct {
		name       string
		robots     string
		wantWrites int64
		wantDelay  time.Duration
	}{
		{"no crawl-delay", "", 0, 0},
		{"crawl-delay", "User-agent: *\nCrawl-delay: 0.3\n", 1, 300 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t, tc.robots)
			urls := s.pages(4)
			b := newBackends(t)
			b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls...)
			l, stop := b.runLoader(t, config(t, nil))
			b.waitLoaded(t, "c", urls...)
			stop()
			t.Logf("%d state writes for %d requests", l.StateWrites(), l.Fetched())
			if got := l.StateWrites(); got != tc.wantWrites {
				t.Errorf("state writes = %d, want %d", got, tc.wantWrites)
			}
			if tc.wantDelay == 0 {
				return
			}
			group, _, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://")) // as submit groups
			rc, err := b.assets.Get(t.Context(), queueing.StatePrefix+routing.ShardQueue(routing.ShardOf(group, b.shards), b.shards)+".json", 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			body, _ := io.ReadAll(rc)
			// The stored state, as its format is documented (state.go).
			var f struct {
				Groups map[string]struct {
					DelayMS int64 `json:"delay_ms"`
				} `json:"groups"`
			}
			if err := json.Unmarshal(body, &f); err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(f.Groups[group].DelayMS) * time.Millisecond; got != tc.wantDelay {
				t.Errorf("stored bound of %s = %v, want %v (state %s)", group, got, tc.wantDelay, body)
			}
		})
	}
}
