package grid

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// serveSite serves h on a loopback port until the test ends and returns the
// site's start URL, http://host:port/ (the grid resolves host to loopback).
func serveSite(t *testing.T, host string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return fmt.Sprintf("http://%s:%d/", host, ln.Addr().(*net.TCPAddr).Port)
}

// crawlToEnd submits p to the grid at api, waits until the crawl finished
// and returns its id.
func crawlToEnd(t *testing.T, api string, p contracts.Profile, limit time.Duration) string {
	t.Helper()
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	if st := waitFinished(t, api, created.CrawlID, limit); st.State != contracts.CrawlFinished {
		t.Fatalf("crawl = %s", st.State)
	}
	return created.CrawlID
}

// eachWARCRecord calls fn with every record of every WARC segment in store,
// segment by segment in key order (their CDXJ indexes left out). A segment
// that does not read to its end fails the test.
func eachWARCRecord(t *testing.T, store assets.Store, fn func(rec warc.Record)) {
	t.Helper()
	keys, err := store.List(t.Context(), "warc/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, assets.CDXJSuffix) {
			continue // a segment's index, beside it
		}
		rc, err := store.Get(t.Context(), k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		r := warc.NewReader(rc)
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("segment %s: %v", k, err)
				break
			}
			fn(rec)
		}
		rc.Close()
	}
}
