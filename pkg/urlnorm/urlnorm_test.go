package urlnorm

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	long := "http://example.com/" + strings.Repeat("a", MaxLength)
	tests := []struct {
		name string
		in   string
		want string
		err  error
	}{
		// RFC 3986 §6.2.2.1: case normalization.
		{"rfc 6.2.2.1 scheme and host case", "HTTP://www.EXAMPLE.com/", "http://www.example.com/", nil},
		{"rfc 6.2.2.1 hex digits uppercase", "http://example.com/a%3ab%c3%a4", "http://example.com/a%3Ab%C3%A4", nil},
		{"rfc 6.2.2.1 path case kept", "http://example.com/ABC/Def", "http://example.com/ABC/Def", nil},
		// RFC 3986 §6.2.2.2: percent-encoding normalization.
		{"rfc 6.2.2.2 decode tilde", "http://example.com/%7Euser", "http://example.com/~user", nil},
		{"rfc 6.2.2.2 decode unreserved", "http://example.com/%41%62%2D%2e%5F%30", "http://example.com/Ab-._0", nil},
		{"rfc 6.2.2.2 reserved stays encoded", "http://example.com/a%2Fb%3F%23%26", "http://example.com/a%2Fb%3F%23%26", nil},
		// RFC 3986 §6.2.2.3: path segment normalization.
		{"rfc 6.2.2.3 example", "http://example.com/a/./b/../b/%63/%7bfoo%7d", "http://example.com/a/b/c/%7Bfoo%7D", nil},
		{"rfc 6.2.2.3 above root", "http://example.com/../../a", "http://example.com/a", nil},
		{"rfc 6.2.2.3 trailing dot segment", "http://example.com/a/b/.", "http://example.com/a/b/", nil},
		{"rfc 6.2.2.3 trailing dotdot", "http://example.com/a/b/..", "http://example.com/a/", nil},
		{"encoded dot segments", "http://example.com/a/%2e%2E/b/%2e/c", "http://example.com/b/c", nil},
		{"dots inside names kept", "http://example.com/a./.b/..c/c..", "http://example.com/a./.b/..c/c..", nil},
		{"empty segments kept", "http://example.com/a//b/", "http://example.com/a//b/", nil},
		// RFC 3986 §6.2.3: scheme-based normalization.
		{"rfc 6.2.3 no path", "http://example.com", "http://example.com/", nil},
		{"rfc 6.2.3 empty port", "http://example.com:/", "http://example.com/", nil},
		{"rfc 6.2.3 default port", "http://example.com:80/", "http://example.com/", nil},
		{"https default port", "https://example.com:443/x", "https://example.com/x", nil},
		{"http port 443 kept", "http://example.com:443/", "http://example.com:443/", nil},
		{"https port 80 kept", "https://example.com:80/", "https://example.com:80/", nil},
		{"other port kept", "http://example.com:8080", "http://example.com:8080/", nil},
		{"port leading zeros", "http://example.com:00080/", "http://example.com/", nil},
		{"port leading zeros kept port", "http://example.com:08080/", "http://example.com:8080/", nil},
		// Components dropped.
		{"fragment dropped", "http://example.com/a#frag", "http://example.com/a", nil},
		{"fragment with query dropped", "http://example.com/a?b=c#frag?x", "http://example.com/a?b=c", nil},
		{"userinfo dropped", "http://user:pass@example.com/", "http://example.com/", nil},
		{"userinfo with at sign", "http://us@er:p@ss@example.com/", "http://example.com/", nil},
		{"empty query dropped", "http://example.com/a?", "http://example.com/a", nil},
		{"empty query and fragment", "http://example.com/a?#x", "http://example.com/a", nil},
		// Query.
		{"query order kept", "http://example.com/?b=2&a=1&b=1", "http://example.com/?b=2&a=1&b=1", nil},
		{"query plus and slash kept", "http://example.com/?q=a+b/c?d", "http://example.com/?q=a+b/c?d", nil},
		{"query empty params kept", "http://example.com/?&&a=&=b", "http://example.com/?&&a=&=b", nil},
		{"query encoding normalized", "http://example.com/?q=%7e%2f%zz", "http://example.com/?q=~%2F%25zz", nil},
		{"query space and unicode", "http://example.com/?q=a b&r=ä", "http://example.com/?q=a%20b&r=%C3%A4", nil},
		{"query backslash encoded", `http://example.com/?a\b`, "http://example.com/?a%5Cb", nil},
		{"query dot segments untouched", "http://example.com/?p=/a/../b", "http://example.com/?p=/a/../b", nil},
		// Characters that must be encoded.
		{"path space", "http://example.com/a b", "http://example.com/a%20b", nil},
		{"path unicode", "http://example.com/ä€", "http://example.com/%C3%A4%E2%82%AC", nil},
		{"path disallowed ascii", "http://example.com/\"<>^`{|}[]", "http://example.com/%22%3C%3E%5E%60%7B%7C%7D%5B%5D", nil},
		{"path lone percent", "http://example.com/100%", "http://example.com/100%25", nil},
		{"path percent one digit", "http://example.com/%4", "http://example.com/%254", nil},
		{"path sub-delims kept", "http://example.com/!$&'()*+,;=:@", "http://example.com/!$&'()*+,;=:@", nil},
		{"path invalid utf-8 bytes", "http://example.com/\xff\xfe", "http://example.com/%FF%FE", nil},
		{"path control byte", "http://example.com/a\x01b", "http://example.com/a%01b", nil},
		// Browser-like leniency.
		{"surrounding whitespace", "  \x00http://example.com/a \x1f ", "http://example.com/a", nil},
		{"tabs and newlines removed", "ht\ttp://exa\nmple.com/a\r\nb", "http://example.com/ab", nil},
		{"backslashes", `http:\\example.com\a\b?c\d`, "http://example.com/a/b?c%5Cd", nil},
		{"missing slashes", "http:example.com/a", "http://example.com/a", nil},
		{"extra slashes", "http:////example.com/a", "http://example.com/a", nil},
		{"query right after host", "http://example.com?a=b", "http://example.com/?a=b", nil},
		// Hosts.
		{"host trailing dot", "http://example.com./", "http://example.com/", nil},
		{"host trailing dots", "http://example.com../", "http://example.com/", nil},
		{"host idna", "http://Bücher.Example/", "http://xn--bcher-kva.example/", nil},
		{"host idna already punycode", "http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/", nil},
		{"host fullwidth", "http://ＥＸＡＭＰＬＥ．ｃｏｍ/", "http://example.com/", nil},
		{"host percent-encoded", "http://%65xample.com/", "http://example.com/", nil},
		{"host percent-encoded unicode", "http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/", nil},
		{"host underscore", "http://my_host.example.com/", "http://my_host.example.com/", nil},
		{"host hyphens", "http://r3---sn-abc.example.com/", "http://r3---sn-abc.example.com/", nil},
		{"ipv4", "http://192.168.0.1/", "http://192.168.0.1/", nil},
		{"ipv4 hex and shorthand", "http://0x7f.1/", "http://127.0.0.1/", nil},
		{"ipv4 single number", "http://3232235521/", "http://192.168.0.1/", nil},
		{"ipv4 octal", "http://0300.0250.0.01/", "http://192.168.0.1/", nil},
		{"ipv4 trailing dot", "http://1.2.3.4./", "http://1.2.3.4/", nil},
		{"ipv6", "http://[2001:DB8:0:0:0:0:0:1]:8080/", "http://[2001:db8::1]:8080/", nil},
		{"ipv6 default port", "https://[::1]:443/", "https://[::1]/", nil},
		{"ipv6 v4-mapped is the ipv4 host", "http://[::ffff:1.2.3.4]/", "http://1.2.3.4/", nil},
		{"ipv6 v4-mapped hex, port kept", "http://[::FFFF:7f00:1]:8080/a", "http://127.0.0.1:8080/a", nil},
		{"ipv6 v4-compatible stays ipv6", "http://[::1.2.3.4]/", "http://[::102:304]/", nil},
		// Errors.
		{"scheme mailto", "mailto:someone@example.com", "", ErrScheme},
		{"scheme javascript", "javascript:alert(1)", "", ErrScheme},
		{"scheme ftp", "ftp://example.com/", "", ErrScheme},
		{"scheme data", "data:text/html,hi", "", ErrScheme},
		{"no scheme", "example.com/a", "", ErrInvalid},
		{"relative", "/a/b", "", ErrInvalid},
		{"empty", "", "", ErrInvalid},
		{"no host", "http:///", "", ErrNoHost},
		{"no host at all", "http://", "", ErrNoHost},
		{"only userinfo", "http://user@/a", "", ErrNoHost},
		{"host only dots", "http://../", "", ErrNoHost},
		{"bad port", "http://example.com:8a/", "", ErrInvalid},
		{"port too big", "http://example.com:65536/", "", ErrInvalid},
		{"space in host", "http://exa mple.com/", "", ErrInvalid},
		{"bad host char", "http://exa*mple.com/", "", ErrInvalid},
		{"empty label", "http://a..b/", "", ErrInvalid},
		{"leading dot", "http://.example.com/", "", ErrInvalid},
		{"bad ipv4", "http://1.2.3.256/", "", ErrInvalid},
		{"ipv4 too many parts", "http://1.2.3.4.5/", "", ErrInvalid},
		{"host ends in number", "http://example.123/", "", ErrInvalid},
		{"bad ipv6", "http://[1:2:3]/", "", ErrInvalid},
		{"ipv6 zone", "http://[fe80::1%25eth0]/", "", ErrInvalid},
		{"unclosed ipv6", "http://[::1/", "", ErrInvalid},
		{"ipv4 in brackets", "http://[1.2.3.4]/", "", ErrInvalid},
		{"bad punycode", "http://xn--a.example/", "", ErrInvalid},
		{"too long", long, "", ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Normalize(%q) = %q, %v, want error %v", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Normalize(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
			if again, err := Normalize(got); err != nil || again != got {
				t.Errorf("Normalize(%q) = %q, %v, want it unchanged", got, again, err)
			}
		})
	}
}

func TestNormalizeOutputTooLong(t *testing.T) {
	// Fits as input, but encoding triples its size.
	in := "http://example.com/" + strings.Repeat("ä", MaxLength/3)
	if got, err := Normalize(in); !errors.Is(err, ErrTooLong) {
		t.Fatalf("Normalize(%d bytes) = %d bytes, %v, want %v", len(in), len(got), err, ErrTooLong)
	}
}

// RFC 3986 §5.4: resolution examples, with base "http://a/b/c/d;p?q".
// Results are normalized (fragments dropped), and "g:h" is refused because
// its scheme is not http.
func TestResolveRFC3986(t *testing.T) {
	base := mustParse(t, "http://a/b/c/d;p?q")
	tests := []struct {
		name, ref, want string
	}{
		{"normal g", "g", "http://a/b/c/g"},
		{"normal ./g", "./g", "http://a/b/c/g"},
		{"normal g/", "g/", "http://a/b/c/g/"},
		{"normal /g", "/g", "http://a/g"},
		{"normal //g", "//g", "http://g/"},
		{"normal ?y", "?y", "http://a/b/c/d;p?y"},
		{"normal g?y", "g?y", "http://a/b/c/g?y"},
		{"normal #s", "#s", "http://a/b/c/d;p?q"},
		{"normal g#s", "g#s", "http://a/b/c/g"},
		{"normal g?y#s", "g?y#s", "http://a/b/c/g?y"},
		{"normal ;x", ";x", "http://a/b/c/;x"},
		{"normal g;x", "g;x", "http://a/b/c/g;x"},
		{"normal g;x?y#s", "g;x?y#s", "http://a/b/c/g;x?y"},
		{"normal empty", "", "http://a/b/c/d;p?q"},
		{"normal .", ".", "http://a/b/c/"},
		{"normal ./", "./", "http://a/b/c/"},
		{"normal ..", "..", "http://a/b/"},
		{"normal ../", "../", "http://a/b/"},
		{"normal ../g", "../g", "http://a/b/g"},
		{"normal ../..", "../..", "http://a/"},
		{"normal ../../", "../../", "http://a/"},
		{"normal ../../g", "../../g", "http://a/g"},
		{"abnormal ../../../g", "../../../g", "http://a/g"},
		{"abnormal ../../../../g", "../../../../g", "http://a/g"},
		{"abnormal /./g", "/./g", "http://a/g"},
		{"abnormal /../g", "/../g", "http://a/g"},
		{"abnormal g.", "g.", "http://a/b/c/g."},
		{"abnormal .g", ".g", "http://a/b/c/.g"},
		{"abnormal g..", "g..", "http://a/b/c/g.."},
		{"abnormal ..g", "..g", "http://a/b/c/..g"},
		{"abnormal ./../g", "./../g", "http://a/b/g"},
		{"abnormal ./g/.", "./g/.", "http://a/b/c/g/"},
		{"abnormal g/./h", "g/./h", "http://a/b/c/g/h"},
		{"abnormal g/../h", "g/../h", "http://a/b/c/h"},
		{"abnormal g;x=1/./y", "g;x=1/./y", "http://a/b/c/g;x=1/y"},
		{"abnormal g;x=1/../y", "g;x=1/../y", "http://a/b/c/y"},
		{"abnormal g?y/./x", "g?y/./x", "http://a/b/c/g?y/./x"},
		{"abnormal g?y/../x", "g?y/../x", "http://a/b/c/g?y/../x"},
		{"abnormal g#s/./x", "g#s/./x", "http://a/b/c/g"},
		{"abnormal g#s/../x", "g#s/../x", "http://a/b/c/g"},
		{"abnormal http:g (browser: relative)", "http:g", "http://a/b/c/g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(base, tt.ref)
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q, %q) = %q, %v, want %q", base, tt.ref, got, err, tt.want)
			}
		})
	}
}

func TestResolveHTML(t *testing.T) {
	base := mustParse(t, "https://www.example.test/dir/page.html?x=1")
	tests := []struct {
		name, ref, want string
		err             error
	}{
		{"absolute", "http://other.test/a", "http://other.test/a", nil},
		{"absolute uppercase scheme", "HTTPS://Other.Test", "https://other.test/", nil},
		{"protocol-relative", "//cdn.example.test/x.js", "https://cdn.example.test/x.js", nil},
		{"protocol-relative backslashes", `\\cdn.example.test\x`, "https://cdn.example.test/x", nil},
		{"mixed slashes", `/\evil.test/`, "https://evil.test/", nil},
		{"leading and trailing whitespace", " \n\t  next.html \r\n ", "https://www.example.test/dir/next.html", nil},
		{"newline inside", "ne\nxt\t.html", "https://www.example.test/dir/next.html", nil},
		{"inner space encoded", "my page.html", "https://www.example.test/dir/my%20page.html", nil},
		{"backslash path", `sub\a.html`, "https://www.example.test/dir/sub/a.html", nil},
		{"query only", "?page=2", "https://www.example.test/dir/page.html?page=2", nil},
		{"empty query", "?", "https://www.example.test/dir/page.html", nil},
		{"fragment only", "#top", "https://www.example.test/dir/page.html?x=1", nil},
		{"empty", "", "https://www.example.test/dir/page.html?x=1", nil},
		{"parent", "../up.html", "https://www.example.test/up.html", nil},
		{"same scheme relative", "https:rel.html", "https://www.example.test/dir/rel.html", nil},
		{"other scheme absolute", "http:rel.html", "http://rel.html/", nil},
		{"unicode path", "ä.html", "https://www.example.test/dir/%C3%A4.html", nil},
		{"colon in first segment", "1a:b", "https://www.example.test/dir/1a:b", nil},
		{"javascript", "javascript:void(0)", "", ErrScheme},
		{"javascript with whitespace", " JavaScript:void(0)", "", ErrScheme},
		{"javascript with tab", "java\tscript:alert(1)", "", ErrScheme},
		{"mailto", "mailto:a@example.test", "", ErrScheme},
		{"tel", "tel:+123", "", ErrScheme},
		{"data", "data:image/png;base64,AAAA", "", ErrScheme},
		{"ftp", "ftp://example.test/", "", ErrScheme},
		{"protocol-relative no host", "//", "", ErrNoHost},
		{"bad host", "http://exa mple/", "", ErrInvalid},
		{"too long", "/" + strings.Repeat("a", MaxLength), "", ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(base, tt.ref)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Resolve(%q, %q) = %q, %v, want error %v", base, tt.ref, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q, %q) = %q, %v, want %q", base, tt.ref, got, err, tt.want)
			}
		})
	}
}

func TestResolveBase(t *testing.T) {
	tests := []struct {
		name string
		base *url.URL
		err  error
	}{
		{"nil", nil, ErrInvalid},
		{"relative", &url.URL{Path: "/a"}, ErrInvalid},
		{"ftp", &url.URL{Scheme: "ftp", Host: "example.test", Path: "/"}, ErrScheme},
		{"no host", &url.URL{Scheme: "http", Path: "/a"}, ErrNoHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Resolve(tt.base, "a"); !errors.Is(err, tt.err) {
				t.Fatalf("Resolve(%v, %q) = %q, %v, want error %v", tt.base, "a", got, err, tt.err)
			}
		})
	}
	// An unnormalized base is normalized first.
	base := &url.URL{Scheme: "HTTP", Host: "Example.TEST:80", Path: "/a/./b/c", User: url.User("u")}
	r, err := NewResolver(base)
	if err != nil {
		t.Fatalf("NewResolver(%v): %v", base, err)
	}
	if got, want := r.Base(), "http://example.test/a/b/c"; got != want {
		t.Errorf("NewResolver(%v).Base() = %q, want %q", base, got, want)
	}
	if got, err := r.Resolve("d"); err != nil || got != "http://example.test/a/b/d" {
		t.Errorf("Resolve(%v, %q) = %q, %v, want %q", base, "d", got, err, "http://example.test/a/b/d")
	}
}

func TestParse(t *testing.T) {
	u, err := Parse("HTTP://User@Example.COM:8080/a/../b?c=d#e")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if u.Scheme != "http" || u.Host != "example.com:8080" || u.Path != "/b" || u.RawQuery != "c=d" || u.User != nil || u.Fragment != "" {
		t.Errorf("Parse(...) = %#v, want http://example.com:8080/b?c=d", u)
	}
	if _, err := Parse("mailto:x@example.com"); !errors.Is(err, ErrScheme) {
		t.Errorf("Parse(mailto) error = %v, want %v", err, ErrScheme)
	}
}

func TestHostAndHostPort(t *testing.T) {
	tests := []struct {
		name, in, host, hostPort string
	}{
		{"plain", "http://Example.COM/", "example.com", "example.com"},
		{"default http port", "http://example.com:80/", "example.com", "example.com"},
		{"default https port", "https://example.com:443/", "example.com", "example.com"},
		{"https on 80", "https://example.com:80/", "example.com", "example.com:80"},
		{"custom port", "http://example.com:8080/", "example.com", "example.com:8080"},
		{"port leading zero", "http://example.com:0080/", "example.com", "example.com"},
		{"trailing dot", "http://example.com./", "example.com", "example.com"},
		{"ipv6", "http://[::1]/", "::1", "[::1]"},
		{"ipv6 port", "http://[::1]:8080/", "::1", "[::1]:8080"},
		{"ipv4 port", "http://127.0.0.1:8080/", "127.0.0.1", "127.0.0.1:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.in) // not normalized on purpose
			if err != nil {
				t.Fatal(err)
			}
			if got := Host(u); got != tt.host {
				t.Errorf("Host(%q) = %q, want %q", tt.in, got, tt.host)
			}
			if got := HostPort(u); got != tt.hostPort {
				t.Errorf("HostPort(%q) = %q, want %q", tt.in, got, tt.hostPort)
			}
		})
	}
}

func TestRegistrableDomain(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"test tld www", "www.example.test", "example.test"},
		{"test tld blog", "blog.example.test", "example.test"},
		{"test tld deep", "a.b.c.example.test", "example.test"},
		{"itself", "example.test", "example.test"},
		{"com", "www.example.com", "example.com"},
		{"co.uk", "a.b.example.co.uk", "example.co.uk"},
		{"private suffix", "foo.blogspot.com", "foo.blogspot.com"},
		{"uppercase and dot", "WWW.Example.COM.", "example.com"},
		{"public suffix itself", "co.uk", "co.uk"},
		{"single label", "localhost", "localhost"},
		{"ipv4", "192.168.1.1", "192.168.1.1"},
		{"ipv6", "::1", "::1"},
		{"ipv6 bracketed", "[2001:db8::1]", "2001:db8::1"},
		{"punycode", "www.xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RegistrableDomain(tt.in); got != tt.want {
				t.Errorf("RegistrableDomain(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", s, err)
	}
	return u
}

// checkCanonical fails unless s is a canonical URL: Normalize leaves it
// unchanged, net/url parses it, and it is http(s) with a host.
func checkCanonical(t *testing.T, from, s string) {
	t.Helper()
	if len(s) > MaxLength {
		t.Fatalf("%q gave %d bytes, more than MaxLength", from, len(s))
	}
	again, err := Normalize(s)
	if err != nil || again != s {
		t.Fatalf("Normalize(%q) = %q, %v, want it unchanged (from %q)", s, again, err, from)
	}
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q) = %v (from %q)", s, err, from)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
		t.Fatalf("url.Parse(%q) = %#v, not a canonical http(s) url (from %q)", s, u, from)
	}
	if u.String() != s {
		t.Fatalf("url.Parse(%q).String() = %q, want it unchanged (from %q)", s, u.String(), from)
	}
}

func checkSentinel(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrScheme) && !errors.Is(err, ErrNoHost) && !errors.Is(err, ErrTooLong) && !errors.Is(err, ErrInvalid) {
		t.Fatalf("%s: error %v wraps no sentinel", what, err)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "HTTP://www.EXAMPLE.com:80/a/./b/../%7euser?q=1#f",
		"https://[2001:db8::1]:8443/x", "http://0x7f.1/", `http:\\a\b?c\d`, "http://Bücher.example/ä?ö",
		"http://user:pw@host./%zz", "javascript:alert(1)", "http://a..b/", "http://xn--a.example/",
		"http://example.com/%2e%2E/./../a//b", "http://1.2.3.4.5/", "http://[::ffff:1.2.3.4]/", "http:///x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Normalize(s)
		if err != nil {
			checkSentinel(t, "Normalize("+clip(s)+")", err)
			return
		}
		checkCanonical(t, s, n)
	})
}

func FuzzResolve(f *testing.F) {
	for _, s := range [][2]string{
		{"http://a/b/c/d;p?q", "../g"}, {"http://a/b/c/d;p?q", "//g"}, {"https://x.test/", ` \\h\a `},
		{"http://a/b", "javascript:x"}, {"http://a/b", "http:g"}, {"http://a/b", "?"}, {"http://a/", "/..//g"},
		{"http://[::1]:8080/a/", "b%2e%2e/../c"}, {"http://a/", "ä b\t#c"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, base, ref string) {
		b, err := Parse(base)
		if err != nil {
			return
		}
		r, err := NewResolver(b)
		if err != nil {
			t.Fatalf("NewResolver(%q) = %v for a normalized base", b, err)
		}
		got, err := r.Resolve(ref)
		if err != nil {
			checkSentinel(t, "Resolve("+clip(ref)+")", err)
			return
		}
		checkCanonical(t, ref, got)
		if got2, err := Resolve(b, ref); err != nil || got2 != got {
			t.Fatalf("Resolve(%q, %q) = %q, %v, want %q like Resolver", b, ref, got2, err, got)
		}
	})
}

var sink string

func BenchmarkNormalize(b *testing.B) {
	inputs := []string{
		"http://www.example.com/a/b/c.html?x=1&y=2",
		"HTTP://WWW.Example.COM:80/a/./b/../c/%7Euser/index.html?q=a+b#frag",
		"https://www.example.com/search?q=%c3%a4%20x&page=2",
		"http://Bücher.example/ä",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s, err := Normalize(inputs[i%len(inputs)])
		if err != nil {
			b.Fatal(err)
		}
		sink = s
	}
}

func BenchmarkResolve(b *testing.B) {
	base, _ := url.Parse("https://www.example.com/dir/page.html?x=1")
	r, err := NewResolver(base)
	if err != nil {
		b.Fatal(err)
	}
	refs := []string{"next.html", "/about/", "../up.html?p=2", "https://other.example/x", "//cdn.example/y.js"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s, err := r.Resolve(refs[i%len(refs)])
		if err != nil {
			b.Fatal(err)
		}
		sink = s
	}
}

// FuzzRegistrableDomain: the registrable domain of any host is found in the
// host (lowercased), and is its own registrable domain.
func FuzzRegistrableDomain(f *testing.F) {
	for _, s := range []string{"www.example.co.uk", "a.b.c.github.io", "localhost", "[::1]", "127.0.0.1", "EXAMPLE.COM.", "co.uk", "", ".", "..a", "xn--bcher-kva.example", "a.b.c.d.e.f.g", "[fe80::1%25eth0]", ".]", "]]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		d := RegistrableDomain(host)
		if !strings.Contains(strings.ToLower(host), d) {
			t.Fatalf("RegistrableDomain(%q) = %q, not part of the host", host, d)
		}
		if again := RegistrableDomain(d); again != d {
			t.Fatalf("RegistrableDomain(%q) = %q, but RegistrableDomain(%q) = %q", host, d, d, again)
		}
	})
}
