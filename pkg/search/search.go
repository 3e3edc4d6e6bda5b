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

	"github.com/gridcrawl/gridcrawl/contracts"
)

// ErrNotFound is returned by Get for an unknown id.
var ErrNotFound = errors.New("document not found")

// Query is a full-text query. Q uses the engine's simple syntax: words are
// ANDed; CrawlID restricts to one crawl when set.
type Query struct {
	Q       string
	CrawlID string
	Offset  int
	Limit   int
}

// Result is one page of hits.
type Result struct {
	Total int64
	Hits  []contracts.SearchHit
}

// Index is the search index.
type Index interface {
	Upsert(ctx context.Context, docs []contracts.Document) error
	Get(ctx context.Context, id string) (contracts.Document, error)
	Search(ctx context.Context, q Query) (Result, error)
	// Count returns the number of documents of crawlID (all crawls if empty).
	Count(ctx context.Context, crawlID string) (int64, error)
	// Writes returns how many times the document with id has been stored:
	// 1 after its first Upsert, one more for every later Upsert that stores
	// it (a batch holding several versions of it counts once). A removal
	// does not reset the count. It returns ErrNotFound when no document with
	// id is stored.
	Writes(ctx context.Context, id string) (int64, error)
	Close() error
}
