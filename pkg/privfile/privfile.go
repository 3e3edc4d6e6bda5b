// Package privfile creates the files and directories of gridcrawl's data
// directory readable by their owner only: they hold crawled content, queued
// contracts and crawl profiles, which are nobody else's business on a shared
// machine.
package privfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Modes of what this package creates.
const (
	FileMode fs.FileMode = 0o600
	DirMode  fs.FileMode = 0o700
)

// MkdirAll creates dir and its missing parents with DirMode. Directories that
// exist keep their mode.
func MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create directory %q: %w", dir, err)
	}
	return nil
}

// Touch creates the file at path with FileMode when it does not exist (its
// directory must exist), so that a library which then opens it (SQLite, which
// also gives its -wal and -shm files the database's mode) keeps that mode.
// An existing file is left as it is.
func Touch(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %q: %w", path, err)
	}
	return nil
}
