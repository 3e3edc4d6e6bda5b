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
	return contracts.Document{
		ID:          id,
		CrawlID:     crawlID,
		URL:         "https://example.com/" + strings.ToLower(id),
		Host:        "example.com",
		Title:       title,
		Text:        text,
		ContentType: "text/html",
		StatusCode:  200,
		FetchTime:   time.Now().Truncate(time.Millisecond),
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
	d2.Title = "second " + w2
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
	d3.Title = "third " + w3
	mustUpsert(t, x, d, d3)
	if n := mustCount(t, x, crawl); n != 1 {
		t.Errorf("Count after a batch with two versions = %d, want 1", n)
	}
	got, err := x.Get(t.Context(), d.ID)
	if err != nil || got.Title != d3.Title {
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
	inDesc.Description = "Described as " + wd
	inHeading := doc(crawl, "Plain", filler)
	inHeading.Headings = []string{"Intro", "Section " + wh}
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
	d.Description = "A description"
	d.Language = "en"
	d.Headings = []string{"One", "Two\nlines"}
	d.Links = []contracts.Link{{URL: "https://example.com/a", Text: "A"}, {URL: "https://example.org/", Nofollow: true}}
	d.Depth = 2
	d.Asset = contracts.AssetRef{Key: "warc/x.warc.gz", Offset: 10, Length: 2000}
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
	d.Description = "Hit description"
	d.Language = "en"
	mustUpsert(t, x, d)
	res := mustSearch(t, x, search.Query{Q: w, CrawlID: crawl, Limit: 10})
	if len(res.Hits) != 1 {
		t.Fatalf("Search(%q) = %d hits, want 1", w, len(res.Hits))
	}
	hit := res.Hits[0]
	want := contracts.SearchHit{
		ID: d.ID, CrawlID: d.CrawlID, URL: d.URL, Title: d.Title, Description: d.Description,
		ContentType: d.ContentType, Language: d.Language, FetchTime: d.FetchTime,
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
	// Each of these is w with engine syntax around it, and must find d.
	for _, q := range []string{`"` + w + `"`, `(` + w, `(` + w + `)`, w + `*`, `-` + w, `+` + w, w + `:`, w + `"`, `{` + w + `}`, `'` + w + `'`} {
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
	d.Title = "Replaced"
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
	d2.Title = "counted again"
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
