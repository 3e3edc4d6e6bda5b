package loader

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// TestPausedCrawlIsParkedNotHeld: the URLs of a paused crawl go back to the
// broker, delayed, and their contracts are settled, so a long pause holds
// no unacked message; on resume they are fetched.
func TestPausedCrawlIsParkedNotHeld(t *testing.T) {
	b := newBackends(t)
	s := newSite(t, "")
	urls := s.pages(3)
	b.submit(t, "paused", contracts.CrawlPaused, profile(urls...), urls...)
	l, _ := b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_LOADER_PAUSED_DELAY": "1s"}))

	// A settled contract is back in its queue (Len does not count
	// unsettled deliveries).
	waitFor(t, "the paused crawl's urls parked in the broker", func() bool { return l.Parked() >= 3 && b.queued(t) > 0 })
	for _, u := range urls {
		if st := b.record(t, "paused", u).Status; st != contracts.ToBeLoaded {
			t.Errorf("%s while paused: status %s, want %s", u, st, contracts.ToBeLoaded)
		}
	}
	if h := s.hits(); len(h) != 0 {
		t.Errorf("site got %d requests while the crawl was paused, want 0", len(h))
	}
	if err := b.prof.Transition(t.Context(), "paused", contracts.CrawlPaused, contracts.CrawlRunning, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.waitLoaded(t, "paused", urls...)
	for _, u := range urls {
		if st := b.record(t, "paused", u).Status; st != contracts.ToBeParsed {
			t.Errorf("%s after resume: status %s, want %s", u, st, contracts.ToBeParsed)
		}
	}
}

// TestUnreachableRobotsTellsWhy: a URL whose robots.txt cannot be had fails
// with the true reason, not as disallowed.
func TestUnreachableRobotsTellsWhy(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() + "/page.html"
	closed.Close()
	s := newSite(t, "")
	tests := []struct {
		name  string
		allow string
		URL   string
		want  string
	}{
		{"refused by the address guard", "", s.URL + "/page.html", netguard.Reason},
		{"connection refused", "127.0.0.0/8", refused, "robots.txt unreachable: connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackends(t)
			b.submit(t, "c", contracts.CrawlRunning, profile(tc.URL), tc.URL)
			b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_ALLOW_NETS": tc.allow}))
			b.waitLoaded(t, "c", tc.URL)
			r := b.record(t, "c", tc.URL)
			if r.Status != contracts.Failed || r.Error != tc.want {
				t.Errorf("record of %s = %s %q, want %s %q", tc.URL, r.Status, r.Error, contracts.Failed, tc.want)
			}
		})
	}
}

// TestRobotsRequestIsPoliteAndArchived: robots.txt is a request like any
// other: the host's Crawl-delay separates it from the first page, and its
// exchange is stored as WARC records.
func TestRobotsRequestIsPoliteAndArchived(t *testing.T) {
	const delay = time.Second
	s := newSite(t, fmt.Sprintf("User-agent: *\nCrawl-delay: %d\n", int(delay.Seconds())))
	urls := s.pages(2)
	b := newBackends(t)
	b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls...)
	b.runLoader(t, config(t, nil))
	b.waitLoaded(t, "c", urls...)

	hits := s.hits()
	if len(hits) != 3 || hits[0].path != "/robots.txt" {
		t.Fatalf("site log = %v, want robots.txt then 2 pages", hits)
	}
	checkGaps(t, hits, delay)
	waitFor(t, "the robots.txt exchange stored", func() bool {
		for _, rec := range records(t, b.warcObjects(t)) {
			if rec.Header.Get(warc.FieldType) == warc.TypeResponse && rec.Header.Get(warc.FieldTargetURI) == s.URL+"/robots.txt" &&
				bytes.Contains(rec.Block, []byte("Crawl-delay")) {
				return true
			}
		}
		return false
	})
}

// TestPolitenessSurvivesFailover: when another loader takes a shard over,
// it does not fetch a group sooner than the old owner's last request plus
// the group's Crawl-delay.
func TestPolitenessSurvivesFailover(t *testing.T) {
	const delay = time.Second
	s := newSite(t, fmt.Sprintf("User-agent: *\nCrawl-delay: %d\n", int(delay.Seconds())))
	urls := s.pages(3)
	b := newBackends(t)
	b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls...)
	_, stop := b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_LOADER_ID": "first"}))
	waitFor(t, "robots.txt and a page fetched", func() bool { return len(s.hits()) >= 2 })
	stop()
	b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_LOADER_ID": "second"}))
	b.waitLoaded(t, "c", urls...)
	checkGaps(t, s.hits(), delay)
}

// TestRestartWithFixedIDKeepsSegments: a loader restarted with the same id
// never overwrites a stored WARC segment, and every record still reads.
func TestRestartWithFixedIDKeepsSegments(t *testing.T) {
	s := newSite(t, "")
	b := newBackends(t)
	cfg := config(t, map[string]string{"GRIDCRAWL_LOADER_ID": "fixed"})
	first := s.pages(2)
	b.submit(t, "one", contracts.CrawlRunning, profile(first...), first...)
	_, stop := b.runLoader(t, cfg)
	b.waitLoaded(t, "one", first...)
	stop()
	before := b.warcObjects(t)
	if len(before) == 0 {
		t.Fatal("no WARC object stored by the first run")
	}

	second := []string{s.URL + "/q0.html", s.URL + "/q1.html"}
	b.submit(t, "two", contracts.CrawlRunning, profile(second...), second...)
	_, stop = b.runLoader(t, cfg)
	b.waitLoaded(t, "two", second...)
	stop()
	after := b.warcObjects(t)
	for k, body := range before {
		if !bytes.Equal(after[k], body) {
			t.Errorf("segment %s changed by the restarted loader: %d bytes before, %d after", k, len(body), len(after[k]))
		}
	}
	for crawl, urls := range map[string][]string{"one": first, "two": second} {
		for _, u := range urls {
			r := b.record(t, crawl, u)
			rec, err := b.readAsset(t, r.Asset)
			if err != nil || rec.Header.Get(warc.FieldTargetURI) != u {
				t.Errorf("record of %s at %+v: target %q, %v; want the response of %s", u, r.Asset, rec.Header.Get(warc.FieldTargetURI), err, u)
			}
		}
	}
}

// TestShutdownFlushesFetchedPages: a loader that stops records what it has
// fetched and acks its contracts, instead of fetching it again after
// redelivery.
func TestShutdownFlushesFetchedPages(t *testing.T) {
	s := newSite(t, "")
	urls := s.pages(1)
	b := newBackends(t)
	b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls...)
	_, stop := b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "1h"}))
	waitFor(t, "the page requested", func() bool {
		for _, h := range s.hits() {
			if h.path == "/p0.html" {
				return true
			}
		}
		return false
	})
	stop()
	if r := b.record(t, "c", urls[0]); r.Status != contracts.ToBeParsed {
		t.Errorf("record after shutdown: %s, want %s", r.Status, contracts.ToBeParsed)
	}
	if n := b.queued(t); n != 0 {
		t.Errorf("loader queues hold %d contracts after shutdown, want 0 (acked)", n)
	}
}

// TestEmbeddedSegmentsAppend: on the embedded asset store, flushes append
// to one open segment file instead of writing an object each, and every
// page's record reads from its (key, offset, length) while the file grows.
func TestEmbeddedSegmentsAppend(t *testing.T) {
	s := newSite(t, "")
	urls := s.pages(45)
	b := newBackends(t)
	b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls...)
	b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "10ms"}))
	b.waitLoaded(t, "c", urls...)
	for _, u := range urls {
		r := b.record(t, "c", u)
		rec, err := b.readAsset(t, r.Asset)
		if err != nil || rec.Header.Get(warc.FieldTargetURI) != u {
			t.Errorf("record of %s at %+v: target %q, %v; want the response of %s", u, r.Asset, rec.Header.Get(warc.FieldTargetURI), err, u)
		}
	}
	if objs := b.warcObjects(t); len(objs) != 1 {
		t.Errorf("%d WARC objects for %d pages, want 1 open segment", len(objs), len(urls))
	}
}

// TestEmbeddedSegmentsRotate: an appended segment is closed once it reaches
// GRIDCRAWL_WARC_SEGMENT_BYTES or GRIDCRAWL_WARC_SEGMENT_AGE, and each new
// one starts with a warcinfo record.
func TestEmbeddedSegmentsRotate(t *testing.T) {
	const segBytes = 1 << 16
	tests := []struct {
		name string
		vars map[string]string
	}{
		{"by size", map[string]string{"GRIDCRAWL_WARC_SEGMENT_BYTES": fmt.Sprint(segBytes)}},
		{"by age", map[string]string{"GRIDCRAWL_WARC_SEGMENT_AGE": "1ns"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t, "")
			s.body = func(string) string { // ~13 KB, hardly compressible
				var sb strings.Builder
				for range 500 {
					sb.WriteString(rand.Text())
				}
				return sb.String()
			}
			urls := s.pages(20)
			b := newBackends(t)
			b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls...)
			tc.vars["GRIDCRAWL_WARC_FLUSH_INTERVAL"] = "10ms"
			b.runLoader(t, config(t, tc.vars))
			b.waitLoaded(t, "c", urls...)
			objs := b.warcObjects(t)
			if len(objs) < 2 {
				t.Errorf("%d WARC objects, want several", len(objs))
			}
			for k, body := range objs {
				recs := records(t, map[string][]byte{k: body})
				if len(recs) == 0 || recs[0].Header.Get(warc.FieldType) != warc.TypeWarcinfo {
					t.Errorf("segment %s does not start with a warcinfo record", k)
				}
			}
		})
	}
}

// A URL that reaches the loader twice while its first fetch is not recorded
// yet (a republished or redelivered contract) is fetched once.
func TestDuplicateTaskFetchedOnce(t *testing.T) {
	s := newSite(t, "")
	urls := s.pages(2)
	b := newBackends(t)
	b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls[0])
	// The same URL again, then a later one of the same group: when the
	// later one is fetched, the group's queue has passed the duplicate.
	again := txindex.Record{URL: urls[0], Group: b.record(t, "c", urls[0]).Group}
	later := txindex.Record{Key: txindex.Key("c", urls[1]), CrawlID: "c", URL: urls[1], Host: again.Group, Group: again.Group,
		Status: contracts.ToBeLoaded, StatusTime: time.Now().UTC(), CreatedAt: time.Now().UTC()}
	if _, err := b.tx.Create(t.Context(), []txindex.Record{later}); err != nil {
		t.Fatal(err)
	}
	msgs, err := contractmsg.Loader("c", profile(urls...), []txindex.Record{again, later})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.q.Publish(t.Context(), routing.ShardQueue(routing.ShardOf(again.Group, b.shards), b.shards), msgs...); err != nil {
		t.Fatal(err)
	}
	_, stop := b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "1h"}))
	// Both pages requested: the later one may come first, when the first
	// lease of the group went to robots.txt and the first page's task was
	// scheduled again behind it.
	waitFor(t, "both pages requested", func() bool {
		seen := map[string]bool{}
		for _, h := range s.hits() {
			seen[h.path] = true
		}
		return seen["/p0.html"] && seen["/p1.html"]
	})
	stop()
	n := 0
	for _, h := range s.hits() {
		if h.path == "/p0.html" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("/p0.html fetched %d times, want 1", n)
	}
	for _, u := range urls {
		if r := b.record(t, "c", u); r.Status != contracts.ToBeParsed {
			t.Errorf("record of %s: %s, want %s", u, r.Status, contracts.ToBeParsed)
		}
	}
	if n := b.queued(t); n != 0 {
		t.Errorf("loader queues hold %d contracts after shutdown, want 0 (acked)", n)
	}
}
