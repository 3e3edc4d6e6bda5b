// Package searchtest is the conformance suite of search.Index: every
// implementation, embedded or remote, must pass Run.
//
// The suite tolerates an index shared with other tests: each test uses crawl
// ids, document ids and search words of its own.
package searchtest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
)

// Harness makes the indices under test.
type Harness struct {
	// New returns an index, closed by the harness when t ends.
	New func(t *testing.T) search.Index
	// Reopen closes x and returns a new index on the same storage. Nil skips
	// the restart test.
	Reopen func(t *testing.T, x search.Index) search.Index
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"UpsertIdempotent", testUpsertIdempotent},
		{"FindsWords", testFindsWords},
		{"AllWordsMustMatch", testAllWords},
		{"TitleRanksAboveText", testRanking},
		{"CrawlFilter", testCrawlFilter},
		{"Pagination", testPagination},
		{"Get", testGet},
		{"Count", testCount},
		{"HitFieldsAndSnippet", testHitFields},
		{"SyntaxCharacters", testSyntax},
		{"NoIndexNotStored", testNoIndex},
		{"Reopen", testReopen},
		{"WritesCounted", testWrites},
		{"Operators", testOperators},
		{"Facets", testFacets},
		{"CollectionFilter", testCollection},
		{"Documents", testDocuments},
		{"OneHitPerURL", testOneHitPerURL},
		{"CJKWords", testCJK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

var cmpTime = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// word returns a search word that no other document of any test contains.
func word() string { return "w" + strings.ToLower(rand.Text()) }

func newCrawlID() string { return "stc-" + rand.Text() }

// filler is text that matches none of the suite's words.
const filler = "The quick brown fox jumps over the lazy dog while the crawler fetches pages politely. "

// doc returns a document of crawlID with a fresh id.
func doc(crawlID, title, text string) contracts.Document {
	id := "std-" + rand.Text()
	now := time.Now().UTC().Truncate(time.Millisecond)
	return contracts.Document{
		ID:                 id,
		CrawlID:            crawlID,
		URL:                "https://example.com/" + strings.ToLower(id),
		Host:               "example.com",
		SSLD:               "example.com",
		HostOrganization:   "example",
		Title:              []string{title},
		Text:               text,
		ContentType:        []string{"text/html"},
		HTTPStatus:         200,
		LoadDate:           now,
		LastModified:       now.Add(-time.Hour),
		URLProtocol:        "https",
		URLFileName:        strings.ToLower(id),
		InboundLinks:       []string{},
		OutboundLinks:      []string{},
		Images:             []string{},
		InboundAnchorText:  []string{},
		OutboundAnchorText: []string{},
	}
}

func mustUpsert(t *testing.T, x search.Index, docs ...contracts.Document) {
	t.Helper()
	if err := x.Upsert(t.Context(), docs); err != nil {
		t.Fatalf("Upsert(%d docs) error: %v", len(docs), err)
	}
}

func mustSearch(t *testing.T, x search.Index, q search.Query) search.Result {
	t.Helper()
	res, err := x.Search(t.Context(), q)
	if err != nil {
		t.Fatalf("Search(%+v) error: %v", q, err)
	}
	return res
}

func hitIDs(res search.Result) []string {
	var ids []string
	for _, h := range res.Hits {
		ids = append(ids, h.ID)
	}
	return ids
}

func sorted(ids ...string) []string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

func mustCount(t *testing.T, x search.Index, crawlID string) int64 {
	t.Helper()
	n, err := x.Count(t.Context(), crawlID)
	if err != nil {
		t.Fatalf("Count(%q) error: %v", crawlID, err)
	}
	return n
}

func testUpsertIdempotent(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	common, w1, w2, w3 := word(), word(), word(), word()
	d := doc(crawl, "first "+w1, filler+common)
	mustUpsert(t, x, d)
	mustUpsert(t, x, d)
	if n := mustCount(t, x, crawl); n != 1 {
		t.Errorf("Count after upserting one document twice = %d, want 1", n)
	}

	d2 := d
	d2.Title = []string{"second " + w2}
	mustUpsert(t, x, d2)
	if n := mustCount(t, x, crawl); n != 1 {
		t.Errorf("Count after replacing the document = %d, want 1", n)
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{w1, nil},
		{w2, []string{d.ID}},
		{common, []string{d.ID}},
	} {
		res := mustSearch(t, x, search.Query{Q: tc.q, CrawlID: crawl, Limit: 10})
		if diff := cmp.Diff(tc.want, hitIDs(res)); diff != "" || res.Total != int64(len(tc.want)) {
			t.Errorf("Search(%q) after replace: Total %d, ids (-want +got):\n%s", tc.q, res.Total, diff)
		}
	}

	// Two versions in one batch: the later one wins.
	d3 := d
	d3.Title = []string{"third " + w3}
	mustUpsert(t, x, d, d3)
	if n := mustCount(t, x, crawl); n != 1 {
		t.Errorf("Count after a batch with two versions = %d, want 1", n)
	}
	got, err := x.Get(t.Context(), d.ID)
	if err != nil || got.FirstTitle() != d3.FirstTitle() {
		t.Errorf("Get(%q) = title %q, %v, want %q", d.ID, got.Title, err, d3.Title)
	}
	if res := mustSearch(t, x, search.Query{Q: common, Limit: 10}); res.Total != 1 {
		t.Errorf("Search(%q) Total = %d, want 1 (no stale duplicates)", common, res.Total)
	}
}

func testFindsWords(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	wt, wx, wd, wh := word(), word(), word(), word()
	inTitle := doc(crawl, "About "+wt, filler)
	inText := doc(crawl, "Plain", filler+" and "+wx+" too. "+filler)
	inDesc := doc(crawl, "Plain", filler)
	inDesc.Description = []string{"Described as " + wd}
	inHeading := doc(crawl, "Plain", filler)
	inHeading.H1 = []string{"Intro"}
	inHeading.H3 = []string{"Section " + wh}
	mustUpsert(t, x, inTitle, inText, inDesc, inHeading)
	for _, tc := range []struct {
		name, q string
		want    string
	}{
		{"title", wt, inTitle.ID},
		{"text", wx, inText.ID},
		{"description", wd, inDesc.ID},
		{"heading", wh, inHeading.ID},
		{"upper case", strings.ToUpper(wx), inText.ID},
	} {
		res := mustSearch(t, x, search.Query{Q: tc.q, CrawlID: crawl, Limit: 10})
		if diff := cmp.Diff([]string{tc.want}, hitIDs(res)); diff != "" || res.Total != 1 {
			t.Errorf("%s: Search(%q) Total %d, ids (-want +got):\n%s", tc.name, tc.q, res.Total, diff)
		}
	}
}

func testAllWords(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	wa, wb := word(), word()
	both := doc(crawl, "Both", filler+wa+" "+filler+wb)
	onlyA := doc(crawl, "Only "+wa, filler)
	mustUpsert(t, x, both, onlyA)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{wa + " " + wb, []string{both.ID}},
		{wb + " " + wa, []string{both.ID}},
		{wa, sorted(both.ID, onlyA.ID)},
		{wa + " " + word(), nil},
	} {
		res := mustSearch(t, x, search.Query{Q: tc.q, Limit: 10})
		got := sorted(hitIDs(res)...)
		if len(got) == 0 {
			got = nil
		}
		if diff := cmp.Diff(tc.want, got); diff != "" || res.Total != int64(len(tc.want)) {
			t.Errorf("Search(%q) Total %d, ids (-want +got):\n%s", tc.q, res.Total, diff)
		}
	}
}

func testRanking(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	text := strings.Repeat(filler, 5)
	textOnly := doc(crawl, "Something else", text+w+" "+text)
	title := doc(crawl, "All about "+w, text+text)
	mustUpsert(t, x, textOnly, title)
	res := mustSearch(t, x, search.Query{Q: w, CrawlID: crawl, Limit: 10})
	if diff := cmp.Diff([]string{title.ID, textOnly.ID}, hitIDs(res)); diff != "" {
		t.Errorf("Search(%q): title match must rank above text-only match (-want +got):\n%s", w, diff)
	}
	for i := 1; i < len(res.Hits); i++ {
		if res.Hits[i].Score > res.Hits[i-1].Score {
			t.Errorf("hit %d score %v > hit %d score %v: hits not ordered by score", i, res.Hits[i].Score, i-1, res.Hits[i-1].Score)
		}
	}
}

func testCrawlFilter(t *testing.T, h Harness) {
	x := h.New(t)
	c1, c2 := newCrawlID(), newCrawlID()
	w := word()
	a, b, c := doc(c1, "A "+w, filler), doc(c1, "B", filler+w), doc(c2, "C "+w, filler)
	mustUpsert(t, x, a, b, c)
	for _, tc := range []struct {
		crawl string
		want  []string
	}{
		{c1, sorted(a.ID, b.ID)},
		{c2, []string{c.ID}},
		{"", sorted(a.ID, b.ID, c.ID)},
		{newCrawlID(), nil},
	} {
		res := mustSearch(t, x, search.Query{Q: w, CrawlID: tc.crawl, Limit: 10})
		got := sorted(hitIDs(res)...)
		if len(got) == 0 {
			got = nil
		}
		if diff := cmp.Diff(tc.want, got); diff != "" || res.Total != int64(len(tc.want)) {
			t.Errorf("Search(%q in crawl %q) Total %d, ids (-want +got):\n%s", w, tc.crawl, res.Total, diff)
		}
		for _, h := range res.Hits {
			if tc.crawl != "" && h.CrawlID != tc.crawl {
				t.Errorf("Search in crawl %q returned hit %q of crawl %q", tc.crawl, h.ID, h.CrawlID)
			}
		}
	}
}

func testPagination(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	var all []string
	var docs []contracts.Document
	for i := range 5 {
		// Different strengths of match give a well-defined order.
		d := doc(crawl, fmt.Sprintf("Page %d", i), filler+strings.Repeat(w+" ", i+1))
		docs = append(docs, d)
		all = append(all, d.ID)
	}
	mustUpsert(t, x, docs...)
	var got []string
	for _, tc := range []struct{ offset, want int }{{0, 2}, {2, 2}, {4, 1}, {6, 0}} {
		res := mustSearch(t, x, search.Query{Q: w, CrawlID: crawl, Offset: tc.offset, Limit: 2})
		if res.Total != 5 || len(res.Hits) != tc.want {
			t.Errorf("Search(offset %d, limit 2) = Total %d, %d hits, want 5, %d", tc.offset, res.Total, len(res.Hits), tc.want)
		}
		got = append(got, hitIDs(res)...)
	}
	if diff := cmp.Diff(sorted(all...), sorted(got...)); diff != "" {
		t.Errorf("ids over all pages (-want +got):\n%s", diff)
	}
}

func testGet(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	d := doc(crawl, "Full document", filler+filler)
	d.Description = []string{"A description"}
	d.Language = "en"
	d.H1 = []string{"One"}
	d.H2 = []string{"Two\nlines"}
	d.InboundLinks, d.InboundAnchorText = []string{"https://example.com/a"}, []string{"A"}
	d.OutboundLinks, d.OutboundAnchorText = []string{"https://example.org/"}, []string{""}
	d.LinksCount, d.LinksNofollowCount, d.InboundLinksCount, d.OutboundLinksCount, d.OutboundLinksNofollowCount = 2, 1, 1, 1, 1
	d.Images, d.ImagesCount = []string{"https://example.com/i.png"}, 1
	d.CrawlDepth = 2
	d.Robots = contracts.RobotsMetaNoArchive | contracts.RobotsHeaderNoSnippet
	d.Collection = []string{"user"}
	d.Keywords, d.Author, d.Charset, d.ResponseTime, d.Size = "k1 k2", "An Author", "windows-1252", 17, 3000
	d.WARCKey, d.WARCOffset, d.WARCLength = "warc/x.warc.gz", 10, 2000
	mustUpsert(t, x, d)
	got, err := x.Get(t.Context(), d.ID)
	if err != nil {
		t.Fatalf("Get(%q) error: %v", d.ID, err)
	}
	if diff := cmp.Diff(d, got, cmpTime); diff != "" {
		t.Errorf("Get(%q) (-want +got):\n%s", d.ID, diff)
	}
	missing := "std-missing-" + rand.Text()
	if _, err := x.Get(t.Context(), missing); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("Get(%q) error = %v, want ErrNotFound", missing, err)
	}
}

func testCount(t *testing.T, h Harness) {
	x := h.New(t)
	c1, c2 := newCrawlID(), newCrawlID()
	mustUpsert(t, x, doc(c1, "a", filler), doc(c1, "b", filler), doc(c2, "c", filler))
	for _, tc := range []struct {
		crawl string
		want  int64
	}{{c1, 2}, {c2, 1}, {newCrawlID(), 0}} {
		if got := mustCount(t, x, tc.crawl); got != tc.want {
			t.Errorf("Count(%q) = %d, want %d", tc.crawl, got, tc.want)
		}
	}
	if got := mustCount(t, x, ""); got < 3 {
		t.Errorf(`Count("") = %d, want at least 3`, got)
	}
}

func testHitFields(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	d := doc(crawl, "Hit title", strings.Repeat(filler, 3)+"Here is the word "+w+" in the text. "+strings.Repeat(filler, 3))
	d.Description = []string{"Hit description"}
	d.Language = "en"
	mustUpsert(t, x, d)
	res := mustSearch(t, x, search.Query{Q: w, CrawlID: crawl, Limit: 10})
	if len(res.Hits) != 1 {
		t.Fatalf("Search(%q) = %d hits, want 1", w, len(res.Hits))
	}
	hit := res.Hits[0]
	want := contracts.SearchHit{
		ID: d.ID, CrawlID: d.CrawlID, URL: d.URL, Title: d.FirstTitle(), Description: d.Description[0],
		ContentType: d.ContentType[0], Language: d.Language, FetchTime: d.LoadDate,
		Host: d.Host, Size: d.Size, LastModified: d.LastModified,
		Snippet: hit.Snippet, Score: hit.Score,
	}
	if diff := cmp.Diff(want, hit, cmpTime); diff != "" {
		t.Errorf("Search(%q) hit (-want +got):\n%s", w, diff)
	}
	if !strings.Contains(strings.ToLower(hit.Snippet), w) {
		t.Errorf("Search(%q) snippet = %q, want it to contain the word", w, hit.Snippet)
	}
}

func testSyntax(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	d := doc(crawl, "Syntax", filler+w+" "+filler)
	mustUpsert(t, x, d)
	// Each of these is w with engine syntax around it, and must find d. (A
	// leading "-" excludes the word: see testOperators.)
	for _, q := range []string{`"` + w + `"`, `(` + w, `(` + w + `)`, w + `*`, `+` + w, w + `:`, w + `"`, `{` + w + `}`, `'` + w + `'`} {
		res, err := x.Search(t.Context(), search.Query{Q: q, CrawlID: crawl, Limit: 10})
		if err != nil {
			t.Errorf("Search(%q) error: %v", q, err)
			continue
		}
		if diff := cmp.Diff([]string{d.ID}, hitIDs(res)); diff != "" {
			t.Errorf("Search(%q) ids (-want +got):\n%s", q, diff)
		}
	}
	// These must not fail, whatever they find.
	for _, q := range []string{
		``, ` `, `"`, `""`, `"""`, `(`, `)`, `()`, `*`, `-`, `:`, `^`, `+`, `~`, `\`, `\"`, `'`, `[`, `]`, `{}`,
		`AND`, `OR`, `NOT`, `a AND`, `OR b`, `NOT c`, `a OR NOT b`, `NEAR(a b, 3)`, `NEAR`, `title:foo`,
		`col:"x" OR *`, `-a -b`, `a*b`, `*a`, `a^2`, `a~2`, `a:b:c`, `"unbalanced`, `(nested (parens)`,
		`{title body}: x`, `x AND (y OR`, "\x00", "\xff\xfe", "tab\tnew\nline", `🦊 狐狸 renard`, `ǅ ﬁ Ⅻ`,
		strings.Repeat("a ", 500), strings.Repeat("x", 5000), strings.Repeat(`"(`, 200),
	} {
		if _, err := x.Search(t.Context(), search.Query{Q: q, CrawlID: crawl, Limit: 10}); err != nil {
			t.Errorf("Search(%q) error: %v", q, err)
		}
	}
}

func testNoIndex(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	d := doc(crawl, "Hidden "+w, filler)
	d.NoIndex = true
	mustUpsert(t, x, d)
	if _, err := x.Get(t.Context(), d.ID); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("Get(%q) of a NoIndex document: error %v, want ErrNotFound", d.ID, err)
	}
	if n := mustCount(t, x, crawl); n != 0 {
		t.Errorf("Count(%q) after a NoIndex document = %d, want 0", crawl, n)
	}
	if res := mustSearch(t, x, search.Query{Q: w, Limit: 10}); res.Total != 0 {
		t.Errorf("Search(%q) found a NoIndex document: Total %d", w, res.Total)
	}
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("harness has no Reopen")
	}
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	d := doc(crawl, "Persistent "+w, filler)
	mustUpsert(t, x, d)
	x = h.Reopen(t, x)
	res := mustSearch(t, x, search.Query{Q: w, Limit: 10})
	if diff := cmp.Diff([]string{d.ID}, hitIDs(res)); diff != "" {
		t.Errorf("Search(%q) after reopen (-want +got):\n%s", w, diff)
	}
	got, err := x.Get(t.Context(), d.ID)
	if err != nil {
		t.Fatalf("Get(%q) after reopen error: %v", d.ID, err)
	}
	if diff := cmp.Diff(d, got, cmpTime); diff != "" {
		t.Errorf("Get(%q) after reopen (-want +got):\n%s", d.ID, diff)
	}
	if n := mustCount(t, x, crawl); n != 1 {
		t.Errorf("Count(%q) after reopen = %d, want 1", crawl, n)
	}
	// Replacing still works on the reopened index.
	d.Title = []string{"Replaced"}
	mustUpsert(t, x, d)
	if res := mustSearch(t, x, search.Query{Q: w, Limit: 10}); res.Total != 0 {
		t.Errorf("Search(%q) after replacing the document = Total %d, want 0", w, res.Total)
	}
}

// testWrites checks that Writes counts every store of a document, including
// stores of identical content that leave the index unchanged.
func testWrites(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	writes := func(id string) int64 {
		t.Helper()
		n, err := x.Writes(t.Context(), id)
		if err != nil {
			t.Fatalf("Writes(%q) error: %v", id, err)
		}
		return n
	}
	d, other := doc(crawl, "counted", filler), doc(crawl, "other", filler)
	if _, err := x.Writes(t.Context(), d.ID); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("Writes(%q) of an unknown document: error %v, want ErrNotFound", d.ID, err)
	}
	mustUpsert(t, x, d, other)
	if n := writes(d.ID); n != 1 {
		t.Errorf("Writes after one Upsert = %d, want 1", n)
	}
	mustUpsert(t, x, d)
	mustUpsert(t, x, d)
	if n := writes(d.ID); n != 3 {
		t.Errorf("Writes after three Upserts of the same document = %d, want 3", n)
	}
	d2 := d
	d2.Title = []string{"counted again"}
	mustUpsert(t, x, d, d2) // two versions in one batch: one store
	if n := writes(d.ID); n != 4 {
		t.Errorf("Writes after a batch with two versions = %d, want 4", n)
	}
	if n := writes(other.ID); n != 1 {
		t.Errorf("Writes of a document stored once, beside one stored often = %d, want 1", n)
	}
	if n := mustCount(t, x, crawl); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	gone := other
	gone.NoIndex = true
	mustUpsert(t, x, gone)
	if _, err := x.Writes(t.Context(), other.ID); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("Writes(%q) of a removed document: error %v, want ErrNotFound", other.ID, err)
	}
}

// at returns d moved to the URL u (host and file type with it).
func at(d contracts.Document, host, path, ext string) contracts.Document {
	d.URL = "https://" + host + path
	d.Host = host
	d.FileExt = ext
	return d
}

func testOperators(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w, other, p1, p2 := word(), word(), word(), word()
	// Hosts and paths unique to this test, so that operator-only queries
	// see only its documents.
	site := strings.ToLower(rand.Text()) + ".test"
	html := at(doc(crawl, "Guide", filler+w+" "+p1+" "+p2), site, "/docs/Guide.html", "html")
	sub := at(doc(crawl, "Sub", filler+w+" "+p2+" "+p1), "www."+site, "/blog/post", "")
	pdf := at(doc(crawl, "Paper", filler+w+" "+other), "files."+site, "/papers/a.pdf", "pdf")
	elsewhere := at(doc(crawl, "Else", filler+w), "not"+site, "/docs/x.html", "html")
	mustUpsert(t, x, html, sub, pdf, elsewhere)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{w, []string{html.ID, sub.ID, pdf.ID, elsewhere.ID}},
		{w + " site:" + site, []string{html.ID, sub.ID, pdf.ID}},
		{w + " site:www." + site, []string{sub.ID}},
		{"site:" + site, []string{html.ID, sub.ID, pdf.ID}},
		{w + " filetype:pdf", []string{pdf.ID}},
		{w + " filetype:HTML site:" + site, []string{html.ID}},
		{w + " inurl:DOCS", []string{html.ID, elsewhere.ID}},
		{"inurl:/papers/ site:" + site, []string{pdf.ID}},
		{w + ` "` + p1 + " " + p2 + `"`, []string{html.ID}},
		{w + ` "` + p2 + " " + p1 + `"`, []string{sub.ID}},
		{w + " -" + other, []string{html.ID, sub.ID, elsewhere.ID}},
		{w + ` -"` + p1 + " " + p2 + `"`, []string{sub.ID, pdf.ID, elsewhere.ID}},
		{"site:" + site + " -" + p1, []string{pdf.ID}},
		{"-" + w, nil},
	} {
		res := mustSearch(t, x, search.Query{Q: tc.q, CrawlID: crawl, Limit: 10})
		if got := sorted(hitIDs(res)...); !slices.Equal(got, sorted(tc.want...)) || res.Total != int64(len(tc.want)) {
			t.Errorf("Search(%q) = %v (total %d), want %v", tc.q, got, res.Total, sorted(tc.want...))
		}
	}
}

func testFacets(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	a, b := strings.ToLower(rand.Text())+".test", strings.ToLower(rand.Text())+".test"
	docs := []contracts.Document{
		at(doc(crawl, "1", filler+w), a, "/1.html", "html"),
		at(doc(crawl, "2", filler+w), a, "/2.html", "html"),
		at(doc(crawl, "3", filler+w), a, "/3.pdf", "pdf"),
		at(doc(crawl, "4", filler+w), b, "/4", ""),
		at(doc(crawl, "5", filler), b, "/5.txt", "txt"), // does not match
	}
	mustUpsert(t, x, docs...)
	res := mustSearch(t, x, search.Query{Q: w, CrawlID: crawl, Limit: 1, Facets: true})
	want := map[string][]search.FacetValue{
		search.FacetHosts:     {{Value: a, Count: 3}, {Value: b, Count: 1}},
		search.FacetFileTypes: {{Value: "html", Count: 2}, {Value: "pdf", Count: 1}},
	}
	if d := cmp.Diff(want, res.Facets); d != "" {
		t.Errorf("Search(%q, Facets) facets (-want +got):\n%s", w, d)
	}
	if len(res.Hits) != 1 || res.Total != 4 {
		t.Errorf("Search(%q, Limit 1, Facets) = %d hits, total %d, want 1 and 4", w, len(res.Hits), res.Total)
	}
	if res := mustSearch(t, x, search.Query{Q: w, CrawlID: crawl}); res.Facets != nil {
		t.Errorf("Search without Facets returned facets %v", res.Facets)
	}
}

func testCollection(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	w := word()
	c1, c2 := "c"+strings.ToLower(rand.Text()), "c"+strings.ToLower(rand.Text())
	both := doc(crawl, "both", filler+w)
	both.Collection = []string{c1, c2}
	one := doc(crawl, "one", filler+w)
	one.Collection = []string{c1}
	none := doc(crawl, "none", filler+w)
	mustUpsert(t, x, both, one, none)
	for _, tc := range []struct {
		coll string
		want []string
	}{
		{"", []string{both.ID, one.ID, none.ID}},
		{c1, []string{both.ID, one.ID}},
		{c2, []string{both.ID}},
		{c1[:len(c1)-1], nil}, // a prefix of a collection is not the collection
	} {
		res := mustSearch(t, x, search.Query{Q: w, CrawlID: crawl, Collection: tc.coll})
		if got := sorted(hitIDs(res)...); !slices.Equal(got, sorted(tc.want...)) {
			t.Errorf("Search(%q, collection %q) = %v, want %v", w, tc.coll, got, sorted(tc.want...))
		}
	}
	got, err := x.Get(t.Context(), both.ID)
	if err != nil || !slices.Equal(got.Collection, both.Collection) {
		t.Errorf("Get(%q).Collection = %v, %v, want %v", both.ID, got.Collection, err, both.Collection)
	}
}

// testDocuments pages through a crawl's documents: each exactly once, whole
// (as Get returns it), in id order, none of another crawl.
func testDocuments(t *testing.T, h Harness) {
	x := h.New(t)
	crawl, other := newCrawlID(), newCrawlID()
	var want []contracts.Document
	for i := range 7 {
		d := doc(crawl, fmt.Sprintf("Export %d", i), filler)
		d.Description = []string{"described"}
		want = append(want, d)
	}
	mustUpsert(t, x, want...)
	mustUpsert(t, x, doc(other, "Other", filler))
	slices.SortFunc(want, func(a, b contracts.Document) int { return strings.Compare(a.ID, b.ID) })
	for _, limit := range []int{1, 3, 7, 100} {
		var got []contracts.Document
		after := ""
		for pages := 0; ; pages++ {
			page, err := x.Documents(t.Context(), crawl, after, limit)
			if err != nil {
				t.Fatalf("Documents(%q, %q, %d): %v", crawl, after, limit, err)
			}
			if len(page) > limit || pages > len(want) {
				t.Fatalf("Documents(%q, %q, %d) = %d documents after %d pages", crawl, after, limit, len(page), pages)
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].ID
		}
		if diff := cmp.Diff(want, got, cmpTime); diff != "" {
			t.Errorf("Documents pages of %d (-want +got):\n%s", limit, diff)
		}
	}
	if page, err := x.Documents(t.Context(), crawl, want[len(want)-1].ID, 10); err != nil || len(page) != 0 {
		t.Errorf("Documents after the last id = %d documents, %v; want none", len(page), err)
	}
}

// testOneHitPerURL: a URL fetched by several crawls is one hit, its newest
// matching document, and totals, pages and facets count URLs; AllCrawls
// lists every copy. "/" and "/index.html" are two URLs, and two hits.
func testOneHitPerURL(t *testing.T, h Harness) {
	x := h.New(t)
	c1, c2 := newCrawlID(), newCrawlID()
	w, oldOnly := word(), word()
	site := strings.ToLower(rand.Text()) + ".test"
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	// The older copy ranks better (w in its title), yet the newer is the hit.
	old := at(doc(c1, "Old "+w, filler+w+" "+oldOnly), site, "/a.html", "html")
	old.LoadDate = t0.Add(-time.Hour)
	newer := at(doc(c2, "New", filler+w), site, "/a.html", "html")
	newer.LoadDate = t0
	only := at(doc(c1, "Only", filler+w), site, "/b.html", "html")
	root := at(doc(c2, "Home", filler+w), site, "/", "")
	index := at(doc(c2, "Home", filler+w), site, "/index.html", "html")
	// A third crawl's copy of /b.html loaded at the same instant as the
	// first's: ties go to the smaller id.
	twin := at(doc(newCrawlID(), "Only", filler+w), site, "/b.html", "html")
	twin.LoadDate = only.LoadDate
	first := min(only.ID, twin.ID)
	mustUpsert(t, x, newer, old, only, root, index, twin)

	byURL := sorted(newer.ID, first, root.ID, index.ID)
	res := mustSearch(t, x, search.Query{Q: w, Limit: 10, Facets: true})
	if got := sorted(hitIDs(res)...); !slices.Equal(got, byURL) || res.Total != 4 {
		t.Errorf("Search(%q) = total %d, ids %v, want 4, %v (one per URL, the newest)", w, res.Total, got, byURL)
	}
	wantFacets := map[string][]search.FacetValue{
		search.FacetHosts:     {{Value: site, Count: 4}},
		search.FacetFileTypes: {{Value: "html", Count: 3}},
	}
	if d := cmp.Diff(wantFacets, res.Facets); d != "" {
		t.Errorf("Search(%q, Facets) facets (-want +got):\n%s", w, d)
	}
	var paged []string
	for off := range 5 {
		r := mustSearch(t, x, search.Query{Q: w, Offset: off, Limit: 1})
		if r.Total != 4 {
			t.Errorf("Search(%q, offset %d, limit 1) total = %d, want 4", w, off, r.Total)
		}
		paged = append(paged, hitIDs(r)...)
	}
	if got := sorted(paged...); !slices.Equal(got, byURL) {
		t.Errorf("Search(%q) one hit a page, ids over all pages = %v, want %v", w, got, byURL)
	}
	r := mustSearch(t, x, search.Query{Q: "site:" + site, Limit: 10})
	if got := sorted(hitIDs(r)...); !slices.Equal(got, byURL) || r.Total != 4 {
		t.Errorf("Search(site:%s) = total %d, ids %v, want 4, %v", site, r.Total, got, byURL)
	}

	all := sorted(old.ID, newer.ID, only.ID, twin.ID, root.ID, index.ID)
	res = mustSearch(t, x, search.Query{Q: w, Limit: 10, AllCrawls: true, Facets: true})
	if got := sorted(hitIDs(res)...); !slices.Equal(got, all) || res.Total != 6 {
		t.Errorf("Search(%q, AllCrawls) = total %d, ids %v, want 6, %v", w, res.Total, got, all)
	}
	if got := res.Facets[search.FacetHosts]; len(got) != 1 || got[0].Count != 6 {
		t.Errorf("Search(%q, AllCrawls) host facet = %v, want %s: 6", w, got, site)
	}

	// Within one crawl each URL has one document.
	res = mustSearch(t, x, search.Query{Q: w, CrawlID: c1, Limit: 10})
	if got, want := sorted(hitIDs(res)...), sorted(old.ID, only.ID); !slices.Equal(got, want) || res.Total != 2 {
		t.Errorf("Search(%q in crawl %s) = total %d, ids %v, want 2, %v", w, c1, res.Total, got, want)
	}
	// The newest of the matching documents: the older copy is the hit of a
	// word only it has.
	res = mustSearch(t, x, search.Query{Q: oldOnly, Limit: 10})
	if got := hitIDs(res); !slices.Equal(got, []string{old.ID}) || res.Total != 1 {
		t.Errorf("Search(%q) = total %d, ids %v, want 1, [%s]", oldOnly, res.Total, got, old.ID)
	}
}

// testCJK: words of Chinese, Japanese (kanji, hiragana, katakana) and
// Korean (Hangul, words with particles attached) are found inside the
// unspaced runs they are written in, as runs of consecutive characters: a
// page holding the characters apart is no hit of the word; a single
// character is found wherever it stands. Operators work with CJK words.
// (Whether a space or a punctuation mark between the characters parts
// them differs between backends: see docs/yacy.md.)
func testCJK(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID()
	site := strings.ToLower(rand.Text()) + ".test"
	ja := at(doc(crawl, "Japan", "日本の富士山は高い。東京タワーに行きました。コンピューターサイエンスを学ぶ。"), site, "/ja.html", "html")
	zh := at(doc(crawl, "China", "北京的故宫很有名。"), site, "/zh.pdf", "pdf")
	ko := at(doc(crawl, "Korea", "서울은 한국의 수도입니다."), site, "/ko.html", "html")
	both := at(doc(crawl, "Both", "北京的故宫和日本的富士山都很有名。"), "other"+site, "/both.html", "html")
	// The characters of the words above, apart.
	apart := at(doc(crawl, "Apart", "富の国。山の上に士がいる。故事と宫殿。서쪽 울타리가 있다。"), site, "/apart.html", "html")
	mustUpsert(t, x, ja, zh, ko, both, apart)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"富士山", []string{ja.ID, both.ID}},
		{"故宫", []string{zh.ID, both.ID}},
		{"서울", []string{ko.ID}},
		{"한국", []string{ko.ID}},
		{"수도", []string{ko.ID}},
		{"서울은", []string{ko.ID}},
		{"東京タワー", []string{ja.ID}},
		{"タワー", []string{ja.ID}},
		{"高い", []string{ja.ID}},
		{"日本", []string{ja.ID, both.ID}},
		{"富", []string{ja.ID, both.ID, apart.ID}},
		{"宫", []string{zh.ID, both.ID, apart.ID}},
		{"タ", []string{ja.ID}},
		{"コンピューター", []string{ja.ID}},
		{"수도 -서울", nil},
		{"서울 -서쪽", []string{ko.ID}},
		{"富士山 故宫", []string{both.ID}},
		{`"富士山"`, []string{ja.ID, both.ID}},
		{"富士山 -故宫", []string{ja.ID}},
		{"故宫 -富士山", []string{zh.ID}},
		{"富士山 site:" + site, []string{ja.ID}},
		{"故宫 filetype:pdf", []string{zh.ID}},
		{"富士山 inurl:both", []string{both.ID}},
		{"富士山は高い", []string{ja.ID}},
		{"富士山高い", nil},
		{"北京的故宫很有名", []string{zh.ID}},
	} {
		res := mustSearch(t, x, search.Query{Q: tc.q, CrawlID: crawl, Limit: 10})
		if got := sorted(hitIDs(res)...); !slices.Equal(got, sorted(tc.want...)) || res.Total != int64(len(tc.want)) {
			t.Errorf("Search(%q) = %v (total %d), want %v", tc.q, got, res.Total, sorted(tc.want...))
		}
	}
	// The snippet is the page text around the word, unchanged.
	for _, q := range []string{"故宫", "서울", "タワー"} {
		res := mustSearch(t, x, search.Query{Q: q, CrawlID: crawl, Limit: 10})
		for _, hit := range res.Hits {
			if !strings.Contains(hit.Snippet, q) {
				t.Errorf("Search(%q) hit %s snippet = %q, want it to contain %q", q, hit.ID, hit.Snippet, q)
			}
		}
	}
}
