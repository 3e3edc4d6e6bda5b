// Package netguard keeps the loader from fetching private, loopback,
// link-local and other non-public addresses unless configuration allows them,
// and lets development and test setups pin host names to addresses.
//
// The check runs on the address actually dialled (through
// net.Dialer.Control), after every DNS lookup, so DNS rebinding and redirects
// to private addresses are refused as well as literal private URLs.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrForbidden is wrapped by every error that refuses an address.
var ErrForbidden = errors.New("address not allowed")

// Reason is the failure reason of a URL whose address the guard refused, as
// a crawl log shows it. It starts with ErrForbidden's text, so that readers
// of older records can match both by that prefix, and says what a newcomer
// crawling a site on their own machine needs to know: the refusal is on
// purpose, and which setting lifts it.
const Reason = "address not allowed: loopback, private and link-local networks are refused unless GRIDCRAWL_ALLOW_NETS allows them (such as GRIDCRAWL_ALLOW_NETS=loopback)"

// IsReason reports whether reason, a failure reason, is the guard's
// refusal: Reason, or the shorter text of records written before it.
func IsReason(reason string) bool { return strings.HasPrefix(reason, ErrForbidden.Error()) }

// keyword returns the networks of a name a newcomer most often means, for
// ParseNets: "loopback" is this machine, "private" the networks of RFC 1918
// (https://www.rfc-editor.org/rfc/rfc1918) and IPv6 unique local addresses
// (https://www.rfc-editor.org/rfc/rfc4193). Other names give nil.
func keyword(name string) []netip.Prefix {
	switch strings.ToLower(name) {
	case "loopback":
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	case "private":
		return []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
			netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fc00::/7")}
	}
	return nil
}

// forbiddenPrefixes lists the ranges that are never dialled unless allowed.
// Addresses are unmapped (::ffff:a.b.c.d becomes a.b.c.d) before the test, so
// IPv4-mapped IPv6 forms of these ranges are covered too.
var forbiddenPrefixes = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network", includes 0.0.0.0
	netip.MustParsePrefix("10.0.0.0/8"),      // private
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local
	netip.MustParsePrefix("172.16.0.0/12"),   // private
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.168.0.0/16"),  // private
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, includes broadcast
	netip.MustParsePrefix("::/96"),           // unspecified, loopback, deprecated IPv4-compatible
	netip.MustParsePrefix("fc00::/7"),        // unique local
	netip.MustParsePrefix("fe80::/10"),       // link-local
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("ff00::/8"),        // multicast
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:10::/28"),    // deprecated ORCHID
	netip.MustParsePrefix("2001:20::/28"),    // ORCHIDv2
	netip.MustParsePrefix("::ffff:0:0/96"),   // mapped form that failed to unmap (defensive)
	netip.MustParsePrefix("::ffff:0:0:0/96"), // SIIT translated addresses
}

// nat64 is the well-known NAT64 prefix: its addresses embed an IPv4 address in
// the last 32 bits, which is checked like a plain IPv4 address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// ParseNets parses a comma-separated list of CIDR prefixes, as found in
// GRIDCRAWL_ALLOW_NETS. A bare address stands for itself alone (/32 or /128);
// the words "loopback" and "private" stand for their networks. Blank
// entries are skipped; "" gives nil. Its errors name the entry and say what
// an entry looks like, for a person who wrote a host name ("localhost").
func ParseNets(csv string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for entry := range strings.SplitSeq(csv, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if k := keyword(entry); k != nil {
			nets = append(nets, k...)
			continue
		}
		if !strings.Contains(entry, "/") {
			addr, err := netip.ParseAddr(entry)
			if err != nil {
				return nil, badNet(entry)
			}
			if addr.Zone() != "" {
				return nil, fmt.Errorf("%q: zones are not allowed", entry)
			}
			nets = append(nets, netip.PrefixFrom(addr, addr.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return nil, badNet(entry)
		}
		nets = append(nets, p.Masked())
	}
	return nets, nil
}

// badNet explains an entry of ParseNets that is none of the forms it takes.
func badNet(entry string) error {
	const forms = "want loopback, private, a CIDR prefix such as 192.168.1.0/24 or an IP address, separated by commas"
	if strings.EqualFold(entry, "localhost") {
		return fmt.Errorf("%q is a host name, not a network: %s (loopback is this machine)", entry, forms)
	}
	return fmt.Errorf("%q is not a network: %s", entry, forms)
}

// Override pins a host name to an address, like curl --resolve. It is meant
// for development and tests (pointing a simulated site at a loopback server),
// not for production crawling.
type Override struct {
	// Pattern is an exact host name ("a.test") or a wildcard "*.suffix" that
	// matches every name ending in ".suffix" at any depth, but not "suffix"
	// itself. Matching ignores case and a trailing dot.
	Pattern string
	// Addr is the address dialled instead of resolving the name.
	Addr netip.Addr
}

// ParseOverrides parses a comma-separated list of "pattern=address" entries,
// for example "a.test=127.0.0.1,*.sim.test=127.0.0.1". Blank entries are
// skipped; "" gives nil.
func ParseOverrides(csv string) ([]Override, error) {
	var out []Override
	for entry := range strings.SplitSeq(csv, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		pattern, addr, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("parse host override %q: want pattern=address", entry)
		}
		pattern = normalizeHost(strings.TrimSpace(pattern))
		if err := checkPattern(pattern); err != nil {
			return nil, fmt.Errorf("parse host override %q: %w", entry, err)
		}
		a, err := netip.ParseAddr(strings.TrimSpace(strings.Trim(strings.TrimSpace(addr), "[]")))
		if err != nil {
			return nil, fmt.Errorf("parse host override %q: %w", entry, err)
		}
		out = append(out, Override{Pattern: pattern, Addr: a.Unmap()})
	}
	return out, nil
}

func checkPattern(p string) error {
	name := strings.TrimPrefix(p, "*.")
	if name == "" {
		return errors.New("empty host pattern")
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
		default:
			return fmt.Errorf("invalid character %q in host pattern", r)
		}
	}
	if strings.Contains(name, "..") || strings.HasPrefix(name, ".") {
		return errors.New("empty label in host pattern")
	}
	return nil
}

func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// lookupFunc resolves a host to addresses; network is "ip", "ip4" or "ip6".
type lookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// Dialer dials TCP (or UDP) connections, refusing forbidden addresses. The
// zero value refuses every non-public address and resolves names with the
// system resolver. A Dialer must not be modified after first use; it is safe
// for concurrent use.
type Dialer struct {
	// Allow lists networks that are dialled even though they are forbidden
	// by default (for instance 127.0.0.0/8 for a local test site).
	Allow []netip.Prefix
	// Overrides pin host names to addresses. An exact pattern beats a
	// wildcard, and a longer wildcard beats a shorter one. An overridden
	// address is dialled even if it is forbidden: the operator named it
	// explicitly for that host, and no fetched content can change it.
	Overrides []Override
	// Timeout bounds the whole dial, every address tried included. Zero
	// means no limit beyond the context's.
	Timeout time.Duration

	// lookup replaces the system resolver in tests.
	lookup lookupFunc
}

// Check returns nil if ip may be dialled, or an error wrapping ErrForbidden.
func (d *Dialer) Check(ip netip.Addr) error {
	if !ip.IsValid() {
		return fmt.Errorf("check address: invalid address: %w", ErrForbidden)
	}
	ip = ip.WithZone("")
	u := ip.Unmap()
	for _, p := range d.Allow {
		if p.Contains(ip) || p.Contains(u) {
			return nil
		}
	}
	if forbidden(u) {
		return fmt.Errorf("check address %s: %w", ip, ErrForbidden)
	}
	return nil
}

func forbidden(ip netip.Addr) bool {
	if ip.IsUnspecified() || ip.IsLoopback() || ip.IsPrivate() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		return forbidden(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	return false
}

// override returns the address pinned for host, if any.
func (d *Dialer) override(host string) (netip.Addr, bool) {
	host = normalizeHost(host)
	var best netip.Addr
	bestLen := -1
	for _, o := range d.Overrides {
		pat := normalizeHost(o.Pattern)
		if pat == host {
			return o.Addr, true
		}
		suffix, ok := strings.CutPrefix(pat, "*")
		if ok && strings.HasPrefix(suffix, ".") && strings.HasSuffix(host, suffix) &&
			len(host) > len(suffix) && len(suffix) > bestLen {
			best, bestLen = o.Addr, len(suffix)
		}
	}
	return best, bestLen >= 0
}

// DialContext connects to addr ("host:port") on network. A host matching an
// override is dialled at the override's address with the same port; other
// names are resolved and only their allowed addresses are tried, in order,
// until one connects. Every dialled address is checked again just before the
// connection is made. Refusals wrap ErrForbidden.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var ipNet string
	switch network {
	case "tcp", "udp":
		ipNet = "ip"
	case "tcp4", "udp4":
		ipNet = "ip4"
	case "tcp6", "udp6":
		ipNet = "ip6"
	default:
		return nil, fmt.Errorf("dial %s %q: unsupported network", network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %q: %w", addr, err)
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}

	if ip, ok := d.override(host); ok {
		return d.dial(ctx, network, ip, port, ip)
	}

	var candidates []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		candidates = []netip.Addr{ip}
	} else {
		lookup := d.lookup
		if lookup == nil {
			lookup = net.DefaultResolver.LookupNetIP
		}
		candidates, err = lookup(ctx, ipNet, host)
		if err != nil {
			return nil, fmt.Errorf("dial %q: %w", addr, err)
		}
		if len(candidates) == 0 {
			return nil, fmt.Errorf("dial %q: no addresses for host", addr)
		}
	}

	var forbidErr, dialErr error
	for _, ip := range candidates {
		if err := d.Check(ip); err != nil {
			if forbidErr == nil {
				forbidErr = err
			}
			continue
		}
		conn, err := d.dial(ctx, network, ip, port, netip.Addr{})
		if err == nil {
			return conn, nil
		}
		if dialErr == nil {
			dialErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if dialErr == nil {
		return nil, fmt.Errorf("dial %q: every address of the host is refused: %w", addr, forbidErr)
	}
	return nil, dialErr
}

// dial connects to ip:port; exempt is an address the operator pinned, which
// the final check lets through.
func (d *Dialer) dial(ctx context.Context, network string, ip netip.Addr, port string, exempt netip.Addr) (net.Conn, error) {
	nd := net.Dialer{
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("check dialled address %q: %w", address, ErrForbidden)
			}
			if exempt.IsValid() && ap.Addr().Unmap() == exempt.Unmap() {
				return nil
			}
			return d.Check(ap.Addr())
		},
	}
	target := net.JoinHostPort(ip.String(), port)
	conn, err := nd.DialContext(ctx, network, target)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	return conn, nil
}

// Lookup returns the address host is dialled at first: its override, or
// its first resolved address. Crawl host groups by IP use it, so that they
// agree with where the loader connects.
func (d *Dialer) Lookup(ctx context.Context, host string) (netip.Addr, error) {
	if a, ok := d.override(host); ok {
		return a, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("look up %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("look up %q: no address", host)
	}
	return addrs[0].Unmap(), nil
}
