package loader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/lru"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Scheduler: pkg/politeness hands out one task per crawl host group at a
// time and decides each group's delay. A crawl's profile reaches it through
// politeness' own API: its politeness settings as a DelayPolicy passed with
// every outcome, its cost policy with every item, and its budget (with the
// per-domain overrides resolved by politeness.BudgetFor) as the group's
// budget.

// policies caches what the loader derives from profiles. Each crawl keeps
// its own budget in every group it uses (politeness.SetCrawlBudget), set
// from the newest profile version the loader has seen of the crawl: in a
// contract, or read by the watch (watch.go) once a PATCH stored it.
type policies struct {
	crawlDelayCap time.Duration

	delay *lru.Cache[*contracts.Profile, *politeness.DelayPolicy]

	mu      sync.Mutex
	costs   map[string]politeness.CostPolicy // by cost policy name: a handful
	budgets *lru.Cache[budgetKey, int]       // by group and crawl: the profile version its budget came from
	// newest is the newest profile seen per crawl: tasks that carry an
	// older one run under it (current).
	newest *lru.Cache[string, *contracts.Profile]
	// applied is the profile version the watch applied per crawl.
	applied *lru.Cache[string, int]
}

// budgetKey is one crawl's use of one group.
type budgetKey struct {
	group, crawlID string
}

func newPolicies(crawlDelayCap time.Duration) policies {
	return policies{
		crawlDelayCap: crawlDelayCap,
		delay:         lru.New[*contracts.Profile, *politeness.DelayPolicy](1024, 0),
		costs:         map[string]politeness.CostPolicy{},
		budgets:       lru.New[budgetKey, int](100000, 0),
		newest:        lru.New[string, *contracts.Profile](10000, 0),
		applied:       lru.New[string, int](10000, 0),
	}
}

// delayPolicy returns the delay policy of a crawl's profile.
func (p *policies) delayPolicy(prof *contracts.Profile) *politeness.DelayPolicy {
	pol, _ := p.delay.GetOrLoad(prof, func() (*politeness.DelayPolicy, error) {
		pol := politeness.DelayPolicyFor(prof.Politeness)
		pol.CrawlDelayCap = p.crawlDelayCap
		pol.Version = prof.Version
		return &pol, nil
	})
	return pol
}

// costPolicy returns the cost policy of prof's budget; nil means the
// scheduler's default (unit).
func (p *policies) costPolicy(prof *contracts.Profile) politeness.CostPolicy {
	if prof.Budget == nil || prof.Budget.CostPolicy == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.costs[prof.Budget.CostPolicy]; ok {
		return c
	}
	c, err := politeness.ParseCostPolicy(prof.Budget.CostPolicy)
	if err != nil {
		return nil // validated by MCP; an unknown name prices as unit
	}
	p.costs[prof.Budget.CostPolicy] = c
	return c
}

// current returns the newest profile seen of crawlID, prof itself when
// it is that one or newer (and then remembers it). Contracts built before a
// PATCH carry the older version, and may arrive after it.
func (p *policies) current(crawlID string, prof *contracts.Profile) *contracts.Profile {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.newest.Get(crawlID); ok && n.Version >= prof.Version {
		return n
	}
	p.newest.Put(crawlID, prof)
	return prof
}

// apply reports whether version of crawlID's profile is newer than the one
// the watch last applied to every group of the crawl, and takes it as
// applied.
func (p *policies) apply(crawlID string, version int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.applied.Get(crawlID); ok && v >= version {
		return false
	}
	p.applied.Put(crawlID, version)
	return true
}

// forget drops what the loader keeps of a crawl that has ended.
func (p *policies) forget(crawlID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.newest.Delete(crawlID)
	p.applied.Delete(crawlID)
}

// budgetChange reports whether crawlID's budget in group must be set from
// profile version: true the first time the group sees the crawl or a newer
// version of its profile.
func (p *policies) budgetChange(crawlID string, version int, group string) bool {
	k := budgetKey{group, crawlID}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.budgets.Get(k); ok && old >= version {
		return false
	}
	p.budgets.Put(k, version)
	return true
}

// applyBudget gives t's crawl its budget in t's group (none when its
// profile has none): the crawl's own, apart from other crawls' uses of the
// group.
func (l *Loader) applyBudget(t *task) {
	if !l.pol.budgetChange(t.CrawlID, t.Profile.Version, t.Group) {
		return
	}
	l.sched.SetCrawlBudget(t.Group, t.Host, t.CrawlID, budgetOf(t.Profile.Budget, t.Group, t.Host))
}

// budgetOf maps a profile's budget onto politeness: its defaults (0 means
// politeness' default) and its per-domain overrides as politeness
// overrides, resolved for the group by politeness itself; nil for none.
func budgetOf(b *contracts.Budget, group, host string) *politeness.Budget {
	if b == nil {
		return nil
	}
	def := politeness.DefaultBudget()
	if b.BalanceReplenish > 0 {
		def.BalanceReplenish = b.BalanceReplenish
	}
	if b.TotalBudget > 0 {
		def.TotalBudget = b.TotalBudget
	}
	def.HoldQueues = b.HoldQueues // site-first crawls, as Heritrix holds queues (https://github.com/internetarchive/heritrix3)
	if len(b.Overrides) == 0 {
		return &def
	}
	overrides := make([]politeness.Override, 0, len(b.Overrides))
	for _, o := range b.Overrides {
		ob := def
		if o.BalanceReplenish > 0 {
			ob.BalanceReplenish = o.BalanceReplenish
		}
		ob.TotalBudget = politeness.NoLimit
		if o.TotalBudget > 0 {
			ob.TotalBudget = o.TotalBudget
		}
		overrides = append(overrides, politeness.Override{Domain: o.Domain, Budget: &ob})
	}
	r := politeness.BudgetFor(def, overrides, group, host)
	return &r
}

// schedule hands t to the politeness scheduler, not before t.notBefore nor
// before its group may be fetched after a failover (see state.go).
func (l *Loader) schedule(ctx context.Context, t *task) {
	pol := l.pol.delayPolicy(t.Profile)
	if hold := l.state.holdUntil(t.Shard, t.Group, pol.Min); hold.After(t.notBefore) {
		t.notBefore = hold
	}
	it := politeness.Item{URL: t.URL, Host: t.Host, Group: t.Group, NotBefore: t.notBefore, Payload: t, Cost: l.pol.costPolicy(t.Profile), Crawl: t.CrawlID}
	if t.prepaid {
		it.Cost = politeness.ZeroCost{}
	}
	if err := l.sched.Add(it); err != nil {
		l.claims.release(t)
		t.dl.done(ctx, l.log, fmt.Errorf("schedule %s: %w", t.URL, err))
	}
}

// requeue takes back a task whose lease ended without an outcome to
// record: it is scheduled again (robots.txt was fetched in its stead; a
// retryable failure; the index was unreachable while a backend was down),
// parked (its crawl is paused), or settled with the error (abandoned).
func (l *Loader) requeue(ctx context.Context, t *task, o outcome) {
	switch o.Verdict {
	case vAgain:
		t.prepaid = true // robots.txt is paid as the page: budgets count pages
		l.schedule(ctx, t)
	case vRetry:
		// The group's own backoff (from the outcome) slows every URL of the
		// group meanwhile.
		t.Attempt++
		t.prepaid = false
		t.notBefore = time.Now().Add(l.cfg.RetryDelay * time.Duration(t.Attempt))
		l.schedule(ctx, t)
	case vPaused:
		t.notBefore = time.Time{}
		l.claims.release(t)
		if t.dl.front != nil {
			t.dl.drop() // stays filed; taken again once the crawl runs
			return
		}
		t.dl.done(ctx, l.log, l.park(ctx, []*task{t}, l.cfg.PausedDelay))
	case vAbandon:
		if ctx.Err() == nil && len(l.deps.Gate.Down(ctx)) > 0 && l.deps.Gate.Wait(ctx) == nil {
			// A backend was down (the record could not be read): the task
			// keeps its place and its attempts, and waited for the backend.
			l.claims.release(t)
			l.schedule(ctx, t)
			return
		}
		if ctx.Err() == nil {
			l.log.Warn("abandon url", "url", t.URL, "crawl_id", t.CrawlID, "err", o.Err)
		}
		l.settle(ctx, t, o.Err)
	}
}

// release ends a lease with its outcome. A newly learnt Crawl-delay is
// stored before the group is released, so no second request to the group
// can come before a failover would know of it; a backoff is stored right
// after (it is at least BackoffBase away).
func (l *Loader) release(ctx context.Context, lease politeness.Lease, t *task, o outcome) {
	pol := l.pol.delayPolicy(t.Profile)
	o.Pol.Policy = pol
	if o.Pol.Unfetched {
		l.sched.Release(lease, o.Pol)
		return
	}
	trouble := troubled(o.Pol)
	if !trouble {
		l.state.learn(ctx, t.Shard, t.Group, pol, o.Pol.CrawlDelay, false, 0)
	}
	if !l.sched.Release(lease, o.Pol) {
		return
	}
	_, delay := l.sched.Queued(t.Group)
	l.met.PolitenessDelay(delay)
	if trouble {
		l.state.learn(ctx, t.Shard, t.Group, pol, o.Pol.CrawlDelay, true, delay)
	}
}

// troubled reports whether o raises the group's backoff (as
// politeness.DelayPolicy.Decide counts trouble).
func troubled(o politeness.Outcome) bool {
	return o.Status == 429 || o.Status == 503 || o.ErrKind == politeness.ErrorTimeout || o.ErrKind == politeness.ErrorReset
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
			l.met.URL(metrics.OutcomeRetired)
			l.route(ctx, it.Payload.(*task), outcome{Verdict: vRetired, Reason: "crawl host group budget spent"})
		}
	}
}
