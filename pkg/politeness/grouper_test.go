package politeness

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAliases(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string][]string
		wantErr string
	}{
		{
			name: "documented example",
			in:   "kommune=rana.kommune.no|vefsn.kommune.no;news=a.example|b.example",
			want: map[string][]string{"kommune": {"rana.kommune.no", "vefsn.kommune.no"}, "news": {"a.example", "b.example"}},
		},
		{
			name: "spaces, case, ports, trailing dot and separators",
			in:   " kommune = Vefsn.Kommune.NO. | rana.kommune.no:8080 ; ; ",
			want: map[string][]string{"kommune": {"rana.kommune.no", "vefsn.kommune.no"}},
		},
		{
			name: "ip hosts and duplicates under one alias",
			in:   "lab_1=127.0.0.1|[::1]:80|127.0.0.1",
			want: map[string][]string{"lab_1": {"127.0.0.1", "::1"}},
		},
		{name: "empty", in: "", want: map[string][]string{}},
		{name: "alias is a domain name", in: "kommune.no=rana.kommune.no", wantErr: `alias "kommune.no"`},
		{name: "alias with space", in: "my alias=a.example", wantErr: `alias "my alias"`},
		{name: "alias with unicode", in: "kømmune=a.example", wantErr: `alias "kømmune"`},
		{name: "empty alias", in: "=a.example", wantErr: `alias ""`},
		{name: "host in two aliases", in: "a=x.example|y.example;b=y.example", wantErr: `host "y.example" is in both alias "a" and alias "b"`},
		{name: "alias defined twice", in: "a=x.example;a=y.example", wantErr: `alias "a" defined twice`},
		{name: "no hosts", in: "a=", wantErr: `alias "a" has no hosts`},
		{name: "missing =", in: "a", wantErr: `want alias=host|host`},
		{name: "bad host", in: "a=x/y", wantErr: `host "x/y" is not a host name`},
		{name: "empty label", in: "a=x..y", wantErr: `host "x..y" is not a host name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAliases(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseAliases(%q) = %v, want error containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAliases(%q) = %v", tt.in, err)
			}
			m := map[string][]string{}
			for _, n := range got.Names() {
				m[n] = got.Hosts(n)
			}
			if diff := cmp.Diff(tt.want, m); diff != "" {
				t.Errorf("ParseAliases(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestAliasesString(t *testing.T) {
	a, err := ParseAliases("news=b.example|a.example;kommune=vefsn.kommune.no|rana.kommune.no")
	if err != nil {
		t.Fatal(err)
	}
	want := "kommune=rana.kommune.no|vefsn.kommune.no;news=a.example|b.example"
	if got := a.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if name, ok := a.Alias("RANA.kommune.no"); !ok || name != "kommune" {
		t.Errorf("Alias(RANA.kommune.no) = %q, %v, want kommune, true", name, ok)
	}
	if name, ok := a.Alias("nb.no"); ok {
		t.Errorf("Alias(nb.no) = %q, true, want none", name)
	}
}

func FuzzParseAliases(f *testing.F) {
	for _, s := range []string{"kommune=rana.kommune.no|vefsn.kommune.no;news=a.example|b.example", "a=", "=", ";;", "a=[::1]:80", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAliases(s)
		if err != nil {
			return
		}
		for _, n := range a.Names() {
			if !ValidAliasName(n) || strings.Contains(n, ".") {
				t.Errorf("ParseAliases(%q) accepted alias %q", s, n)
			}
		}
		// The canonical form parses back to itself.
		b, err := ParseAliases(a.String())
		if err != nil {
			t.Fatalf("ParseAliases(String() = %q) = %v", a.String(), err)
		}
		if b.String() != a.String() {
			t.Errorf("round trip of %q: %q != %q", s, b.String(), a.String())
		}
	})
}

func TestNormalizeHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Example.COM", "example.com"},
		{"example.com.", "example.com"},
		{"example.com:8080", "example.com"},
		{"[::1]:8080", "::1"},
		{"[::1]", "::1"},
		{"::FFFF:127.0.0.1", "127.0.0.1"},
		{"2001:DB8::1", "2001:db8::1"},
		{"127.0.0.1:80", "127.0.0.1"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := NormalizeHost(tt.in); got != tt.want {
			t.Errorf("NormalizeHost(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHostOf(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://Rana.Kommune.no/a?b", "rana.kommune.no"},
		{"http://[::1]:8080/", "::1"},
		{"/relative", ""},
		{"http://%zz/", ""},
	}
	for _, tt := range tests {
		if got := HostOf(tt.in); got != tt.want {
			t.Errorf("HostOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestGrouper(t *testing.T) {
	a, err := ParseAliases("kommune=rana.kommune.no|vefsn.kommune.no")
	if err != nil {
		t.Fatal(err)
	}
	resolved := map[string]string{"a.example": "192.0.2.7", "b.example": "192.0.2.7", "v6.example": "::ffff:192.0.2.8"}
	resolver := func(_ context.Context, host string) (netip.Addr, error) {
		if ip, ok := resolved[host]; ok {
			return netip.MustParseAddr(ip), nil
		}
		return netip.Addr{}, errors.New("no such host")
	}
	g := NewGrouper(a, resolver)
	tests := []struct {
		host, wantGroup, wantLookup string
		wantErr                     bool
	}{
		{"rana.kommune.no", "kommune", "kommune", false},
		{"VEFSN.kommune.no:443", "kommune", "kommune", false},
		{"a.example", "192.0.2.7", "a.example", false},
		{"b.example", "192.0.2.7", "b.example", false},
		{"192.0.2.7", "192.0.2.7", "192.0.2.7", false},
		{"v6.example", "192.0.2.8", "v6.example", false},
		{"nb.no", "nb.no", "nb.no", true},
	}
	for _, tt := range tests {
		got, err := g.Group(t.Context(), tt.host)
		if got != tt.wantGroup || (err != nil) != tt.wantErr {
			t.Errorf("Group(%q) = %q, %v, want %q, error %v", tt.host, got, err, tt.wantGroup, tt.wantErr)
		}
		if got := g.Lookup(tt.host); got != tt.wantLookup {
			t.Errorf("Lookup(%q) = %q, want %q", tt.host, got, tt.wantLookup)
		}
	}
	var nilGrouper *Grouper
	if got := nilGrouper.Lookup("A.example"); got != "a.example" {
		t.Errorf("nil Grouper Lookup(A.example) = %q, want a.example", got)
	}
}

// TestSetAliasesAffectsNewItemsOnly changes aliases between two adds of the
// same host: the first item stays in the host's group.
func TestSetAliasesAffectsNewItemsOnly(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, clk, Config{Delay: fixedDelay(0), Budget: noBudget})
	mustAdd(t, s, Item{URL: "https://vefsn.kommune.no/1"})
	a, err := ParseAliases("kommune=rana.kommune.no|vefsn.kommune.no")
	if err != nil {
		t.Fatal(err)
	}
	s.SetAliases(a)
	mustAdd(t, s, Item{URL: "https://vefsn.kommune.no/2"}, Item{URL: "https://rana.kommune.no/3"})
	want := map[string]int{"vefsn.kommune.no": 1, "kommune": 2}
	for id, n := range want {
		r, ok := s.Group(id)
		if !ok || r.Queued != n {
			t.Errorf("Group(%q) = queued %d, exists %v, want %d", id, r.Queued, ok, n)
		}
	}
	if c := s.Counts(); c.Groups != 2 {
		t.Errorf("Counts().Groups = %d, want 2", c.Groups)
	}
}
