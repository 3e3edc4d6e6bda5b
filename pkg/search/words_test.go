package search

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWords(t *testing.T) {
	cases := []struct {
		name, q string
		want    []string
	}{
		{"plain", "hello world", []string{"hello", "world"}},
		{"syntax dropped", `"quoted" (group) -not a:b c*`, []string{"quoted", "group", "not", "a", "b", "c"}},
		{"unicode", "Grüße aus Köln", []string{"Grüße", "aus", "Köln"}},
		{"marks only", "\u0301\u0301", nil},
		{"too long", strings.Repeat("x", MaxTermBytes+1) + " y", []string{"y"}},
		{"empty", "  --  ", nil},
	}
	for _, tc := range cases {
		if got := Words(tc.q); !cmp.Equal(got, tc.want) {
			t.Errorf("Words(%q) = %q, want %q", tc.q, got, tc.want)
		}
	}
	if n := len(Words(strings.Repeat("w ", 100))); n != MaxTerms {
		t.Errorf("Words(100 words) kept %d, want %d", n, MaxTerms)
	}
}

func FuzzWords(f *testing.F) {
	f.Add(`"a" (b) c*`)
	f.Fuzz(func(t *testing.T, q string) {
		for _, w := range Words(q) {
			if strings.ContainsAny(w, "\"\\ ") || w == "" {
				t.Fatalf("Words(%q) gave %q", q, w)
			}
		}
	})
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Parsed
	}{
		{`hello world`, Parsed{Words: []string{"hello", "world"}}},
		{`"open source" crawler`, Parsed{Words: []string{"crawler"}, Phrases: [][]string{{"open", "source"}}}},
		{`"single"`, Parsed{Words: []string{"single"}}},
		{`web -spam -"junk mail"`, Parsed{Words: []string{"web"}, Exclude: [][]string{{"spam"}, {"junk", "mail"}}}},
		{`news site:Example.COM filetype:.PDF inurl:Docs`, Parsed{Words: []string{"news"}, Sites: []string{"example.com"},
			FileTypes: []string{"pdf"}, InURL: []string{"docs"}}},
		{`site:https://user@www.example.org:8080/path`, Parsed{Sites: []string{"www.example.org"}}},
		{`SITE:example.net`, Parsed{Sites: []string{"example.net"}}},
		{`site: a-b`, Parsed{Words: []string{"site", "a", "b"}}},
		{`"unclosed phrase here`, Parsed{Phrases: [][]string{{"unclosed", "phrase", "here"}}}},
		{`- lone`, Parsed{Words: []string{"lone"}}},
		{`foo:bar`, Parsed{Words: []string{"foo", "bar"}}},
		{`-site:x.com`, Parsed{Exclude: [][]string{{"site"}, {"x"}, {"com"}}}},
	} {
		got := Parse(tc.in)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, d)
		}
	}
	if p := Parse(`-only -excluded`); p.Matches() {
		t.Errorf("Parse of exclusions only: Matches() = true, want false")
	}
	if p := Parse(`site:example.com`); !p.Matches() || p.HasTerms() {
		t.Errorf("Parse(site:) Matches %v HasTerms %v, want true false", p.Matches(), p.HasTerms())
	}
	if p := Parse(strings.Repeat("w ", 100)); len(p.Words) != MaxTerms {
		t.Errorf("Parse of 100 words kept %d, want %d", len(p.Words), MaxTerms)
	}
}

func TestSiteMatches(t *testing.T) {
	for _, tc := range []struct {
		host, site string
		want       bool
	}{
		{"example.com", "example.com", true},
		{"www.example.com", "example.com", true},
		{"badexample.com", "example.com", false},
		{"example.com", "www.example.com", false},
	} {
		if got := SiteMatches(tc.host, tc.site); got != tc.want {
			t.Errorf("SiteMatches(%q, %q) = %v, want %v", tc.host, tc.site, got, tc.want)
		}
	}
}
