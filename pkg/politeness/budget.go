package politeness

import (
	"fmt"
	"strings"
)

// NoLimit, as a Budget field, means no limit.
const NoLimit = -1

// Budget is a group's Heritrix-style budget, in cost units (see
// CostPolicy). The semantics are Heritrix 3's WorkQueue:
//
//   - BalanceReplenish > 0 is the session balance a group receives whenever it
//     is activated. Every hand-out subtracts the item's cost; when the balance
//     is no longer positive the group is deactivated: once its politeness
//     delay has passed it joins the back of the inactive FIFO, and it is
//     activated again, with a fresh balance, only when no group is ready.
//     BalanceReplenish <= 0 disables this rotation. (Heritrix 1's notes on queue
//     budgets say a zero balance retires the group; here only TotalBudget
//     retires.)
//   - TotalBudget >= 0 is the lifetime spend at which the group is retired:
//     it keeps its items and accepts new ones but is not scheduled, and its
//     items are counted apart (Counts.RetiredItems). TotalBudget < 0 (NoLimit)
//     means no limit; 0 retires the group before its first fetch.
//   - HoldQueues (Heritrix's hold-queues, for site-first crawls) makes a new
//     group start inactive: it is activated only when no group is ready, that
//     is when the active groups cannot keep the fetchers busy, and then
//     stays active until its items run out (or its session balance, when
//     BalanceReplenish rotates groups). Setting it with SetBudget holds a
//     group that has not handed out an item yet; clearing it releases held
//     groups to the ready FIFO.
type Budget struct {
	BalanceReplenish int64 `json:"balance_replenish"`
	TotalBudget      int64 `json:"total_budget"`
	HoldQueues       bool  `json:"hold_queues"`
}

// DefaultBudget is Heritrix's default: a session balance of 3000 and no
// total budget.
func DefaultBudget() Budget { return Budget{BalanceReplenish: 3000, TotalBudget: NoLimit} }

// overTotal reports whether spending spent exhausts b's total budget.
func (b Budget) overTotal(spent int64) bool { return b.TotalBudget >= 0 && spent >= b.TotalBudget }

// sessionLimited reports whether b rotates groups by session balance.
func (b Budget) sessionLimited() bool { return b.BalanceReplenish > 0 }

// Override replaces some settings for the groups of one domain. It applies
// to a group whose id equals Domain, or whose first host equals Domain or
// ends with "."+Domain; the most specific override wins (an exact group id
// first, then the longest host suffix). Nil fields keep the defaults.
type Override struct {
	// Domain is a domain suffix such as "kommune.no", or a group id.
	Domain string `json:"domain"`
	// Budget replaces the default budget.
	Budget *Budget `json:"budget,omitempty"`
	// Delay replaces the default delay policy.
	Delay *DelayPolicy `json:"delay,omitempty"`
	// Cost replaces the default cost policy for items added afterwards.
	Cost CostPolicy `json:"-"`
}

// settings is the resolved configuration of a group. Groups share a
// settings value unless they have a budget of their own.
type settings struct {
	budget Budget
	delay  DelayPolicy
	cost   CostPolicy
}

// policy holds the scheduler's defaults, overrides and per-group budgets and
// resolves them for groups.
type policy struct {
	defaults     *settings
	overrides    map[string]*settings // by normalized domain
	groupBudgets map[string]Budget
}

// validateOverrides reports the first invalid override.
func validateOverrides(overrides []Override) error {
	seen := map[string]bool{}
	for _, o := range overrides {
		d := overrideDomain(o.Domain)
		if d == "" {
			return fmt.Errorf("override for domain %q: domain is empty", o.Domain)
		}
		if seen[d] {
			return fmt.Errorf("override for domain %q: defined twice", o.Domain)
		}
		seen[d] = true
		if o.Delay != nil {
			if err := o.Delay.Validate(); err != nil {
				return fmt.Errorf("override for domain %q: %w", o.Domain, err)
			}
		}
	}
	return nil
}

func overrideDomain(d string) string { return strings.Trim(strings.ToLower(strings.TrimSpace(d)), ".") }

// newPolicy builds the policy of validated overrides.
func newPolicy(def settings, overrides []Override, groupBudgets map[string]Budget) *policy {
	p := &policy{defaults: &def, overrides: make(map[string]*settings, len(overrides)), groupBudgets: groupBudgets}
	for _, o := range overrides {
		s := def
		if o.Budget != nil {
			s.budget = *o.Budget
		}
		if o.Delay != nil {
			s.delay = *o.Delay
		}
		if o.Cost != nil {
			s.cost = o.Cost
		}
		p.overrides[overrideDomain(o.Domain)] = &s
	}
	return p
}

// resolve returns the settings of group id whose first host is host.
func (p *policy) resolve(id, host string) *settings {
	s := p.match(id, host)
	if b, ok := p.groupBudgets[id]; ok {
		own := *s
		own.budget = b
		return &own
	}
	return s
}

func (p *policy) match(id, host string) *settings {
	if len(p.overrides) == 0 {
		return p.defaults
	}
	if s, ok := p.overrides[strings.ToLower(id)]; ok {
		return s
	}
	for h := host; h != ""; {
		if s, ok := p.overrides[h]; ok {
			return s
		}
		i := strings.IndexByte(h, '.')
		if i < 0 {
			break
		}
		h = h[i+1:]
	}
	return p.defaults
}
