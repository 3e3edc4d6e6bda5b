package esindex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
)

// errDied is what a crashTransport answers once its process has died.
var errDied = errors.New("process died")

// crashTransport passes requests to Elasticsearch until the bulk request
// numbered at (from 1, counted once armed), where the process dies: before
// sending it, or after Elasticsearch answered it but before the answer is
// read. Every request after the death fails too: a dead process sends
// nothing, rollbacks included.
type crashTransport struct {
	at    int
	after bool // die after Elasticsearch applied the bulk request

	mu    sync.Mutex
	armed bool
	bulks int
	dead  bool
}

func (c *crashTransport) arm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

func (c *crashTransport) died() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *crashTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	dies := false
	switch {
	case c.dead:
		c.mu.Unlock()
		return nil, errDied
	case c.armed && strings.HasSuffix(req.URL.Path, "/_bulk"):
		c.bulks++
		dies = c.bulks == c.at
	}
	if dies {
		c.dead = true
	}
	c.mu.Unlock()
	if dies && !c.after {
		return nil, errDied
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !dies {
		return res, err
	}
	// Let Elasticsearch finish the request, then lose its answer.
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return nil, errDied
}

// TestHCFAddCrash kills MCP at every bulk request of an Add, before
// Elasticsearch gets it and after Elasticsearch applied it, then restarts
// it (a new Client and store on the same indices): every request of the
// POST must be seen only if it is queued, and the client's replay of the
// POST must leave each request queued exactly once.
func TestHCFAddCrash(t *testing.T) {
	url := esURL(t)
	type crash struct {
		at    int
		after bool
	}
	var tests []crash
	for at := 1; at <= 3; at++ {
		tests = append(tests, crash{at, false}, crash{at, true})
	}
	for _, tc := range tests {
		when := "before"
		if tc.after {
			when = "after"
		}
		t.Run(fmt.Sprintf("bulk%d-%s", tc.at, when), func(t *testing.T) {
			ctx := t.Context()
			prefix := testPrefix()
			tr := &crashTransport{at: tc.at, after: tc.after}
			dying := openPrefix(t, Options{URL: url, Prefix: prefix, Refresh: RefreshOnRead, Transport: tr}, false)
			h := dying.HCF()
			sl := hcf.Slot{Project: "crash", Frontier: "test", Name: "example.com"}

			// Fingerprints seen before the POST, one of them still queued.
			if _, err := h.Add(ctx, sl, []hcf.Request{{FP: "old0"}, {FP: "old1", P: 1}}); err != nil {
				t.Fatalf("Add before the crash: %v", err)
			}
			// A POST of three batches of priority 0 and one of priority 1,
			// with the seen fingerprints among them.
			var post []hcf.Request
			for i := range 250 {
				post = append(post, hcf.Request{FP: fmt.Sprintf("u%03d", i), QData: []byte(fmt.Sprintf(`{"i":%d}`, i))})
				if i == 120 {
					post = append(post, hcf.Request{FP: "old0"}, hcf.Request{FP: "old1", P: 1})
				}
			}
			post = append(post, hcf.Request{FP: "p1", P: 1, FData: []byte(`"f"`)})
			tr.arm()
			_, addErr := h.Add(ctx, sl, post)
			if tr.died() != (addErr != nil) {
				t.Fatalf("Add with a crash at bulk %d: died %v, error %v", tc.at, tr.died(), addErr)
			}

			// The restart.
			c := openPrefix(t, Options{URL: url, Prefix: prefix, Refresh: RefreshOnRead}, true)
			h = c.HCF()
			t.Cleanup(func() {
				if err := h.DeleteIndices(context.Background()); err != nil {
					t.Errorf("delete hcf indices: %v", err)
				}
			})
			seen, queued := readSlot(t, h, sl)
			wantNew := map[string]bool{}
			for _, r := range post {
				if !strings.HasPrefix(r.FP, "old") {
					wantNew[r.FP] = true
				}
			}
			var lost, twice []string
			for fp := range wantNew {
				if seen[fp] && queued[fp] == 0 {
					lost = append(lost, fp)
				}
				if queued[fp] > 1 || queued[fp] == 1 && !seen[fp] {
					twice = append(twice, fp)
				}
			}
			if len(lost) > 0 || len(twice) > 0 {
				slices.Sort(lost)
				slices.Sort(twice)
				t.Errorf("after the restart, %d requests seen but not queued (%q), %d queued more than once or unseen (%q), want none",
					len(lost), head(lost), len(twice), head(twice))
			}
			pending := 0
			for fp := range wantNew {
				if !seen[fp] {
					pending++
				}
			}

			// The client replays the POST that failed; twice, to be sure.
			for replay := 1; replay <= 2; replay++ {
				n, err := h.Add(ctx, sl, post)
				if err != nil {
					t.Fatalf("replay %d: %v", replay, err)
				}
				if n != pending {
					t.Errorf("replay %d enqueued %d, want %d (the requests not seen yet)", replay, n, pending)
				}
				pending = 0
			}
			_, queued = readSlot(t, h, sl)
			var bad []string
			for fp := range wantNew {
				if queued[fp] != 1 {
					bad = append(bad, fmt.Sprintf("%s×%d", fp, queued[fp]))
				}
			}
			slices.Sort(bad)
			if len(bad) > 0 {
				t.Errorf("after the replays, %d requests not queued exactly once: %q", len(bad), head(bad))
			}
			if diff := cmp.Diff(map[string]int{"old0": 1, "old1": 1}, map[string]int{"old0": queued["old0"], "old1": queued["old1"]}); diff != "" {
				t.Errorf("requests queued before the POST (-want +got):\n%s", diff)
			}
		})
	}
}

// readSlot returns the slot's fingerprint set and how often each
// fingerprint is queued.
func readSlot(t *testing.T, h *HCF, sl hcf.Slot) (seen map[string]bool, queued map[string]int) {
	t.Helper()
	seen, queued = map[string]bool{}, map[string]int{}
	if err := h.Fingerprints(t.Context(), sl, func(f hcf.Fingerprint) error { seen[f.FP] = true; return nil }); err != nil {
		t.Fatalf("Fingerprints: %v", err)
	}
	err := h.Batches(t.Context(), sl, 0, func(b hcf.Batch) error {
		if len(b.Requests) > hcf.MaxBatch {
			t.Errorf("batch %s holds %d requests, more than %d", b.ID, len(b.Requests), hcf.MaxBatch)
		}
		for _, q := range b.Requests {
			queued[q.FP]++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Batches: %v", err)
	}
	return seen, queued
}

// head returns the first few of xs, for messages.
func head(xs []string) []string { return xs[:min(len(xs), 5)] }
