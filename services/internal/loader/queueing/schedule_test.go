package queueing

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
)

// TestBudgetOf checks the mapping of a profile's budget onto politeness:
// zero means politeness' default, the most specific domain override wins,
// and an override without a total budget has none.
func TestBudgetOf(t *testing.T) {
	b := &contracts.Budget{BalanceReplenish: 50, TotalBudget: 100, HoldQueues: true, Overrides: []contracts.BudgetOverride{
		{Domain: "example.org", TotalBudget: 10},
		{Domain: "www.example.org.", BalanceReplenish: 5, TotalBudget: 20},
		{Domain: "free.net"},
	}}
	tests := []struct {
		name        string
		group, host string
		want        politeness.Budget
	}{
		{"no override", "other.com", "other.com", politeness.Budget{BalanceReplenish: 50, TotalBudget: 100, HoldQueues: true}},
		{"domain itself", "example.org", "example.org", politeness.Budget{BalanceReplenish: 50, TotalBudget: 10, HoldQueues: true}},
		{"subdomain", "a.example.org", "a.example.org", politeness.Budget{BalanceReplenish: 50, TotalBudget: 10, HoldQueues: true}},
		{"longest suffix wins", "x.www.example.org", "X.WWW.example.org", politeness.Budget{BalanceReplenish: 5, TotalBudget: 20, HoldQueues: true}},
		{"not a suffix at a dot", "notexample.org", "notexample.org", politeness.Budget{BalanceReplenish: 50, TotalBudget: 100, HoldQueues: true}},
		{"override without total", "free.net", "free.net", politeness.Budget{BalanceReplenish: 50, TotalBudget: politeness.NoLimit, HoldQueues: true}},
		{"group named by alias, host decides", "alias", "a.example.org", politeness.Budget{BalanceReplenish: 50, TotalBudget: 10, HoldQueues: true}},
	}
	for _, tc := range tests {
		if got := budgetOf(b, tc.group, tc.host); got == nil || !cmp.Equal(*got, tc.want) {
			t.Errorf("%s: budgetOf(%q, %q) = %+v, want %+v", tc.name, tc.group, tc.host, got, tc.want)
		}
	}
	def := politeness.DefaultBudget()
	if got := budgetOf(&contracts.Budget{}, "g", "g"); got == nil || !cmp.Equal(*got, def) {
		t.Errorf("budgetOf(empty budget) = %+v, want politeness' default %+v", got, def)
	}
	if got := budgetOf(nil, "g", "g"); got != nil {
		t.Errorf("budgetOf(nil) = %+v, want nil (no budget: the crawl is not limited)", got)
	}
}
