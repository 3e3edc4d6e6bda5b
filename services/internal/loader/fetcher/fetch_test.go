package fetcher

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// testConfig is the loader's default configuration of a fetcher
// (GRIDCRAWL_* defaults), allowed to fetch from this machine, whose bodies
// are kept up to maxBody bytes.
func testConfig(maxBody int64) Config {
	return Config{MaxBodyBytes: maxBody, BodyBudget: 8 << 20, RecoveryLease: 10 * time.Minute,
		FetchTimeout: 30 * time.Second, FetchAttempts: 1, AllowNets: "127.0.0.0/8", RobotsTTL: 24 * time.Hour,
		RenderTabs: 2, RenderTimeout: 20 * time.Second, RenderIdle: 500 * time.Millisecond, RenderMaxRequests: 300,
		RenderMaxBytes: 20 << 20, RenderGroupRequests: 100, RenderCacheBytes: 32 << 20, BrowserRestartPages: 500,
		BrowserMaxMemory: 1 << 30, BrowserJSHeapMB: 512}
}

// TestHTTPGetBodyMemory: a body at the size cap is read with about one
// allocation of its size when its length is announced, and less than twice
// its size when it is not (or when it runs past the cap), however the
// server sends it; the stored response is the head and the body as
// received, byte for byte what dumpResponse makes of them, with the
// truncation marked. Reading into a growing buffer and copying it into an
// exact slice allocated about four times the body.
func TestHTTPGetBodyMemory(t *testing.T) {
	const limit = 8 << 20
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	tests := []struct {
		name      string
		size      int  // bytes the server sends (-1: without end)
		announce  bool // with Content-Length
		Header    int  // bytes of extra response headers
		Truncated bool
		maxAlloc  float64 // bytes allocated, at most this many times the stored body
	}{
		{name: "small announced", size: 20 << 10, announce: true, maxAlloc: 1.1},
		{name: "small chunked", size: 20 << 10, maxAlloc: 1.7},
		{name: "at the cap announced", size: limit, announce: true, maxAlloc: 1.1},
		{name: "at the cap chunked", size: limit, maxAlloc: 2.1},
		{name: "over the cap announced", size: 100 << 20, announce: true, Truncated: true, maxAlloc: 1.1},
		{name: "endless chunked", size: -1, Truncated: true, maxAlloc: 2.1},
		{name: "huge headers", size: limit, announce: true, Header: 60 << 10, maxAlloc: 1.1},
		{name: "empty", size: 0, announce: true, maxAlloc: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h := w.Header()
				h.Set("Content-Type", "text/plain")
				for i := range tc.Header / 1024 {
					h.Set("X-Junk-"+strconv.Itoa(i), strings.Repeat("v", 1000))
				}
				if tc.announce {
					h.Set("Content-Length", strconv.Itoa(tc.size))
				}
				for sent := 0; tc.size < 0 || sent < tc.size; {
					n := len(chunk)
					if tc.size >= 0 {
						n = min(n, tc.size-sent)
					}
					if _, err := w.Write(chunk[:n]); err != nil {
						return
					}
					sent += n
				}
			}))
			defer srv.Close()
			f, err := New(testConfig(limit), Deps{Metrics: (*metrics.Registry)(nil).Loader()})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(srv.URL + "/page")
			task := &queueing.Task{URL: u.String(), Profile: &contracts.Profile{UserAgent: contracts.DefaultUserAgent}}
			// Warm up the client (connection, buffers) so that only the
			// page's own allocations are counted.
			if _, err := f.httpGet(t.Context(), task, u); err != nil {
				t.Fatal(err)
			}
			task.BodyShare.Release() // as the worker does once the body is recorded
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ex, err := f.httpGet(t.Context(), task, u)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			task.BodyShare.Release()
			stored := tc.size
			if tc.size < 0 || tc.size > limit {
				stored = limit
			}
			if ex.BodyBytes != int64(stored) || ex.Truncated != tc.Truncated {
				t.Errorf("body %d bytes, truncated %v; want %d, %v", ex.BodyBytes, ex.Truncated, stored, tc.Truncated)
			}
			end := len(ex.Response) - stored
			if end < 4 || string(ex.Response[end-4:end]) != "\r\n\r\n" || bytes.Contains(ex.Response[:end], []byte("Transfer-Encoding")) {
				t.Errorf("head %q: want one ending in a blank line, without Transfer-Encoding", ex.Response[:min(end, 200)])
			}
			if !bytes.Contains(ex.Response[:end], []byte("\r\nContent-Length: "+strconv.Itoa(stored)+"\r\n")) {
				t.Errorf("head %q does not give the stored length %d", ex.Response[:end], stored)
			}
			for off := end; off < len(ex.Response); off += len(chunk) {
				if want := chunk[:min(len(chunk), len(ex.Response)-off)]; !bytes.Equal(ex.Response[off:off+len(want)], want) {
					t.Fatalf("body differs at byte %d", off-end)
				}
			}
			alloc := float64(after.TotalAlloc - before.TotalAlloc)
			if most := tc.maxAlloc*float64(stored) + 128<<10; alloc > most {
				t.Errorf("reading a %d-byte body allocated %.0f bytes, want at most %.0f", stored, alloc, most)
			}
		})
	}
}

// TestPlaceHeadMatchesDumpResponse: the head written in front of a body
// read in place is byte for byte the head dumpResponse writes, for heads of
// every shape the framing headers can take.
func TestPlaceHeadMatchesDumpResponse(t *testing.T) {
	tests := []struct {
		name   string
		Status string
		Header http.Header
		body   string
		limit  int64
	}{
		{"plain", "200 OK", http.Header{"Content-Type": {"text/html"}}, "<p>hello</p>", 8 << 20},
		{"chunked", "200 OK", http.Header{"Transfer-Encoding": {"chunked"}, "Content-Type": {"text/html"}}, "hello", 8 << 20},
		{"announced length differs", "200 OK", http.Header{"Content-Length": {"100000000"}}, "cut", 8 << 20},
		{"values with spaces and line breaks", "404 Not Found", http.Header{"X-A": {"  padded  ", "two\r\nlines"}, "Set-Cookie": {"a=1", "b=2"}}, "", 1 << 30},
		{"no reason", "204", http.Header{}, "", 10},
		{"many headers", "200 OK", manyHeaders(200), strings.Repeat("x", 5000), 8 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{Status: tc.Status, ProtoMajor: 1, ProtoMinor: 1, Header: tc.Header}
			want := dumpResponse(resp, []byte(tc.body))
			room := headRoom(resp, tc.limit)
			buf := append(make([]byte, room), tc.body...)
			if got := placeHead(resp, buf, room); !bytes.Equal(got, want) {
				t.Errorf("placeHead = %q, want %q", got, want)
			}
		})
	}
}

func manyHeaders(n int) http.Header {
	h := http.Header{}
	for i := range n {
		h.Set(fmt.Sprintf("X-Field-%d", i), strings.Repeat("v", i))
	}
	return h
}

// BenchmarkHTTPGet fetches an ordinary 20 KB page over loopback, with and
// without its length announced: the cost of a page on the hot path.
func BenchmarkHTTPGet(b *testing.B) {
	page := bytes.Repeat([]byte("<p>ordinary words of a page</p>\n"), 20<<10/32)
	for _, announce := range []bool{true, false} {
		b.Run(fmt.Sprintf("announced=%v", announce), func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				if announce {
					w.Header().Set("Content-Length", strconv.Itoa(len(page)))
				} else if f, ok := w.(http.Flusher); ok {
					f.Flush() // chunked
				}
				_, _ = w.Write(page)
			}))
			defer srv.Close()
			f, err := New(testConfig(8<<20), Deps{Metrics: (*metrics.Registry)(nil).Loader()})
			if err != nil {
				b.Fatal(err)
			}
			u, _ := url.Parse(srv.URL + "/page")
			task := &queueing.Task{URL: u.String(), Profile: &contracts.Profile{UserAgent: contracts.DefaultUserAgent}}
			b.ReportAllocs()
			for b.Loop() {
				ex, err := f.httpGet(b.Context(), task, u)
				if err != nil || ex.BodyBytes != int64(len(page)) {
					b.Fatalf("httpGet = %v bytes, %v", ex.BodyBytes, err)
				}
				task.BodyShare.Release()
			}
		})
	}
}
