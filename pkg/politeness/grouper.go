package politeness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// ValidAliasName reports whether name may be an alias: one word of 1 to 63
// ASCII letters, digits, underscores and dashes. Without a dot it is never a
// valid (multi-label) domain name, so it cannot be mistaken for a host on the
// web (Veidemann's host aliases). A single-label host of the same name (an intranet
// "kommune") would share the alias's group, which only makes crawling
// stricter.
func ValidAliasName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Aliases maps alias names to the hosts that share one crawl host group. A
// host belongs to at most one alias. The zero value has no aliases.
type Aliases struct {
	byAlias map[string][]string
	byHost  map[string]string
}

// ParseAliases parses aliases written as
//
//	alias=host|host|...;alias=host|...
//
// for example "kommune=rana.kommune.no|vefsn.kommune.no;news=a.example|b.example".
// Spaces around names are ignored, and so are empty entries (a trailing ";").
// An alias name is one word of ASCII letters, digits, "_" and "-" (no dot, so
// it is never a valid domain name). Hosts are written in ASCII (punycode),
// compared case-insensitively, and may carry a port, which is ignored. A host
// listed twice under one alias counts once; a host under two aliases, an alias
// defined twice or an alias without hosts is an error.
func ParseAliases(s string) (Aliases, error) {
	m := map[string][]string{}
	for entry := range strings.SplitSeq(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, hosts, ok := strings.Cut(entry, "=")
		if !ok {
			return Aliases{}, fmt.Errorf("parse aliases entry %q: want alias=host|host", entry)
		}
		name = strings.TrimSpace(name)
		if _, dup := m[name]; dup {
			return Aliases{}, fmt.Errorf("parse aliases: alias %q defined twice", name)
		}
		list := []string{}
		for h := range strings.SplitSeq(hosts, "|") {
			if h = strings.TrimSpace(h); h != "" {
				list = append(list, h)
			}
		}
		m[name] = list
	}
	a, err := NewAliases(m)
	if err != nil {
		return Aliases{}, fmt.Errorf("parse aliases %q: %w", s, err)
	}
	return a, nil
}

// NewAliases validates alias → hosts and returns them as Aliases, with the
// rules of ParseAliases.
func NewAliases(m map[string][]string) (Aliases, error) {
	a := Aliases{byAlias: make(map[string][]string, len(m)), byHost: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !ValidAliasName(name) {
			return Aliases{}, fmt.Errorf("alias %q: want one word of letters, digits, _ and - (an alias must not be a domain name)", name)
		}
		var hosts []string
		for _, raw := range m[name] {
			h := NormalizeHost(raw)
			if !validHost(h) {
				return Aliases{}, fmt.Errorf("alias %q: host %q is not a host name or IP address", name, raw)
			}
			if other, ok := a.byHost[h]; ok {
				if other == name {
					continue
				}
				return Aliases{}, fmt.Errorf("host %q is in both alias %q and alias %q: a host belongs to at most one alias", h, other, name)
			}
			a.byHost[h] = name
			hosts = append(hosts, h)
		}
		if len(hosts) == 0 {
			return Aliases{}, fmt.Errorf("alias %q has no hosts", name)
		}
		slices.Sort(hosts)
		a.byAlias[name] = hosts
	}
	return a, nil
}

// Alias returns the alias of host, if it has one.
func (a Aliases) Alias(host string) (string, bool) {
	name, ok := a.byHost[NormalizeHost(host)]
	return name, ok
}

// Hosts returns the hosts of alias name, sorted.
func (a Aliases) Hosts(name string) []string { return slices.Clone(a.byAlias[name]) }

// Names returns the alias names, sorted.
func (a Aliases) Names() []string { return slices.Sorted(maps.Keys(a.byAlias)) }

// String returns a in the format of ParseAliases, aliases and hosts sorted.
func (a Aliases) String() string {
	var b strings.Builder
	for i, name := range a.Names() {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strings.Join(a.byAlias[name], "|"))
	}
	return b.String()
}

// validHost reports whether h (normalized) looks like a host name or an IP
// address: ASCII letters, digits, "-", "_" and "." in non-empty labels.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || isDigit(c) || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// NormalizeHost returns host lower-cased, without a port, IPv6 brackets or
// a trailing dot. Such normalized hosts are the default group ids.
func NormalizeHost(host string) string {
	if isPlainHost(host) {
		return host
	}
	h := strings.TrimSpace(host)
	if strings.HasPrefix(h, "[") {
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		} else {
			h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		}
	} else if strings.Count(h, ":") == 1 {
		h, _, _ = strings.Cut(h, ":")
	}
	h = strings.TrimSuffix(h, ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return strings.ToLower(h)
}

// isPlainHost reports whether h is already a normalized host name: lower
// case letters, digits, "-", "_" and ".", at least one letter (so not an IP
// address) and no trailing dot. It keeps NormalizeHost cheap on the common
// path.
func isPlainHost(h string) bool {
	letter := false
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c >= 'a' && c <= 'z' || c == '-' || c == '_':
			letter = true
		case isDigit(c) || c == '.':
		default:
			return false
		}
	}
	return letter && h[len(h)-1] != '.'
}

// HostOf returns the normalized host of rawURL, or "" if it has none.
func HostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return NormalizeHost(u.Host)
}

// Resolver returns the IP address of host, for same-IP grouping. It should
// cache answers: Group calls it for every host it is asked about.
type Resolver func(ctx context.Context, host string) (netip.Addr, error)

// Grouper maps hosts to crawl host group ids: a host's alias if it has one,
// else (with a Resolver) the host's IP address, else the normalized host. IP
// literals are their own address, so a URL by IP and a host resolving to the
// same IP share a group. It is safe for concurrent use.
type Grouper struct {
	mu      sync.RWMutex
	aliases Aliases
	resolve Resolver
}

// NewGrouper returns a Grouper with aliases and an optional resolver (nil:
// no same-IP grouping).
func NewGrouper(aliases Aliases, resolve Resolver) *Grouper {
	return &Grouper{aliases: aliases, resolve: resolve}
}

// SetAliases replaces the aliases. Only hosts grouped afterwards see the
// change: items already queued keep their group.
func (g *Grouper) SetAliases(a Aliases) {
	g.mu.Lock()
	g.aliases = a
	g.mu.Unlock()
}

// Aliases returns the current aliases.
func (g *Grouper) Aliases() Aliases {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.aliases
}

// Lookup returns the group of host from aliases alone: its alias, or the
// normalized host. It never resolves. A nil Grouper groups by host.
func (g *Grouper) Lookup(host string) string {
	h := NormalizeHost(host)
	if g == nil {
		return h
	}
	g.mu.RLock()
	name, ok := g.aliases.byHost[h]
	g.mu.RUnlock()
	if ok {
		return name
	}
	return h
}

// Group returns the group of host: its alias; else, with a Resolver, the
// host's IP address; else the normalized host. When resolution fails the host
// is grouped by name and the error is returned with it, so the caller can
// decide whether to publish now or retry. The group must be computed before
// an item is published, so that routing by group works.
func (g *Grouper) Group(ctx context.Context, host string) (string, error) {
	h := NormalizeHost(host)
	if g == nil {
		return h, nil
	}
	g.mu.RLock()
	name, ok := g.aliases.byHost[h]
	resolve := g.resolve
	g.mu.RUnlock()
	if ok {
		return name, nil
	}
	if resolve == nil {
		return h, nil
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String(), nil
	}
	addr, err := resolve(ctx, h)
	if err != nil {
		return h, fmt.Errorf("resolve host %q: %w", h, err)
	}
	if !addr.IsValid() {
		return h, fmt.Errorf("resolve host %q: %w", h, errors.New("no address"))
	}
	return addr.Unmap().WithZone("").String(), nil
}
