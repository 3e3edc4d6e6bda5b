package loader

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
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
			rc, err := b.assets.Get(t.Context(), stateKey(routing.ShardOf(group, b.shards), b.shards), 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			body, _ := io.ReadAll(rc)
			var f stateFile
			if err := json.Unmarshal(body, &f); err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(f.Groups[group].DelayMS) * time.Millisecond; got != tc.wantDelay {
				t.Errorf("stored bound of %s = %v, want %v (state %s)", group, got, tc.wantDelay, body)
			}
		})
	}
}

// TestPolitenessStateRetake: a shard is activated (its state loaded, its
// groups held) on its first contract, and again when a redelivered contract
// shows it may have been taken over meanwhile, with the bounds the other
// owner stored.
func TestPolitenessStateRetake(t *testing.T) {
	b := newBackends(t)
	pol := politeness.DefaultDelayPolicy()
	pol.Min = 100 * time.Millisecond
	mine := newPolitenessState(b.assets, 1, slog.New(slog.DiscardHandler))
	mine.retakeAfter = 0
	other := newPolitenessState(b.assets, 1, slog.New(slog.DiscardHandler))
	ctx := t.Context()

	mine.activate(ctx, 0, false)
	first := mine.holdUntil(0, "g", pol.Min)
	if first.IsZero() {
		t.Fatal("holdUntil right after the first activation is zero, want the activation plus the minimum delay")
	}
	// The other loader owns the shard for a while and learns a Crawl-delay.
	other.activate(ctx, 0, false)
	other.learn(ctx, 0, "g", &pol, 5*time.Second, false, 0)
	mine.activate(ctx, 0, false) // an ordinary delivery: nothing changes
	if got := mine.holdUntil(0, "g", pol.Min); !got.Equal(first) {
		t.Errorf("holdUntil after an ordinary delivery = %v, want %v", got, first)
	}
	mine.activate(ctx, 0, true) // a redelivery: the shard came back
	got := mine.holdUntil(0, "g", pol.Min)
	if d := got.Sub(first); d < 5*time.Second-pol.Min {
		t.Errorf("holdUntil after the retake = first activation + %v, want the other owner's 5s Crawl-delay from the retake", d)
	}
}
