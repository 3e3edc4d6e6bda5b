// Package fsassets implements assets.Store in a directory of the local disk:
// each object is one file, named by its key.
//
// Put writes a temporary file beside the object, syncs it, renames it over
// the object and syncs the directory, so readers see the whole old or the
// whole new object and a returned Put survives a crash. Temporary files are
// hidden (their names start with a dot), which is why no key segment may.
//
// Keys are slash-separated relative names. Because a key names a file and
// every shorter prefix ending in a slash names a directory, a key cannot
// also be a directory of other keys ("a" and "a/b" cannot both exist); Put
// reports such a conflict as an error.
//
// Store is also an assets.Appender: Append writes at the end of the file,
// syncs it, and cuts the file back to its old size if the write fails, so
// ranges returned earlier stay readable while the file grows.
package fsassets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/gridcrawl/gridcrawl/pkg/assets"

	"github.com/gridcrawl/gridcrawl/pkg/privfile"
)

// Key limits.
const (
	MaxKeyLen     = 1024
	MaxSegmentLen = 255
)

// tmpPrefix starts the names of the temporary files of Put.
const tmpPrefix = ".put-"

// ErrInvalidKey is returned for a key that is not a valid object name.
var ErrInvalidKey = errors.New("invalid asset key")

// Store is an assets.Store in a directory.
type Store struct {
	dir string
}

var (
	_ assets.Store    = (*Store)(nil)
	_ assets.Appender = (*Store)(nil)
)

// Open returns the store in dir, creating the directory if needed.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open asset directory %q: %w", dir, err)
	}
	if err := privfile.MkdirAll(abs); err != nil {
		return nil, fmt.Errorf("open asset directory %q: %w", dir, err)
	}
	return &Store{dir: abs}, nil
}

// ValidateKey reports, wrapping ErrInvalidKey, why key is not a valid object
// name: it must be at most MaxKeyLen bytes of valid UTF-8 without control
// characters or backslashes, made of non-empty slash-separated segments of at
// most MaxSegmentLen bytes, none starting with a dot.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidKey, MaxKeyLen)
	}
	if err := checkChars(key); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("%w %q: empty segment", ErrInvalidKey, key)
		case seg[0] == '.':
			return fmt.Errorf("%w %q: segment %q starts with a dot", ErrInvalidKey, key, seg)
		case len(seg) > MaxSegmentLen:
			return fmt.Errorf("%w %q: segment longer than %d bytes", ErrInvalidKey, key, MaxSegmentLen)
		}
	}
	return nil
}

func checkChars(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w %q: not UTF-8", ErrInvalidKey, s)
	}
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("%w %q: control character", ErrInvalidKey, s)
		case r == '\\':
			return fmt.Errorf("%w %q: backslash", ErrInvalidKey, s)
		}
	}
	return nil
}

// path returns the file of key.
func (s *Store) path(key string) string { return filepath.Join(s.dir, filepath.FromSlash(key)) }

// Put stores the size bytes of r under key, replacing any object there. A
// negative size means unknown; otherwise r must yield exactly size bytes.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (err error) {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("put asset: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	dst := s.path(key)
	dir := filepath.Dir(dst)
	if err := privfile.MkdirAll(dir); err != nil {
		return fmt.Errorf("put asset %q: %w", key, conflict(err))
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	src := r
	if size >= 0 {
		// Read one byte more than announced, to notice a longer reader.
		src = io.LimitReader(r, size+1)
	}
	n, err := io.Copy(f, ctxReader{ctx, src})
	if err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("put asset %q: reader gave %d bytes, announced %d", key, n, size)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	if err = os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("put asset %q: %w", key, conflict(err))
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	return nil
}

// Append writes the size bytes of r at the end of the object key, creating
// it (and syncing its directory) when absent, syncs the file and returns the
// offset the bytes start at. size must be known (>= 0). On error the file
// is truncated back to its previous size.
func (s *Store) Append(ctx context.Context, key string, r io.Reader, size int64) (offset int64, err error) {
	if err := ValidateKey(key); err != nil {
		return 0, fmt.Errorf("append asset: %w", err)
	}
	if size < 0 {
		return 0, fmt.Errorf("append asset %q: size must be known", key)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("append asset %q: %w", key, err)
	}
	dst := s.path(key)
	dir := filepath.Dir(dst)
	if err := privfile.MkdirAll(dir); err != nil {
		return 0, fmt.Errorf("append asset %q: %w", key, conflict(err))
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE, privfile.FileMode)
	if err != nil {
		return 0, fmt.Errorf("append asset %q: %w", key, conflict(err))
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("append asset %q: %w", key, cerr)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("append asset %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("append asset %q: not a regular file", key)
	}
	offset = fi.Size()
	created := offset == 0
	n, err := io.Copy(&offsetWriter{f: f, off: offset}, ctxReader{ctx, io.LimitReader(r, size+1)})
	if err == nil && n != size {
		err = fmt.Errorf("reader gave %d bytes, announced %d", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil && created {
		err = syncDir(dir)
	}
	if err != nil {
		_ = f.Truncate(offset) // an object created by this call stays empty
		return 0, fmt.Errorf("append asset %q: %w", key, err)
	}
	return offset, nil
}

// offsetWriter writes at increasing offsets of f (WriteAt, so that a file
// opened without O_APPEND still knows where the write starts).
type offsetWriter struct {
	f   *os.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// conflict explains the errors of a key that collides with a directory of
// other keys, or with an object where a directory is needed.
func conflict(err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) ||
		errors.Is(err, syscall.ENOTEMPTY) {
		return fmt.Errorf("key conflicts with another key's directory or object: %w", err)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Get returns the object's bytes from offset; length < 0 reads to the end,
// and a range past the end is cut at the end. An offset past the end is an
// error.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get asset: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get asset %q: %w", key, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("get asset %q: negative offset %d", key, offset)
	}
	f, err := os.Open(s.path(key))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("get asset %q: %w", key, assets.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get asset %q: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("get asset %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("get asset %q: %w", key, assets.ErrNotFound)
	}
	size := fi.Size()
	if offset > size {
		_ = f.Close()
		return nil, fmt.Errorf("get asset %q: offset %d past the end at %d", key, offset, size)
	}
	n := size - offset
	if length >= 0 {
		n = min(n, length)
	}
	return &section{SectionReader: io.NewSectionReader(f, offset, n), f: f}, nil
}

type section struct {
	*io.SectionReader
	f *os.File
}

func (s *section) Close() error { return s.f.Close() }

// List returns the keys under prefix in lexical order.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := checkChars(prefix); err != nil || len(prefix) > MaxKeyLen {
		return nil, nil // no key can start with it
	}
	// Walk only the deepest directory that prefix names in full.
	root := s.dir
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		root = s.path(prefix[:i])
		if ValidateKey(prefix[:i]) != nil {
			return nil, nil
		}
	}
	var keys []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != root {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			// Skip directories that cannot hold a key with the prefix.
			if p != root && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list assets %q: %w", prefix, err)
	}
	// A walk visits "a/1" before "a-x"; keys sort by bytes.
	slices.Sort(keys)
	return keys, nil
}

// Close releases nothing; the store holds no open files between calls.
func (s *Store) Close() error { return nil }

var _ assets.Stater = (*Store)(nil)

// Stat returns the size and modification time of the object key, or
// assets.ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (assets.Info, error) {
	if err := ValidateKey(key); err != nil {
		return assets.Info{}, fmt.Errorf("stat asset: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, err)
	}
	fi, err := os.Stat(s.path(key))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || err == nil && !fi.Mode().IsRegular() {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, assets.ErrNotFound)
	}
	if err != nil {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, err)
	}
	return assets.Info{Size: fi.Size(), Modified: fi.ModTime().UTC()}, nil
}
