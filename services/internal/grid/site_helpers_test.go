package grid

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
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
