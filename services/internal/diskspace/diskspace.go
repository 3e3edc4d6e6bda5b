// Package diskspace watches the free space of the file system that holds the
// embedded backends' data directory.
//
// SQLite and the asset files keep working on a disk that is almost full
// until a write fails with ENOSPC (SQLITE_FULL); their readiness probes,
// which read, keep answering. A Watch is the readiness check ("disk") that
// fails instead: while the free space is below a floor, and after a write
// failed for lack of space (Note) until the free space has grown again. The
// outage gate then postpones work instead of counting failed attempts, the
// loader takes no new leases and MCP refuses new crawls, until space is
// freed.
package diskspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Backend is the name of the check in /readyz and in the gate's logs.
const Backend = "disk"

// DefaultFloor is the default of GRIDCRAWL_MIN_FREE_DISK.
const DefaultFloor = "64MiB"

// recentFull is how long after Full last found the disk full a failed
// write is taken to have failed on that full disk (see Watch.fullFree).
// The outage gate probes a full disk at least every two seconds.
const recentFull = 5 * time.Second

// resumeMargin is the least growth of free space after a write failed for
// lack of space, or the least free space above the floor after the free
// space fell below it, before the disk counts as available again, at most an
// eighth of the file system: retrying into the same few free bytes would fail
// again, and the writes cut back after failing (a partial WARC append, a
// SQLite transaction) or an object replaced by a new copy (a report written
// to a temporary file and renamed over the old) free some space that is no
// room for more work.
const resumeMargin = 16 << 20

// Floor is the least free space: Bytes, or Percent of the file system's size
// when Percent > 0. The zero Floor checks nothing but failed writes.
type Floor struct {
	Bytes   int64
	Percent float64
}

// ParseFloor parses a floor: a number of bytes with an optional unit (B, KB,
// MB, GB, TB or KiB, MiB, GiB, TiB; case-insensitive), or a percentage of
// the file system's size ("1%"). "0" sets no floor.
func ParseFloor(s string) (Floor, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || v >= 100 {
			return Floor{}, fmt.Errorf("free disk floor %q: want a percentage in [0, 100)", s)
		}
		return Floor{Percent: v}, nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult := map[string]float64{"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || v < 0 || v*mult > 1<<62 {
		return Floor{}, fmt.Errorf("free disk floor %q: want bytes with an optional unit (64MiB, 1GB) or a percentage (1%%)", s)
	}
	return Floor{Bytes: int64(v * mult)}, nil
}

// String formats f as ParseFloor reads it.
func (f Floor) String() string {
	if f.Percent > 0 {
		return strconv.FormatFloat(f.Percent, 'f', -1, 64) + "%"
	}
	return FormatBytes(f.Bytes)
}

// limit returns the floor in bytes on a file system of total bytes.
func (f Floor) limit(total int64) int64 {
	if f.Percent > 0 {
		return int64(float64(total) * f.Percent / 100)
	}
	return f.Bytes
}

// Usage is the space of a file system as an unprivileged process sees it.
type Usage struct {
	Free, Total int64
}

// Stat returns the usage of the file system holding dir.
func Stat(dir string) (Usage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("free space of %s: %w", dir, err)
	}
	bs := int64(st.Bsize)
	return Usage{Free: int64(st.Bavail) * bs, Total: int64(st.Blocks) * bs}, nil
}

// ErrFull is wrapped by the errors of a Watch whose disk is full.
var ErrFull = errors.New("disk full")

// Watch is the disk check of one data directory. Its methods are safe for
// concurrent use.
type Watch struct {
	dir   string
	floor Floor

	mu sync.Mutex
	// failedFree is the most free space seen when a write failed for lack
	// of space since the disk was last full; -1 when no failure is
	// outstanding.
	failedFree int64
	failedErr  string
	// fullFree is the free space when Full last found the disk full, at
	// fullAt: a write that failed while the disk was full may be noted a
	// moment after space was freed (its failure raced the freeing), and
	// must not count the freed space as space a write failed with.
	fullFree int64
	fullAt   time.Time
	// low is set when the free space was seen below the floor, until it
	// is the floor and a margin: without that margin the check flapped
	// between full and available while writes in flight took space and an
	// object replaced by its new copy gave some back, and the service took
	// work and refused it by turns.
	low bool
}

// New returns the watch of dir's file system with floor.
func New(dir string, floor Floor) *Watch {
	return &Watch{dir: dir, floor: floor, failedFree: -1}
}

// full records that the disk was found full with free bytes free, and
// returns err. w.mu is held.
func (w *Watch) full(free int64, err error) error {
	w.fullFree, w.fullAt = free, time.Now()
	return err
}

// Dir returns the watched directory.
func (w *Watch) Dir() string { return w.dir }

// IsFull reports whether err is a write's failure for lack of space: ENOSPC,
// EDQUOT, or SQLite's SQLITE_FULL (and its failure to grow the WAL index).
func IsFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var c interface{ Code() int }
	if errors.As(err, &c) {
		const sqliteFull, sqliteIOErrShmSize = 13, 4874
		if code := c.Code(); code&0xff == sqliteFull || code == sqliteIOErrShmSize {
			return true
		}
	}
	return false
}

// Note records err when it is a write's failure for lack of space (IsFull)
// and reports whether it was: the disk then counts as full until its free
// space has grown. The outage gate calls it with every failure before it
// probes the backends, so that a failed write counts as the outage's even
// when the floor was not reached.
func (w *Watch) Note(err error) bool {
	if w == nil || !IsFull(err) {
		return false
	}
	free, total := int64(0), int64(0)
	if u, serr := Stat(w.dir); serr == nil {
		free, total = u.Free, u.Total
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// A failure noted right after the disk was found full failed on that
	// disk: more free space than a cut-back write gives back (two margins)
	// was freed since, and does not count as space a write failed with.
	if !w.fullAt.IsZero() && time.Since(w.fullAt) < recentFull {
		free = min(free, w.fullFree+2*min(resumeMargin, total/8))
	}
	// The most free space any failed write saw: writes failed even with
	// that much free (the space a failed write took is given back when it
	// is cut back, so a later failure may see more free than an earlier).
	if w.failedFree < 0 || free > w.failedFree {
		w.failedFree = free
	}
	w.failedErr = err.Error()
	return true
}

// Full returns nil when the disk has room, or an error wrapping ErrFull
// that names the data directory, its free space and the floor.
func (w *Watch) Full() error {
	if w == nil {
		return nil
	}
	u, err := Stat(w.dir)
	if err != nil {
		return err
	}
	limit := w.floor.limit(u.Total)
	margin := min(resumeMargin, u.Total/8)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failedFree >= 0 {
		if u.Free >= limit && u.Free >= w.failedFree+max(limit, margin) {
			w.failedFree, w.failedErr = -1, ""
		} else {
			return w.full(u.Free, fmt.Errorf("%w: data directory %s has %s free of %s; a write failed for lack of space (%s)",
				ErrFull, w.dir, FormatBytes(u.Free), FormatBytes(u.Total), w.failedErr))
		}
	}
	if limit > 0 && (u.Free < limit || w.low && u.Free < limit+margin) {
		w.low = true
		if u.Free >= limit {
			return w.full(u.Free, fmt.Errorf("%w: data directory %s has %s free of %s, fell below the floor of %s (GRIDCRAWL_MIN_FREE_DISK) and waits for %s free",
				ErrFull, w.dir, FormatBytes(u.Free), FormatBytes(u.Total), FormatBytes(limit), FormatBytes(limit+margin)))
		}
		return w.full(u.Free, fmt.Errorf("%w: data directory %s has %s free of %s, below the floor of %s (GRIDCRAWL_MIN_FREE_DISK)",
			ErrFull, w.dir, FormatBytes(u.Free), FormatBytes(u.Total), FormatBytes(limit)))
	}
	w.low = false
	return nil
}

// Check returns the readiness check of the watch (backend "disk").
func (w *Watch) Check() metrics.Check {
	return metrics.Check{Backend: Backend, Probe: func(context.Context) error { return w.Full() }}
}

// FormatBytes formats n bytes in binary units (12.5 MiB).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + "KMGTP"[i:i+1] + "iB"
}
