// Package assets defines the store of fetched content: WARC segment objects
// addressed by key.
//
// Contract: Put is atomic (readers see the whole object or none) and durable
// when it returns; putting an existing key replaces it.
package assets

import (
	"context"
	"errors"
	"io"
)

// ErrNotFound is returned for a key that has no object.
var ErrNotFound = errors.New("asset not found")

// Store is an object store.
type Store interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Get returns the object's bytes from offset; length < 0 reads to the end.
	Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// List returns the keys under prefix in lexical order.
	List(ctx context.Context, prefix string) ([]string, error)
	Close() error
}
