// Package wire turns backend configuration into concrete backends. It is the
// only package besides tests that imports backend implementations.
package wire

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// Backends selects and configures the backends. With no real backend URL
// set, everything is embedded under DataDir.
type Backends struct {
	DataDir          string `env:"GRIDCRAWL_DATA" envDefault:"./data"`
	QueueMaxAttempts int    `env:"GRIDCRAWL_QUEUE_MAX_ATTEMPTS" envDefault:"5"`
}

// Validate checks b.
func (b *Backends) Validate() error {
	if b.DataDir == "" {
		return errors.New("GRIDCRAWL_DATA must not be empty")
	}
	if b.QueueMaxAttempts < 1 {
		return errors.New("GRIDCRAWL_QUEUE_MAX_ATTEMPTS must be at least 1")
	}
	return nil
}

// ErrLocked is returned when another process holds the embedded data directory.
var ErrLocked = errors.New("data directory is in use by another gridcrawl process (embedded backends serve one process; use real backends for separate services)")

// Set is one opened set of backends.
type Set struct {
	Queue    queue.Queue
	Tx       txindex.Index
	Profiles profiles.Store
	Search   search.Index
	Assets   assets.Store
	// Embedded is true when the backends live in DataDir in this process.
	Embedded bool

	closers []func() error
	lock    *os.File
}

// Open opens the configured backends.
func Open(b Backends, log *slog.Logger) (*Set, error) {
	if err := os.MkdirAll(b.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	lock, err := lockDir(b.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Set{Embedded: true, lock: lock}
	fail := func(err error) (*Set, error) {
		_ = s.Close()
		return nil, err
	}
	q, err := sqlitequeue.Open(filepath.Join(b.DataDir, "queue.db"), sqlitequeue.Options{MaxAttempts: b.QueueMaxAttempts, Logger: log})
	if err != nil {
		return fail(fmt.Errorf("open embedded queue: %w", err))
	}
	s.Queue, s.closers = q, append(s.closers, q.Close)
	tx, err := sqlitestore.OpenTxIndex(filepath.Join(b.DataDir, "transactions.db"))
	if err != nil {
		return fail(fmt.Errorf("open embedded transaction index: %w", err))
	}
	s.Tx, s.closers = tx, append(s.closers, tx.Close)
	ps, err := sqlitestore.OpenProfiles(filepath.Join(b.DataDir, "profiles.db"))
	if err != nil {
		return fail(fmt.Errorf("open embedded profile store: %w", err))
	}
	s.Profiles, s.closers = ps, append(s.closers, ps.Close)
	si, err := sqlitestore.OpenSearch(filepath.Join(b.DataDir, "search.db"))
	if err != nil {
		return fail(fmt.Errorf("open embedded search index: %w", err))
	}
	s.Search, s.closers = si, append(s.closers, si.Close)
	as, err := fsassets.Open(filepath.Join(b.DataDir, "assets"))
	if err != nil {
		return fail(fmt.Errorf("open embedded asset store: %w", err))
	}
	s.Assets, s.closers = as, append(s.closers, as.Close)
	return s, nil
}

// Close closes the backends in reverse order of opening.
func (s *Set) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	return errors.Join(errs...)
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return f, nil
}
