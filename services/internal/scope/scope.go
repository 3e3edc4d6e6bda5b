// Package scope decides which URLs a crawl follows (host, domain or any
// scope; depth and redirect limits; crawl filters) and which pages it indexes
// (index filters), from the crawl's profile.
//
// Scope "host" means the start URLs' servers: host name and port, with the
// scheme's default port left out (urlnorm.HostPort), so http://a.test/ and
// https://a.test/ are one host while http://127.0.0.1:8700/ and
// http://127.0.0.1:8701/ are two. Two ports of one machine are usually two
// unrelated sites (a development server beside another), and a crawl of one
// should not wander into the other. Politeness is a different question and
// keeps grouping by host name without the port (pkg/politeness): the ports
// share one machine, and that machine is what must not be fetched from
// concurrently. Scope "domain" compares registrable domains and ignores
// ports.
package scope

import (
	"fmt"
	"net/url"
	"regexp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
)

// Rules decide which URLs a crawl follows and indexes. It is compiled once
// per profile and is safe for concurrent use.
type Rules struct {
	profile                 contracts.Profile
	hosts, domains          map[string]bool
	crawlMust, crawlMustNot *regexp.Regexp
	indexMust, indexMustNot *regexp.Regexp
	maxRedirects            int
}

// New compiles the scope rules of p, which must be valid.
func New(p contracts.Profile, maxRedirects int) (*Rules, error) {
	s := &Rules{profile: p, hosts: map[string]bool{}, domains: map[string]bool{}, maxRedirects: maxRedirects}
	for _, raw := range p.StartURLs {
		u, err := urlnorm.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("parse start url %q: %w", raw, err)
		}
		s.hosts[urlnorm.HostPort(u)] = true
		s.domains[urlnorm.RegistrableDomain(urlnorm.Host(u))] = true
	}
	var err error
	compile := func(re string) *regexp.Regexp {
		if re == "" || err != nil {
			return nil
		}
		var r *regexp.Regexp
		r, err = regexp.Compile(re)
		return r
	}
	s.crawlMust, s.crawlMustNot = compile(p.CrawlMustMatch), compile(p.CrawlMustNotMatch)
	s.indexMust, s.indexMustNot = compile(p.IndexMustMatch), compile(p.IndexMustNotMatch)
	if err != nil {
		return nil, fmt.Errorf("compile profile filters: %w", err)
	}
	return s, nil
}

// Follow reports whether a URL found at depth and after hops redirects is
// in the crawl, and if not, why.
func (s *Rules) Follow(u *url.URL, raw string, depth, hops int) (bool, string) {
	if depth > s.profile.MaxDepth {
		return false, "too deep"
	}
	if hops > s.maxRedirects {
		return false, "too many redirects"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, "scheme"
	}
	if !s.InScope(u) {
		return false, "out of scope"
	}
	if s.crawlMust != nil && !s.crawlMust.MatchString(raw) {
		return false, "crawl filter"
	}
	if s.crawlMustNot != nil && s.crawlMustNot.MatchString(raw) {
		return false, "crawl filter"
	}
	return true, ""
}

// InScope reports whether u's host is in the crawl's scope (host, domain
// or any), whatever the filters and depth say: the test of a sitemap file,
// which is no page.
func (s *Rules) InScope(u *url.URL) bool {
	if u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	switch s.profile.Scope {
	case contracts.ScopeHost:
		return s.hosts[urlnorm.HostPort(u)]
	case contracts.ScopeDomain:
		return s.domains[urlnorm.RegistrableDomain(urlnorm.Host(u))]
	}
	return true
}

// Index reports whether a page at raw may be indexed by the profile's filters.
func (s *Rules) Index(raw string) bool {
	if s.indexMust != nil && !s.indexMust.MatchString(raw) {
		return false
	}
	return s.indexMustNot == nil || !s.indexMustNot.MatchString(raw)
}
