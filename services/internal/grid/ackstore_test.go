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

// segmentStall is a reverse proxy in front of MinIO that, once armed, holds
// the next WARC segment upload forever (it never reaches MinIO) and reports
// the URLs of the response records in it.
type segmentStall struct {
	addr    string
	mu      sync.Mutex
	armed   bool
	stalled chan []string
}

func newSegmentStall(t *testing.T, endpoint string) *segmentStall {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: endpoint}
	proxy := httputil.NewSingleHostReverseProxy(target)
	director := proxy.Director
	proxy.Director = func(r *http.Request) {
		host := r.Host // the client signed its request for this host
		director(r)
		r.Host = host
	}
	s := &segmentStall{stalled: make(chan []string, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		stall := s.armed && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/warc/")
		if stall {
			s.armed = false
		}
		s.mu.Unlock()
		if !stall {
			proxy.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		s.stalled <- segmentURLs(body)
		<-r.Context().Done() // the uploader dies waiting
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *segmentStall) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

// segmentURLs returns the target URIs of the response records in a WARC
// segment (gzip members or plain). An S3 upload may wrap the body in
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
		if err == nil && rec.Header.Get("WARC-Type") == "response" {
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
	stall := newSegmentStall(t, c.envValue("GRIDCRAWL_S3_ENDPOINT"))
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
	st := c.waitFetched(id, int64(len(want)/4), "the kill")
	stall.arm()
	var lost []string
	for len(lost) == 0 {
		select {
		case lost = <-stall.stalled:
			if len(lost) == 0 {
				stall.arm() // a segment of robots.txt exchanges only: wait for pages
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no segment upload within 30s")
		}
	}
	c.stop("loader-1", syscall.SIGKILL)
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
