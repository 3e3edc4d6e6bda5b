package esindex

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// maxPage is the largest page of one search request (Elasticsearch's
// default index.max_result_window).
const maxPage = 10000

// TxIndex is the transaction index (txindex.Index) in the index
// "<prefix>-transactions", one document per record with the record key as
// document id, and the loader shards' leases in "<prefix>-owners" (see
// owners.go).
type TxIndex struct {
	c     *Client
	cache *versionCache
}

var _ txindex.Index = (*TxIndex)(nil)

// term returns a term query of field for value.
func term(field, value string) map[string]any {
	return map[string]any{"term": map[string]any{field: value}}
}

// inFlight lists the pending statuses (retired is not).
func inFlight() []contracts.Status {
	var out []contracts.Status
	for _, s := range contracts.Statuses {
		if s.Pending() {
			out = append(out, s)
		}
	}
	return out
}

// search returns up to limit records that match query in sort order, from
// searchAfter on, in pages of up to maxPage.
func (x *TxIndex) search(ctx context.Context, query any, sort, searchAfter []any, limit int) ([]txindex.Record, error) {
	var out []txindex.Record
	for len(out) < limit {
		size := min(limit-len(out), maxPage)
		req := map[string]any{
			"size":             size,
			"track_total_hits": false,
			"query":            query,
			"sort":             sort,
		}
		if searchAfter != nil {
			req["search_after"] = searchAfter
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		var res struct {
			Hits struct {
				Hits []struct {
					Source txindex.Record `json:"_source"`
					Sort   []any          `json:"sort"`
				} `json:"hits"`
			} `json:"hits"`
		}
		sreq := esapi.SearchRequest{
			Index:      []string{x.c.txIndex},
			Body:       bytes.NewReader(body),
			FilterPath: []string{"hits.hits._source", "hits.hits.sort"},
		}
		if err := x.c.do(ctx, sreq, &res); err != nil {
			return nil, err
		}
		for _, h := range res.Hits.Hits {
			out = append(out, h.Source)
		}
		if len(res.Hits.Hits) < size {
			break
		}
		searchAfter = res.Hits.Hits[len(res.Hits.Hits)-1].Sort
	}
	return out, nil
}

// Close does nothing: the Client owns the connection.
func (x *TxIndex) Close() error { return nil }

// TerminationQuery returns the JSON body of a _count request to the
// transactions index whose count is 0 exactly when the crawl crawlID has no
// record in a non-terminal status (to-be-loaded, to-be-parsed,
// to-be-indexed), that is when the crawl is finished:
//
//	curl -s -X POST 'http://127.0.0.1:9200/gridcrawl-transactions/_refresh'
//	curl -s -H 'Content-Type: application/json' \
//	  'http://127.0.0.1:9200/gridcrawl-transactions/_count' -d "$(body)"
//
// The refresh makes every acknowledged write visible, so the count is exact.
// Without it the count may lag behind by up to index.refresh_interval, but
// once a refresh shows any record of the crawl it is never 0 early: the
// index has one shard, a refresh exposes a prefix of its writes, and
// gridcrawl writes the new records a page discovers before the page leaves
// to-be-parsed. (Before that first refresh it counts nothing at all.)
func TerminationQuery(crawlID string) string {
	b, err := json.Marshal(map[string]any{"query": map[string]any{"bool": map[string]any{"filter": []any{
		term("crawl_id", crawlID),
		map[string]any{"terms": map[string]any{"status": inFlight()}},
	}}}})
	if err != nil {
		panic(err) // strings and string slices always marshal
	}
	return string(b)
}
