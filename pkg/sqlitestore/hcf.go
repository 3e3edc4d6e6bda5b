package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
)

// hcfSchemaVersion is stored in PRAGMA user_version.
const hcfSchemaVersion = 1

// Slots get a small integer id, so that the fingerprint and batch rows, of
// which there are many, are keyed by it instead of three names.
// Fingerprints are BLOBs so that they sort bytewise and may hold any byte.
// A batch's requests are stored as the JSON array the API serves.
// hcf_meta holds the last batch id made, so that ids keep increasing across
// restarts even when the clock goes back.
var hcfSchema = []string{
	`CREATE TABLE IF NOT EXISTS hcf_slots (
		id       INTEGER PRIMARY KEY,
		project  TEXT NOT NULL,
		frontier TEXT NOT NULL,
		slot     TEXT NOT NULL,
		UNIQUE (project, frontier, slot)
	)`,
	`CREATE TABLE IF NOT EXISTS hcf_fingerprints (
		slot_id INTEGER NOT NULL,
		fp      BLOB NOT NULL,
		fdata   BLOB,
		PRIMARY KEY (slot_id, fp)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS hcf_batches (
		slot_id  INTEGER NOT NULL,
		id       TEXT NOT NULL,
		n        INTEGER NOT NULL,
		requests BLOB NOT NULL,
		PRIMARY KEY (slot_id, id)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS hcf_meta (
		k       INTEGER PRIMARY KEY CHECK (k = 1),
		last_id TEXT NOT NULL
	)`,
}

// Page sizes of reads, and rows per multi-row insert (3 parameters each,
// far below SQLite's limit of 32766).
const (
	hcfBatchPage = 200
	hcfFPPage    = 1000
	hcfFPInsert  = 250
	hcfDeleteIDs = 500
)

// HCF is the Hub Crawl Frontier (hcf.Store) in one SQLite file. Every
// write is one transaction, through the group-commit writer: an Add is all
// or nothing, also when the process dies.
type HCF struct {
	st  *store
	wr  *writer
	gen *hcf.IDGen

	slotID, batchPage, fpPage, frontiers, slots *sql.Stmt
}

var _ hcf.Store = (*HCF)(nil)

// OpenHCF opens or creates the frontier in the SQLite file at path.
func OpenHCF(path string) (*HCF, error) { return OpenHCFClock(path, time.Now) }

// OpenHCFClock is OpenHCF with the clock that dates new batch ids, for
// tests that want known ids.
func OpenHCFClock(path string, now func() time.Time) (*HCF, error) {
	st, err := openStore(path, hcfSchemaVersion, hcfSchema)
	if err != nil {
		return nil, err
	}
	h := &HCF{st: st, gen: hcf.NewIDGen(now)}
	var last string
	err = st.w.QueryRow(`SELECT last_id FROM hcf_meta WHERE k = 1`).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		_ = st.close()
		return nil, fmt.Errorf("open hcf %q: read last batch id: %w", path, err)
	}
	h.gen.Observe(last)
	prep := []struct {
		dst **sql.Stmt
		q   string
	}{
		{&h.slotID, `SELECT id FROM hcf_slots WHERE project = ? AND frontier = ? AND slot = ?`},
		{&h.batchPage, `SELECT id, requests FROM hcf_batches WHERE slot_id = ? AND id > ? ORDER BY id LIMIT ?`},
		{&h.fpPage, `SELECT fp, fdata FROM hcf_fingerprints WHERE slot_id = ? AND fp > ? ORDER BY fp LIMIT ?`},
		{&h.frontiers, `SELECT DISTINCT frontier FROM hcf_slots WHERE project = ? ORDER BY frontier`},
		{&h.slots, `SELECT slot FROM hcf_slots WHERE project = ? AND frontier = ? ORDER BY slot`},
	}
	for _, p := range prep {
		s, err := st.r.Prepare(p.q)
		if err != nil {
			h.closeStmts()
			_ = st.close()
			return nil, fmt.Errorf("open hcf %q: prepare: %w", path, err)
		}
		*p.dst = s
	}
	h.wr = newWriter(st.w)
	return h, nil
}

// Close closes the database; later calls return the first result.
func (h *HCF) Close() error {
	h.wr.close()
	h.closeStmts()
	return h.st.close()
}

func (h *HCF) closeStmts() {
	for _, s := range []*sql.Stmt{h.slotID, h.batchPage, h.fpPage, h.frontiers, h.slots} {
		if s != nil {
			_ = s.Close()
		}
	}
}

// Add enqueues the requests whose fingerprints the slot has not seen, in
// one transaction.
func (h *HCF) Add(ctx context.Context, slot hcf.Slot, reqs []hcf.Request) (int, error) {
	if err := hcf.ValidateAll(slot, reqs); err != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, err)
	}
	uniq := hcf.Dedupe(reqs)
	if len(uniq) == 0 {
		return 0, nil
	}
	var newCount int
	err := h.wr.do(ctx, func(tx *sql.Tx) error {
		newCount = 0
		id, err := ensureSlot(tx, slot)
		if err != nil {
			return err
		}
		fresh, err := insertFingerprints(tx, id, uniq)
		if err != nil {
			return err
		}
		if len(fresh) == 0 {
			return nil
		}
		batches := hcf.NewBatches(h.gen, fresh)
		ins, err := tx.Prepare(`INSERT INTO hcf_batches (slot_id, id, n, requests) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("prepare batch insert: %w", err)
		}
		defer ins.Close()
		var buf []byte
		for _, b := range batches {
			buf = hcf.AppendRequests(buf[:0], b.Requests)
			if _, err := ins.Exec(id, b.ID, len(b.Requests), buf); err != nil {
				return fmt.Errorf("insert batch %q: %w", b.ID, err)
			}
		}
		if _, err := tx.Exec(`INSERT INTO hcf_meta (k, last_id) VALUES (1, ?)
			ON CONFLICT (k) DO UPDATE SET last_id = excluded.last_id`, batches[len(batches)-1].ID); err != nil {
			return fmt.Errorf("record last batch id: %w", err)
		}
		newCount = len(fresh)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, err)
	}
	return newCount, nil
}

// ensureSlot returns the id of slot, creating it if needed.
func ensureSlot(tx *sql.Tx, slot hcf.Slot) (int64, error) {
	var id int64
	err := tx.QueryRow(`SELECT id FROM hcf_slots WHERE project = ? AND frontier = ? AND slot = ?`,
		slot.Project, slot.Frontier, slot.Name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRow(`INSERT INTO hcf_slots (project, frontier, slot) VALUES (?, ?, ?) RETURNING id`,
			slot.Project, slot.Frontier, slot.Name).Scan(&id)
	}
	if err != nil {
		return 0, fmt.Errorf("find slot: %w", err)
	}
	return id, nil
}

// insertFingerprints inserts the fingerprints of uniq (distinct) that slot
// id lacks and returns their requests, in order.
func insertFingerprints(tx *sql.Tx, id int64, uniq []hcf.Request) ([]hcf.Request, error) {
	added := make(map[string]struct{}, len(uniq))
	var full *sql.Stmt
	defer func() {
		if full != nil {
			_ = full.Close()
		}
	}()
	args := make([]any, 0, 3*hcfFPInsert)
	for start := 0; start < len(uniq); start += hcfFPInsert {
		chunk := uniq[start:min(start+hcfFPInsert, len(uniq))]
		args = args[:0]
		for _, r := range chunk {
			var fdata any
			if d := hcf.Data(r.FData); d != nil {
				fdata = []byte(d)
			}
			args = append(args, id, []byte(r.FP), fdata)
		}
		st := full
		if len(chunk) < hcfFPInsert || full == nil {
			q := `INSERT INTO hcf_fingerprints (slot_id, fp, fdata) VALUES ` +
				strings.TrimSuffix(strings.Repeat("(?, ?, ?),", len(chunk)), ",") +
				` ON CONFLICT DO NOTHING RETURNING fp`
			s, err := tx.Prepare(q)
			if err != nil {
				return nil, fmt.Errorf("prepare fingerprint insert: %w", err)
			}
			if len(chunk) == hcfFPInsert {
				full = s
			} else {
				defer s.Close()
			}
			st = s
		}
		rows, err := st.Query(args...)
		if err != nil {
			return nil, fmt.Errorf("insert fingerprints: %w", err)
		}
		for rows.Next() {
			var fp []byte
			if err := rows.Scan(&fp); err != nil {
				rows.Close()
				return nil, fmt.Errorf("insert fingerprints: %w", err)
			}
			added[string(fp)] = struct{}{}
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("insert fingerprints: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("insert fingerprints: %w", err)
		}
	}
	fresh := make([]hcf.Request, 0, len(added))
	for _, r := range uniq {
		if _, ok := added[r.FP]; ok {
			fresh = append(fresh, r)
		}
	}
	return fresh, nil
}

// lookupSlot returns the id of slot, or ok false when it does not exist.
func (h *HCF) lookupSlot(ctx context.Context, slot hcf.Slot) (id int64, ok bool, err error) {
	err = h.slotID.QueryRowContext(ctx, slot.Project, slot.Frontier, slot.Name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("find slot: %w", err)
	}
	return id, true, nil
}

// Batches reads the slot's batches in id order, a page at a time, calling
// fn between pages so that no read transaction stays open while fn writes
// to a slow client.
func (h *HCF) Batches(ctx context.Context, slot hcf.Slot, mincount int, fn func(hcf.Batch) error) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	id, ok, err := h.lookupSlot(ctx, slot)
	if err != nil || !ok {
		return wrapErr("read hcf slot", slot, err)
	}
	after, total := "", 0
	for {
		page, err := h.batchPageAfter(ctx, id, after)
		if err != nil {
			return fmt.Errorf("read hcf slot %q: %w", slot, err)
		}
		for _, b := range page {
			if err := fn(b); err != nil {
				return err
			}
			total += len(b.Requests)
			if mincount > 0 && total >= mincount {
				return nil
			}
		}
		if len(page) < hcfBatchPage {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

func (h *HCF) batchPageAfter(ctx context.Context, slotID int64, after string) ([]hcf.Batch, error) {
	rows, err := h.batchPage.QueryContext(ctx, slotID, after, hcfBatchPage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []hcf.Batch
	for rows.Next() {
		var b hcf.Batch
		var raw []byte
		if err := rows.Scan(&b.ID, &raw); err != nil {
			return nil, err
		}
		if b.Requests, err = hcf.DecodeRequests(raw); err != nil {
			return nil, fmt.Errorf("batch %q: %w", b.ID, err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// DeleteBatches deletes the batches with the given ids, in one transaction.
func (h *HCF) DeleteBatches(ctx context.Context, slot hcf.Slot, ids []string) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
	}
	valid := make([]any, 0, len(ids))
	for _, id := range ids {
		if _, _, _, ok := hcf.ParseBatchID(id); ok {
			valid = append(valid, id)
		}
	}
	if len(valid) == 0 {
		return nil
	}
	err := h.wr.do(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRow(`SELECT id FROM hcf_slots WHERE project = ? AND frontier = ? AND slot = ?`,
			slot.Project, slot.Frontier, slot.Name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find slot: %w", err)
		}
		for start := 0; start < len(valid); start += hcfDeleteIDs {
			chunk := valid[start:min(start+hcfDeleteIDs, len(valid))]
			q := `DELETE FROM hcf_batches WHERE slot_id = ? AND id IN (` + placeholders(len(chunk)) + `)`
			if _, err := tx.Exec(q, append([]any{id}, chunk...)...); err != nil {
				return fmt.Errorf("delete batches: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
	}
	return nil
}

// Fingerprints reads the slot's fingerprint set in byte order, a page at a
// time.
func (h *HCF) Fingerprints(ctx context.Context, slot hcf.Slot, fn func(hcf.Fingerprint) error) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("read hcf fingerprints of %q: %w", slot, err)
	}
	id, ok, err := h.lookupSlot(ctx, slot)
	if err != nil || !ok {
		return wrapErr("read hcf fingerprints of", slot, err)
	}
	after := []byte{}
	for {
		page, err := h.fpPageAfter(ctx, id, after)
		if err != nil {
			return fmt.Errorf("read hcf fingerprints of %q: %w", slot, err)
		}
		for _, f := range page {
			if err := fn(f); err != nil {
				return err
			}
		}
		if len(page) < hcfFPPage {
			return nil
		}
		after = []byte(page[len(page)-1].FP)
	}
}

func (h *HCF) fpPageAfter(ctx context.Context, slotID int64, after []byte) ([]hcf.Fingerprint, error) {
	rows, err := h.fpPage.QueryContext(ctx, slotID, after, hcfFPPage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []hcf.Fingerprint
	for rows.Next() {
		var fp, fdata []byte
		if err := rows.Scan(&fp, &fdata); err != nil {
			return nil, err
		}
		f := hcf.Fingerprint{FP: string(fp)}
		if fdata != nil {
			f.FData = fdata
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// DeleteSlot deletes the slot's queue and fingerprints in one transaction.
func (h *HCF) DeleteSlot(ctx context.Context, slot hcf.Slot) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("delete hcf slot %q: %w", slot, err)
	}
	err := h.wr.do(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRow(`DELETE FROM hcf_slots WHERE project = ? AND frontier = ? AND slot = ? RETURNING id`,
			slot.Project, slot.Frontier, slot.Name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("delete slot: %w", err)
		}
		if _, err := tx.Exec(`DELETE FROM hcf_fingerprints WHERE slot_id = ?`, id); err != nil {
			return fmt.Errorf("delete fingerprints: %w", err)
		}
		if _, err := tx.Exec(`DELETE FROM hcf_batches WHERE slot_id = ?`, id); err != nil {
			return fmt.Errorf("delete batches: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete hcf slot %q: %w", slot, err)
	}
	return nil
}

// Frontiers returns the project's frontiers that have slots.
func (h *HCF) Frontiers(ctx context.Context, project string) ([]string, error) {
	if err := hcf.ValidateName("project", project); err != nil {
		return nil, fmt.Errorf("list hcf frontiers of %q: %w", project, err)
	}
	out, err := queryStrings(ctx, h.frontiers, project)
	if err != nil {
		return nil, fmt.Errorf("list hcf frontiers of %q: %w", project, err)
	}
	return out, nil
}

// Slots returns the frontier's slots.
func (h *HCF) Slots(ctx context.Context, project, frontier string) ([]string, error) {
	if err := (hcf.Slot{Project: project, Frontier: frontier, Name: "-"}).Validate(); err != nil {
		return nil, fmt.Errorf("list hcf slots of %q/%q: %w", project, frontier, err)
	}
	out, err := queryStrings(ctx, h.slots, project, frontier)
	if err != nil {
		return nil, fmt.Errorf("list hcf slots of %q/%q: %w", project, frontier, err)
	}
	return out, nil
}

func queryStrings(ctx context.Context, st *sql.Stmt, args ...any) ([]string, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// wrapErr wraps a non-nil err with the action on slot.
func wrapErr(action string, slot hcf.Slot, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %q: %w", action, slot, err)
}
