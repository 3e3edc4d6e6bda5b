package politeness

import (
	"fmt"
	"strings"
)

// CostPolicy assigns a cost to a URL when it is queued (Heritrix's
// CostAssignmentPolicy). Every hand-out charges the URL's cost to its group's
// session balance and lifetime spend, and within a group cheaper URLs are
// handed out first. Cost must be safe for concurrent use, must not block and
// should return a small non-negative number (negative costs count as 0).
type CostPolicy interface {
	// Cost returns the cost of url, discovered on page via ("" if unknown).
	Cost(url, via string) int
}

// CostFunc adapts a function to a CostPolicy.
type CostFunc func(url, via string) int

// Cost calls f.
func (f CostFunc) Cost(url, via string) int { return f(url, via) }

// ZeroCost assigns every URL cost 0: budgets never deplete and never retire
// a group (Heritrix's ZeroCostAssignmentPolicy).
type ZeroCost struct{}

// Cost returns 0.
func (ZeroCost) Cost(string, string) int { return 0 }

// UnitCost assigns every URL cost 1, so budgets count fetches (Heritrix's
// UnitCostAssignmentPolicy). It is the default.
type UnitCost struct{}

// Cost returns 1.
func (UnitCost) Cost(string, string) int { return 1 }

// WagCost makes "wild guesses" about URLs that are less interesting, as
// Heritrix's WagCostAssignmentPolicy does, plus one guess of its own:
//
//   - 1 for every URL;
//   - +1 if the URL has a query string;
//   - +1 more if via starts with the URL's part before the query string
//     (the page links to itself with other parameters: sort orders,
//     sessions, pagination);
//   - +1 if the path is long: more than 8 segments or more than 200 bytes
//     (Heritrix lists this as a to-do).
type WagCost struct{}

// Cost returns the WagCost of url.
func (WagCost) Cost(url, via string) int {
	cost := 1
	u := stripFragment(url)
	if q := strings.IndexByte(u, '?'); q >= 0 {
		cost++
		if via != "" && strings.HasPrefix(via, u[:q]) {
			cost++
		}
	}
	if p := pathOf(u); strings.Count(p, "/") > 8 || len(p) > 200 {
		cost++
	}
	return cost
}

// AntiCalendarCost penalizes URLs that look like calendars, which generate
// endless dates. Like Heritrix's AntiCalendarCostAssignmentPolicy it starts
// from unit cost and adds 1 when the URL contains a calendar-suggestive word
// (calendar, year, month, day, date, viewcal, event, yr=, calendrier, jour)
// or a year 19xx/20xx between non-digits; unlike Heritrix the cost then grows
// by 1 per date-like path segment, up to 3: a year (19xx, 20xx), a compact
// or dashed date (20240517, 2024-05, 2024-05-17), or a 1–2 digit number
// right after a date-like segment (month, day). So /events/2024/05/17/ costs
// 1+1+3 = 5 while /about/team costs 1.
type AntiCalendarCost struct{}

// Cost returns the AntiCalendarCost of url.
func (AntiCalendarCost) Cost(url, _ string) int {
	cost := 1
	lower := strings.ToLower(url)
	calendarish := hasYearToken(lower)
	// Heritrix's CALENDARISH words.
	for _, w := range [...]string{"calendar", "year", "month", "day", "date", "viewcal", "event", "yr=", "calendrier", "jour"} {
		if calendarish {
			break
		}
		calendarish = strings.Contains(lower, w)
	}
	if calendarish {
		cost++
	}
	extra, prevDate := 0, false
	for seg := range strings.SplitSeq(pathOf(stripFragment(url)), "/") {
		date := isDateSegment(seg) || (prevDate && len(seg) >= 1 && len(seg) <= 2 && allDigits(seg))
		if date {
			extra++
		}
		prevDate = date
	}
	return cost + min(extra, 3)
}

// hasYearToken reports whether s contains 19xx or 20xx with a non-digit on
// both sides (Heritrix's \D19\d\d\D|\D20\d\d\D).
func hasYearToken(s string) bool {
	for i := 1; i+5 <= len(s); i++ {
		if isDigit(s[i-1]) || isDigit(s[i+4]) {
			continue
		}
		if isYear(s[i : i+4]) {
			return true
		}
	}
	return false
}

// isDateSegment reports whether a path segment is a year, a yyyymm or
// yyyymmdd date, or a year followed by dashed or underscored numbers.
func isDateSegment(seg string) bool {
	switch {
	case len(seg) < 4 || !isYear(seg[:4]):
		return false
	case len(seg) == 4:
		return true
	case (len(seg) == 6 || len(seg) == 8) && allDigits(seg):
		return true
	}
	rest := seg[4:]
	if rest[0] != '-' && rest[0] != '_' {
		return false
	}
	for part := range strings.FieldsFuncSeq(rest, func(r rune) bool { return r == '-' || r == '_' }) {
		if len(part) > 2 || !allDigits(part) {
			return false
		}
	}
	return true
}

func isYear(s string) bool {
	return len(s) == 4 && allDigits(s) && (s[:2] == "19" || s[:2] == "20")
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// stripFragment returns u without its #fragment.
func stripFragment(u string) string {
	if i := strings.IndexByte(u, '#'); i >= 0 {
		return u[:i]
	}
	return u
}

// pathOf returns the path of an absolute or relative URL without query.
func pathOf(u string) string {
	if q := strings.IndexByte(u, '?'); q >= 0 {
		u = u[:q]
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			return u[j:]
		}
		return ""
	}
	return u
}

// ParseCostPolicy returns the policy named name: "zero", "unit", "wag" or
// "anti-calendar" (also "anticalendar"), case-insensitively; "" is "unit".
func ParseCostPolicy(name string) (CostPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "zero":
		return ZeroCost{}, nil
	case "unit", "":
		return UnitCost{}, nil
	case "wag":
		return WagCost{}, nil
	case "anti-calendar", "anticalendar":
		return AntiCalendarCost{}, nil
	}
	return nil, fmt.Errorf("parse cost policy %q: want zero, unit, wag or anti-calendar", name)
}
