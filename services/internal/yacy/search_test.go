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

func TestSnippetHTMLCJK(t *testing.T) {
	for _, tc := range []struct {
		name, text, query, want string
	}{
		{"latin word", "The zebrafish swims.", "zebrafish", "The <b>zebrafish</b> swims."},
		{"latin inside a word not bold", "zebrafishes", "zebrafish", "zebrafishes"},
		{"han inside a run", "日本の富士山は高い。", "富士山", "日本の<b>富士山</b>は高い。"},
		{"hangul with particle", "서울은 한국의 수도입니다.", "서울 수도", "<b>서울</b>은 한국의 <b>수도</b>입니다."},
		{"longest first, every occurrence", "故宫和故宫博物院", "故宫 故宫博物院", "<b>故宫</b>和<b>故宫博物院</b>"},
		{"escaped around", "<i>東京タワー</i>", "タワー", "&lt;i&gt;東京<b>タワー</b>&lt;/i&gt;"},
	} {
		if got := snippetHTML(contracts.SearchHit{Snippet: tc.text}, queryWords(tc.query)); got != tc.want {
			t.Errorf("%s: snippetHTML(%q, %q) = %q, want %q", tc.name, tc.text, tc.query, got, tc.want)
		}
	}
}
