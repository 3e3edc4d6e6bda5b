package coordinator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestProfileChanges(t *testing.T) {
	base := contracts.Profile{StartURLs: []string{"http://a.test/"}, Version: 1,
		Politeness: contracts.Politeness{MinDelayMS: 500, MaxDelayMS: 10000, DelayFactor: 2}}
	tests := []struct {
		name string
		edit func(p *contracts.Profile)
		want []string
	}{
		{"nothing but the version", func(p *contracts.Profile) { p.Version++ }, nil},
		{"one delay", func(p *contracts.Profile) { p.Version++; p.Politeness.MinDelayMS = 1000 },
			[]string{"politeness.min_delay_ms: 500 -> 1000"}},
		{"budget added", func(p *contracts.Profile) { p.Budget = &contracts.Budget{TotalBudget: 50} },
			[]string{"budget.total_budget: null -> 50"}},
		{"two fields", func(p *contracts.Profile) { p.Politeness.DelayFactor = 1; p.Politeness.MaxDelayMS = 50 },
			[]string{"politeness.delay_factor: 2 -> 1", "politeness.max_delay_ms: 10000 -> 50"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			tt.edit(&p)
			if diff := cmp.Diff(tt.want, profileChanges(base, p)); diff != "" {
				t.Errorf("profileChanges (-want +got):\n%s", diff)
			}
		})
	}
}
