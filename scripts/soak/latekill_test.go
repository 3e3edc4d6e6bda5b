package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestLateKillFails checks that a backend kill after lateKill of the
// reachable pages fails the run, and one before it does not.
func TestLateKillFails(t *testing.T) {
	killed := time.Now()
	for _, tc := range []struct {
		share float64
		fails bool
	}{{0.56, false}, {0.89, false}, {0.9, true}, {1.0, true}} {
		k := &nodeKill{target: "minio", node: "minio1", share: tc.share, killed: killed, started: killed.Add(time.Minute)}
		fails := runChecks(io.Discard, config{delayMS: 1000}, nil, nil, []*nodeKill{k}, nil, nil, nil, nil, nil, archiveResult{}, nil, "v")
		late := false
		for _, f := range fails {
			late = late || strings.Contains(f, "not mid-crawl")
		}
		if late != tc.fails {
			t.Errorf("kill at %.0f%% of the pages: failed as late %v, want %v (failures %q)", 100*tc.share, late, tc.fails, fails)
		}
	}
}
