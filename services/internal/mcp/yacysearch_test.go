package mcp

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
)

// yacyFixture is a document of the YaCy search tests, described apart from
// the product's document type so that the expectations below are written
// by hand from these fields.
type yacyFixture struct {
	id, host, url, title, text, collection string
	size                                   int
	modified                               time.Time
}

// yacyCorpus: every document holds "zebrafish". The expectations of the
// tests are read off this table by hand.
var yacyCorpus = []yacyFixture{
	{"d1", "a.example", "https://a.example/b/one.html", "Zebrafish care", "zebrafish tank water heater", "aquarium", 212832, time.Date(2017, 4, 25, 0, 0, 0, 0, time.UTC)},
	{"d2", "a.example", "https://a.example/b/two.html", "Feeding", "zebrafish food flakes", "aquarium", 72879, time.Date(2017, 3, 27, 10, 11, 12, 0, time.UTC)},
	{"d3", "a.example", "https://a.example/c/report.pdf", "Report", "zebrafish genome report", "", 339904, time.Date(2016, 12, 16, 0, 0, 0, 0, time.UTC)},
	{"d4", "www.b.example", "https://www.b.example/guide", "Breeding guide", "zebrafish breeding guide with a tank", "", 4 << 20, time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)},
	{"d5", "b.example", "http://b.example/notes.txt", "Notes", "the zebrafish genome is small", "", 1024, time.Date(2021, 6, 7, 8, 9, 10, 0, time.UTC)},
	{"d6", "c.example", "https://c.example/index.html", "Tank mates", "zebrafish tank mates", "", 0, time.Date(2022, 2, 3, 4, 5, 6, 0, time.UTC)},
	{"d7", "c.example", "https://c.example/zebra/list.html", "", "zebrafish list of species", "", 500, time.Date(2023, 9, 8, 7, 6, 5, 0, time.UTC)},
}

// yacyDoc is the one place that turns a fixture into the index's document
// (YaCy's field names). The fixture's time is both the load date and the
// last modification.
func yacyDoc(f yacyFixture) contracts.Document {
	u, err := url.Parse(f.url)
	if err != nil {
		panic(err)
	}
	segs := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	file := segs[len(segs)-1]
	ext := strings.TrimPrefix(strings.ToLower(path.Ext(file)), ".")
	d := contracts.Document{ID: f.id, CrawlID: "c1", URL: f.url, Host: f.host, Text: f.text,
		ContentType: []string{"text/html"}, HTTPStatus: 200, LastModified: f.modified, LoadDate: f.modified,
		Size: f.size, FileExt: ext, URLProtocol: u.Scheme, URLFileName: strings.TrimSuffix(file, path.Ext(file)),
		URLPaths: segs[:len(segs)-1]}
	if f.title != "" {
		d.Title = []string{f.title}
	}
	if f.collection != "" {
		d.Collection = []string{f.collection}
	}
	return d
}

// newYaCyServer serves the API over a real embedded index holding docs.
// With an empty token, loopback clients need none (embedded mode).
func newYaCyServer(t *testing.T, docs []yacyFixture, token string) *httptest.Server {
	t.Helper()
	idx, err := sqlitestore.OpenSearch(filepath.Join(t.TempDir(), "search.db"))
	if err != nil {
		t.Fatalf("OpenSearch: %v", err)
	}
	t.Cleanup(func() { _ = idx.Close() })
	batch := make([]contracts.Document, len(docs))
	for i, f := range docs {
		batch[i] = yacyDoc(f)
	}
	if err := idx.Upsert(t.Context(), batch); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	m := New(Config{Token: token}, Deps{Search: idx, Embedded: token == ""})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// yacyGet asks srv for path?params and returns the status and body.
func yacyGet(t *testing.T, srv *httptest.Server, path string, params url.Values, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path+"?"+params.Encode(), nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, body
}

// yacyAnswerT is a YaCy JSON answer as a client reads it. Every number is a
// string in YaCy's answers: decoding fails if one is not.
type yacyAnswerT struct {
	Channels []struct {
		Title        string `json:"title"`
		Description  string `json:"description"`
		TotalResults string `json:"totalResults"`
		StartIndex   string `json:"startIndex"`
		ItemsPerPage string `json:"itemsPerPage"`
		Items        []struct {
			Title       string `json:"title"`
			Link        string `json:"link"`
			Description string `json:"description"`
			PubDate     string `json:"pubDate"`
			Size        string `json:"size"`
			SizeName    string `json:"sizename"`
			GUID        string `json:"guid"`
			Host        string `json:"host"`
			Path        string `json:"path"`
			File        string `json:"file"`
		} `json:"items"`
		Navigation []struct {
			FacetName string `json:"facetname"`
			Elements  []struct {
				Name     string `json:"name"`
				Count    string `json:"count"`
				Modifier string `json:"modifier"`
				URL      string `json:"url"`
			} `json:"elements"`
		} `json:"navigation"`
	} `json:"channels"`
}

func yacySearchOK(t *testing.T, srv *httptest.Server, params url.Values) yacyAnswerT {
	t.Helper()
	code, _, body := yacyGet(t, srv, "/yacysearch.json", params, "")
	if code != http.StatusOK {
		t.Fatalf("GET /yacysearch.json?%s = %d %s, want 200", params.Encode(), code, body)
	}
	var a yacyAnswerT
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("decode answer to %s: %v\n%s", params.Encode(), err, body)
	}
	if len(a.Channels) != 1 {
		t.Fatalf("answer to %s has %d channels, want 1", params.Encode(), len(a.Channels))
	}
	return a
}

func links(a yacyAnswerT) []string {
	var out []string
	for _, it := range a.Channels[0].Items {
		out = append(out, it.Link)
	}
	slices.Sort(out)
	return out
}

// fixtureURLs returns the URLs of the corpus documents with the given ids.
func fixtureURLs(ids ...string) []string {
	var out []string
	for _, f := range yacyCorpus {
		if slices.Contains(ids, f.id) {
			out = append(out, f.url)
		}
	}
	slices.Sort(out)
	return out
}

func TestYaCySearchOperators(t *testing.T) {
	srv := newYaCyServer(t, yacyCorpus, "")
	tests := []struct {
		name   string
		params url.Values
		want   []string
	}{
		{"word", url.Values{"query": {"zebrafish"}}, fixtureURLs("d1", "d2", "d3", "d4", "d5", "d6", "d7")},
		{"two words", url.Values{"query": {"zebrafish tank"}}, fixtureURLs("d1", "d4", "d6")},
		{"search is query's alias", url.Values{"search": {"zebrafish flakes"}}, fixtureURLs("d2")},
		{"site", url.Values{"query": {"zebrafish site:a.example"}}, fixtureURLs("d1", "d2", "d3")},
		{"site takes subdomains", url.Values{"query": {"zebrafish site:b.example"}}, fixtureURLs("d4", "d5")},
		{"site alone", url.Values{"query": {"site:c.example"}}, fixtureURLs("d6", "d7")},
		{"filetype", url.Values{"query": {"zebrafish filetype:pdf"}}, fixtureURLs("d3")},
		{"filetype html", url.Values{"query": {"zebrafish filetype:html"}}, fixtureURLs("d1", "d2", "d6", "d7")},
		{"inurl", url.Values{"query": {"zebrafish inurl:zebra"}}, fixtureURLs("d7")},
		{"phrase", url.Values{"query": {`"zebrafish genome"`}}, fixtureURLs("d3", "d5")},
		{"phrase in order only", url.Values{"query": {`"genome zebrafish"`}}, nil},
		{"excluded word", url.Values{"query": {"zebrafish -tank"}}, fixtureURLs("d2", "d3", "d5", "d7")},
		{"collection parameter", url.Values{"query": {"zebrafish"}, "collection": {"aquarium"}}, fixtureURLs("d1", "d2")},
		{"collection operator", url.Values{"query": {"zebrafish collection:aquarium"}}, fixtureURLs("d1", "d2")},
		{"urlmaskfilter", url.Values{"query": {"zebrafish"}, "urlmaskfilter": {".*/b/.*"}}, fixtureURLs("d1", "d2")},
		{"urlmaskfilter matches whole url", url.Values{"query": {"zebrafish"}, "urlmaskfilter": {"/b/"}}, nil},
		{"no match", url.Values{"query": {"zebrafish unicorn"}}, nil},
		{"empty query", url.Values{"query": {""}}, nil},
		{"no query", url.Values{}, nil},
		{"image domain: text only indexed", url.Values{"query": {"zebrafish"}, "contentdom": {"image"}}, nil},
		{"text domain", url.Values{"query": {"zebrafish flakes"}, "contentdom": {"text"}}, fixtureURLs("d2")},
		{"local resource", url.Values{"query": {"zebrafish flakes"}, "resource": {"local"}, "verify": {"ifexist"}}, fixtureURLs("d2")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := yacySearchOK(t, srv, tc.params)
			if diff := cmp.Diff(tc.want, links(a)); diff != "" {
				t.Errorf("links of %s (-want +got):\n%s", tc.params.Encode(), diff)
			}
			if got, want := a.Channels[0].TotalResults, itoa(len(tc.want)); got != want {
				t.Errorf("totalResults of %s = %q, want %q", tc.params.Encode(), got, want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestYaCySearchPaging(t *testing.T) {
	srv := newYaCyServer(t, yacyCorpus, "")
	var all []string
	for _, tc := range []struct {
		start, items int
	}{{0, 3}, {3, 3}, {6, 1}, {9, 0}} {
		a := yacySearchOK(t, srv, url.Values{"query": {"zebrafish"}, "maximumRecords": {"3"}, "startRecord": {itoa(tc.start)}})
		ch := a.Channels[0]
		if len(ch.Items) != tc.items || ch.TotalResults != "7" || ch.StartIndex != itoa(tc.start) || ch.ItemsPerPage != "3" {
			t.Errorf("page at %d: %d items, totalResults %q, startIndex %q, itemsPerPage %q; want %d, \"7\", %q, \"3\"",
				tc.start, len(ch.Items), ch.TotalResults, ch.StartIndex, ch.ItemsPerPage, tc.items, itoa(tc.start))
		}
		all = append(all, links(a)...)
	}
	slices.Sort(all)
	if diff := cmp.Diff(fixtureURLs("d1", "d2", "d3", "d4", "d5", "d6", "d7"), all); diff != "" {
		t.Errorf("pages together (-want +got):\n%s", diff)
	}
}

func TestYaCySearchParameters(t *testing.T) {
	srv := newYaCyServer(t, yacyCorpus, "")
	tests := []struct {
		name                            string
		params                          url.Values
		startIndex, itemsPerPage, total string
		items                           int
	}{
		{"defaults", url.Values{"query": {"zebrafish"}}, "0", "10", "7", 7},
		{"non-numeric startRecord reads as 0, as in YaCy", url.Values{"query": {"zebrafish"}, "startRecord": {"abc"}}, "0", "10", "7", 7},
		{"negative startRecord", url.Values{"query": {"zebrafish"}, "startRecord": {"-5"}}, "0", "10", "7", 7},
		{"non-numeric maximumRecords reads as 10", url.Values{"query": {"zebrafish"}, "maximumRecords": {"ten"}}, "0", "10", "7", 7},
		{"zero maximumRecords reads as 10", url.Values{"query": {"zebrafish"}, "maximumRecords": {"0"}}, "0", "10", "7", 7},
		{"maximumRecords capped at 100", url.Values{"query": {"zebrafish"}, "maximumRecords": {"100000"}}, "0", "100", "7", 7},
		{"count and offset aliases", url.Values{"query": {"zebrafish"}, "count": {"2"}, "offset": {"6"}}, "6", "2", "7", 1},
		{"rows and start aliases", url.Values{"query": {"zebrafish"}, "rows": {"4"}, "start": {"1"}}, "1", "4", "7", 4},
		{"startRecord capped at 10000", url.Values{"query": {"zebrafish"}, "startRecord": {"99999999"}}, "10000", "10", "7", 0},
		{"nav none", url.Values{"query": {"zebrafish"}, "nav": {""}}, "0", "10", "7", 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch := yacySearchOK(t, srv, tc.params).Channels[0]
			got := []string{ch.StartIndex, ch.ItemsPerPage, ch.TotalResults, itoa(len(ch.Items))}
			want := []string{tc.startIndex, tc.itemsPerPage, tc.total, itoa(tc.items)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("startIndex, itemsPerPage, totalResults, items of %s (-want +got):\n%s", tc.params.Encode(), diff)
			}
		})
	}

	bad := []struct {
		name, field string
		params      url.Values
	}{
		{"urlmaskfilter not a regexp", "urlmaskfilter", url.Values{"query": {"zebrafish"}, "urlmaskfilter": {"(["}}},
		{"urlmaskfilter too long", "urlmaskfilter", url.Values{"query": {"zebrafish"}, "urlmaskfilter": {strings.Repeat("a", 257)}}},
		{"callback not a name", "callback", url.Values{"query": {"zebrafish"}, "callback": {"alert(1)"}}},
		{"callback too long", "callback", url.Values{"query": {"zebrafish"}, "callback": {strings.Repeat("f", 65)}}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/yacysearch.json", "/yacysearch.rss"} {
				code, _, body := yacyGet(t, srv, path, tc.params, "")
				var e contracts.ErrorResponse
				if err := json.Unmarshal(body, &e); err != nil || code != http.StatusBadRequest || e.Field != tc.field {
					t.Errorf("GET %s?%s = %d %s, want 400 naming %s", path, tc.params.Encode(), code, body, tc.field)
				}
			}
		})
	}
}

func TestYaCySearchJSONP(t *testing.T) {
	srv := newYaCyServer(t, yacyCorpus, "")
	code, h, body := yacyGet(t, srv, "/yacysearch.json", url.Values{"query": {"zebrafish flakes"}, "callback": {"jQuery123_456"}}, "")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/javascript") {
		t.Fatalf("JSONP answer = %d %q, want 200 application/javascript", code, h.Get("Content-Type"))
	}
	// YaCy's JSONP: callback([answer]).
	s := strings.TrimSpace(string(body))
	s = strings.TrimPrefix(s, "/**/")
	if !strings.HasPrefix(s, "jQuery123_456([") || !strings.HasSuffix(s, "])") {
		t.Fatalf("JSONP body = %.80q..., want jQuery123_456([...])", s)
	}
	var arr []yacyAnswerT
	if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(s, "jQuery123_456("), ")")), &arr); err != nil || len(arr) != 1 {
		t.Fatalf("JSONP argument is not [answer]: %v", err)
	}
	if got := links(arr[0]); !slices.Equal(got, fixtureURLs("d2")) {
		t.Errorf("JSONP links = %v, want %v", got, fixtureURLs("d2"))
	}
}

// TestYaCySearchItems checks the item fields against values written by hand
// from the fixtures, and sizename against pairs recorded from a real YaCy
// peer (the response quoted in yacy/yacy_grid_mcp's YaCySearchService.java:
// 212832 is "207 kbyte", 72879 "71 kbyte", 339904 "331 kbyte").
func TestYaCySearchItems(t *testing.T) {
	srv := newYaCyServer(t, yacyCorpus, "")
	type item struct{ Title, Link, PubDate, Size, SizeName, GUID, Host, Path, File string }
	want := map[string]item{
		"d1": {"Zebrafish care", "https://a.example/b/one.html", "Tue, 25 Apr 2017 00:00:00 +0000", "212832", "207 kbyte", "d1", "a.example", "/b/one.html", "one.html"},
		"d2": {"Feeding", "https://a.example/b/two.html", "Mon, 27 Mar 2017 10:11:12 +0000", "72879", "71 kbyte", "d2", "a.example", "/b/two.html", "two.html"},
		"d3": {"Report", "https://a.example/c/report.pdf", "Fri, 16 Dec 2016 00:00:00 +0000", "339904", "331 kbyte", "d3", "a.example", "/c/report.pdf", "report.pdf"},
		"d4": {"Breeding guide", "https://www.b.example/guide", "Thu, 02 Jan 2020 03:04:05 +0000", "4194304", "4 mbyte", "d4", "www.b.example", "/guide", "guide"},
		"d5": {"Notes", "http://b.example/notes.txt", "Mon, 07 Jun 2021 08:09:10 +0000", "1024", "1 kbyte", "d5", "b.example", "/notes.txt", "notes.txt"},
		"d6": {"Tank mates", "https://c.example/index.html", "Thu, 03 Feb 2022 04:05:06 +0000", "0", "0 byte", "d6", "c.example", "/index.html", "index.html"},
		// An untitled page is titled with its URL.
		"d7": {"https://c.example/zebra/list.html", "https://c.example/zebra/list.html", "Fri, 08 Sep 2023 07:06:05 +0000", "500", "500 byte", "d7", "c.example", "/zebra/list.html", "list.html"},
	}
	a := yacySearchOK(t, srv, url.Values{"query": {"zebrafish"}})
	got := map[string]item{}
	for _, it := range a.Channels[0].Items {
		got[it.GUID] = item{it.Title, it.Link, it.PubDate, it.Size, it.SizeName, it.GUID, it.Host, it.Path, it.File}
		if !strings.Contains(strings.ToLower(it.Description), "<b>zebrafish</b>") {
			t.Errorf("description of %s = %q, want the query word in <b>", it.GUID, it.Description)
		}
		if _, err := time.Parse(time.RFC1123Z, it.PubDate); err != nil {
			t.Errorf("pubDate of %s = %q is not RFC 1123: %v", it.GUID, it.PubDate, err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

func TestYaCySearchSnippetEscaped(t *testing.T) {
	srv := newYaCyServer(t, []yacyFixture{{"x1", "x.example", "https://x.example/", "T", `zebrafish <script>&"amp"`, "", 1, time.Unix(0, 0)}}, "")
	a := yacySearchOK(t, srv, url.Values{"query": {"zebrafish amp"}})
	if len(a.Channels[0].Items) != 1 {
		t.Fatalf("%d items, want 1", len(a.Channels[0].Items))
	}
	d := a.Channels[0].Items[0].Description
	if strings.Contains(d, "<script") || !strings.Contains(d, "&lt;script&gt;") || !strings.Contains(d, "&amp;&#34;<b>amp</b>&#34;") {
		t.Errorf("description = %q, want HTML-escaped text with the words in <b>", d)
	}
}

func TestYaCySearchNavigation(t *testing.T) {
	srv := newYaCyServer(t, yacyCorpus, "")
	type elem struct{ Name, Count, Modifier string }
	tests := []struct {
		name string
		nav  []string // nil: the parameter is absent
		want map[string][]elem
	}{
		{"all by default", nil, map[string][]elem{
			"hosts": {{"a.example", "3", "site%3Aa.example"}, {"c.example", "2", "site%3Ac.example"},
				{"b.example", "1", "site%3Ab.example"}, {"www.b.example", "1", "site%3Awww.b.example"}},
			"filetype": {{"html", "4", "filetype%3Ahtml"}, {"pdf", "1", "filetype%3Apdf"}, {"txt", "1", "filetype%3Atxt"}},
		}},
		{"hosts only", []string{"hosts"}, map[string][]elem{
			"hosts": {{"a.example", "3", "site%3Aa.example"}, {"c.example", "2", "site%3Ac.example"},
				{"b.example", "1", "site%3Ab.example"}, {"www.b.example", "1", "site%3Awww.b.example"}},
		}},
		{"filetype with unknown navigators", []string{"location,filetype,authors"}, map[string][]elem{
			"filetype": {{"html", "4", "filetype%3Ahtml"}, {"pdf", "1", "filetype%3Apdf"}, {"txt", "1", "filetype%3Atxt"}},
		}},
		{"none", []string{""}, map[string][]elem{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, mask := range []string{"", ".*"} { // ".*" goes through the same path as no mask
				params := url.Values{"query": {"zebrafish"}, "maximumRecords": {"2"}}
				if tc.nav != nil {
					params["nav"] = tc.nav
				}
				if mask != "" {
					params.Set("urlmaskfilter", mask)
				}
				a := yacySearchOK(t, srv, params)
				got := map[string][]elem{}
				for _, f := range a.Channels[0].Navigation {
					es := []elem{}
					for _, e := range f.Elements {
						es = append(es, elem{e.Name, e.Count, e.Modifier})
						// Following an element's url is the search refined by its modifier.
						u, err := url.Parse(e.URL)
						if err != nil || u.Path != "yacysearch.json" || u.Query().Get("startRecord") != "0" {
							t.Errorf("facet %s element %s url = %q, want yacysearch.json?...&startRecord=0", f.FacetName, e.Name, e.URL)
						} else if mod, _ := url.QueryUnescape(e.Modifier); u.Query().Get("query") != "zebrafish "+mod {
							t.Errorf("facet %s element %s url query = %q, want %q", f.FacetName, e.Name, u.Query().Get("query"), "zebrafish "+mod)
						}
					}
					got[f.FacetName] = es
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("navigation of %s (-want +got):\n%s", params.Encode(), diff)
				}
			}
		})
	}
	// With a urlmaskfilter the facets count the filtered matches.
	a := yacySearchOK(t, srv, url.Values{"query": {"zebrafish"}, "urlmaskfilter": {"https://a\\.example/.*"}, "nav": {"all"}})
	for _, f := range a.Channels[0].Navigation {
		var got []string
		for _, e := range f.Elements {
			got = append(got, e.Name+"="+e.Count)
		}
		want := map[string][]string{"hosts": {"a.example=3"}, "filetype": {"html=2", "pdf=1"}}[f.FacetName]
		if !slices.Equal(got, want) {
			t.Errorf("masked facet %s = %v, want %v", f.FacetName, got, want)
		}
	}
}

// TestYaCySearchShapeMatchesYaCy checks every field of our answer against
// the shape of a real YaCy answer: field names, nesting and JSON types as
// yacy/yacy_search_server's templates htroot/yacysearch.json,
// yacysearchitem.json and yacysearchtrailer.json write them, and as the
// answer of a real peer recorded in yacy/yacy_grid_mcp's
// src/main/java/net/yacy/grid/mcp/api/index/YaCySearchService.java shows
// them (every number a string; pubDate "Tue, 25 Apr 2017 00:00:00 +0000";
// modifier "site%3Ayoutube.com"; url "yacysearch.json?query=...").
// YaCy's optional item fields code, faviconUrl/faviconCode and eventDate
// and its channel image are not sent.
func TestYaCySearchShapeMatchesYaCy(t *testing.T) {
	const str = "string"
	channel := map[string]string{"title": str, "description": str, "link": str, "totalResults": str, "startIndex": str,
		"itemsPerPage": str, "searchTerms": str, "items": "array", "navigation": "array"}
	item := map[string]string{"title": str, "link": str, "description": str, "pubDate": str, "size": str, "sizename": str,
		"guid": str, "host": str, "path": str, "file": str, "urlhash": str, "ranking": str}
	facet := map[string]string{"facetname": str, "displayname": str, "type": str, "min": str, "max": str, "mean": str,
		"elements": "array"}
	element := map[string]string{"name": str, "count": str, "modifier": str, "url": str}
	numeric := regexp.MustCompile(`^-?[0-9]+$`)
	date := regexp.MustCompile(`^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-3][0-9] (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-2][0-9]:[0-5][0-9]:[0-5][0-9] \+0000$`)

	srv := newYaCyServer(t, yacyCorpus, "")
	for _, path := range []string{"/yacysearch.json", "/yacy/grid/mcp/index/yacysearch.json"} {
		code, h, body := yacyGet(t, srv, path, url.Values{"query": {"zebrafish"}}, "")
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s = %d %q, want 200 application/json", path, code, h.Get("Content-Type"))
		}
		var root map[string]any
		if err := json.Unmarshal(body, &root); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		chans, _ := root["channels"].([]any)
		if len(chans) != 1 {
			t.Fatalf("%s: channels = %v, want one", path, root["channels"])
		}
		ch := checkShape(t, path+" channel", chans[0], channel)
		for _, k := range []string{"totalResults", "startIndex", "itemsPerPage"} {
			if !numeric.MatchString(ch[k].(string)) {
				t.Errorf("%s channel %s = %q, want a number in a string", path, k, ch[k])
			}
		}
		items := ch["items"].([]any)
		if len(items) == 0 {
			t.Fatalf("%s: no items", path)
		}
		for _, x := range items {
			it := checkShape(t, path+" item", x, item)
			if !numeric.MatchString(it["size"].(string)) || !date.MatchString(it["pubDate"].(string)) {
				t.Errorf("%s item size %q, pubDate %q: want a number and YaCy's date", path, it["size"], it["pubDate"])
			}
		}
		navs := ch["navigation"].([]any)
		if len(navs) != 2 {
			t.Errorf("%s: %d facets, want hosts and filetype", path, len(navs))
		}
		for _, x := range navs {
			f := checkShape(t, path+" facet", x, facet)
			for _, e := range f["elements"].([]any) {
				el := checkShape(t, path+" facet element", e, element)
				if !numeric.MatchString(el["count"].(string)) || !strings.HasPrefix(el["url"].(string), "yacysearch.json?query=") ||
					!strings.Contains(el["modifier"].(string), "%3A") {
					t.Errorf("%s facet element %v: want a count string, a yacysearch.json url and an encoded modifier", path, el)
				}
			}
		}
	}
}

// checkShape fails t unless v is an object with exactly the keys of want,
// each of the JSON type named ("string", "array").
func checkShape(t *testing.T, what string, v any, want map[string]string) map[string]any {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s = %T, want an object", what, v)
	}
	for k, typ := range want {
		var ok bool
		switch typ {
		case "string":
			_, ok = obj[k].(string)
		case "array":
			_, ok = obj[k].([]any)
		}
		if !ok {
			t.Errorf("%s field %q = %#v, want a %s", what, k, obj[k], typ)
		}
	}
	for k := range obj {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has field %q that YaCy does not send", what, k)
		}
	}
	return obj
}

func TestYaCySearchRSS(t *testing.T) {
	srv := newYaCyServer(t, yacyCorpus, "")
	var rss struct {
		XMLName xml.Name `xml:"rss"`
		Version string   `xml:"version,attr"`
		Channel struct {
			Title        string `xml:"title"`
			Description  string `xml:"description"`
			Link         string `xml:"link"`
			TotalResults string `xml:"http://a9.com/-/spec/opensearch/1.1/ totalResults"`
			StartIndex   string `xml:"http://a9.com/-/spec/opensearch/1.1/ startIndex"`
			ItemsPerPage string `xml:"http://a9.com/-/spec/opensearch/1.1/ itemsPerPage"`
			Query        struct {
				Role        string `xml:"role,attr"`
				SearchTerms string `xml:"searchTerms,attr"`
			} `xml:"http://a9.com/-/spec/opensearch/1.1/ Query"`
			Items []struct {
				Title       string `xml:"title"`
				Link        string `xml:"link"`
				Description string `xml:"description"`
				PubDate     string `xml:"pubDate"`
				GUID        struct {
					IsPermaLink string `xml:"isPermaLink,attr"`
					ID          string `xml:",chardata"`
				} `xml:"guid"`
			} `xml:"item"`
		} `xml:"channel"`
	}
	code, h, body := yacyGet(t, srv, "/yacysearch.rss", url.Values{"query": {"zebrafish site:a.example"}, "maximumRecords": {"2"}, "startRecord": {"1"}}, "")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/rss+xml") {
		t.Fatalf("GET /yacysearch.rss = %d %q %s, want 200 application/rss+xml", code, h.Get("Content-Type"), body)
	}
	if !strings.HasPrefix(string(body), "<?xml") {
		t.Errorf("RSS does not start with an XML declaration: %.40q", body)
	}
	dec := xml.NewDecoder(strings.NewReader(string(body)))
	dec.Strict = true
	if err := dec.Decode(&rss); err != nil {
		t.Fatalf("RSS is not well-formed: %v\n%s", err, body)
	}
	c := rss.Channel
	if rss.Version != "2.0" || c.TotalResults != "3" || c.StartIndex != "1" || c.ItemsPerPage != "2" ||
		c.Query.Role != "request" || c.Query.SearchTerms != "zebrafish site:a.example" || len(c.Items) != 2 {
		t.Errorf("RSS version %q, totalResults %q, startIndex %q, itemsPerPage %q, query %+v, %d items; want 2.0, 3, 1, 2, request for the query, 2 items",
			rss.Version, c.TotalResults, c.StartIndex, c.ItemsPerPage, c.Query, len(c.Items))
	}
	for _, it := range c.Items {
		if !slices.Contains(fixtureURLs("d1", "d2", "d3"), it.Link) || it.Title == "" || it.GUID.IsPermaLink != "false" || it.GUID.ID == "" {
			t.Errorf("RSS item %+v: want a link of a.example, a title and a guid", it)
		}
		if _, err := time.Parse(time.RFC1123Z, it.PubDate); err != nil {
			t.Errorf("RSS pubDate %q: %v", it.PubDate, err)
		}
	}
}

func TestYaCySearchAuth(t *testing.T) {
	const token = "s3cret"
	srv := newYaCyServer(t, yacyCorpus, token)
	for _, path := range []string{"/yacysearch.json", "/yacy/grid/mcp/index/yacysearch.json", "/yacysearch.rss"} {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {"wrong", http.StatusUnauthorized}, {token, http.StatusOK}} {
			if code, _, body := yacyGet(t, srv, path, url.Values{"query": {"zebrafish"}}, tc.token); code != tc.want {
				t.Errorf("GET %s with token %q = %d %s, want %d", path, tc.token, code, body, tc.want)
			}
		}
	}
}

// searxPython returns the Python that has searx installed: the one named by
// GRIDCRAWL_SEARX_PYTHON, as scripts/yacyclient/setup.sh prints it. Where
// that is unset the test is skipped, except where backends are required
// (CI, make test): there setup.sh is run, and the test fails if it cannot
// install the client.
func searxPython(t *testing.T) string {
	t.Helper()
	if py := os.Getenv("GRIDCRAWL_SEARX_PYTHON"); py != "" {
		return py
	}
	const hint = `run eval "$(scripts/yacyclient/setup.sh)" to install searx's YaCy client`
	if !testenv.Required() {
		t.Skip("GRIDCRAWL_SEARX_PYTHON is not set; " + hint)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join("..", "..", "..", "scripts", "yacyclient", "setup.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GRIDCRAWL_SEARX_PYTHON is not set and the YaCy client must run here (CI=true or GRIDCRAWL_REQUIRE_BACKENDS=1), but setup.sh failed: %v", err)
	}
	_, py, ok := strings.Cut(strings.TrimSpace(string(out)), "GRIDCRAWL_SEARX_PYTHON=")
	if !ok || py == "" {
		t.Fatalf("setup.sh printed %q, want export GRIDCRAWL_SEARX_PYTHON=...", out)
	}
	return py
}

// TestYaCySearxClient searches through a YaCy client that gridcrawl did not
// write: the YaCy engine of the metasearch engine searx (0.17.0 from PyPI,
// searx/engines/yacy.py), loaded and run unchanged by
// scripts/yacyclient/searx_yacy.py (see searxPython).
func TestYaCySearxClient(t *testing.T) {
	py := searxPython(t)
	srv := newYaCyServer(t, yacyCorpus, "") // searx's engine sends no credentials: a loopback peer
	type result struct {
		URL, Title, Content, PublishedDate string
	}
	run := func(query, page, category string) (string, []result) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), py, filepath.Join("..", "..", "..", "scripts", "yacyclient", "searx_yacy.py"),
			srv.URL, query, page, category)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("searx yacy engine for %q page %s: %v\n%s", query, page, err, stderr)
		}
		var got struct {
			URL     string
			Results []struct {
				URL           string `json:"url"`
				Title         string `json:"title"`
				Content       string `json:"content"`
				PublishedDate string `json:"publishedDate"`
			}
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("searx output: %v\n%s", err, out)
		}
		var rs []result
		for _, r := range got.Results {
			rs = append(rs, result{r.URL, r.Title, r.Content, r.PublishedDate})
		}
		return got.URL, rs
	}

	// searx asks for 5 results a page: the 7 documents are pages 1 and 2.
	byURL := map[string]yacyFixture{}
	for _, f := range yacyCorpus {
		byURL[f.url] = f
	}
	var seen []string
	for _, page := range []string{"1", "2"} {
		asked, rs := run("zebrafish", page, "general")
		if u, err := url.Parse(asked); err != nil || u.Path != "/yacysearch.json" {
			t.Errorf("searx asked for %q, want /yacysearch.json", asked)
		}
		if want := map[string]int{"1": 5, "2": 2}[page]; len(rs) != want {
			t.Errorf("page %s: %d results, want %d", page, len(rs), want)
		}
		for _, r := range rs {
			f, ok := byURL[r.URL]
			if !ok {
				t.Errorf("searx result %q is not a document of the corpus", r.URL)
				continue
			}
			seen = append(seen, r.URL)
			wantTitle := f.title
			if wantTitle == "" {
				wantTitle = f.url
			}
			if r.Title != wantTitle || !strings.Contains(strings.ToLower(r.Content), "zebrafish") || strings.Contains(r.Content, "<b>") {
				t.Errorf("searx result %s: title %q, content %q; want title %q and the text with zebrafish, without markup", r.URL, r.Title, r.Content, wantTitle)
			}
			// dateutil reads our pubDate back to the document's time.
			if pd, err := time.Parse(time.RFC3339, r.PublishedDate); err != nil || !pd.Equal(f.modified) {
				t.Errorf("searx result %s: publishedDate %q, want %s", r.URL, r.PublishedDate, f.modified.Format(time.RFC3339))
			}
		}
	}
	slices.Sort(seen)
	if diff := cmp.Diff(fixtureURLs("d1", "d2", "d3", "d4", "d5", "d6", "d7"), seen); diff != "" {
		t.Errorf("searx results of both pages (-want +got):\n%s", diff)
	}
	// Operators pass through the client; images are not indexed.
	if _, rs := run("zebrafish site:b.example", "1", "general"); len(rs) != 2 {
		t.Errorf("searx site:b.example: %d results, want 2", len(rs))
	}
	if _, rs := run("zebrafish", "1", "images"); len(rs) != 0 {
		t.Errorf("searx images: %d results, want none", len(rs))
	}
}
