package websim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// This file holds a small crawler model, written against what the site
// serves over HTTP (robots.txt text, status codes, Location headers, HTML
// parsed with golang.org/x/net/html) rather than against the page structs
// Expect reads. The tests compare the two.

// fetched is one cached HTTP answer.
type fetched struct {
	status   int
	header   http.Header
	body     []byte
	location string
}

// fetcher fetches URLs through a site's client, once each.
type fetcher struct {
	t      *testing.T
	client *http.Client
	mu     sync.Mutex
	cache  map[string]*fetched
}

func newFetcher(t *testing.T, c *http.Client) *fetcher {
	t.Cleanup(c.CloseIdleConnections)
	return &fetcher{t: t, client: c, cache: map[string]*fetched{}}
}

func (f *fetcher) get(u string) *fetched {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.cache[u]; ok {
		return r
	}
	req, err := http.NewRequestWithContext(f.t.Context(), http.MethodGet, u, nil)
	if err != nil {
		f.t.Fatalf("NewRequest(%q): %v", u, err)
	}
	req.Header.Set("User-Agent", "gridcrawl/1.0 (+test)")
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("GET %q: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("read %q: %v", u, err)
	}
	r := &fetched{status: resp.StatusCode, header: resp.Header, body: body, location: resp.Header.Get("Location")}
	f.cache[u] = r
	return r
}

// testRobots is an independent RFC 9309 reading of a robots.txt file.
type testRobots struct {
	all   bool // no file: allow all
	rules []testRule
}

type testRule struct {
	allow   bool
	pattern string
}

// parseTestRobots keeps the rules of the group naming agent, else of "*".
func parseTestRobots(status int, body []byte, agent string) testRobots {
	if status >= 400 && status < 500 {
		return testRobots{all: true}
	}
	type group struct {
		agents []string
		rules  []testRule
	}
	var groups []*group
	var cur *group
	lastWasAgent := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		switch key {
		case "user-agent":
			if !lastWasAgent {
				cur = &group{}
				groups = append(groups, cur)
			}
			cur.agents = append(cur.agents, strings.ToLower(val))
			lastWasAgent = true
		case "allow", "disallow":
			lastWasAgent = false
			if cur != nil && val != "" {
				cur.rules = append(cur.rules, testRule{key == "allow", val})
			}
		default:
			lastWasAgent = false
		}
	}
	var star, mine *group
	for _, g := range groups {
		for _, a := range g.agents {
			if a == agent {
				mine = g
			}
			if a == "*" {
				star = g
			}
		}
	}
	switch {
	case mine != nil:
		return testRobots{rules: mine.rules}
	case star != nil:
		return testRobots{rules: star.rules}
	}
	return testRobots{all: true}
}

// allowed evaluates the longest match, Allow winning ties, by turning each
// pattern into a matcher over every prefix length (quadratic, fine for tests).
func (r testRobots) allowed(path string) bool {
	if r.all {
		return true
	}
	best, allow := -1, true
	for _, rule := range r.rules {
		if !globMatch(rule.pattern, path) {
			continue
		}
		if len(rule.pattern) > best || (len(rule.pattern) == best && rule.allow) {
			best, allow = len(rule.pattern), rule.allow
		}
	}
	return allow
}

// globMatch matches a robots pattern ("*" any run, final "$" end) against a
// prefix of path, or all of it when anchored, by backtracking.
func globMatch(pattern, path string) bool {
	if pattern == "" {
		return true
	}
	if pattern == "$" {
		return path == ""
	}
	if pattern[0] == '*' {
		for i := 0; i <= len(path); i++ {
			if globMatch(pattern[1:], path[i:]) {
				return true
			}
		}
		return false
	}
	return path != "" && path[0] == pattern[0] && globMatch(pattern[1:], path[1:])
}

// parsed is what the model reads from an HTML page.
type parsed struct {
	title, description, lang, metaRobots string
	headings                             []string
	links                                []string // resolved, normalized targets of followable links
}

// parseHTML extracts the page data a crawler uses. Latin-1 bodies are decoded
// by the charset of the Content-Type.
func parseHTML(t *testing.T, pageURL string, f *fetched) parsed {
	t.Helper()
	body := f.body
	if strings.Contains(strings.ToLower(f.header.Get("Content-Type")), "iso-8859-1") {
		var b strings.Builder
		for _, c := range body {
			b.WriteRune(rune(c))
		}
		body = []byte(b.String())
	}
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("html.Parse(%q): %v", pageURL, err)
	}
	base, _ := url.Parse(pageURL)
	var p parsed
	type rawLink struct{ href, rel string }
	var raws []rawLink
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attr := func(k string) (string, bool) {
				for _, a := range n.Attr {
					if a.Key == k {
						return a.Val, true
					}
				}
				return "", false
			}
			switch n.DataAtom {
			case atom.Html:
				p.lang, _ = attr("lang")
			case atom.Title:
				p.title = textOf(n)
			case atom.Meta:
				name, _ := attr("name")
				content, _ := attr("content")
				switch strings.ToLower(name) {
				case "description":
					p.description = content
				case "robots":
					p.metaRobots = strings.ToLower(content)
				}
			case atom.Base:
				if h, ok := attr("href"); ok {
					if b, err := url.Parse(strings.TrimSpace(h)); err == nil {
						base = base.ResolveReference(b)
					}
				}
			case atom.H1, atom.H2:
				p.headings = append(p.headings, textOf(n))
			case atom.A, atom.Area:
				if h, ok := attr("href"); ok {
					rel, _ := attr("rel")
					raws = append(raws, rawLink{h, rel})
				}
			case atom.Frame, atom.Iframe:
				if s, ok := attr("src"); ok {
					raws = append(raws, rawLink{s, ""})
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for _, r := range raws {
		if strings.Contains(" "+strings.ToLower(r.rel)+" ", " nofollow ") {
			continue
		}
		ref, err := url.Parse(strings.TrimSpace(r.href))
		if err != nil {
			continue
		}
		abs := base.ResolveReference(ref)
		if abs.Scheme != "http" && abs.Scheme != "https" {
			continue
		}
		abs.Fragment, abs.RawFragment = "", ""
		abs.Host = strings.ToLower(abs.Host)
		if abs.Path == "" {
			abs.Path = "/"
		}
		p.links = append(p.links, abs.String())
	}
	return p
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

// order picks the next frontier entry to process out of n.
type order func(n int) int

// modelCrawl crawls the site like a concurrent crawler might: any
// discovered URL may be processed next (pick chooses which), depth is
// fixed when a URL is first discovered, and a redirect target keeps the
// redirecting URL's depth. It returns what it observed in Expect's shape.
func modelCrawl(t *testing.T, s *Site, f *fetcher, maxDepth int, pick order) Expect {
	t.Helper()
	e := Expect{MaxDepth: maxDepth, Depth: map[string]int{}, Docs: map[string]Doc{}, RedirectLoops: map[string]string{}}
	// from gives the URL whose redirect discovered a URL, if one did.
	from := map[string]string{}
	robots := map[string]testRobots{}
	var frontier []string
	outOfScope := map[string]bool{}
	discover := func(u string, depth int, redirectedBy string) {
		pu, _ := url.Parse(u)
		if h := pu.Hostname(); h != "example.test" && !strings.HasSuffix(h, ".example.test") {
			outOfScope[u] = true
			return
		}
		if _, ok := e.Depth[u]; ok || depth > maxDepth {
			return
		}
		e.Depth[u] = depth
		if redirectedBy != "" {
			from[u] = redirectedBy
		}
		frontier = append(frontier, u)
	}
	discover(s.StartURL(), 0, "")
	for len(frontier) > 0 {
		i := pick(len(frontier))
		cur := frontier[i]
		frontier = append(frontier[:i], frontier[i+1:]...)
		d := e.Depth[cur]
		cu, _ := url.Parse(cur)
		rb, ok := robots[cu.Host]
		if !ok {
			r := f.get("http://" + cu.Host + "/robots.txt")
			rb = parseTestRobots(r.status, r.body, "gridcrawl")
			robots[cu.Host] = rb
		}
		if !rb.allowed(cu.RequestURI()) {
			e.RobotsDenied = append(e.RobotsDenied, cur)
			continue
		}
		e.Fetched = append(e.Fetched, cur)
		r := f.get(cur)
		switch {
		case r.status >= 300 && r.status < 400:
			ref, err := url.Parse(r.location)
			if err != nil {
				t.Fatalf("GET %q: bad Location %q", cur, r.location)
			}
			target := cu.ResolveReference(ref)
			target.Fragment = ""
			// A target that redirected, by redirects, to cur closes a loop.
			n, back := 1, false
			for u := cur; u != "" && !back; u = from[u] {
				back = u == target.String()
				if !back {
					n++
				}
			}
			if back {
				e.RedirectLoops[cur] = fmt.Sprintf("redirect loop: back to %s after %d hop%s", target, n, map[bool]string{true: "s"}[n != 1])
				continue
			}
			e.Redirected = append(e.Redirected, cur)
			discover(target.String(), d, cur)
			continue
		case r.status != http.StatusOK:
			e.HTTPFailed = append(e.HTTPFailed, cur)
			continue
		}
		ct := r.header.Get("Content-Type")
		if strings.HasPrefix(ct, "text/plain") {
			e.Indexed = append(e.Indexed, cur)
			e.Docs[cur] = Doc{ContentType: ct}
			continue
		}
		p := parseHTML(t, cur, r)
		if strings.Contains(p.metaRobots, "noindex") {
			e.NoIndex = append(e.NoIndex, cur)
		} else {
			e.Indexed = append(e.Indexed, cur)
			e.Docs[cur] = Doc{ContentType: ct, Title: p.title, Description: p.description, Lang: p.lang, Headings: p.headings}
		}
		if strings.Contains(p.metaRobots, "nofollow") {
			continue
		}
		for _, l := range p.links {
			discover(l, d+1, "")
		}
	}
	e.Failed = append(append([]string(nil), e.HTTPFailed...), e.RobotsDenied...)
	for u := range e.RedirectLoops {
		e.Failed = append(e.Failed, u)
	}
	for u := range outOfScope {
		e.OutOfScope = append(e.OutOfScope, u)
	}
	return e
}
