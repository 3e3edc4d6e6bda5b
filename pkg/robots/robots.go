// Package robots parses robots.txt files and answers whether a crawler may
// fetch a URL, following RFC 9309 (the Robots Exclusion Protocol), plus the
// widespread non-standard Crawl-delay and Sitemap lines. A Cache fetches and
// keeps robots.txt per origin with the RFC's status-code semantics.
//
// Matching, in short:
//   - A group is one or more user-agent lines followed by rules. The crawler
//     obeys the groups naming its product token (case-insensitively; all such
//     groups are merged), else the groups for "*", else nothing is disallowed.
//   - Among the rules of the selected groups, the matching rule with the
//     longest path pattern wins; Allow wins a tie. "*" matches any sequence of
//     characters, a final "$" anchors the pattern at the end of the URL path.
//   - Patterns and URL paths are compared in one canonical percent-encoding:
//     hex digits in upper case, octets outside printable US-ASCII encoded,
//     and encoded printable US-ASCII characters decoded, except "%", "*" and
//     "$", which keep their encoded form so that they stay literal. "/~a" and
//     "/%7Ea" are therefore the same path, and so are "/a%2Fb" and "/a/b".
//   - "/robots.txt" is always allowed.
package robots

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// MaxSize is the number of bytes of a robots.txt file that Parse reads; the
// rest is ignored, as RFC 9309 §2.5 allows (it requires at least 500 KiB).
const MaxSize = 500 * 1024

// maxCrawlDelay caps Crawl-delay values so that absurd ones cannot overflow.
const maxCrawlDelay = 24 * time.Hour

// Rules is a parsed robots.txt. It is immutable after Parse and safe for
// concurrent use. A nil *Rules allows everything.
type Rules struct {
	// agents maps lower-case product tokens to the groups naming them, in
	// file order. Groups are shared, not copied, so that a file naming many
	// agents in one group costs memory in proportion to its size.
	agents   map[string][]*group
	star     []*group // the groups for "*", in file order
	sitemaps []string
}

// group is one group of the file: the rules after a run of user-agent lines.
type group struct {
	rules      []rule
	crawlDelay time.Duration
	hasDelay   bool
}

type rule struct {
	pattern string // canonical encoding
	allow   bool
}

var (
	// AllowAll allows every path for every user agent; it stands for an
	// unavailable robots.txt (RFC 9309 §2.3.1.3).
	AllowAll = &Rules{}
	// DisallowAll disallows every path but /robots.txt for every user agent;
	// it stands for an unreachable robots.txt (RFC 9309 §2.3.1.4).
	DisallowAll = &Rules{star: []*group{{rules: []rule{{pattern: "/"}}}}}
)

type lineKind int

const (
	kindUnknown lineKind = iota
	kindUserAgent
	kindAllow
	kindDisallow
	kindCrawlDelay
	kindSitemap
)

// keyKind maps lower-case keys, common misspellings included, to their kind.
func keyKind(key string) lineKind {
	switch key {
	case "user-agent", "useragent", "user agent":
		return kindUserAgent
	case "allow":
		return kindAllow
	case "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw":
		return kindDisallow
	case "crawl-delay", "crawldelay", "crawl delay":
		return kindCrawlDelay
	case "sitemap", "site-map":
		return kindSitemap
	}
	return kindUnknown
}

var bom = []byte("\xEF\xBB\xBF")

// Parse parses a robots.txt body. It never fails: lines it does not
// understand are ignored, and only the first MaxSize bytes are read.
func Parse(body []byte) *Rules {
	if len(body) > MaxSize {
		body = body[:MaxSize]
	}
	body = bytes.TrimPrefix(body, bom)

	r := &Rules{agents: map[string][]*group{}}
	var current *group // the group the next rules belong to
	inAgents := false  // the last group line was a user-agent line
	seenSitemap := map[string]bool{}

	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		key := strings.ToLower(string(bytes.TrimSpace(k)))
		value := string(bytes.TrimSpace(v))

		switch keyKind(key) {
		case kindUserAgent:
			if !inAgents {
				current = &group{}
				inAgents = true
			}
			token := agentToken(value)
			if token == "" {
				continue // names nobody
			}
			if token == "*" {
				r.star = appendGroup(r.star, current)
			} else {
				r.agents[token] = appendGroup(r.agents[token], current)
			}
		case kindAllow, kindDisallow:
			inAgents = false
			if value == "" {
				continue // an empty rule matches nothing
			}
			if current != nil {
				current.rules = append(current.rules, rule{pattern: string(canonical(nil, value)), allow: keyKind(key) == kindAllow})
			}
		case kindCrawlDelay:
			inAgents = false
			d, ok := parseDelay(value)
			if !ok {
				continue
			}
			if current != nil && !current.hasDelay {
				current.crawlDelay, current.hasDelay = d, true
			}
		case kindSitemap:
			// Sitemap lines belong to no group and do not end one.
			if value != "" && !seenSitemap[value] {
				seenSitemap[value] = true
				r.sitemaps = append(r.sitemaps, value)
			}
		}
	}
	return r
}

// appendGroup appends g unless it is already last (the same group naming an
// agent twice).
func appendGroup(gs []*group, g *group) []*group {
	if n := len(gs); n > 0 && gs[n-1] == g {
		return gs
	}
	return append(gs, g)
}

// agentToken returns the lower-case product token a user-agent line names:
// "*" for the global group, else its leading run of [A-Za-z_-] ("FooBot/2.1"
// names "foobot"), or "" if there is none.
func agentToken(value string) string {
	if value == "*" || (strings.HasPrefix(value, "*") && isSpace(value[1])) {
		return "*"
	}
	return strings.ToLower(productToken(value))
}

// productToken returns the leading run of product-token characters of ua.
func productToken(ua string) string {
	ua = strings.TrimLeft(ua, " \t")
	i := 0
	for i < len(ua) {
		c := ua[i]
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' {
			i++
			continue
		}
		break
	}
	return ua[:i]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func parseDelay(s string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != f || f < 0 {
		return 0, false
	}
	if f >= maxCrawlDelay.Seconds() {
		return maxCrawlDelay, true
	}
	return time.Duration(f * float64(time.Second)), true
}

const upperHex = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// needsCanonical reports whether s is not already in canonical encoding.
func needsCanonical(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c <= 0x20 || c >= 0x7f {
			return true
		}
	}
	return false
}

// canonical appends the canonical encoding of s to dst (see the package
// documentation). A "%" not followed by two hex digits is encoded as "%25".
func canonical(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 < len(s) {
				hi, ok1 := unhex(s[i+1])
				lo, ok2 := unhex(s[i+2])
				if ok1 && ok2 {
					v := hi<<4 | lo
					if v > 0x20 && v < 0x7f && v != '%' && v != '*' && v != '$' {
						dst = append(dst, v)
					} else {
						dst = append(dst, '%', upperHex[hi], upperHex[lo])
					}
					i += 2
					continue
				}
			}
			dst = append(dst, "%25"...)
		case c <= 0x20 || c >= 0x7f:
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// requestPath extracts the path and query of a URL or path, without the
// fragment; it is "/" if empty.
func requestPath(s string) string {
	if i := strings.Index(s, "://"); i > 0 && !strings.ContainsAny(s[:i], "/?#") {
		rest := s[i+3:]
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			s = rest[j:]
		} else {
			s = ""
		}
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	if !strings.HasPrefix(s, "/") {
		s = "/" + s
	}
	return s
}

// groupsFor returns the groups that apply to userAgent, in file order.
func (r *Rules) groupsFor(userAgent string) []*group {
	if r == nil {
		return nil
	}
	if token := productToken(userAgent); token != "" {
		if gs, ok := r.agents[strings.ToLower(token)]; ok {
			return gs
		}
	}
	return r.star
}

// Allowed reports whether the crawler whose User-Agent header is userAgent
// may fetch pathAndQuery (a URL's path and query, such as "/a/b?c=d"; a full
// URL is accepted too). The product token is the leading run of letters,
// "_" and "-" of userAgent, so "gridcrawl/1.0 (+https://x)" obeys groups
// for "gridcrawl".
func (r *Rules) Allowed(userAgent, pathAndQuery string) bool {
	path := requestPath(pathAndQuery)
	if p, _, _ := strings.Cut(path, "?"); p == "/robots.txt" {
		return true
	}
	groups := r.groupsFor(userAgent)
	if len(groups) == 0 {
		return true
	}
	if needsCanonical(path) {
		path = string(canonical(make([]byte, 0, len(path)+16), path))
	}
	best, allowed := -1, true
	for _, g := range groups {
		for _, ru := range g.rules {
			n := len(ru.pattern)
			if n < best || (n == best && allowed) {
				continue
			}
			if match(path, ru.pattern) {
				best, allowed = n, ru.allow
			}
		}
	}
	return allowed
}

// match reports whether path matches pattern, with "*" matching any run of
// characters and a final "$" anchoring the end; otherwise the pattern
// matches a prefix of the path.
func match(path, pattern string) bool {
	anchored := false
	if p, ok := strings.CutSuffix(pattern, "$"); ok {
		pattern, anchored = p, true
	}
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		if anchored {
			return path == pattern
		}
		return strings.HasPrefix(path, pattern)
	}
	if !strings.HasPrefix(path, pattern[:star]) {
		return false
	}
	path, pattern = path[star:], pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			if anchored {
				return strings.HasSuffix(path, pattern)
			}
			return strings.Contains(path, pattern)
		}
		// The leftmost occurrence of each middle segment leaves the most room
		// for the rest, so greedy matching is exact.
		i := strings.Index(path, pattern[:star])
		if i < 0 {
			return false
		}
		path, pattern = path[i+star:], pattern[star+1:]
	}
}

// CrawlDelay returns the Crawl-delay of the groups that apply to userAgent
// (the first one given, in seconds, fractions allowed, capped at 24 hours),
// and whether there is one.
func (r *Rules) CrawlDelay(userAgent string) (time.Duration, bool) {
	for _, g := range r.groupsFor(userAgent) {
		if g.hasDelay {
			return g.crawlDelay, true
		}
	}
	return 0, false
}

// Sitemaps returns the Sitemap URLs the file lists, in order, without
// duplicates. The caller owns the returned slice.
func (r *Rules) Sitemaps() []string {
	if r == nil || len(r.sitemaps) == 0 {
		return nil
	}
	return append([]string(nil), r.sitemaps...)
}
