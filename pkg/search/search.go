// Package search defines the searchable document index fed by the indexer.
//
// Contract: Upsert is idempotent by document ID (a document stored twice is
// one document); a document is searchable as soon as Upsert returns. Each
// store is still counted (Writes), so that tests can see a page indexed twice
// even though the index holds it once.
package search

import (
	"context"
	"errors"
	"fmt"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// ErrNotFound is returned by Get for an unknown id.
var ErrNotFound = errors.New("document not found")

// Query is a full-text query. Q is user input read by Parse: words (ANDed),
// "quoted phrases", -excluded words and the operators site:, filetype: and
// inurl:. CrawlID and Collection restrict the documents searched when set.
//
// A URL fetched by several crawls has one document per crawl. A search
// answers one hit per URL: of the matching documents of a URL, the newest
// (latest load_date_dt, ties by the smaller id), placed where the URL's best
// matching document ranks. Result.Total, Offset, Limit and the facet counts
// all count URLs, not documents. AllCrawls asks for every matching
// document instead, one hit per crawl's copy.
//
// URLs are compared as stored (normalized by urlnorm): "/" and "/index.html"
// are two URLs and two hits even when a server answers both with the same
// page. Nothing but the server knows that the two are one resource; that
// they are alike is a guess from their content, and merging pages by content
// is the job of revisit records (WARC), not of the search index.
type Query struct {
	Q          string
	CrawlID    string
	Collection string
	Offset     int
	Limit      int
	// Facets asks for Result.Facets.
	Facets bool
	// AllCrawls asks for one hit per document, every crawl's copy of a URL,
	// instead of one hit per URL.
	AllCrawls bool
}

// Collapse reports whether a search must fold each URL's documents into one
// hit: unless AllCrawls, and unless CrawlID is set, since a crawl has one
// document per URL (its id is the crawl's record key of the URL) and
// folding would only cost time.
func (q Query) Collapse() bool { return !q.AllCrawls && q.CrawlID == "" }

// Facet names: the document fields that Result.Facets counts.
const (
	FacetHosts     = "host_s"
	FacetFileTypes = "url_file_ext_s"
)

// MaxExportPage caps the limit of Index.Documents.
const MaxExportPage = 1000

// MaxFacetValues is the most values of one facet that are returned.
const MaxFacetValues = 50

// FacetValue is one value of a facet with the number of matching documents
// that have it.
type FacetValue struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
}

// Result is one page of hits.
type Result struct {
	// Total counts the URLs that match, or the documents with
	// Query.AllCrawls.
	Total int64
	Hits  []contracts.SearchHit
	// Facets maps FacetHosts and FacetFileTypes to the values of that field
	// among all matching URLs, or documents with Query.AllCrawls (not only
	// this page's), most frequent
	// first (ties by value), at most MaxFacetValues; set when Query.Facets
	// is. Empty values are not counted.
	Facets map[string][]FacetValue
}

// RefusedError is returned by Upsert when the index refused some documents
// for their content (a field it cannot index, say) and stored all the others:
// retrying them cannot succeed, and they must not hold their neighbours back.
type RefusedError struct {
	// Reasons maps the id of every refused document to why.
	Reasons map[string]string
}

func (e *RefusedError) Error() string {
	for id, r := range e.Reasons {
		if len(e.Reasons) == 1 {
			return fmt.Sprintf("document %s refused: %s", id, r)
		}
		return fmt.Sprintf("%d documents refused, %s among them: %s", len(e.Reasons), id, r)
	}
	return "no document refused"
}

// Index is the search index.
type Index interface {
	// Upsert stores docs. When it returns a *RefusedError, every document
	// not named in it is stored; any other error may leave any of them
	// unstored, and the call is worth retrying.
	Upsert(ctx context.Context, docs []contracts.Document) error
	Get(ctx context.Context, id string) (contracts.Document, error)
	Search(ctx context.Context, q Query) (Result, error)
	// Count returns the number of documents of crawlID (all crawls if empty).
	Count(ctx context.Context, crawlID string) (int64, error)
	// Documents returns up to limit documents of crawlID (all crawls if
	// empty), whole, in id order, starting after the id after ("" for the
	// first): one page of an export, continued with the last id returned.
	// A page shorter than limit (capped at MaxExportPage) is the last.
	// Documents stored while an export pages through are included if their
	// ids come after the page being read; an export of a crawl that is no
	// longer indexing sees every document exactly once.
	Documents(ctx context.Context, crawlID, after string, limit int) ([]contracts.Document, error)
	// Writes returns how many times the document with id has been stored:
	// 1 after its first Upsert, one more for every later Upsert that stores
	// it (a batch holding several versions of it counts once). A removal
	// does not reset the count. It returns ErrNotFound when no document with
	// id is stored.
	Writes(ctx context.Context, id string) (int64, error)
	Close() error
}
