// Package yacy is gridcrawl's YaCy surface, mounted on MCP's router: YaCy
// Grid's crawl start (crawlStart.json, and YaCy's own crawl start form) and
// YaCy's search API (yacysearch.json and yacysearch.rss), so that YaCy's
// clients (YaCy Grid's tools, SearXNG's YaCy engine, RSS readers) work
// unchanged. It needs one operation of the coordinator and one of the
// search index.
package yacy

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
)

// CrawlStarter creates crawls (the coordinator).
type CrawlStarter interface {
	CreateCrawl(ctx context.Context, p contracts.Profile) (string, error)
}

// Searcher answers queries (the search index).
type Searcher interface {
	Search(ctx context.Context, q search.Query) (search.Result, error)
}

// Surface serves the YaCy endpoints.
type Surface struct {
	crawls CrawlStarter
	search Searcher
	log    *slog.Logger
}

// New returns the YaCy surface.
func New(crawls CrawlStarter, s Searcher, log *slog.Logger) *Surface {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Surface{crawls: crawls, search: s, log: log}
}

// Routes registers the YaCy endpoints on mux.
func (y *Surface) Routes(mux interface {
	HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request))
}) {
	mux.HandleFunc(CrawlStartPath, y.yacyCrawlStart)
	mux.HandleFunc("GET /yacysearch.json", y.yacySearchJSON)
	mux.HandleFunc("GET /yacy/grid/mcp/index/yacysearch.json", y.yacySearchJSON)
	mux.HandleFunc("GET /yacysearch.rss", y.yacySearchRSS)
}
