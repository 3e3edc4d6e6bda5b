package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Scheduling methods of TxIndex: reads of the records_due index.

// Due returns up to limit records of crawlID whose due time is at or before
// before, earliest first, through the due index.
func (x *TxIndex) Due(ctx context.Context, crawlID string, before time.Time, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := x.due.QueryContext(ctx, crawlID, before.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("list due records of crawl %q: %w", crawlID, err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("list due records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// DueStats returns the number of records of crawlID due at before and the
// earliest due time, both from the due index.
func (x *TxIndex) DueStats(ctx context.Context, crawlID string, before time.Time) (int64, *time.Time, error) {
	var n int64
	if err := x.dueCount.QueryRowContext(ctx, crawlID, before.UnixMilli()).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("count due records of crawl %q: %w", crawlID, err)
	}
	var next sql.NullInt64
	if err := x.dueNext.QueryRowContext(ctx, crawlID).Scan(&next); err != nil {
		return 0, nil, fmt.Errorf("next due record of crawl %q: %w", crawlID, err)
	}
	if !next.Valid {
		return n, nil, nil
	}
	t := time.UnixMilli(next.Int64).UTC()
	return n, &t, nil
}
