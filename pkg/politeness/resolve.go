package politeness

// BudgetFor returns the budget that the scheduler's override matching
// (an exact group id first, then the longest host suffix) gives the group
// id whose first host is host, over the default def. It is for callers that
// keep budgets per crawl, such as the loader, and hand each group its own
// with SetBudget. overrides must be valid; only their Budget is used.
func BudgetFor(def Budget, overrides []Override, id, host string) Budget {
	s := newPolicy(settings{budget: def}, overrides, nil).match(id, NormalizeHost(host))
	return s.budget
}
