package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/gridcrawl/gridcrawl/pkg/digests"
)

// digestsSchemaVersion is stored in PRAGMA user_version.
const digestsSchemaVersion = 1

// added orders entries by when they were added (a rowid would serve, but
// the table is WITHOUT ROWID, keyed by what Lookup asks).
var digestsSchema = []string{
	`CREATE TABLE IF NOT EXISTS digests (
		scope     TEXT NOT NULL,
		digest    TEXT NOT NULL,
		uri       TEXT NOT NULL,
		date      INTEGER NOT NULL,
		record_id TEXT NOT NULL,
		key       TEXT NOT NULL,
		off       INTEGER NOT NULL,
		len       INTEGER NOT NULL,
		PRIMARY KEY (scope, digest)
	) WITHOUT ROWID`,
}

// digestsLookupRows bounds the refs of one lookup query (2 parameters
// each, far below SQLite's limit of 32766).
const digestsLookupRows = 500

// Digests is the payload-digest index (digests.Index) in one SQLite file.
type Digests struct {
	st *store
	wr *writer
}

var _ digests.Index = (*Digests)(nil)

// OpenDigests opens or creates the payload-digest index in the SQLite file
// at path.
func OpenDigests(path string) (*Digests, error) {
	st, err := openStore(path, digestsSchemaVersion, digestsSchema)
	if err != nil {
		return nil, err
	}
	return &Digests{st: st, wr: newWriter(st.w)}, nil
}

// Close closes the database; later calls return the first result.
func (d *Digests) Close() error {
	d.wr.close()
	return d.st.close()
}

// Lookup returns the entries of refs that exist.
func (d *Digests) Lookup(ctx context.Context, refs []digests.Ref) (map[digests.Ref]digests.Entry, error) {
	out := make(map[digests.Ref]digests.Entry, len(refs))
	var args []any
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		q := "SELECT scope, digest, uri, date, record_id, key, off, len FROM digests WHERE (scope, digest) IN (VALUES " +
			repeatJoin("(?,?)", len(args)/2) + ")"
		rows, err := d.st.r.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e digests.Entry
			var date int64
			if err := rows.Scan(&e.Scope, &e.Digest, &e.URI, &date, &e.RecordID, &e.Key, &e.Offset, &e.Length); err != nil {
				return err
			}
			e.Date = fromNanos(date)
			out[e.Ref] = e
		}
		args = args[:0]
		return rows.Err()
	}
	for _, r := range refs {
		if r.Scope == "" || r.Digest == "" || len(r.Scope) > digests.MaxScopeLen || len(r.Digest) > digests.MaxDigestLen {
			continue
		}
		args = append(args, r.Scope, r.Digest)
		if len(args) >= 2*digestsLookupRows {
			if err := flush(); err != nil {
				return nil, fmt.Errorf("look up payload digests: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return nil, fmt.Errorf("look up payload digests: %w", err)
	}
	return out, nil
}

// repeatJoin returns n copies of s joined by commas.
func repeatJoin(s string, n int) string {
	b := make([]byte, 0, n*(len(s)+1))
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s...)
	}
	return string(b)
}

// Add adds the entries whose Ref has none, in one transaction.
func (d *Digests) Add(ctx context.Context, entries []digests.Entry) ([]bool, error) {
	for _, e := range entries {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("add payload digests: %w", err)
		}
	}
	added := make([]bool, len(entries))
	if len(entries) == 0 {
		return added, nil
	}
	err := d.wr.do(ctx, func(tx *sql.Tx) error {
		clear(added) // a failed group runs the job again
		ins, err := tx.Prepare(`INSERT INTO digests (scope, digest, uri, date, record_id, key, off, len)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, digest) DO NOTHING`)
		if err != nil {
			return fmt.Errorf("prepare digest insert: %w", err)
		}
		defer ins.Close()
		for i, e := range entries {
			res, err := ins.Exec(e.Scope, e.Digest, e.URI, nanos(e.Date), e.RecordID, e.Key, e.Offset, e.Length)
			if err != nil {
				return fmt.Errorf("insert digest %q: %w", e.Digest, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("insert digest %q: %w", e.Digest, err)
			}
			added[i] = n == 1
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("add payload digests: %w", err)
	}
	return added, nil
}

// Remove removes the entries of stale whose Ref still holds their record.
func (d *Digests) Remove(ctx context.Context, stale []digests.Entry) error {
	if len(stale) == 0 {
		return nil
	}
	err := d.wr.do(ctx, func(tx *sql.Tx) error {
		for _, e := range stale {
			if _, err := tx.Exec(`DELETE FROM digests WHERE scope = ? AND digest = ? AND record_id = ?`, e.Scope, e.Digest, e.RecordID); err != nil {
				return fmt.Errorf("delete digest %q: %w", e.Digest, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove payload digests: %w", err)
	}
	return nil
}

// Count returns the number of entries.
func (d *Digests) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := d.st.r.QueryRowContext(ctx, `SELECT count(*) FROM digests`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count payload digests: %w", err)
	}
	return n, nil
}
