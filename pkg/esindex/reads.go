package esindex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Reads methods of TxIndex: listings, the crawl log and the
// reports, which are aggregations.

// List returns up to limit records of crawlID after the key after, in key
// order; status filters when not empty.
func (x *TxIndex) List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	filters := []any{term("crawl_id", crawlID)}
	if status != "" {
		filters = append(filters, term("status", string(status)))
	}
	var searchAfter []any
	if after != "" {
		searchAfter = []any{after}
	}
	query := map[string]any{"bool": map[string]any{"filter": filters}}
	recs, err := x.search(ctx, query, []any{map[string]any{"key": "asc"}}, searchAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// The sub-fields the reports aggregate (see txMapping).
const (
	reasonField = "r"
	codeField   = "n"
)

// Find returns up to limit records of crawlID after the key after, in key
// order (search_after on key), that match f. Keys only grow along a
// listing, so it is stable.
func (x *TxIndex) Find(ctx context.Context, crawlID string, f txindex.Filter, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return nil, fmt.Errorf("find records of crawl %q: %w", crawlID, err)
	}
	filters := findFilters(crawlID, f)
	var searchAfter []any
	if after != "" {
		searchAfter = []any{after}
	}
	query := map[string]any{"bool": map[string]any{"filter": filters}}
	recs, err := x.search(ctx, query, []any{map[string]any{"key": "asc"}}, searchAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("find records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// findFilters are the query filters of the records of crawlID that match f.
func findFilters(crawlID string, f txindex.Filter) []any {
	filters := []any{term("crawl_id", crawlID)}
	if f.Status != "" {
		filters = append(filters, term("status", string(f.Status)))
	}
	if f.Host != "" {
		filters = append(filters, term("host", f.Host))
	}
	if f.Reason != "" {
		filters = append(filters, term("error."+reasonField, f.Reason))
	}
	return filters
}

// CountMatching counts the records of crawlID that match f.
func (x *TxIndex) CountMatching(ctx context.Context, crawlID string, f txindex.Filter) (int64, error) {
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return 0, fmt.Errorf("count matching records of crawl %q: %w", crawlID, err)
	}
	n, err := x.c.count(ctx, x.c.txIndex, findFilters(crawlID, f)...)
	if err != nil {
		return 0, fmt.Errorf("count matching records of crawl %q: %w", crawlID, err)
	}
	return n, nil
}

// bucket is a terms aggregation bucket with the sub-aggregations the
// reports use.
type bucket struct {
	Key      json.RawMessage `json:"key"`
	DocCount int64           `json:"doc_count"`
	Fetched  struct {
		DocCount int64 `json:"doc_count"`
	} `json:"fetched"`
	Failed struct {
		DocCount int64 `json:"doc_count"`
	} `json:"failed"`
	Bytes struct {
		Value float64 `json:"value"`
	} `json:"bytes"`
	Codes struct {
		Buckets []bucket `json:"buckets"`
	} `json:"codes"`
	Samples struct {
		Hits struct {
			Hits []struct {
				Source struct {
					URL string `json:"url"`
				} `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	} `json:"samples"`
}

// keyString returns a bucket key as a string (keyword keys) and keyInt as
// an int (numeric keys).
func (b bucket) keyString() string {
	var s string
	if json.Unmarshal(b.Key, &s) == nil {
		return s
	}
	return string(b.Key)
}

func (b bucket) keyInt() int {
	n, _ := strconv.Atoi(string(b.Key))
	return n
}

// aggregate runs the terms aggregation agg (named "rows") over the records
// of crawlID that match the extra filters and returns its buckets.
func (x *TxIndex) aggregate(ctx context.Context, crawlID string, agg map[string]any, filters ...any) ([]bucket, error) {
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{
		"size":             0,
		"track_total_hits": false,
		"query":            map[string]any{"bool": map[string]any{"filter": append([]any{term("crawl_id", crawlID)}, filters...)}},
		"aggs":             map[string]any{"rows": agg},
	})
	if err != nil {
		return nil, err
	}
	var res struct {
		Aggregations struct {
			Rows struct {
				Buckets []bucket `json:"buckets"`
			} `json:"rows"`
		} `json:"aggregations"`
	}
	req := esapi.SearchRequest{Index: []string{x.c.txIndex}, Body: bytes.NewReader(body), FilterPath: []string{"aggregations"}}
	if err := x.c.do(ctx, req, &res); err != nil {
		return nil, err
	}
	return res.Aggregations.Rows.Buckets, nil
}

// terms returns a terms aggregation of field with up to size buckets, most
// documents first, then by key; missing, when not nil, is the key of the
// bucket of documents without the field.
func terms(field string, size int, missing any) map[string]any {
	t := map[string]any{"field": field, "size": size, "order": []any{
		map[string]any{"_count": "desc"}, map[string]any{"_key": "asc"},
	}}
	if missing != nil {
		t["missing"] = missing
	}
	return map[string]any{"terms": t}
}

// exists is the filter of the documents that have field.
func exists(field string) map[string]any {
	return map[string]any{"exists": map[string]any{"field": field}}
}

// maxStatusCodes bounds the distinct HTTP statuses a report lists.
const maxStatusCodes = 1000

// HostsReport aggregates the records of crawlID by host, with their
// fetched and failed counts, bytes and status codes as sub-aggregations.
func (x *TxIndex) HostsReport(ctx context.Context, crawlID string, limit int) ([]txindex.HostRow, error) {
	if limit <= 0 {
		return nil, nil
	}
	code := "http_status." + codeField
	agg := terms("host", limit, nil)
	agg["aggs"] = map[string]any{
		"fetched": map[string]any{"filter": exists(code)},
		"failed": map[string]any{"filter": map[string]any{"bool": map[string]any{
			"filter":   []any{term("status", string(contracts.Failed))},
			"must_not": []any{term("error."+reasonField, contracts.ReasonCancelled)},
		}}},
		"bytes": map[string]any{"sum": map[string]any{"field": "bytes"}},
		"codes": terms(code, maxStatusCodes, nil),
	}
	bs, err := x.aggregate(ctx, crawlID, agg)
	if err != nil {
		return nil, fmt.Errorf("hosts report of crawl %q: %w", crawlID, err)
	}
	out := make([]txindex.HostRow, 0, len(bs))
	for _, b := range bs {
		r := txindex.HostRow{Host: b.keyString(), URLs: b.DocCount, Fetched: b.Fetched.DocCount,
			Failed: b.Failed.DocCount, Bytes: int64(b.Bytes.Value), StatusCodes: map[int]int64{}}
		for _, c := range b.Codes.Buckets {
			r.StatusCodes[c.keyInt()] = c.DocCount
		}
		out = append(out, r)
	}
	return out, nil
}

// MIMETypesReport aggregates the records of crawlID with an HTTP status by
// media type. Records written before the index had the sub-field of
// http_status are not counted.
func (x *TxIndex) MIMETypesReport(ctx context.Context, crawlID string, limit int) ([]txindex.MIMERow, error) {
	if limit <= 0 {
		return nil, nil
	}
	agg := terms("mime_type", limit, "")
	agg["aggs"] = map[string]any{"bytes": map[string]any{"sum": map[string]any{"field": "bytes"}}}
	bs, err := x.aggregate(ctx, crawlID, agg, exists("http_status."+codeField))
	if err != nil {
		return nil, fmt.Errorf("mime types report of crawl %q: %w", crawlID, err)
	}
	out := make([]txindex.MIMERow, 0, len(bs))
	for _, b := range bs {
		out = append(out, txindex.MIMERow{MIMEType: b.keyString(), Count: b.DocCount, Bytes: int64(b.Bytes.Value)})
	}
	return out, nil
}

// StatusCodesReport aggregates the records of crawlID by HTTP status; those
// without one (or written before the sub-field existed) are code 0.
func (x *TxIndex) StatusCodesReport(ctx context.Context, crawlID string) ([]txindex.StatusCodeRow, error) {
	settled := make([]string, 0, len(contracts.Statuses))
	for _, s := range contracts.Statuses {
		if s.Terminal() {
			settled = append(settled, string(s))
		}
	}
	// Records not fetched yet (pending, retired) have no status and are no
	// "no response": code 0 counts the settled records without one.
	filter := map[string]any{"bool": map[string]any{"minimum_should_match": 1, "should": []any{
		exists("http_status." + codeField), map[string]any{"terms": map[string]any{"status": settled}}}}}
	bs, err := x.aggregate(ctx, crawlID, terms("http_status."+codeField, maxStatusCodes, 0), filter)
	if err != nil {
		return nil, fmt.Errorf("status codes report of crawl %q: %w", crawlID, err)
	}
	out := make([]txindex.StatusCodeRow, 0, len(bs))
	for _, b := range bs {
		out = append(out, txindex.StatusCodeRow{StatusCode: b.keyInt(), Count: b.DocCount})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StatusCode < out[j].StatusCode })
	return out, nil
}

// FailureReasonsReport aggregates the failed records of crawlID by reason,
// with the first URLs by key of each from a top_hits sub-aggregation.
func (x *TxIndex) FailureReasonsReport(ctx context.Context, crawlID string, limit int) ([]txindex.ReasonRow, error) {
	if limit <= 0 {
		return nil, nil
	}
	agg := terms("error."+reasonField, limit, "")
	agg["aggs"] = map[string]any{"samples": map[string]any{"top_hits": map[string]any{
		"size": txindex.MaxSamples, "sort": []any{map[string]any{"key": "asc"}},
		"_source": map[string]any{"includes": []string{"url"}},
	}}}
	bs, err := x.aggregate(ctx, crawlID, agg, term("status", string(contracts.Failed)))
	if err != nil {
		return nil, fmt.Errorf("failure reasons report of crawl %q: %w", crawlID, err)
	}
	out := make([]txindex.ReasonRow, 0, len(bs))
	for _, b := range bs {
		r := txindex.ReasonRow{Reason: b.keyString(), Count: b.DocCount}
		for _, h := range b.Samples.Hits.Hits {
			r.SampleURLs = append(r.SampleURLs, h.Source.URL)
		}
		out = append(out, r)
	}
	return out, nil
}
