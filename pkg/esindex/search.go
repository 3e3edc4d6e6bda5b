package esindex

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
)

// Search limits.
const (
	// DefaultLimit is the page size of a query whose Limit is not positive.
	DefaultLimit = 10
	// MaxLimit caps the page size of a query.
	MaxLimit = 1000
	// MaxTerms caps the number of words of a query that are searched for.
	MaxTerms = search.MaxTerms
	// snippetChars is the length of a snippet, in characters.
	snippetChars = 160
	// maxHighlightChars is how much of a text the highlighter analyzes for
	// the snippet; beyond it the snippet comes from the text's start.
	maxHighlightChars = 1_000_000
)

// searchFields are the fields a query searches, with their weights: a word
// in the title counts ten times a word in the text.
var searchFields = []string{"title^10", "h1_txt^5", "h2_txt^5", "h3_txt^5", "h4_txt^5", "h5_txt^5", "h6_txt^5",
	"description_txt^4", "text_t", "url_s.text^2"}

// hitFields are the stored fields a hit is made of.
var hitFields = []string{"id", "crawl_id_s", "url_s", "title", "description_txt", "content_type", "language_s",
	"load_date_dt", "host_s", "size_i", "last_modified"}

// hitSource is the part of a stored document a hit is made of.
type hitSource struct {
	ID           string    `json:"id"`
	CrawlID      string    `json:"crawl_id_s"`
	URL          string    `json:"url_s"`
	Title        []string  `json:"title"`
	Description  []string  `json:"description_txt"`
	ContentType  []string  `json:"content_type"`
	Language     string    `json:"language_s"`
	LoadDate     time.Time `json:"load_date_dt"`
	Host         string    `json:"host_s"`
	Size         int       `json:"size_i"`
	LastModified time.Time `json:"last_modified"`
}

func (h *hitSource) hit() contracts.SearchHit {
	first := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[0]
	}
	return contracts.SearchHit{ID: h.ID, CrawlID: h.CrawlID, URL: h.URL, Title: first(h.Title),
		Description: first(h.Description), ContentType: first(h.ContentType), Language: h.Language,
		FetchTime: h.LoadDate, Host: h.Host, Size: h.Size, LastModified: h.LastModified}
}

// Search is the full-text document index (search.Index) in the index
// "<prefix>-web", one YaCy web document per page with the document id (the
// page's record key) as document id. Text is analyzed by Elasticsearch's
// standard analyzer; ranking is BM25 over weighted fields.
//
// The standard tokenizer makes every Han and Hiragana character a token of
// its own, and keeps a run of Katakana or of Hangul whole (タワー, 서울은).
// A query word is a phrase, so a word of Han and kana (富士山, 故宫) is
// found where its characters stand in a row, and not where they stand
// apart; a word all of Hangul or all of Katakana is a prefix of such a run
// (cjkPrefix), so that 서울 finds 서울은, the word with its particle. This
// needs nothing beyond Elasticsearch's server itself (the cjk analyzer and
// its cjk_bigram filter are in the analysis-common module, which a bare
// server lacks), and indices made before need no change.
//
// The standard tokenizer makes every Han and Hiragana character a token of
// its own, and keeps a run of Katakana or of Hangul whole (タワー, 서울은).
// A query word is a phrase, so a word of Han and kana (富士山, 故宫) is
// found where its characters stand in a row, and not where they stand
// apart; a word all of Hangul or all of Katakana is a prefix of such a run
// (cjkPrefix), so that 서울 finds 서울은, the word with its particle. The
// analysis needs nothing beyond Elasticsearch's own server (the cjk
// analyzer and its cjk_bigram filter are in the analysis-common module),
// and indices made before need no change.
type Search struct {
	c *Client
}

var _ search.Index = (*Search)(nil)

// Upsert stores docs with one bulk request, each replacing any document
// with its ID; of two versions of one document in docs the later wins. A
// document marked NoIndex is not stored, and removes a stored document with
// its ID. The documents are searchable when Upsert returns (see Refresh).
//
// A request sent again stores nothing again: when a node dies after it
// applied a bulk request but before it answered, the client must not make
// that copy count as a second store of its pages (Writes, _version). Each
// document goes as an index operation of its whole source, a null for
// every field it omits and the call's write id (write_id_s): no read of
// the stored document (an update reads it, realtime, which cost a get per
// page). The request is made withoutResend; when an attempt may have been
// applied, the documents go again as updates with doc_as_upsert of the
// same source, which Elasticsearch's noop detection finds equal to what
// the first application stored. A later Upsert of the same document has
// another write id and is stored (and counted) again.
func (s *Search) Upsert(ctx context.Context, docs []contracts.Document) error {
	if len(docs) == 0 {
		return nil
	}
	// One operation per document id, the last version: a retried operation
	// must not overtake a later one on the same document.
	last := make(map[string]int, len(docs))
	for i, d := range docs {
		if d.ID == "" {
			return fmt.Errorf("upsert document of %q: empty id", d.URL)
		}
		last[d.ID] = i
	}
	// The write id tells a copy of this request (sent again) from a later
	// Upsert of the same document, which Writes must count.
	writeID := rand.Text()
	ops := make([]bulkOp, 0, len(last))
	for i, d := range docs {
		if last[d.ID] != i {
			continue
		}
		op := bulkOp{op: "delete", action: bulkAction{Index: s.c.docsIndex, ID: d.ID}}
		if !d.NoIndex {
			src, err := documentSource(&d, writeID)
			if err != nil {
				return fmt.Errorf("upsert document %q: %w", d.ID, err)
			}
			op.op, op.source = "index", src
		}
		ops = append(ops, op)
	}
	items, err := s.c.bulk(withoutResend(ctx), ops)
	if errors.Is(err, errMaybeApplied) {
		for i := range ops {
			if ops[i].op == "index" {
				ops[i].op, ops[i].source = "update", updateSource(ops[i].source)
				ops[i].action.RetryOnConflict = upsertConflictRetries
			}
		}
		items, err = s.c.bulk(ctx, ops)
	}
	if err != nil {
		return fmt.Errorf("upsert %d documents: %w", len(docs), err)
	}
	var refused map[string]string
	for i, it := range items {
		if ops[i].op == "delete" && it.Status == http.StatusNotFound {
			continue // nothing to remove
		}
		err := it.err()
		if err == nil {
			continue
		}
		// 400 (a field Elasticsearch cannot index) and 413 (too large) are
		// the document's fault: the same request can never succeed.
		if ops[i].op != "delete" && (it.Status == http.StatusBadRequest || it.Status == http.StatusRequestEntityTooLarge) {
			if refused == nil {
				refused = map[string]string{}
			}
			refused[ops[i].action.ID] = err.Error()
			continue
		}
		return fmt.Errorf("upsert document %q: %w", ops[i].action.ID, err)
	}
	if refused != nil {
		return &search.RefusedError{Reasons: refused}
	}
	return nil
}

// Get returns the document with id, or search.ErrNotFound. It is realtime.
func (s *Search) Get(ctx context.Context, id string) (contracts.Document, error) {
	if id == "" {
		return contracts.Document{}, fmt.Errorf("get document %q: %w", id, search.ErrNotFound)
	}
	docs, err := s.c.mget(ctx, s.c.docsIndex, []string{id})
	if err != nil {
		return contracts.Document{}, fmt.Errorf("get document %q: %w", id, err)
	}
	raw, ok := docs[id]
	if !ok {
		return contracts.Document{}, fmt.Errorf("get document %q: %w", id, search.ErrNotFound)
	}
	var d contracts.Document
	if err := json.Unmarshal(raw.Source, &d); err != nil {
		return contracts.Document{}, fmt.Errorf("get document %q: decode: %w", id, err)
	}
	return d, nil
}

// Search returns one page of the documents that match q.Q (see
// search.Parse: words, phrases, exclusions, site:, filetype:, inurl:),
// best first (ties by id), one per URL unless q.AllCrawls (see
// search.Query). No input is a syntax error; a query that selects
// nothing (no words and no operators) finds nothing. Limit defaults to
// DefaultLimit and is capped at MaxLimit; hits beyond the 10000th are not
// served. Snippets are plain text from the page text around the first
// match, or its start.
func (s *Search) Search(ctx context.Context, q search.Query) (search.Result, error) {
	p := search.Parse(q.Q)
	if !p.Matches() {
		return search.Result{Hits: []contracts.SearchHit{}}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	offset := min(max(q.Offset, 0), maxPage)
	size := min(limit, maxPage-offset)

	if err := s.c.readRefresh(ctx, s.c.docsIndex); err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	highlight := map[string]any{
		"pre_tags":            []string{""},
		"post_tags":           []string{""},
		"encoder":             "default",
		"max_analyzed_offset": maxHighlightChars,
		"fields": map[string]any{"text_t": map[string]any{
			"fragment_size":       snippetChars,
			"number_of_fragments": 1,
			"no_match_size":       snippetChars,
		}},
	}
	req := map[string]any{
		"from":             offset,
		"size":             size,
		"track_total_hits": true,
		"query":            map[string]any{"bool": boolQuery(p, q)},
		"sort":             []any{"_score", map[string]any{"id": "asc"}},
		"_source":          hitFields,
		"highlight":        highlight,
	}
	filterPath := []string{"hits.total.value", "hits.hits._score", "hits.hits._source", "hits.hits.highlight"}
	aggs := map[string]any{}
	// count orders and counts facet values: documents, or URLs.
	count := "_count"
	if q.Collapse() {
		// One hit per URL: field collapsing on url_s pages over URLs, each
		// placed by its best match, and the inner hit, sorted by load date,
		// is the newest of its matching documents. hits.total still counts
		// documents, so the total is the cardinality of url_s, which is
		// exact below its precision threshold (40000, the most
		// Elasticsearch allows) and an estimate within a few percent above.
		// https://www.elastic.co/guide/en/elasticsearch/reference/8.15/collapse-search-results.html
		req["collapse"] = map[string]any{"field": "url_s", "inner_hits": map[string]any{
			"name": "newest", "size": 1, "_source": hitFields, "highlight": highlight,
			"sort": []any{map[string]any{"load_date_dt": "desc"}, map[string]any{"id": "asc"}},
		}}
		req["_source"] = false
		delete(req, "highlight")
		aggs["urls"] = urlCount
		filterPath = []string{"hits.total.value", "hits.hits._score", "hits.hits.inner_hits.newest.hits.hits._source",
			"hits.hits.inner_hits.newest.hits.hits.highlight", "aggregations"}
		count = "urls"
	}
	if q.Facets {
		for _, name := range []string{search.FacetHosts, search.FacetFileTypes} {
			f := map[string]any{"terms": map[string]any{
				"field": name, "size": search.MaxFacetValues, "exclude": []string{""},
				"order": []any{map[string]any{count: "desc"}, map[string]any{"_key": "asc"}},
			}}
			if count == "urls" {
				f["aggs"] = map[string]any{"urls": urlCount}
			}
			aggs[name] = f
		}
		filterPath = append(filterPath, "aggregations")
	}
	if len(aggs) > 0 {
		req["aggs"] = aggs
	}
	body, err := json.Marshal(req)
	if err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	type hitBody struct {
		Source    hitSource `json:"_source"`
		Highlight struct {
			Text []string `json:"text_t"`
		} `json:"highlight"`
	}
	type value struct {
		Value int64 `json:"value"`
	}
	var res struct {
		Hits struct {
			Total value `json:"total"`
			Hits  []struct {
				Score float64 `json:"_score"`
				hitBody
				InnerHits struct {
					Newest struct {
						Hits struct {
							Hits []hitBody `json:"hits"`
						} `json:"hits"`
					} `json:"newest"`
				} `json:"inner_hits"`
			} `json:"hits"`
		} `json:"hits"`
		Aggregations struct {
			URLs  value `json:"urls"`
			Hosts struct {
				Buckets []facetBucket `json:"buckets"`
			} `json:"host_s"`
			FileTypes struct {
				Buckets []facetBucket `json:"buckets"`
			} `json:"url_file_ext_s"`
		} `json:"aggregations"`
	}
	sreq := esapi.SearchRequest{Index: []string{s.c.docsIndex}, Body: bytes.NewReader(body), FilterPath: filterPath}
	if err := s.c.do(ctx, sreq, &res); err != nil {
		return search.Result{}, fmt.Errorf("search %q: %w", q.Q, err)
	}
	out := search.Result{Total: res.Hits.Total.Value, Hits: make([]contracts.SearchHit, 0, len(res.Hits.Hits))}
	if q.Collapse() {
		out.Total = res.Aggregations.URLs.Value
	}
	for _, h := range res.Hits.Hits {
		b := h.hitBody
		if inner := h.InnerHits.Newest.Hits.Hits; q.Collapse() && len(inner) > 0 {
			b = inner[0]
		}
		hit := b.Source.hit()
		hit.Score = h.Score
		if len(b.Highlight.Text) > 0 {
			hit.Snippet = strings.Join(strings.Fields(b.Highlight.Text[0]), " ")
		}
		out.Hits = append(out.Hits, hit)
	}
	if q.Facets {
		out.Facets = map[string][]search.FacetValue{
			search.FacetHosts:     facetValues(res.Aggregations.Hosts.Buckets, q.Collapse()),
			search.FacetFileTypes: facetValues(res.Aggregations.FileTypes.Buckets, q.Collapse()),
		}
	}
	return out, nil
}

// urlCount is the aggregation that counts distinct URLs.
var urlCount = map[string]any{"cardinality": map[string]any{"field": "url_s", "precision_threshold": 40000}}

// facetBucket is one value of a facet's terms aggregation.
type facetBucket struct {
	Key      string `json:"key"`
	DocCount int64  `json:"doc_count"`
	URLs     struct {
		Value int64 `json:"value"`
	} `json:"urls"`
}

// facetValues are the facet's buckets, counted by documents or by URLs.
func facetValues(bs []facetBucket, byURL bool) []search.FacetValue {
	vals := []search.FacetValue{}
	for _, b := range bs {
		n := b.DocCount
		if byURL {
			n = b.URLs.Value
		}
		vals = append(vals, search.FacetValue{Value: b.Key, Count: n})
	}
	return vals
}

// boolQuery is the bool query of p and q's filters.
func boolQuery(p search.Parsed, q search.Query) map[string]any {
	text := func(terms string) map[string]any {
		return map[string]any{"simple_query_string": map[string]any{
			"query":            terms,
			"fields":           searchFields,
			"default_operator": "and",
			// Only the quotes around each word or phrase, and the * after
			// a cjkPrefix word, mean something.
			"flags":   "PHRASE|PREFIX|WHITESPACE",
			"lenient": true,
		}}
	}
	b := map[string]any{}
	if p.HasTerms() {
		var parts []string
		for _, w := range p.Words {
			parts = append(parts, wordString(w))
		}
		for _, ph := range p.Phrases {
			parts = append(parts, `"`+strings.Join(ph, " ")+`"`)
		}
		b["must"] = []any{text(strings.Join(parts, " "))}
	} else {
		b["must"] = []any{map[string]any{"match_all": map[string]any{}}}
	}
	var not []any
	for _, x := range p.Exclude {
		if len(x) == 1 {
			not = append(not, text(wordString(x[0])))
			continue
		}
		not = append(not, text(`"`+strings.Join(x, " ")+`"`))
	}
	if len(not) > 0 {
		b["must_not"] = not
	}
	var filter []any
	if q.CrawlID != "" {
		filter = append(filter, term("crawl_id_s", q.CrawlID))
	}
	if q.Collection != "" {
		filter = append(filter, term("collection_sxt", q.Collection))
	}
	if len(p.Sites) > 0 {
		var should []any
		for _, site := range p.Sites {
			should = append(should, term("host_s", site),
				map[string]any{"wildcard": map[string]any{"host_s": map[string]any{"value": "*." + wildcardEscape(site)}}})
		}
		filter = append(filter, map[string]any{"bool": map[string]any{"should": should, "minimum_should_match": 1}})
	}
	if len(p.FileTypes) > 0 {
		filter = append(filter, map[string]any{"terms": map[string]any{"url_file_ext_s": p.FileTypes}})
	}
	for _, in := range p.InURL {
		filter = append(filter, map[string]any{"wildcard": map[string]any{"url_s": map[string]any{
			"value": "*" + wildcardEscape(in) + "*", "case_insensitive": true}}})
	}
	if len(filter) > 0 {
		b["filter"] = filter
	}
	return b
}

// wordString is the simple_query_string of the query word w: w quoted, a
// phrase of the tokens the standard tokenizer makes of it, or for a
// cjkPrefix word, the prefix query w*.
func wordString(w string) string {
	if cjkPrefix(w) {
		return w + "*"
	}
	return `"` + w + `"`
}

// cjkPrefix reports whether w is all Hangul or all Katakana (with the
// prolonged sound mark), which the standard tokenizer keeps whole within a
// longer run: Korean words carry their particles (서울은 is 서울 and 은),
// Japanese writes Katakana words together (東京タワー), and such a word is
// searched as the prefix of a token. A word inside a token (타워 in
// 서울타워) is not found this way.
func cjkPrefix(w string) bool {
	if w == "" || w[0] < 0xE1 {
		return false
	}
	hangul, katakana := true, true
	for _, r := range w {
		if unicode.IsMark(r) {
			continue
		}
		hangul = hangul && unicode.Is(unicode.Hangul, r)
		katakana = katakana && (r == 'ー' || unicode.Is(unicode.Katakana, r))
		if !hangul && !katakana {
			return false
		}
	}
	return true
}

// wildcardEscape escapes the wildcard query's special characters.
func wildcardEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`).Replace(s)
}

// Count returns the number of documents of crawlID, or of all crawls when
// crawlID is empty.
func (s *Search) Count(ctx context.Context, crawlID string) (int64, error) {
	if err := s.c.readRefresh(ctx, s.c.docsIndex); err != nil {
		return 0, fmt.Errorf("count documents of crawl %q: %w", crawlID, err)
	}
	var filters []any
	if crawlID != "" {
		filters = append(filters, term("crawl_id_s", crawlID))
	}
	n, err := s.c.count(ctx, s.c.docsIndex, filters...)
	if err != nil {
		return 0, fmt.Errorf("count documents of crawl %q: %w", crawlID, err)
	}
	return n, nil
}

// Documents returns up to limit documents of crawlID (all crawls if empty)
// with ids after after, in id order (see search.Index): a search_after
// page sorted on the keyword field id, which holds no search context open
// between pages.
func (s *Search) Documents(ctx context.Context, crawlID, after string, limit int) ([]contracts.Document, error) {
	limit = min(max(limit, 1), search.MaxExportPage)
	if err := s.c.readRefresh(ctx, s.c.docsIndex); err != nil {
		return nil, fmt.Errorf("export documents of crawl %q: %w", crawlID, err)
	}
	query := map[string]any{"match_all": map[string]any{}}
	if crawlID != "" {
		query = map[string]any{"bool": map[string]any{"filter": []any{term("crawl_id_s", crawlID)}}}
	}
	req := map[string]any{
		"size":             limit,
		"query":            query,
		"sort":             []any{map[string]any{"id": "asc"}},
		"track_total_hits": false,
	}
	if after != "" {
		req["search_after"] = []string{after}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("export documents of crawl %q: %w", crawlID, err)
	}
	var res struct {
		Hits struct {
			Hits []struct {
				Source json.RawMessage `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	sreq := esapi.SearchRequest{Index: []string{s.c.docsIndex}, Body: bytes.NewReader(body), FilterPath: []string{"hits.hits._source"}}
	if err := s.c.do(ctx, sreq, &res); err != nil {
		return nil, fmt.Errorf("export documents of crawl %q: %w", crawlID, err)
	}
	out := make([]contracts.Document, 0, len(res.Hits.Hits))
	for _, h := range res.Hits.Hits {
		var d contracts.Document
		if err := json.Unmarshal(h.Source, &d); err != nil {
			return nil, fmt.Errorf("export documents of crawl %q: decode: %w", crawlID, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Writes returns the document's Elasticsearch _version, which every Upsert
// of it raises by one (a copy of the same request sent again by the
// client is a noop): the number of times it was stored. It is
// realtime. It returns search.ErrNotFound when no document with id exists.
func (s *Search) Writes(ctx context.Context, id string) (int64, error) {
	if id == "" || len(id) > maxIDBytes {
		return 0, fmt.Errorf("count writes of document %q: %w", id, search.ErrNotFound)
	}
	var res struct {
		Found   bool  `json:"found"`
		Version int64 `json:"_version"`
	}
	err := s.c.do(ctx, esapi.GetRequest{Index: s.c.docsIndex, DocumentID: id, Source: []string{"false"}}, &res)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return 0, fmt.Errorf("count writes of document %q: %w", id, search.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("count writes of document %q: %w", id, err)
	}
	if !res.Found {
		return 0, fmt.Errorf("count writes of document %q: %w", id, search.ErrNotFound)
	}
	return res.Version, nil
}

// Close does nothing: the Client owns the connection.
func (s *Search) Close() error { return nil }

// writeIDField is the field of a stored document that holds the write id
// of the Upsert that stored it (see Upsert).
const writeIDField = "write_id_s"

// upsertConflictRetries is how often Elasticsearch retries an update that
// met a concurrent write of the same document before it reports a
// conflict.
const upsertConflictRetries = 3

// omittable lists the fields of contracts.Document that JSON leaves out
// when empty (omitempty: the zero value, or a slice of length 0), with
// their names.
var omittable = sync.OnceValue(func() []omittableField {
	t := reflect.TypeFor[contracts.Document]()
	var out []omittableField
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if strings.Contains(opts, "omitempty") && name != "noindex_b" {
			out = append(out, omittableField{index: i, null: []byte(`,"` + name + `":null`)})
		}
	}
	return out
})

type omittableField struct {
	index int
	null  []byte // ,"name":null
}

// documentSource returns d's JSON with a null for every field it omits and
// writeID as write_id_s: the whole stored document, so that an update with
// it (updateSource) changes nothing where it is stored already. noindex_b
// is never stored (such documents are deleted).
func documentSource(d *contracts.Document, writeID string) ([]byte, error) {
	src, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	if len(src) < 2 || src[len(src)-1] != '}' {
		return nil, fmt.Errorf("document JSON %.20q is not an object", src)
	}
	v := reflect.ValueOf(d).Elem()
	body := make([]byte, 0, len(src)+256)
	body = append(body, src[:len(src)-1]...)
	for _, f := range omittable() {
		if fv := v.Field(f.index); (fv.Kind() == reflect.Slice && fv.Len() == 0) || fv.IsZero() {
			body = append(body, f.null...)
		}
	}
	body = append(body, `,"`+writeIDField+`":`...)
	body = strconv.AppendQuote(body, writeID)
	body = append(body, '}')
	return body, nil
}

// updateSource returns the body of the bulk update that stores the
// document source src whole: {"doc":src,"doc_as_upsert":true}.
func updateSource(src []byte) []byte {
	body := make([]byte, 0, len(src)+32)
	body = append(body, `{"doc":`...)
	body = append(body, src...)
	return append(body, `,"doc_as_upsert":true}`...)
}
