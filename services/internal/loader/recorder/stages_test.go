package recorder

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/fetcher"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// failingIndex is a narrow seam over a real appending store: while fail is
// set, writes of CDXJ index objects fail.
type failingIndex struct {
	*fsassets.Store
	fail atomic.Bool
}

var errIndexDown = errors.New("index object refused")

func (s *failingIndex) Put(ctx context.Context, key string, r io.Reader, size int64, ctype string) error {
	if s.fail.Load() && assets.IsCDXJKey(key) {
		return errIndexDown
	}
	return s.Store.Put(ctx, key, r, size, ctype)
}

func (s *failingIndex) Append(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	if s.fail.Load() && assets.IsCDXJKey(key) {
		return 0, errIndexDown
	}
	return s.Store.Append(ctx, key, r, size)
}

func newFSAssets(t *testing.T) *fsassets.Store {
	t.Helper()
	s, err := fsassets.Open(filepath.Join(t.TempDir(), "assets"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testSegmentWriter writes uncompressed segments of the given size to
// store.
func testSegmentWriter(store assets.Store, bytes int64) *segmentWriter {
	cfg := segmentConfig{loader: "test", run: "run", gzip: false, bytes: bytes, age: time.Hour}
	return newSegmentWriter(store, cfg, (*metrics.Registry)(nil).Loader(), slog.New(slog.DiscardHandler))
}

// testExchange is a fetched page of u with a body of n bytes.
func testExchange(u string, n int) *fetcher.Exchange {
	body := strings.Repeat("x", n)
	return &fetcher.Exchange{URL: u, Date: time.Now().UTC(), IP: "127.0.0.1", Status: 200,
		Request:  []byte("GET / HTTP/1.1\r\nHost: example\r\n\r\n"),
		Response: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n" + body)}
}

func readObject(t *testing.T, s assets.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(t.Context(), key, 0, -1)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSegmentWriterIndexFollowsSegment: a store whose index lines fail
// fails, and storing the same cut again writes what is left (the index)
// without appending its records a second time; the location store reports
// segmentRecords reads every WARC record of one segment object.
func segmentRecords(t *testing.T, seg []byte) []warc.Record {
	t.Helper()
	var recs []warc.Record
	for r := warc.NewReader(bytes.NewReader(seg)); ; {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatalf("read segment: %v", err)
		}
		recs = append(recs, rec)
	}
}

// then reads back the page's response record.
func TestSegmentWriterIndexFollowsSegment(t *testing.T) {
	store := &failingIndex{Store: newFSAssets(t)}
	w := testSegmentWriter(store, 1<<20)
	const u = "http://a.example/page"
	off, n, _, _, err := w.appendExchange(testExchange(u, 100), "c")
	if err != nil {
		t.Fatal(err)
	}
	c := w.cut()
	store.fail.Store(true)
	if err := w.store(t.Context(), &c); !errors.Is(err, errIndexDown) {
		t.Fatalf("store with the index refused = %v, want %v", err, errIndexDown)
	}
	store.fail.Store(false)
	if err := w.store(t.Context(), &c); err != nil {
		t.Fatalf("store again: %v", err)
	}
	recs := segmentRecords(t, readObject(t, store, c.key))
	var types []string
	for _, r := range recs {
		types = append(types, r.Header.Get(warc.FieldType))
	}
	if diff := cmp.Diff([]string{warc.TypeWarcinfo, warc.TypeRequest, warc.TypeResponse}, types); diff != "" {
		t.Errorf("records of %s (-want +got):\n%s", c.key, diff)
	}
	rc, err := store.Get(t.Context(), c.key, c.base+off, n)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := warc.ReadRecord(rc, 1<<20)
	rc.Close()
	if err != nil || rec.Header.Get(warc.FieldTargetURI) != u || rec.Header.Get(warc.FieldType) != warc.TypeResponse {
		t.Errorf("record at the stored location = %v %q, %v; want the response of %s", rec.Header.Get(warc.FieldType), rec.Header.Get(warc.FieldTargetURI), err, u)
	}
	if lines := bytes.Count(readObject(t, store, assets.CDXJKey(c.key)), []byte("\n")); lines != 1 {
		t.Errorf("index of %s has %d lines, want 1", c.key, lines)
	}
}

// TestSegmentWriterRollsAndSeals: on an appending store the cuts of one
// segment object go to one key until it is full; the next records open a
// new key, never the old one again, and the old object's index, written as
// one sorted run per cut, is sorted as a whole once sealed.
func TestSegmentWriterRollsAndSeals(t *testing.T) {
	store := newFSAssets(t)
	w := testSegmentWriter(store, 1<<16)
	// The second cut's URL sorts before the first's: two runs, unsorted.
	var keys []string
	for _, u := range []string{"http://b.example/", "http://a.example/", "http://c.example/"} {
		if _, _, _, _, err := w.appendExchange(testExchange(u, 40<<10), "c"); err != nil {
			t.Fatal(err)
		}
		c := w.cut()
		if err := w.store(t.Context(), &c); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, c.key)
		w.sealClosed(t.Context())
	}
	if keys[0] != keys[1] || keys[2] == keys[1] {
		t.Fatalf("segment keys of three cuts of 40 KiB, 64 KiB segments = %q, want the first two equal, the third new", keys)
	}
	index := readObject(t, store, assets.CDXJKey(keys[0]))
	lines := slices.Collect(bytes.Lines(index))
	if len(lines) != 2 || !slices.IsSortedFunc(lines, bytes.Compare) {
		t.Errorf("sealed index of the closed segment %s =\n%s\nwant two sorted lines", keys[0], index)
	}
	if objs := readObject(t, store, keys[2]); len(segmentRecords(t, objs)) != 3 {
		t.Errorf("new segment %s: want warcinfo, request, response", keys[2])
	}
}

// recordingQueue is a narrow seam for the publisher: Publish blocks until
// release is closed, then records the crawler pages it was given, or fails.
type recordingQueue struct {
	release chan struct{}
	fail    error
	mu      sync.Mutex
	urls    []string
}

func (q *recordingQueue) Publish(ctx context.Context, name string, msgs ...queue.Message) error {
	<-q.release
	if q.fail != nil {
		return q.fail
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		for _, u := range []string{"http://x.example/1", "http://x.example/2"} {
			if bytes.Contains(m.Body, []byte(u)) {
				q.urls = append(q.urls, u)
			}
		}
	}
	return nil
}

// settled records the tasks a settle function was given, in order.
type settled struct {
	mu   sync.Mutex
	urls []string
	errs []error
}

func (s *settled) settle(_ context.Context, t *queueing.Task, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.urls, s.errs = append(s.urls, t.URL), append(s.errs, err)
}

func (s *settled) got() ([]string, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.urls), slices.Clone(s.errs)
}

// recordedBatch is a batch of one page moved to to-be-parsed.
func recordedBatch(u string) *batch {
	res := &result{t: &queueing.Task{CrawlID: "c", URL: u}, Status: contracts.ToBeParsed,
		page: contracts.CrawlerPage{URL: u, StatusCode: 200, Asset: contracts.AssetRef{Key: "warc/k", Length: 1}}}
	return &batch{pending: []*result{res}, rs: recordState{applied: []bool{true}, moved: []*result{res}}}
}

// TestPublisherSettlesAfterPublish: the publisher settles a batch's tasks
// only once the broker has taken its crawler contracts, batches in the
// order they were put, and close waits for both; a batch that cannot be
// published settles with the error.
func TestPublisherSettlesAfterPublish(t *testing.T) {
	t.Run("published", func(t *testing.T) {
		q := &recordingQueue{release: make(chan struct{})}
		var s settled
		p := newPublisher(q, nil, nil, slog.New(slog.DiscardHandler), s.settle)
		go p.run(t.Context())
		p.put(t.Context(), recordedBatch("http://x.example/1"))
		p.put(t.Context(), recordedBatch("http://x.example/2"))
		time.Sleep(50 * time.Millisecond) // give a wrong publisher time to settle early
		if urls, _ := s.got(); len(urls) != 0 {
			t.Fatalf("settled before the broker took the contracts: %q", urls)
		}
		close(q.release)
		p.close()
		urls, errs := s.got()
		want := []string{"http://x.example/1", "http://x.example/2"}
		if diff := cmp.Diff(want, urls); diff != "" {
			t.Errorf("settled (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, q.urls); diff != "" {
			t.Errorf("published (-want +got):\n%s", diff)
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("settle %s with %v, want nil", urls[i], err)
			}
		}
	})
	t.Run("failed", func(t *testing.T) {
		broken := errors.New("broker gone")
		q := &recordingQueue{release: make(chan struct{}), fail: broken}
		close(q.release)
		var s settled
		p := newPublisher(q, nil, nil, slog.New(slog.DiscardHandler), s.settle)
		go p.run(t.Context())
		p.put(t.Context(), recordedBatch("http://x.example/1"))
		p.close()
		urls, errs := s.got()
		if len(urls) != 1 || !errors.Is(errs[0], broken) {
			t.Errorf("settled %q with %v, want http://x.example/1 with %v", urls, errs, broken)
		}
	})
}

// handoffLog records what the publisher hands off.
type handoffLog struct {
	mu  sync.Mutex
	got []string
}

func (h *handoffLog) WaitRoom(context.Context, int64) error { return nil }

func (h *handoffLog) Put(ref contracts.AssetRef, ip string, response []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, string(response))
}

// TestPublisherHoldsNoResponse: a batch waiting for its publish (the crawler
// queue full) has already given its pages' responses to the handoff, once,
// and keeps none of them; a page that did not move to to-be-parsed is not
// handed off.
func TestPublisherHoldsNoResponse(t *testing.T) {
	q := &recordingQueue{release: make(chan struct{})}
	var s settled
	h := &handoffLog{}
	p := newPublisher(q, h, nil, slog.New(slog.DiscardHandler), s.settle)
	go p.run(t.Context())
	first, second := recordedBatch("http://x.example/1"), recordedBatch("http://x.example/2")
	first.rs.moved[0].Response = []byte("HTTP/1.1 200 OK\r\n\r\none")
	second.rs.moved[0].Response = []byte("HTTP/1.1 200 OK\r\n\r\ntwo")
	second.rs.applied[0] = false // another loader moved it first
	p.put(t.Context(), first)
	p.put(t.Context(), second) // waits behind first, whose publish waits for release
	for _, b := range []*batch{first, second} {
		if r := b.rs.moved[0]; r.Response != nil {
			t.Errorf("batch of %s waiting for its publish holds its response", r.page.URL)
		}
	}
	close(q.release)
	p.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := []string{"HTTP/1.1 200 OK\r\n\r\none"}; !slices.Equal(h.got, want) {
		t.Errorf("handed off %q, want %q", h.got, want)
	}
}

// TestSegmentWriterDeletedObjectRollsOver: a segment object deleted while
// the writer appends to it is re-created by the next append, whose records
// then lie at offsets the old object's records had (which the digest index
// may name): the writer opens another object for the records after.
func TestSegmentWriterDeletedObjectRollsOver(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "assets")
	store, err := fsassets.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	w := testSegmentWriter(store, 1<<20)
	put := func(u string) string {
		t.Helper()
		if _, _, _, _, err := w.appendExchange(testExchange(u, 100), "c"); err != nil {
			t.Fatal(err)
		}
		c := w.cut()
		if err := w.store(t.Context(), &c); err != nil {
			t.Fatal(err)
		}
		return c.key
	}
	first := put("http://a.example/1")
	if again := put("http://a.example/2"); again != first {
		t.Fatalf("second cut went to %s, want the open object %s", again, first)
	}
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(first))); err != nil {
		t.Fatal(err)
	}
	if recreated := put("http://a.example/3"); recreated != first {
		t.Fatalf("cut after the deletion went to %s, want %s (re-created)", recreated, first)
	}
	if next := put("http://a.example/4"); next == first {
		t.Errorf("cut after the re-creation went to the re-created object %s, want another", next)
	}
}
