package politeness

import (
	"maps"
	"slices"
	"time"
)

// Budgets per crawl. Several crawls may queue items in one group (a crawl
// host group is the unit of politeness, not of a crawl): they share the
// group's politeness schedule, one item at a time, while each keeps its own
// use of the group, as each Heritrix crawl has its own work queues
// (https://github.com/internetarchive/heritrix3): its spend, its session
// balance and its total budget, set with SetCrawlBudget. A crawl without a
// budget of its own is never limited by another crawl's; its spend is still
// counted, for the report. A crawl's use of its groups ends with
// ForgetCrawl.
//
//   - Total budget: when a crawl's spend in a group reaches its total budget,
//     its items in the group are retired (DrainRetired returns them) the
//     next time one of them is at the head of the group's queue, and items
//     of that crawl added later are retired at once. The other crawls'
//     items stay scheduled.
//   - Session balance: the group is deactivated when the item at its head
//     belongs to a crawl whose session balance is spent; activation gives
//     every crawl of the group a fresh balance, as the group's own.
//   - Hold queues: a crawl budget with HoldQueues holds a group that has not
//     handed out an item yet.

// crawlUse is one crawl's use of one group.
type crawlUse struct {
	crawl   string // "" for a free slot
	budget  Budget
	limited bool // budget is set
	spent   int64
	balance int64
	queued  int   // items queued in the group
	retired int64 // items retired by the total budget
	fetches int64 // leases released with a fetch
}

// over reports whether u's total budget is spent.
func (u *crawlUse) over() bool { return u.limited && u.budget.overTotal(u.spent) }

// exhausted reports whether u's session balance is spent.
func (u *crawlUse) exhausted() bool {
	return u.limited && u.budget.sessionLimited() && u.balance <= 0
}

// use returns the crawl use of index i (1-based; 0 is no crawl).
func (g *group) use(i uint32) *crawlUse {
	if i == 0 || int(i) > len(g.uses) {
		return nil
	}
	return g.uses[i-1]
}

// useIndex returns the index of crawl's use of g, 0 when crawl is "" or
// has none.
func (g *group) useIndex(crawl string) uint32 {
	if crawl == "" {
		return 0
	}
	for i, u := range g.uses {
		if u.crawl == crawl {
			return uint32(i + 1)
		}
	}
	return 0
}

// useOf returns the index of crawl's use of g, adding it (in a free slot if
// there is one); 0 when crawl is "".
func (s *Scheduler) useOf(g *group, crawl string) uint32 {
	if crawl == "" {
		return 0
	}
	free := 0
	for i, u := range g.uses {
		switch {
		case u.crawl == crawl:
			return uint32(i + 1)
		case u.crawl == "" && u.queued == 0 && free == 0:
			free = i + 1
		}
	}
	if s.crawls == nil {
		s.crawls = map[string]int{}
	}
	s.crawls[crawl]++
	u := &crawlUse{crawl: crawl}
	if free > 0 {
		g.uses[free-1] = u
		return uint32(free)
	}
	g.uses = append(g.uses, u)
	return uint32(len(g.uses))
}

// headEntry returns the item g hands out next (a due one, else the first
// future one).
func (g *group) headEntry() (entry, bool) {
	if g.q.hasDue() {
		l := &g.q.lanes[0]
		return l.r.buf[l.r.head], true
	}
	if len(g.q.future) > 0 {
		return g.q.future[0].e, true
	}
	return entry{}, false
}

// headExhausted reports whether the crawl of g's due head has spent its
// session balance.
func (g *group) headExhausted() bool {
	if len(g.uses) == 0 || !g.q.hasDue() {
		return false
	}
	e, _ := g.headEntry()
	u := g.use(e.use)
	return u != nil && u.exhausted()
}

// replenish gives every crawl of g a fresh session balance.
func (g *group) replenish() {
	for _, u := range g.uses {
		if u.limited && u.budget.sessionLimited() {
			u.balance = u.budget.BalanceReplenish
		}
	}
}

// holdWanted reports whether a crawl budget of g asks to hold queues.
func (g *group) holdWanted() bool {
	for _, u := range g.uses {
		if u.limited && u.budget.HoldQueues {
			return true
		}
	}
	return false
}

// retireSpent retires the items of every crawl whose total budget in g is
// spent, while such an item is at g's head, and reports whether it retired
// any. The caller holds s.mu and has taken g out of every structure, or g
// is busy.
func (s *Scheduler) retireSpent(g *group) bool {
	if len(g.uses) == 0 {
		return false
	}
	any := false
	for {
		e, ok := g.headEntry()
		if !ok {
			return any
		}
		u := g.use(e.use)
		if u == nil || !u.over() {
			return any
		}
		s.retireUse(g, e.use)
		any = true
	}
}

// retireUse moves every queued item of g's crawl use i to the retired list.
func (s *Scheduler) retireUse(g *group, i uint32) {
	u := g.use(i)
	removed := g.q.removeIf(func(e *entry) bool { return e.use == i })
	for _, e := range removed {
		s.retireEntry(g, e, u)
	}
	if g.st != stRetired {
		s.queued -= len(removed)
	} else {
		s.retired -= len(removed) // counted again by retireEntry
	}
	u.queued -= len(removed)
}

// retireEntry puts e, of g's crawl use u, on the retired list.
func (s *Scheduler) retireEntry(g *group, e entry, u *crawlUse) {
	s.retiredItems = append(s.retiredItems, Item{URL: e.url, Host: g.hosts[e.host], Group: g.id, Payload: e.payload, Crawl: u.crawl})
	s.retired++
	u.retired++
}

// SetCrawlBudget sets crawl's budget in group, whose first host is host
// (the group is made if it does not exist yet); nil removes the crawl's
// budget there, so that it is no longer limited. The crawl's spend is kept:
// a raised total budget lets its later items be scheduled again (retired
// items were handed out by DrainRetired and must be added again), a lowered
// one retires its queued items the next time one is at the group's head.
// A first budget starts with a full session balance. A budget with
// HoldQueues holds the group if it has not handed out an item yet; clearing
// it releases the group unless another crawl or the group's own budget
// holds it.
func (s *Scheduler) SetCrawlBudget(group, host, crawl string, b *Budget) {
	if crawl == "" || group == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[group]
	if g == nil {
		if host == "" {
			host = group
		}
		g = s.newGroup(group, NormalizeHost(host))
	}
	s.setCrawlBudget(g, crawl, b, s.nowNS())
	s.notifyLocked()
}

// SetCrawlBudgets sets, as SetCrawlBudget does, crawl's budget in every
// group it uses to budget(group, first host of the group).
func (s *Scheduler) SetCrawlBudgets(crawl string, budget func(group, host string) *Budget) {
	if crawl == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowNS()
	for _, g := range s.groups {
		if g.useIndex(crawl) != 0 {
			s.setCrawlBudget(g, crawl, budget(g.id, g.hosts[0]), now)
		}
	}
	s.notifyLocked()
}

func (s *Scheduler) setCrawlBudget(g *group, crawl string, b *Budget, now int64) {
	u := g.use(s.useOf(g, crawl))
	wasHold := g.holdWanted()
	switch {
	case b == nil:
		u.limited = false
	case !u.limited:
		u.budget, u.limited, u.balance = *b, true, b.BalanceReplenish
	default:
		u.budget = *b
		u.balance = min(u.balance, b.BalanceReplenish)
	}
	hold := g.holdWanted() || g.set.budget.HoldQueues
	switch {
	case hold && !wasHold && !g.held && g.costCount == 0 && g.st != stBusy && g.st != stRetired:
		g.held = true
	case !hold && wasHold && g.held:
		g.held = false
	}
	s.replace(g, now)
}

// replace places g again after its settings changed, unless it is busy
// (Release places it) or retired by its own budget.
func (s *Scheduler) replace(g *group, now int64) {
	switch g.st {
	case stWaiting:
		s.wait.remove(g)
		s.place(g, now)
	case stReady, stInactive, stIdle:
		s.place(g, now) // a FIFO entry of g goes stale
	}
}

// ForgetCrawl ends crawl's use of every group: its budgets and spend are
// dropped, and items of it still queued are scheduled without a budget
// (Crawls lists the crawl until they are gone). Call it when the crawl has
// ended, so that its state does not outlive it.
func (s *Scheduler) ForgetCrawl(crawl string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if crawl == "" || s.crawls[crawl] == 0 {
		return // uses no group
	}
	now := s.nowNS()
	left := 0
	for _, g := range s.groups {
		i := g.useIndex(crawl)
		if i == 0 {
			continue
		}
		u := g.use(i)
		hold := u.limited && u.budget.HoldQueues
		queued := u.queued
		*u = crawlUse{queued: queued}
		if queued > 0 {
			u.crawl = crawl // its items still point here, unlimited
			left++
		}
		if hold && g.held && !g.holdWanted() && !g.set.budget.HoldQueues {
			g.held = false
			s.replace(g, now)
		}
	}
	if left > 0 {
		s.crawls[crawl] = left // forgotten again once they are gone
	} else {
		delete(s.crawls, crawl)
	}
	s.notifyLocked()
}

// Crawls returns the crawls that use some group, for a caller that ends the
// use of those that have ended (ForgetCrawl). It costs O(crawls).
func (s *Scheduler) Crawls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.crawls))
}

// SetCrawlDelay applies pol at once to every group whose last fetch was of
// crawl: its delay after that fetch is decided again under pol, from the
// outcome and backoff state of that fetch, so that a changed politeness
// setting takes effect by the group's next fetch instead of after the
// delay decided under the old one. Later releases of items of crawl pass
// pol themselves (Outcome.Policy).
func (s *Scheduler) SetCrawlDelay(crawl string, pol DelayPolicy) {
	if crawl == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowNS()
	for _, g := range s.groups {
		u := g.use(g.lastUse)
		if u == nil || u.crawl != crawl || g.fetches == 0 || g.st == stBusy {
			continue
		}
		b := g.lastBackoff
		g.dec = pol.Decide(&b, g.lastOut, time.Unix(0, g.releasedAt), g.lastRnd)
		g.backoff = b
		g.next = addSat(g.releasedAt, int64(g.dec.Delay))
		g.polVersion = pol.Version
		if g.st == stWaiting || ((g.st == stReady || g.st == stInactive) && g.next > now) {
			s.replace(g, now)
		}
	}
	s.notifyLocked()
}

// CrawlUse is one crawl's use of a group in the frontier report.
type CrawlUse struct {
	Crawl string `json:"crawl_id"`
	// Queued counts the crawl's items waiting in the group.
	Queued int `json:"queued"`
	// Spent is what the crawl's items have cost in the group; Fetches
	// counts them.
	Spent   int64 `json:"spent"`
	Fetches int64 `json:"fetches"`
	// Budget is the crawl's budget in the group; nil: none.
	Budget *Budget `json:"budget,omitempty"`
	// SessionBalance is what is left of its session balance, with a budget
	// that rotates groups.
	SessionBalance int64 `json:"session_balance,omitempty"`
	// Retired counts the crawl's items retired by its total budget.
	Retired int64 `json:"retired,omitempty"`
	// Exhausted reports that the total budget is spent.
	Exhausted bool `json:"budget_spent,omitempty"`
}

// crawlReports returns g's crawl uses for its report line.
func (g *group) crawlReports() []CrawlUse {
	var out []CrawlUse
	for _, u := range g.uses {
		if u.crawl == "" {
			continue
		}
		r := CrawlUse{Crawl: u.crawl, Queued: u.queued, Spent: u.spent, Fetches: u.fetches, Retired: u.retired, Exhausted: u.over()}
		if u.limited {
			b := u.budget
			r.Budget = &b
			if b.sessionLimited() {
				r.SessionBalance = u.balance
			}
		}
		out = append(out, r)
	}
	return out
}
