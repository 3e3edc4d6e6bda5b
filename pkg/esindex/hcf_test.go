package esindex

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/pkg/hcf/hcftest"
)

// newTestHCF returns an HCF on indices of a fresh name, deleted when t ends.
func newTestHCF(t *testing.T, c *Client, now func() time.Time) *HCF {
	t.Helper()
	h := c.newHCF(testPrefix()+"-hcf", now)
	t.Cleanup(func() {
		if err := h.DeleteIndices(context.Background()); err != nil {
			t.Errorf("delete hcf indices: %v", err)
		}
	})
	return h
}

func TestHCFConformance(t *testing.T) {
	for _, refresh := range []Refresh{RefreshOnRead, RefreshOnWrite} {
		t.Run(string(refresh), func(t *testing.T) {
			c := open(t, refresh)
			hcftest.Run(t, hcftest.Harness{
				New: func(t *testing.T, now func() time.Time) hcf.Store { return newTestHCF(t, c, now) },
				Reopen: func(t *testing.T, s hcf.Store, now func() time.Time) hcf.Store {
					old := s.(*HCF)
					return c.newHCF(old.fpIndex[:len(old.fpIndex)-len("-fingerprints")], now)
				},
			})
		})
	}
}

func TestHCFIndexName(t *testing.T) {
	c := open(t, RefreshOnRead)
	tx, _, _ := c.IndexNames()
	prefix := tx[:len(tx)-len("-transactions")]
	if got := c.HCF().IndexName(); got != prefix+"-hcf-fingerprints" {
		t.Errorf("HCF().IndexName() = %q, want %q", got, prefix+"-hcf-fingerprints")
	}
}

// TestHCFMigrateBatchesIndex opens a store on the two indices of earlier
// versions, fingerprints in one and batches in the other: the first call
// moves the batches into the fingerprints index and deletes the other.
func TestHCFMigrateBatchesIndex(t *testing.T) {
	for _, refresh := range []Refresh{RefreshOnRead, RefreshOnWrite} {
		t.Run(string(refresh), func(t *testing.T) {
			ctx := t.Context()
			c := open(t, refresh)
			h := newTestHCF(t, c, hcftest.Clock())
			sl := hcf.Slot{Project: "p", Frontier: "f", Name: "example.com"}
			other := hcf.Slot{Project: "p", Frontier: "f", Name: "example.org"}
			legacyFP := map[string]any{"project": keyword, "frontier": keyword, "slot": keyword, "fp": keyword, "fdata": storedJSON}
			if err := h.ensureIndex(ctx, h.fpIndex, legacyFP); err != nil {
				t.Fatal(err)
			}
			if err := h.ensureIndex(ctx, h.bIndex, hcfBatchMapping); err != nil {
				t.Fatal(err)
			}
			var ops []bulkOp
			for _, f := range []struct {
				slot      hcf.Slot
				fp, fdata string
			}{{sl, "a", `{"f":1}`}, {sl, "b", ""}, {sl, "c", ""}, {sl, "gone", ""}, {other, "x", ""}} {
				doc := newFPDoc(f.slot, f.fp, []byte(f.fdata))
				src, _ := json.Marshal(map[string]any{"project": doc.Project, "frontier": doc.Frontier, "slot": doc.Slot, "fp": doc.FP, "fdata": doc.FData})
				ops = append(ops, bulkOp{op: "create", action: bulkAction{Index: h.fpIndex, ID: fpDocID(f.slot, f.fp)}, source: src})
			}
			for _, b := range []struct {
				slot hcf.Slot
				id   string
				reqs string
			}{
				{sl, "00013967d8af7b0001", `[["a",{"q":1}],["b",null]]`},
				{sl, "01013967d8af7e0002", `[["c",null]]`},
				{other, "00013967d8af7b0001", `[["x",null]]`},
			} {
				src, _ := json.Marshal(hcfBatchDoc{Project: b.slot.Project, Frontier: b.slot.Frontier, Slot: b.slot.Name,
					BID: b.id, MsSeq: b.id[2:], N: 1, Requests: b.reqs})
				ops = append(ops, bulkOp{op: "create", action: bulkAction{Index: h.bIndex, ID: batchDocID(b.slot, b.id)}, source: src})
			}
			items, err := c.bulk(ctx, ops)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if it.err() != nil {
					t.Fatalf("write legacy document: %v", it.err())
				}
			}

			h = c.newHCF(h.fpIndex[:len(h.fpIndex)-len("-fingerprints")], hcftest.Clock())
			want := []hcf.Batch{
				{ID: "00013967d8af7b0001", Requests: []hcf.Queued{{FP: "a", QData: json.RawMessage(`{"q":1}`)}, {FP: "b"}}},
				{ID: "01013967d8af7e0002", Requests: []hcf.Queued{{FP: "c"}}},
			}
			if diff := cmp.Diff(want, readBatches(t, h, sl), cmpRawJSON); diff != "" {
				t.Errorf("Batches after the migration (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]hcf.Batch{{ID: "00013967d8af7b0001", Requests: []hcf.Queued{{FP: "x"}}}}, readBatches(t, h, other), cmpRawJSON); diff != "" {
				t.Errorf("Batches of the other slot after the migration (-want +got):\n%s", diff)
			}
			var fps []hcf.Fingerprint
			if err := h.Fingerprints(ctx, sl, func(f hcf.Fingerprint) error { fps = append(fps, f); return nil }); err != nil {
				t.Fatal(err)
			}
			wantFP := []hcf.Fingerprint{{FP: "a", FData: json.RawMessage(`{"f":1}`)}, {FP: "b"}, {FP: "c"}, {FP: "gone"}}
			if diff := cmp.Diff(wantFP, fps, cmpRawJSON); diff != "" {
				t.Errorf("Fingerprints after the migration (-want +got):\n%s", diff)
			}
			res, err := esapi.IndicesExistsRequest{Index: []string{h.bIndex}}.Do(ctx, c.es)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("index %s after the migration: status %d, want 404", h.bIndex, res.StatusCode)
			}
			// Seen stays seen; new batches come after the migrated ones.
			if n, err := h.Add(ctx, sl, []hcf.Request{{FP: "gone"}, {FP: "a"}, {FP: "d", P: 1}}); err != nil || n != 1 {
				t.Fatalf("Add after the migration = %d, %v, want 1", n, err)
			}
			if err := h.DeleteBatches(ctx, sl, []string{"00013967d8af7b0001"}); err != nil {
				t.Fatal(err)
			}
			got := readBatches(t, h, sl)
			if len(got) != 2 || got[0].ID != "01013967d8af7e0002" || got[1].ID <= got[0].ID || got[1].Requests[0].FP != "d" {
				t.Errorf("Batches after Add and DeleteBatches = %v, want the batch of c, then that of d", got)
			}
		})
	}
}

var cmpRawJSON = cmp.Comparer(func(a, b json.RawMessage) bool { return string(a) == string(b) })

// readBatches returns all the slot's batches.
func readBatches(t *testing.T, h *HCF, sl hcf.Slot) []hcf.Batch {
	t.Helper()
	var out []hcf.Batch
	if err := h.Batches(t.Context(), sl, 0, func(b hcf.Batch) error { out = append(out, b); return nil }); err != nil {
		t.Fatalf("Batches(%v): %v", sl, err)
	}
	return out
}

// TestHCFBatchesAcrossPages reads batches that straddle the pages of the
// index's searches, with and without mincount, and a call whose first
// requests were seen before.
func TestHCFBatchesAcrossPages(t *testing.T) {
	ctx := t.Context()
	c := open(t, RefreshOnRead)
	h := newTestHCF(t, c, hcftest.Clock())
	sl := hcf.Slot{Project: "p", Frontier: "f", Name: "pages.example"}
	reqs := func(prefix string, from, n int) []hcf.Request {
		out := make([]hcf.Request, n)
		for i := range out {
			out[i] = hcf.Request{FP: fmt.Sprintf("%s%05d", prefix, from+i), QData: json.RawMessage(fmt.Sprint(from + i))}
		}
		return out
	}
	add := func(want int, rs []hcf.Request) {
		t.Helper()
		if n, err := h.Add(ctx, sl, rs); err != nil || n != want {
			t.Fatalf("Add(%d requests) = %d, %v, want %d", len(rs), n, err, want)
		}
	}
	add(30, reqs("a", 0, 30))
	add(hcfBatchPage+50, reqs("b", 0, hcfBatchPage+50))
	// 100 seen, 50 new: one batch of 50, the call's second.
	add(50, append(reqs("b", 0, 100), reqs("c", 0, 50)...))
	ten := slices.Repeat([]int{hcf.MaxBatch}, hcfBatchPage/hcf.MaxBatch)
	all := append(append(append([]int{30}, ten...), 50), 50)
	for _, tc := range []struct {
		mincount int
		want     []int
	}{
		{0, all},
		{30 + hcfBatchPage, all[:11]},
		{30 + hcfBatchPage + 1, all[:12]},
		{hcfBatchPage * 2, all},
	} {
		var sizes []int
		var fps []string
		var qdata []string
		err := h.Batches(ctx, sl, tc.mincount, func(b hcf.Batch) error {
			sizes = append(sizes, len(b.Requests))
			for _, q := range b.Requests {
				fps = append(fps, q.FP)
				qdata = append(qdata, string(q.QData))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, sizes); diff != "" {
			t.Errorf("Batches(mincount %d) sizes (-want +got):\n%s", tc.mincount, diff)
		}
		var want []string
		for _, r := range append(append(reqs("a", 0, 30), reqs("b", 0, hcfBatchPage+50)...), reqs("c", 0, 50)...) {
			want = append(want, r.FP+"="+string(r.QData))
		}
		var got []string
		for i := range fps {
			got = append(got, fps[i]+"="+qdata[i])
		}
		if diff := cmp.Diff(want[:len(got)], got); diff != "" {
			t.Errorf("Batches(mincount %d) requests in read order (-want +got):\n%s", tc.mincount, diff)
		}
	}
	bs := readBatches(t, h, sl)
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	if err := h.DeleteBatches(ctx, sl, ids); err != nil {
		t.Fatal(err)
	}
	if got := readBatches(t, h, sl); len(got) != 0 {
		t.Errorf("Batches after deleting all = %d batches, want none", len(got))
	}
	n := 0
	if err := h.Fingerprints(ctx, sl, func(hcf.Fingerprint) error { n++; return nil }); err != nil || n != 30+hcfBatchPage+50+50 {
		t.Errorf("Fingerprints after deleting all batches = %d, %v, want %d", n, err, 30+hcfBatchPage+50+50)
	}
}
