package loader

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caarlos0/env/v10"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// backends are the embedded backends one test's loaders share, as the
// embedded grid wires them.
type backends struct {
	q      *sqlitequeue.Queue
	tx     *sqlitestore.TxIndex
	prof   *sqlitestore.Profiles
	assets assets.Store
	shards int
}

func newBackends(t *testing.T) *backends {
	t.Helper()
	s := embedtest.Open(t)
	return &backends{q: s.Queue, tx: s.Tx, prof: s.Profiles, assets: s.Assets, shards: 2}
}

// config returns a validated loader configuration: the documented
// defaults, changed by vars (environment variable names), whatever the
// process environment says.
func config(t testing.TB, vars map[string]string) Config {
	t.Helper()
	all := map[string]string{"GRIDCRAWL_ALLOW_NETS": "127.0.0.0/8", "GRIDCRAWL_FETCH_ATTEMPTS": "1"}
	for k, v := range vars {
		all[k] = v
	}
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: all}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// runLoader starts a loader and returns it with a function that stops it
// and waits for Run to return.
func (b *backends) runLoader(t *testing.T, cfg Config) (*Loader, func()) {
	t.Helper()
	return b.runLoaderWith(t, cfg, func(*Deps) {})
}

// runLoaderWith is runLoader with the loader's dependencies changed by
// change (another asset store, an outage gate).
func (b *backends) runLoaderWith(t *testing.T, cfg Config, change func(*Deps)) (*Loader, func()) {
	t.Helper()
	deps := Deps{Queue: b.q, Tx: b.tx, Owners: b.tx, Assets: b.assets, Profiles: b.prof, Shards: b.shards, Logger: slog.New(slog.DiscardHandler)}
	change(&deps)
	l, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return l, stop
}

// profile returns a crawl profile with a small minimum delay.
func profile(urls ...string) contracts.Profile {
	return contracts.Profile{
		StartURLs: urls, MaxDepth: 1, UserAgent: contracts.DefaultUserAgent,
		Politeness: contracts.Politeness{MinDelayMS: 20, MaxDelayMS: 1000, DelayFactor: 1, Robots: contracts.RobotsObey},
	}
}

// submit stores a crawl in state, writes its URLs as to-be-loaded and
// publishes their loader contracts to their shards, as MCP does.
func (b *backends) submit(t *testing.T, id string, state contracts.CrawlState, p contracts.Profile, urls ...string) {
	t.Helper()
	ctx := t.Context()
	if err := b.prof.Put(ctx, profiles.Crawl{ID: id, Profile: p, State: state, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var recs []txindex.Record
	for _, u := range urls {
		host := strings.TrimPrefix(u, "http://")
		host, _, _ = strings.Cut(host, "/")
		host, _, _ = strings.Cut(host, ":")
		recs = append(recs, txindex.Record{Key: txindex.Key(id, u), CrawlID: id, URL: u, Host: host, Group: host,
			Shard:  txindex.ShardID(routing.ShardOf(host, b.shards), b.shards),
			Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now})
	}
	if _, err := b.tx.Create(ctx, recs); err != nil {
		t.Fatal(err)
	}
	byShard := map[int][]txindex.Record{}
	for _, r := range recs {
		s := routing.ShardOf(r.Group, b.shards)
		byShard[s] = append(byShard[s], r)
	}
	for s, rs := range byShard {
		msgs, err := contractmsg.Loader(id, p, rs)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.q.Publish(ctx, routing.ShardQueue(s, b.shards), msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

func (b *backends) record(t *testing.T, id, u string) txindex.Record {
	t.Helper()
	r, err := b.tx.Get(t.Context(), txindex.Key(id, u))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitStatus waits until every URL of crawl id has left to-be-loaded.
func (b *backends) waitLoaded(t *testing.T, id string, urls ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d urls of %s loaded", len(urls), id), func() bool {
		for _, u := range urls {
			if b.record(t, id, u).Status == contracts.ToBeLoaded {
				return false
			}
		}
		return true
	})
}

// queued returns the messages waiting in all loader shards.
func (b *backends) queued(t *testing.T) int {
	t.Helper()
	n := 0
	for _, q := range routing.ShardQueues(b.shards) {
		k, err := b.q.Len(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

// waitFor polls cond until it holds; it fails the test after a minute,
// which only a hung loader takes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// site is a test web site that logs the arrival of every request.
type site struct {
	URL    string // http://127.0.0.1:port
	robots string // robots.txt body; "" serves 404
	body   func(path string) string

	mu  sync.Mutex
	log []hit
}

type hit struct {
	path string
	at   time.Time
}

func newSite(t *testing.T, robots string) *site {
	t.Helper()
	s := &site{robots: robots}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.URL = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: s}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.log = append(s.log, hit{r.URL.Path, time.Now()})
	s.mu.Unlock()
	if r.URL.Path == "/robots.txt" {
		if s.robots == "" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, s.robots)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	if s.body != nil {
		io.WriteString(w, s.body(r.URL.Path))
		return
	}
	fmt.Fprintf(w, "<html><title>%s</title><body>page %s</body></html>", r.URL.Path, r.URL.Path)
}

func (s *site) hits() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.log...)
}

// pageHits returns the requests s got for pages, robots.txt left out.
func (s *site) pageHits() []hit {
	var out []hit
	for _, h := range s.hits() {
		if h.path != "/robots.txt" {
			out = append(out, h)
		}
	}
	return out
}

func (s *site) pages(n int) []string {
	var urls []string
	for i := range n {
		urls = append(urls, fmt.Sprintf("%s/p%d.html", s.URL, i))
	}
	return urls
}

// checkGaps fails unless consecutive requests arrived at least min apart.
func checkGaps(t *testing.T, hits []hit, min time.Duration) {
	t.Helper()
	for i := 1; i < len(hits); i++ {
		if gap := hits[i].at.Sub(hits[i-1].at); gap < min {
			t.Errorf("request %d (%s) came %v after request %d (%s), want at least %v", i, hits[i].path, gap, i-1, hits[i-1].path, min)
		}
	}
}

// warcObjects returns every stored WARC object by key.
func (b *backends) warcObjects(t *testing.T) map[string][]byte {
	t.Helper()
	keys, err := b.assets.List(t.Context(), "warc/")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, k := range keys {
		if assets.IsCDXJKey(k) {
			continue
		}
		rc, err := b.assets.Get(t.Context(), k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = body
	}
	return out
}

// readAsset reads the WARC record a transaction record points to.
func (b *backends) readAsset(t *testing.T, a contracts.AssetRef) (warc.Record, error) {
	t.Helper()
	rc, err := b.assets.Get(t.Context(), a.Key, a.Offset, a.Length)
	if err != nil {
		return warc.Record{}, err
	}
	defer rc.Close()
	return warc.ReadRecord(rc, 1<<20)
}

// records returns every WARC record of the stored objects.
func records(t *testing.T, objects map[string][]byte) []warc.Record {
	t.Helper()
	var out []warc.Record
	for k, body := range objects {
		r := warc.NewReader(bytes.NewReader(body))
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read %s: %v", k, err)
			}
			out = append(out, rec)
		}
	}
	return out
}
