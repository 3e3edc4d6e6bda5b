package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// Stale returns up to limit records in a pending status whose status time
// is before before, oldest first, leaving out the to-be-loaded records of
// the shards in owned. The records without a loader shard are read from
// records_stale; those of each shard that has to-be-loaded records and is
// not owned from records_loading, so that the filed URLs of owned shards,
// however many, cost the query nothing.
func (x *TxIndex) Stale(ctx context.Context, before time.Time, limit int, owned []string) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	recs, err := x.query(ctx, x.stale, nanos(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale records: %w", err)
	}
	shards, err := x.loadingShards.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("list stale records: shards: %w", err)
	}
	var others []string
	for shards.Next() {
		var s string
		if err := shards.Scan(&s); err != nil {
			_ = shards.Close()
			return nil, fmt.Errorf("list stale records: shards: %w", err)
		}
		if !slices.Contains(owned, s) {
			others = append(others, s)
		}
	}
	if err := errors.Join(shards.Err(), shards.Close()); err != nil {
		return nil, fmt.Errorf("list stale records: shards: %w", err)
	}
	for _, s := range others {
		more, err := x.query(ctx, x.staleLoading, s, nanos(before), limit)
		if err != nil {
			return nil, fmt.Errorf("list stale records of shard %s: %w", s, err)
		}
		recs = append(recs, more...)
	}
	if len(others) > 0 {
		slices.SortStableFunc(recs, func(a, b txindex.Record) int { return a.StatusTime.Compare(b.StatusTime) })
		recs = recs[:min(len(recs), limit)]
	}
	return recs, nil
}

// Waiting returns up to limit to-be-loaded records of loader shard shard
// after the key after, in key order.
func (x *TxIndex) Waiting(ctx context.Context, shard, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	recs, err := x.query(ctx, x.waiting, after, shard, limit)
	if err != nil {
		return nil, fmt.Errorf("list waiting records of shard %s: %w", shard, err)
	}
	return recs, nil
}

func (x *TxIndex) query(ctx context.Context, st *sql.Stmt, args ...any) ([]txindex.Record, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// Claim makes owner the owner of shard until now+ttl when the shard is free
// or owner's already (see txindex.Owners). The writer's transaction makes
// the read and the write one step.
func (x *TxIndex) Claim(ctx context.Context, shard, owner string, ttl time.Duration) (txindex.Lease, bool, error) {
	var got txindex.Lease
	var ok bool
	err := x.wr.do(ctx, func(tx *sql.Tx) error {
		got, ok = txindex.Lease{}, false
		now := time.Now()
		l, found, err := x.readLease(tx, shard)
		if err != nil {
			return err
		}
		switch {
		case !found:
			l = txindex.Lease{Shard: shard, Owner: owner, Epoch: 1}
		case l.Owner == owner:
		case !l.Live(now):
			l.Owner, l.Epoch = owner, l.Epoch+1
		default:
			got = l
			return nil
		}
		l.Expires, l.Released = now.Add(ttl).UTC(), false
		if err := x.writeLease(tx, l); err != nil {
			return err
		}
		got, ok = l, true
		return nil
	})
	if err != nil {
		return txindex.Lease{}, false, fmt.Errorf("claim shard %s: %w", shard, err)
	}
	return got, ok, nil
}

// Renew extends l until now+ttl if its shard is still l.Owner's at l.Epoch.
func (x *TxIndex) Renew(ctx context.Context, l txindex.Lease, ttl time.Duration) (txindex.Lease, bool, error) {
	var got txindex.Lease
	var ok bool
	err := x.wr.do(ctx, func(tx *sql.Tx) error {
		got, ok = txindex.Lease{}, false
		cur, found, err := x.readLease(tx, l.Shard)
		if err != nil || !found || cur.Owner != l.Owner || cur.Epoch != l.Epoch || cur.Released {
			got = cur
			return err
		}
		cur.Expires = time.Now().Add(ttl).UTC()
		if err := x.writeLease(tx, cur); err != nil {
			return err
		}
		got, ok = cur, true
		return nil
	})
	if err != nil {
		return txindex.Lease{}, false, fmt.Errorf("renew lease of shard %s: %w", l.Shard, err)
	}
	return got, ok, nil
}

// Release frees l's shard if it is still l.Owner's at l.Epoch.
func (x *TxIndex) Release(ctx context.Context, l txindex.Lease) error {
	err := x.wr.do(ctx, func(tx *sql.Tx) error {
		cur, found, err := x.readLease(tx, l.Shard)
		if err != nil || !found || cur.Owner != l.Owner || cur.Epoch != l.Epoch || cur.Released {
			return err
		}
		cur.Released = true
		return x.writeLease(tx, cur)
	})
	if err != nil {
		return fmt.Errorf("release shard %s: %w", l.Shard, err)
	}
	return nil
}

// Leases returns the lease of every shard ever claimed, by shard.
func (x *TxIndex) Leases(ctx context.Context) ([]txindex.Lease, error) {
	rows, err := x.st.r.QueryContext(ctx, `SELECT shard, owner, epoch, expires, released FROM shard_leases ORDER BY shard`)
	if err != nil {
		return nil, fmt.Errorf("list shard leases: %w", err)
	}
	defer rows.Close()
	var out []txindex.Lease
	for rows.Next() {
		var l txindex.Lease
		var expires int64
		if err := rows.Scan(&l.Shard, &l.Owner, &l.Epoch, &expires, &l.Released); err != nil {
			return nil, fmt.Errorf("list shard leases: %w", err)
		}
		l.Expires = fromNanos(expires)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list shard leases: %w", err)
	}
	return out, nil
}

func (x *TxIndex) readLease(tx *sql.Tx, shard string) (txindex.Lease, bool, error) {
	l := txindex.Lease{Shard: shard}
	var expires int64
	err := tx.Stmt(x.lease).QueryRow(shard).Scan(&l.Owner, &l.Epoch, &expires, &l.Released)
	if errors.Is(err, sql.ErrNoRows) {
		return l, false, nil
	}
	if err != nil {
		return l, false, err
	}
	l.Expires = fromNanos(expires)
	return l, true, nil
}

func (x *TxIndex) writeLease(tx *sql.Tx, l txindex.Lease) error {
	_, err := tx.Stmt(x.putLease).Exec(l.Shard, l.Owner, l.Epoch, nanos(l.Expires), l.Released)
	return err
}
