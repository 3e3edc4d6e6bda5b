package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// profileSchemaVersion is stored in PRAGMA user_version.
const profileSchemaVersion = 1

var profileSchema = []string{
	`CREATE TABLE IF NOT EXISTS crawls (
		id          TEXT PRIMARY KEY,
		profile     TEXT NOT NULL,
		state       TEXT NOT NULL,
		created_at  INTEGER NOT NULL,
		finished_at INTEGER
	)`,
	`CREATE INDEX IF NOT EXISTS crawls_created ON crawls (created_at)`,
}

// Profiles is the crawl store (profiles.Store) in one SQLite file. Writes are
// rare (one per crawl and state change), so they go straight to the writer
// connection without group commit.
type Profiles struct {
	st *store
}

var _ profiles.Store = (*Profiles)(nil)

// OpenProfiles opens or creates the crawl store in the SQLite file at path.
func OpenProfiles(path string) (*Profiles, error) {
	st, err := openStore(path, profileSchemaVersion, profileSchema)
	if err != nil {
		return nil, err
	}
	return &Profiles{st: st}, nil
}

// Put stores a new crawl, or fails with profiles.ErrExists.
func (p *Profiles) Put(ctx context.Context, c profiles.Crawl) error {
	if c.ID == "" {
		return errors.New("put crawl: empty id")
	}
	prof, err := json.Marshal(c.Profile)
	if err != nil {
		return fmt.Errorf("put crawl %q: %w", c.ID, err)
	}
	res, err := p.st.w.ExecContext(ctx,
		`INSERT INTO crawls (id, profile, state, created_at, finished_at) VALUES (?, ?, ?, ?, ?)
		 ON CONFLICT (id) DO NOTHING`,
		c.ID, string(prof), string(c.State), nanos(c.CreatedAt), nullNanos(c.FinishedAt))
	if err != nil {
		return fmt.Errorf("put crawl %q: %w", c.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("put crawl %q: %w", c.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("put crawl %q: %w", c.ID, profiles.ErrExists)
	}
	return nil
}

// Get returns the crawl with id, or profiles.ErrNotFound.
func (p *Profiles) Get(ctx context.Context, id string) (profiles.Crawl, error) {
	c, err := scanCrawl(p.st.r.QueryRowContext(ctx,
		`SELECT id, profile, state, created_at, finished_at FROM crawls WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return profiles.Crawl{}, fmt.Errorf("get crawl %q: %w", id, profiles.ErrNotFound)
	}
	if err != nil {
		return profiles.Crawl{}, fmt.Errorf("get crawl %q: %w", id, err)
	}
	return c, nil
}

// List returns all crawls, newest first (by creation time, then id).
func (p *Profiles) List(ctx context.Context) ([]profiles.Crawl, error) {
	rows, err := p.st.r.QueryContext(ctx,
		`SELECT id, profile, state, created_at, finished_at FROM crawls ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list crawls: %w", err)
	}
	defer rows.Close()
	var out []profiles.Crawl
	for rows.Next() {
		c, err := scanCrawl(rows)
		if err != nil {
			return nil, fmt.Errorf("list crawls: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list crawls: %w", err)
	}
	return out, nil
}

// Transition changes crawl id's state from from to to in one conditional
// UPDATE, or fails with profiles.ErrConflict (the crawl is in another state)
// or profiles.ErrNotFound.
func (p *Profiles) Transition(ctx context.Context, id string, from, to contracts.CrawlState, at time.Time) error {
	var finished *time.Time
	if to == contracts.CrawlFinished || to == contracts.CrawlCancelled {
		finished = &at
	}
	res, err := p.st.w.ExecContext(ctx, `UPDATE crawls SET state = ?, finished_at = ? WHERE id = ? AND state = ?`,
		string(to), nullNanos(finished), id, string(from))
	if err != nil {
		return fmt.Errorf("change state of crawl %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("change state of crawl %q: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	var state string
	err = p.st.w.QueryRowContext(ctx, `SELECT state FROM crawls WHERE id = ?`, id).Scan(&state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("change state of crawl %q: %w", id, profiles.ErrNotFound)
	case err != nil:
		return fmt.Errorf("change state of crawl %q: %w", id, err)
	}
	return fmt.Errorf("change state of crawl %q from %s to %s: it is %s: %w", id, from, to, state, profiles.ErrConflict)
}

// SetProfile replaces the profile of crawl id.
func (p *Profiles) SetProfile(ctx context.Context, id string, prof contracts.Profile) error {
	b, err := json.Marshal(prof)
	if err != nil {
		return fmt.Errorf("set profile of crawl %q: %w", id, err)
	}
	res, err := p.st.w.ExecContext(ctx, `UPDATE crawls SET profile = ? WHERE id = ?`, string(b), id)
	if err != nil {
		return fmt.Errorf("set profile of crawl %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("set profile of crawl %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("set profile of crawl %q: %w", id, profiles.ErrNotFound)
	}
	return nil
}

// Close closes the database. It is safe to call more than once.
func (p *Profiles) Close() error { return p.st.close() }

func scanCrawl(row scanner) (profiles.Crawl, error) {
	var c profiles.Crawl
	var prof, state string
	var created int64
	var finished sql.NullInt64
	if err := row.Scan(&c.ID, &prof, &state, &created, &finished); err != nil {
		return profiles.Crawl{}, err
	}
	if err := json.Unmarshal([]byte(prof), &c.Profile); err != nil {
		return profiles.Crawl{}, fmt.Errorf("decode profile: %w", err)
	}
	c.State = contracts.CrawlState(state)
	c.CreatedAt = fromNanos(created)
	if finished.Valid {
		t := fromNanos(finished.Int64)
		c.FinishedAt = &t
	}
	return c, nil
}

func nullNanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return nanos(*t)
}
