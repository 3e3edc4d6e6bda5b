package grid

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// segmentStall is a reverse proxy in front of MinIO that holds one WARC
// segment upload forever (it never reaches MinIO) and reports the URLs of the
// response records in it: the upload that carries the after-th page's
// response, counting the pages of the uploads it let through. Since no crawl
// finishes before every page's segment is uploaded, that upload comes
// whatever the timing of the crawl: the test does not race the crawler to
// arm it.
type segmentStall struct {
	addr    string
	mu      sync.Mutex
	after   int // pages to let through first; -1 once an upload stalled
	passed  int
	stalled chan []string
}

func newSegmentStall(t *testing.T, endpoint string, after int) *segmentStall {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: endpoint}
	proxy := httputil.NewSingleHostReverseProxy(target)
	director := proxy.Director
	proxy.Director = func(r *http.Request) {
		host := r.Host // the client signed its request for this host
		director(r)
		r.Host = host
	}
	s := &segmentStall{after: after, stalled: make(chan []string, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/warc/") {
			proxy.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the uploader went away
		}
		urls := segmentURLs(body) // none in a CDXJ index or a segment of robots.txt exchanges only
		s.mu.Lock()
		stall := s.after >= 0 && len(urls) > 0 && s.passed+len(urls) >= s.after
		if stall {
			s.after = -1
		} else {
			s.passed += len(urls)
		}
		s.mu.Unlock()
		if !stall {
			r.Body = io.NopCloser(bytes.NewReader(body))
			proxy.ServeHTTP(w, r)
			return
		}
		s.stalled <- urls
		<-r.Context().Done() // the uploader dies waiting
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// segmentURLs returns the target URIs of the pages' response records in a
// WARC segment (gzip members or plain): robots.txt exchanges, archived
// like pages but without a record of their own in the transaction index,
// are left out. An S3 upload may wrap the body in
// aws-chunked framing; the records are found inside it all the same, since
// each record is read from where its header starts.
func segmentURLs(body []byte) []string {
	var urls []string
	body = unchunk(body)
	data := body
	if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
		if b, err := io.ReadAll(zr); err == nil || len(b) > 0 {
			data = b
		}
	}
	for {
		i := bytes.Index(data, []byte("WARC/1."))
		if i < 0 {
			break
		}
		rec, err := warc.ReadRecord(bytes.NewReader(data[i:]), 64<<20)
		data = data[i+len("WARC/1."):]
		if err == nil && rec.Header.Get("WARC-Type") == "response" && !strings.HasSuffix(rec.Header.Get("WARC-Target-URI"), "/robots.txt") {
			urls = append(urls, rec.Header.Get("WARC-Target-URI"))
		}
	}
	return urls
}

// unchunk removes aws-chunked framing ("<hex size>;chunk-signature=...\r\n
// <data>\r\n" ... "0;..."), which minio-go uses over plain HTTP.
func unchunk(b []byte) []byte {
	line, _, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok || !bytes.Contains(line, []byte(";chunk-signature=")) {
		return b
	}
	var out []byte
	for {
		line, rest, ok := bytes.Cut(b, []byte("\r\n"))
		if !ok {
			return out
		}
		hexSize, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(hexSize), 16, 64)
		if err != nil || n <= 0 || int64(len(rest)) < n {
			return out
		}
		out = append(out, rest[:n]...)
		b = bytes.TrimPrefix(rest[n:], []byte("\r\n"))
	}
}

// TestGridModeKillDuringSegmentStore kills (SIGKILL) a loader process while
// MinIO has not yet stored the WARC segment of pages it fetched, with the
// recovery sweep off, and restarts it: the pages must be fetched again and
// indexed. A loader that acked their contracts before the segment was stored
// would lose them, and the crawl would never finish.
func TestGridModeKillDuringSegmentStore(t *testing.T) {
	env := realBackends(t)
	env, _ = ownVhost(t, env)
	web, starts, want := startWeb(t, websim.WebConfig{Hosts: 4, PagesPerHost: 20, LinksPerPage: 4, CrossHostLinks: 1, Seed: 17}, 2)

	c := newCluster(t, env, web.Resolve())
	// The sweep is off in effect: no lease runs out during the test.
	c.env = append(c.env, "GRIDCRAWL_RECOVERY_LEASE=1h", "GRIDCRAWL_WARC_SEGMENT_BYTES=65536")
	// The upload holding the fetched pages past the first quarter stalls.
	stall := newSegmentStall(t, c.envValue("GRIDCRAWL_S3_ENDPOINT"), len(want)/4)
	startLoader := func() {
		env := c.env
		c.env = append(slices.Clip(env), "GRIDCRAWL_S3_ENDPOINT="+stall.addr)
		c.start("loader-1", "loader")
		c.env = env
	}
	c.start("mcp", "mcp")
	startLoader()
	c.start("crawler-1", "crawler")
	p := contracts.Profile{StartURLs: starts, MaxDepth: contracts.MaxDepthLimit, Scope: contracts.ScopeDomain, Sitemaps: new(bool), // the oracle is the link graph
		Politeness: contracts.Politeness{MinDelayMS: 60, MaxDelayMS: 60, DelayFactor: 1}}
	id := c.startCrawl(p)
	var lost []string
	select {
	case lost = <-stall.stalled:
	case <-time.After(3 * time.Minute): // only when the crawl is stuck: it cannot finish without the upload
		var st contracts.CrawlStatus
		c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
		t.Fatalf("no segment upload with page %d of %d after 3 minutes: crawl %s %v", len(want)/4, len(want), st.State, st.Counts)
	}
	c.stop("loader-1", syscall.SIGKILL)
	var st contracts.CrawlStatus
	c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
	t.Logf("killed the loader while storing a segment of %d pages, at %v", len(lost), st.Counts)
	startLoader()

	set := c.openBackends(t)
	ctx := t.Context()
	deadline := time.Now().Add(90 * time.Second)
	for _, u := range lost {
		var r txindex.Record
		var err error
		for ; ; time.Sleep(100 * time.Millisecond) {
			if r, err = set.Tx.Get(ctx, txindex.Key(id, u)); err != nil {
				t.Fatalf("record of %s: %v", u, err)
			}
			if r.Status == contracts.Indexed || r.Status == contracts.Failed || time.Now().After(deadline) {
				break
			}
		}
		if r.Status != contracts.Indexed {
			t.Errorf("%s, whose segment was never stored, is %s (%s) after the restart: its contract was settled before the store", u, r.Status, r.Error)
			continue
		}
		rc, err := set.Assets.Get(ctx, r.Asset.Key, r.Asset.Offset, r.Asset.Length)
		if err != nil {
			t.Errorf("WARC record of %s: %v", u, err)
			continue
		}
		rec, err := warc.ReadRecord(rc, 64<<20)
		rc.Close()
		if err != nil || rec.Header.Get("WARC-Target-URI") != u {
			t.Errorf("WARC record of %s: uri %q err %v", u, rec.Header.Get("WARC-Target-URI"), err)
		}
	}
	if t.Failed() {
		t.FailNow() // pages were lost: the crawl cannot finish
	}
	for deadline := time.Now().Add(2 * time.Minute); st.State != contracts.CrawlFinished; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished after the restart: %s %v", st.State, st.Counts)
		}
		c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
	}
	if got := st.Counts[contracts.Indexed]; got != int64(len(want)) {
		t.Errorf("indexed = %d, want %d: %v", got, len(want), st.Counts)
	}
}
