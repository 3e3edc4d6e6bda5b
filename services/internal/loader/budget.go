package loader

import (
	"context"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
)

// budgetKey identifies the profile version a group's budget was set from.
type budgetKey struct {
	crawlID string
	version int
}

// applyBudget gives group the budget of profile p (or of its override for
// host's domain) when p has one. Groups shared by several crawls take the
// budget of the crawl whose URL arrived last with a new profile version.
func (l *Loader) applyBudget(crawlID, group, host string, p *contracts.Profile) {
	if p.Budget == nil {
		return
	}
	k := budgetKey{crawlID, p.Version}
	l.polMu.Lock()
	// Contracts built before a PATCH may arrive after it: a profile version
	// older than one already seen for the crawl never overrides it.
	if newest, ok := l.versions[crawlID]; ok && p.Version < newest {
		l.polMu.Unlock()
		return
	}
	l.versions[crawlID] = p.Version
	if l.budgets[group] == k {
		l.polMu.Unlock()
		return
	}
	if len(l.budgets) > 100000 {
		clear(l.budgets)
	}
	if len(l.versions) > 10000 {
		clear(l.versions)
	}
	l.budgets[group] = k
	l.polMu.Unlock()
	l.sched.SetBudget(group, budgetFor(p.Budget, host))
}

// budgetFor returns the scheduler budget of host under b.
func budgetFor(b *contracts.Budget, host string) politeness.Budget {
	balance, total := b.BalanceReplenish, b.TotalBudget
	best := -1
	for _, o := range b.Overrides {
		d := strings.ToLower(strings.TrimSuffix(o.Domain, "."))
		if (host == d || strings.HasSuffix(host, "."+d)) && len(d) > best {
			best = len(d)
			total = o.TotalBudget
			if o.BalanceReplenish > 0 {
				balance = o.BalanceReplenish
			}
		}
	}
	out := politeness.DefaultBudget()
	if balance > 0 {
		out.BalanceReplenish = balance
	}
	if total > 0 {
		out.TotalBudget = total
	}
	return out
}

// costPolicy returns the cost policy of p's budget; nil means the
// scheduler's default (unit).
func (l *Loader) costPolicy(p *contracts.Profile) politeness.CostPolicy {
	if p.Budget == nil || p.Budget.CostPolicy == "" {
		return nil
	}
	l.polMu.Lock()
	defer l.polMu.Unlock()
	if c, ok := l.costs[p.Budget.CostPolicy]; ok {
		return c
	}
	c, err := politeness.ParseCostPolicy(p.Budget.CostPolicy)
	if err != nil {
		return nil // validated by MCP; an unknown name prices as unit
	}
	l.costs[p.Budget.CostPolicy] = c
	return c
}

// retireLoop parks the URLs of retired groups as retired records, so that
// they neither hold memory nor keep their crawl from finishing; raising the
// budget (PATCH) puts them back to to-be-loaded.
func (l *Loader) retireLoop(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, it := range l.sched.DrainRetired(10000) {
			l.finish(&result{t: it.Payload.(*task), status: contracts.Retired, reason: "crawl host group budget spent"})
		}
	}
}
