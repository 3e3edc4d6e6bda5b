package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/scope"
	"github.com/gridcrawl/gridcrawl/services/internal/yacy"
)

// yacyAnswerBody is the answer of a crawl start as a client reads it.
type yacyAnswerBody struct {
	Success     bool              `json:"success"`
	Metadata    map[string]int    `json:"metadata"`
	Data        []map[string]any  `json:"data"`
	Actions     []map[string]any  `json:"actions"`
	CrawlID     string            `json:"crawl_id"`
	Comment     string            `json:"comment"`
	Error       string            `json:"error"`
	Field       string            `json:"field"`
	Unsupported []yacyUnsupported `json:"unsupported"`
}

// yacyUnsupported is an entry of the answer's unsupported list.
type yacyUnsupported struct {
	Parameter string `json:"parameter"`
	Value     string `json:"value"`
	Reason    string `json:"reason"`
}

// yacyServer serves MCP's API on embedded backends; token "" means
// embedded mode without a token.
func yacyServer(t *testing.T, token string) (base string, l *lifecycleMCP) {
	t.Helper()
	cfg := lifecycleConfig()
	cfg.Token = token
	l = newLifecycleMCP(t, cfg)
	return strings.TrimSuffix(l.api, "/api/v1/crawls"), l
}

// yacyEncoding sends a crawl start's parameters one way.
type yacyEncoding func(t *testing.T, base string, params [][2]string, hdr ...string) (int, yacyAnswerBody)

func yacyGET(t *testing.T, base string, params [][2]string, hdr ...string) (int, yacyAnswerBody) {
	t.Helper()
	return yacySend(t, http.MethodGet, base+yacy.CrawlStartPath+"?"+encodeParams(params), nil, "", hdr...)
}

func yacyPOSTForm(t *testing.T, base string, params [][2]string, hdr ...string) (int, yacyAnswerBody) {
	t.Helper()
	return yacySend(t, http.MethodPost, base+yacy.CrawlStartPath, strings.NewReader(encodeParams(params)),
		"application/x-www-form-urlencoded", hdr...)
}

func yacyPOSTMultipart(t *testing.T, base string, params [][2]string, hdr ...string) (int, yacyAnswerBody) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range params {
		if err := mw.WriteField(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return yacySend(t, http.MethodPost, base+yacy.CrawlStartPath, &buf, mw.FormDataContentType(), hdr...)
}

// encodeParams encodes parameters in their order, as a browser does.
func encodeParams(params [][2]string) string {
	parts := make([]string, len(params))
	for i, p := range params {
		parts[i] = url.QueryEscape(p[0]) + "=" + url.QueryEscape(p[1])
	}
	return strings.Join(parts, "&")
}

func yacySend(t *testing.T, method, u string, body io.Reader, contentType string, hdr ...string) (int, yacyAnswerBody) {
	t.Helper()
	if contentType != "" {
		hdr = append(hdr, "Content-Type", contentType)
	}
	a := call(t, method, u, body, hdr...)
	var out yacyAnswerBody
	if err := json.Unmarshal([]byte(a.body), &out); err != nil {
		t.Fatalf("%s %s: answer %q is not JSON: %v", method, u, a.body, err)
	}
	return a.status, out
}

// storedProfile reads a crawl's profile back through the API.
func storedProfile(t *testing.T, l *lifecycleMCP, id string) contracts.Profile {
	t.Helper()
	var st contracts.CrawlStatus
	if code := l.do(t, http.MethodGet, "/"+id, nil, &st); code != http.StatusOK {
		t.Fatalf("GET /api/v1/crawls/%s = %d", id, code)
	}
	return st.Profile
}

// Hand-written expectations: YaCy Grid's defaults as gridcrawl filters.
const (
	wantGridMustNot = `^(?:.*\.(js|css|jpg|jpeg|png|dmg|mpg|mpeg|zip|gz|exe|pkg))$|^[^#]*\?`
	wantNoQuery     = `^[^#]*\?`
)

// wantProfile is the profile of a crawl start of startURLs with YaCy
// Grid's defaults: depth 3, range=domain, its mustnotmatch, crawlingQ off,
// collection "user".
func wantProfile(name string, startURLs ...string) contracts.Profile {
	return contracts.Profile{Name: name, StartURLs: startURLs, MaxDepth: 3, Scope: contracts.ScopeDomain,
		CrawlMustNotMatch: wantGridMustNot, UserAgent: contracts.DefaultUserAgent, Politeness: contracts.DefaultPoliteness(),
		Collection: []string{"user"}}
}

// follows lists URLs found at depth 1 that the crawl must follow (true)
// or not (false), and pages it must index or not.
type follows map[string]bool

func TestYacyCrawlStartMapping(t *testing.T) {
	base, l := yacyServer(t, "")
	const exampleDomain = `^https?://(?:www\.)?(?:example\.com)(?::[0-9]+)?(?:[/?#].*)?$`
	tests := []struct {
		name    string
		params  [][2]string
		want    func(p *contracts.Profile)
		wantURL []string // start URLs; default https://example.com/
		// unsupported lists the parameters the answer must name.
		unsupported []string
		// unsupportedValues are the values the answer must give them.
		unsupportedValues map[string]string
		follow            follows
		index             follows
	}{
		{
			name:   "defaults of YaCy Grid",
			params: [][2]string{{"crawlingURL", "https://example.com/"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
			follow: follows{
				"https://example.com/a": true, "http://www.example.com/b": true, "https://example.com:8443/c": true,
				"https://blog.example.com/": false, "https://example.com.evil.test/": false, "https://other.test/": false,
				"https://example.com/s?q=1": false, "https://example.com/style.css": false, "https://example.com/page.html": true,
			},
		},
		{
			name:   "range=wide follows any host",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"range", "wide"}},
			want:   func(p *contracts.Profile) { p.Scope = contracts.ScopeAny },
			follow: follows{"https://other.test/": true, "https://example.com/x": true, "https://other.test/a.js": false},
		},
		{
			name:   "range=subpath keeps the start URL's directory",
			params: [][2]string{{"crawlingURL", "https://example.com/docs/index.html"}, {"range", "subpath"}},
			want: func(p *contracts.Profile) {
				p.CrawlMustMatch = `^https?://(?:www\.)?(?:example\.com/docs/)`
			},
			wantURL: []string{"https://example.com/docs/index.html"},
			follow: follows{
				"https://example.com/docs/a": true, "http://www.example.com/docs/b/c": true, "https://example.com/blog/": false,
				"https://example.com/docsx/": false, "https://other.test/example.com/docs/": false,
			},
		},
		{
			name: "range=domain with a mustmatch follows either (YaCy ORs them)",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"range", "domain"},
				{"mustmatch", ".*/wiki/.*"}},
			want: func(p *contracts.Profile) {
				p.Scope, p.CrawlMustMatch = contracts.ScopeAny, `^(?:.*/wiki/.*)$|`+exampleDomain
			},
			follow: follows{"https://example.com/a": true, "https://other.test/wiki/x": true, "https://other.test/a": false},
		},
		{
			name: "mustmatch is matched against the whole URL, as Java's matches does",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"range", "wide"},
				{"mustmatch", "https://example\\.com/a"}, {"mustnotmatch", ".*private.*"}, {"crawlingQ", "on"}},
			want: func(p *contracts.Profile) {
				p.Scope, p.CrawlMustMatch, p.CrawlMustNotMatch = contracts.ScopeAny, `^(?:https://example\.com/a)$`, `^(?:.*private.*)$`
			},
			follow: follows{"https://example.com/a": true, "https://example.com/ab": false, "https://x.test/https://example.com/a": false},
		},
		{
			name: "crawlingQ=on follows URLs with a query; an empty mustnotmatch excludes nothing",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingQ", "on"},
				{"mustnotmatch", ""}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch, p.CrawlMustNotMatch = exampleDomain, "" },
			follow: follows{"https://example.com/s?q=1": true, "https://example.com/app.js": true},
		},
		{
			name:   "crawlingQ=off and a mustnotmatch",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingQ", "off"}, {"mustnotmatch", ".*\\.pdf"}},
			want: func(p *contracts.Profile) {
				p.CrawlMustMatch, p.CrawlMustNotMatch = exampleDomain, `^(?:.*\.pdf)$|`+wantNoQuery
			},
			follow: follows{"https://example.com/s?q=1": false, "https://example.com/a.pdf": false, "https://example.com/a#x?y": true},
		},
		{
			name: "index filters",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"indexmustmatch", ".*/docs/.*"},
				{"indexmustnotmatch", ".*draft.*"}},
			want: func(p *contracts.Profile) {
				p.CrawlMustMatch, p.IndexMustMatch, p.IndexMustNotMatch = exampleDomain, `^(?:.*/docs/.*)$`, `^(?:.*draft.*)$`
			},
			index: follows{"https://example.com/docs/a": true, "https://example.com/docs/draft-1": false, "https://example.com/blog": false},
		},
		{
			name:   "crawlingDepth",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDepth", "0"}},
			want:   func(p *contracts.Profile) { p.MaxDepth, p.CrawlMustMatch = 0, exampleDomain },
		},
		{
			name:   "crawlingDomMaxPages alone limits pages per host",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDomMaxPages", "50"}},
			want:   func(p *contracts.Profile) { p.MaxPagesPerHost, p.CrawlMustMatch = 50, exampleDomain },
		},
		{
			name:   "crawlingDomMaxCheck=on",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDomMaxCheck", "on"}, {"crawlingDomMaxPages", "20"}},
			want:   func(p *contracts.Profile) { p.MaxPagesPerHost, p.CrawlMustMatch = 20, exampleDomain },
		},
		{
			name:   "crawlingDomMaxCheck=off ignores the page count, as YaCy does",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDomMaxCheck", "off"}, {"crawlingDomMaxPages", "20"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
		},
		{
			name:   "crawlingDomMaxPages=-1 is no limit",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDomMaxCheck", "on"}, {"crawlingDomMaxPages", "-1"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
		},
		{
			name:   "collection, comma-separated",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"collection", "docs, news_2026,docs"}},
			want: func(p *contracts.Profile) {
				p.Collection, p.CrawlMustMatch = []string{"docs", "news_2026"}, exampleDomain
			},
		},
		{
			name:   "an empty collection",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"collection", ""}},
			want:   func(p *contracts.Profile) { p.Collection, p.CrawlMustMatch = nil, exampleDomain },
		},
		{
			name:        "a collection for a URL pattern is left out and named",
			params:      [][2]string{{"crawlingURL", "https://example.com/"}, {"collection", "docs,blog:.*/blog/.*"}},
			want:        func(p *contracts.Profile) { p.Collection, p.CrawlMustMatch = []string{"docs"}, exampleDomain },
			unsupported: []string{"collection"},
		},
		{
			name:   "agentName as a literal user agent",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"agentName", "examplebot/1.0 (+https://example.com/bot)"}},
			want: func(p *contracts.Profile) {
				p.UserAgent, p.CrawlMustMatch = "examplebot/1.0 (+https://example.com/bot)", exampleDomain
			},
		},
		{
			name:   "agentName YaCy's own crawler keeps gridcrawl's user agent",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"agentName", "YaCy Internet (cautious)"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
		},
		{
			name:        "agentName of another client is named",
			params:      [][2]string{{"crawlingURL", "https://example.com/"}, {"agentName", "Googlebot"}},
			want:        func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
			unsupported: []string{"agentName"},
		},
		{
			name:   "priority=0",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"priority", "0"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
		},
		{
			name:   "priority=7",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"priority", "7"}},
			want:   func(p *contracts.Profile) { p.Priority, p.CrawlMustMatch = 7, exampleDomain },
		},
		{
			name:    "several start URLs, one a line, and one without a scheme",
			params:  [][2]string{{"crawlingURL", "https://a.test/x\r\nb.test\n\nhttp://www.c.test:8080/d/"}},
			wantURL: []string{"https://a.test/x", "https://b.test/", "http://www.c.test:8080/d/"},
			want: func(p *contracts.Profile) {
				p.Name = "a.test,b.test,www.c.test"
				p.CrawlMustMatch = `^https?://(?:www\.)?(?:a\.test|b\.test|c\.test)(?::[0-9]+)?(?:[/?#].*)?$`
			},
			follow: follows{"https://c.test/": true, "http://www.b.test/y": true, "https://d.test/": false},
		},
		{
			name:    "an IP start host",
			params:  [][2]string{{"crawlingURL", "http://127.0.0.1:8080/a/"}},
			wantURL: []string{"http://127.0.0.1:8080/a/"},
			want: func(p *contracts.Profile) {
				p.CrawlMustMatch = `^https?://(?:www\.)?(?:127\.0\.0\.1)(?::[0-9]+)?(?:[/?#].*)?$`
			},
			follow: follows{"http://127.0.0.1:8080/b": true, "http://127.0.0.2:8080/": false, "http://127.0.0.10/": false},
		},
		{
			name:    "an IPv6 start host",
			params:  [][2]string{{"crawlingURL", "http://[::1]:8080/"}, {"range", "subpath"}},
			wantURL: []string{"http://[::1]:8080/"},
			want: func(p *contracts.Profile) {
				p.Name, p.CrawlMustMatch = "::1", `^https?://(?:www\.)?(?:\[::1\]:8080/)`
			},
			follow: follows{"http://[::1]:8080/b": true, "http://[::2]:8080/": false},
		},
		{
			name:    "range=domain of more start hosts than one filter holds",
			params:  [][2]string{{"crawlingURL", manyHosts(300)}},
			wantURL: manyHostURLs(300),
			want: func(p *contracts.Profile) {
				p.Name = "crawl for 300 start points"
			},
			unsupported: []string{"range"},
			follow:      follows{"https://www.host-with-a-long-name-7.test/": true, "https://sub.host-with-a-long-name-299.test/": true, "https://other.test/": false},
		},
		{
			name:    "start URLs separated by '|' and spaces",
			params:  [][2]string{{"crawlingURL", "https://a.test/|https://b.test/ https://a.test/"}},
			wantURL: []string{"https://a.test/", "https://b.test/", "https://a.test/"},
			want: func(p *contracts.Profile) {
				p.Name = "a.test,b.test"
				p.CrawlMustMatch = `^https?://(?:www\.)?(?:a\.test|b\.test)(?::[0-9]+)?(?:[/?#].*)?$`
			},
		},
		{
			name: "deleteold=age is named",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"deleteold", "age"},
				{"deleteIfOlderNumber", "1"}, {"deleteIfOlderUnit", "day"}},
			want:        func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
			unsupported: []string{"deleteold"},
		},
		{
			name:   "deleteold=off",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"deleteold", "off"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
		},
		{
			name: "recrawl=reload of pages older than 7 days is named",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"recrawl", "reload"},
				{"reloadIfOlderNumber", "7"}, {"reloadIfOlderUnit", "day"}},
			want:              func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
			unsupported:       []string{"recrawl"},
			unsupportedValues: map[string]string{"recrawl": "reload (older than 7 days)"},
		},
		{
			name:              "recrawl=reload with YaCy Grid's default unit",
			params:            [][2]string{{"crawlingURL", "https://example.com/"}, {"recrawl", "reload"}, {"reloadIfOlderNumber", "1"}},
			want:              func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
			unsupported:       []string{"recrawl"},
			unsupportedValues: map[string]string{"recrawl": "reload (older than 1 day)"},
		},
		{
			name: "recrawl=reload of every page is what gridcrawl does",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"recrawl", "reload"},
				{"reloadIfOlderNumber", "0"}, {"reloadIfOlderUnit", "hour"}},
			want: func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
		},
		{
			name:        "recrawl=nodoubles is named",
			params:      [][2]string{{"crawlingURL", "https://example.com/"}, {"recrawl", "nodoubles"}},
			want:        func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
			unsupported: []string{"recrawl"},
		},
		{
			name: "flags gridcrawl honours",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingstart", "1"}, {"crawlingMode", "url"},
				{"obeyHtmlRobotsNoindex", "on"}, {"obeyHtmlRobotsNofollow", "on"}, {"followFrames", "on"}, {"indexText", "on"},
				{"indexMedia", "off"}, {"storeHTCache", "on"}, {"cachePolicy", "nocache"}, {"directDocByURL", "off"},
				{"crawlOrder", "off"}, {"countryMustMatchSwitch", "0"}, {"countryMustMatchList", "DE,FR"},
				{"ipMustmatch", ".*"}, {"ipMustnotmatch", ""}, {"snapshotsMaxDepth", "-1"}, {"timezoneOffset", "-60"},
				{"loaderHeadless", "false"}, {"storeAssets", "true"}, {"archiveWARC", "true"}, {"archiveIndex", "false"},
				{"archiveGraph", "false"}, {"crawlingDepthExtension", ""}, {"sitemapURL", ""}, {"crawlingFile", ""}},
			want: func(p *contracts.Profile) { p.CrawlMustMatch, p.Render = exampleDomain, contracts.RenderNever },
		},
		{
			name:   "loaderHeadless=true renders every page, as YaCy Grid does",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"loaderHeadless", "true"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch, p.Render = exampleDomain, contracts.RenderAlways },
		},
		{
			name:   "loaderHeadless=on from a form",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"loaderHeadless", "on"}},
			want:   func(p *contracts.Profile) { p.CrawlMustMatch, p.Render = exampleDomain, contracts.RenderAlways },
		},
		{
			name: "flags gridcrawl does not honour are named",
			params: [][2]string{{"crawlingURL", "https://example.com/"}, {"obeyHtmlRobotsNoindex", "off"},
				{"followFrames", "off"}, {"indexText", "off"}, {"indexMedia", "on"}, {"storeHTCache", "off"},
				{"cachePolicy", "if fresh"}, {"directDocByURL", "on"}, {"crawlOrder", "on"}, {"countryMustMatchSwitch", "1"},
				{"ipMustmatch", "10\\..*"}, {"snapshotsMaxDepth", "2"}, {"archiveIndex", "true"},
				{"indexcontentmustmatch", ".*yacy.*"}, {"noindexWhenCanonicalUnequalURL", "on"}, {"userId", "alice"},
				{"vocabulary_topics_class", "topic"}, {"vocabulary_other_class", ""}, {"madeUpParameter", "x"}},
			want: func(p *contracts.Profile) { p.CrawlMustMatch = exampleDomain },
			unsupported: []string{"archiveIndex", "cachePolicy", "countryMustMatchSwitch", "crawlOrder", "directDocByURL",
				"followFrames", "indexMedia", "indexText", "indexcontentmustmatch", "ipMustmatch",
				"madeUpParameter", "noindexWhenCanonicalUnequalURL", "obeyHtmlRobotsNoindex", "snapshotsMaxDepth",
				"storeHTCache", "userId", "vocabulary_topics_class"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, a := yacyGET(t, base, tc.params)
			if code != http.StatusOK || !a.Success || a.CrawlID == "" {
				t.Fatalf("crawl start = %d %+v, want 200, success and a crawl id", code, a)
			}
			got := storedProfile(t, l, a.CrawlID)
			urls := tc.wantURL
			if urls == nil {
				urls = []string{"https://example.com/"}
			}
			want := wantProfile(urlnorm.Host(mustParse(t, urls[0])), urls...)
			if tc.want != nil {
				tc.want(&want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stored profile differs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(withGridDefaults(tc.params, tc.unsupported), unsupportedNames(a)); diff != "" {
				t.Errorf("unsupported parameters differ (-want +got):\n%s", diff)
			}
			for _, u := range a.Unsupported {
				if want, ok := tc.unsupportedValues[u.Parameter]; ok && u.Value != want {
					t.Errorf("unsupported %s = %q, want %q", u.Parameter, u.Value, want)
				}
			}
			checkFollows(t, got, tc.follow, tc.index)
		})
	}
}

func manyHostURLs(n int) []string {
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://host-with-a-long-name-%d.test/", i)
	}
	return urls
}

func manyHosts(n int) string { return strings.Join(manyHostURLs(n), "\n") }

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// withGridDefaults adds to the unsupported parameter names of a crawl
// start those that params leave to a YaCy Grid default gridcrawl does not
// honour: cachePolicy ("if fresh") and recrawl ("nodoubles").
func withGridDefaults(params [][2]string, names []string) []string {
	out := slices.Clone(names)
	for _, p := range []string{"cachePolicy", "recrawl"} {
		if !slices.ContainsFunc(params, func(kv [2]string) bool { return kv[0] == p }) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestYacyCrawlStartDefaultsListed starts a crawl without cachePolicy and
// recrawl: the answer echoes YaCy Grid's defaults for them ("if fresh",
// "nodoubles"), which gridcrawl does not honour, so its unsupported list
// must name both, with those values.
func TestYacyCrawlStartDefaultsListed(t *testing.T) {
	base, _ := yacyServer(t, "")
	code, a := yacyGET(t, base, [][2]string{{"crawlingURL", "https://example.com/"}})
	if code != http.StatusOK || len(a.Data) != 1 {
		t.Fatalf("crawl start = %d %+v, want 200 with one data entry", code, a)
	}
	got := map[string]string{}
	for _, u := range a.Unsupported {
		got[u.Parameter] = u.Value
	}
	for param, echoed := range map[string]string{"cachePolicy": "if fresh", "recrawl": "nodoubles"} {
		if a.Data[0][param] != echoed {
			t.Errorf("data[0][%q] = %v, want YaCy Grid's default %q", param, a.Data[0][param], echoed)
		}
		if want := echoed + " (YaCy Grid's default)"; got[param] != want {
			t.Errorf("unsupported %s = %q, want %q (unsupported: %+v)", param, got[param], want, a.Unsupported)
		}
	}
}

func unsupportedNames(a yacyAnswerBody) []string {
	var names []string
	for _, u := range a.Unsupported {
		if u.Reason == "" {
			names = append(names, u.Parameter+" (without a reason)")
			continue
		}
		names = append(names, u.Parameter)
	}
	slices.Sort(names)
	return names
}

// checkFollows checks the crawl's decisions on URLs found at depth 1 and
// on pages to index against the hand-written expectations.
func checkFollows(t *testing.T, p contracts.Profile, follow, index follows) {
	t.Helper()
	rules, err := scope.New(p, 5)
	if err != nil {
		t.Fatalf("scope.New: %v", err)
	}
	for raw, want := range follow {
		u, err := urlnorm.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got, why := rules.Follow(u, raw, 1, 0); got != want {
			t.Errorf("Follow(%q) = %v (%s), want %v", raw, got, why, want)
		}
	}
	for raw, want := range index {
		if got := rules.Index(raw); got != want {
			t.Errorf("Index(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestYacyCrawlStartAnswer checks the answer's YaCy Grid shape.
func TestYacyCrawlStartAnswer(t *testing.T) {
	base, l := yacyServer(t, "")
	a := call(t, http.MethodGet, base+yacy.CrawlStartPath+"?crawlingURL=https://example.com/&crawlingDepth=2&priority=true", nil)
	if a.status != http.StatusOK {
		t.Fatalf("crawl start = %d %s, want 200", a.status, a.body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(a.body), &raw); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"actions", "crawl_id", "data", "metadata", "profile", "success", "unsupported"}, keys); diff != "" {
		t.Errorf("answer keys differ (-want +got):\n%s", diff)
	}
	var body yacyAnswerBody
	if err := json.Unmarshal([]byte(a.body), &body); err != nil {
		t.Fatal(err)
	}
	if body.Metadata["count"] != 1 || len(body.Data) != 1 || len(body.Actions) != 1 {
		t.Fatalf("metadata %v, %d data, %d actions; want count 1, one of each", body.Metadata, len(body.Data), len(body.Actions))
	}
	d := body.Data[0]
	for k, want := range map[string]any{"id": body.CrawlID, "crawlingURL": "https://example.com/", "crawlingDepth": 2.0,
		"priority": 1.0, "range": "domain", "collection": "user", "crawlingQ": "off"} {
		if d[k] != want {
			t.Errorf("data[0][%q] = %v, want %v", k, d[k], want)
		}
	}
	if act := body.Actions[0]; act["type"] != "crawler" || act["id"] != body.CrawlID {
		t.Errorf("actions[0] = %v, want the crawler action of %s", act, body.CrawlID)
	}
	if got := a.header.Get("Location"); got != "/api/v1/crawls/"+body.CrawlID {
		t.Errorf("Location = %q, want /api/v1/crawls/%s", got, body.CrawlID)
	}
	if body.Unsupported == nil {
		t.Error("unsupported is null, want []")
	}
	if p := storedProfile(t, l, body.CrawlID); p.MaxDepth != 2 || p.Priority != 1 {
		t.Errorf("stored depth %d priority %d, want 2 and 1", p.MaxDepth, p.Priority)
	}
}

// TestYacyCrawlStartEncodings sends one crawl start as a GET query string,
// an url-encoded POST and a multipart POST: all three start the same crawl.
func TestYacyCrawlStartEncodings(t *testing.T) {
	base, l := yacyServer(t, "")
	params := [][2]string{{"crawlingURL", "https://example.com/a\r\nhttps://example.org/"}, {"crawlingDepth", "4"},
		{"range", "wide"}, {"mustnotmatch", ".*\\.pdf"}, {"crawlingQ", "on"}, {"collection", "docs,news"}, {"priority", "2"}}
	want := contracts.Profile{Name: "example.com,example.org", StartURLs: []string{"https://example.com/a", "https://example.org/"},
		MaxDepth: 4, Scope: contracts.ScopeAny, CrawlMustNotMatch: `^(?:.*\.pdf)$`, UserAgent: contracts.DefaultUserAgent,
		Politeness: contracts.DefaultPoliteness(), Priority: 2, Collection: []string{"docs", "news"}}
	for name, send := range map[string]yacyEncoding{"GET": yacyGET, "POST form": yacyPOSTForm, "POST multipart": yacyPOSTMultipart} {
		t.Run(name, func(t *testing.T) {
			code, a := send(t, base, params)
			if code != http.StatusOK {
				t.Fatalf("crawl start = %d %+v, want 200", code, a)
			}
			if diff := cmp.Diff(want, storedProfile(t, l, a.CrawlID)); diff != "" {
				t.Errorf("stored profile differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestYacyCrawlStartUpload checks that an uploaded file is named, not
// read.
func TestYacyCrawlStartUpload(t *testing.T) {
	base, _ := yacyServer(t, "")
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("crawlingURL", "https://example.com/"); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("crawlingFile", "urls.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(fw, "https://example.org/\n"); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	code, a := yacySend(t, http.MethodPost, base+yacy.CrawlStartPath, &buf, mw.FormDataContentType())
	if code != http.StatusOK {
		t.Fatalf("crawl start = %d %+v, want 200", code, a)
	}
	if len(a.Unsupported) != 3 || a.Unsupported[0].Parameter != "crawlingFile" || a.Unsupported[0].Value != "urls.txt" {
		t.Errorf("unsupported = %+v, want crawlingFile urls.txt, then YaCy Grid's defaults cachePolicy and recrawl", a.Unsupported)
	}
}

// TestYacyCrawlStartYaCyForm posts YaCy's expert crawl start form
// (CrawlStartExpert.html, multipart/form-data to Crawler_p) as a browser
// sends it with the form's defaults: unchecked boxes are absent, and so
// are the fields its submit handler disables (filters left at ".*" or
// empty, the default collection, the page count without its checkbox, the
// age selects of unchosen options).
func TestYacyCrawlStartYaCyForm(t *testing.T) {
	base, l := yacyServer(t, "")
	form := [][2]string{
		{"crawlingMode", "url"}, {"crawlingURL", "https://example.com/"}, {"bookmarkTitle", ""},
		{"sitemapURL", ""}, {"crawlingFile", ""}, {"crawlingDepth", "3"}, {"obeyHtmlRobotsNoindex", "on"},
		{"range", "wide"}, {"countryMustMatchSwitch", "0"}, {"deleteold", "off"}, {"recrawl", "nodoubles"},
		{"cachePolicy", "iffresh"}, {"agentName", "YaCy Internet (cautious)"}, {"snapshotsMaxDepth", "-1"},
		{"snapshotsReplaceOld", "on"}, {"snapshotsMustnotmatch", ""}, {"snapshotsLoadImage", "false"},
		{"indexText", "on"}, {"indexMedia", "on"}, {"timezoneOffset", "-60"}, {"crawlingstart", "1"},
	}
	code, a := yacyPOSTMultipart(t, base, form)
	if code != http.StatusOK || !a.Success {
		t.Fatalf("crawl start = %d %+v, want 200", code, a)
	}
	want := wantProfile("example.com", "https://example.com/")
	want.Scope = contracts.ScopeAny
	if diff := cmp.Diff(want, storedProfile(t, l, a.CrawlID)); diff != "" {
		t.Errorf("stored profile differs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"cachePolicy", "indexMedia", "recrawl"}, unsupportedNames(a)); diff != "" {
		t.Errorf("unsupported parameters differ (-want +got):\n%s", diff)
	}
}

// TestYacyCrawlStartGridExamples sends the test URLs of YaCy Grid's
// CrawlStartService.
func TestYacyCrawlStartGridExamples(t *testing.T) {
	base, l := yacyServer(t, "")
	tests := []struct {
		query string
		want  func(p *contracts.Profile)
	}{
		{"crawlingURL=yacy.net&indexmustnotmatch=.*Mitmachen.*&mustmatch=.*yacy.net.*", func(p *contracts.Profile) {
			p.Name, p.StartURLs, p.Scope = "yacy.net", []string{"https://yacy.net/"}, contracts.ScopeAny
			p.CrawlMustMatch = `^(?:.*yacy.net.*)$|^https?://(?:www\.)?(?:yacy\.net)(?::[0-9]+)?(?:[/?#].*)?$`
			p.IndexMustNotMatch = `^(?:.*Mitmachen.*)$`
		}},
		{"crawlingURL=ix.de&crawlingDepth=6&priority=true", func(p *contracts.Profile) {
			p.Name, p.StartURLs, p.MaxDepth, p.Priority = "ix.de", []string{"https://ix.de/"}, 6, 1
			p.CrawlMustMatch = `^https?://(?:www\.)?(?:ix\.de)(?::[0-9]+)?(?:[/?#].*)?$`
		}},
		{"crawlingURL=tagesschau.de&loaderHeadless=false", func(p *contracts.Profile) {
			p.Name, p.StartURLs, p.Render = "tagesschau.de", []string{"https://tagesschau.de/"}, contracts.RenderNever
			p.CrawlMustMatch = `^https?://(?:www\.)?(?:tagesschau\.de)(?::[0-9]+)?(?:[/?#].*)?$`
		}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			a := call(t, http.MethodGet, base+yacy.CrawlStartPath+"?"+tc.query, nil)
			var body yacyAnswerBody
			if err := json.Unmarshal([]byte(a.body), &body); err != nil || a.status != http.StatusOK {
				t.Fatalf("crawl start = %d %s (%v), want 200", a.status, a.body, err)
			}
			want := wantProfile("")
			tc.want(&want)
			if diff := cmp.Diff(want, storedProfile(t, l, body.CrawlID)); diff != "" {
				t.Errorf("stored profile differs (-want +got):\n%s", diff)
			}
			// Only YaCy Grid's defaults that gridcrawl does not honour.
			if diff := cmp.Diff([]string{"cachePolicy", "recrawl"}, unsupportedNames(body)); diff != "" {
				t.Errorf("unsupported parameters differ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestYacyCrawlStartInvalid checks that invalid values fail with 400
// naming the YaCy parameter, and start no crawl.
func TestYacyCrawlStartInvalid(t *testing.T) {
	base, l := yacyServer(t, "")
	var names []string
	for i := range 17 {
		names = append(names, "c"+string(rune('a'+i)))
	}
	tests := []struct {
		name   string
		params [][2]string
		field  string
	}{
		{"no crawlingURL", [][2]string{{"crawlingDepth", "2"}}, "crawlingURL"},
		{"empty crawlingURL", [][2]string{{"crawlingURL", " \r\n "}}, "crawlingURL"},
		{"ftp start URL", [][2]string{{"crawlingURL", "ftp://example.com/"}}, "crawlingURL"},
		{"start URL without host", [][2]string{{"crawlingURL", "https://:80/"}}, "crawlingURL"},
		{"start URL with a bad host", [][2]string{{"crawlingURL", "https://%zz/"}}, "crawlingURL"},
		{"unparsable crawlingDepth", [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDepth", "three"}}, "crawlingDepth"},
		{"crawlingDepth over the limit", [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDepth", "101"}}, "crawlingDepth"},
		{"negative crawlingDepth", [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDepth", "-1"}}, "crawlingDepth"},
		{"bad mustmatch", [][2]string{{"crawlingURL", "https://example.com/"}, {"range", "wide"}, {"mustmatch", "(.*"}}, "mustmatch"},
		{"Java-only mustnotmatch", [][2]string{{"crawlingURL", "https://example.com/"}, {"mustnotmatch", "(?<=a)b"}}, "mustnotmatch"},
		{"possessive indexmustmatch", [][2]string{{"crawlingURL", "https://example.com/"}, {"indexmustmatch", "https?+://.*"}}, "indexmustmatch"},
		{"bad indexmustnotmatch", [][2]string{{"crawlingURL", "https://example.com/"}, {"indexmustnotmatch", "[a"}}, "indexmustnotmatch"},
		{"unknown range", [][2]string{{"crawlingURL", "https://example.com/"}, {"range", "everything"}}, "range"},
		{"loaderHeadless not a flag", [][2]string{{"crawlingURL", "https://example.com/"}, {"loaderHeadless", "chrome"}}, "loaderHeadless"},
		{"sitemap crawl", [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingMode", "sitemap"}, {"sitemapURL", "https://example.com/sitemap.xml"}}, "crawlingMode"},
		{"file crawl", [][2]string{{"crawlingMode", "file"}, {"crawlingFile", "/tmp/urls.txt"}}, "crawlingMode"},
		{"priority 10", [][2]string{{"crawlingURL", "https://example.com/"}, {"priority", "10"}}, "priority"},
		{"priority word", [][2]string{{"crawlingURL", "https://example.com/"}, {"priority", "high"}}, "priority"},
		{"bad collection name", [][2]string{{"crawlingURL", "https://example.com/"}, {"collection", "my docs"}}, "collection"},
		{"17 collections", [][2]string{{"crawlingURL", "https://example.com/"}, {"collection", strings.Join(names, ",")}}, "collection"},
		{"crawlingQ neither on nor off", [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingQ", "perhaps"}}, "crawlingQ"},
		{"crawlingDomMaxPages 0", [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDomMaxPages", "0"}}, "crawlingDomMaxPages"},
		{"unparsable crawlingDomMaxPages", [][2]string{{"crawlingURL", "https://example.com/"}, {"crawlingDomMaxPages", "1e3"}}, "crawlingDomMaxPages"},
		{"unparsable reloadIfOlderNumber", [][2]string{{"crawlingURL", "https://example.com/"}, {"recrawl", "reload"}, {"reloadIfOlderNumber", "x"}}, "reloadIfOlderNumber"},
		{"unknown reloadIfOlderUnit", [][2]string{{"crawlingURL", "https://example.com/"}, {"recrawl", "reload"}, {"reloadIfOlderUnit", "week"}}, "reloadIfOlderUnit"},
		{"unknown recrawl", [][2]string{{"crawlingURL", "https://example.com/"}, {"recrawl", "always"}}, "recrawl"},
		{"unknown deleteold", [][2]string{{"crawlingURL", "https://example.com/"}, {"deleteold", "all"}}, "deleteold"},
		{"unknown cachePolicy", [][2]string{{"crawlingURL", "https://example.com/"}, {"cachePolicy", "sometimes"}}, "cachePolicy"},
		{"agentName over two lines", [][2]string{{"crawlingURL", "https://example.com/"}, {"agentName", "bot/1\r\nX-Evil: 1"}}, "agentName"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for name, send := range map[string]yacyEncoding{"GET": yacyGET, "POST": yacyPOSTForm} {
				code, a := send(t, base, tc.params)
				if code != http.StatusBadRequest || a.Success || a.Field != tc.field || a.Error == "" || a.Comment == "" {
					t.Errorf("%s: crawl start = %d %+v, want 400 naming %s", name, code, a, tc.field)
				}
			}
		})
	}
	var list contracts.CrawlList
	if code := l.do(t, http.MethodGet, "", nil, &list); code != http.StatusOK || len(list.Crawls) != 0 {
		t.Errorf("after invalid crawl starts: %d crawls (status %d), want none", len(list.Crawls), code)
	}
}

// TestYacyCrawlStartAuth checks that the crawl start needs the API token
// when one is configured, as the rest of the API does.
func TestYacyCrawlStartAuth(t *testing.T) {
	const token = "s3cret-token"
	base, l := yacyServer(t, token)
	params := [][2]string{{"crawlingURL", "https://example.com/"}}
	for _, tc := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"wrong token", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"bearer token", []string{"Authorization", "Bearer " + token}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, send := range map[string]yacyEncoding{"GET": yacyGET, "POST": yacyPOSTForm} {
				if code, a := send(t, base, params, tc.hdr...); code != tc.want {
					t.Errorf("%s: crawl start = %d %+v, want %d", name, code, a, tc.want)
				}
			}
		})
	}
	crawls, err := l.set.Profiles.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(crawls) != 2 {
		t.Errorf("%d crawls stored, want the 2 started with the token", len(crawls))
	}
}

func TestYacyCrawlStartMethods(t *testing.T) {
	base, _ := yacyServer(t, "")
	for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
		a := call(t, method, base+yacy.CrawlStartPath+"?crawlingURL=https://example.com/", nil)
		if a.status != http.StatusMethodNotAllowed {
			t.Errorf("%s crawl start = %d %s, want 405", method, a.status, a.body)
		}
	}
	big := "crawlingURL=https://example.com/&mustnotmatch=" + strings.Repeat("a", yacy.MaxFormBytes)
	a := call(t, http.MethodPost, base+yacy.CrawlStartPath, strings.NewReader(big), "Content-Type", "application/x-www-form-urlencoded")
	if a.status != http.StatusRequestEntityTooLarge {
		t.Errorf("POST of a %d-byte form = %d %s, want 413", len(big), a.status, a.body)
	}
}

// TestAPICollection checks that POST /api/v1/crawls takes the collection
// field and validates it.
func TestAPICollection(t *testing.T) {
	_, l := yacyServer(t, "")
	var created contracts.CreateCrawlResponse
	body := map[string]any{"start_urls": []string{"https://example.com/"}, "collection": []string{"docs", "news"}}
	if code := l.do(t, http.MethodPost, "", body, &created); code != http.StatusCreated {
		t.Fatalf("POST /api/v1/crawls = %d, want 201", code)
	}
	if got := storedProfile(t, l, created.CrawlID).Collection; !slices.Equal(got, []string{"docs", "news"}) {
		t.Errorf("stored collection = %q, want [docs news]", got)
	}
	var e contracts.ErrorResponse
	body["collection"] = []string{"bad name"}
	if code := l.do(t, http.MethodPost, "", body, &e); code != http.StatusBadRequest || e.Field != "collection" {
		t.Errorf("POST with a bad collection = %d %+v, want 400 naming collection", code, e)
	}
}
