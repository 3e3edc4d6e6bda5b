package minioassets

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/assets/assetstest"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// serverOptions returns the options of the test server named by the
// environment (scripts/services/minio.sh env prints them) with a bucket of
// its own, which is emptied and removed when t ends. Without a server the
// test is skipped, or fails where backends are required.
func serverOptions(t testing.TB) Options {
	t.Helper()
	endpoint := testenv.Backend(t, "GRIDCRAWL_S3_ENDPOINT")[0]
	secure := false
	if v := os.Getenv("GRIDCRAWL_S3_SECURE"); v != "" {
		var err error
		if secure, err = strconv.ParseBool(v); err != nil {
			t.Fatalf("GRIDCRAWL_S3_SECURE=%q: %v", v, err)
		}
	}
	opts := Options{
		Endpoint:  endpoint,
		AccessKey: os.Getenv("GRIDCRAWL_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("GRIDCRAWL_S3_SECRET_KEY"),
		Bucket:    "gridcrawl-test-" + strings.ToLower(rand.Text())[:16],
		Secure:    secure,
	}
	t.Cleanup(func() { removeBucket(t, opts) })
	return opts
}

// removeBucket deletes every object of the test bucket and the bucket.
func removeBucket(t testing.TB, opts Options) {
	t.Helper()
	// t.Context is over when cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Errorf("open bucket %q to remove it: %v", opts.Bucket, err)
		return
	}
	defer s.Close()
	objects := s.eps[0].client.ListObjects(ctx, opts.Bucket, minio.ListObjectsOptions{Recursive: true})
	for e := range s.eps[0].client.RemoveObjects(ctx, opts.Bucket, objects, minio.RemoveObjectsOptions{}) {
		t.Errorf("remove object %q of the test bucket: %v", e.ObjectName, e.Err)
	}
	if err := s.eps[0].client.RemoveBucket(ctx, opts.Bucket); err != nil {
		t.Errorf("remove test bucket %q: %v", opts.Bucket, err)
	}
}

func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open(%q, bucket %q): %v", opts.Endpoint, opts.Bucket, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	opts := serverOptions(t)
	assetstest.Run(t, assetstest.Harness{
		New: func(t *testing.T) assets.Store { return openStore(t, opts) },
		Reopen: func(t *testing.T, x assets.Store) assets.Store {
			if err := x.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openStore(t, opts)
		},
	})
}

func put(t *testing.T, s *Store, key string, b []byte, contentType string) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)), contentType); err != nil {
		t.Fatalf("Put(%q, %d bytes, %q): %v", key, len(b), contentType, err)
	}
}

func get(t *testing.T, s *Store, key string, offset, length int64) ([]byte, error) {
	t.Helper()
	rc, err := s.Get(t.Context(), key, offset, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestContentType(t *testing.T) {
	s := openStore(t, serverOptions(t))
	for _, tc := range []struct {
		name, contentType, want string
	}{
		{"warc", "application/warc", "application/warc"},
		{"gzipped warc", "application/warc+gzip", "application/warc+gzip"},
		{"with parameter", "text/plain; charset=utf-8", "text/plain; charset=utf-8"},
		{"none", "", "application/octet-stream"},
	} {
		key := "ctype/" + strings.ReplaceAll(tc.name, " ", "-")
		put(t, s, key, []byte("WARC/1.1\r\n"), tc.contentType)
		info, err := s.eps[0].client.StatObject(t.Context(), s.bucket, key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatalf("%s: StatObject(%q): %v", tc.name, key, err)
		}
		if info.ContentType != tc.want {
			t.Errorf("%s: content type of %q = %q, want %q", tc.name, key, info.ContentType, tc.want)
		}
	}
}

// TestWARCRecordsByRange stores WARC segments as the loader does and reads
// every record back alone by its offset and length, as the crawler does.
func TestWARCRecordsByRange(t *testing.T) {
	s := openStore(t, serverOptions(t))
	date := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var records []warc.Record
	for i := range 5 {
		body := strings.Repeat(fmt.Sprintf("<p>page %d</p>", i), 200*i+1)
		resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
		u := fmt.Sprintf("http://example.com/%d", i)
		req := warc.NewRequestRecord(u, date, []byte("GET /"+strconv.Itoa(i)+" HTTP/1.1\r\nHost: example.com\r\n\r\n"))
		records = append(records, req, warc.NewResponseRecord(u, date, "127.0.0.1", resp, false, warc.RecordID(req)))
	}
	for _, tc := range []struct {
		name, contentType string
		gzip              bool
	}{
		{"plain", "application/warc", false},
		{"gzip", "application/warc+gzip", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seg := warc.NewSegment(tc.gzip)
			type span struct{ offset, length int64 }
			var spans []span
			for _, r := range records {
				off, n, err := seg.Append(r)
				if err != nil {
					t.Fatalf("Append: %v", err)
				}
				spans = append(spans, span{off, n})
			}
			key := "warc/segment-" + tc.name
			put(t, s, key, seg.Bytes(), tc.contentType)
			for i, sp := range spans {
				b, err := get(t, s, key, sp.offset, sp.length)
				if err != nil {
					t.Fatalf("Get(%q, %d, %d): %v", key, sp.offset, sp.length, err)
				}
				if int64(len(b)) != sp.length {
					t.Fatalf("Get(%q, %d, %d) = %d bytes, want %d", key, sp.offset, sp.length, len(b), sp.length)
				}
				got, err := warc.ReadRecord(bytes.NewReader(b), 1<<20)
				if err != nil {
					t.Fatalf("ReadRecord of record %d at %d+%d: %v", i, sp.offset, sp.length, err)
				}
				if id, want := warc.RecordID(got), warc.RecordID(records[i]); id != want {
					t.Errorf("record %d read back at %d+%d has id %s, want %s", i, sp.offset, sp.length, id, want)
				}
				if !bytes.Equal(got.Block, records[i].Block) {
					t.Errorf("record %d read back at %d+%d has block %q, want %q", i, sp.offset, sp.length, got.Block, records[i].Block)
				}
			}
			// The last record to the end of the object.
			last := spans[len(spans)-1]
			b, err := get(t, s, key, last.offset, -1)
			if err != nil || int64(len(b)) != last.length {
				t.Errorf("Get(%q, %d, -1) = %d bytes, %v, want %d bytes", key, last.offset, len(b), err, last.length)
			}
		})
	}
}

func TestGetEdges(t *testing.T) {
	s := openStore(t, serverOptions(t))
	b := []byte("0123456789")
	put(t, s, "edges/ten", b, "")
	put(t, s, "edges/empty", nil, "")
	for _, tc := range []struct {
		name           string
		key            string
		offset, length int64
		want           []byte
		wantErr        bool
		notFound       bool
	}{
		{"zero length", "edges/ten", 3, 0, []byte{}, false, false},
		{"zero length at end", "edges/ten", 10, 0, []byte{}, false, false},
		{"zero length past end", "edges/ten", 11, 0, nil, true, false},
		{"at end to end", "edges/ten", 10, -1, []byte{}, false, false},
		{"at end with length", "edges/ten", 10, 5, []byte{}, false, false},
		{"past end", "edges/ten", 11, -1, nil, true, false},
		{"past end with length", "edges/ten", 20, 3, nil, true, false},
		{"negative offset", "edges/ten", -1, 3, nil, true, false},
		{"empty object", "edges/empty", 0, -1, []byte{}, false, false},
		{"empty object with length", "edges/empty", 0, 4, []byte{}, false, false},
		{"empty object past end", "edges/empty", 1, -1, nil, true, false},
		{"zero length missing", "edges/missing", 0, 0, nil, true, true},
		{"invalid key", "", 0, -1, nil, true, false},
	} {
		got, err := get(t, s, tc.key, tc.offset, tc.length)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: Get(%q, %d, %d) = %q, want an error", tc.name, tc.key, tc.offset, tc.length, got)
			} else if errors.Is(err, assets.ErrNotFound) != tc.notFound {
				t.Errorf("%s: Get(%q, %d, %d) error = %v, want ErrNotFound %v", tc.name, tc.key, tc.offset, tc.length, err, tc.notFound)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Get(%q, %d, %d) error: %v", tc.name, tc.key, tc.offset, tc.length, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: Get(%q, %d, %d) = %q, want %q", tc.name, tc.key, tc.offset, tc.length, got, tc.want)
		}
	}
}

func TestPutSizeMismatch(t *testing.T) {
	s := openStore(t, serverOptions(t))
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		r       io.Reader
		size    int64
		wantErr error
	}{
		{"short reader", strings.NewReader("abc"), 5, io.ErrUnexpectedEOF},
		{"long reader", strings.NewReader("abcdef"), 3, errTooLong},
		{"long reader, empty announced", strings.NewReader("x"), 0, errTooLong},
		{"failing reader", io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(errBoom)), 6, errBoom},
	} {
		key := "mismatch/" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
		if err := s.Put(t.Context(), key, tc.r, tc.size, ""); !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: Put(%q, size %d) error = %v, want %v", tc.name, key, tc.size, err, tc.wantErr)
		}
		if _, err := get(t, s, key, 0, -1); !errors.Is(err, assets.ErrNotFound) {
			t.Errorf("%s: Get(%q) after a failed Put: error %v, want ErrNotFound", tc.name, key, err)
		}
	}
	// Unknown size, through a reader that is neither a Seeker nor a ReaderAt.
	want := bytes.Repeat([]byte("unknown size "), 1000)
	if err := s.Put(t.Context(), "mismatch/unknown", iotest.OneByteReader(bytes.NewReader(want)), -1, "application/warc"); err != nil {
		t.Fatalf("Put(size -1): %v", err)
	}
	if got, err := get(t, s, "mismatch/unknown", 0, -1); err != nil || !bytes.Equal(got, want) {
		t.Errorf("Get(mismatch/unknown) = %d bytes, %v, want the %d bytes put", len(got), err, len(want))
	}
	keys, err := s.List(t.Context(), "mismatch/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]string{"mismatch/unknown"}, keys); diff != "" {
		t.Errorf("List(mismatch/) (-want +got):\n%s", diff)
	}
}

func TestPutCancelled(t *testing.T) {
	s := openStore(t, serverOptions(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, "cancelled", strings.NewReader("x"), 1, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context: error %v, want context.Canceled", err)
	}
	if _, err := get(t, s, "cancelled", 0, -1); !errors.Is(err, assets.ErrNotFound) {
		t.Errorf("Get(cancelled) error = %v, want ErrNotFound", err)
	}
}

// TestOpenConcurrent opens one new bucket from several stores at once, as
// replicas starting together do: every Open must succeed.
func TestOpenConcurrent(t *testing.T) {
	opts := serverOptions(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(t.Context(), opts)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open #%d of a bucket created concurrently: %v", i, err)
		}
	}
	s := openStore(t, opts)
	put(t, s, "k", []byte("v"), "")
	if got, err := get(t, s, "k", 0, -1); err != nil || string(got) != "v" {
		t.Errorf("Get(k) = %q, %v, want %q", got, err, "v")
	}
}

func TestOpenBadCredentials(t *testing.T) {
	opts := serverOptions(t)
	bad := opts
	bad.SecretKey += "-wrong"
	if s, err := Open(t.Context(), bad); err == nil {
		_ = s.Close()
		t.Errorf("Open with a wrong secret key = nil error, want an error")
	}
}

func TestOpenInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no endpoint", Options{Bucket: "gridcrawl"}},
		{"no bucket", Options{Endpoint: "127.0.0.1:9000"}},
		{"uppercase bucket", Options{Endpoint: "127.0.0.1:9000", Bucket: "GridCrawl"}},
		{"bucket with underscore", Options{Endpoint: "127.0.0.1:9000", Bucket: "grid_crawl"}},
		{"endpoint with path", Options{Endpoint: "http://127.0.0.1:9000/bucket", Bucket: "gridcrawl"}},
		{"endpoint with other scheme", Options{Endpoint: "ftp://127.0.0.1:9000", Bucket: "gridcrawl"}},
	} {
		if s, err := Open(t.Context(), tc.opts); err == nil {
			_ = s.Close()
			t.Errorf("%s: Open(%+v) = nil error, want an error", tc.name, tc.opts)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	// A loopback port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if s, err := Open(ctx, Options{Endpoint: addr, Bucket: "gridcrawl", AccessKey: "a", SecretKey: "b"}); err == nil {
		_ = s.Close()
		t.Errorf("Open(%q) with nothing listening = nil error, want an error", addr)
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		endpoint   string
		secure     bool
		wantHost   string
		wantSecure bool
		wantErr    bool
	}{
		{"host and port", "127.0.0.1:9000", false, "127.0.0.1:9000", false, false},
		{"host and port, secure", "minio.example:443", true, "minio.example:443", true, false},
		{"http url", "http://minio:9000", true, "minio:9000", false, false},
		{"https url", "https://minio:9000/", false, "minio:9000", true, false},
		{"ipv6", "[::1]:9000", false, "[::1]:9000", false, false},
		{"empty", "", false, "", false, true},
		{"scheme only", "http://", false, "", false, true},
		{"path", "minio:9000/bucket", false, "", false, true},
		{"url with path", "http://minio:9000/bucket", false, "", false, true},
		{"url with user", "http://u:p@minio:9000", false, "", false, true},
		{"url with query", "http://minio:9000?x=1", false, "", false, true},
		{"other scheme", "s3://minio:9000", false, "", false, true},
		{"space", "minio :9000", false, "", false, true},
	} {
		host, secure, err := parseEndpoint(tc.endpoint, tc.secure)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: parseEndpoint(%q, %v) = %q, %v, want an error", tc.name, tc.endpoint, tc.secure, host, secure)
			}
			continue
		}
		if err != nil || host != tc.wantHost || secure != tc.wantSecure {
			t.Errorf("%s: parseEndpoint(%q, %v) = %q, %v, %v, want %q, %v", tc.name, tc.endpoint, tc.secure, host, secure, err, tc.wantHost, tc.wantSecure)
		}
	}
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9000", "http://minio:9000", "https://x/", "http://", "s3://x", "[::1]:9000", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, endpoint string) {
		host, _, err := parseEndpoint(endpoint, false)
		if err != nil {
			return
		}
		if host == "" || strings.ContainsAny(host, "/?#@ ") {
			t.Errorf("parseEndpoint(%q) = host %q, want a bare host[:port]", endpoint, host)
		}
	})
}

func TestExactReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       io.Reader
		size    int64
		want    string
		wantErr error
	}{
		{"exact", strings.NewReader("abcdef"), 6, "abcdef", nil},
		{"exact one byte at a time", iotest.OneByteReader(strings.NewReader("abcdef")), 6, "abcdef", nil},
		{"exact with eof and data", iotest.DataErrReader(strings.NewReader("abcdef")), 6, "abcdef", nil},
		{"empty", strings.NewReader(""), 0, "", nil},
		{"short", strings.NewReader("abc"), 6, "abc", io.ErrUnexpectedEOF},
		{"long", strings.NewReader("abcdefg"), 6, "abcdef", errTooLong},
		{"long one byte at a time", iotest.OneByteReader(strings.NewReader("abcdefg")), 6, "abcdef", errTooLong},
		{"long empty", strings.NewReader("a"), 0, "", errTooLong},
		{"reader error", iotest.ErrReader(iotest.ErrTimeout), 6, "", iotest.ErrTimeout},
	} {
		var failed []error
		got, err := io.ReadAll(&exactReader{r: tc.r, left: tc.size, fail: func(err error) { failed = append(failed, err) }})
		if string(got) != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: ReadAll(exactReader(size %d)) = %q, %v, want %q, %v", tc.name, tc.size, got, err, tc.want, tc.wantErr)
		}
		var rerr readerError
		if tc.wantErr == nil && len(failed) != 0 {
			t.Errorf("%s: exactReader called fail(%v) on a good read", tc.name, failed)
		} else if tc.wantErr != nil && (len(failed) != 1 || !errors.As(failed[0], &rerr) || !errors.Is(rerr.err, tc.wantErr)) {
			t.Errorf("%s: exactReader called fail with %v, want once with readerError{%v}", tc.name, failed, tc.wantErr)
		}
	}
}

// BenchmarkPut measures one PUT of a 64 KiB object, about one fetched page.
func BenchmarkPut(b *testing.B) {
	s := openStore(b, serverOptions(b))
	data := bytes.Repeat([]byte("x"), 64<<10)
	b.SetBytes(int64(len(data)))
	for i := 0; b.Loop(); i++ {
		if err := s.Put(b.Context(), "bench/put/"+strconv.Itoa(i%100), bytes.NewReader(data), int64(len(data)), "application/warc"); err != nil {
			b.Fatalf("Put: %v", err)
		}
	}
}

// BenchmarkGetRange measures reading one 16 KiB record out of a 4 MiB
// segment, as the crawler reads a page.
func BenchmarkGetRange(b *testing.B) {
	s := openStore(b, serverOptions(b))
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	if err := s.Put(b.Context(), "bench/segment", bytes.NewReader(data), int64(len(data)), "application/warc"); err != nil {
		b.Fatalf("Put: %v", err)
	}
	const n = 16 << 10
	b.SetBytes(n)
	buf := make([]byte, n)
	for i := 0; b.Loop(); i++ {
		off := int64(i%200) * n
		rc, err := s.Get(b.Context(), "bench/segment", off, n)
		if err != nil {
			b.Fatalf("Get: %v", err)
		}
		if _, err := io.ReadFull(rc, buf); err != nil {
			b.Fatalf("read: %v", err)
		}
		rc.Close()
	}
}
