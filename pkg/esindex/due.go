package esindex

import (
	"context"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Scheduling methods of TxIndex: a range on next_due.

// dueFilters select the records of crawlID due at before.
func dueFilters(crawlID string, before time.Time) []any {
	return []any{term("crawl_id", crawlID), map[string]any{"range": map[string]any{"next_due": map[string]any{
		"lte": before.UnixMilli(), "format": "epoch_millis",
	}}}}
}

// Due returns up to limit records of crawlID whose due time is at or before
// before, earliest first: a range on the indexed next_due, which only
// settled records of continuous crawls have.
func (x *TxIndex) Due(ctx context.Context, crawlID string, before time.Time, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return nil, fmt.Errorf("list due records of crawl %q: %w", crawlID, err)
	}
	query := map[string]any{"bool": map[string]any{"filter": dueFilters(crawlID, before)}}
	sort := []any{map[string]any{"next_due": "asc"}, map[string]any{"key": "asc"}}
	recs, err := x.search(ctx, query, sort, nil, limit)
	if err != nil {
		return nil, fmt.Errorf("list due records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// DueStats returns the number of records of crawlID due at before and the
// earliest due time of the crawl.
func (x *TxIndex) DueStats(ctx context.Context, crawlID string, before time.Time) (int64, *time.Time, error) {
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return 0, nil, fmt.Errorf("count due records of crawl %q: %w", crawlID, err)
	}
	n, err := x.c.count(ctx, x.c.txIndex, dueFilters(crawlID, before)...)
	if err != nil {
		return 0, nil, fmt.Errorf("count due records of crawl %q: %w", crawlID, err)
	}
	query := map[string]any{"bool": map[string]any{"filter": []any{term("crawl_id", crawlID),
		map[string]any{"exists": map[string]any{"field": "next_due"}}}}}
	first, err := x.search(ctx, query, []any{map[string]any{"next_due": "asc"}}, nil, 1)
	if err != nil {
		return 0, nil, fmt.Errorf("next due record of crawl %q: %w", crawlID, err)
	}
	if len(first) == 0 || first[0].NextDue == nil {
		return n, nil, nil
	}
	return n, first[0].NextDue, nil
}
