package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caarlos0/env/v10"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// errKilled is what a store of the killed loader answers from the kill on.
var errKilled = errors.New("loader process killed")

// segmentGate is a narrow seam over a real asset store: storing a WARC
// segment blocks until the gate is opened or killed, so that a test can stop
// a loader while the segment of a fetched page is not stored yet. Other
// objects (frontier reports) pass through.
type segmentGate struct {
	assets.Store
	started chan string   // receives the key of the first segment store
	killed  chan struct{} // closed by kill
	once    sync.Once
	first   atomic.Bool
}

func newSegmentGate(s assets.Store) *segmentGate {
	return &segmentGate{Store: s, started: make(chan string, 1), killed: make(chan struct{})}
}

func (g *segmentGate) kill() { g.once.Do(func() { close(g.killed) }) }

// wait blocks a segment store until the kill; it never lets one complete.
func (g *segmentGate) wait(ctx context.Context, key string) error {
	if !strings.HasPrefix(key, "warc/") {
		return nil
	}
	if g.first.CompareAndSwap(false, true) {
		g.started <- key
	}
	select {
	case <-g.killed:
		return fmt.Errorf("store %q: %w", key, errKilled)
	case <-ctx.Done():
		<-g.killed // a kill, not a shutdown, ends this store
		return fmt.Errorf("store %q: %w", key, errKilled)
	}
}

func (g *segmentGate) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := g.wait(ctx, key); err != nil {
		return err
	}
	select {
	case <-g.killed:
		return fmt.Errorf("store %q: %w", key, errKilled)
	default:
	}
	return g.Store.Put(ctx, key, r, size, contentType)
}

// appendGate is a segmentGate over a store that appends, for a loader that
// grows segments in place.
type appendGate struct {
	*segmentGate
	app assets.Appender
}

func (g appendGate) Append(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	if err := g.wait(ctx, key); err != nil {
		return 0, err
	}
	select {
	case <-g.killed:
		return 0, fmt.Errorf("append to %q: %w", key, errKilled)
	default:
	}
	return g.app.Append(ctx, key, r, size)
}

// crashSite serves one page and counts its fetches.
type crashSite struct {
	*httptest.Server
	fetches atomic.Int64
}

func newCrashSite(t *testing.T) *crashSite {
	s := &crashSite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/page.html" {
			http.NotFound(w, r)
			return
		}
		s.fetches.Add(1)
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><title>the page</title><body>stored before acked</body></html>")
	}))
	t.Cleanup(s.Close)
	return s
}

// testLoaderConfig returns the documented defaults with short intervals.
func testLoaderConfig(t *testing.T) Config {
	t.Helper()
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	cfg.ID = "crash-test-loader"
	cfg.AllowNets = "127.0.0.0/8"
	cfg.FlushInterval = 20 * time.Millisecond
	cfg.Workers = 2
	cfg.FetchAttempts = 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestAckAfterSegmentStored kills a loader (the recovery sweep is off: no
// MCP runs) while the WARC segment of a fetched page is being stored, and
// checks that its contract was not acked: it is back in the queue after the
// restart, and a fresh loader fetches the page again, stores it and moves it
// to to-be-parsed with a crawler contract. A loader that acks a contract
// before its segment is stored loses the URL here: nothing would ever load
// it again.
func TestAckAfterSegmentStored(t *testing.T) {
	for _, tc := range []struct {
		name string
		gate func(*segmentGate, assets.Store) assets.Store
	}{
		{"put", func(g *segmentGate, _ assets.Store) assets.Store { return g }},
		{"append", func(g *segmentGate, s assets.Store) assets.Store {
			app, ok := s.(assets.Appender)
			if !ok {
				t.Skip("the directory store does not append")
			}
			return appendGate{g, app}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testAckAfterSegmentStored(t, tc.gate) })
	}
}

func testAckAfterSegmentStored(t *testing.T, gate func(*segmentGate, assets.Store) assets.Store) {
	ctx := t.Context()
	dir := t.TempDir()
	site := newCrashSite(t)
	pageURL := site.URL + "/page.html"
	const crawlID = "crash-crawl"

	tx, err := sqlitestore.OpenTxIndex(filepath.Join(dir, "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	profs, err := sqlitestore.OpenProfiles(filepath.Join(dir, "profiles.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { profs.Close() })
	files, err := fsassets.Open(filepath.Join(dir, "assets"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { files.Close() })
	queuePath := filepath.Join(dir, "queue.db")
	q1, err := sqlitequeue.Open(queuePath, sqlitequeue.Options{})
	if err != nil {
		t.Fatal(err)
	}

	p := contracts.Profile{StartURLs: []string{pageURL}, MaxDepth: 1, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1, Robots: contracts.RobotsIgnore}}
	if err := profs.Put(ctx, profiles.Crawl{ID: crawlID, Profile: p, State: contracts.CrawlRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(site.URL, "http://")
	key := txindex.Key(crawlID, pageURL)
	if _, err := tx.Create(ctx, []txindex.Record{{Key: key, CrawlID: crawlID, URL: pageURL, Host: host, Group: host,
		Status: contracts.ToBeLoaded, StatusTime: time.Now(), CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(contracts.LoaderContract{V: contracts.Version, CrawlID: crawlID, Profile: contracts.InlineProfile(p),
		Group: host, URLs: []contracts.LoaderURL{{URL: pageURL}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q1.Publish(ctx, contracts.QueueLoader, queue.Message{Body: body}); err != nil {
		t.Fatal(err)
	}

	// The first loader fetches the page and blocks storing its segment.
	g := newSegmentGate(files)
	cfg := testLoaderConfig(t)
	l1, err := New(cfg, Deps{Queue: q1, Tx: tx, Assets: gate(g, files), Profiles: profs, Logger: testLogger(t, "killed")})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- l1.Run(runCtx) }()
	select {
	case k := <-g.started:
		t.Logf("killing the loader while it stores %s", k)
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("the loader did not store a segment (%d fetches)", site.fetches.Load())
	}
	if n := site.fetches.Load(); n != 1 {
		t.Fatalf("fetches before the kill = %d, want 1", n)
	}
	// The kill: the process stops, and no store of it completes.
	stop()
	g.kill()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed loader did not stop")
	}
	if err := q1.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: the contract must still be there.
	q2, err := sqlitequeue.Open(queuePath, sqlitequeue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q2.Close() })
	if n, err := q2.Len(ctx, contracts.QueueLoader); err != nil || n != 1 {
		t.Fatalf("loader contracts after the kill = %d (%v), want 1: the contract was settled before its segment was stored", n, err)
	}
	if r, err := tx.Get(ctx, key); err != nil || r.Status != contracts.ToBeLoaded {
		t.Fatalf("record after the kill = %q, %v; want to-be-loaded (its segment was never stored)", r.Status, err)
	}

	cfg.ID = "crash-test-loader-2"
	l2, err := New(cfg, Deps{Queue: q2, Tx: tx, Assets: files, Profiles: profs, Logger: testLogger(t, "fresh")})
	if err != nil {
		t.Fatal(err)
	}
	runCtx2, stop2 := context.WithCancel(ctx)
	ran2 := make(chan error, 1)
	go func() { ran2 <- l2.Run(runCtx2) }()
	defer func() {
		stop2()
		<-ran2
	}()
	var r txindex.Record
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, err = tx.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
		if r.Status != contracts.ToBeLoaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record still to-be-loaded after the restart (%d fetches): the URL was lost", site.fetches.Load())
		}
	}
	if r.Status != contracts.ToBeParsed || r.Asset.Key == "" {
		t.Fatalf("record after the restart = %q (%s) asset %+v, want to-be-parsed with an asset", r.Status, r.Error, r.Asset)
	}
	if n := site.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d, want 2 (once before the kill, once after)", n)
	}
	rc, err := files.Get(ctx, r.Asset.Key, r.Asset.Offset, r.Asset.Length)
	if err != nil {
		t.Fatalf("read WARC record %+v: %v", r.Asset, err)
	}
	rec, err := warc.ReadRecord(rc, 1<<20)
	rc.Close()
	if err != nil || rec.Header.Get("WARC-Type") != "response" || rec.Header.Get("WARC-Target-URI") != pageURL {
		t.Errorf("WARC record %+v: type %q uri %q err %v, want the response of %s", r.Asset, rec.Header.Get("WARC-Type"), rec.Header.Get("WARC-Target-URI"), err, pageURL)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := q2.Len(ctx, contracts.QueueCrawler)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("crawler contracts = %d, want 1", n)
		}
	}
}

// testLogger logs to the test at warning level and above.
func testLogger(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("loader", name)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
