// Package extract turns fetched HTML (and plain text) into the fields of a
// search document and the page's outgoing links.
//
// It streams: the input is read once through golang.org/x/net/html's
// Tokenizer, never built into a tree and never walked recursively, so memory
// does not grow with nesting depth and is bounded by the Limits, plus at most
// MaxTokenBytes for the single largest token (a text run, a script, a tag).
// A token larger than that ends extraction early with Result.Truncated set.
//
// Decisions worth knowing:
//
//   - Text is the visible text, whitespace collapsed to single spaces. The
//     contents of script, style, noscript, template, iframe, noembed and
//     noframes are excluded, and so is the title (it has its own field).
//     Block-level tags separate words; inline tags (a, b, span, em, ...) do
//     not.
//   - Links come from a[href], area[href], frame[src], iframe[src], the URL
//     of <meta http-equiv=refresh>, and link[href] when its rel names a
//     navigable relation (alternate, canonical, next, prev, previous, first,
//     last, up, index, home, start, contents, author, help, license,
//     archives, amphtml) and no subresource (stylesheet, icon, preload,
//     prefetch, preconnect, dns-prefetch, modulepreload, manifest, pingback,
//     prerender, ...). Links inside <noscript> are kept (they are what a
//     crawler without scripts sees), and so are links inside <template>.
//   - Links are resolved with urlnorm against the page URL, or against the
//     first <base href> if it comes before the body, for links after it.
//     Empty and fragment-only references (href="", href="#top") point at the
//     page itself and are skipped, as are references that do not resolve to
//     an http or https URL.
//   - Links are deduplicated in order of first appearance. A link is
//     Nofollow only if every occurrence had rel=nofollow (on a or area); its
//     Text is the first non-empty anchor text (an image's alt counts),
//     collapsed and capped at MaxAnchorTextBytes.
//   - <meta name=robots> (only that name, case-insensitive) sets NoIndex and
//     NoFollow; "none" sets both. Several such tags add up.
//   - Language comes from <html lang> (or xml:lang), else <meta
//     http-equiv=content-language>, else <meta name=language>, lowercased
//     with '_' turned to '-'; values that are not language tags are ignored.
//   - Description is <meta name=description>, else <meta
//     property=og:description>.
//   - The character set is taken, in order, from a byte order mark, the
//     Content-Type header, or a <meta charset> / <meta http-equiv> in the
//     first 1024 bytes; undeclared input is read as UTF-8. Invalid UTF-8 is
//     replaced with U+FFFD in every returned string.
package extract

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
)

// Defaults for zero (or negative) Limits fields, and fixed caps.
const (
	DefaultMaxTextBytes = 1 << 20
	DefaultMaxLinks     = 10000
	DefaultMaxHeadings  = 200
	// DefaultMaxLinkBytes is the default of Limits.MaxLinkBytes.
	DefaultMaxLinkBytes = 1 << 20

	// MaxTokenBytes bounds the tokenizer's buffer: the largest single token
	// (text run, script or style body, tag with its attributes) it holds.
	MaxTokenBytes = 4 << 20
	// MaxTitleBytes caps Result.Title.
	MaxTitleBytes = 1024
	// MaxDescriptionBytes caps Result.Description.
	MaxDescriptionBytes = 4096
	// MaxHeadingBytes caps each entry of Result.Headings.
	MaxHeadingBytes = 1024
	// MaxAnchorTextBytes caps contracts.Link.Text and Image.Alt.
	MaxAnchorTextBytes = 200
	// MaxMetaBytes caps Result.Keywords and Result.Author.
	MaxMetaBytes = 1024
)

// Limits bounds what one extraction keeps. Zero or negative fields take the
// defaults.
type Limits struct {
	// MaxTextBytes is how much text is kept (default 1 MiB); text beyond it
	// is dropped and Result.Truncated set.
	MaxTextBytes int
	// MaxLinks is how many distinct links are kept (default 10000).
	MaxLinks int
	// MaxHeadings is how many headings are kept (default 200).
	MaxHeadings int
	// MaxImages is how many distinct images are kept (default MaxLinks).
	MaxImages int
	// MaxLinkBytes bounds the bytes of the links and images kept, counting
	// each one's URL and text (default 1 MiB). Resolving links can make them
	// far longer than the page wrote them (a long <base href> and thousands
	// of one-letter links), so callers bound this by the page's own size.
	MaxLinkBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = DefaultMaxTextBytes
	}
	if l.MaxLinks <= 0 {
		l.MaxLinks = DefaultMaxLinks
	}
	if l.MaxHeadings <= 0 {
		l.MaxHeadings = DefaultMaxHeadings
	}
	if l.MaxImages <= 0 {
		l.MaxImages = l.MaxLinks
	}
	if l.MaxLinkBytes <= 0 {
		l.MaxLinkBytes = DefaultMaxLinkBytes
	}
	return l
}

// Result holds what was extracted from one page. All strings are valid UTF-8.
type Result struct {
	// Title is the text of the first non-empty <title>.
	Title string
	// Description is the page's meta description.
	Description string
	// Language is a lowercase language tag such as "en" or "de-at", or "".
	Language string
	// Headings are the texts of h1..h6 elements in document order, and
	// HeadingLevels their levels (1 to 6) at the same positions.
	Headings      []string
	HeadingLevels []int
	// Text is the visible text, whitespace collapsed.
	Text string
	// Links are the outgoing links, absolute and normalized, deduplicated in
	// order of first appearance.
	Links []contracts.Link
	// Base is the normalized URL links were resolved against last: the
	// page URL, or the <base href> if there was one.
	Base string
	// Canonical is the resolved <link rel=canonical>, if any.
	Canonical string
	// Images are the page's images (img src), absolute and normalized,
	// deduplicated in order of first appearance, with the first non-empty
	// alt text of each.
	Images []Image
	// Keywords is <meta name=keywords>, commas and runs of spaces turned
	// into single spaces; Author is <meta name=author>.
	Keywords, Author string
	// Charset is the canonical name of the encoding the page was read in
	// ("utf-8" when none was declared).
	Charset string
	// NoIndex and NoFollow come from <meta name=robots>. With NoFollow set
	// the crawler follows none of Links.
	NoIndex, NoFollow bool
	// Robots holds the contracts.RobotsMeta* bits of every <meta
	// name=robots> directive seen (YaCy's robots_i, low byte).
	Robots int
	// Truncated reports that a limit dropped something: text, links,
	// headings, or the rest of the page after a token over MaxTokenBytes.
	Truncated bool
}

// HTML extracts a page whose character set is declared, if at all, in the
// page itself. pageURL is the URL the page was fetched from (after
// redirects). A read error ends extraction: the Result so far is returned
// with the error.
func HTML(r io.Reader, pageURL *url.URL, lim Limits) (Result, error) {
	return HTMLWithContentType(r, "", pageURL, lim)
}

// HTMLWithContentType is HTML for a page served with the Content-Type header
// value contentType, whose charset parameter, if present and known, takes
// precedence over the page's own declaration.
func HTMLWithContentType(r io.Reader, contentType string, pageURL *url.URL, lim Limits) (Result, error) {
	if pageURL == nil {
		return Result{}, errors.New("extract html: nil page url")
	}
	page, err := urlnorm.NewResolver(pageURL)
	if err != nil {
		return Result{}, fmt.Errorf("extract html: page url %q: %w", pageURL.Redacted(), err)
	}
	rd, cs, err := decodeReader(r, contentType, true)
	if err != nil {
		return Result{}, fmt.Errorf("extract html: %w", err)
	}
	e := newExtractor(page, lim.withDefaults())
	e.res.Charset = cs
	// The page's text grows in a reused buffer; finish copies it out.
	tb := textBufs.Get().(*[]byte)
	e.text.buf = (*tb)[:0]
	z := html.NewTokenizer(rd)
	z.SetMaxBuf(MaxTokenBytes)
	err = e.run(z, false)
	e.finish()
	if cap(e.text.buf) <= maxPooledText {
		*tb = e.text.buf[:0]
		textBufs.Put(tb)
	}
	if err != nil {
		return e.res, fmt.Errorf("extract html: %w", err)
	}
	return e.res, nil
}

// textBufs holds the buffers pages' text is collected in.
var textBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledText is the largest text buffer kept in textBufs.
const maxPooledText = 1 << 20

// extractor is the state of one HTML extraction. Its memory is bounded by the
// limits: no per-element stack is kept.
type extractor struct {
	lim  Limits
	res  Result
	base *urlnorm.Resolver // page URL, then the <base href>
	seen map[string]int    // link URL -> index in res.Links
	imgs map[string]int    // image URL -> index in res.Images
	// linkBytes counts the bytes of the links and images kept, against
	// lim.MaxLinkBytes.
	linkBytes int
	// longBase is the <base href> when it resolves to a URL longer than
	// urlnorm.MaxLength (base then stays the page URL): path-relative links
	// resolve against it, and are dropped when too long as well, instead
	// of resolving against the page URL to URLs the page never linked.
	longBase *url.URL
	// longDir and longPath are the lengths of longBase up to the end of
	// its directory and of its path: the least a path-relative link
	// resolves to unless it climbs with "..".
	longDir, longPath int

	baseSeen bool // the first <base href> was handled
	inBody   bool // a tag that belongs in the body was seen
	htmlSeen bool

	text    collapser
	title   collapser
	heading collapser
	anchor  collapser

	titleSeen     bool
	inHeading     bool
	headingLevel  int
	inAnchor      bool
	anchorIdx     int // index of the open anchor's link, -1 if none
	anchorsOpened int // count of anchors opened so far
	templateDepth int

	htmlLang, equivLang, metaLang string
	desc, ogDesc                  string
}

// Image is an image of a page.
type Image struct {
	URL string
	Alt string
}

func newExtractor(page *urlnorm.Resolver, lim Limits) *extractor {
	return &extractor{
		lim:       lim,
		base:      page,
		seen:      make(map[string]int),
		imgs:      make(map[string]int),
		text:      collapser{max: lim.MaxTextBytes},
		title:     collapser{max: MaxTitleBytes},
		heading:   collapser{max: MaxHeadingBytes},
		anchor:    collapser{max: MaxAnchorTextBytes},
		anchorIdx: -1,
	}
}

// run consumes z's tokens. In linksOnly mode (the content of a <noscript>,
// tokenized on its own) only links and anchor texts are collected.
func (e *extractor) run(z *html.Tokenizer, linksOnly bool) error {
	var raw atom.Atom // raw-text element whose content the next token is
	for {
		tt := z.Next()
		prevRaw := raw
		raw = 0
		switch tt {
		case html.ErrorToken:
			err := z.Err()
			switch {
			case err == io.EOF:
				return nil
			case errors.Is(err, html.ErrBufferExceeded):
				e.res.Truncated = true
				return nil
			}
			return fmt.Errorf("read html: %w", err)
		case html.TextToken:
			e.onText(z, prevRaw, linksOnly)
		case html.StartTagToken, html.SelfClosingTagToken:
			raw = e.onStart(z, linksOnly)
		case html.EndTagToken:
			e.onEnd(z, linksOnly)
		}
	}
}

func (e *extractor) onText(z *html.Tokenizer, raw atom.Atom, linksOnly bool) {
	switch raw {
	case atom.Script, atom.Style, atom.Iframe, atom.Noembed, atom.Noframes:
		return
	case atom.Noscript:
		if !linksOnly {
			opened := e.anchorsOpened
			sub := html.NewTokenizer(bytes.NewReader(z.Text()))
			sub.SetMaxBuf(MaxTokenBytes)
			_ = e.run(sub, true) // reads from memory: no error but EOF
			if e.anchorsOpened != opened {
				e.endAnchor() // an anchor opened inside ends with the noscript
			}
		}
		return
	case atom.Title:
		if !linksOnly && !e.titleSeen {
			e.title.write(z.Text())
			e.titleSeen = e.title.len() > 0
		}
		return
	}
	if linksOnly {
		if e.inAnchor {
			e.anchor.write(z.Text())
		}
		return
	}
	wantText := e.templateDepth == 0 && (!e.text.full || e.inHeading)
	if !wantText && !e.inAnchor {
		return // spare unescaping text that would be dropped
	}
	t := z.Text()
	if e.templateDepth == 0 {
		e.text.write(t)
		if e.inHeading {
			e.heading.write(t)
		}
	}
	if e.inAnchor {
		e.anchor.write(t)
	}
}

// tagAttrs holds the attributes extraction looks at, as slices into the
// tokenizer's buffer (valid until its next Next).
type tagAttrs struct {
	href, src, rel, name, content, httpEquiv, property, lang, xmlLang, alt []byte
	hasHref, hasSrc                                                        bool
}

func readAttrs(z *html.Tokenizer, hasAttr bool) tagAttrs {
	var a tagAttrs
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) {
		case "href":
			if !a.hasHref {
				a.href, a.hasHref = v, true
			}
		case "src":
			if !a.hasSrc {
				a.src, a.hasSrc = v, true
			}
		case "rel":
			a.rel = v
		case "name":
			a.name = v
		case "content":
			a.content = v
		case "http-equiv":
			a.httpEquiv = v
		case "property":
			a.property = v
		case "lang":
			a.lang = v
		case "xml:lang":
			a.xmlLang = v
		case "alt":
			a.alt = v
		}
	}
	return a
}

// onStart handles a start (or self-closing) tag and returns the tag's atom if
// the tokenizer treats its content as raw text.
func (e *extractor) onStart(z *html.Tokenizer, linksOnly bool) atom.Atom {
	name, hasAttr := z.TagName()
	a := atom.Lookup(name)
	var raw atom.Atom
	switch a {
	case atom.Iframe, atom.Noembed, atom.Noframes, atom.Noscript, atom.Plaintext,
		atom.Script, atom.Style, atom.Textarea, atom.Title, atom.Xmp:
		raw = a
	}
	if !inline[a] {
		e.boundary(linksOnly)
	}
	if !linksOnly && !headElement[a] {
		e.inBody = true
	}
	switch a {
	case atom.A:
		e.endAnchor()
		at := readAttrs(z, hasAttr)
		if at.hasHref {
			e.anchorIdx = e.addLink(at.href, "", relHas(at.rel, "nofollow"))
			e.inAnchor = true
			e.anchorsOpened++
			e.anchor.reset()
		}
	case atom.Area:
		at := readAttrs(z, hasAttr)
		if at.hasHref {
			e.addLink(at.href, collapse(at.alt, MaxAnchorTextBytes), relHas(at.rel, "nofollow"))
		}
	case atom.Link:
		at := readAttrs(z, hasAttr)
		if at.hasHref && navigableRel(at.rel) {
			idx := e.addLink(at.href, "", false)
			if e.res.Canonical == "" && relHas(at.rel, "canonical") {
				if idx >= 0 {
					e.res.Canonical = e.res.Links[idx].URL
				} else if u, ok := e.resolve(at.href); ok {
					e.res.Canonical = u
				}
			}
		}
	case atom.Frame, atom.Iframe:
		at := readAttrs(z, hasAttr)
		if at.hasSrc {
			e.addLink(at.src, "", false)
		}
	case atom.Img:
		at := readAttrs(z, hasAttr)
		if e.inAnchor {
			e.anchor.space()
			e.anchor.write(at.alt)
			e.anchor.space()
		}
		if at.hasSrc && !linksOnly && e.templateDepth == 0 {
			e.addImage(at.src, at.alt)
		}
	}
	if linksOnly {
		return raw
	}
	switch a {
	case atom.Html:
		if !e.htmlSeen {
			e.htmlSeen = true
			at := readAttrs(z, hasAttr)
			e.htmlLang = normLang(at.lang)
			if e.htmlLang == "" {
				e.htmlLang = normLang(at.xmlLang)
			}
		}
	case atom.Base:
		at := readAttrs(z, hasAttr)
		if at.hasHref && !e.baseSeen && !e.inBody {
			e.baseSeen = true
			e.setBase(at.href)
		}
	case atom.Meta:
		e.onMeta(readAttrs(z, hasAttr))
	case atom.Template:
		e.templateDepth++
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		e.endHeading()
		if e.templateDepth == 0 {
			e.inHeading = true
			e.headingLevel = int(name[1] - '0')
			e.heading.reset()
		}
	}
	return raw
}

func (e *extractor) onEnd(z *html.Tokenizer, linksOnly bool) {
	name, _ := z.TagName()
	a := atom.Lookup(name)
	if !inline[a] {
		e.boundary(linksOnly)
	}
	switch a {
	case atom.A:
		e.endAnchor()
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if !linksOnly {
			e.endHeading()
		}
	case atom.Template:
		if !linksOnly && e.templateDepth > 0 {
			e.templateDepth--
		}
	}
}

func (e *extractor) onMeta(at tagAttrs) {
	switch {
	case asciiEqualFold(at.name, "description"):
		if e.desc == "" {
			e.desc = collapse(at.content, MaxDescriptionBytes)
		}
	case asciiEqualFold(at.property, "og:description"):
		if e.ogDesc == "" {
			e.ogDesc = collapse(at.content, MaxDescriptionBytes)
		}
	case asciiEqualFold(at.name, "robots"):
		for _, f := range bytes.FieldsFunc(at.content, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' }) {
			switch {
			case asciiEqualFold(f, "all"):
				e.res.Robots |= contracts.RobotsMetaAll
			case asciiEqualFold(f, "index"):
				e.res.Robots |= contracts.RobotsMetaIndex
			case asciiEqualFold(f, "follow"):
				e.res.Robots |= contracts.RobotsMetaFollow
			case asciiEqualFold(f, "noindex"):
				e.res.NoIndex = true
				e.res.Robots |= contracts.RobotsMetaNoIndex
			case asciiEqualFold(f, "nofollow"):
				e.res.NoFollow = true
				e.res.Robots |= contracts.RobotsMetaNoFollow
			case asciiEqualFold(f, "none"):
				e.res.NoIndex, e.res.NoFollow = true, true
				e.res.Robots |= contracts.RobotsMetaNoIndex | contracts.RobotsMetaNoFollow
			case asciiEqualFold(f, "noarchive"):
				e.res.Robots |= contracts.RobotsMetaNoArchive
			}
		}
	case asciiEqualFold(at.name, "keywords"):
		if e.res.Keywords == "" {
			e.res.Keywords = collapse(bytes.ReplaceAll(at.content, []byte(","), []byte(" ")), MaxMetaBytes)
		}
	case asciiEqualFold(at.name, "author"):
		if e.res.Author == "" {
			e.res.Author = collapse(at.content, MaxMetaBytes)
		}
	case asciiEqualFold(at.name, "language"):
		if e.metaLang == "" {
			e.metaLang = normLang(at.content)
		}
	case asciiEqualFold(at.httpEquiv, "content-language"):
		if e.equivLang == "" {
			e.equivLang = normLang(at.content)
		}
	case asciiEqualFold(at.httpEquiv, "refresh"):
		if ref, ok := refreshURL(at.content); ok {
			e.addLink(ref, "", false)
		}
	}
}

// setBase makes the resolved href the base for the links that follow. An
// href that does not resolve to an http(s) URL leaves the page URL in place.
func (e *extractor) setBase(href []byte) {
	u, err := e.base.Resolve(string(href))
	if errors.Is(err, urlnorm.ErrTooLong) {
		pu, perr := url.Parse(e.base.Base())
		ref, rerr := url.Parse(strings.TrimSpace(string(href)))
		if perr == nil && rerr == nil {
			b := pu.ResolveReference(ref)
			prefix := len(b.Scheme) + len("://") + len(b.Host)
			p := b.EscapedPath()
			e.longBase, e.longDir, e.longPath = b, prefix+strings.LastIndexByte(p, '/')+1, prefix+len(p)
		}
		return
	}
	if err != nil {
		return
	}
	pu, err := url.Parse(u)
	if err != nil {
		return
	}
	if r, err := urlnorm.NewResolver(pu); err == nil {
		e.base = r
	}
}

// resolve resolves a link reference, skipping empty and fragment-only ones.
func (e *extractor) resolve(ref []byte) (string, bool) {
	i := 0
	for i < len(ref) && ref[i] <= ' ' { // C0 controls and space, as urlnorm trims
		i++
	}
	if i == len(ref) || ref[i] == '#' {
		return "", false
	}
	if e.longBase != nil {
		if rel, ok := pathRelative(ref[i:], e.longBase.Scheme); ok {
			// Most such links (thousands of "a1", "b2"...) are over the cap
			// whatever they add: drop them without building the long URL.
			least := e.longDir
			if len(rel) > 0 && rel[0] == '?' {
				least = e.longPath
			}
			if least > urlnorm.MaxLength && !bytes.Contains(rel, []byte("..")) {
				return "", false
			}
			r, err := url.Parse(string(rel))
			if err != nil {
				return "", false
			}
			u, err := urlnorm.Normalize(e.longBase.ResolveReference(r).String())
			return u, err == nil
		}
	}
	u, err := e.base.Resolve(string(ref))
	if err != nil {
		return "", false
	}
	return u, true
}

// pathRelative reports whether ref (trimmed of leading space) resolves
// against its base's path, as "a", "../a", "?q" or "http:a" under an http
// base do, and returns it without such a scheme. References with another
// scheme, or a path or authority from the root ("/a", "//h/a", "\\a"), do
// not depend on the base's path.
func pathRelative(ref []byte, baseScheme string) ([]byte, bool) {
	if len(ref) > 0 && (ref[0] == '/' || ref[0] == '\\') {
		return nil, false
	}
	for j, c := range ref {
		switch {
		case c == ':' && j > 0:
			if !strings.EqualFold(string(ref[:j]), baseScheme) {
				return nil, false
			}
			rest := ref[j+1:]
			if len(rest) > 0 && (rest[0] == '/' || rest[0] == '\\') {
				return nil, false
			}
			return rest, true
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z',
			j > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
			continue
		}
		break
	}
	return ref, true
}

// addLink resolves ref and records the link; it returns the link's index in
// res.Links, or -1 if the link was skipped or over the limit.
func (e *extractor) addLink(ref []byte, text string, nofollow bool) int {
	u, ok := e.resolve(ref)
	if !ok {
		return -1
	}
	if i, ok := e.seen[u]; ok {
		l := &e.res.Links[i]
		l.Nofollow = l.Nofollow && nofollow
		if l.Text == "" && e.spendLinkBytes(len(text)) {
			l.Text = text
		}
		return i
	}
	if len(e.res.Links) >= e.lim.MaxLinks || !e.spendLinkBytes(len(u)) {
		e.res.Truncated = true
		return -1
	}
	if !e.spendLinkBytes(len(text)) {
		text = ""
	}
	e.seen[u] = len(e.res.Links)
	e.res.Links = append(e.res.Links, contracts.Link{URL: u, Text: text, Nofollow: nofollow})
	return len(e.res.Links) - 1
}

// spendLinkBytes takes n bytes from the link budget, or reports that they
// are not left. A link is kept without its text when only its URL fits.
func (e *extractor) spendLinkBytes(n int) bool {
	if e.linkBytes+n > e.lim.MaxLinkBytes {
		return false
	}
	e.linkBytes += n
	return true
}

func (e *extractor) endAnchor() {
	if !e.inAnchor {
		return
	}
	e.inAnchor = false
	if e.anchorIdx >= 0 && e.res.Links[e.anchorIdx].Text == "" {
		if t := e.anchor.String(); e.spendLinkBytes(len(t)) {
			e.res.Links[e.anchorIdx].Text = t
		}
	}
	e.anchorIdx = -1
}

func (e *extractor) endHeading() {
	if !e.inHeading {
		return
	}
	e.inHeading = false
	if e.heading.len() == 0 {
		return
	}
	if len(e.res.Headings) >= e.lim.MaxHeadings {
		e.res.Truncated = true
		return
	}
	e.res.Headings = append(e.res.Headings, e.heading.String())
	e.res.HeadingLevels = append(e.res.HeadingLevels, e.headingLevel)
}

// addImage resolves an img src and records the image, with its alt text
// unless an earlier occurrence had one.
func (e *extractor) addImage(src, alt []byte) {
	u, ok := e.resolve(src)
	if !ok {
		return
	}
	if i, ok := e.imgs[u]; ok {
		if e.res.Images[i].Alt == "" {
			if a := collapse(alt, MaxAnchorTextBytes); e.spendLinkBytes(len(a)) {
				e.res.Images[i].Alt = a
			}
		}
		return
	}
	if len(e.res.Images) >= e.lim.MaxImages || !e.spendLinkBytes(len(u)) {
		e.res.Truncated = true
		return
	}
	a := collapse(alt, MaxAnchorTextBytes)
	if !e.spendLinkBytes(len(a)) {
		a = ""
	}
	e.imgs[u] = len(e.res.Images)
	e.res.Images = append(e.res.Images, Image{URL: u, Alt: a})
}

// boundary separates words at a block-level tag. Inside a <noscript> only
// anchor text is being collected.
func (e *extractor) boundary(linksOnly bool) {
	e.anchor.space()
	if !linksOnly {
		e.text.space()
		e.heading.space()
	}
}

func (e *extractor) finish() {
	e.endAnchor()
	e.endHeading()
	e.res.Title = e.title.String()
	e.res.Text = e.text.String()
	if e.text.full {
		e.res.Truncated = true
	}
	e.res.Description = e.desc
	if e.res.Description == "" {
		e.res.Description = e.ogDesc
	}
	switch {
	case e.htmlLang != "":
		e.res.Language = e.htmlLang
	case e.equivLang != "":
		e.res.Language = e.equivLang
	default:
		e.res.Language = e.metaLang
	}
	e.res.Base = e.base.Base()
}

// inline lists the elements that do not separate words: inline formatting,
// and the elements that are not rendered at all.
var inline = atomSet(atom.A, atom.Abbr, atom.Acronym, atom.B, atom.Bdi, atom.Bdo, atom.Big,
	atom.Cite, atom.Code, atom.Data, atom.Del, atom.Dfn, atom.Em, atom.Font, atom.I, atom.Img,
	atom.Ins, atom.Kbd, atom.Label, atom.Mark, atom.Nobr, atom.Q, atom.S, atom.Samp, atom.Small,
	atom.Span, atom.Strike, atom.Strong, atom.Sub, atom.Sup, atom.Time, atom.Tt, atom.U,
	atom.Var, atom.Wbr, atom.Script, atom.Style, atom.Noscript, atom.Template)

// headElement lists the elements that may come before the body; any other
// start tag means the head is over (for <base>).
var headElement = atomSet(atom.Html, atom.Head, atom.Title, atom.Meta, atom.Link, atom.Style,
	atom.Script, atom.Noscript, atom.Base, atom.Template)

func atomSet(as ...atom.Atom) map[atom.Atom]bool {
	m := make(map[atom.Atom]bool, len(as))
	for _, a := range as {
		m[a] = true
	}
	return m
}

// Link relations that make a <link> worth following, and those that mark it
// as a subresource of the page whatever else it says.
var (
	navigableRels = []string{"alternate", "amphtml", "archives", "author", "canonical", "contents",
		"first", "help", "home", "index", "last", "license", "next", "prev", "previous", "start", "up"}
	resourceRels = []string{"apple-touch-icon", "apple-touch-icon-precomposed", "dns-prefetch",
		"icon", "manifest", "mask-icon", "modulepreload", "pingback", "preconnect", "prefetch",
		"preload", "prerender", "stylesheet", "edituri", "wlwmanifest", "webmention"}
)

func navigableRel(rel []byte) bool {
	nav := false
	for _, f := range bytes.Fields(rel) {
		for _, r := range resourceRels {
			if asciiEqualFold(f, r) {
				return false
			}
		}
		for _, r := range navigableRels {
			if asciiEqualFold(f, r) {
				nav = true
			}
		}
	}
	return nav
}

// relHas reports whether the space-separated rel list contains token.
func relHas(rel []byte, token string) bool {
	for _, f := range bytes.Fields(rel) {
		if asciiEqualFold(f, token) {
			return true
		}
	}
	return false
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// refreshURL returns the URL of a meta refresh content value such as
// "5; url='/next'".
func refreshURL(content []byte) ([]byte, bool) {
	i := bytes.IndexAny(content, ";,")
	if i < 0 {
		return nil, false
	}
	s := bytes.TrimSpace(content[i+1:])
	if len(s) >= 3 && asciiEqualFold(s[:3], "url") {
		rest := bytes.TrimSpace(s[3:])
		if len(rest) > 0 && rest[0] == '=' {
			s = bytes.TrimSpace(rest[1:])
		}
	}
	if len(s) > 0 && (s[0] == '\'' || s[0] == '"') {
		q := s[0]
		s = s[1:]
		if j := bytes.IndexByte(s, q); j >= 0 {
			s = s[:j]
		}
	}
	return s, len(s) > 0
}

// normLang returns the lowercase language tag in s ("en-US" -> "en-us";
// "de_AT" -> "de-at"; the first of a comma-separated list), or "" if s holds
// none.
func normLang(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if i := strings.IndexAny(s, ",;"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.ToLower(strings.ReplaceAll(s, "_", "-"))
	if s == "" || len(s) > 35 {
		return ""
	}
	for i, part := range strings.Split(s, "-") {
		if part == "" || len(part) > 8 || i == 0 && len(part) < 2 {
			return ""
		}
		for j := 0; j < len(part); j++ {
			c := part[j]
			if !('a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
				return ""
			}
		}
	}
	return s
}
