package grid

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// countingFront serves a generated web on another loopback address
// (127.0.0.2, same port) and counts the requests of every URL, so that a
// test sees each fetch the system made, duplicates included.
type countingFront struct {
	resolve string
	mu      sync.Mutex
	n       map[string]int
}

func newCountingFront(t *testing.T, w *websim.Web) *countingFront {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(w.Port())))
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	f := &countingFront{resolve: "*." + websim.WebZone + "=127.0.0.2", n: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.n["http://"+r.Host+r.URL.RequestURI()]++
		f.mu.Unlock()
		w.ServeHTTP(rw, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

// counts returns the number of requests per URL so far.
func (f *countingFront) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.n))
	for k, v := range f.n {
		out[k] = v
	}
	return out
}

// fetchedRecords counts the records of st past to-be-loaded: progress of the
// loaders, which the indexer may trail by far on a busy machine.
func fetchedRecords(st contracts.CrawlStatus) int64 {
	var n int64
	for status, c := range st.Counts {
		if status != contracts.ToBeLoaded {
			n += c
		}
	}
	return n
}

// crawlSnapshot is the durable state of a crawl in a stopped grid's data
// directory.
type crawlSnapshot struct {
	id     string
	status map[string]contracts.Status // by URL
	key    map[string]string           // record key by URL
	writes map[string]int64            // document writes by record key
	// queuedDocs are the documents of index contracts not yet acked: the
	// indexer may store them again.
	queuedDocs map[string]bool
}

func (s crawlSnapshot) crawlID() string { return s.id }

// snapshotCrawl opens the data directory of a stopped grid and reads every
// record of crawlID, the write count of its document, and the documents of
// unsettled index contracts (read without settling them, so that they are
// delivered again as they would be).
func snapshotCrawl(t *testing.T, data, resolve, crawlID string) crawlSnapshot {
	t.Helper()
	g, err := Open(testConfig(t, data, resolve), discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Backends.Close()
	ctx := context.Background()
	s := crawlSnapshot{id: crawlID, status: map[string]contracts.Status{}, key: map[string]string{}, writes: map[string]int64{}, queuedDocs: map[string]bool{}}
	for _, r := range crawlRecords(t, g.Backends.Tx, crawlID, "") {
		s.status[r.URL], s.key[r.URL] = r.Status, r.Key
		n, err := g.Backends.Search.Writes(ctx, r.Key)
		if err != nil && !errors.Is(err, search.ErrNotFound) {
			t.Fatal(err)
		}
		s.writes[r.Key] = n
	}
	peek, stop := context.WithCancel(ctx)
	ds, err := g.Backends.Queue.Consume(peek, contracts.QueueIndex, queue.ConsumeOptions{Prefetch: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for idle := false; !idle; {
		select {
		case d := <-ds:
			var c contracts.IndexContract
			if err := json.Unmarshal(d.Body(), &c); err == nil {
				for _, doc := range c.Docs {
					s.queuedDocs[doc.ID] = true
				}
			}
		case <-time.After(500 * time.Millisecond):
			idle = true
		}
	}
	stop() // unsettled: the deliveries go back to the queue
	for range ds {
	}
	return s
}
