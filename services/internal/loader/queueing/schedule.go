package queueing

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
func (fr *Frontier) applyBudget(t *Task) {
	if !fr.pol.budgetChange(t.CrawlID, t.Profile.Version, t.Group) {
		return
	}
	fr.sched.SetCrawlBudget(t.Group, t.Host, t.CrawlID, budgetOf(t.Profile.Budget, t.Group, t.Host))
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
func (fr *Frontier) schedule(ctx context.Context, t *Task) {
	pol := fr.pol.delayPolicy(t.Profile)
	if hold := fr.state.holdUntil(t.Shard, t.Group, pol.Min); hold.After(t.notBefore) {
		t.notBefore = hold
	}
	it := politeness.Item{URL: t.URL, Host: t.Host, Group: t.Group, NotBefore: t.notBefore, Payload: t, Cost: fr.pol.costPolicy(t.Profile), Crawl: t.CrawlID}
	if t.prepaid {
		it.Cost = politeness.ZeroCost{}
	}
	if err := fr.sched.Add(it); err != nil {
		fr.claims.release(t)
		t.dl.done(ctx, fr.log, fmt.Errorf("schedule %s: %w", t.URL, err))
	}
}

// The worker hands back a task whose lease ended without an outcome to
// record: it is scheduled again (Again: robots.txt was fetched in its
// stead; Retry: a retryable failure; Abandon: the index was unreachable
// while a backend was down), parked (Pause: its crawl is paused), or
// settled with the error (Abandon).

// Again schedules t again after its lease fetched robots.txt in its stead.
func (fr *Frontier) Again(ctx context.Context, t *Task) {
	t.prepaid = true // robots.txt is paid as the page: budgets count pages
	fr.schedule(ctx, t)
}

// Retry schedules t again, one attempt more, after a retryable failure.
func (fr *Frontier) Retry(ctx context.Context, t *Task) {
	// The group's own backoff (from the outcome) slows every URL of the
	// group meanwhile.
	t.Attempt++
	t.prepaid = false
	t.notBefore = time.Now().Add(fr.cfg.RetryDelay * time.Duration(t.Attempt))
	fr.schedule(ctx, t)
}

// Pause parks t, whose crawl is paused (a filed URL stays filed).
func (fr *Frontier) Pause(ctx context.Context, t *Task) {
	t.notBefore = time.Time{}
	fr.claims.release(t)
	if t.dl.front != nil {
		t.dl.drop() // stays filed; taken again once the crawl runs
		return
	}
	t.dl.done(ctx, fr.log, fr.park(ctx, []*Task{t}, fr.cfg.PausedDelay))
}

// Abandon takes back t, for which no outcome could be had (err): while a
// backend is down it waits for it and schedules t again, keeping its
// attempts; otherwise t's contract is settled with err (retried).
func (fr *Frontier) Abandon(ctx context.Context, t *Task, err error) {
	if ctx.Err() == nil && len(fr.deps.Gate.Down(ctx)) > 0 && fr.deps.Gate.Wait(ctx) == nil {
		// A backend was down (the record could not be read): the task
		// keeps its place and its attempts, and waited for the backend.
		fr.claims.release(t)
		fr.schedule(ctx, t)
		return
	}
	if ctx.Err() == nil {
		fr.log.Warn("abandon url", "url", t.URL, "crawl_id", t.CrawlID, "err", err)
	}
	fr.Settle(ctx, t, err)
}

// Release ends a lease with its politeness outcome o. A newly learnt Crawl-delay is
// stored before the group is released, so no second request to the group
// can come before a failover would know of it; a backoff is stored right
// after (it is at least BackoffBase away).
func (fr *Frontier) Release(ctx context.Context, lease politeness.Lease, t *Task, o politeness.Outcome) {
	pol := fr.pol.delayPolicy(t.Profile)
	o.Policy = pol
	if o.Unfetched {
		fr.sched.Release(lease, o)
		return
	}
	trouble := troubled(o)
	if !trouble {
		fr.state.learn(ctx, t.Shard, t.Group, pol, o.CrawlDelay, false, 0)
	}
	if !fr.sched.Release(lease, o) {
		return
	}
	_, delay := fr.sched.Queued(t.Group)
	fr.met.PolitenessDelay(delay)
	if trouble {
		fr.state.learn(ctx, t.Shard, t.Group, pol, o.CrawlDelay, true, delay)
	}
}

// troubled reports whether o raises the group's backoff (as
// politeness.DelayPolicy.Decide counts trouble).
func troubled(o politeness.Outcome) bool {
	return o.Status == 429 || o.Status == 503 || o.ErrKind == politeness.ErrorTimeout || o.ErrKind == politeness.ErrorReset
}

// retireLoop hands the URLs of retired groups on (Deps.Retired) to be
// recorded as retired, so that
// they neither hold memory nor keep their crawl from finishing; raising the
// budget (PATCH) puts them back to to-be-loaded.
func (fr *Frontier) retireLoop(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, it := range fr.sched.DrainRetired(10000) {
			fr.met.URL(metrics.OutcomeRetired)
			fr.deps.Retired(ctx, it.Payload.(*Task), "crawl host group budget spent")
		}
	}
}
