package contracts

import (
	"net"
	"net/netip"
	"strings"
)

// WithScheme returns s, a start URL as a person types it, with a scheme in
// front when it has none ("example.com", "127.0.0.1:8701/"): every way of
// starting a crawl (the API, the dashboard, the YaCy crawl start, grid
// crawl) completes start URLs by this one rule, which Profile.WithDefaults
// applies. The rule is YaCy's for crawl start URLs (Crawler_p in
// https://github.com/yacy/yacy_search_server): a URL without "://" gets
// https://, which most sites speak today. One exception: a host that is an
// IP address or localhost gets http://, because such a site is most often
// one served on the crawler's own machine or network for a test, without a
// certificate, and an https request to it fails with a TLS error that
// explains nothing. A URL of another scheme without "//" ("mailto:x@a.test")
// is left alone, to be refused as not http; "host:port" is not taken for
// one. Leading and trailing spaces are dropped; a text with white space
// inside ("foo bar") is no host and is left alone, for validation to refuse.
func WithScheme(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.Contains(s, "://") || hasScheme(s) || strings.ContainsAny(s, " \t\r\n\f\v") {
		return s
	}
	hostport, _, _ := strings.Cut(s, "/")
	hostport, _, _ = strings.Cut(hostport, "?")
	hostport, _, _ = strings.Cut(hostport, "#")
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if _, err := netip.ParseAddr(host); err == nil || strings.EqualFold(host, "localhost") {
		return "http://" + s
	}
	return "https://" + s
}

// hasScheme reports whether s starts with a scheme and a colon that is not
// the colon of a host and port: the colon is followed by something other
// than a digit.
func hasScheme(s string) bool {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme == "" || rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		return false
	}
	for i, c := range scheme {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}
