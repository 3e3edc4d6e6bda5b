package websim

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func startSite(t *testing.T) *Site {
	t.Helper()
	s := NewTestSite()
	if err := s.Start(); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestSiteStartTwice(t *testing.T) {
	s := startSite(t)
	if err := s.Start(); err == nil {
		t.Errorf("second Start() = nil, want an error")
	}
}

func TestSiteURLs(t *testing.T) {
	s := startSite(t)
	p := strconv.Itoa(s.Port())
	if s.Port() == 0 {
		t.Fatalf("Port() = 0 after Start")
	}
	tests := []struct{ name, got, want string }{
		{"start", s.StartURL(), "http://www.example.test:" + p + "/"},
		{"url with slash", s.URL(HostDocs, "/guide/"), "http://docs.example.test:" + p + "/guide/"},
		{"url without slash", s.URL(HostBlog, "x.html"), "http://blog.example.test:" + p + "/x.html"},
		{"resolve", s.Resolve(), "*.example.test=127.0.0.1,other.test=127.0.0.1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	for _, h := range s.Hosts() {
		if !overrideCovers(s.Resolve(), h) {
			t.Errorf("Resolve() = %q does not cover host %q", s.Resolve(), h)
		}
	}
}

// overrideCovers reports whether a "pattern=ip,..." override names host.
func overrideCovers(override, host string) bool {
	for entry := range strings.SplitSeq(override, ",") {
		pat, ip, _ := strings.Cut(entry, "=")
		if ip != "127.0.0.1" {
			continue
		}
		if pat == host || (strings.HasPrefix(pat, "*.") && strings.HasSuffix(host, pat[1:])) {
			return true
		}
	}
	return false
}

func TestExpectSane(t *testing.T) {
	s := startSite(t)
	for depth := range 8 {
		t.Run("depth="+strconv.Itoa(depth), func(t *testing.T) {
			e := s.Expect(depth)
			if !slices.Contains(e.Indexed, s.StartURL()) {
				t.Errorf("Indexed lacks the start URL %q", s.StartURL())
			}
			lists := map[string][]string{
				"Indexed": e.Indexed, "NoIndex": e.NoIndex, "Redirected": e.Redirected, "Failed": e.Failed,
				"HTTPFailed": e.HTTPFailed, "RobotsDenied": e.RobotsDenied, "OutOfScope": e.OutOfScope,
				"Fetched": e.Fetched, "NeverFetched": e.NeverFetched,
			}
			prefix := "http://"
			for name, l := range lists {
				if !slices.IsSorted(l) {
					t.Errorf("%s is not sorted", name)
				}
				if len(slices.Compact(slices.Clone(l))) != len(l) {
					t.Errorf("%s has duplicates: %q", name, l)
				}
				for _, u := range l {
					pu, err := url.Parse(u)
					if err != nil || !strings.HasPrefix(u, prefix) || pu.Port() != strconv.Itoa(s.Port()) || pu.Fragment != "" || pu.Host != strings.ToLower(pu.Host) {
						t.Errorf("%s holds %q, not a normalized site URL", name, u)
					}
				}
			}
			// Fetched is exactly the union of the fetched outcomes, which are disjoint.
			var union []string
			loops := slices.Sorted(maps.Keys(e.RedirectLoops))
			for _, l := range [][]string{e.Indexed, e.NoIndex, e.Redirected, loops, e.HTTPFailed} {
				for _, u := range l {
					if slices.Contains(union, u) {
						t.Errorf("%q has two outcomes", u)
					}
					union = append(union, u)
				}
			}
			slices.Sort(union)
			if diff := cmp.Diff(e.Fetched, union); diff != "" {
				t.Errorf("Fetched != Indexed+NoIndex+Redirected+RedirectLoops+HTTPFailed (-Fetched +union):\n%s", diff)
			}
			for _, u := range e.NeverFetched {
				if slices.Contains(e.Fetched, u) {
					t.Errorf("%q is both Fetched and NeverFetched", u)
				}
			}
			for _, l := range [][]string{e.RobotsDenied, e.OutOfScope} {
				for _, u := range l {
					if !slices.Contains(e.NeverFetched, u) {
						t.Errorf("%q is denied or out of scope but not in NeverFetched", u)
					}
				}
			}
			for _, u := range e.Failed {
				if _, loop := e.RedirectLoops[u]; !loop && !slices.Contains(e.HTTPFailed, u) && !slices.Contains(e.RobotsDenied, u) {
					t.Errorf("Failed holds %q, neither an HTTP failure, a redirect loop nor robots-denied", u)
				}
			}
			if len(e.Failed) != len(e.HTTPFailed)+len(e.RedirectLoops)+len(e.RobotsDenied) {
				t.Errorf("len(Failed) = %d, want %d", len(e.Failed), len(e.HTTPFailed)+len(e.RedirectLoops)+len(e.RobotsDenied))
			}
			if len(e.Depth) != len(e.Fetched)+len(e.RobotsDenied) {
				t.Errorf("len(Depth) = %d, want one per Fetched and RobotsDenied URL (%d)", len(e.Depth), len(e.Fetched)+len(e.RobotsDenied))
			}
			for u, d := range e.Depth {
				if d < 0 || d > depth {
					t.Errorf("Depth[%q] = %d, outside [0, %d]", u, d, depth)
				}
			}
			if got := len(e.Docs); got != len(e.Indexed) {
				t.Errorf("len(Docs) = %d, want %d", got, len(e.Indexed))
			}
			// The calendar trap is crawled exactly to the depth limit.
			for m := 1; m <= depth+3; m++ {
				u := s.URL(HostWWW, calendarURI(m))
				if in, want := slices.Contains(e.Indexed, u), m <= depth; in != want {
					t.Errorf("calendar month %d indexed = %v, want %v", m, in, want)
				}
				if never, want := slices.Contains(e.NeverFetched, u), m > depth; never != want {
					t.Errorf("calendar month %d in NeverFetched = %v, want %v", m, never, want)
				}
			}
			for _, u := range e.Fetched {
				if n, ok := parseCalendar(mustParse(t, u)); ok && n > depth {
					t.Errorf("Fetched holds calendar month %d beyond depth %d", n, depth)
				}
			}
			if len(e.Words)+len(e.Absent) != len(s.words()) {
				t.Errorf("Words+Absent = %d, want all %d words", len(e.Words)+len(e.Absent), len(s.words()))
			}
			for _, w := range e.Words {
				if !slices.Contains(e.Indexed, w.URL) {
					t.Errorf("word %q is on %q, which is not indexed", w.Word, w.URL)
				}
			}
			for _, w := range e.Absent {
				if slices.Contains(e.Indexed, w.URL) {
					t.Errorf("absent word %q is on %q, which is indexed", w.Word, w.URL)
				}
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

// TestExpectCases pins the outcome of the site's awkward cases.
func TestExpectCases(t *testing.T) {
	s := startSite(t)
	w := func(p string) string { return s.URL(HostWWW, p) }
	b := func(p string) string { return s.URL(HostBlog, p) }
	d := func(p string) string { return s.URL(HostDocs, p) }
	o := func(p string) string { return s.URL(HostOther, p) }
	tests := []struct {
		name     string
		url      string
		want2    string // outcome for max depth 2
		want4    string // outcome for max depth 4
		depthFor int    // expected depth when recorded
	}{
		{"start page", w("/"), "indexed", "indexed", 0},
		{"duplicate variants of about", w("/about.html"), "indexed", "indexed", 1},
		{"protocol-relative blog", b("/"), "indexed", "indexed", 1},
		{"robots disallow", w("/private/secret.html"), "robots", "robots", 1},
		{"robots longest-match allow", w("/private/public.html"), "indexed", "indexed", 1},
		{"robots disallow one level down", w("/private/inner/deeper.html"), "robots", "robots", 2},
		{"redirect 301", w("/old/start"), "redirected", "redirected", 1},
		{"redirect 302 relative", w("/old/middle"), "redirected", "redirected", 1},
		{"redirect target keeps depth", w("/new/end.html"), "indexed", "indexed", 1},
		{"child of redirect target", w("/new/after.html"), "indexed", "indexed", 2},
		{"redirect loop a", w("/loop/a"), "redirected", "redirected", 1},
		{"redirect loop b", w("/loop/b"), "loop", "loop", 1},
		{"redirect out of scope", w("/out"), "redirected", "redirected", 1},
		{"redirect target out of scope", o("/landing.html"), "outofscope", "outofscope", -1},
		{"out of scope host", o("/"), "outofscope", "outofscope", -1},
		{"404", w("/missing.html"), "http", "http", 1},
		{"500", w("/error.html"), "http", "http", 1},
		{"link on a 404 page", w("/from-404.html"), "never", "never", -1},
		{"link on a 500 page", w("/from-500.html"), "never", "never", -1},
		{"text/plain document", w("/files/readme.txt"), "indexed", "indexed", 1},
		{"nofollow only", w("/nofollow-only.html"), "never", "never", -1},
		{"nofollow among rel tokens", w("/nofollow-too.html"), "never", "never", -1},
		{"anchor text target", w("/glossary.html"), "indexed", "indexed", 2},
		{"whitespace around href", w("/spaced.html"), "indexed", "indexed", 2},
		{"escaped ampersand query", w("/search.html?page=2&q=alpha"), "indexed", "indexed", 2},
		{"commented-out link", w("/commented.html"), "never", "never", -1},
		{"link inside script", w("/scripted.html"), "never", "never", -1},
		{"meta noindex", w("/noindex.html"), "noindex", "noindex", 1},
		{"child of noindex page", w("/noindex-child.html"), "indexed", "indexed", 2},
		{"meta nofollow page", w("/meta-nofollow.html"), "indexed", "indexed", 1},
		{"link on meta nofollow page", w("/meta-nofollow-target.html"), "never", "never", -1},
		{"deep 2", w("/deep/2.html"), "indexed", "indexed", 2},
		{"deep 3", w("/deep/3.html"), "never", "indexed", 3},
		{"deep 4", w("/deep/4.html"), "never", "indexed", 4},
		{"deep 5", w("/deep/5.html"), "never", "never", -1},
		{"deep 8", w("/deep/8.html"), "never", "never", -1},
		{"calendar 2", w(calendarURI(2)), "indexed", "indexed", 2},
		{"calendar 5", w(calendarURI(5)), "never", "never", -1},
		{"german post", b("/2024/first-post.html"), "indexed", "indexed", 2},
		{"latin-1 post", b("/2024/koeln.html"), "indexed", "indexed", 2},
		{"iframe target", b("/embedded.html"), "never", "indexed", 4},
		{"area target", b("/area-target.html"), "never", "indexed", 4},
		{"robots dir on docs", d("/drafts/next.html"), "robots", "robots", 2},
		{"robots dir on docs, deeper", d("/drafts/old.html"), "never", "robots", 3},
		{"robots $ pattern", d("/notes.tmp"), "robots", "robots", 2},
		{"robots $ pattern does not match longer", d("/notes.tmp.html"), "indexed", "indexed", 2},
		{"frameset page", d("/frames.html"), "indexed", "indexed", 2},
		{"frame target", d("/frame-a.html"), "never", "indexed", 3},
		{"base href target", d("/guide/setup.html"), "never", "indexed", 3},
		{"reached from base and from its own directory", d("/guide/intro.html"), "never", "indexed", 3},
	}
	outcome := func(e Expect, u string) string {
		for _, c := range []struct {
			name string
			list []string
		}{
			{"indexed", e.Indexed}, {"noindex", e.NoIndex}, {"redirected", e.Redirected}, {"loop", slices.Collect(maps.Keys(e.RedirectLoops))},
			{"http", e.HTTPFailed}, {"robots", e.RobotsDenied}, {"outofscope", e.OutOfScope},
		} {
			if slices.Contains(c.list, u) {
				return c.name
			}
		}
		if slices.Contains(e.NeverFetched, u) {
			return "never"
		}
		return "unknown"
	}
	e2, e4 := s.Expect(2), s.Expect(4)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				e    Expect
				want string
			}{{e2, tt.want2}, {e4, tt.want4}} {
				if got := outcome(c.e, tt.url); got != c.want {
					t.Errorf("Expect(%d) outcome of %q = %s, want %s", c.e.MaxDepth, tt.url, got, c.want)
				}
				if d, ok := c.e.Depth[tt.url]; ok && d != tt.depthFor {
					t.Errorf("Expect(%d).Depth[%q] = %d, want %d", c.e.MaxDepth, tt.url, d, tt.depthFor)
				}
			}
		})
	}
}

// TestExpectMatchesCrawl crawls the site over real HTTP with an independent
// model (robots.txt text, Location headers, x/net/html parsing) in many
// processing orders, and checks every run gives exactly Expect. Order
// independence is what makes Expect usable against a concurrent crawler.
func TestExpectMatchesCrawl(t *testing.T) {
	s := startSite(t)
	f := newFetcher(t, s.Client())
	orders := map[string]order{
		"fifo": func(int) int { return 0 },
		"lifo": func(n int) int { return n - 1 },
	}
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		orders["random"+strconv.Itoa(seed)] = func(n int) int { return rng.IntN(n) }
	}
	opts := []cmp.Option{
		// The model crawl follows links only: it reads no sitemap.
		cmpopts.IgnoreFields(Expect{}, "NeverFetched", "Words", "Absent", "SitemapProbes"),
		// The model crawl parses what decides the crawl; TestDocs and the
		// grid tests check the rest of each Doc.
		cmpopts.IgnoreFields(Doc{}, "H1", "H2", "Text", "Size", "Charset", "Links", "Images", "Keywords", "Author", "RobotsNofollow"),
		cmpopts.SortSlices(func(a, b string) bool { return a < b }),
		cmpopts.EquateEmpty(),
	}
	for depth := range 7 {
		want := s.Expect(depth)
		for name, pick := range orders {
			got := modelCrawl(t, s, f, depth, pick)
			if diff := cmp.Diff(want, got, opts...); diff != "" {
				t.Fatalf("depth %d, order %s: Expect(%d) differs from a crawl (-Expect +crawl):\n%s", depth, name, depth, diff)
			}
		}
	}
}

// TestFetchedAnswers requests every URL of Expect over HTTP with the Host
// header and checks the answer matches the URL's outcome.
func TestFetchedAnswers(t *testing.T) {
	s := startSite(t)
	f := newFetcher(t, s.Client())
	e := s.Expect(6)
	check := func(list string, urls []string, ok func(r *fetched) bool) {
		for _, u := range urls {
			if r := f.get(u); !ok(r) {
				t.Errorf("GET %q (%s) = %d %q", u, list, r.status, r.location)
			}
		}
	}
	is200 := func(r *fetched) bool { return r.status == http.StatusOK }
	check("Indexed", e.Indexed, is200)
	check("NoIndex", e.NoIndex, is200)
	check("Redirected", e.Redirected, func(r *fetched) bool { return r.status >= 300 && r.status < 400 && r.location != "" })
	check("RedirectLoops", slices.Collect(maps.Keys(e.RedirectLoops)), func(r *fetched) bool { return r.status >= 300 && r.status < 400 && r.location != "" })
	check("HTTPFailed", e.HTTPFailed, func(r *fetched) bool { return r.status >= 400 })
	for u, doc := range e.Docs {
		if got := f.get(u).header.Get("Content-Type"); got != doc.ContentType {
			t.Errorf("GET %q Content-Type = %q, want %q", u, got, doc.ContentType)
		}
	}
	// Requests carried the Host header of each virtual host.
	hosts := map[string]bool{}
	for _, r := range s.Requests() {
		hosts[r.Host] = true
	}
	for _, h := range []string{HostWWW, HostBlog, HostDocs} {
		if !hosts[h] {
			t.Errorf("no request logged for host %q", h)
		}
	}
}

// TestRobotsText checks robots.txt as served: every RobotsDenied URL is
// disallowed by its host's file, every fetched URL allowed, and blog's file
// is missing.
func TestRobotsText(t *testing.T) {
	s := startSite(t)
	f := newFetcher(t, s.Client())
	rb := func(host string) testRobots {
		r := f.get(s.URL(host, "/robots.txt"))
		return parseTestRobots(r.status, r.body, "gridcrawl")
	}
	if r := f.get(s.URL(HostBlog, "/robots.txt")); r.status != http.StatusNotFound {
		t.Errorf("GET blog robots.txt = %d, want 404", r.status)
	}
	for _, depth := range []int{2, 4, 6} {
		e := s.Expect(depth)
		for _, u := range e.RobotsDenied {
			pu := mustParse(t, u)
			if rb(pu.Hostname()).allowed(pu.RequestURI()) {
				t.Errorf("robots.txt of %q allows %q, which Expect(%d) says is denied", pu.Hostname(), u, depth)
			}
		}
		for _, u := range e.Fetched {
			pu := mustParse(t, u)
			if !rb(pu.Hostname()).allowed(pu.RequestURI()) {
				t.Errorf("robots.txt of %q disallows %q, which Expect(%d) fetches", pu.Hostname(), u, depth)
			}
		}
	}
	text := string(f.get(s.URL(HostDocs, "/robots.txt")).body)
	if strings.Contains(strings.ToLower(text), "crawl-delay") {
		t.Errorf("docs robots.txt has a Crawl-delay, which would slow tests:\n%s", text)
	}
}

func TestRobotsMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/private/", "/private/x.html", true},
		{"/private/", "/privatex", false},
		{"/", "/anything", true},
		{"/*.tmp$", "/notes.tmp", true},
		{"/*.tmp$", "/notes.tmp.html", false},
		{"/*.tmp$", "/a/b.tmp", true},
		{"/a*b*c", "/a-b-c-d", true},
		{"/a*b*c", "/a-c-b", false},
		{"/a$", "/a", true},
		{"/a$", "/ab", false},
		{"/a*$", "/abc", true},
		{"*", "/x", true},
	}
	for _, tt := range tests {
		if got := robotsMatch(tt.pattern, tt.path); got != tt.want {
			t.Errorf("robotsMatch(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
		if got := globMatch(tt.pattern, tt.path); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func FuzzRobotsMatch(f *testing.F) {
	f.Add("/*.tmp$", "/a.tmp")
	f.Add("/a*b*c$", "/a-b-c")
	f.Add("*$", "")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if len(pattern) > 16 || len(path) > 32 {
			return
		}
		if got, want := robotsMatch(pattern, path), globMatch(pattern, path); got != want {
			t.Errorf("robotsMatch(%q, %q) = %v, want %v", pattern, path, got, want)
		}
	})
}

func TestParseCalendar(t *testing.T) {
	tests := []struct {
		uri  string
		want int
		ok   bool
	}{
		{"/calendar?month=1", 1, true},
		{"/calendar?month=42", 42, true},
		{"/calendar?month=1000000000", 1000000000, true},
		{"/calendar?month=1000000001", 0, false},
		{"/calendar?month=0", 0, false},
		{"/calendar?month=-1", 0, false},
		{"/calendar?month=01", 0, false},
		{"/calendar?month=+1", 0, false},
		{"/calendar?month=1&x=2", 0, false},
		{"/calendar?month=", 0, false},
		{"/calendar", 0, false},
		{"/calendar/?month=1", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseCalendar(mustParse(t, tt.uri))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseCalendar(%q) = %d, %v, want %d, %v", tt.uri, got, ok, tt.want, tt.ok)
		}
	}
}

// TestDocs compares the parse of every indexed HTML page with Expect.Docs.
func TestDocs(t *testing.T) {
	s := startSite(t)
	f := newFetcher(t, s.Client())
	e := s.Expect(6)
	for _, u := range e.Indexed {
		want := e.Docs[u]
		if !strings.HasPrefix(want.ContentType, "text/html") {
			continue
		}
		body := f.get(u)
		if want.Size != len(body.body) {
			t.Errorf("Docs[%q].Size = %d, served %d bytes", u, want.Size, len(body.body))
		}
		p := parseHTML(t, u, body)
		got := Doc{ContentType: want.ContentType, Title: p.title, Description: p.description, Lang: p.lang, Headings: p.headings}
		// The other fields are checked against the crawler's documents by
		// the grid tests.
		ignore := cmpopts.IgnoreFields(Doc{}, "H1", "H2", "Text", "Size", "Charset", "Links", "Images", "Keywords", "Author", "RobotsNofollow")
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), ignore); diff != "" {
			t.Errorf("Docs[%q] differs from the served page (-want +got):\n%s", u, diff)
		}
	}
	koeln := e.Docs[s.URL(HostBlog, "/2024/koeln.html")]
	if koeln.Title != "Grüße aus Köln" || koeln.Lang != "de" {
		t.Errorf("Latin-1 page doc = %+v, want title %q and lang de", koeln, "Grüße aus Köln")
	}
}

// TestWords checks that every distinctive word occurs on exactly one page of
// the whole site (error pages and unreachable pages included), in the field
// Expect names.
func TestWords(t *testing.T) {
	s := startSite(t)
	f := newFetcher(t, s.Client())
	tokens := map[string]map[string]bool{} // word -> URLs whose body holds it
	for _, u := range s.universe(10) {
		r := f.get(u)
		body := strings.ToLower(string(r.body))
		for _, tok := range strings.FieldsFunc(body, func(r rune) bool { return !unicode.IsLetter(r) }) {
			if tokens[tok] == nil {
				tokens[tok] = map[string]bool{}
			}
			tokens[tok][u] = true
		}
	}
	e := s.Expect(4)
	all := append(slices.Clone(e.Words), e.Absent...)
	if len(all) < 40 {
		t.Fatalf("only %d distinctive words", len(all))
	}
	for _, w := range all {
		if w.Word != strings.ToLower(w.Word) {
			t.Errorf("word %q is not lowercase", w.Word)
		}
		if got := tokens[w.Word]; len(got) != 1 || !got[w.URL] {
			t.Errorf("word %q occurs on %v, want only on %q", w.Word, got, w.URL)
			continue
		}
		r := f.get(w.URL)
		switch w.Field {
		case "title":
			if p := parseHTML(t, w.URL, r); !strings.Contains(strings.ToLower(p.title), w.Word) {
				t.Errorf("word %q is not in the title %q of %q", w.Word, p.title, w.URL)
			}
		case "anchor":
			if w.Target == "" || !strings.Contains(strings.ToLower(string(r.body)), ">the "+w.Word) {
				t.Errorf("anchor word %q: target %q, or not in an anchor of %q", w.Word, w.Target, w.URL)
			}
		case "text":
		default:
			t.Errorf("word %q has field %q", w.Word, w.Field)
		}
	}
}

func TestRequestsLog(t *testing.T) {
	s := startSite(t)
	c := s.Client()
	t.Cleanup(c.CloseIdleConnections)
	tests := []struct {
		name, url, method string
		status            int
	}{
		{"page", s.URL(HostWWW, "/about.html"), http.MethodGet, 200},
		{"host case and query", "http://DOCS.example.test:" + strconv.Itoa(s.Port()) + "/notes.tmp.html", http.MethodHead, 200},
		{"redirect", s.URL(HostWWW, "/loop/a"), http.MethodGet, 301},
		{"calendar", s.URL(HostWWW, calendarURI(9)), http.MethodGet, 200},
		{"unknown page", s.URL(HostBlog, "/nope"), http.MethodGet, 404},
		{"unknown host", "http://nowhere.test:" + strconv.Itoa(s.Port()) + "/", http.MethodGet, 404},
		{"post", s.URL(HostWWW, "/"), http.MethodPost, 405},
		{"robots", s.URL(HostDocs, "/robots.txt"), http.MethodGet, 200},
		{"missing robots", s.URL(HostBlog, "/robots.txt"), http.MethodGet, 404},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(t.Context(), tt.method, tt.url, nil)
		if err != nil {
			t.Fatalf("NewRequest(%q): %v", tt.url, err)
		}
		req.Header.Set("User-Agent", "ua-"+tt.name)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %q: %v", tt.method, tt.url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s %q = %d, want %d", tt.method, tt.url, resp.StatusCode, tt.status)
		}
	}
	got := s.Requests()
	if len(got) != len(tests) {
		t.Fatalf("Requests() has %d entries, want %d", len(got), len(tests))
	}
	for i, tt := range tests {
		r := got[i]
		want := strings.ToLower(tt.url)
		if r.URL != want || r.Method != tt.method || r.Status != tt.status || r.UserAgent != "ua-"+tt.name || r.End.Before(r.Start) {
			t.Errorf("Requests()[%d] = %+v, want URL %q, method %s, status %d, UA %q", i, r, want, tt.method, tt.status, "ua-"+tt.name)
		}
		if pu := mustParse(t, want); r.Host != pu.Hostname() || r.Path != pu.RequestURI() {
			t.Errorf("Requests()[%d] host, path = %q, %q, want %q, %q", i, r.Host, r.Path, pu.Hostname(), pu.RequestURI())
		}
	}
}

func TestRequestHost(t *testing.T) {
	tests := []struct{ host, want string }{
		{"www.example.test:8080", "www.example.test"},
		{"WWW.Example.Test", "www.example.test"},
		{"[::1]:80", "[::1]"},
		{"[::1]", "[::1]"},
		{"", ""},
	}
	for _, tt := range tests {
		r := &http.Request{Host: tt.host}
		if got := requestHost(r); got != tt.want {
			t.Errorf("requestHost(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

func TestResolveHref(t *testing.T) {
	base := mustParseURL("http://www.example.test:8080/dir/page.html")
	tests := []struct {
		href, want string
		ok         bool
	}{
		{"other.html", "http://www.example.test:8080/dir/other.html", true},
		{"../up.html#frag", "http://www.example.test:8080/up.html", true},
		{"  /spaced.html\n", "http://www.example.test:8080/spaced.html", true},
		{"//Blog.Example.Test:8080", "http://blog.example.test:8080/", true},
		{"HTTP://www.example.test:80/x", "http://www.example.test/x", true},
		{"?month=2", "http://www.example.test:8080/dir/page.html?month=2", true},
		{"", "http://www.example.test:8080/dir/page.html", true},
		{"mailto:a@b.test", "", false},
		{"javascript:void(0)", "", false},
		{"ftp://example.test/f", "", false},
		{"http://[bad", "", false},
	}
	for _, tt := range tests {
		got, ok := resolveHref(base, tt.href)
		if got != tt.want || ok != tt.ok {
			t.Errorf("resolveHref(%q) = %q, %v, want %q, %v", tt.href, got, ok, tt.want, tt.ok)
		}
	}
}

func mustParseURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// FuzzSiteHandler serves arbitrary hosts and request URIs: the handler must
// not panic, must answer a status the site uses, and 3xx answers must carry
// a Location.
func FuzzSiteHandler(f *testing.F) {
	s := NewTestSite()
	if err := s.Start(); err != nil {
		f.Fatalf("Start() = %v", err)
	}
	f.Cleanup(s.Close)
	f.Add("www.example.test:1", "/")
	f.Add("www.example.test", "/calendar?month=99")
	f.Add("DOCS.example.test:9", "/robots.txt")
	f.Add("blog.example.test", "/2024/koeln.html")
	f.Add("www.example.test", "/loop/a")
	f.Add("[::1]:80", "/%zz")
	f.Fuzz(func(t *testing.T, host, uri string) {
		u, err := url.ParseRequestURI(uri)
		if err != nil {
			return
		}
		r := &http.Request{Method: http.MethodGet, Host: host, URL: u, Header: http.Header{}, RequestURI: uri}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		switch rec.Code {
		case 200, 404, 500:
		case 301, 302, 308:
			if rec.Header().Get("Location") == "" {
				t.Errorf("GET %q %q = %d without Location", host, uri, rec.Code)
			}
		default:
			t.Errorf("GET %q %q = %d", host, uri, rec.Code)
		}
	})
}
