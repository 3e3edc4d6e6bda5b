package scope

import (
	"net/url"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestFollow(t *testing.T) {
	base := contracts.Profile{StartURLs: []string{"http://www.example.test/", "https://other.org:8443/x"}, MaxDepth: 2}.WithDefaults()
	cases := []struct {
		name       string
		mod        func(*contracts.Profile)
		url        string
		depth, hop int
		want       bool
		why        string
	}{
		{"same host", nil, "http://www.example.test/a", 1, 0, true, ""},
		{"second start host", nil, "https://other.org:8443/y", 2, 0, true, ""},
		{"other port in host scope", nil, "http://www.example.test:8080/a", 1, 0, false, "out of scope"},
		{"explicit default port in host scope", nil, "http://www.example.test:80/a", 1, 0, true, ""},
		{"other scheme's default port in host scope", nil, "https://www.example.test/a", 1, 0, true, ""},
		{"start port's default in host scope", nil, "https://other.org/y", 1, 0, false, "out of scope"},
		{"other port in domain scope", func(p *contracts.Profile) { p.Scope = contracts.ScopeDomain }, "http://www.example.test:8080/a", 1, 0, true, ""},
		{"too deep", nil, "http://www.example.test/a", 3, 0, false, "too deep"},
		{"other host in host scope", nil, "http://blog.example.test/", 1, 0, false, "out of scope"},
		{"sibling host in domain scope", func(p *contracts.Profile) { p.Scope = contracts.ScopeDomain }, "http://blog.example.test/", 1, 0, true, ""},
		{"foreign domain in domain scope", func(p *contracts.Profile) { p.Scope = contracts.ScopeDomain }, "http://example.org/", 1, 0, false, "out of scope"},
		{"anything in any scope", func(p *contracts.Profile) { p.Scope = contracts.ScopeAny }, "http://example.org/", 1, 0, true, ""},
		{"too many redirects", nil, "http://www.example.test/r", 0, 4, false, "too many redirects"},
		{"must match", func(p *contracts.Profile) { p.CrawlMustMatch = `/docs/` }, "http://www.example.test/blog/", 1, 0, false, "crawl filter"},
		{"must match ok", func(p *contracts.Profile) { p.CrawlMustMatch = `/docs/` }, "http://www.example.test/docs/a", 1, 0, true, ""},
		{"must not match", func(p *contracts.Profile) { p.CrawlMustNotMatch = `\.pdf$` }, "http://www.example.test/a.pdf", 1, 0, false, "crawl filter"},
		{"scheme", func(p *contracts.Profile) { p.Scope = contracts.ScopeAny }, "ftp://www.example.test/", 1, 0, false, "scheme"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.StartURLs = append([]string(nil), base.StartURLs...)
			if tc.mod != nil {
				tc.mod(&p)
			}
			s, err := New(p, 3)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(tc.url)
			got, why := s.Follow(u, tc.url, tc.depth, tc.hop)
			if got != tc.want || why != tc.why {
				t.Errorf("Follow(%q, %d, %d) = %v, %q; want %v, %q", tc.url, tc.depth, tc.hop, got, why, tc.want, tc.why)
			}
		})
	}
}

func TestIndex(t *testing.T) {
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}, IndexMustMatch: `/keep/`, IndexMustNotMatch: `draft`}.WithDefaults()
	s, err := New(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]bool{"http://a.test/keep/1": true, "http://a.test/other": false, "http://a.test/keep/draft": false} {
		if got := s.Index(u); got != want {
			t.Errorf("Index(%q) = %v, want %v", u, got, want)
		}
	}
}
