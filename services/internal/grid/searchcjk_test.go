package grid

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestSearchCJKWords crawls pages in Chinese, Japanese and Korean with the
// embedded grid and finds them by their words through the API search and
// yacysearch.json: 富士山 inside 日本の富士山は高い, 故宫 inside
// 北京的故宫很有名, 서울 in 서울은 (the word with its particle); a page with
// the characters apart is no hit, and -word excludes a CJK word.
func TestSearchCJKWords(t *testing.T) {
	page := func(title, text string, links ...string) cliPage {
		var b strings.Builder
		b.WriteString(`<html><head><meta charset="utf-8"><title>` + title + `</title></head><body><p>` + text + `</p>`)
		for _, l := range links {
			b.WriteString(`<a href="` + l + `">` + l + `</a> `)
		}
		b.WriteString(`</body></html>`)
		return cliPage{200, b.String(), ""}
	}
	site := newCLISite(t, map[string]cliPage{
		"/":           page("index", "索引", "/ja.html", "/zh.html", "/ko.html", "/apart.html"),
		"/ja.html":    page("日本", "日本の富士山は高い。"),
		"/zh.html":    page("中国", "北京的故宫很有名。"),
		"/ko.html":    page("한국", "서울은 한국의 수도입니다."),
		"/apart.html": page("Apart", "富の国。山の上に士がいる。故事と宫殿。서쪽 울타리가 있다。"),
	})
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	profile := contracts.Profile{StartURLs: []string{site.url("/")}, MaxDepth: 1, Sitemaps: new(bool),
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 1}}
	crawlToEnd(t, api, profile, time.Minute)

	for _, tc := range []struct {
		q    string
		want []string // paths
	}{
		{"富士山", []string{"/ja.html"}},
		{"故宫", []string{"/zh.html"}},
		{"서울", []string{"/ko.html"}},
		{"富", []string{"/apart.html", "/ja.html"}},
		{"宫 -故宫", []string{"/apart.html"}},
	} {
		var res contracts.SearchResponse
		if code := apiDo(t, http.MethodGet, api+"/api/v1/search?q="+url.QueryEscape(tc.q), nil, &res); code != http.StatusOK {
			t.Fatalf("GET /api/v1/search?q=%s = %d", tc.q, code)
		}
		var got []string
		for _, h := range res.Hits {
			got = append(got, strings.TrimPrefix(h.URL, site.url("")))
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("GET /api/v1/search?q=%s = %v, want %v", tc.q, got, tc.want)
		}
	}

	resp, err := http.Get(api + "/yacysearch.json?query=" + url.QueryEscape("서울"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var yacy struct {
		Channels []struct {
			Items []struct {
				Link        string `json:"link"`
				Description string `json:"description"`
			} `json:"items"`
		} `json:"channels"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&yacy); err != nil {
		t.Fatalf("GET /yacysearch.json?query=서울: %v", err)
	}
	if len(yacy.Channels) != 1 || len(yacy.Channels[0].Items) != 1 ||
		!strings.Contains(yacy.Channels[0].Items[0].Description, "<b>서울</b>은") {
		t.Errorf("GET /yacysearch.json?query=서울 = %+v, want the Korean page with <b>서울</b>은 in its description", yacy)
	}
}
