package esindex

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
)

// page returns a stored-as-fetched document of page i.
func page(i int, loaded time.Time) contracts.Document {
	u := fmt.Sprintf("https://h%d.example/p%d", i%3, i)
	return contracts.Document{ID: fmt.Sprintf("doc-%d", i), CrawlID: "upsert", URL: u, Host: fmt.Sprintf("h%d.example", i%3),
		Title: []string{"page"}, Text: "some text", ContentType: []string{"text/html"}, HTTPStatus: 200, LoadDate: loaded,
		LastModified: loaded, Description: []string{"a description"}, H1: []string{"a heading"}, Language: "en",
		InboundLinks: []string{}, InboundAnchorText: []string{}, OutboundLinks: []string{}, OutboundAnchorText: []string{},
		Images: []string{}, WARCKey: "warc/seg-1.warc.gz", WARCOffset: int64(1000 * i), WARCLength: 900}
}

// storedVersion returns the _version of the document with id in the web
// index of s (0 when it is not stored).
func storedVersion(t *testing.T, s *Search, id string) int64 {
	t.Helper()
	code, body := raw(t, http.MethodGet, "/"+s.c.docsIndex+"/_doc/"+id, "")
	if code == http.StatusNotFound {
		return 0
	}
	var got struct {
		Version int64 `json:"_version"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("get %s = %d %s", id, code, body)
	}
	return got.Version
}

// TestUpsertSentAgainStoresOnce loses the answer of every other bulk
// request after Elasticsearch applied it, as when the node that took it
// dies before answering: the client sends the request again. Every
// document must still be stored once (_version 1); a second Upsert of the
// same documents is counted (_version 2).
func TestUpsertSentAgainStoresOnce(t *testing.T) {
	lose := &loseAnswers{rt: &http.Transport{}}
	s := openPrefix(t, Options{URL: esURL(t), Prefix: testPrefix(), Transport: lose, Refresh: RefreshWaitFor}, true).Search()
	loaded := time.Now().UTC()
	var docs []contracts.Document
	for i := range 20 {
		docs = append(docs, page(i, loaded))
	}
	for i := 0; i < len(docs); i += 5 {
		if err := s.Upsert(t.Context(), docs[i:i+5]); err != nil {
			t.Fatalf("Upsert: %v", err)
		}
	}
	if lose.lost.Load() == 0 {
		t.Fatal("no answer was lost: the test tested nothing")
	}
	for _, d := range docs {
		if v := storedVersion(t, s, d.ID); v != 1 {
			t.Errorf("document %s stored with _version %d, want 1: stored more than once", d.ID, v)
		}
	}
	// A later Upsert of the same pages (an indexer given them again) is a
	// store of its own, counted.
	if err := s.Upsert(t.Context(), docs); err != nil {
		t.Fatalf("Upsert again: %v", err)
	}
	for _, d := range docs {
		if v := storedVersion(t, s, d.ID); v != 2 {
			t.Errorf("document %s has _version %d after a second Upsert, want 2", d.ID, v)
		}
	}
}

// TestUpsertReplacesWholeDocument stores a page, then the page fetched
// again without a description and with an empty list of headings: the
// stored document must be the new one whole (no field left over from the
// first), stored a second time (_version 2).
func TestUpsertReplacesWholeDocument(t *testing.T) {
	s := open(t, RefreshWaitFor).Search()
	first := page(1, time.Now().UTC().Add(-time.Hour))
	first.Keywords, first.Canonical = "kw", "https://h1.example/canonical"
	if err := s.Upsert(t.Context(), []contracts.Document{first}); err != nil {
		t.Fatal(err)
	}
	again := page(1, time.Now().UTC())
	again.Description, again.H1, again.Language = nil, []string{}, ""
	again.WARCKey, again.WARCOffset = "warc/seg-2.warc.gz", 0
	if err := s.Upsert(t.Context(), []contracts.Document{again}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), again.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Description) != 0 || len(got.H1) != 0 || got.Language != "" || got.Keywords != "" || got.Canonical != "" {
		t.Errorf("stored document keeps fields of the first fetch: description %q, h1 %q, language %q, keywords %q, canonical %q",
			got.Description, got.H1, got.Language, got.Keywords, got.Canonical)
	}
	if got.WARCKey != again.WARCKey || !got.LoadDate.Equal(again.LoadDate) {
		t.Errorf("stored document is of %s at %s, want the second fetch (%s at %s)", got.WARCKey, got.LoadDate, again.WARCKey, again.LoadDate)
	}
	if v := storedVersion(t, s, again.ID); v != 2 {
		t.Errorf("_version %d after the second fetch, want 2", v)
	}
}

// TestUpdateSourceSetsEveryField checks that the update body of a document
// with nothing set but its id names every field of the web index's
// mapping, so that a field added to contracts.Document later is replaced
// too (and an update sent after the index operation of the same source
// finds nothing to change).
func TestUpdateSourceSetsEveryField(t *testing.T) {
	doc, err := documentSource(&contracts.Document{ID: "x", H2: []string{}}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	src := updateSource(doc)
	var body struct {
		Doc    map[string]json.RawMessage `json:"doc"`
		Upsert bool                       `json:"doc_as_upsert"`
	}
	if err := json.Unmarshal(src, &body); err != nil {
		t.Fatalf("update body %s: %v", src, err)
	}
	if !body.Upsert {
		t.Errorf("update body %s without doc_as_upsert", src)
	}
	var missing []string
	for name := range webMapping() {
		if _, ok := body.Doc[name]; !ok {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("update body leaves out mapped fields %v: a stored value of theirs would outlive a new fetch", missing)
	}
	if _, ok := body.Doc["noindex_b"]; ok {
		t.Errorf("update body names noindex_b, which is never stored")
	}
}

// TestUpsertReadsNothing stores pages new and again and checks, by the web
// index's own statistics, that no store read a document: an update would
// (a realtime get per page).
func TestUpsertReadsNothing(t *testing.T) {
	s := open(t, RefreshOnRead).Search()
	gets := func() int64 {
		t.Helper()
		code, body := raw(t, http.MethodGet, "/"+s.c.docsIndex+"/_stats/get", "")
		var st struct {
			All struct {
				Primaries struct {
					Get struct {
						Total int64 `json:"total"`
					} `json:"get"`
				} `json:"primaries"`
			} `json:"_all"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("stats = %d %s", code, body)
		}
		return st.All.Primaries.Get.Total
	}
	before := gets()
	loaded := time.Now().UTC()
	var docs []contracts.Document
	for i := range 50 {
		docs = append(docs, page(i, loaded))
	}
	for range 2 {
		if err := s.Upsert(t.Context(), docs); err != nil {
			t.Fatal(err)
		}
	}
	if n := gets() - before; n != 0 {
		t.Errorf("two Upserts of %d documents read %d documents", len(docs), n)
	}
	if v := storedVersion(t, s, docs[0].ID); v != 2 {
		t.Errorf("_version %d after two Upserts, want 2", v)
	}
}

// TestReadsCounted checks that the client counts what it reads by index
// and kind: gets by document, searches by request.
func TestReadsCounted(t *testing.T) {
	c := open(t, RefreshOnRead)
	reads := func() map[[2]string]int64 {
		m := map[[2]string]int64{}
		for _, r := range c.Reads() {
			m[[2]string{r.Index, r.Kind}] = r.N
		}
		return m
	}
	before := reads()
	if _, err := c.TxIndex().GetMany(t.Context(), []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Digests().Lookup(t.Context(), []digests.Ref{{Scope: "crawl:x", Digest: "sha1:AAAA"}, {Scope: "crawl:x", Digest: "sha1:BBBB"}}); err != nil {
		t.Fatal(err)
	}
	after := reads()
	for k, want := range map[[2]string]int64{{"transactions", ReadRealtimeGet}: 3, {"digests", ReadSearch}: 1, {"digests", ReadRefreshedGet}: 0} {
		if got := after[k] - before[k]; got != want {
			t.Errorf("%s %s reads = %d, want %d", k[0], k[1], got, want)
		}
	}
}
