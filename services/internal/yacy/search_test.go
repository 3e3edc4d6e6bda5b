package yacy

import (
	"net/url"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestYaCyMaskCannotEscapeAnchors(t *testing.T) {
	p, fe := readYaCyParams(url.Values{"urlmaskfilter": {"nomatch)|(.*"}})
	if fe == nil {
		t.Fatalf("readYaCyParams accepted %q as %v", "nomatch)|(.*", p.mask)
	}
	p, fe = readYaCyParams(url.Values{"urlmaskfilter": {"https://a\\.example/.*|.*\\.pdf"}})
	if fe != nil {
		t.Fatalf("readYaCyParams: %v", fe)
	}
	for u, want := range map[string]bool{"https://a.example/x": true, "https://b.example/r.pdf": true, "https://b.example/a.example/": false} {
		if got := p.mask.MatchString(u); got != want {
			t.Errorf("mask %s matches %s = %v, want %v", p.maskSrc, u, got, want)
		}
	}
}

func FuzzReadYaCyParams(f *testing.F) {
	f.Add("zebrafish site:a.example", "3", "10", "hosts", ".*", "cb", "x")
	f.Add("collection:c -x \"a b\"", "-1", "abc", "", "([", "alert(1)", "")
	f.Fuzz(func(t *testing.T, query, start, rows, nav, mask, callback, collection string) {
		p, fe := readYaCyParams(url.Values{"query": {query}, "startRecord": {start}, "maximumRecords": {rows}, "nav": {nav},
			"urlmaskfilter": {mask}, "callback": {callback}, "collection": {collection}})
		if fe != nil {
			if fe.Field != "urlmaskfilter" && fe.Field != "callback" {
				t.Errorf("error names %q", fe.Field)
			}
			return
		}
		if p.rows < 1 || p.rows > yacyMaxRecords || p.start < 0 || p.start > yacyMaxStart {
			t.Errorf("rows %d, start %d out of bounds", p.rows, p.start)
		}
		if p.callback != "" && !jsonpName.MatchString(p.callback) {
			t.Errorf("callback %q accepted", p.callback)
		}
	})
}

func FuzzSnippetHTML(f *testing.F) {
	f.Add("zebrafish <script>&\"amp\"", "zebrafish amp")
	f.Add("a\xffb <b>", "b")
	f.Fuzz(func(t *testing.T, text, query string) {
		got := snippetHTML(contracts.SearchHit{Snippet: text}, queryWords(query))
		// Markup is only our <b> and </b>: everything else is escaped.
		rest := strings.NewReplacer("<b>", "", "</b>", "").Replace(got)
		if strings.ContainsAny(rest, "<>\"") {
			t.Errorf("snippetHTML(%q) = %q has unescaped markup", text, got)
		}
	})
}
