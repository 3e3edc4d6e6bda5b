package mcp

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/politeness"
)

// TestHumanize checks that the frontier report MCP serves has durations in
// milliseconds and null for never, unknown and no limit.
func TestHumanize(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		g    politeness.GroupReport
		want map[string]any
	}{
		{"fresh group", politeness.GroupReport{Group: "a", Budget: politeness.DefaultBudget()}, map[string]any{
			"next_eligible": nil, "busy_until": nil, "delay_ms": nil, "why": nil, "last_fetch_ms": nil,
			"budget":  map[string]any{"balance_replenish": 3000.0, "total_budget": nil, "hold_queues": false},
			"backoff": map[string]any{"level": 0.0, "last_trouble": nil},
		}},
		{"fetched group", politeness.GroupReport{Group: "b", NextEligible: at, Delay: 1500 * time.Microsecond, Why: politeness.WhyMin,
			Decision: politeness.Decision{Delay: 1500 * time.Microsecond, Why: politeness.WhyMin, Factor: time.Millisecond, Base: 1500 * time.Microsecond, CrawlDelay: 2 * time.Second},
			Fetches:  3, LastFetch: 250 * time.Millisecond, Budget: politeness.Budget{TotalBudget: 40}}, map[string]any{
			"next_eligible": "2026-11-23T10:00:00Z", "busy_until": nil, "delay_ms": 1.5, "why": string(politeness.WhyMin), "last_fetch_ms": 250.0,
			"budget":  map[string]any{"balance_replenish": nil, "total_budget": 40.0, "hold_queues": false},
			"backoff": map[string]any{"level": 0.0, "last_trouble": nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(politeness.Report{Time: at, Groups: []politeness.GroupReport{tc.g}})
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Groups []map[string]any `json:"groups"`
			}
			if err := json.Unmarshal(humanize(raw), &out); err != nil || len(out.Groups) != 1 {
				t.Fatalf("humanize = %s, %v", humanize(raw), err)
			}
			got := map[string]any{}
			for k := range tc.want {
				got[k] = out.Groups[0][k]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("humanize(%s) (-want +got):\n%s", tc.name, diff)
			}
			if _, ok := out.Groups[0]["delay"]; ok {
				t.Errorf("humanize kept the nanosecond field delay")
			}
		})
	}
}
