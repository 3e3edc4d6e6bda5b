package crawler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestSpanRuns: the records of a contract's pages are read in runs of
// nearby small records; a record near the body cap is never part of a run
// (it is streamed alone, not held compressed besides its block), nor is a
// record alone in its run.
func TestSpanRuns(t *testing.T) {
	const k = 1 << 10
	ref := func(off, n int64) contracts.AssetRef { return contracts.AssetRef{Key: "seg", Offset: off, Length: n} }
	tests := []struct {
		name string
		refs []contracts.AssetRef
		want []spanRun
	}{
		{"adjacent, any order", []contracts.AssetRef{ref(20*k, 10*k), ref(0, 10*k), ref(10*k, 10*k)}, []spanRun{{0, 30 * k}}},
		{"one record", []contracts.AssetRef{ref(0, 10*k)}, nil},
		{"a large record between small ones", []contracts.AssetRef{ref(0, 10*k), ref(10*k, 10*k), ref(20*k, 3<<20), ref(20*k+3<<20, 10*k), ref(30*k+3<<20, 10*k)},
			[]spanRun{{0, 20 * k}, {20*k + 3<<20, 40*k + 3<<20}}},
		{"a large record and one small one beside it", []contracts.AssetRef{ref(0, 10*k), ref(10*k, 3<<20)}, nil},
		{"a gap of other records", []contracts.AssetRef{ref(0, 10*k), ref(10*k+maxSpanGap, 10*k)}, []spanRun{{0, 20*k + maxSpanGap}}},
		{"a wider gap", []contracts.AssetRef{ref(0, 10*k), ref(10*k, 10*k), ref(20*k+maxSpanGap+1, 10*k)}, []spanRun{{0, 20 * k}}},
		{"the size bound", []contracts.AssetRef{ref(0, maxSpanRecord), ref(maxSpanRecord, maxSpanRecord), ref(maxSpanBytes-10*k, 20*k), ref(maxSpanBytes+10*k, 10*k)},
			[]spanRun{{0, 2 * maxSpanRecord}, {maxSpanBytes - 10*k, maxSpanBytes + 20*k}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, spanRuns(tc.refs), cmp.AllowUnexported(spanRun{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("spanRuns(%v) (-want +got):\n%s", tc.refs, diff)
			}
		})
	}
}
