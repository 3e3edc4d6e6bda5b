package politeness

import (
	"cmp"
	"slices"
	"time"
)

// GroupReport is one group's line in the frontier report (Heritrix-style).
type GroupReport struct {
	Group string `json:"chg"`
	State State  `json:"state"`
	// Hosts are the hosts whose items the group has held, first host first.
	Hosts []string `json:"hosts"`
	// NextEligible is when the group may be handed out next: for a ready or
	// inactive group the time it became eligible, for a waiting or retired one
	// the later of its politeness time and its next item's time, for an idle
	// one its politeness time, and zero for a busy one.
	NextEligible time.Time `json:"next_eligible,omitzero"`
	// BusyUntil is a busy group's timeout.
	BusyUntil time.Time `json:"busy_until,omitzero"`
	// Delay is the last computed delay and Why the term that set it; Decision
	// has the whole breakdown.
	Delay    time.Duration `json:"delay"`
	Why      Why           `json:"why,omitempty"`
	Decision Decision      `json:"decision"`
	// Queued counts the items waiting in the group (not the leased one).
	Queued int `json:"queued"`
	// Enqueued counts all items ever added.
	Enqueued int64 `json:"enqueued"`
	// Fetches counts released leases; Timeouts counts busy timeouts.
	Fetches  int64 `json:"fetches"`
	Timeouts int64 `json:"timeouts"`
	// EmbedRequests and EmbedBytes count the requests made for pages of
	// other groups rendered in a browser (their scripts, styles, images)
	// and the bytes of their answers.
	EmbedRequests int64 `json:"embed_requests,omitempty"`
	EmbedBytes    int64 `json:"embed_bytes,omitempty"`
	// LastFetch is the duration of the last released fetch.
	LastFetch time.Duration `json:"last_fetch"`
	// SessionBalance is what is left of the session balance.
	SessionBalance int64 `json:"session_balance"`
	// Spent is the lifetime expenditure; Budget the group's budget.
	Spent  int64  `json:"spent"`
	Budget Budget `json:"budget"`
	// LastCost and AvgCost are the cost of the last item handed out and the
	// average over all items handed out.
	LastCost int     `json:"last_cost"`
	AvgCost  float64 `json:"avg_cost"`
	// RecentStatus holds the last HTTP status codes, oldest first (0: no
	// response).
	RecentStatus []int `json:"recent_status"`
	// LastError is the last error, failing status or busy timeout.
	LastError string `json:"last_error,omitempty"`
	// Backoff is the group's backoff state.
	Backoff Backoff `json:"backoff"`
	// Crawl is the crawl of the last fetch, whose delay policy, of version
	// PolicyVersion (a crawl profile's version), decided Delay.
	Crawl         string `json:"crawl_id,omitempty"`
	PolicyVersion int    `json:"policy_version,omitempty"`
	// Crawls are the crawls whose items the group holds or has held, each
	// with its own spend and budget (see SetCrawlBudget).
	Crawls []CrawlUse `json:"crawls,omitempty"`
}

// Report is the frontier report.
type Report struct {
	Time   time.Time `json:"time"`
	Counts Counts    `json:"counts"`
	// Groups are the groups with the most queued items first (ties by id),
	// at most the limit given to Snapshot.
	Groups []GroupReport `json:"groups"`
	// Truncated reports whether groups were left out.
	Truncated bool `json:"truncated,omitempty"`
}

// Snapshot returns the frontier report with at most limit groups (all when
// limit <= 0). It costs O(n log n) in the number of groups.
func (s *Scheduler) Snapshot(limit int) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *group) int {
		if c := cmp.Compare(b.q.n, a.q.n); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	r := Report{Time: time.Unix(0, s.nowNS()), Counts: s.countsLocked()}
	if limit > 0 && len(gs) > limit {
		gs, r.Truncated = gs[:limit], true
	}
	r.Groups = make([]GroupReport, 0, len(gs))
	for _, g := range gs {
		r.Groups = append(r.Groups, g.report())
	}
	return r
}

// Group returns the report line of group id, if it exists.
func (s *Scheduler) Group(id string) (GroupReport, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[id]
	if !ok {
		return GroupReport{}, false
	}
	return g.report(), true
}

func (g *group) report() GroupReport {
	r := GroupReport{
		Group:         g.id,
		State:         g.st.name(),
		Hosts:         slices.Clone(g.hosts),
		Delay:         g.dec.Delay,
		Why:           g.dec.Why,
		Decision:      g.dec,
		Queued:        g.q.n,
		Enqueued:      g.enqueued,
		Fetches:       g.fetches,
		Timeouts:      g.timeouts,
		EmbedRequests: g.embedRequests,
		EmbedBytes:    g.embedBytes,
		LastFetch:     g.lastFetch,
		Spent:         g.spent,
		Budget:        g.set.budget,
		LastCost:      int(g.lastCost),
		Backoff:       g.backoff,
		LastError:     g.lastErr,
		PolicyVersion: g.polVersion,
		Crawls:        g.crawlReports(),
	}
	if u := g.use(g.lastUse); u != nil {
		r.Crawl = u.crawl
	}
	if g.set.budget.sessionLimited() {
		r.SessionBalance = g.balance
	}
	if g.costCount > 0 {
		r.AvgCost = float64(g.spent) / float64(g.costCount)
	}
	switch {
	case g.st == stBusy:
		r.BusyUntil = time.Unix(0, g.key)
	case g.st == stWaiting:
		r.NextEligible = time.Unix(0, g.key)
	case g.q.n > 0:
		r.NextEligible = time.Unix(0, max(g.next, g.q.headAt()))
	case g.next > 0:
		r.NextEligible = time.Unix(0, g.next)
	}
	r.RecentStatus = make([]int, 0, g.statusN)
	for i := range int(g.statusN) {
		j := (int(g.statusPos) - int(g.statusN) + i + statusRing) % statusRing
		r.RecentStatus = append(r.RecentStatus, int(g.status[j]))
	}
	return r
}
