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
//
// # Several endpoints
//
// Options.Endpoint may list several endpoints of one server (the nodes of
// a distributed MinIO), separated by commas. The store keeps one client per
// endpoint and a current one, which every operation uses first. An
// operation that fails there for a reason another endpoint may not have
// (see failover) is tried on the next endpoint, and on each endpoint at
// most once; the first endpoint that answers becomes the current one. When
// every endpoint failed the operation fails with the last error, as with a
// single endpoint: the caller's outage gate postpones the work. A Put is
// tried again only when its reader can be rewound (an io.Seeker, as every
// caller's bytes.Reader is); otherwise its error is returned, and the next
// operation starts on the next endpoint.
package minioassets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

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
	// Endpoint is the server's host:port, or several endpoints of one
	// server (the nodes of a distributed MinIO) separated by commas. A URL
	// with an http or https scheme is accepted too; its scheme then decides
	// over Secure.
	Endpoint string
	// AccessKey and SecretKey are the S3 credentials.
	AccessKey, SecretKey string
	// Bucket holds the objects; Open creates it if it is missing.
	Bucket string
	// Secure selects HTTPS.
	Secure bool
	// Region is the bucket's region; empty lets the client ask the server.
	Region string
	// Logger receives the store's rare messages (bucket creation, a move
	// to another endpoint); nil discards them.
	Logger *slog.Logger
}

// Store is an assets.Store in one S3 bucket. It is safe for concurrent use.
type Store struct {
	eps    []*endpoint
	cur    atomic.Int64 // index in eps of the current endpoint
	bucket string
	log    *slog.Logger
}

// endpoint is the client of one endpoint.
type endpoint struct {
	host      string
	client    *minio.Client
	core      minio.Core
	transport *http.Transport
}

// retriesPerEndpoint is the number of attempts minio-go makes of one
// request on one endpoint when the store has several (it makes
// minio.MaxRetry with one): with a failed one, the next endpoint is the
// retry, and waiting for the failed one would only delay it.
const retriesPerEndpoint = 2

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
// creating it if needed, through the first endpoint that answers. Creation
// is idempotent: a bucket that another process created meanwhile is fine.
func Open(ctx context.Context, opts Options) (*Store, error) {
	var hosts []string
	secures := map[bool]bool{}
	for _, e := range strings.Split(opts.Endpoint, ",") {
		if e = strings.TrimSpace(e); e == "" && strings.Contains(opts.Endpoint, ",") {
			continue
		}
		host, secure, err := parseEndpoint(e, opts.Secure)
		if err != nil {
			return nil, fmt.Errorf("open s3 asset store: %w", err)
		}
		if slices.Contains(hosts, host) {
			return nil, fmt.Errorf("open s3 asset store: endpoint %q listed twice", host)
		}
		hosts = append(hosts, host)
		secures[secure] = true
	}
	if len(hosts) == 0 {
		return nil, errors.New("open s3 asset store: empty endpoint")
	}
	if len(secures) > 1 {
		return nil, fmt.Errorf("open s3 asset store %q: endpoints mix http and https", strings.Join(hosts, ","))
	}
	secure := secures[true]
	if err := s3utils.CheckValidBucketNameStrict(opts.Bucket); err != nil {
		return nil, fmt.Errorf("open s3 asset store: bucket %q: %w", opts.Bucket, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{bucket: opts.Bucket, log: log}
	for _, host := range hosts {
		tr, err := minio.DefaultTransport(secure)
		if err != nil {
			return nil, fmt.Errorf("open s3 asset store %q: %w", host, err)
		}
		mo := &minio.Options{
			Creds:     credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, ""),
			Secure:    secure,
			Region:    opts.Region,
			Transport: tr,
		}
		if len(hosts) > 1 {
			mo.MaxRetries = retriesPerEndpoint
		}
		client, err := minio.New(host, mo)
		if err != nil {
			return nil, fmt.Errorf("open s3 asset store %q: %w", host, err)
		}
		s.eps = append(s.eps, &endpoint{host: host, client: client, core: minio.Core{Client: client}, transport: tr})
	}
	err := s.do(ctx, func(e *endpoint) error { return s.ensureBucket(ctx, e, opts.Region, log) })
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open s3 asset store %q: %w", strings.Join(hosts, ","), err)
	}
	return s, nil
}

// Endpoints returns the host:port of each endpoint, in the order given.
func (s *Store) Endpoints() []string {
	out := make([]string, len(s.eps))
	for i, e := range s.eps {
		out[i] = e.host
	}
	return out
}

// Current returns the host:port of the current endpoint.
func (s *Store) Current() string { return s.eps[s.cur.Load()].host }

// do runs op on the current endpoint and, while it fails for a reason to
// fail over (failover), on the next ones, each at most once; each such
// failure makes the next endpoint current. It returns op's last error, and
// logs when op succeeded on another endpoint than the one it started on.
func (s *Store) do(ctx context.Context, op func(*endpoint) error) error {
	start := s.cur.Load()
	n := int64(len(s.eps))
	var err error
	for i := int64(0); i < n; i++ {
		idx := (start + i) % n
		err = op(s.eps[idx])
		if err == nil && i > 0 {
			s.log.Info("s3 endpoint failed, moved to another", "failed", s.eps[start].host, "endpoint", s.eps[idx].host)
		}
		if err == nil || !failover(ctx, err) {
			return err
		}
		// Unless another operation moved it meanwhile.
		s.cur.CompareAndSwap(idx, (idx+1)%n)
	}
	return err
}

// failover reports whether an operation that failed with err may succeed
// on another endpoint: a failure to reach this one (refused, reset, cut
// short, timed out), or a server error (5xx, SlowDown, a quorum error)
// that another node may not have. Answers about the request (no such key,
// access denied, a bad range) are the same everywhere, and a done context
// ends the operation. A 5xx answered by every node (a distributed MinIO
// that lost its quorum) fails the operation after one try per endpoint.
func failover(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.As(err, new(readerError)) {
		return false
	}
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		switch r.Code {
		case "SlowDown", "SlowDownRead", "SlowDownWrite", "ServiceUnavailable", "InternalError",
			"XMinioServerNotInitialized", "XMinioReadQuorum", "XMinioWriteQuorum":
			return true
		}
		return r.StatusCode >= 500
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.HasSuffix(err.Error(), " is offline.")
}

func (s *Store) ensureBucket(ctx context.Context, e *endpoint, region string, log *slog.Logger) error {
	ok, err := e.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("check bucket %q: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	err = e.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
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
// A Put that fails on one endpoint is tried on the next only when r is an
// io.Seeker, rewound to where it was.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := s3utils.CheckValidObjectName(key); err != nil {
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	seeker, _ := r.(io.Seeker)
	var at int64
	if seeker != nil {
		var err error
		if at, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			seeker = nil // cannot tell where it is: no retry
		}
	}
	var last error // of the last try
	err := s.do(ctx, func(e *endpoint) error {
		if last != nil {
			if seeker == nil {
				return errNoRewind
			}
			if _, err := seeker.Seek(at, io.SeekStart); err != nil {
				return fmt.Errorf("put asset %q: rewind the reader: %w", key, err)
			}
		}
		last = s.putOnce(ctx, e, key, r, size, contentType)
		return last
	})
	if errors.Is(err, errNoRewind) {
		return last
	}
	return err
}

// errNoRewind ends the tries of a Put whose reader cannot be rewound.
var errNoRewind = errors.New("reader cannot be rewound")

// putOnce is Put on endpoint e.
func (s *Store) putOnce(ctx context.Context, e *endpoint, key string, r io.Reader, size int64, contentType string) error {
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
			return fmt.Errorf("put asset %q: %w", key, readerError{err})
		}
	default:
		r = &exactReader{r: r, left: size, fail: cancel}
	}
	if _, err := e.client.PutObject(ctx, s.bucket, key, r, size, opts); err != nil {
		var rerr readerError
		if errors.As(context.Cause(ctx), &rerr) {
			err = rerr
		}
		return fmt.Errorf("put asset %q: %w", key, err)
	}
	return nil
}

// readerError is the cause of an upload cancelled by its reader, or the
// reader's error found before the upload: no other endpoint helps.
type readerError struct{ err error }

func (e readerError) Error() string { return e.err.Error() }
func (e readerError) Unwrap() error { return e.err }

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
	// a missing key is reported here and not at the first Read, and a
	// failure to open moves to the next endpoint.
	var body io.ReadCloser
	err := s.do(ctx, func(e *endpoint) error {
		var err error
		body, _, _, err = e.core.GetObject(ctx, s.bucket, key, opts)
		return err
	})
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
	info, err := s.stat(ctx, key)
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
	err := s.do(ctx, func(e *endpoint) error {
		keys = keys[:0] // a listing cut short starts again
		for obj := range e.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if obj.Err != nil {
				return obj.Err
			}
			keys = append(keys, obj.Key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list assets %q: %w", prefix, err)
	}
	// S3 lists in UTF-8 byte order already; other servers may not.
	slices.Sort(keys)
	return keys, nil
}

// Close releases the idle connections to the server.
func (s *Store) Close() error {
	for _, e := range s.eps {
		e.transport.CloseIdleConnections()
	}
	return nil
}

// stat returns the object information of key from the first endpoint that
// answers.
func (s *Store) stat(ctx context.Context, key string) (minio.ObjectInfo, error) {
	var info minio.ObjectInfo
	err := s.do(ctx, func(e *endpoint) error {
		var err error
		info, err = e.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		return err
	})
	return info, err
}

var _ assets.Stater = (*Store)(nil)

// Stat returns the size and modification time of the object key, or
// assets.ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (assets.Info, error) {
	if err := s3utils.CheckValidObjectName(key); err != nil {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, err)
	}
	info, err := s.stat(ctx, key)
	if errorCode(err) == minio.NoSuchKey {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, assets.ErrNotFound)
	}
	if err != nil {
		return assets.Info{}, fmt.Errorf("stat asset %q: %w", key, err)
	}
	return assets.Info{Size: info.Size, Modified: info.LastModified.UTC()}, nil
}
