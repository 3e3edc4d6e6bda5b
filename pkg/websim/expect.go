package websim

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Expect is the outcome a correct crawl of the test site must have: a crawl
// from StartURL with scope "domain", robots.txt obeyed and the given maximum
// depth. Every list holds normalized URLs (scheme and host lowercased, the
// non-default port kept, empty path as "/", fragment dropped, query kept as
// linked; the site links no URL whose form another canonicalizer would
// change further) and is sorted.
//
// Depth semantics: the start URL has depth 0; a link found on a page of
// depth d has depth d+1 and is dropped when d+1 exceeds the maximum depth; a
// redirect target keeps the depth of the URL that redirected to it. A
// redirect back to a URL of its own redirect chain (a loop) is not followed:
// the URL whose redirect closes the loop ends failed, saying so. The site's
// redirect chains are shorter than a crawler's redirect limit. Links are
// followed only if they are http(s) after resolution against the page URL (or
// its <base href>), in scope, not rel=nofollow, and on a 200 HTML page
// without a meta robots nofollow. Links are taken from <a href>, <area
// href>, <frame src> and <iframe src> (the site has no <img>, <link> or
// <script src>); bodies of 3xx, 4xx and 5xx answers are not parsed.
//
// The site is built so that none of this depends on the order in which a
// concurrent crawler processes pages: every URL gets the same depth whichever
// of its parents is parsed first. The package tests check it by crawling the
// site over HTTP in many orders.
type Expect struct {
	// MaxDepth is the depth the expectation was computed for.
	MaxDepth int
	// Indexed lists the URLs that end indexed (200, HTML or text/plain,
	// without meta robots noindex), each exactly once in the search index.
	Indexed []string
	// NoIndex lists pages fetched with 200 whose links are followed but
	// which ask not to be indexed (meta robots noindex): they must not be in
	// the search index. Their transaction status is whatever the crawler
	// gives a fetched page whose document is not stored.
	NoIndex []string
	// Redirected lists the URLs answering 3xx that end redirected: their
	// targets are crawled as URLs of their own (or are out of scope).
	Redirected []string
	// RedirectLoops gives the URLs answering 3xx whose target is a URL of
	// their own redirect chain (themselves, or a URL whose redirects led to
	// them), each with the reason its record ends failed with: "redirect
	// loop: back to TARGET after N hops" ("1 hop"), N the redirects of the
	// loop.
	RedirectLoops map[string]string
	// Failed lists the URLs that end failed: fetched with a 4xx or 5xx answer
	// (HTTPFailed), closing a redirect loop (RedirectLoops), or recorded but
	// refused by robots.txt (RobotsDenied).
	Failed []string
	// HTTPFailed lists the URLs fetched with a 4xx or 5xx answer.
	HTTPFailed []string
	// RobotsDenied lists in-scope URLs within MaxDepth that robots.txt
	// disallows: the crawler records them and they end failed without ever
	// being requested. They are in NeverFetched too.
	RobotsDenied []string
	// OutOfScope lists URLs of other domains that pages (or redirects)
	// point to. They get no record and are in NeverFetched.
	OutOfScope []string
	// Fetched lists every URL the crawler must request: Indexed, NoIndex,
	// Redirected, RedirectLoops and HTTPFailed. Besides robots.txt files, a crawl requests
	// nothing else.
	Fetched []string
	// NeverFetched lists URLs that must never be requested: robots-denied,
	// out of scope, nofollow-only, linked only from pages that are not
	// followed, and deeper than MaxDepth (including the calendar trap's next
	// few months).
	NeverFetched []string
	// SitemapProbes lists the start host's /sitemap.xml, which a crawl
	// with sitemaps on (gridcrawl's default) requests once and records: the
	// site answers 404, so it ends in status sitemap, not failed. It is in
	// no other list.
	SitemapProbes []string
	// Depth gives the depth of every URL the crawler records (Fetched and
	// RobotsDenied).
	Depth map[string]int
	// Docs describes every URL of Indexed as the crawler should parse it.
	Docs map[string]Doc
	// Words are words that occur on exactly one page of the site, that page
	// being in Indexed: a search for the word must find that page.
	Words []Word
	// Absent are words that occur on exactly one page of the site, that page
	// not being indexed (noindex, error, robots-denied, out of scope, not
	// followed or too deep): a search for the word must find nothing.
	Absent []Word
}

// Doc is the expected parse of an indexed page.
type Doc struct {
	// ContentType is the media type with parameters, as served.
	ContentType string
	// Title, Description and Lang come from <title>, <meta
	// name=description> and <html lang>; they are empty for text/plain.
	Title       string
	Description string
	Lang        string
	// Headings are the h1 and h2 texts in document order; H1 and H2 split
	// them by level.
	Headings []string
	H1, H2   []string
	// Text holds the page's paragraphs (or the body of a text/plain file),
	// each of which the visible text contains whitespace-collapsed.
	Text []string
	// Size is the length of the body as served.
	Size int
	// Charset is the WHATWG name of the encoding the page declares:
	// "utf-8", or "windows-1252" for a page declaring iso-8859-1 (the
	// Encoding Standard maps that label to windows-1252).
	Charset string
	// Links are the page's links written as elements (a, area, frame,
	// iframe; not those in raw HTML, nor empty or fragment-only references),
	// resolved and normalized, once each in
	// order of first appearance, with the first non-empty anchor text (a
	// and area) and Nofollow when every occurrence has rel=nofollow.
	Links []DocLink
	// Images are the page's images, resolved, once each, with the first
	// non-empty alt text.
	Images []DocLink
	// Keywords is the meta keywords with commas and runs of spaces turned
	// into single spaces; Author the meta author, whitespace collapsed.
	Keywords, Author string
	// RobotsNofollow reports a <meta name=robots> holding nofollow.
	RobotsNofollow bool
}

// DocLink is a link or image of an indexed page.
type DocLink struct {
	URL      string
	Text     string
	Nofollow bool
}

// Word is a word found on exactly one page of the site, in lowercase.
type Word struct {
	Word string
	// URL is the page whose body holds the word.
	URL string
	// Field says where the word is: "text" (body text, or the whole body of a
	// text/plain file), "title", or "anchor" (only in the text of a link on
	// URL, to Target).
	Field  string
	Target string
}

// Expect returns the outcome of a crawl to maxDepth. It is computed by a
// breadth-first walk of the site's link graph, so it follows every change to
// the site. Expect must be called after Start, since URLs carry the port.
func (s *Site) Expect(maxDepth int) Expect {
	if s.pages == nil {
		panic("websim: Site.Expect called before Start")
	}
	start, _ := url.Parse(s.StartURL())
	zone, _ := publicsuffix.EffectiveTLDPlusOne(start.Hostname())
	inScope := func(u *url.URL) bool {
		h := u.Hostname()
		return h == zone || strings.HasSuffix(h, "."+zone)
	}

	e := Expect{MaxDepth: maxDepth, Depth: map[string]int{}, Docs: map[string]Doc{}, RedirectLoops: map[string]string{},
		SitemapProbes: []string{s.URL(HostWWW, "/sitemap.xml")}}
	// via gives the URL whose redirect discovered a URL, if one did.
	via := map[string]string{}
	startURL := normalize(start)
	e.Depth[startURL] = 0
	// A deque: redirect targets keep their depth and go to the front, links
	// go to the back, so URLs leave in order of depth.
	queue := []string{startURL}
	outOfScope := map[string]bool{}
	discover := func(target string, depth int, from string) {
		tu, _ := url.Parse(target)
		if !inScope(tu) {
			outOfScope[target] = true
			return
		}
		if _, seen := e.Depth[target]; seen || depth > maxDepth {
			return
		}
		e.Depth[target] = depth
		front := from != ""
		if front {
			via[target] = from
		}
		if front {
			queue = slices.Insert(queue, 0, target)
		} else {
			queue = append(queue, target)
		}
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		d := e.Depth[cur]
		cu, _ := url.Parse(cur)
		if !s.robots[cu.Hostname()].allowed(cu.RequestURI()) {
			e.RobotsDenied = append(e.RobotsDenied, cur)
			continue
		}
		e.Fetched = append(e.Fetched, cur)
		p := s.lookup(cu)
		switch {
		case p == nil || p.code() >= 400:
			e.HTTPFailed = append(e.HTTPFailed, cur)
			continue
		case p.location != "":
			t, ok := resolveHref(cu, p.location)
			if ok {
				if n := loopLength(via, cur, t); n > 0 {
					hops := "hops"
					if n == 1 {
						hops = "hop"
					}
					e.RedirectLoops[cur] = fmt.Sprintf("redirect loop: back to %s after %d %s", t, n, hops)
					continue
				}
			}
			e.Redirected = append(e.Redirected, cur)
			if ok {
				discover(t, d, cur)
			}
			continue
		case p.noindex():
			e.NoIndex = append(e.NoIndex, cur)
		default:
			e.Indexed = append(e.Indexed, cur)
			doc := p.doc(cu)
			doc.Size = len(s.bodies[cu.Hostname()+cu.RequestURI()])
			if doc.Size == 0 && p.plain == "" {
				doc.Size = len(p.render())
			}
			e.Docs[cur] = doc
		}
		if p.nofollow() {
			continue
		}
		for _, t := range followable(cu, p) {
			discover(t, d+1, "")
		}
	}

	e.Failed = append(slices.Clone(e.HTTPFailed), e.RobotsDenied...)
	for u := range e.RedirectLoops {
		e.Failed = append(e.Failed, u)
	}
	fetched := map[string]bool{}
	for _, u := range e.Fetched {
		fetched[u] = true
	}
	never := map[string]bool{}
	for _, u := range s.universe(maxDepth + 3) {
		if !fetched[u] {
			never[u] = true
		}
	}
	for u := range outOfScope {
		never[u] = true
		e.OutOfScope = append(e.OutOfScope, u)
	}
	for _, u := range e.RobotsDenied {
		never[u] = true
	}
	for u := range never {
		e.NeverFetched = append(e.NeverFetched, u)
	}
	indexed := map[string]bool{}
	for _, u := range e.Indexed {
		indexed[u] = true
	}
	for _, w := range s.words() {
		if indexed[w.URL] {
			e.Words = append(e.Words, w)
		} else {
			e.Absent = append(e.Absent, w)
		}
	}
	for _, l := range [][]string{e.Indexed, e.NoIndex, e.Redirected, e.Failed, e.HTTPFailed, e.RobotsDenied, e.OutOfScope, e.Fetched, e.NeverFetched} {
		slices.Sort(l)
	}
	return e
}

// loopLength returns the number of redirects of the loop that the redirect
// of cur to target closes, via giving each URL the one whose redirect
// discovered it; 0 when target is not on cur's redirect chain.
func loopLength(via map[string]string, cur, target string) int {
	n := 1
	for u := cur; u != ""; u = via[u] {
		if u == target {
			return n
		}
		n++
	}
	return 0
}

// lookup returns the page at u, or nil if the site answers 404 there.
func (s *Site) lookup(u *url.URL) *page {
	host := u.Hostname()
	if p := s.pages[host+u.RequestURI()]; p != nil {
		return p
	}
	if host == HostWWW {
		if n, ok := parseCalendar(u); ok {
			return calendarPage(n)
		}
	}
	return nil
}

// followable returns the normalized targets of the links a crawler follows
// on p: none unless p is a 200 HTML page, and no rel=nofollow ones.
func followable(pageURL *url.URL, p *page) []string {
	if p.plain != "" || p.code() != http.StatusOK {
		return nil
	}
	return linkTargets(pageURL, p, false)
}

// linkTargets returns the normalized http(s) targets of p's links, in
// document order, duplicates included; rel=nofollow ones only if withNofollow.
func linkTargets(pageURL *url.URL, p *page, withNofollow bool) []string {
	base := pageURL
	if p.base != "" {
		if b, err := url.Parse(strings.TrimSpace(p.base)); err == nil {
			base = pageURL.ResolveReference(b)
		}
	}
	var out []string
	for _, l := range p.links {
		if (l.raw != "" && l.href == "") || (l.nofollow() && !withNofollow) {
			continue
		}
		if t, ok := resolveHref(base, l.href); ok {
			out = append(out, t)
		}
	}
	return out
}

// universe returns every URL the site knows of: its static pages, their link
// and redirect targets (followed or not), and calendar months 1 to months.
func (s *Site) universe(months int) []string {
	set := map[string]bool{}
	for key, p := range s.pages {
		u := s.keyURL(key)
		set[normalize(u)] = true
		if p.location != "" {
			if t, ok := resolveHref(u, p.location); ok {
				set[t] = true
			}
		}
		for _, t := range linkTargets(u, p, true) {
			set[t] = true
		}
	}
	for m := 1; m <= months; m++ {
		set[s.URL(HostWWW, calendarURI(m))] = true
	}
	out := make([]string, 0, len(set))
	for u := range set {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// keyURL turns a page key (host + request URI) into the page's URL.
func (s *Site) keyURL(key string) *url.URL {
	i := strings.IndexByte(key, '/')
	u, err := url.Parse(s.URL(key[:i], key[i:]))
	if err != nil {
		panic("websim: bad page key " + key)
	}
	return u
}

// words returns the distinctive words of every static page.
func (s *Site) words() []Word {
	var out []Word
	for key, p := range s.pages {
		u := normalize(s.keyURL(key))
		for _, w := range p.words {
			ww := Word{Word: w.word, URL: u, Field: w.field}
			if w.field == "anchor" {
				for _, l := range p.links {
					if strings.Contains(strings.ToLower(l.text), w.word) {
						ww.Target, _ = resolveHref(s.keyURL(key), l.href)
					}
				}
			}
			out = append(out, ww)
		}
	}
	slices.SortFunc(out, func(a, b Word) int { return strings.Compare(a.Word, b.Word) })
	return out
}

// doc returns the expected parse of p.
func (p *page) doc(pageURL *url.URL) Doc {
	if p.plain != "" {
		return Doc{ContentType: p.mediaType(), Text: []string{strings.Join(strings.Fields(p.plain), " ")}, Size: len(p.plain), Charset: "utf-8"}
	}
	d := Doc{
		ContentType: p.mediaType(),
		Title:       p.title,
		Description: p.description,
		Lang:        p.lang,
		Headings:    slices.Clone(p.headings),
		Text:        slices.Clone(p.text),
		Charset:     "utf-8",
		Keywords:    strings.Join(strings.FieldsFunc(p.keywords, func(r rune) bool { return r == ',' || r == ' ' }), " "),
		Author:      strings.Join(strings.Fields(p.author), " "),
	}
	if p.latin1 {
		d.Charset = "windows-1252"
	}
	if len(p.headings) > 0 {
		d.H1, d.H2 = p.headings[:1], p.headings[1:]
	}
	for _, tok := range strings.FieldsFunc(strings.ToLower(p.metaRobots), func(r rune) bool { return r == ',' || r == ' ' }) {
		d.RobotsNofollow = d.RobotsNofollow || tok == "nofollow" || tok == "none"
	}
	base := pageURL
	if p.base != "" {
		if b, err := url.Parse(strings.TrimSpace(p.base)); err == nil {
			base = pageURL.ResolveReference(b)
		}
	}
	seen := map[string]int{}
	for _, l := range p.links {
		// Empty and fragment-only references point at the page itself: a
		// crawler records no link for them.
		if h := strings.TrimSpace(l.href); l.raw != "" || h == "" || h[0] == '#' {
			continue
		}
		t, ok := resolveHref(base, l.href)
		if !ok {
			continue
		}
		text := ""
		if l.tag == "" || l.tag == "a" || l.tag == "area" {
			text = strings.Join(strings.Fields(l.text), " ")
		}
		nofollow := l.nofollow() && l.tag != "frame" && l.tag != "iframe"
		if i, ok := seen[t]; ok {
			d.Links[i].Nofollow = d.Links[i].Nofollow && nofollow
			if d.Links[i].Text == "" {
				d.Links[i].Text = text
			}
			continue
		}
		seen[t] = len(d.Links)
		d.Links = append(d.Links, DocLink{URL: t, Text: text, Nofollow: nofollow})
	}
	seen = map[string]int{}
	for _, im := range p.images {
		t, ok := resolveHref(base, im.src)
		if !ok {
			continue
		}
		if i, ok := seen[t]; ok {
			if d.Images[i].Text == "" {
				d.Images[i].Text = im.alt
			}
			continue
		}
		seen[t] = len(d.Images)
		d.Images = append(d.Images, DocLink{URL: t, Text: im.alt})
	}
	return d
}
