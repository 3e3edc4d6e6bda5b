// Package urlnorm turns URLs into the canonical strings every gridcrawl
// service uses as dedupe keys, and resolves links found in HTML the way a
// browser does.
//
// Normalize is deterministic and idempotent: Normalize(Normalize(x)) equals
// Normalize(x) for every x it accepts. Only absolute http and https URLs with
// a host are accepted. The canonical form is
//
//	scheme "://" host [":" port] path ["?" query]
//
// with these rules:
//
//   - leading and trailing C0 controls and spaces are trimmed, and tabs and
//     newlines anywhere are removed (as browsers do with href values);
//   - before the query, a backslash is a slash, and any number of slashes
//     after "scheme:" introduce the authority (browser behaviour for http);
//   - scheme and host are lowercased; hosts are percent-decoded, mapped with
//     IDNA (UTS #46, non-transitional) and written as punycode; trailing dots
//     are stripped; a host may then hold only a-z, 0-9, '-', '_' and '.', with
//     no empty label; a host ending in a number is parsed as an IPv4 address
//     in the WHATWG way (so "0x7f.1" is "127.0.0.1"); IPv6 hosts are written
//     in RFC 5952 form inside brackets, and zones are refused; an
//     IPv4-mapped IPv6 address ("[::ffff:1.2.3.4]") is written as the IPv4
//     address it maps;
//   - userinfo and fragment are dropped; the scheme's default port (80 for
//     http, 443 for https) is dropped, other ports are kept without leading
//     zeros;
//   - an empty path is "/"; dot segments are removed (RFC 3986 §5.2.4), also
//     when written "%2e";
//   - in path and query, percent-encoded unreserved characters
//     (A-Z a-z 0-9 - . _ ~) are decoded, other percent-escapes get uppercase
//     hex digits, a '%' not followed by two hex digits becomes "%25", and
//     every byte RFC 3986 does not allow there (controls, space, non-ASCII,
//     and " < > \ ^ ` { | } [ ]) is percent-encoded, byte by byte;
//   - the query keeps its parameters in their order and spelling; an empty
//     query ("?" alone) is dropped.
//
// The package has no mutable state; all functions are safe for concurrent use.
package urlnorm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// MaxLength is the longest URL, in bytes, that Normalize accepts or returns:
// 2,048, about what browsers and major crawlers handle in practice. Longer
// URLs are nearly always generated traps, and each one is carried in
// documents, contracts and records.
const MaxLength = 2048

// Sentinel errors; every error this package returns wraps exactly one of them.
var (
	// ErrScheme means the URL's scheme is not http or https (javascript:,
	// mailto:, data:, tel:, ftp: ...).
	ErrScheme = errors.New("not an http or https url")
	// ErrNoHost means the URL has an empty host.
	ErrNoHost = errors.New("url has no host")
	// ErrTooLong means the URL, or its normalized form, exceeds MaxLength.
	ErrTooLong = errors.New("url too long")
	// ErrInvalid means the URL cannot be parsed: no scheme, a bad host, a
	// bad port, an unusable base URL.
	ErrInvalid = errors.New("invalid url")
)

// hostProfile maps hosts the way the WHATWG URL standard does ("domain to
// ASCII" with beStrict false): non-transitional UTS #46 mapping, Bidi and
// joiner checks, no STD3 or hyphen or DNS length checks. Characters outside
// our host alphabet are refused after the mapping.
var hostProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.StrictDomainName(false),
	idna.CheckHyphens(false),
	idna.VerifyDNSLength(false),
)

// Normalize returns the canonical form of the absolute http or https URL raw,
// as described in the package documentation. Its errors wrap ErrScheme,
// ErrNoHost, ErrTooLong or ErrInvalid.
func Normalize(raw string) (string, error) {
	if len(raw) > MaxLength {
		return "", fmt.Errorf("normalize %q: %w", clip(raw), ErrTooLong)
	}
	s := clean(raw)
	scheme, rest, ok := splitScheme(s)
	if !ok {
		return "", fmt.Errorf("normalize %q: no scheme: %w", clip(raw), ErrInvalid)
	}
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("normalize %q: scheme %q: %w", clip(raw), clip(scheme), ErrScheme)
	}
	out, err := normalizeHierarchical(scheme, rest)
	if err != nil {
		return "", fmt.Errorf("normalize %q: %w", clip(raw), err)
	}
	return out, nil
}

// Parse normalizes raw and parses the result with net/url.
func Parse(raw string) (*url.URL, error) {
	n, err := Normalize(raw)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(n)
	if err != nil {
		// Normalize's output is always parsable; this is a bug if it happens.
		return nil, fmt.Errorf("parse normalized %q: %v: %w", clip(n), err, ErrInvalid)
	}
	return u, nil
}

// Host returns u's hostname, lowercased, without port, brackets or trailing
// dot. It is the key crawl host groups start from.
func Host(u *url.URL) string {
	return strings.ToLower(strings.TrimRight(u.Hostname(), "."))
}

// HostPort returns the identity robots.txt and politeness use for u's server:
// Host(u), then ":port" unless the port is absent or is the scheme's default.
// IPv6 hosts are bracketed, with or without a port ("[::1]", "[::1]:8080").
func HostPort(u *url.URL) string {
	h := Host(u)
	p := u.Port()
	if p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			p = strconv.Itoa(n)
		}
	}
	if p == "" || p == defaultPort(strings.ToLower(u.Scheme)) {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return net.JoinHostPort(h, p)
}

// RegistrableDomain returns the registrable domain (eTLD+1, from the public
// suffix list including its private section) of the hostname host, such as
// "example.co.uk" for "www.example.co.uk". Unknown top-level domains count as
// public suffixes, so "www.example.test" gives "example.test". For IP
// addresses, and for hosts without one (a public suffix itself, "localhost"),
// it returns the host itself, lowercased and without brackets or trailing
// dot.
func RegistrableDomain(host string) string {
	h := strings.TrimRight(strings.ToLower(host), ".")
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' { // an IPv6 literal
		h = strings.TrimRight(h[1:len(h)-1], ".")
	}
	if h == "" {
		return ""
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return h
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil {
		return h
	}
	return d
}

// Resolve resolves the link ref, as written in an HTML attribute, against
// base the way a browser does (whitespace trimmed, tabs and newlines removed,
// protocol-relative and backslashed forms accepted), and normalizes the
// result. References with another scheme (javascript:, mailto:, data:,
// tel:, ...) give an error wrapping ErrScheme. To resolve many references
// against one base, use NewResolver.
func Resolve(base *url.URL, ref string) (string, error) {
	r, err := NewResolver(base)
	if err != nil {
		return "", err
	}
	return r.Resolve(ref)
}

// Resolver resolves references against one base URL. It holds the base in
// parsed, normalized form, so each Resolve call only does the work for the
// reference. A Resolver is immutable and safe for concurrent use.
type Resolver struct {
	base      string // normalized base URL
	scheme    string
	authority string // host[:port], normalized
	path      string // normalized, starts with "/"
	dir       string // path up to and including its last "/"
	query     string
	hasQuery  bool
}

// NewResolver returns a Resolver for base, which must be an absolute http or
// https URL; its errors wrap the sentinels of Normalize.
func NewResolver(base *url.URL) (*Resolver, error) {
	if base == nil {
		return nil, fmt.Errorf("new resolver: nil base: %w", ErrInvalid)
	}
	if base.Host == "" && base.Scheme != "" && base.Opaque == "" {
		// Otherwise "http:///a" would take "a" as its host.
		return nil, fmt.Errorf("new resolver: base %q: %w", clip(base.String()), ErrNoHost)
	}
	n, err := Normalize(base.String())
	if err != nil {
		return nil, fmt.Errorf("new resolver: base: %w", err)
	}
	return newResolver(n), nil
}

// newResolver splits a normalized URL into the parts resolution needs.
func newResolver(n string) *Resolver {
	r := &Resolver{base: n}
	i := strings.Index(n, "://")
	r.scheme = n[:i]
	rest := n[i+3:]
	j := strings.IndexByte(rest, '/')
	r.authority = rest[:j]
	rest = rest[j:]
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		r.path, r.query, r.hasQuery = rest[:q], rest[q+1:], true
	} else {
		r.path = rest
	}
	r.dir = r.path[:strings.LastIndexByte(r.path, '/')+1]
	return r
}

// Base returns the normalized base URL.
func (r *Resolver) Base() string { return r.base }

// Resolve resolves ref against the Resolver's base and normalizes the result,
// like the package-level Resolve.
func (r *Resolver) Resolve(ref string) (string, error) {
	if len(ref) > MaxLength {
		return "", fmt.Errorf("resolve %q: %w", clip(ref), ErrTooLong)
	}
	s := clean(ref)
	if scheme, rest, ok := splitScheme(s); ok {
		if scheme != "http" && scheme != "https" {
			return "", fmt.Errorf("resolve %q: scheme %q: %w", clip(ref), clip(scheme), ErrScheme)
		}
		// "http:foo" against an http base is relative (WHATWG); otherwise the
		// reference is absolute.
		if scheme != r.scheme || strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, `\`) {
			out, err := normalizeHierarchical(scheme, rest)
			if err != nil {
				return "", fmt.Errorf("resolve %q: %w", clip(ref), err)
			}
			return out, nil
		}
		s = rest
	}
	s = slashes(s)
	if strings.HasPrefix(s, "//") {
		out, err := normalizeHierarchical(r.scheme, s)
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", clip(ref), err)
		}
		return out, nil
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	path, query, hasQuery := s, "", false
	if i := strings.IndexByte(s, '?'); i >= 0 {
		path, query, hasQuery = s[:i], s[i+1:], true
	}
	switch {
	case path == "":
		path = r.path
		if !hasQuery {
			query, hasQuery = r.query, r.hasQuery
		}
	case path[0] == '/':
	default:
		path = r.dir + path
	}
	var b strings.Builder
	b.Grow(2 + len(r.authority) + len(path) + 1 + len(query))
	b.WriteString("//")
	b.WriteString(r.authority)
	b.WriteString(path)
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(query)
	}
	out, err := normalizeHierarchical(r.scheme, b.String())
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", clip(ref), err)
	}
	return out, nil
}

// normalizeHierarchical normalizes what follows "scheme:" in an http or https
// URL that has already been through clean.
func normalizeHierarchical(scheme, rest string) (string, error) {
	rest = slashes(rest)
	rest = strings.TrimLeft(rest, "/")
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	host, port, err := splitHostPort(authority)
	if err != nil {
		return "", err
	}
	if host, err = normalizeHost(host); err != nil {
		return "", err
	}
	if port, err = normalizePort(port); err != nil {
		return "", err
	}
	if port == defaultPort(scheme) {
		port = ""
	}
	path, query, hasQuery := rest, "", false
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		path, query, hasQuery = rest[:i], rest[i+1:], true
	}
	if path == "" {
		path = "/"
	}
	path = removeDotSegments(escape(path, pathAllowed))
	if hasQuery {
		query = escape(query, queryAllowed)
	}
	n := len(scheme) + 3 + len(host) + 1 + len(port) + len(path) + 1 + len(query)
	if n > MaxLength+2 {
		return "", ErrTooLong
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	b.WriteString(path)
	if query != "" {
		b.WriteByte('?')
		b.WriteString(query)
	}
	if b.Len() > MaxLength {
		return "", ErrTooLong
	}
	return b.String(), nil
}

// splitHostPort splits an authority without userinfo into host and port
// (port without the colon, empty if absent).
func splitHostPort(a string) (host, port string, err error) {
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", "", fmt.Errorf("unclosed ipv6 host: %w", ErrInvalid)
		}
		host, rest := a[:end+1], a[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if rest[0] != ':' {
			return "", "", fmt.Errorf("junk after ipv6 host: %w", ErrInvalid)
		}
		return host, rest[1:], nil
	}
	if i := strings.IndexByte(a, ':'); i >= 0 {
		return a[:i], a[i+1:], nil
	}
	return a, "", nil
}

// normalizePort checks a port is decimal and at most 65535, and strips
// leading zeros. An empty port stays empty.
func normalizePort(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	n := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return "", fmt.Errorf("port %q: %w", clip(p), ErrInvalid)
		}
		n = n*10 + int(c-'0')
		if n > 65535 {
			return "", fmt.Errorf("port %q out of range: %w", clip(p), ErrInvalid)
		}
	}
	return strconv.Itoa(n), nil
}

func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// normalizeHost returns the canonical form of a host as it appears in the
// authority (percent-encoded, possibly bracketed IPv6).
func normalizeHost(h string) (string, error) {
	if h == "" {
		return "", ErrNoHost
	}
	if h[0] == '[' {
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", fmt.Errorf("ipv6 host %q: %w", clip(h), ErrInvalid)
		}
		if a.Is4In6() {
			// One host, one crawl host group: "[::ffff:1.2.3.4]" is 1.2.3.4.
			return a.Unmap().String(), nil
		}
		return "[" + a.String() + "]", nil
	}
	if strings.IndexByte(h, '%') >= 0 {
		h = percentDecode(h)
	}
	if !isSimpleASCIIHost(h) {
		if !utf8.ValidString(h) {
			return "", fmt.Errorf("host %q not utf-8: %w", clip(h), ErrInvalid)
		}
		a, err := hostProfile.ToASCII(h)
		if err != nil {
			return "", fmt.Errorf("host %q: idna: %v: %w", clip(h), err, ErrInvalid)
		}
		h = a
	}
	h = strings.ToLower(h)
	h = strings.TrimRight(h, ".")
	if h == "" {
		return "", ErrNoHost
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", fmt.Errorf("host %q: character %q: %w", clip(h), c, ErrInvalid)
		}
	}
	if h[0] == '.' || strings.Contains(h, "..") {
		return "", fmt.Errorf("host %q: empty label: %w", clip(h), ErrInvalid)
	}
	if endsInNumber(h) {
		return parseIPv4(h)
	}
	return h, nil
}

// isSimpleASCIIHost reports whether h needs no IDNA processing: only ASCII
// letters, digits, '-', '_', '.', and no punycode label to validate.
func isSimpleASCIIHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
		if (c == 'x' || c == 'X') && (i == 0 || h[i-1] == '.') && len(h)-i >= 4 &&
			(h[i+1] == 'n' || h[i+1] == 'N') && h[i+2] == '-' && h[i+3] == '-' {
			return false
		}
	}
	return true
}

// endsInNumber implements the WHATWG "ends in a number" check on a lowercase
// host without trailing dot.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := parseIPv4Number(last)
	return ok
}

// parseIPv4 parses a host that ends in a number as an IPv4 address the way
// the WHATWG URL standard does (one to four parts, each decimal, octal with a
// leading 0, or hex with 0x; the last part fills the remaining bytes).
func parseIPv4(h string) (string, error) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return "", fmt.Errorf("ipv4 host %q: %w", clip(h), ErrInvalid)
	}
	var nums [4]uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return "", fmt.Errorf("ipv4 host %q: %w", clip(h), ErrInvalid)
		}
		if i < len(parts)-1 && n > 255 {
			return "", fmt.Errorf("ipv4 host %q: %w", clip(h), ErrInvalid)
		}
		nums[i] = n
	}
	last := nums[len(parts)-1]
	if last >= 1<<(8*(5-len(parts))) {
		return "", fmt.Errorf("ipv4 host %q: %w", clip(h), ErrInvalid)
	}
	v := last
	for i := 0; i < len(parts)-1; i++ {
		v += nums[i] << (8 * (3 - i))
	}
	return fmt.Sprintf("%d.%d.%d.%d", v>>24&255, v>>16&255, v>>8&255, v&255), nil
}

// parseIPv4Number parses one part of a WHATWG IPv4 address. Values too large
// for any address report false.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil || n > 1<<32-1 {
		return 0, false
	}
	return n, true
}

// clean removes leading and trailing C0 controls and spaces, and all tabs
// and newlines, like the WHATWG URL parser.
func clean(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	}
	return s
}

// splitScheme splits "scheme:rest" and lowercases the scheme. ok is false if
// s does not start with a syntactically valid scheme and a colon.
func splitScheme(s string) (scheme, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.ToLower(s[:i]), s[i+1:], true
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// slashes turns backslashes before the query or fragment into slashes.
func slashes(s string) string {
	end := strings.IndexAny(s, "?#")
	if end < 0 {
		end = len(s)
	}
	if strings.IndexByte(s[:end], '\\') < 0 {
		return s
	}
	return strings.ReplaceAll(s[:end], `\`, "/") + s[end:]
}

// Bytes that may appear unescaped in a path (RFC 3986 pchar and "/") and in
// a query (pchar, "/" and "?"). Read-only after initialization.
var (
	pathAllowed  = byteSet("!$&'()*+,;=:@/")
	queryAllowed = byteSet("!$&'()*+,;=:@/?")
)

// byteSet returns the unreserved bytes plus those in extra.
func byteSet(extra string) *[256]bool {
	var t [256]bool
	for c := 0; c < 256; c++ {
		t[c] = isUnreserved(byte(c)) || strings.IndexByte(extra, byte(c)) >= 0
	}
	return &t
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const upperHex = "0123456789ABCDEF"

// escape normalizes the percent-encoding of a path or query: decode escaped
// unreserved bytes, uppercase other escapes, escape lone '%' and every byte
// not allowed.
func escape(s string, allowed *[256]bool) string {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; c == '%' || !allowed[c] {
			break
		}
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, i, len(s)+16)
	copy(b, s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			if i+2 < len(s) {
				hi, ok1 := unhex(s[i+1])
				lo, ok2 := unhex(s[i+2])
				if ok1 && ok2 {
					if v := hi<<4 | lo; isUnreserved(v) {
						b = append(b, v)
					} else {
						b = append(b, '%', upperHex[hi], upperHex[lo])
					}
					i += 2
					continue
				}
			}
			b = append(b, "%25"...)
			continue
		}
		if allowed[c] {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return string(b)
}

// percentDecode decodes every valid %XX escape in s.
func percentDecode(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b = append(b, hi<<4|lo)
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// removeDotSegments removes "." and ".." segments from a path that starts
// with "/" (RFC 3986 §5.2.4).
func removeDotSegments(p string) string {
	if !strings.Contains(p, "/.") {
		return p
	}
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}

// clip shortens s for use in error messages.
func clip(s string) string {
	const n = 128
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
