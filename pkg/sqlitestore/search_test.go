package sqlitestore

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
)

// wordsExpr is the FTS5 expression of the words of q (no phrases).
func wordsExpr(q string) string { return matchTerms(search.Words(q), nil) }

func TestMatchTerms(t *testing.T) {
	tests := []struct {
		name, q, want string
	}{
		{"words", "hello world", `"hello" "world"`},
		{"quotes", `"hello world"`, `"hello" "world"`},
		{"operators", `a AND (b OR NOT c) NEAR(d e)`, `"a" "AND" "b" "OR" "NOT" "c" "NEAR" "d" "e"`},
		{"prefix and column", `title:foo* -bar +baz ^qux`, `"title" "foo" "bar" "baz" "qux"`},
		{"hyphenated", "e-mail", `"e" "mail"`},
		{"digits", "http 404", `"http" "404"`},
		{"unicode", "Straße 東京 café", `"Straße" "東 京" "café"`},
		{"cjk run", "서울은 富士山abc", `"서 울 은" "富 士 山 abc"`},
		{"combining mark kept in word", "cafe\u0301", "\"cafe\u0301\""},
		{"lone combining mark dropped", "\u0301 x", `"x"`},
		{"only syntax", `"*():-^{}`, ""},
		{"empty", "", ""},
		{"invalid utf-8", "a\xffb", `"a" "b"`},
		{"nul", "a\x00b", `"a" "b"`},
		{"too long word dropped", strings.Repeat("x", search.MaxTermBytes+1) + " y", `"y"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := wordsExpr(tc.q); got != "("+tc.want+")" {
				t.Errorf("wordsExpr(%q) = %q, want (%s)", tc.q, got, tc.want)
			}
		})
	}
	many := strings.Repeat("w ", MaxTerms+10)
	if got := strings.Count(wordsExpr(many), `"`) / 2; got != MaxTerms {
		t.Errorf("wordsExpr of %d words kept %d, want %d", MaxTerms+10, got, MaxTerms)
	}
	if got, want := matchTerms([]string{"a"}, [][]string{{"b", "c"}}), `("a" "b c")`; got != want {
		t.Errorf("matchTerms with a phrase = %s, want %s", got, want)
	}
}

func TestSearchDefaults(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "search.db"), OpenSearch)
	var docs []contracts.Document
	for i := range DefaultLimit + 5 {
		docs = append(docs, contracts.Document{ID: string(rune('a' + i)), CrawlID: "c", URL: "http://a.test/" + string(rune('a'+i)), Title: []string{"same word"}, Text: "text"})
	}
	if err := s.Upsert(t.Context(), docs); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	for _, tc := range []struct {
		name     string
		q        search.Query
		wantHits int
		total    int64
	}{
		{"zero limit means the default", search.Query{Q: "word"}, DefaultLimit, int64(len(docs))},
		{"negative offset means zero", search.Query{Q: "word", Offset: -5, Limit: 3}, 3, int64(len(docs))},
		{"no words finds nothing", search.Query{Q: `"()"`}, 0, 0},
	} {
		res, err := s.Search(t.Context(), tc.q)
		if err != nil {
			t.Fatalf("%s: Search(%+v): %v", tc.name, tc.q, err)
		}
		if len(res.Hits) != tc.wantHits || res.Total != tc.total {
			t.Errorf("%s: Search(%+v) = %d hits of %d, want %d of %d", tc.name, tc.q, len(res.Hits), res.Total, tc.wantHits, tc.total)
		}
	}
}

func TestUpsertRejectsBadID(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "search.db"), OpenSearch)
	for _, id := range []string{"", "a\xffb"} {
		if err := s.Upsert(t.Context(), []contracts.Document{{ID: id, URL: "http://x/"}}); err == nil {
			t.Errorf("Upsert of a document with id %q = nil, want an error", id)
		}
	}
}

// FuzzSearchQuery feeds arbitrary user input to a real FTS5 index: no
// query may fail (operators included), and the words' match expression
// holds only quoted words.
func FuzzSearchQuery(f *testing.F) {
	for _, q := range []string{`"`, `a OR b`, `NEAR(a b)`, `title:x`, `x*`, `(`, "\x00", "\u0301", `""""`, `a"b`, "ǅ", "\uFFFD",
		`site:x.test -"a`, `inurl:% filetype:*`, `-some -"text or"`, `site:'); --`, `inurl:_ site:%`} {
		f.Add(q)
	}
	s, err := OpenSearch(filepath.Join(f.TempDir(), "search.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	if err := s.Upsert(f.Context(), []contracts.Document{{ID: "1", CrawlID: "c", Title: []string{"a title"}, Text: "some text OR NEAR",
		URL: "https://x.test/a%_b.html", Host: "x.test", FileExt: "html", Collection: []string{"user"}}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		expr := strings.TrimSuffix(strings.TrimPrefix(wordsExpr(q), "("), ")")
		for _, w := range strings.FieldsFunc(expr, func(r rune) bool { return r == ' ' }) {
			if len(w) < 3 || w[0] != '"' || w[len(w)-1] != '"' || strings.ContainsAny(w[1:len(w)-1], `" `) {
				t.Fatalf("wordsExpr(%q) = %q: %q is not one quoted word", q, expr, w)
			}
			if strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) < 0 {
				t.Fatalf("wordsExpr(%q) = %q: %q has no letter or digit", q, expr, w)
			}
		}
		if _, err := s.Search(t.Context(), search.Query{Q: q, CrawlID: "c", Collection: "user", Facets: true}); err != nil {
			t.Errorf("Search(%q) error: %v", q, err)
		}
	})
}

// ftsIntact fails t unless web_fts indexes exactly the rows of web, as
// FTS5's integrity check of an external-content table sees it.
func ftsIntact(t *testing.T, s *Search) {
	t.Helper()
	if _, err := s.st.w.ExecContext(t.Context(), `INSERT INTO web_fts (web_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("full-text index out of step with the documents: %v", err)
	}
}

// TestUpsertKeepsIndexInStep stores batches that insert, replace and remove
// documents, some of them more than once in one batch, and checks after
// each that the full-text index matches the stored documents and that each
// word finds exactly the documents that hold it now.
func TestUpsertKeepsIndexInStep(t *testing.T) {
	doc := func(id, text string) contracts.Document {
		return contracts.Document{ID: id, CrawlID: "c", Title: []string{"title " + id}, Text: text, URL: "https://x.test/" + id}
	}
	gone := func(id string) contracts.Document { return contracts.Document{ID: id, NoIndex: true} }
	s := open(t, filepath.Join(t.TempDir(), "search.db"), OpenSearch)
	for _, tc := range []struct {
		name  string
		batch []contracts.Document
		want  map[string][]string // word: the ids it finds
	}{
		{"insert", []contracts.Document{doc("a", "alpha"), doc("b", "beta"), doc("c", "gamma")},
			map[string][]string{"alpha": {"a"}, "beta": {"b"}, "gamma": {"c"}}},
		{"replace", []contracts.Document{doc("a", "delta")},
			map[string][]string{"alpha": nil, "delta": {"a"}}},
		{"twice in one batch, the last wins", []contracts.Document{doc("b", "epsilon"), doc("d", "zeta"), doc("b", "eta")},
			map[string][]string{"beta": nil, "epsilon": nil, "eta": {"b"}, "zeta": {"d"}}},
		{"remove", []contracts.Document{gone("c"), gone("nothing")},
			map[string][]string{"gamma": nil}},
		{"store then remove in one batch", []contracts.Document{doc("d", "theta"), gone("d")},
			map[string][]string{"zeta": nil, "theta": nil}},
		{"remove then store in one batch", []contracts.Document{gone("a"), doc("a", "iota")},
			map[string][]string{"delta": nil, "iota": {"a"}}},
		{"new after a removal reuses row ids", []contracts.Document{doc("e", "kappa"), doc("f", "kappa lambda")},
			map[string][]string{"kappa": {"e", "f"}, "lambda": {"f"}, "title": {"a", "b", "e", "f"}}},
	} {
		if err := s.Upsert(t.Context(), tc.batch); err != nil {
			t.Fatalf("%s: Upsert: %v", tc.name, err)
		}
		ftsIntact(t, s)
		for word, want := range tc.want {
			res, err := s.Search(t.Context(), search.Query{Q: word, Limit: 100})
			if err != nil {
				t.Fatalf("%s: Search(%q): %v", tc.name, word, err)
			}
			var got []string
			for _, h := range res.Hits {
				got = append(got, h.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: Search(%q) found %v, want %v", tc.name, word, got, want)
			}
		}
	}
}

// TestCountKeptByTriggers checks the per-crawl document counts that Count
// reads: kept through inserts, replacements, a document moving to another
// crawl and removals, and computed once for an index made before them.
func TestCountKeptByTriggers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "search.db")
	s, err := OpenSearch(path)
	if err != nil {
		t.Fatalf("OpenSearch: %v", err)
	}
	doc := func(id, crawl string) contracts.Document {
		return contracts.Document{ID: id, CrawlID: crawl, URL: "http://x.test/" + id, Title: []string{"t"}, Text: "text"}
	}
	steps := []struct {
		name string
		docs []contracts.Document
		want map[string]int64 // by crawl; "" is every crawl
	}{
		{"insert", []contracts.Document{doc("a", "c1"), doc("b", "c1"), doc("c", "c2")}, map[string]int64{"c1": 2, "c2": 1, "": 3, "none": 0}},
		{"replace", []contracts.Document{doc("a", "c1"), doc("b", "c1")}, map[string]int64{"c1": 2, "c2": 1, "": 3}},
		{"move to another crawl", []contracts.Document{doc("b", "c2")}, map[string]int64{"c1": 1, "c2": 2, "": 3}},
		{"remove", []contracts.Document{{ID: "a", CrawlID: "c1", NoIndex: true}, {ID: "zz", CrawlID: "c1", NoIndex: true}}, map[string]int64{"c1": 0, "c2": 2, "": 2}},
		{"insert again", []contracts.Document{doc("d", "c1")}, map[string]int64{"c1": 1, "c2": 2, "": 3}},
	}
	check := func(name string, s *Search, want map[string]int64) {
		t.Helper()
		for crawl, n := range want {
			got, err := s.Count(t.Context(), crawl)
			if err != nil || got != n {
				t.Errorf("%s: Count(%q) = %d, %v, want %d", name, crawl, got, err, n)
			}
		}
	}
	for _, st := range steps {
		if err := s.Upsert(t.Context(), st.docs); err != nil {
			t.Fatalf("%s: Upsert: %v", st.name, err)
		}
		check(st.name, s, st.want)
	}
	// An index made before the counts: no doc_counts, no triggers.
	for _, q := range []string{`DROP TRIGGER web_count_ai`, `DROP TRIGGER web_count_ad`, `DROP TRIGGER web_count_au`, `DROP TABLE doc_counts`} {
		if _, err := s.st.w.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = open(t, path, OpenSearch)
	check("reopened without counts", s, steps[len(steps)-1].want)
	if err := s.Upsert(t.Context(), []contracts.Document{doc("e", "c2")}); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	check("reopened, then insert", s, map[string]int64{"c1": 1, "c2": 3, "": 4})
}

// TestDocumentsPagesWithoutSorting: a page of a crawl's documents is read
// from an index in id order, not by reading and sorting all the crawl's
// documents (which made an export of a crawl cost the square of its size).
func TestDocumentsPagesWithoutSorting(t *testing.T) {
	s, err := OpenSearch(filepath.Join(t.TempDir(), "search.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, crawl := range []string{"c1", ""} {
		q, args := documentsQuery(crawl, "x", 200)
		rows, err := s.st.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if p := strings.Join(plan, "; "); strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "USING") {
			t.Errorf("crawl %q: the page's plan is %q, want an index in id order and no sort", crawl, p)
		}
	}
}

// TestSearchCJKParted: in the embedded index a space or a punctuation mark
// between two CJK characters parts them, so that a word of the two is no
// hit there, while a quoted phrase of CJK words still finds them with a
// space or a mark between.
func TestSearchCJKParted(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "search.db"), OpenSearch)
	parted := contracts.Document{ID: "parted", CrawlID: "c", Text: "富士。山が見える。故 宫。서。울。", URL: "https://x.test/p"}
	spaced := contracts.Document{ID: "spaced", CrawlID: "c", Text: "北京 故宫。日本、富士山", URL: "https://x.test/s"}
	if err := s.Upsert(t.Context(), []contracts.Document{parted, spaced}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"富士山", []string{"spaced"}},
		{"故宫", []string{"spaced"}},
		{"서울", nil},
		{`"富士 山"`, []string{"parted"}},
		{`"北京 故宫"`, []string{"spaced"}},
		{`"日本 富士山"`, []string{"spaced"}},
		{"北京故宫", nil},
		{`-"北京 故宫" 故`, []string{"parted"}},
	} {
		res, err := s.Search(t.Context(), search.Query{Q: tc.q})
		if err != nil {
			t.Fatalf("Search(%q): %v", tc.q, err)
		}
		var got []string
		for _, h := range res.Hits {
			got = append(got, h.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Search(%q) = %v, want %v", tc.q, got, tc.want)
		}
	}
	ftsIntact(t, s)
}
