package politeness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// ErrNoGroup is returned by Add for an item whose group cannot be told: no
// Group, no Host and no host in its URL.
var ErrNoGroup = errors.New("item has no group and no host")

// State is a group's scheduling state (see the package documentation).
type State string

// The states of a group.
const (
	StateIdle     State = "idle"
	StateReady    State = "ready"
	StateWaiting  State = "waiting"
	StateBusy     State = "busy"
	StateInactive State = "inactive"
	StateRetired  State = "retired"
)

type stateID uint8

const (
	stIdle stateID = iota
	stReady
	stWaiting
	stBusy
	stInactive
	stRetired
	nStates
)

func (st stateID) name() State {
	switch st {
	case stReady:
		return StateReady
	case stWaiting:
		return StateWaiting
	case stBusy:
		return StateBusy
	case stInactive:
		return StateInactive
	case stRetired:
		return StateRetired
	}
	return StateIdle
}

// Item is one URL to schedule.
type Item struct {
	// URL is the URL to fetch. Cost policies look at it.
	URL string
	// Host is the URL's host; if empty it is taken from URL. It is returned,
	// normalized (see NormalizeHost), in the lease.
	Host string
	// Group is the crawl host group id; if empty it is the Grouper's Lookup of
	// Host (alias or host; same-IP groups must be computed by the caller with
	// Grouper.Group, which may resolve).
	Group string
	// Via is the URL of the page that linked to URL, if known. Only cost
	// policies use it; it is not kept.
	Via string
	// NotBefore is the earliest time to fetch URL; zero or past means now
	// (Veidemann's earliestFetchTimeStamp).
	NotBefore time.Time
	// Payload is returned unchanged in the lease.
	Payload any
	// Cost, when set, prices this item instead of the group's cost policy
	// (the policy of the crawl the URL belongs to).
	Cost CostPolicy
	// Crawl, when set, is the crawl the item belongs to: its cost counts
	// in that crawl's use of the group, limited by the crawl's budget
	// there (SetCrawlBudget), not by other crawls'.
	Crawl string
}

// Lease is an item handed out by Next or TryNext. Its group is busy until
// Release is called with the lease or until Deadline passes.
type Lease struct {
	// Item is the item, with Group and Host filled in; Via and NotBefore are
	// not kept.
	Item Item
	// Cost is what the item cost its group's budget.
	Cost int
	// Token identifies the lease; a Release with a stale token is ignored.
	Token uint64
	// Deadline is the busy timeout: after it the group is ready again even
	// if Release was never called.
	Deadline time.Time

	g   *group // saves Release a map lookup
	use uint32 // the item's crawl use in g
}

// Config configures a Scheduler. The zero value is usable.
type Config struct {
	// BusyTimeout is how long a group stays busy without Release; default 2
	// minutes. It should exceed the longest fetch (with robots.txt).
	BusyTimeout time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Rand returns numbers in [0, 1) for backoff jitter; default
	// math/rand/v2.Float64.
	Rand func() float64
	// Logger receives retirements and busy timeouts; default discards.
	Logger *slog.Logger
	// Delay is the default delay policy; nil means DefaultDelayPolicy().
	Delay *DelayPolicy
	// Budget is the default budget; nil means DefaultBudget().
	Budget *Budget
	// Cost is the default cost policy; nil means UnitCost.
	Cost CostPolicy
	// HoldQueues sets Budget.HoldQueues in the default budget: new groups
	// start inactive and are activated only when no group is ready
	// (Heritrix's hold-queues, for site-first crawls). Overrides and
	// per-group budgets (SetBudget) say it for their groups.
	HoldQueues bool
	// Overrides replace settings for some domains.
	Overrides []Override
	// Grouper groups items added without a Group; nil groups by host.
	Grouper *Grouper
}

// Scheduler keeps per-group queues of items and hands out at most one item
// per group at a time, honouring each group's next eligible time, session
// balance and total budget. It is safe for concurrent use.
type Scheduler struct {
	now         func() time.Time
	rnd         func() float64
	log         *slog.Logger
	busyTimeout int64
	grouper     *Grouper

	mu        sync.Mutex
	overrides []Override
	pol       *policy
	groups    map[string]*group
	lastAdd   *group
	ready     ring[fifoEntry]
	inactive  ring[fifoEntry]
	wait      timeHeap
	busy      timeHeap
	counts    [nStates]int
	queued    int // items of groups that are not retired
	retired   int // items of retired groups, and retiredItems
	// retiredItems are items retired by their crawl's budget, until
	// DrainRetired hands them out.
	retiredItems []Item
	// crawls counts, per crawl, the groups it uses (see crawls.go).
	crawls  map[string]int
	token   uint64
	seq     uint64
	changed chan struct{}
	waiters int
}

// fifoEntry is a group in a FIFO; it is stale when the group has since left
// the FIFO's state or been pushed again.
type fifoEntry struct {
	g   *group
	gen uint32
}

// statusRing is how many recent status codes a group remembers.
const statusRing = 10

// group is one crawl host group.
type group struct {
	id string
	// embedRequests and embedBytes: see GroupReport.
	embedRequests, embedBytes int64
	hosts                     []string // hosts[0] is the first host, used for overrides
	hostIdx                   map[string]uint32
	q                         items
	st                        stateID
	held                      bool // must pass through the inactive FIFO before its next hand-out
	heapIdx                   int
	key                       int64 // wait: eligible time; busy: timeout (unix ns)
	keySeq                    uint64
	fifoGen                   uint32
	next                      int64 // politeness: not before (unix ns)
	token                     uint64
	set                       *settings

	balance   int64
	spent     int64
	costCount int64
	lastCost  int32
	enqueued  int64
	fetches   int64
	timeouts  int64
	backoff   Backoff
	dec       Decision
	lastFetch time.Duration
	status    [statusRing]int16
	statusPos uint8
	statusN   uint8
	lastErr   string

	// uses are the crawls whose items the group has held (see crawls.go).
	uses []*crawlUse
	// lastUse is the crawl use of the last released fetch; releasedAt,
	// lastOut, lastBackoff and lastRnd are what its delay was decided
	// from, so that SetCrawlDelay can decide it again; polVersion is the
	// version of the policy that decided it.
	lastUse     uint32
	releasedAt  int64
	lastOut     Outcome
	lastBackoff Backoff
	lastRnd     float64
	polVersion  int
}

// New returns a Scheduler configured by cfg.
func New(cfg Config) (*Scheduler, error) {
	def := settings{budget: DefaultBudget(), delay: DefaultDelayPolicy(), cost: UnitCost{}}
	if cfg.Budget != nil {
		def.budget = *cfg.Budget
	}
	if cfg.Delay != nil {
		if err := cfg.Delay.Validate(); err != nil {
			return nil, fmt.Errorf("new scheduler: %w", err)
		}
		def.delay = *cfg.Delay
	}
	if cfg.Cost != nil {
		def.cost = cfg.Cost
	}
	if cfg.HoldQueues {
		def.budget.HoldQueues = true
	}
	if cfg.BusyTimeout < 0 {
		return nil, fmt.Errorf("new scheduler: busy timeout %v must not be negative", cfg.BusyTimeout)
	}
	if err := validateOverrides(cfg.Overrides); err != nil {
		return nil, fmt.Errorf("new scheduler: %w", err)
	}
	pol := newPolicy(def, cfg.Overrides, map[string]Budget{})
	s := &Scheduler{
		now:         cfg.Now,
		rnd:         cfg.Rand,
		log:         cfg.Logger,
		busyTimeout: int64(cfg.BusyTimeout),
		grouper:     cfg.Grouper,
		overrides:   slices.Clone(cfg.Overrides),
		pol:         pol,
		groups:      map[string]*group{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rnd == nil {
		s.rnd = rand.Float64
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.busyTimeout == 0 {
		s.busyTimeout = int64(2 * time.Minute)
	}
	if s.grouper == nil {
		s.grouper = NewGrouper(Aliases{}, nil)
	}
	return s, nil
}

func (s *Scheduler) nowNS() int64 { return s.now().UnixNano() }

func (s *Scheduler) nextSeq() uint64 {
	s.seq++
	return s.seq
}

// notifyLocked wakes blocked Next calls.
func (s *Scheduler) notifyLocked() {
	if s.waiters > 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// Add queues it in its group, creating the group (waiting until its next
// time, or ready) on its first item. Items of a retired group are kept but
// not scheduled. It costs O(log n) in the number of groups.
func (s *Scheduler) Add(it Item) error {
	host := it.Host
	if host == "" {
		host = HostOf(it.URL)
	} else {
		host = NormalizeHost(host)
	}
	id := it.Group
	if id == "" && host != "" {
		id = s.grouper.Lookup(host)
	}
	if id == "" {
		return fmt.Errorf("add %q: %w", it.URL, ErrNoGroup)
	}
	if host == "" {
		host = id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowNS()
	g := s.lastAdd
	if g == nil || g.id != id {
		if g = s.groups[id]; g == nil {
			g = s.newGroup(id, host)
		}
		s.lastAdd = g // items often come in batches of one group
	}
	pol := g.set.cost
	if it.Cost != nil {
		pol = it.Cost
	}
	cost := clampCost(pol.Cost(it.URL, it.Via))
	e := entry{url: it.URL, payload: it.Payload, host: g.hostIndex(host), use: s.useOf(g, it.Crawl)}
	if u := g.use(e.use); u != nil && u.over() {
		// The crawl's budget in the group is spent: retired at once, as
		// items added to a retired group stay unscheduled.
		g.enqueued++
		s.retireEntry(g, e, u)
		return nil
	}
	if u := g.use(e.use); u != nil {
		u.queued++
	}
	at := now
	if !it.NotBefore.IsZero() {
		at = max(at, it.NotBefore.UnixNano())
	}
	if at > now {
		g.q.pushFuture(futureEntry{e: e, at: at, seq: s.nextSeq(), cost: cost})
	} else {
		g.q.pushDue(e, cost, at)
	}
	g.enqueued++
	if g.st == stRetired {
		s.retired++
	} else {
		s.queued++
	}
	switch g.st {
	case stIdle:
		s.place(g, now)
	case stWaiting:
		if max(g.next, g.q.headAt()) != g.key {
			s.wait.remove(g)
			s.place(g, now)
		}
	}
	s.notifyLocked()
	return nil
}

func clampCost(c int) int32 {
	return int32(min(max(c, 0), math.MaxInt32))
}

func (s *Scheduler) newGroup(id, host string) *group {
	g := &group{id: id, hosts: []string{host}, heapIdx: -1, st: stIdle}
	g.set = s.pol.resolve(id, host)
	g.held = g.set.budget.HoldQueues
	if g.set.budget.sessionLimited() {
		g.balance = g.set.budget.BalanceReplenish
	}
	s.groups[id] = g
	s.counts[stIdle]++
	return g
}

// hostIndex returns the index of host in g.hosts, adding it if new.
func (g *group) hostIndex(host string) uint32 {
	if g.hostIdx != nil {
		if i, ok := g.hostIdx[host]; ok {
			return i
		}
	} else {
		for i, h := range g.hosts {
			if h == host {
				return uint32(i)
			}
		}
	}
	g.hosts = append(g.hosts, host)
	i := uint32(len(g.hosts) - 1)
	switch {
	case g.hostIdx != nil:
		g.hostIdx[host] = i
	case len(g.hosts) > 8:
		g.hostIdx = make(map[string]uint32, len(g.hosts))
		for j, h := range g.hosts {
			g.hostIdx[h] = uint32(j)
		}
	}
	return i
}

// setState moves g to state st, keeping the counters.
func (s *Scheduler) setState(g *group, st stateID) {
	if g.st == st {
		return
	}
	if g.st == stRetired {
		s.retired -= g.q.n
		s.queued += g.q.n
	}
	if st == stRetired {
		s.queued -= g.q.n
		s.retired += g.q.n
		s.log.Info("group retired", "chg", g.id, "spent", g.spent, "budget", g.set.budget.TotalBudget, "queued", g.q.n)
	}
	s.counts[g.st]--
	s.counts[st]++
	g.st = st
}

func (s *Scheduler) pushFIFO(r *ring[fifoEntry], g *group) {
	g.fifoGen++
	r.push(fifoEntry{g: g, gen: g.fifoGen})
}

// popFIFO pops the first group of r that is still in state st.
func (s *Scheduler) popFIFO(r *ring[fifoEntry], st stateID) *group {
	for r.len() > 0 {
		e := r.pop()
		if e.g.st == st && e.g.fifoGen == e.gen {
			return e.g
		}
	}
	return nil
}

// place puts g, which is in no structure and not busy, where it belongs:
// retired, idle, waiting, inactive or ready.
func (s *Scheduler) place(g *group, now int64) {
	if g.set.budget.overTotal(g.spent) {
		s.setState(g, stRetired)
		return
	}
	s.retireSpent(g)
	if g.q.n == 0 {
		s.setState(g, stIdle)
		return
	}
	g.q.advance(now)
	if at := max(g.next, g.q.headAt()); at > now {
		g.key, g.keySeq = at, s.nextSeq()
		s.wait.push(g)
		s.setState(g, stWaiting)
		return
	}
	if g.held || (g.set.budget.sessionLimited() && g.balance <= 0) || g.headExhausted() {
		s.pushFIFO(&s.inactive, g)
		s.setState(g, stInactive)
		return
	}
	s.pushFIFO(&s.ready, g)
	s.setState(g, stReady)
}

// promote moves waiting groups whose time has come, and busy groups whose
// timeout has passed, on in time order (Veidemann's queue worker).
func (s *Scheduler) promote(now int64) {
	for {
		w, b := s.wait.peek(), s.busy.peek()
		switch {
		case w != nil && w.key <= now && (b == nil || w.key <= b.key):
			s.wait.remove(w)
			s.place(w, now)
		case b != nil && b.key <= now:
			s.busy.remove(b)
			s.expire(b, now)
		default:
			return
		}
	}
}

// expire returns a busy group whose lease timed out to the schedule.
func (s *Scheduler) expire(g *group, now int64) {
	g.token = 0
	g.next = g.key
	g.timeouts++
	g.lastErr = "busy timeout: lease not released"
	s.log.Warn("busy timeout", "chg", g.id, "deadline", time.Unix(0, g.key))
	s.place(g, now)
}

// nextLocked hands out the head item of the first ready group or, if none
// is ready, of the first inactive group, which it activates.
func (s *Scheduler) nextLocked(now int64) (Lease, bool) {
	s.promote(now)
	for {
		g := s.popFIFO(&s.ready, stReady)
		if g == nil {
			if g = s.popFIFO(&s.inactive, stInactive); g == nil {
				return Lease{}, false
			}
			g.held = false
			if g.set.budget.sessionLimited() {
				g.balance = g.set.budget.BalanceReplenish
			}
			g.replenish()
		}
		// Settings may have changed since g was queued: re-check before any
		// item is tried, as Heritrix does.
		if g.set.budget.overTotal(g.spent) {
			s.setState(g, stRetired)
			continue
		}
		g.q.advance(now)
		if !g.q.hasDue() || g.next > now || s.retireSpent(g) {
			s.place(g, now)
			continue
		}
		return s.lease(g, now), true
	}
}

// lease hands out g's head item and marks g busy.
func (s *Scheduler) lease(g *group, now int64) Lease {
	e, cost := g.q.pop()
	s.queued--
	g.balance -= int64(cost)
	g.spent += int64(cost)
	g.costCount++
	g.lastCost = cost
	if u := g.use(e.use); u != nil {
		u.queued--
		u.spent += int64(cost)
		u.balance -= int64(cost)
	}
	s.token++
	g.token = s.token
	g.key, g.keySeq = addSat(now, s.busyTimeout), s.nextSeq()
	s.busy.push(g)
	s.setState(g, stBusy)
	return Lease{
		Item:     Item{URL: e.url, Host: g.hosts[e.host], Group: g.id, Payload: e.payload, Crawl: crawlOf(g, e)},
		Cost:     int(cost),
		Token:    g.token,
		Deadline: time.Unix(0, g.key),
		g:        g,
		use:      e.use,
	}
}

func addSat(t, d int64) int64 {
	if d > 0 && t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// TryNext hands out the next item without blocking, and reports whether
// there was one. The item's group is busy until Release or its busy timeout.
func (s *Scheduler) TryNext() (Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextLocked(s.nowNS())
}

// maxSleep bounds one wait in Next, so that Next notices clock steps.
const maxSleep = time.Minute

// Next blocks until some group is ready, marks it busy until Release or its
// busy timeout, and returns its head item. It returns ctx's error when ctx
// is done first. Concurrent calls never receive items of one group at once.
func (s *Scheduler) Next(ctx context.Context) (Lease, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return Lease{}, err
		}
		s.mu.Lock()
		now := s.nowNS()
		if l, ok := s.nextLocked(now); ok {
			s.mu.Unlock()
			return l, nil
		}
		sleep := maxSleep
		for _, g := range [...]*group{s.wait.peek(), s.busy.peek()} {
			if g != nil {
				sleep = min(sleep, time.Duration(g.key-now))
			}
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.waiters++
		s.mu.Unlock()

		sleep = max(sleep, time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-timer.C:
		}
		s.mu.Lock()
		s.waiters--
		s.mu.Unlock()
	}
}

// Embedded counts a request made for a page of another group (a rendered
// page's subresource) and the bytes of its answer in group id, when the
// scheduler holds that group. It takes no lease: the page's group is the
// one busy for the whole load.
func (s *Scheduler) Embedded(id string, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[id]; g != nil {
		g.embedRequests++
		g.embedBytes += bytes
	}
}

// Wake makes blocked Next calls look again, for example after an injected
// clock moved.
func (s *Scheduler) Wake() {
	s.mu.Lock()
	s.notifyLocked()
	s.mu.Unlock()
}

// Release ends lease l with the fetch's outcome: it computes the group's
// delay and moves the group to waiting (or ready, or inactive when its
// session balance is spent, or retired when its total budget is). It reports
// false, and records nothing of o, when the lease is no longer current: at or
// after its Deadline the group has returned (or is returned now) to the
// schedule as if the lease had never been released, and it may have been
// handed out again since.
func (s *Scheduler) Release(l Lease, o Outcome) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := l.g
	if g == nil || g.id != l.Item.Group {
		g = s.groups[l.Item.Group]
	}
	if g == nil || g.st != stBusy || l.Token == 0 || g.token != l.Token {
		return false
	}
	now := s.nowNS()
	s.busy.remove(g)
	if now >= g.key {
		// The lease timed out; no one had noticed yet.
		s.expire(g, now)
		s.notifyLocked()
		return false
	}
	g.token = 0
	if o.Unfetched {
		// Nothing was fetched: refund the item's cost, and no delay.
		g.balance += int64(l.Cost)
		g.spent -= int64(l.Cost)
		if u := g.use(l.use); u != nil {
			u.balance += int64(l.Cost)
			u.spent -= int64(l.Cost)
		}
		s.place(g, now)
		s.notifyLocked()
		return true
	}
	pol := g.set.delay
	if o.Policy != nil {
		pol = *o.Policy
	}
	g.lastUse, g.releasedAt, g.lastBackoff, g.lastRnd, g.polVersion = l.use, now, g.backoff, s.rnd(), pol.Version
	g.lastOut = Outcome{Duration: o.Duration, Status: o.Status, ErrKind: o.ErrKind, RetryAfter: o.RetryAfter, CrawlDelay: o.CrawlDelay}
	if u := g.use(l.use); u != nil {
		u.fetches++
	}
	g.dec = pol.Decide(&g.backoff, o, time.Unix(0, now), g.lastRnd)
	g.next = addSat(now, int64(g.dec.Delay))
	g.fetches++
	g.lastFetch = o.Duration
	g.status[g.statusPos] = int16(min(max(o.Status, -1), math.MaxInt16))
	g.statusPos = (g.statusPos + 1) % statusRing
	g.statusN = min(g.statusN+1, statusRing)
	switch {
	case o.Err != nil:
		g.lastErr = o.Err.Error()
	case o.ErrKind != ErrorNone:
		g.lastErr = o.ErrKind.String()
	case o.Status >= 400:
		g.lastErr = fmt.Sprintf("http status %d", o.Status)
	}
	s.place(g, now)
	s.notifyLocked()
	return true
}

// SetBudget sets the budget of one group, or with group "" the default
// budget of groups without an override or a budget of their own. A budget
// set before the group's first item applies from its creation. As in
// Heritrix, every retired group is then re-evaluated: one whose spend is now
// below its total budget leaves retirement through the inactive FIFO (with a
// fresh balance when activated), and a group whose spend reached its lowered
// budget is retired (a busy one when it is released). A budget that turns
// HoldQueues on holds the groups that have not handed out an item yet; one
// that turns it off releases the groups still held.
func (s *Scheduler) SetBudget(group string, b Budget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	def, budgets := *s.pol.defaults, s.pol.groupBudgets
	if group == "" {
		def.budget = b
	} else {
		budgets[group] = b
	}
	s.reresolve(newPolicy(def, s.overrides, budgets))
}

// SetOverrides replaces the per-domain overrides and re-evaluates retired
// groups as SetBudget does.
func (s *Scheduler) SetOverrides(overrides []Override) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := validateOverrides(overrides); err != nil {
		return fmt.Errorf("set overrides: %w", err)
	}
	s.overrides = slices.Clone(overrides)
	s.reresolve(newPolicy(*s.pol.defaults, s.overrides, s.pol.groupBudgets))
	return nil
}

func (s *Scheduler) reresolve(pol *policy) {
	s.pol = pol
	now := s.nowNS()
	// In the order of the groups' ids, not the map's, so that groups newly
	// held enter the inactive FIFO in the same order every time.
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[id]
		wasHold := g.set.budget.HoldQueues
		g.set = pol.resolve(g.id, g.hosts[0])
		s.rehold(g, wasHold, now)
		over := g.set.budget.overTotal(g.spent)
		switch {
		case g.st == stRetired && !over:
			g.held = true
			s.place(g, now)
		case over && g.st != stRetired && g.st != stBusy:
			if g.st == stWaiting {
				s.wait.remove(g)
			}
			s.setState(g, stRetired) // a FIFO entry of g goes stale
		}
	}
	s.notifyLocked()
}

// rehold applies a change of g's HoldQueues setting: a group turned on that
// has never handed out an item is held (site-first applies to groups not
// started yet; an active group stays active), and a held group turned off is
// released.
func (s *Scheduler) rehold(g *group, wasHold bool, now int64) {
	hold := g.set.budget.HoldQueues
	switch {
	case hold && !wasHold && !g.held && g.costCount == 0 && g.st != stBusy && g.st != stRetired:
		g.held = true
		if g.st == stReady {
			s.place(g, now) // its ready FIFO entry goes stale
		}
	case !hold && wasHold && g.held:
		g.held = false
		if g.st == stInactive && !(g.set.budget.sessionLimited() && g.balance <= 0) {
			s.place(g, now)
		}
	}
}

// SetAliases replaces the aliases of the scheduler's Grouper (shared with
// whoever else uses it). Only items added afterwards are grouped by them:
// queued items keep their group, so while old items drain a host may briefly
// belong to two groups.
func (s *Scheduler) SetAliases(a Aliases) { s.grouper.SetAliases(a) }

// Counts are the scheduler's totals.
type Counts struct {
	// Groups counts all groups; the next six count them by state.
	Groups   int `json:"groups"`
	Ready    int `json:"ready"`
	Waiting  int `json:"waiting"`
	Busy     int `json:"busy"`
	Inactive int `json:"inactive"`
	Retired  int `json:"retired"`
	Idle     int `json:"idle"`
	// Queued counts the items of groups that are not retired, not counting
	// leased items (one per busy group).
	Queued int `json:"queued"`
	// RetiredItems counts the items parked in retired groups.
	RetiredItems int `json:"retired_items"`
}

// Drained reports whether nothing is left to schedule or in flight, though
// retired groups may still hold items (Heritrix's pause-at-finish moment).
func (c Counts) Drained() bool { return c.Queued == 0 && c.Busy == 0 }

// Counts returns the totals.
func (s *Scheduler) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.countsLocked()
}

func (s *Scheduler) countsLocked() Counts {
	return Counts{
		Groups:       len(s.groups),
		Ready:        s.counts[stReady],
		Waiting:      s.counts[stWaiting],
		Busy:         s.counts[stBusy],
		Inactive:     s.counts[stInactive],
		Retired:      s.counts[stRetired],
		Idle:         s.counts[stIdle],
		Queued:       s.queued,
		RetiredItems: s.retired,
	}
}

// Timed is a group with a time: when a waiting group becomes eligible, or
// when a busy group's lease times out.
type Timed struct {
	Group string
	At    time.Time
}

// States is the scheduler's structures as Veidemann's crawl host group design draws them.
type States struct {
	// Ready is the ready FIFO, first out first.
	Ready []string
	// Waiting is the wait heap by eligible time.
	Waiting []Timed
	// Busy is the busy heap by timeout.
	Busy []Timed
	// Inactive is the inactive FIFO, first out first.
	Inactive []string
	// Retired and Idle are sorted by group id.
	Retired []string
	Idle    []string
}

// States returns a copy of the scheduler's structures, as of the last
// operation (due waiting groups are promoted by the next Next). It costs
// O(n log n) and is meant for tests and debugging.
func (s *Scheduler) States() States {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st States
	fifo := func(r *ring[fifoEntry], want stateID) (out []string) {
		r.each(func(e *fifoEntry) {
			if e.g.st == want && e.g.fifoGen == e.gen {
				out = append(out, e.g.id)
			}
		})
		return out
	}
	heap := func(h *timeHeap) []Timed {
		es := slices.Clone(h.es)
		slices.SortFunc(es, func(a, b heapEntry) int {
			if a.key != b.key {
				return cmp.Compare(a.key, b.key)
			}
			return cmp.Compare(a.seq, b.seq)
		})
		var out []Timed
		for _, e := range es {
			out = append(out, Timed{Group: e.g.id, At: time.Unix(0, e.key)})
		}
		return out
	}
	st.Ready = fifo(&s.ready, stReady)
	st.Inactive = fifo(&s.inactive, stInactive)
	st.Waiting = heap(&s.wait)
	st.Busy = heap(&s.busy)
	for _, g := range s.groups {
		switch g.st {
		case stRetired:
			st.Retired = append(st.Retired, g.id)
		case stIdle:
			st.Idle = append(st.Idle, g.id)
		}
	}
	slices.Sort(st.Retired)
	slices.Sort(st.Idle)
	return st
}

// DrainRetired removes up to limit items of retired groups and returns them
// with Group, Host and Payload set. A caller that parks retired URLs
// elsewhere (the loader marks them retired in the transaction index) keeps
// the scheduler's memory bounded by the work it can actually do. Retired
// groups keep their state and spend, so items added to them later are
// retired too until their budget is raised.
func (s *Scheduler) DrainRetired(limit int) []Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired == 0 {
		return nil
	}
	var out []Item
	if n := min(limit, len(s.retiredItems)); n > 0 {
		out = append(out, s.retiredItems[:n]...)
		s.retiredItems = slices.Delete(s.retiredItems, 0, n)
		if len(s.retiredItems) == 0 {
			s.retiredItems = nil // let the backing array go
		}
		s.retired -= n
	}
	for _, g := range s.groups {
		if len(out) >= limit {
			break
		}
		if g.st != stRetired {
			continue
		}
		for g.q.n > 0 && len(out) < limit {
			var e entry
			if g.q.hasDue() {
				e, _ = g.q.pop()
			} else {
				e = g.q.popFuture().e
			}
			s.retired--
			if u := g.use(e.use); u != nil {
				u.queued--
			}
			out = append(out, Item{URL: e.url, Host: g.hosts[e.host], Group: g.id, Payload: e.payload, Crawl: crawlOf(g, e)})
		}
		if len(out) >= limit {
			break
		}
	}
	return out
}

// Backlog returns how many items group holds and the time one of them takes
// to be handed out after the one before: the group's last fetch and the
// delay decided after it (0 for an unknown or never-fetched group). A page
// rendered in a browser holds its lease for seconds while its delay may be
// short: the delay alone would tell a queue of them drains far sooner than
// it does.
func (s *Scheduler) Backlog(group string) (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[group]; g != nil {
		return g.q.n, g.dec.Delay + g.lastFetch
	}
	return 0, 0
}

// Queued returns how many items group holds and the delay last decided for
// it (0 for an unknown or never-fetched group), cheaply enough to ask for
// every added item.
func (s *Scheduler) Queued(group string) (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[group]; g != nil {
		return g.q.n, g.dec.Delay
	}
	return 0, 0
}

// crawlOf returns the crawl of g's item e, "" for none.
func crawlOf(g *group, e entry) string {
	if u := g.use(e.use); u != nil {
		return u.crawl
	}
	return ""
}
