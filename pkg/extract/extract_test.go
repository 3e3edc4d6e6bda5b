package extract

import (
	"io"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
)

const pageURL = "http://www.example.test/dir/page.html"

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", s, err)
	}
	return u
}

type links = []contracts.Link

func l(u, text string) contracts.Link { return contracts.Link{URL: u, Text: text} }

func nf(u, text string) contracts.Link { return contracts.Link{URL: u, Text: text, Nofollow: true} }

// Each case extracts html (with default limits unless lim is set) and
// compares one field of the Result.
func TestHTML(t *testing.T) {
	tests := []struct {
		name  string
		html  string
		field string
		want  any
		lim   Limits
	}{
		// Title.
		{"title", `<title>Hello</title>`, "Title", "Hello", Limits{}},
		{"title entities and whitespace", "<title>\n  Fish &amp;\tChips &lt;3  </title>", "Title", "Fish & Chips <3", Limits{}},
		{"title first wins", `<title>One</title><title>Two</title>`, "Title", "One", Limits{}},
		{"title empty then next", `<title> </title><title>Two</title>`, "Title", "Two", Limits{}},
		{"title markup is text", `<title>a <b>b</b></title>`, "Title", "a <b>b</b>", Limits{}},
		{"title missing", `<p>no title</p>`, "Title", "", Limits{}},
		{"title not in text", `<title>T</title><p>body</p>`, "Text", "body", Limits{}},
		{"title capped", `<title>` + strings.Repeat("x", 2000) + `</title>`, "Title", strings.Repeat("x", MaxTitleBytes), Limits{}},
		// Description.
		{"description", `<meta name="description" content=" A  short
			page. ">`, "Description", "A short page.", Limits{}},
		{"description name case", `<meta NAME="Description" CONTENT="x">`, "Description", "x", Limits{}},
		{"description first wins", `<meta name=description content=a><meta name=description content=b>`, "Description", "a", Limits{}},
		{"description og fallback", `<meta property="og:description" content="og">`, "Description", "og", Limits{}},
		{"description name beats og", `<meta property="og:description" content="og"><meta name=description content=d>`, "Description", "d", Limits{}},
		// Language.
		{"lang html", `<html lang="en"><p>x`, "Language", "en", Limits{}},
		{"lang html region", `<html lang="de-AT">`, "Language", "de-at", Limits{}},
		{"lang underscore", `<html lang="pt_BR">`, "Language", "pt-br", Limits{}},
		{"lang xml:lang", `<html xml:lang="fr">`, "Language", "fr", Limits{}},
		{"lang http-equiv", `<meta http-equiv="Content-Language" content="fr, en">`, "Language", "fr", Limits{}},
		{"lang meta name", `<meta name="language" content="NL">`, "Language", "nl", Limits{}},
		{"lang html beats meta", `<html lang=it><meta http-equiv=content-language content=fr>`, "Language", "it", Limits{}},
		{"lang http-equiv beats name", `<meta name=language content=nl><meta http-equiv=content-language content=fr>`, "Language", "fr", Limits{}},
		{"lang invalid falls back", `<html lang="x"><meta name=language content=de>`, "Language", "de", Limits{}},
		{"lang garbage", `<html lang="english please">`, "Language", "", Limits{}},
		{"lang none", `<p>x`, "Language", "", Limits{}},
		// Headings.
		{"headings in order", `<h2>Two</h2><p>x</p><h1>One</h1><h6>Six</h6>`, "Headings", []string{"Two", "One", "Six"}, Limits{}},
		{"heading inline markup", `<h1>Main <em>big</em>  title</h1>`, "Headings", []string{"Main big title"}, Limits{}},
		{"heading empty skipped", `<h1> </h1><h2>x</h2>`, "Headings", []string{"x"}, Limits{}},
		{"heading unclosed", `<h1>a<h2>b</h2>`, "Headings", []string{"a", "b"}, Limits{}},
		{"heading at eof", `<h3>last`, "Headings", []string{"last"}, Limits{}},
		{"heading script excluded", `<h1>a<script>x</script>b</h1>`, "Headings", []string{"ab"}, Limits{}},
		{"heading in template skipped", `<template><h1>t</h1></template><h1>r</h1>`, "Headings", []string{"r"}, Limits{}},
		{"heading also in text", `<h1>Head</h1><p>body</p>`, "Text", "Head body", Limits{}},
		{"heading levels", `<h3>c</h3><h1>a</h1><h6>f</h6><h2> </h2>`, "HeadingLevels", []int{3, 1, 6}, Limits{}},
		{"robots none bits", `<meta name="robots" content="none">`, "Robots", contracts.RobotsMetaNoIndex | contracts.RobotsMetaNoFollow, Limits{}},
		{"robots all bit", `<meta name="ROBOTS" content="all">`, "Robots", contracts.RobotsMetaAll, Limits{}},
		{"images limit", `<img src="a.png"><img src="b.png"><img src="c.png">`, "Images", []Image{{URL: "http://www.example.test/dir/a.png"}, {URL: "http://www.example.test/dir/b.png"}}, Limits{MaxImages: 2}},
		{"images limit truncates", `<img src="a.png"><img src="b.png"><img src="c.png">`, "Truncated", true, Limits{MaxImages: 2}},
		{"image in template skipped", `<template><img src="t.png"></template>`, "Images", []Image(nil), Limits{}},
		{"image without src skipped", `<img alt="x"><img src="">`, "Images", []Image(nil), Limits{}},
		{"meta charset reported", `<meta charset="iso-8859-1"><p>x`, "Charset", "windows-1252", Limits{}},
		{"headings limit", `<h1>a</h1><h1>b</h1><h1>c</h1>`, "Headings", []string{"a", "b"}, Limits{MaxHeadings: 2}},
		{"headings limit truncates", `<h1>a</h1><h1>b</h1><h1>c</h1>`, "Truncated", true, Limits{MaxHeadings: 2}},
		// Text.
		{"text collapsed", "<p>  a \n\t b  </p>  <p>c&nbsp;&nbsp;d</p>", "Text", "a b c d", Limits{}},
		{"text blocks separate words", `<div>a</div><div>b</div><li>c<br>d<td>e`, "Text", "a b c d e", Limits{}},
		{"text inline joins", `un<b>believ</b><i>able</i> <a href=x>link</a>s`, "Text", "unbelievable links", Limits{}},
		{"text script excluded", `a<script>var s = "<p>no</p>";</script>b`, "Text", "ab", Limits{}},
		{"text script with comment", `a<script><!-- document.write("</p>") --></script>b`, "Text", "ab", Limits{}},
		{"text style excluded", `a<style>p { color: red }</style> b`, "Text", "a b", Limits{}},
		{"text noscript excluded", `a <noscript>enable js</noscript> b`, "Text", "a b", Limits{}},
		{"text template excluded", `a <template><p>t <template>tt</template> t</p></template> b`, "Text", "a b", Limits{}},
		{"text iframe fallback excluded", `a <iframe src=/f>no frames</iframe> b`, "Text", "a b", Limits{}},
		{"text comments excluded", `a <!-- hidden --> b`, "Text", "a b", Limits{}},
		{"text textarea kept", `<textarea>typed &lt;text&gt;</textarea>`, "Text", "typed <text>", Limits{}},
		{"text entities", `caf&eacute; &#x263A; &amp;`, "Text", "café ☺ &", Limits{}},
		{"text limit", `<p>aaaa bbbb cccc</p>`, "Text", "aaaa bbbb", Limits{MaxTextBytes: 12}},
		{"text limit truncates", `<p>aaaa bbbb cccc</p>`, "Truncated", true, Limits{MaxTextBytes: 12}},
		{"text limit not hit", `<p>aaaa bbbb</p>`, "Truncated", false, Limits{MaxTextBytes: 9}},
		{"text limit utf-8 boundary", `<p>ääää</p>`, "Text", "ää", Limits{MaxTextBytes: 5}},
		// Meta robots.
		{"robots noindex", `<meta name="robots" content="noindex">`, "NoIndex", true, Limits{}},
		{"robots noindex only", `<meta name="robots" content="noindex">`, "NoFollow", false, Limits{}},
		{"robots nofollow", `<meta name="ROBOTS" content="index, NOFOLLOW">`, "NoFollow", true, Limits{}},
		{"robots none index", `<meta name="robots" content="none">`, "NoIndex", true, Limits{}},
		{"robots none follow", `<meta name="robots" content="none">`, "NoFollow", true, Limits{}},
		{"robots two tags", `<meta name=robots content=noindex><meta name=robots content=nofollow>`, "NoFollow", true, Limits{}},
		{"robots googlebot ignored", `<meta name="googlebot" content="noindex,nofollow">`, "NoIndex", false, Limits{}},
		{"robots in body still counts", `<p>x<meta name=robots content=noindex>`, "NoIndex", true, Limits{}},
		{"robots links kept with nofollow", `<meta name=robots content=nofollow><a href=a>A</a>`, "Links", links{l("http://www.example.test/dir/a", "A")}, Limits{}},
		// Links: resolution.
		{"link relative", `<a href="a.html">A</a>`, "Links", links{l("http://www.example.test/dir/a.html", "A")}, Limits{}},
		{"link root relative", `<a href="/x?b=2&amp;a=1">X</a>`, "Links", links{l("http://www.example.test/x?b=2&a=1", "X")}, Limits{}},
		{"link parent", `<a href="../up">U</a>`, "Links", links{l("http://www.example.test/up", "U")}, Limits{}},
		{"link protocol-relative", `<a href="//cdn.example.test/p">P</a>`, "Links", links{l("http://cdn.example.test/p", "P")}, Limits{}},
		{"link absolute normalized", `<a href="HTTPS://Other.TEST:443/a/./b#frag">O</a>`, "Links", links{l("https://other.test/a/b", "O")}, Limits{}},
		{"link whitespace", "<a href=\"\n\t  next.html  \n\">N</a>", "Links", links{l("http://www.example.test/dir/next.html", "N")}, Limits{}},
		{"link newline inside", "<a href=\"ne\nxt.html\">N</a>", "Links", links{l("http://www.example.test/dir/next.html", "N")}, Limits{}},
		{"link backslashes", `<a href="\\cdn.example.test\p">P</a>`, "Links", links{l("http://cdn.example.test/p", "P")}, Limits{}},
		{"link javascript skipped", `<a href="javascript:void(0)">J</a><a href=" JavaScript:x">J</a>`, "Links", links(nil), Limits{}},
		{"link other schemes skipped", `<a href="mailto:a@b.test">M</a><a href="tel:+1">T</a><a href="data:text/html,x">D</a><a href="ftp://f.test/">F</a>`, "Links", links(nil), Limits{}},
		{"link fragment only skipped", `<a href="#top">T</a><a href="">E</a><a href=" ">S</a>`, "Links", links(nil), Limits{}},
		{"link with fragment kept", `<a href="other.html#part">O</a>`, "Links", links{l("http://www.example.test/dir/other.html", "O")}, Limits{}},
		{"link bad host skipped", `<a href="http://exa mple.test/">B</a><a href="http://[::1/">B</a><a href=ok>K</a>`, "Links", links{l("http://www.example.test/dir/ok", "K")}, Limits{}},
		{"link no href", `<a name="x">anchor</a>`, "Links", links(nil), Limits{}},
		// Links: base href.
		{"base href", `<head><base href="http://base.test/b/"></head><a href="x">X</a>`, "Links", links{l("http://base.test/b/x", "X")}, Limits{}},
		{"base href relative", `<base href="/root/"><a href="x">X</a>`, "Links", links{l("http://www.example.test/root/x", "X")}, Limits{}},
		{"base href reported", `<base href="/root/">`, "Base", "http://www.example.test/root/", Limits{}},
		{"base default is page", `<p>x`, "Base", pageURL, Limits{}},
		{"base href only after", `<link rel=next href=n><base href="/root/"><a href="x">X</a>`, "Links", links{l("http://www.example.test/dir/n", ""), l("http://www.example.test/root/x", "X")}, Limits{}},
		{"base first wins", `<base href="/one/"><base href="/two/"><a href="x">X</a>`, "Links", links{l("http://www.example.test/one/x", "X")}, Limits{}},
		{"base without href skipped", `<base target="_blank"><base href="/two/"><a href="x">X</a>`, "Links", links{l("http://www.example.test/two/x", "X")}, Limits{}},
		{"base in body ignored", `<body><base href="/b/"><a href="x">X</a>`, "Links", links{l("http://www.example.test/dir/x", "X")}, Limits{}},
		{"base javascript ignored", `<base href="javascript:x"><a href="x">X</a>`, "Links", links{l("http://www.example.test/dir/x", "X")}, Limits{}},
		// Links: nofollow.
		{"nofollow on a", `<a href="a" rel="nofollow">A</a><a href="b" rel="external NoFollow">B</a>`, "Links", links{nf("http://www.example.test/dir/a", "A"), nf("http://www.example.test/dir/b", "B")}, Limits{}},
		{"nofollow on area", `<area href="a" rel="nofollow" alt="A">`, "Links", links{nf("http://www.example.test/dir/a", "A")}, Limits{}},
		{"nofollow and follow merge", `<a href="a" rel="nofollow">A</a><a href="a">A2</a>`, "Links", links{l("http://www.example.test/dir/a", "A")}, Limits{}},
		{"nofollow twice stays", `<a href="a" rel="nofollow">A</a><a href="a" rel=nofollow>A2</a>`, "Links", links{nf("http://www.example.test/dir/a", "A")}, Limits{}},
		{"meta nofollow not per link", `<meta name=robots content=nofollow><a href=a>A</a>`, "NoFollow", true, Limits{}},
		// Links: other elements.
		{"area", `<map><area href="/m" alt=" Map  area "></map>`, "Links", links{l("http://www.example.test/m", "Map area")}, Limits{}},
		{"frame", `<frameset><frame src="f1.html"><frame src="/f2.html"></frameset>`, "Links", links{l("http://www.example.test/dir/f1.html", ""), l("http://www.example.test/f2.html", "")}, Limits{}},
		{"iframe", `<iframe src="/embed"><a href="/inside">no</a></iframe>`, "Links", links{l("http://www.example.test/embed", "")}, Limits{}},
		{"link navigable rels", `<link rel=next href=n><link rel=prev href=p><link rel="alternate" hreflang=de href=/de/><link rel=canonical href=c>`, "Links", links{l("http://www.example.test/dir/n", ""), l("http://www.example.test/dir/p", ""), l("http://www.example.test/de/", ""), l("http://www.example.test/dir/c", "")}, Limits{}},
		{"link resource rels skipped", `<link rel=stylesheet href=s.css><link rel="shortcut icon" href=i.ico><link rel=preload href=p.js><link rel="alternate stylesheet" href=a.css><link rel=dns-prefetch href=//d.test><link rel=manifest href=m.json><link href=norel>`, "Links", links(nil), Limits{}},
		{"canonical", `<link rel="canonical" href="/canon?id=1#x">`, "Canonical", "http://www.example.test/canon?id=1", Limits{}},
		{"canonical first wins", `<link rel=canonical href=/a><link rel=canonical href=/b>`, "Canonical", "http://www.example.test/a", Limits{}},
		{"canonical javascript ignored", `<link rel=canonical href="javascript:x">`, "Canonical", "", Limits{}},
		{"canonical over link limit", `<a href=/x>x</a><link rel=canonical href=/c>`, "Canonical", "http://www.example.test/c", Limits{MaxLinks: 1}},
		{"meta refresh", `<meta http-equiv="refresh" content="5; URL='/moved?x=1'">`, "Links", links{l("http://www.example.test/moved?x=1", "")}, Limits{}},
		{"meta refresh no url", `<meta http-equiv="refresh" content="30">`, "Links", links(nil), Limits{}},
		{"noscript links kept", `<noscript><a href="/ns">No <b>script</b></a><img src=x></noscript><a href=/after>After</a>`, "Links", links{l("http://www.example.test/ns", "No script"), l("http://www.example.test/after", "After")}, Limits{}},
		{"noscript inside anchor", `<a href=/a>before <noscript><img alt=pic></noscript> after</a>`, "Links", links{l("http://www.example.test/a", "before pic after")}, Limits{}},
		{"noscript anchor ends with it", `<noscript><a href=/n>n</noscript> outside`, "Links", links{l("http://www.example.test/n", "n")}, Limits{}},
		{"noscript with tags joins no words", `a<noscript><p>x</p></noscript>b`, "Text", "ab", Limits{}},
		{"template links kept", `<template><a href="/t">T</a></template>`, "Links", links{l("http://www.example.test/t", "T")}, Limits{}},
		{"script links ignored", `<script>document.write('<a href="/js">x</a>')</script>`, "Links", links(nil), Limits{}},
		// Links: anchor text and dedupe.
		{"anchor text collapsed", "<a href=a>\n  Some <b>bold</b>\n text </a>", "Links", links{l("http://www.example.test/dir/a", "Some bold text")}, Limits{}},
		{"anchor text blocks", `<a href=a><div>one</div><div>two</div></a>`, "Links", links{l("http://www.example.test/dir/a", "one two")}, Limits{}},
		{"anchor text img alt", `<a href=a><img src=i.png alt="Logo"></a>`, "Links", links{l("http://www.example.test/dir/a", "Logo")}, Limits{}},
		{"anchor text capped", `<a href=a>` + strings.Repeat("word ", 100) + `</a>`, "Links", links{l("http://www.example.test/dir/a", strings.TrimSpace(strings.Repeat("word ", 40)))}, Limits{}},
		{"anchor unclosed closed by next", `<a href=a>A<a href=b>B`, "Links", links{l("http://www.example.test/dir/a", "A"), l("http://www.example.test/dir/b", "B")}, Limits{}},
		{"dedupe first order", `<a href=b>B</a><a href=a>A</a><a href="./b">B2</a><a href="http://WWW.example.test/dir/a#x">A2</a>`, "Links", links{l("http://www.example.test/dir/b", "B"), l("http://www.example.test/dir/a", "A")}, Limits{}},
		{"dedupe fills empty text", `<link rel=next href=n><a href=n>Next</a>`, "Links", links{l("http://www.example.test/dir/n", "Next")}, Limits{}},
		{"links limit", `<a href=a>A</a><a href=b>B</a><a href=a>A</a><a href=c>C</a>`, "Links", links{l("http://www.example.test/dir/a", "A"), l("http://www.example.test/dir/b", "B")}, Limits{MaxLinks: 2}},
		{"links limit truncates", `<a href=a>A</a><a href=b>B</a><a href=c>C</a>`, "Truncated", true, Limits{MaxLinks: 2}},
		{"link bytes: kept without text, then dropped", `<a href=a>A</a><a href=b>BB</a><a href=c>C</a>`, "Links", links{l("http://www.example.test/dir/a", "A"), l("http://www.example.test/dir/b", "")}, Limits{MaxLinkBytes: 60}},
		{"link bytes truncate", `<a href=a>A</a><a href=b>BB</a><a href=c>C</a>`, "Truncated", true, Limits{MaxLinkBytes: 60}},
		// A <base href> over the URL cap: links relative to its path would be
		// over the cap too and are dropped; they are not resolved against the
		// page URL instead (5,000 one-letter links became 5,000 URLs the page
		// never linked, each fetched). Links from the root still resolve.
		{"over-long base drops path-relative links", `<base href="/` + strings.Repeat("p", 3000) + `/"><a href=a>A</a><a href="?q">Q</a><a href="http:z">Z</a><a href="/root">R</a><a href="\back">B</a><a href="//h.test/y">H</a><a href="HTTPS://o.test/x">O</a>`,
			"Links", links{l("http://www.example.test/root", "R"), l("http://www.example.test/back", "B"), l("http://h.test/y", "H"), l("https://o.test/x", "O")}, Limits{}},
		{"over-long base: dot segments back under the cap", `<base href="/` + strings.Repeat("p", 3000) + `/q/"><a href="../../short">S</a><img src="i.png">`,
			"Links", links{l("http://www.example.test/short", "S")}, Limits{}},
		{"over-long base: images dropped too", `<base href="/` + strings.Repeat("p", 3000) + `/"><img src="i.png" alt=x><img src="/j.png" alt=y>`,
			"Images", []Image{{URL: "http://www.example.test/j.png", Alt: "y"}}, Limits{}},
		{"over-long base in its last segment: its directory still resolves", `<base href="/short/` + strings.Repeat("p", 3000) + `"><a href=a>A</a><a href="?q">Q</a>`,
			"Links", links{l("http://www.example.test/short/a", "A")}, Limits{}},
		{"over-long base not reported", `<base href="/` + strings.Repeat("p", 3000) + `/">`, "Base", pageURL, Limits{}},
		{"link bytes: a long base makes few links", `<base href="/` + strings.Repeat("p", 1000) + `/"><a href=a>A</a><a href=b>B</a><a href=c>C</a>`, "Links", links{l("http://www.example.test/"+strings.Repeat("p", 1000)+"/a", "A")}, Limits{MaxLinkBytes: 1500}},
		{"links limit dups do not truncate", `<a href=a>A</a><a href=b>B</a><a href=a>A</a>`, "Truncated", false, Limits{MaxLinks: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := HTML(strings.NewReader(tt.html), mustURL(t, pageURL), tt.lim)
			if err != nil {
				t.Fatalf("HTML(%q): %v", tt.html, err)
			}
			got := reflect.ValueOf(res).FieldByName(tt.field).Interface()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("HTML(%q).%s = %#v, want %#v (-want +got):\n%s", tt.html, tt.field, got, tt.want, diff)
			}
		})
	}
}

func TestHTMLWholeResult(t *testing.T) {
	page := `<!DOCTYPE html>
<html lang="en-GB">
<head>
  <meta charset="utf-8">
  <title>Gridcrawl &ndash; test page</title>
  <meta name="description" content="A page for tests.">
  <meta name="keywords" content="crawler, archive,search">
  <meta name="author" content="Grid  Crawl">
  <meta name="robots" content="index, follow, NOARCHIVE">
  <link rel="stylesheet" href="/style.css">
  <link rel="canonical" href="https://www.example.test/page">
  <script src="/app.js"></script>
</head>
<body>
  <h1>Welcome</h1><img src="logo.png" alt="The logo"><img src="logo.png" alt="again">
  <p><a href="/"><img src="/home.gif"></a>Read the <a href="/docs/">documentation</a> or <a href="https://other.test/" rel="nofollow sponsored">a sponsor</a>.</p>
  <script>window.x = "<a href='/nope'>";</script>
  <h2>More</h2>
  <ul><li><a href="mailto:x@example.test">Mail</a><li><a href="page2.html">Next page</a></ul>
</body>
</html>`
	got, err := HTML(strings.NewReader(page), mustURL(t, "http://www.example.test/dir/"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := Result{
		Title:         "Gridcrawl – test page",
		Description:   "A page for tests.",
		Language:      "en-gb",
		Headings:      []string{"Welcome", "More"},
		HeadingLevels: []int{1, 2},
		Text:          "Welcome Read the documentation or a sponsor. More Mail Next page",
		Links: links{
			l("https://www.example.test/page", ""),
			l("http://www.example.test/", ""),
			l("http://www.example.test/docs/", "documentation"),
			nf("https://other.test/", "a sponsor"),
			l("http://www.example.test/dir/page2.html", "Next page"),
		},
		Base:      "http://www.example.test/dir/",
		Canonical: "https://www.example.test/page",
		Images: []Image{
			{URL: "http://www.example.test/dir/logo.png", Alt: "The logo"},
			{URL: "http://www.example.test/home.gif"},
		},
		Keywords: "crawler archive search",
		Author:   "Grid Crawl",
		Charset:  "utf-8",
		Robots:   contracts.RobotsMetaIndex | contracts.RobotsMetaFollow | contracts.RobotsMetaNoArchive,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HTML(page) mismatch (-want +got):\n%s", diff)
	}
}

func TestHTMLErrors(t *testing.T) {
	if _, err := HTML(strings.NewReader("<p>x"), nil, Limits{}); err == nil {
		t.Errorf("HTML(nil page url) error = nil, want an error")
	}
	if _, err := HTML(strings.NewReader("<p>x"), mustURL(t, "ftp://example.test/"), Limits{}); err == nil {
		t.Errorf("HTML(ftp page url) error = nil, want an error")
	}
	failing := iotest.ErrReader(errTest)
	res, err := HTML(failing, mustURL(t, pageURL), Limits{})
	if err == nil || !strings.Contains(err.Error(), errTest.Error()) {
		t.Errorf("HTML(failing reader) = %+v, %v, want error %v", res, err, errTest)
	}
	// An error after some content keeps what was read.
	half := io.MultiReader(strings.NewReader(strings.Repeat("<p>word</p>", 200)), iotest.ErrReader(errTest))
	res, err = HTML(half, mustURL(t, pageURL), Limits{})
	if err == nil || res.Text == "" {
		t.Errorf("HTML(reader failing late) = text %q, %v, want partial text and an error", res.Text, err)
	}
}

var errTest = iotestError("boom")

type iotestError string

func (e iotestError) Error() string { return string(e) }

func TestCharset(t *testing.T) {
	tests := []struct {
		name, contentType string
		body              []byte
		wantTitle         string
	}{
		{"undeclared utf-8", "", []byte("<title>Grüße</title>"), "Grüße"},
		{"meta charset latin1", "", []byte("<meta charset=\"iso-8859-1\"><title>Gr\xfc\xdfe</title>"), "Grüße"},
		{"meta http-equiv windows-1252", "", []byte("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"><title>\x93quoted\x94 \x80</title>"), "“quoted” €"},
		{"meta charset shift_jis", "", []byte("<meta charset=shift_jis><title>\x93\xfa\x96\x7b</title>"), "日本"},
		{"header charset", "text/html; charset=ISO-8859-1", []byte("<title>Gr\xfc\xdfe</title>"), "Grüße"},
		{"header beats meta", "text/html; charset=utf-8", []byte("<meta charset=\"iso-8859-1\"><title>Grüße</title>"), "Grüße"},
		{"unknown header charset falls back to meta", "text/html; charset=x-nonsense", []byte("<meta charset=\"iso-8859-1\"><title>Gr\xfc\xdfe</title>"), "Grüße"},
		{"utf-8 bom", "text/html; charset=iso-8859-1", []byte("\xef\xbb\xbf<title>Grüße</title>"), "Grüße"},
		{"utf-16le bom", "", utf16le("\ufeff<title>Grüße</title>"), "Grüße"},
		{"meta utf-16 means utf-8", "", []byte("<meta charset=utf-16><title>Grüße</title>"), "Grüße"},
		{"undeclared invalid utf-8 replaced", "", []byte("<title>Gr\xfc\xdfe</title>"), "Gr\ufffd\ufffde"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := HTMLWithContentType(strings.NewReader(string(tt.body)), tt.contentType, mustURL(t, pageURL), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Title != tt.wantTitle {
				t.Errorf("HTMLWithContentType(%q, %q).Title = %q, want %q", tt.body, tt.contentType, res.Title, tt.wantTitle)
			}
		})
	}
}

func utf16le(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}

func TestText(t *testing.T) {
	tests := []struct {
		name, in, contentType string
		lim                   Limits
		want                  string
		truncated             bool
	}{
		{"collapse", "  hello \n\n world\t\r\n", "", Limits{}, "hello world", false},
		{"unicode spaces", "a\u00a0\u2003b\u3000c", "", Limits{}, "a b c", false},
		{"html not parsed", "<p>x</p>", "", Limits{}, "<p>x</p>", false},
		{"limit", "aaa bbb ccc", "", Limits{MaxTextBytes: 7}, "aaa bbb", true},
		{"limit exact", "aaa bbb   ", "", Limits{MaxTextBytes: 7}, "aaa bbb", false},
		{"invalid utf-8", "a\xffb", "", Limits{}, "a\ufffdb", false},
		{"charset header", "Gr\xfc\xdfe", "text/plain; charset=iso-8859-1", Limits{}, "Grüße", false},
		{"bom", "\xef\xbb\xbfx y", "", Limits{}, "x y", false},
		{"empty", "", "", Limits{}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := TextWithContentType(strings.NewReader(tt.in), tt.contentType, tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tt.want || res.Truncated != tt.truncated {
				t.Errorf("Text(%q) = %q, truncated %v, want %q, %v", tt.in, res.Text, res.Truncated, tt.want, tt.truncated)
			}
			if res.Title != "" || res.Links != nil {
				t.Errorf("Text(%q) = %+v, want only Text", tt.in, res)
			}
		})
	}
	// Runes split across reads are kept whole.
	in := strings.Repeat("äöü €", 1000)
	res, err := Text(iotest.OneByteReader(strings.NewReader(in)), Limits{})
	if err != nil || res.Text != in {
		t.Errorf("Text(one byte at a time) = %q..., %v, want the input unchanged", res.Text[:min(20, len(res.Text))], err)
	}
	if !utf8.ValidString(res.Text) {
		t.Errorf("Text(one byte at a time) is not valid UTF-8")
	}
}

func TestLinksAlwaysCanonical(t *testing.T) {
	page := `<base href="HTTP://Base.TEST:80/a/./b/"><a href="../c/%7efoo?x#y">1</a><a href="//h.test">2</a>
	<area href="http://user@h.test:8080/x"><iframe src="?q"></iframe><link rel=next href="\\h.test\p">`
	res, err := HTML(strings.NewReader(page), mustURL(t, pageURL), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Links) != 5 {
		t.Errorf("HTML(...) gave %d links, want 5: %v", len(res.Links), res.Links)
	}
	for _, lk := range res.Links {
		checkLink(t, lk.URL)
	}
}

// checkLink fails unless u is an absolute, normalized http(s) URL.
func checkLink(t testing.TB, u string) {
	t.Helper()
	n, err := urlnorm.Normalize(u)
	if err != nil || n != u {
		t.Fatalf("link %q: Normalize = %q, %v, want it unchanged", u, n, err)
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		t.Fatalf("link %q is not an absolute http(s) url (%v)", u, err)
	}
}

func FuzzHTML(f *testing.F) {
	seeds := []string{
		`<html lang=en><title>t</title><base href="/b/"><a href="x" rel=nofollow>a</a><p>text</p>`,
		`<meta charset=iso-8859-1><title>Gr` + "\xfc" + `</title><noscript><a href=/n>n</a></noscript>`,
		`<a href="javascript:x">j</a><a href="  //h.test\x ">h</a><area href=a><frame src=f><iframe src=i></iframe>`,
		`<link rel="canonical alternate" href="http://[::1]:80/a"><meta http-equiv=refresh content="0;url=/r">`,
		`<template><h1>x<a href=#>y</a></template><h2>z</h2><script>"</script>"</script>`,
		"\xff\xfe<\x00p\x00>\x00",
		`<a href="http://a..b/">bad</a><a href="http://0x7f.1/">ip</a><plaintext><a href=/p>`,
		`<base href="/` + strings.Repeat("p", 2100) + `/x/"><a href="../../a">1</a><a href="http:b">2</a><a href="?q">3</a><a href="\\h/c">4</a><img src=../i>`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	base := mustURL(f, pageURL)
	f.Fuzz(func(t *testing.T, page string) {
		res, err := HTML(strings.NewReader(page), base, Limits{MaxTextBytes: 1000, MaxLinks: 50, MaxHeadings: 5})
		if err != nil {
			t.Fatalf("HTML(%q): %v", page, err)
		}
		for _, lk := range res.Links {
			checkLink(t, lk.URL)
			if len(lk.Text) > MaxAnchorTextBytes || !utf8.ValidString(lk.Text) {
				t.Fatalf("link text %q: too long or not UTF-8", lk.Text)
			}
		}
		if res.Canonical != "" {
			checkLink(t, res.Canonical)
		}
		checkLink(t, res.Base)
		if len(res.Text) > 1000 || len(res.Links) > 50 || len(res.Headings) > 5 {
			t.Fatalf("limits exceeded: %d text bytes, %d links, %d headings", len(res.Text), len(res.Links), len(res.Headings))
		}
		for _, s := range append([]string{res.Title, res.Description, res.Language, res.Text}, res.Headings...) {
			if !utf8.ValidString(s) || s != strings.TrimSpace(s) {
				t.Fatalf("field %q not valid UTF-8 or not trimmed", s)
			}
		}
	})
}
