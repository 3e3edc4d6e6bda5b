package warc

import (
	"cmp"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// SURT returns the SURT key of rawURL as pywb computes it (the Python surt
// library's defaults: the Internet Archive's canonicalization, no scheme),
// so that pywb finds our CDXJ lines: host lower case, a leading "www", "www2"
// ... dropped, labels reversed and comma-separated, default port dropped;
// path and query unescaped and minimally escaped again, dot segments
// resolved, lower case; query arguments sorted and common session ids
// dropped; a trailing slash and the fragment dropped.
//
//	SURT("http://www.Example.com/A/b/?B=2&a=1#x") = "com,example)/a/b?a=1&b=2"
func SURT(rawURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "", fmt.Errorf("surt %q: %w", rawURL, err)
	}
	if u.Host == "" {
		return "", fmt.Errorf("surt %q: no host: %w", rawURL, ErrMalformed)
	}
	host := strings.ToLower(unescapeRepeatedly(u.Hostname()))
	host = strings.Trim(strings.ReplaceAll(host, "..", "."), ".")
	if m := wwwPrefix.FindString(host); m != "" {
		host = host[len(m):]
	}
	labels := strings.Split(escapeOnce(host), ".")
	slices.Reverse(labels)
	var b strings.Builder
	b.WriteString(strings.Join(labels, ","))
	if port := u.Port(); port != "" && port != defaultPort(u.Scheme) {
		b.WriteString(":")
		b.WriteString(port)
	}
	b.WriteString(")")

	path := normalizePath(unescapeRepeatedly(u.EscapedPath()))
	path = strings.ToLower(escapeOnce(path))
	for _, re := range pathSessionIDs {
		if m := re.FindStringSubmatch(path); m != nil {
			path = m[1] + m[3]
		}
	}
	if len(path) > 1 && strings.HasSuffix(path, "/") {
		path = path[:len(path)-1]
	}
	b.WriteString(path)

	if q := u.RawQuery; q != "" {
		q = escapeOnce(unescapeRepeatedly(q))
		for _, re := range querySessionIDs {
			if m := re.FindStringSubmatch(q); m != nil {
				q = m[1] + m[2]
			}
		}
		q = alphaReorder(strings.ToLower(q))
		if q != "" {
			b.WriteString("?")
			b.WriteString(q)
		}
	}
	return b.String(), nil
}

var (
	wwwPrefix      = regexp.MustCompile(`^www\d*\.`)
	pathSessionIDs = []*regexp.Regexp{
		regexp.MustCompile(`(?i)^(.*/)(\((?:[a-z]\([0-9a-z]{24}\))+\)/)([^\?]+\.aspx.*)$`),
		regexp.MustCompile(`(?i)^(.*/)(\([0-9a-z]{24}\)/)([^\?]+\.aspx.*)$`),
	}
	querySessionIDs = []*regexp.Regexp{
		regexp.MustCompile(`(?i)^(.*)(?:jsessionid=[0-9a-zA-Z]{32})(?:&(.*))?$`),
		regexp.MustCompile(`(?i)^(.*)(?:phpsessid=[0-9a-zA-Z]{32})(?:&(.*))?$`),
		regexp.MustCompile(`(?i)^(.*)(?:sid=[0-9a-zA-Z]{32})(?:&(.*))?$`),
		regexp.MustCompile(`(?i)^(.*)(?:ASPSESSIONID[a-zA-Z]{8}=[a-zA-Z]{24})(?:&(.*))?$`),
		regexp.MustCompile(`(?i)^(.*)(?:cfid=[^&]+&cftoken=[^&]+)(?:&(.*))?$`),
	}
)

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// unescapeRepeatedly decodes %XX escapes until none is left that decodes;
// malformed escapes stay as they are.
func unescapeRepeatedly(s string) string {
	for {
		un := unescapeOnce(s)
		if un == s {
			return s
		}
		s = un
	}
}

func unescapeOnce(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// escapeOnce escapes what Python's quote_from_bytes escapes with the safe
// set of surt's escapeOnce: bytes outside printable ASCII, space, '#' and
// '%'.
func escapeOnce(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '#' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// normalizePath resolves "." and ".." segments and drops empty ones, as
// surt's GoogleURLCanonicalizer does; a trailing slash stays.
func normalizePath(p string) string {
	if p == "" {
		return "/"
	}
	parts := strings.Split(p, "/")[1:]
	var kept []string
	for _, s := range parts {
		switch s {
		case ".":
		case "..":
			if len(kept) > 0 {
				kept = kept[:len(kept)-1]
			} else {
				kept = append(kept, s)
			}
		default:
			kept = append(kept, s)
		}
	}
	var b strings.Builder
	b.WriteString("/")
	for i, s := range kept {
		if i == len(kept)-1 {
			b.WriteString(s)
		} else if s != "" {
			b.WriteString(s)
			b.WriteString("/")
		}
	}
	return b.String()
}

// alphaReorder sorts the arguments of a query by name, then value (an
// argument without "=" before one with it), keeping each as written.
func alphaReorder(q string) string {
	if len(q) <= 1 {
		return q
	}
	args := strings.Split(q, "&")
	slices.SortStableFunc(args, func(a, b string) int {
		an, av, ahas := strings.Cut(a, "=")
		bn, bv, bhas := strings.Cut(b, "=")
		if c := cmp.Compare(an, bn); c != 0 {
			return c
		}
		switch {
		case !ahas && !bhas:
			return 0
		case !ahas:
			return -1
		case !bhas:
			return 1
		}
		return cmp.Compare(av, bv)
	})
	return strings.Join(args, "&")
}
