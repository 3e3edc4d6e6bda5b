// Package assets defines the store of fetched content: WARC segment objects
// addressed by key.
//
// Contract: Put is atomic (readers see the whole object or none) and durable
// when it returns; putting an existing key replaces it. Writers that must
// never replace an object (the loader's WARC segments) choose keys no other
// writer uses.
//
// A store may also implement Appender, for objects that grow in place (a
// local file does; an S3 object does not). Callers test for it with a type
// assertion and fall back to one Put per object.
package assets

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
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

// Appender is an optional capability of a Store: objects that grow at their
// end.
//
// Contract: Append writes the size bytes of r at the end of the object key,
// creating it when absent, and returns the offset at which they start (the
// object's size before the call). When it returns nil the bytes are durable
// (synced to stable storage). Bytes once appended never change: a Get of a
// range returned by an earlier Append keeps reading the same bytes while the
// object grows. A failed Append leaves the object as it was before the call.
// Each key has a single writer: concurrent Appends to one key are the
// caller's error.
type Appender interface {
	Append(ctx context.Context, key string, r io.Reader, size int64) (offset int64, err error)
}

// CDXJ indexes: every WARC segment object "<key>" has its CDXJ index (see
// warc.CDXJ) in the object "<key>.cdxj", written as the segment is.

// CDXJSuffix ends the key of a segment's CDXJ index.
const CDXJSuffix = ".cdxj"

// ContentTypeCDXJ is the content type CDXJ indexes are stored with.
const ContentTypeCDXJ = "application/x-cdxj"

// CDXJKey returns the key of the CDXJ index of the segment segmentKey.
func CDXJKey(segmentKey string) string { return segmentKey + CDXJSuffix }

// IsCDXJKey reports whether key names a CDXJ index.
func IsCDXJKey(key string) bool { return strings.HasSuffix(key, CDXJSuffix) }

// Info is what a store knows of one object.
type Info struct {
	Size     int64
	Modified time.Time
}

// Stater is an optional capability of a Store: the size and time of an
// object without reading it. Stat returns ErrNotFound for a missing key,
// and an error wrapping errors.ErrUnsupported from a wrapper over a store
// that cannot tell.
type Stater interface {
	Stat(ctx context.Context, key string) (Info, error)
}
