package grid

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// cuttingS3Proxy forwards requests to the S3 endpoint real and breaks off the
// first ranged GET of a WARC segment halfway through its body, as a reset
// connection would. It returns its address and the number of cuts made.
func cuttingS3Proxy(t *testing.T, real string) (string, *atomic.Int32) {
	t.Helper()
	var cuts atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "http", real
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		cut := r.Method == http.MethodGet && r.Header.Get("Range") != "" && strings.Contains(r.URL.Path, "warc") &&
			resp.StatusCode == http.StatusPartialContent && cuts.CompareAndSwap(0, 1)
		if !cut {
			io.Copy(w, resp.Body)
			return
		}
		half := resp.ContentLength / 2
		io.CopyN(w, resp.Body, half)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the client sees the connection end mid-body
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &cuts
}

// TestWARCReadCutShortIsRetried: when the stream of a page's WARC record from
// MinIO breaks off, the page is read again and indexed, not failed for good.
// The handoff is off and the crawl is one page, so the crawler reads the
// record on its own (the single-record path).
func TestWARCReadCutShortIsRetried(t *testing.T) {
	s3 := testenv.Backend(t, "GRIDCRAWL_S3_ENDPOINT", "GRIDCRAWL_S3_ACCESS_KEY", "GRIDCRAWL_S3_SECRET_KEY", "GRIDCRAWL_S3_BUCKET")
	real := s3[0]
	if u, err := url.Parse(real); err == nil && u.Host != "" {
		real = u.Host
	}
	proxy, cuts := cuttingS3Proxy(t, real)

	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><title>one page</title><body>"+strings.Repeat("readable words ", 2000)+"</body></html>")
	})
	start := serveSite(t, "cut.test", mux)

	cfg := testConfig(t, t.TempDir(), "cut.test=127.0.0.1")
	cfg.HandoffBytes = 0
	cfg.Backends.S3Endpoint = proxy
	cfg.Backends.S3AccessKey, cfg.Backends.S3SecretKey, cfg.Backends.S3Bucket = s3[1], s3[2], s3[3]
	// Real assets make this grid mode, which needs an API token: the
	// test's API calls carry it.
	cfg.MCP.Token = "warc-read-test"
	old := http.DefaultClient.Transport
	http.DefaultClient.Transport = bearer{token: cfg.MCP.Token}
	t.Cleanup(func() { http.DefaultClient.Transport = old })
	g, api := startGrid(t, cfg)

	p := contracts.Profile{StartURLs: []string{start}, MaxDepth: 0,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 10, DelayFactor: 1}}
	crawlID := crawlToEnd(t, api, p, 2*time.Minute)
	if cuts.Load() != 1 {
		t.Fatalf("the proxy cut %d reads, want 1 (the test did not exercise the path)", cuts.Load())
	}
	r, err := g.Backends.Tx.Get(t.Context(), txindex.Key(crawlID, start))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != contracts.Indexed {
		t.Errorf("page = %s (%q), want indexed after the read was retried", r.Status, r.Error)
	}
}

// bearer adds an API token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
