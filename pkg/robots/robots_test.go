package robots

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type check struct {
	agent, path string
	allowed     bool
}

// rfcExample is the example of RFC 9309 §5.1.
const rfcExample = `User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
`

// googleGroups is Google's ID_LineSyntax_Groups test file: blank lines do not
// end a group, rules outside groups are ignored, same-name groups merge.
const googleGroups = `allow: /foo/bar/

user-agent: FooBot
disallow: /
allow: /x/
user-agent: BarBot
disallow: /
allow: /y/


allow: /w/
user-agent: BazBot

user-agent: FooBot
allow: /z/
disallow: /
`

func TestAllowed(t *testing.T) {
	tests := []struct {
		name   string
		robots string
		checks []check
	}{
		{
			name:   "rfc example",
			robots: rfcExample,
			checks: []check{
				{"foobot", "/example/page.html", true},
				{"foobot", "/example/allowed.gif", true},
				{"foobot", "/", false},
				{"foobot", "/example/other.gif", false},
				{"barbot", "/example/page.html", false},
				{"bazbot", "/example/page.html", false},
				{"barbot", "/example/page.htm", true},
				{"barbot", "/example/other", true}, // the "*" group does not apply
				{"barbot", "/a.gif", true},
				{"quxbot", "/example/page.html", true}, // empty group: allow all
				{"quxbot", "/a.gif", true},
				{"otherbot", "/a.gif", false},
				{"otherbot", "/a.gif?x", true}, // "$" anchors the whole path and query
				{"otherbot", "/example/x", false},
				{"otherbot", "/publications/x", true},
				{"otherbot", "/publications/x.gif", true}, // "/publications/" is longer than "*.gif$"
				{"otherbot", "/", true},
			},
		},
		{
			name:   "google groups",
			robots: googleGroups,
			checks: []check{
				{"FooBot", "/x/a", true},
				{"FooBot", "/z/a", true},
				{"FooBot", "/y/a", false},
				{"BarBot", "/y/a", true},
				{"BarBot", "/w/a", true},
				{"BarBot", "/z/a", false},
				{"BazBot", "/z/a", true},
				{"FooBot", "/foo/bar/", false},
				{"BarBot", "/foo/bar/", false},
				{"BazBot", "/foo/bar/", false},
			},
		},
		{
			name:   "sitemap does not end the user-agent lines",
			robots: "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
			checks: []check{{"FooBot", "/", false}, {"BarBot", "/", false}},
		},
		{
			name:   "unknown line does not end the user-agent lines",
			robots: "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
			checks: []check{{"FooBot", "/", false}, {"BarBot", "/", false}},
		},
		{
			name:   "crawl-delay ends the user-agent lines",
			robots: "User-agent: a\nCrawl-delay: 3\nUser-agent: b\nDisallow: /\n",
			checks: []check{{"a", "/x", true}, {"b", "/x", false}},
		},
		{
			name:   "empty disallow ends the user-agent lines and matches nothing",
			robots: "User-agent: a\nDisallow:\nUser-agent: b\nDisallow: /\n",
			checks: []check{{"a", "/x", true}, {"b", "/x", false}},
		},
		{
			name:   "keys are case insensitive",
			robots: "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
			checks: []check{{"FooBot", "/x/y", true}, {"FooBot", "/a/b", false}},
		},
		{
			name:   "misspelled keys",
			robots: "useragent: FooBot\ndissallow: /a\nuser agent: BarBot\ndisalow: /b\n",
			checks: []check{{"FooBot", "/a", false}, {"BarBot", "/b", false}, {"BarBot", "/a", true}},
		},
		{
			name:   "user-agent value is a case insensitive product token",
			robots: "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
			checks: []check{{"Foo", "/x/y", true}, {"Foo", "/a/b", false}, {"Bar", "/a/b", true}, {"FooBar", "/a/b", true}},
		},
		{
			name:   "user-agent line with version",
			robots: "User-agent: GridCrawl/2.0\nDisallow: /private\n",
			checks: []check{{"gridcrawl/1.0 (+https://gridcrawl.test/bot)", "/private/x", false}, {"gridcrawl", "/public", true}},
		},
		{
			name:   "crawler token extracted from full user agent",
			robots: "User-agent: *\nDisallow: /\n\nUser-agent: gridcrawl\nAllow: /\n",
			checks: []check{
				{"gridcrawl/1.0 (+https://gridcrawl.test/bot)", "/x", true},
				{"GridCrawl", "/x", true},
				{"gridcrawler/1.0", "/x", false}, // tokens match exactly, not by prefix
				{"grid", "/x", false},
				{"", "/x", false},
				{"*", "/x", false},
			},
		},
		{
			name:   "specific group replaces the global one",
			robots: "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
			checks: []check{{"FooBot", "/x/page", true}, {"FooBot", "/y/page", false}, {"BarBot", "/x/page", false}},
		},
		{
			name:   "global group in second position",
			robots: "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
			checks: []check{{"FooBot", "/x/y", false}, {"BarBot", "/x/y", true}},
		},
		{
			name:   "no global group",
			robots: "user-agent: FooBot\ndisallow: /\n",
			checks: []check{{"BarBot", "/x/y", true}, {"FooBot", "/x/y", false}},
		},
		{
			name:   "star followed by text is global",
			robots: "user-agent: * # everybody\ndisallow: /a\n",
			checks: []check{{"BarBot", "/a", false}},
		},
		{
			name:   "star glued to text is not global",
			robots: "user-agent: *bot\ndisallow: /a\n",
			checks: []check{{"BarBot", "/a", true}},
		},
		{
			name:   "empty file",
			robots: "",
			checks: []check{{"FooBot", "/", true}},
		},
		{
			name:   "rules before any user-agent are ignored",
			robots: "Disallow: /\nUser-agent: *\nDisallow: /a\n",
			checks: []check{{"FooBot", "/b", true}, {"FooBot", "/a", false}},
		},
		{
			name:   "lines without colon are ignored",
			robots: "user-agent FooBot\ndisallow: /\n",
			checks: []check{{"FooBot", "/x", true}},
		},
		{
			name:   "path values are case sensitive",
			robots: "user-agent: FooBot\ndisallow: /X/\n",
			checks: []check{{"FooBot", "/x/", true}, {"FooBot", "/X/", false}},
		},
		{
			name:   "allow wins a tie",
			robots: "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/page.html\n",
			checks: []check{{"FooBot", "/x/page.html", true}},
		},
		{
			name:   "allow wins a tie regardless of order",
			robots: "user-agent: FooBot\ndisallow: /folder\nallow: /folder\n",
			checks: []check{{"FooBot", "/folder/page", true}},
		},
		{
			name:   "longest match: wildcard disallow beats shorter allow",
			robots: "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
			checks: []check{{"FooBot", "/page.html", false}, {"FooBot", "/page", true}},
		},
		{
			name:   "longest match: longer allow beats wildcard disallow",
			robots: "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
			checks: []check{{"FooBot", "/x/page.html", true}, {"FooBot", "/x/y.html", false}},
		},
		{
			name:   "longest match: anchored root",
			robots: "user-agent: FooBot\nallow: /$\ndisallow: /\n",
			checks: []check{{"FooBot", "/", true}, {"FooBot", "/page.html", false}},
		},
		{
			name:   "longest match: page inside disallowed folder",
			robots: "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
			checks: []check{{"FooBot", "/x/page.html", true}, {"FooBot", "/x/", false}, {"FooBot", "/x/other", false}},
		},
		{
			name:   "longest match: both empty",
			robots: "user-agent: FooBot\ndisallow: \nallow: \n",
			checks: []check{{"FooBot", "/", true}},
		},
		{
			name:   "same length wildcard tie goes to allow",
			robots: "user-agent: FooBot\nallow: /page\ndisallow: /*.ph\n",
			checks: []check{{"FooBot", "/page.php5", true}, {"FooBot", "/x.php", false}},
		},
		{
			name:   "wildcard in the middle",
			robots: "user-agent: FooBot\ndisallow: /foo/bar/quz\nallow: /foo/*/qux\n",
			checks: []check{
				{"FooBot", "/foo/bar/quz", false},
				{"FooBot", "/foo/quz", true},
				{"FooBot", "/foo//quz", true},
				{"FooBot", "/foo/bax/quz", true},
			},
		},
		{
			name:   "end anchor",
			robots: "user-agent: FooBot\ndisallow: /foo/bar$\nallow: /foo/bar/qux\n",
			checks: []check{
				{"FooBot", "/foo/bar", false},
				{"FooBot", "/foo/bar/qux", true},
				{"FooBot", "/foo/bar/", true},
				{"FooBot", "/foo/bar/baz", true},
				{"FooBot", "/foo/bar?x", true},
			},
		},
		{
			name: "wildcards and anchors",
			robots: "user-agent: *\ndisallow: /*.php$\ndisallow: /fish*.php\ndisallow: /a*b*c\n" +
				"disallow: /*?sessionid=\ndisallow: /**/deep$\ndisallow: /lit$eral\n",
			checks: []check{
				{"x", "/index.php", false},
				{"x", "/filename.php", false},
				{"x", "/folder/filename.php", false},
				{"x", "/filename.php?parameters", true},
				{"x", "/filename.php/", true},
				{"x", "/windows.PHP", true},
				{"x", "/fish.php", false},
				{"x", "/fishheads/catfish.php?parameters", false},
				{"x", "/Fish.PHP", true},
				{"x", "/axxbyyc", false},
				{"x", "/axxcyyb", true},
				{"x", "/acb", true},
				{"x", "/abc", false},
				{"x", "/shop?sessionid=1", false},
				{"x", "/shop?id=1", true},
				{"x", "/a/b/deep", false},
				{"x", "/a/b/deeper", true},
				{"x", "/lit$eral", false}, // "$" inside a pattern is literal
				{"x", "/lit", true},
			},
		},
		{
			name:   "comment inside a rule",
			robots: "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
			checks: []check{{"FooBot", "/foo/bar", true}, {"FooBot", "/foo/quz", false}},
		},
		{
			name:   "query string in pattern",
			robots: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
			checks: []check{
				{"FooBot", "/foo/bar?qux=taz&baz=http://foo.bar?tar&par", true},
				{"FooBot", "/foo/bar?qux=taz", false},
			},
		},
		{
			name:   "utf-8 pattern matches encoded path",
			robots: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
			checks: []check{
				{"FooBot", "/foo/bar/%E3%83%84", true},
				{"FooBot", "/foo/bar/%e3%83%84", true},
				{"FooBot", "/foo/bar/ツ", true},
				{"FooBot", "/foo/bar/baz", false},
			},
		},
		{
			name:   "encoded pattern matches utf-8 path",
			robots: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
			checks: []check{{"FooBot", "/foo/bar/ツ", true}, {"FooBot", "/foo/bar/%E3%83%84", true}},
		},
		{
			name:   "encoded unreserved characters are decoded (rfc 9309 §2.2.2)",
			robots: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\nAllow: /~joe\n",
			checks: []check{
				{"FooBot", "/foo/bar/baz", true},
				{"FooBot", "/foo/bar/%62%61%7a", true},
				{"FooBot", "/%7Ejoe/x", true},
				{"FooBot", "/%7ejoe/x", true},
			},
		},
		{
			name:   "encoded reserved characters compare equal (rfc 9309 §2.2.2)",
			robots: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?baz=https://foo.bar\n",
			checks: []check{
				{"FooBot", "/foo/bar?baz=https%3A%2F%2Ffoo.bar", true},
				{"FooBot", "/foo/bar?baz=https://foo.bar", true},
			},
		},
		{
			name:   "encoded star and dollar stay literal",
			robots: "User-agent: FooBot\nDisallow: /a%2Ab\nDisallow: /c%24\n",
			checks: []check{
				{"FooBot", "/a%2Ab", false},
				{"FooBot", "/a%2ab", false},
				{"FooBot", "/axxb", true},
				{"FooBot", "/c%24d", false},
				{"FooBot", "/c", true},
			},
		},
		{
			name:   "spaces and stray percent",
			robots: "User-agent: FooBot\nDisallow: /a b\nDisallow: /100%\n",
			checks: []check{
				{"FooBot", "/a%20b", false},
				{"FooBot", "/a b", false},
				{"FooBot", "/100%25", false},
				{"FooBot", "/100%", false},
				{"FooBot", "/100", true},
			},
		},
		{
			name:   "robots.txt is always allowed",
			robots: "User-agent: *\nDisallow: /\nDisallow: /robots.txt\n",
			checks: []check{
				{"FooBot", "/robots.txt", true},
				{"FooBot", "/robots.txt?x=1", true},
				{"FooBot", "/robots.txtx", false},
				{"FooBot", "/a/robots.txt", false},
			},
		},
		{
			name:   "full urls and odd paths",
			robots: "User-agent: *\nDisallow: /x\n",
			checks: []check{
				{"FooBot", "https://example.com/x/y?z#frag", false},
				{"FooBot", "https://example.com", true},
				{"FooBot", "https://example.com?x", true},
				{"FooBot", "", true},
				{"FooBot", "x", false},
				{"FooBot", "/y#/x", true},
			},
		},
		{
			name:   "line endings",
			robots: "User-agent: FooBot\rDisallow: /a\r\nAllow: /a/b\nUser-agent: BarBot\r\rDisallow: /c",
			checks: []check{{"FooBot", "/a", false}, {"FooBot", "/a/b", true}, {"BarBot", "/c", false}, {"BarBot", "/a", true}},
		},
		{
			name:   "byte order mark",
			robots: "\xEF\xBB\xBFUser-agent: FooBot\nDisallow: /a\n",
			checks: []check{{"FooBot", "/a", false}},
		},
		{
			name:   "whitespace around keys and values",
			robots: "  User-agent  :   FooBot  \n\tDisallow\t:\t/a\t\n",
			checks: []check{{"FooBot", "/a", false}, {"FooBot", "/b", true}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Parse([]byte(tc.robots))
			for _, c := range tc.checks {
				if got := r.Allowed(c.agent, c.path); got != c.allowed {
					t.Errorf("Allowed(%q, %q) = %v, want %v", c.agent, c.path, got, c.allowed)
				}
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/a/b?c=d", "/a/b?c=d"},
		{"/%7e%7E", "/~~"},
		{"/%3a%3A", "/::"},
		{"/%e3%83%84", "/%E3%83%84"},
		{"/ツ", "/%E3%83%84"},
		{"/a b", "/a%20b"},
		{"/%25", "/%25"},
		{"/%2a%24", "/%2A%24"},
		{"/%", "/%25"},
		{"/%g1", "/%25g1"},
		{"/%4", "/%254"},
		{"/\x00\x7f", "/%00%7F"},
		{"/%0a", "/%0A"},
	}
	for _, tc := range tests {
		if got := string(canonical(nil, tc.in)); got != tc.want {
			t.Errorf("canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(canonical(nil, string(canonical(nil, tc.in)))); got != tc.want {
			t.Errorf("canonical is not idempotent on %q: %q", tc.in, got)
		}
	}
}

func TestCrawlDelay(t *testing.T) {
	robots := "User-agent: *\nCrawl-delay: 2\n\nUser-agent: slow\nCrawl-delay: 0.5\nCrawl-delay: 9\n\n" +
		"User-agent: none\nDisallow: /x\n\nUser-agent: bad\nCrawl-delay: soon\n\nUser-agent: huge\nCrawl-delay: 1e300\n" +
		"User-agent: neg\nCrawl-delay: -1\n" +
		"User-agent: merged\nDisallow: /x\nUser-agent: merged\nCrawl-delay: 4\nUser-agent: merged\nCrawl-delay: 5\n"
	r := Parse([]byte(robots))
	tests := []struct {
		agent  string
		want   time.Duration
		wantOK bool
	}{
		{"other", 2 * time.Second, true},
		{"slow/1.0", 500 * time.Millisecond, true},
		{"none", 0, false}, // its own group has none; the "*" group's does not apply
		{"bad", 0, false},
		{"huge", 24 * time.Hour, true},
		{"neg", 0, false},
		{"merged", 4 * time.Second, true},
	}
	for _, tc := range tests {
		got, ok := r.CrawlDelay(tc.agent)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("CrawlDelay(%q) = %v, %v, want %v, %v", tc.agent, got, ok, tc.want, tc.wantOK)
		}
	}
	if _, ok := AllowAll.CrawlDelay("x"); ok {
		t.Errorf("AllowAll.CrawlDelay(%q) reported a delay", "x")
	}
}

func TestSitemaps(t *testing.T) {
	robots := "Sitemap: https://a.test/s1.xml\nUser-agent: *\nDisallow: /x\nSITEMAP:https://a.test/s2.xml # two\n" +
		"sitemap: https://a.test/s1.xml\nsitemap:\n"
	r := Parse([]byte(robots))
	want := []string{"https://a.test/s1.xml", "https://a.test/s2.xml"}
	got := r.Sitemaps()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sitemaps() mismatch (-want +got):\n%s", diff)
	}
	got[0] = "changed"
	if r.Sitemaps()[0] != want[0] {
		t.Errorf("Sitemaps() returned the internal slice")
	}
	if s := Parse(nil).Sitemaps(); s != nil {
		t.Errorf("Parse(nil).Sitemaps() = %v, want nil", s)
	}
}

func TestAllowAllDisallowAll(t *testing.T) {
	var nilRules *Rules
	tests := []struct {
		name  string
		rules *Rules
		path  string
		want  bool
	}{
		{"allow all", AllowAll, "/x", true},
		{"disallow all", DisallowAll, "/x", false},
		{"disallow all root", DisallowAll, "/", false},
		{"disallow all robots.txt", DisallowAll, "/robots.txt", true},
		{"nil rules", nilRules, "/x", true},
	}
	for _, tc := range tests {
		if got := tc.rules.Allowed("gridcrawl/1.0", tc.path); got != tc.want {
			t.Errorf("%s: Allowed(%q) = %v, want %v", tc.name, tc.path, got, tc.want)
		}
	}
}

func TestSizeLimit(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("User-agent: *\nDisallow: /early\n")
	for b.Len() < MaxSize-100 {
		b.WriteString("# padding padding padding padding padding padding\n")
	}
	b.WriteString(strings.Repeat("#", 100-len("\nDisall")))
	b.WriteString("\nDisallow: /late\n") // straddles the limit: "Disall" is inside, the rest not
	b.WriteString("Disallow: /later\n")
	r := Parse(b.Bytes())
	for _, c := range []check{{"x", "/early", false}, {"x", "/late", true}, {"x", "/later", true}} {
		if got := r.Allowed(c.agent, c.path); got != c.allowed {
			t.Errorf("Allowed(%q, %q) = %v, want %v", c.agent, c.path, got, c.allowed)
		}
	}
}

// TestManyAgentsManyRules guards against a file naming many agents in one
// group followed by many rules costing agents × rules memory.
func TestManyAgentsManyRules(t *testing.T) {
	var b bytes.Buffer
	for i := 0; b.Len() < MaxSize/2; i++ {
		fmt.Fprintf(&b, "User-agent: bot%c%c%c\n", 'a'+i%26, 'a'+i/26%26, 'a'+i/676%26)
	}
	for i := 0; b.Len() < MaxSize; i++ {
		fmt.Fprintf(&b, "Disallow: /%d\n", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := Parse(b.Bytes())
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 20<<20 {
		t.Errorf("Parse of a %d-byte file allocated %d bytes, want under 20 MiB", b.Len(), got)
	}
	if r.Allowed("botabc", "/1") || !r.Allowed("botabc", "/x") || !r.Allowed("other", "/1") {
		t.Errorf("Allowed gives wrong answers on the many-agent file")
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		path, pattern string
		want          bool
	}{
		{"/", "/", true},
		{"/abc", "/abc$", true},
		{"/abcd", "/abc$", false},
		{"/abc", "*", true},
		{"/abc", "*$", true},
		{"/abc", "/*c$", true},
		{"/abcc", "/*c$", true},
		{"/abca", "/*c$", false},
		{"/ab", "/a*b*", true},
		{"/aab", "/*ab$", true},
		{"/xaxbx", "/*a*b", true},
		{"/xbxa", "/*a*b", false},
		{"/a", "/a**$", true},
		{"/", "$", false},
		{"/ab", "/a*ab$", false},
	}
	for _, tc := range tests {
		if got := match(tc.path, tc.pattern); got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.path, tc.pattern, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(rfcExample), "foobot", "/example/page.html")
	f.Add([]byte(googleGroups), "BazBot/1.0", "/z/a?b")
	f.Add([]byte("User-agent: *\nDisallow: /*a*$\nCrawl-delay: 1.5\nSitemap: x"), "*", "/%zz%")
	f.Add([]byte("\xEF\xBB\xBFuser-agent:\x00\r\n:\n::::\nallow:%\ndisallow:$$**"), "", "")
	f.Fuzz(func(t *testing.T, body []byte, agent, path string) {
		r := Parse(body)
		got := r.Allowed(agent, path)
		if !r.Allowed(agent, "/robots.txt") {
			t.Fatalf("Allowed(%q, /robots.txt) = false", agent)
		}
		if again := r.Allowed(agent, path); again != got {
			t.Fatalf("Allowed(%q, %q) not deterministic", agent, path)
		}
		if d, ok := r.CrawlDelay(agent); ok && (d < 0 || d > maxCrawlDelay) {
			t.Fatalf("CrawlDelay(%q) = %v out of range", agent, d)
		}
		_ = r.Sitemaps()
	})
}

func benchmarkRobots() []byte {
	var b strings.Builder
	b.WriteString("User-agent: *\nCrawl-delay: 1\n")
	for i := range 60 {
		fmt.Fprintf(&b, "Disallow: /section%d/private/\nAllow: /section%d/private/public*.html$\n", i, i)
	}
	b.WriteString("Disallow: /*?sessionid=\nDisallow: /*.pdf$\n\nUser-agent: otherbot\nDisallow: /\n")
	return []byte(b.String())
}

func BenchmarkAllowed(b *testing.B) {
	r := Parse(benchmarkRobots())
	paths := []string{"/section42/private/public-page.html", "/blog/2024/03/some-article?ref=home", "/docs/%E3%83%84/manual.pdf"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Allowed("gridcrawl/1.0 (+https://gridcrawl.test/bot)", paths[i%len(paths)])
	}
}

func BenchmarkParse(b *testing.B) {
	body := benchmarkRobots()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(body)
	}
}
