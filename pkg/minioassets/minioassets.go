// Package minioassets implements assets.Store in an S3 bucket, on MinIO or
// any S3-compatible service, through github.com/minio/minio-go/v7.
//
// Every object is one S3 object named by its key. A single S3 PUT replaces
// an object atomically and a multipart upload becomes visible only when it
// completes, so readers see the whole old or the whole new object, and a
// returned Put is as durable as the server makes its writes.
//
// Get issues one ranged GET and reports a missing key before it returns,
// so the reader it hands back streams one consistent version of the object.
// Keys are S3 object names: non-empty UTF-8 of at most 1024 bytes; the
// server may refuse more (MinIO refuses "..", "//" and a leading slash), and
// on MinIO, as in the local directory store, a key cannot also be a
// "directory" of other keys.
//
// Store does not implement assets.Appender: S3 objects are immutable, so
// writers that grow a segment store one object per flush instead.
package minioassets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
)

// Part sizes of uploads. Objects up to knownPartSize bytes (a default WARC
// segment is 32 MiB) go up in one streamed PUT; larger ones in parts of that
// size. An upload of unknown size buffers one part of unknownPartSize (the
// smallest minio-go allows) at a time.
const (
	knownPartSize   = 64 << 20
	unknownPartSize = 16 << 20
)

// Options configure Open.
type Options struct {
	// Endpoint is the server's host:port. A URL with an http or https
	// scheme is accepted too; its scheme then decides over Secure.
	Endpoint string
	// AccessKey and SecretKey are the S3 credentials.
	AccessKey, SecretKey string
	// Bucket holds the objects; Open creates it if it is missing.
	Bucket string
	// Secure selects HTTPS.
	Secure bool
	// Region is the bucket's region; empty lets the client ask the server.
	Region string
	// Logger receives the store's rare messages (bucket creation); nil
	// discards them.
	Logger *slog.Logger
}

// Store is an assets.Store in one S3 bucket. It is safe for concurrent use.
type Store struct {
	client    *minio.Client
	core      minio.Core
	transport *http.Transport
	bucket    string
}

var _ assets.Store = (*Store)(nil)

// parseEndpoint returns the host:port of endpoint and whether to use HTTPS.
func parseEndpoint(endpoint string, secure bool) (string, bool, error) {
	if endpoint == "" {
		return "", false, errors.New("empty endpoint")
	}
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return "", false, fmt.Errorf("parse endpoint %q: %w", endpoint, err)
		}
		switch u.Scheme {
		case "http":
			secure = false
		case "https":
			secure = true
		default:
			return "", false, fmt.Errorf("endpoint %q: scheme %q is neither http nor https", endpoint, u.Scheme)
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", false, fmt.Errorf("endpoint %q: want scheme://host[:port] without user, path or query", endpoint)
		}
		endpoint = u.Host
	}
	if endpoint == "" || strings.ContainsAny(endpoint, "/?#@ \t\r\n") {
		return "", false, fmt.Errorf("endpoint %q: want host[:port]", endpoint)
	}
	return endpoint, secure, nil
}

// Open connects to the server of opts and makes sure the bucket exists,
// creating it if needed. Creation is idempotent: a bucket that another
// process created meanwhile is fine.
func Open(ctx context.Context, opts Options) (*Store, error) {
	endpoint, secure, err := parseEndpoint(opts.Endpoint, opts.Secure)
	if err != nil {
		return nil, fmt.Errorf("open s3 asset store: %w", err)
	}
	if err := s3utils.CheckValidBucketNameStrict(opts.Bucket); err != nil {
		return nil, fmt.Errorf("open s3 asset store: bucket %q: %w", opts.Bucket, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("open s3 asset store %q: %w", endpoint, err)
	}
	client, err := minio.New(endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, ""),
		Secure:    secure,
		Region:    opts.Region,
		Transport: tr,
	})
	if err != nil {
		return nil, fmt.Errorf("open s3 asset store %q: %w", endpoint, err)
	}
	s := &Store{client: client, core: minio.Core{Client: client}, transport: tr, bucket: opts.Bucket}
	if err := s.ensureBucket(ctx, opts.Region, log); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open s3 asset store %q: %w", endpoint, err)
	}
	return s, nil
}

func (s *Store) ensureBucket(ctx context.Context, region string, log *slog.Logger) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("check bucket %q: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	err = s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if code := errorCode(err); code == minio.BucketAlreadyOwnedByYou {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", s.bucket, err)
	}
	log.Info("created bucket", "bucket", s.bucket)
	return nil
}

// errorCode returns the S3 error code of err, or "".
func errorCode(err error) string {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// Bucket returns the name of the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Put stores the size bytes of r under key with the given content type,
// replacing any object there. A negative size means unknown; otherwise r
// must yield exactly size bytes, and a failed Put leaves no object behind.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := s3utils.CheckValidObjectName(key); err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	opts := minio.PutObjectOptions{ContentType: contentType, PartSize: knownPartSize}
	// A reader that fails cancels the upload: the client would otherwise
	// retry the request with a reader it cannot rewind.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	switch {
	case size < 0:
		opts.PartSize = unknownPartSize
	case size == 0:
		// The upload reads nothing: probe now.
		if err := (&exactReader{r: r}).probe(); err != io.EOF {
			return fmt.Errorf("put asset %q: %w", key, err)
		}
	default:
		r = &exactReader{r: r, left: size, fail: cancel}
	}
	if _, err := s.client.PutObject(ctx, s.bucket, key, r, size, opts); err != nil {
		var rerr readerError
		if errors.As(context.Cause(ctx), &rerr) {
			err = rerr.err
		}
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	return nil
}

// readerError is the cause of an upload cancelled by its reader.
type readerError struct{ err error }

func (e readerError) Error() string { return e.err.Error() }

// errTooLong reports a reader that yields more bytes than announced.
var errTooLong = errors.New("reader gave more bytes than announced")

// exactReader fails the upload of a reader that yields other than the
// announced number of bytes: a short one ends early, and a long one is
// probed for one byte more before its last announced bytes are handed on,
// since the uploader stops reading at the announced size.
type exactReader struct {
	r    io.Reader
	left int64
	// fail, if set, is told of every error but io.EOF.
	fail func(error)
}

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.read(p)
	if err != nil && err != io.EOF && e.fail != nil {
		e.fail(readerError{err})
	}
	return n, err
}

func (e *exactReader) read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, e.probe()
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if e.left == 0 {
		if perr := e.probe(); perr != nil {
			return n, perr
		}
		return n, io.EOF
	}
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (e *exactReader) probe() error {
	var b [1]byte
	for {
		n, err := e.r.Read(b[:])
		switch {
		case n > 0:
			return errTooLong
		case err == io.EOF:
			return io.EOF
		case err != nil:
			return err
		}
	}
}

// Get returns the object's bytes from offset; length < 0 reads to the end,
// and a range past the end is cut at the end. An offset past the end is an
// error, a missing key ErrNotFound. The reader is valid while ctx is.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := s3utils.CheckValidObjectName(key); err != nil {
		return nil, fmt.Errorf("get asset %q: %w", key, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("get asset %q: negative offset %d", key, offset)
	}
	if length == 0 {
		// No byte range can say "none": check the object and the offset.
		if err := s.checkOffset(ctx, key, offset); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	var opts minio.GetObjectOptions
	switch {
	case length > 0:
		err := opts.SetRange(offset, offset+length-1)
		if err != nil {
			return nil, fmt.Errorf("get asset %q: %w", key, err)
		}
	case offset > 0:
		if err := opts.SetRange(offset, 0); err != nil {
			return nil, fmt.Errorf("get asset %q: %w", key, err)
		}
	}
	// Core's GetObject sends the request now, unlike Client's lazy one, so
	// a missing key is reported here and not at the first Read.
	body, _, _, err := s.core.GetObject(ctx, s.bucket, key, opts)
	switch code := errorCode(err); {
	case err == nil:
		return body, nil
	case code == minio.NoSuchKey:
		return nil, fmt.Errorf("get asset %q: %w", key, assets.ErrNotFound)
	case code == minio.InvalidRange:
		// The range starts at or past the end: at the end is an empty
		// read, past it an error.
		if err := s.checkOffset(ctx, key, offset); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	default:
		return nil, fmt.Errorf("get asset %q: %w", key, err)
	}
}

// checkOffset reports whether key exists and offset is at most its size.
func (s *Store) checkOffset(ctx context.Context, key string, offset int64) error {
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if errorCode(err) == minio.NoSuchKey {
		return fmt.Errorf("get asset %q: %w", key, assets.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("get asset %q: %w", key, err)
	}
	if offset > info.Size {
		return fmt.Errorf("get asset %q: offset %d past the end at %d", key, offset, info.Size)
	}
	return nil
}

// List returns the keys under prefix in lexical order.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list assets %q: %w", prefix, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	// S3 lists in UTF-8 byte order already; other servers may not.
	slices.Sort(keys)
	return keys, nil
}

// Close releases the idle connections to the server.
func (s *Store) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

var _ assets.Stater = (*Store)(nil)

// Stat returns the size and modification time of the object key, or
// assets.ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (assets.Info, error) {
	if err := s3utils.CheckValidObjectName(key); err != nil {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, err)
	}
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if errorCode(err) == minio.NoSuchKey {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, assets.ErrNotFound)
	}
	if err != nil {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, err)
	}
	return assets.Info{Size: info.Size, Modified: info.LastModified.UTC()}, nil
}
