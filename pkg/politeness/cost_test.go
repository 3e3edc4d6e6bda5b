package politeness

import (
	"strings"
	"testing"
)

func TestCostPolicies(t *testing.T) {
	long := "https://a.example/" + strings.Repeat("d/", 9) + "x.html"
	tests := []struct {
		name     string
		url, via string
		zero     int
		unit     int
		wag      int
		calendar int
	}{
		{"plain page", "https://a.example/about/team.html", "https://a.example/", 0, 1, 1, 1},
		{"root", "https://a.example", "", 0, 1, 1, 1},
		{"query", "https://a.example/search?q=go", "https://a.example/", 0, 1, 2, 1},
		{"query, same page as via", "https://a.example/list?page=2", "https://a.example/list?page=1", 0, 1, 3, 1},
		{"query in fragment only", "https://a.example/a#x?y", "", 0, 1, 1, 1},
		{"long path", long, "", 0, 1, 2, 1},
		{"long path with query", long + "?a=1", "", 0, 1, 3, 1},
		{"calendar word", "https://a.example/Calendar/view", "", 0, 1, 1, 2},
		{"dated post: year token and three date segments", "https://a.example/events/2024/05/17/party", "", 0, 1, 1, 5},
		{"one year segment", "https://a.example/archive/1999/", "", 0, 1, 1, 3},
		{"dashed date segment", "https://a.example/posts/2024-05-17-hello", "", 0, 1, 1, 2},
		{"compact date segment", "https://a.example/d/20240517/", "", 0, 1, 1, 2},
		{"calendar query", "https://a.example/cal.php?yr=2031&mo=4", "", 0, 1, 2, 2},
		{"number that is not a year", "https://a.example/item/12345", "", 0, 1, 1, 1},
		{"day-like number without a year", "https://a.example/page/05", "", 0, 1, 1, 1},
		{"many date segments capped", "https://a.example/2020/2021/2022/2023/2024", "", 0, 1, 1, 5},
	}
	policies := []struct {
		name string
		p    CostPolicy
		want func(int, int, int, int) int
	}{
		{"zero", ZeroCost{}, func(z, _, _, _ int) int { return z }},
		{"unit", UnitCost{}, func(_, u, _, _ int) int { return u }},
		{"wag", WagCost{}, func(_, _, w, _ int) int { return w }},
		{"anti-calendar", AntiCalendarCost{}, func(_, _, _, c int) int { return c }},
	}
	for _, tt := range tests {
		for _, pol := range policies {
			t.Run(tt.name+"/"+pol.name, func(t *testing.T) {
				want := pol.want(tt.zero, tt.unit, tt.wag, tt.calendar)
				if got := pol.p.Cost(tt.url, tt.via); got != want {
					t.Errorf("%s.Cost(%q, %q) = %d, want %d", pol.name, tt.url, tt.via, got, want)
				}
			})
		}
	}
}

func TestParseCostPolicy(t *testing.T) {
	tests := []struct {
		in   string
		want CostPolicy
		ok   bool
	}{
		{"zero", ZeroCost{}, true},
		{"Unit", UnitCost{}, true},
		{"", UnitCost{}, true},
		{" wag ", WagCost{}, true},
		{"anti-calendar", AntiCalendarCost{}, true},
		{"anticalendar", AntiCalendarCost{}, true},
		{"random", nil, false},
	}
	for _, tt := range tests {
		got, err := ParseCostPolicy(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseCostPolicy(%q) = %T, %v, want %T, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestCostFunc(t *testing.T) {
	f := CostFunc(func(url, _ string) int { return len(url) })
	if got := f.Cost("abc", ""); got != 3 {
		t.Errorf("CostFunc.Cost(%q) = %d, want 3", "abc", got)
	}
}

func FuzzCostPolicies(f *testing.F) {
	for _, s := range []string{"https://a.example/2024/05/17?x=1", "", "?", "://", "/2020-", "x#?"} {
		f.Add(s, "https://a.example/")
	}
	f.Fuzz(func(t *testing.T, url, via string) {
		for _, p := range []CostPolicy{ZeroCost{}, UnitCost{}, WagCost{}, AntiCalendarCost{}} {
			if c := p.Cost(url, via); c < 0 || c > 6 {
				t.Errorf("%T.Cost(%q, %q) = %d, want 0..6", p, url, via, c)
			}
		}
	})
}
