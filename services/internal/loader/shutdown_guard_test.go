package loader

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// TestShutdownRecordsFetchInFlight checks the loader's final flush: a page
// whose fetch is still in flight when shutdown starts is recorded before
// Run returns. The site holds its answer until the loader has been told to
// stop, so the fetch ends during shutdown, and the flush interval is an
// hour, so no periodic flush records it. Once the stop is signalled the
// flush loop ends (it is idle, waiting, with no flush asked: the fetch
// keeps the loader busy), so the final flush is the only one left to
// record the page: its WARC record is stored, it is to-be-parsed with a
// crawler contract published, and its loader contract is acked. Robots.txt
// is ignored, so that the page is the loader's only request.
func TestShutdownRecordsFetchInFlight(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	var fetches atomic.Int32
	open := func() { releaseOnce.Do(func() { close(release) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/held.html" {
			http.NotFound(w, r)
			return
		}
		if fetches.Add(1) == 1 {
			close(arrived)
		}
		<-release
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><title>held</title><body>answered after the stop</body></html>")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(open) // before srv.Close: a failed test does not leave the handler waiting

	b := newBackends(t)
	u := srv.URL + "/held.html"
	p := profile(u)
	p.Politeness.Robots = contracts.RobotsIgnore
	b.submit(t, "c", contracts.CrawlRunning, p, u)
	cfg := config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "1h"})
	l, err := New(cfg, Deps{Queue: b.q, Tx: b.tx, Assets: b.assets, Profiles: b.prof, Shards: b.shards, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()

	select {
	case <-arrived:
	case err := <-done:
		t.Fatalf("Run returned %v before the page was requested", err)
	case <-time.After(time.Minute): // only a hung loader takes this long
		t.Fatal("the page was never requested")
	}
	stop()
	open() // the answer arrives during shutdown
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after the stop")
	}

	r := b.record(t, "c", u)
	if r.Status != contracts.ToBeParsed {
		t.Fatalf("record of the page fetched during shutdown = %s (%q), want %s: the final flush did not record it", r.Status, r.Error, contracts.ToBeParsed)
	}
	rec, err := b.readAsset(t, r.Asset)
	if err != nil || rec.Header.Get(warc.FieldTargetURI) != u {
		t.Errorf("WARC record at %+v: target %q, %v; want the response of %s", r.Asset, rec.Header.Get(warc.FieldTargetURI), err, u)
	}
	if n, err := b.q.Len(t.Context(), contracts.QueueCrawler); err != nil || n != 1 {
		t.Errorf("Len(%s) = %d, %v, want 1: the page's crawler contract", contracts.QueueCrawler, n, err)
	}
	if n := b.queued(t); n != 0 {
		t.Errorf("loader queues hold %d contracts after shutdown, want 0 (acked)", n)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("the page was requested %d times, want once", n)
	}
}
