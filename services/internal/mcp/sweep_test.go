package mcp

import (
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// TestSweepWaitsForIndexBacklog checks that a to-be-indexed record past its
// lease is left alone while the index queue holds messages, and recovered
// when the queue is empty or once it has waited RecoveryAttempts leases.
func TestSweepWaitsForIndexBacklog(t *testing.T) {
	cfg := lifecycleConfig()
	tests := []struct {
		name         string
		backlog      bool
		leases       int // leases waited before the sweep
		wantAttempts int
	}{
		{"index queue empty", false, 1, 1},
		{"index queue holds messages", true, 1, 0},
		{"index queue holds messages, waited every attempt's lease", true, cfg.RecoveryAttempts, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycleMCP(t, cfg)
			id := l.create(t, contracts.Profile{})
			for _, r := range l.records(t, id) {
				for _, tr := range [][2]contracts.Status{{contracts.ToBeLoaded, contracts.ToBeParsed}, {contracts.ToBeParsed, contracts.ToBeIndexed}} {
					if _, err := l.set.Tx.Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: tr[0], To: tr[1]}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.backlog {
				if err := l.set.Queue.Publish(t.Context(), contracts.QueueIndex, queue.Message{Body: []byte("{}")}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Duration(tc.leases)*cfg.RecoveryLease + 50*time.Millisecond)
			if _, err := l.co.Sweep(t.Context()); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			for _, r := range l.records(t, id) {
				if r.Status != contracts.ToBeIndexed || r.Attempts != tc.wantAttempts {
					t.Errorf("record %s after the sweep = %s attempts %d, want to-be-indexed attempts %d", r.URL, r.Status, r.Attempts, tc.wantAttempts)
				}
			}
		})
	}
}
