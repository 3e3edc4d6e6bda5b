package mcp

import (
	"encoding/json"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/politeness"
)

// The frontier report in human units: the loaders report their scheduler's
// state in Go's units (nanosecond durations, zero times, -1 for no limit);
// MCP serves every duration in milliseconds and never, unknown and no
// limit as null.

// humanReport is one loader's report as GET /api/v1/frontier serves it.
type humanReport struct {
	Time      time.Time         `json:"time"`
	Counts    politeness.Counts `json:"counts"`
	Groups    []humanGroup      `json:"groups"`
	Truncated bool              `json:"truncated"`
}

// humanGroup is one crawl host group's line.
type humanGroup struct {
	Group          string           `json:"chg"`
	State          politeness.State `json:"state"`
	Hosts          []string         `json:"hosts"`
	NextEligible   *time.Time       `json:"next_eligible"`
	BusyUntil      *time.Time       `json:"busy_until"`
	DelayMS        *float64         `json:"delay_ms"`
	Why            *string          `json:"why"`
	Decision       humanDecision    `json:"decision"`
	Queued         int              `json:"queued"`
	Enqueued       int64            `json:"enqueued"`
	Fetches        int64            `json:"fetches"`
	Timeouts       int64            `json:"timeouts"`
	LastFetchMS    *float64         `json:"last_fetch_ms"`
	SessionBalance int64            `json:"session_balance"`
	Spent          int64            `json:"spent"`
	Budget         humanBudget      `json:"budget"`
	LastCost       int              `json:"last_cost"`
	AvgCost        float64          `json:"avg_cost"`
	RecentStatus   []int            `json:"recent_status"`
	LastError      *string          `json:"last_error"`
	Backoff        humanBackoff     `json:"backoff"`
	// CrawlID is the crawl of the group's last fetch, whose profile version
	// ProfileVersion set the delay (null before the first fetch).
	CrawlID        *string `json:"crawl_id"`
	ProfileVersion *int    `json:"profile_version"`
	// Crawls are the crawls the group holds URLs of, each with its own
	// spend and budget.
	Crawls []humanCrawl `json:"crawls"`
}

// humanCrawl is one crawl's use of a group: its own spend and budget.
type humanCrawl struct {
	CrawlID        string       `json:"crawl_id"`
	Queued         int          `json:"queued"`
	Fetches        int64        `json:"fetches"`
	Spent          int64        `json:"spent"`
	Budget         *humanBudget `json:"budget"`
	SessionBalance *int64       `json:"session_balance"`
	Retired        int64        `json:"retired"`
	BudgetSpent    bool         `json:"budget_spent"`
}

type humanDecision struct {
	DelayMS      *float64 `json:"delay_ms"`
	Why          *string  `json:"why"`
	FactorMS     *float64 `json:"factor_ms"`
	BaseMS       *float64 `json:"base_ms"`
	CrawlDelayMS *float64 `json:"crawl_delay_ms"`
	RetryAfterMS *float64 `json:"retry_after_ms"`
	BackoffMS    *float64 `json:"backoff_ms"`
	BackoffLevel int      `json:"backoff_level"`
}

// humanBudget: null balance_replenish means groups are not rotated by a
// session balance, null total_budget no total budget.
type humanBudget struct {
	BalanceReplenish *int64 `json:"balance_replenish"`
	TotalBudget      *int64 `json:"total_budget"`
	HoldQueues       bool   `json:"hold_queues"`
}

type humanBackoff struct {
	Level       int        `json:"level"`
	LastTrouble *time.Time `json:"last_trouble"`
}

// ms returns d in milliseconds (fractions kept), or null when it is not set.
func ms(d time.Duration, set bool) *float64 {
	if !set {
		return nil
	}
	v := float64(d) / float64(time.Millisecond)
	return &v
}

func when(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func limit(n int64, none bool) *int64 {
	if none {
		return nil
	}
	return &n
}

// humanize converts a loader's report to human units; a report it cannot
// read is passed on as it is.
func humanize(raw json.RawMessage) json.RawMessage {
	var r politeness.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return raw
	}
	out := humanReport{Time: r.Time.UTC(), Counts: r.Counts, Groups: make([]humanGroup, 0, len(r.Groups)), Truncated: r.Truncated}
	for _, g := range r.Groups {
		decided := g.Decision.Why != ""
		d := g.Decision
		out.Groups = append(out.Groups, humanGroup{
			Group: g.Group, State: g.State, Hosts: g.Hosts,
			NextEligible: when(g.NextEligible), BusyUntil: when(g.BusyUntil),
			DelayMS: ms(g.Delay, decided), Why: nonEmpty(string(g.Why)),
			Decision: humanDecision{
				DelayMS: ms(d.Delay, decided), Why: nonEmpty(string(d.Why)),
				FactorMS: ms(d.Factor, decided), BaseMS: ms(d.Base, decided),
				CrawlDelayMS: ms(d.CrawlDelay, d.CrawlDelay != 0), RetryAfterMS: ms(d.RetryAfter, d.RetryAfter != 0),
				BackoffMS: ms(d.Backoff, d.Backoff != 0), BackoffLevel: d.BackoffLevel,
			},
			Queued: g.Queued, Enqueued: g.Enqueued, Fetches: g.Fetches, Timeouts: g.Timeouts,
			LastFetchMS:    ms(g.LastFetch, g.Fetches > 0),
			SessionBalance: g.SessionBalance, Spent: g.Spent,
			Budget: humanBudget{
				BalanceReplenish: limit(g.Budget.BalanceReplenish, g.Budget.BalanceReplenish <= 0),
				TotalBudget:      limit(g.Budget.TotalBudget, g.Budget.TotalBudget < 0),
				HoldQueues:       g.Budget.HoldQueues,
			},
			LastCost: g.LastCost, AvgCost: g.AvgCost, RecentStatus: g.RecentStatus,
			LastError: nonEmpty(g.LastError),
			Backoff:   humanBackoff{Level: g.Backoff.Level, LastTrouble: when(g.Backoff.LastTrouble)},
		})
		hg := &out.Groups[len(out.Groups)-1]
		if g.Crawl != "" {
			hg.CrawlID, hg.ProfileVersion = &g.Crawl, &g.PolicyVersion
		}
		hg.Crawls = make([]humanCrawl, 0, len(g.Crawls))
		for _, u := range g.Crawls {
			c := humanCrawl{CrawlID: u.Crawl, Queued: u.Queued, Fetches: u.Fetches, Spent: u.Spent, Retired: u.Retired, BudgetSpent: u.Exhausted}
			if u.Budget != nil {
				c.Budget = &humanBudget{
					BalanceReplenish: limit(u.Budget.BalanceReplenish, u.Budget.BalanceReplenish <= 0),
					TotalBudget:      limit(u.Budget.TotalBudget, u.Budget.TotalBudget < 0),
					HoldQueues:       u.Budget.HoldQueues,
				}
				if u.Budget.BalanceReplenish > 0 {
					c.SessionBalance = &u.SessionBalance
				}
			}
			hg.Crawls = append(hg.Crawls, c)
		}
		if out.Groups[len(out.Groups)-1].RecentStatus == nil {
			out.Groups[len(out.Groups)-1].RecentStatus = []int{}
		}
		if out.Groups[len(out.Groups)-1].Hosts == nil {
			out.Groups[len(out.Groups)-1].Hosts = []string{}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return raw
	}
	return b
}
