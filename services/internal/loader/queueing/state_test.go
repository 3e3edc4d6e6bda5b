package queueing

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/politeness"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
)

// TestPolitenessStateRetake: a shard is activated (its state loaded, its
// groups held) on its first contract, and again when a redelivered contract
// shows it may have been taken over meanwhile, with the bounds the other
// owner stored.
func TestPolitenessStateRetake(t *testing.T) {
	store := embedtest.Open(t).Assets
	pol := politeness.DefaultDelayPolicy()
	pol.Min = 100 * time.Millisecond
	mine := newPolitenessState(store, 1, slog.New(slog.DiscardHandler))
	mine.retakeAfter = 0
	other := newPolitenessState(store, 1, slog.New(slog.DiscardHandler))
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
