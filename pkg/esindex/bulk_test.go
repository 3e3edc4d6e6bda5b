package esindex

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// fakeBulk is a stand-in for Elasticsearch that accepts index creation and
// answers each bulk request with the statuses answer returns for its ids.
// Rejections for load cannot be provoked on a real node on demand.
type fakeBulk struct {
	mu       sync.Mutex
	requests [][]string // ids of each bulk request
	answer   func(call int, id string) (int, string)
}

func (f *fakeBulk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Elastic-Product", "Elasticsearch")
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPut {
		fmt.Fprint(w, `{"acknowledged":true}`)
		return
	}
	if !strings.HasSuffix(r.URL.Path, "/_bulk") {
		http.Error(w, `{"error":{"type":"unexpected","reason":"`+r.URL.Path+`"}}`, http.StatusBadRequest)
		return
	}
	var ids []string
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var action map[string]bulkAction
		if err := json.Unmarshal(sc.Bytes(), &action); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for op, a := range action {
			ids = append(ids, a.ID)
			if op != "delete" {
				sc.Scan() // the source
			}
		}
	}
	f.mu.Lock()
	call := len(f.requests)
	f.requests = append(f.requests, ids)
	f.mu.Unlock()
	var items []string
	for _, id := range ids {
		status, errType := f.answer(call, id)
		item := fmt.Sprintf(`{"status":%d`, status)
		if errType != "" {
			item += fmt.Sprintf(`,"error":{"type":%q,"reason":"test"}`, errType)
		}
		items = append(items, `{"create":`+item+`}}`)
	}
	fmt.Fprintf(w, `{"errors":true,"items":[%s]}`, strings.Join(items, ","))
}

func fakeClient(t *testing.T, f *fakeBulk) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := Open(t.Context(), Options{URL: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Open(fake) error: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func fakeRecords(ids ...string) []txindex.Record {
	var recs []txindex.Record
	for _, id := range ids {
		recs = append(recs, txindex.Record{Key: id, CrawlID: "c", URL: "http://x/" + id, Status: contracts.ToBeLoaded,
			StatusTime: time.Unix(0, 0), CreatedAt: time.Unix(0, 0)})
	}
	return recs
}

func TestBulkRetriesRejectedItems(t *testing.T) {
	f := &fakeBulk{answer: func(call int, id string) (int, string) {
		switch {
		case id == "b" && call < 2:
			return http.StatusTooManyRequests, "es_rejected_execution_exception"
		case id == "c":
			return http.StatusConflict, "version_conflict_engine_exception"
		}
		return http.StatusCreated, ""
	}}
	x := fakeClient(t, f).TxIndex()
	created, err := x.Create(t.Context(), fakeRecords("a", "b", "c", "d"))
	if err != nil {
		t.Fatalf("Create error: %v", err)
	}
	if diff := cmp.Diff([]bool{true, true, false, true}, created); diff != "" {
		t.Errorf("Create created (-want +got):\n%s", diff)
	}
	want := [][]string{{"a", "b", "c", "d"}, {"b"}, {"b"}}
	if diff := cmp.Diff(want, f.requests); diff != "" {
		t.Errorf("bulk requests' ids (-want +got):\n%s", diff)
	}
}

func TestBulkItemErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		typ    string
	}{
		{"mapping error", http.StatusBadRequest, "document_parsing_exception"},
		{"rejected for good", http.StatusTooManyRequests, "es_rejected_execution_exception"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBulk{answer: func(call int, id string) (int, string) {
				if id == "b" {
					return tc.status, tc.typ
				}
				return http.StatusCreated, ""
			}}
			x := fakeClient(t, f).TxIndex()
			created, err := x.Create(t.Context(), fakeRecords("a", "b"))
			if err == nil || !strings.Contains(err.Error(), tc.typ) {
				t.Errorf("Create with item %d %s = %v, %v, want an error naming %s", tc.status, tc.typ, created, err, tc.typ)
			}
		})
	}
}

func TestBulkSplitsLargeBatches(t *testing.T) {
	f := &fakeBulk{answer: func(int, string) (int, string) { return http.StatusCreated, "" }}
	x := fakeClient(t, f).TxIndex()
	// Records of about 4 kB each: 3000 of them need two requests.
	recs := fakeRecords()
	for i := range 3000 {
		r := fakeRecords(fmt.Sprint(i))[0]
		r.Referrer = strings.Repeat("r", 4000)
		recs = append(recs, r)
	}
	created, err := x.Create(t.Context(), recs)
	if err != nil {
		t.Fatalf("Create error: %v", err)
	}
	for i, c := range created {
		if !c {
			t.Fatalf("Create(%d) = not created", i)
		}
	}
	if len(f.requests) < 2 {
		t.Errorf("Create of %d large records sent %d bulk requests, want several", len(recs), len(f.requests))
	}
	var got []string
	for _, ids := range f.requests {
		got = append(got, ids...)
	}
	for i, id := range got {
		if id != fmt.Sprint(i) {
			t.Fatalf("operation %d of all requests is %q, want %q (in order, once each)", i, id, fmt.Sprint(i))
		}
	}
	if len(got) != len(recs) {
		t.Errorf("bulk requests carried %d operations, want %d", len(got), len(recs))
	}
}
