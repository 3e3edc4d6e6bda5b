// Package digeststest is the conformance suite of digests.Index: every
// implementation runs Run.
package digeststest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/digests"
)

// Harness makes the indices of the suite.
type Harness struct {
	// New returns an empty index for each subtest.
	New func(t *testing.T) digests.Index
	// Settle, when set, makes the entries added so far visible to Lookup
	// (an index whose Lookup reads a refreshed view).
	Settle func(t *testing.T, x digests.Index)
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	newIndex := h.New
	settle := func(t *testing.T, x digests.Index) {
		t.Helper()
		if h.Settle != nil {
			h.Settle(t, x)
		}
	}
	t.Run("LookupEmpty", func(t *testing.T) {
		x := newIndex(t)
		got, err := x.Lookup(t.Context(), []digests.Ref{{Scope: "collection:a", Digest: "sha1:AAAA"}})
		if err != nil || len(got) != 0 {
			t.Fatalf("Lookup on an empty index = %v, %v; want none", got, err)
		}
		if n, err := x.Count(t.Context()); err != nil || n != 0 {
			t.Fatalf("Count on an empty index = %d, %v; want 0", n, err)
		}
	})
	t.Run("AddLookup", func(t *testing.T) {
		x := newIndex(t)
		ctx := t.Context()
		a, b := entry("collection:a", "sha1:AAAA", 1), entry("collection:a", "sha1:BBBB", 2)
		other := entry("crawl:c1", "sha1:AAAA", 3) // same digest, another scope
		added := mustAdd(t, x, a, b, other)
		if diff := cmp.Diff([]bool{true, true, true}, added); diff != "" {
			t.Fatalf("Add added (-want +got):\n%s", diff)
		}
		settle(t, x)
		got, err := x.Lookup(ctx, []digests.Ref{a.Ref, b.Ref, other.Ref, {Scope: "collection:a", Digest: "sha1:CCCC"}, {Scope: "collection:b", Digest: "sha1:AAAA"}})
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		want := map[digests.Ref]digests.Entry{a.Ref: a, b.Ref: b, other.Ref: other}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Lookup (-want +got):\n%s", diff)
		}
		if n, err := x.Count(ctx); err != nil || n != 3 {
			t.Fatalf("Count = %d, %v; want 3", n, err)
		}
	})
	t.Run("FirstWriterWins", func(t *testing.T) {
		x := newIndex(t)
		first, second, third := entry("collection:a", "sha1:AAAA", 1), entry("collection:a", "sha1:AAAA", 2), entry("collection:a", "sha1:AAAA", 3)
		mustAdd(t, x, first)
		if added := mustAdd(t, x, second); added[0] {
			t.Fatalf("Add of a Ref that has an entry added it")
		}
		// Two of one Ref in one call: the first.
		n1, n2 := entry("collection:a", "sha1:NNNN", 4), entry("collection:a", "sha1:NNNN", 5)
		if diff := cmp.Diff([]bool{false, true, false}, mustAdd(t, x, third, n1, n2)); diff != "" {
			t.Fatalf("Add added (-want +got):\n%s", diff)
		}
		settle(t, x)
		got, err := x.Lookup(t.Context(), []digests.Ref{first.Ref, n1.Ref})
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		if diff := cmp.Diff(map[digests.Ref]digests.Entry{first.Ref: first, n1.Ref: n1}, got); diff != "" {
			t.Fatalf("Lookup after competing adds (-want +got):\n%s", diff)
		}
	})
	t.Run("ConcurrentAdds", func(t *testing.T) {
		x := newIndex(t)
		const writers = 8
		var wg sync.WaitGroup
		wins := make([]bool, writers)
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				added, err := x.Add(t.Context(), []digests.Entry{entry("collection:a", "sha1:RACE", i+1)})
				errs[i] = err
				wins[i] = err == nil && added[0]
			})
		}
		wg.Wait()
		winner := -1
		for i := range writers {
			if errs[i] != nil {
				t.Fatalf("Add %d: %v", i, errs[i])
			}
			if wins[i] {
				if winner >= 0 {
					t.Fatalf("Add %d and %d both added one Ref", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("no concurrent Add added the Ref")
		}
		want := entry("collection:a", "sha1:RACE", winner+1)
		settle(t, x)
		got, err := x.Lookup(t.Context(), []digests.Ref{want.Ref})
		if err != nil || got[want.Ref].RecordID != want.RecordID {
			t.Fatalf("Lookup after the race = %v, %v; want the winner's %s", got, err, want.RecordID)
		}
	})
	t.Run("Remove", func(t *testing.T) {
		x := newIndex(t)
		ctx := t.Context()
		old, fresh := entry("collection:a", "sha1:AAAA", 1), entry("collection:a", "sha1:AAAA", 2)
		keep := entry("collection:a", "sha1:KEEP", 3)
		mustAdd(t, x, old, keep)
		settle(t, x)
		// Not the entry's record: nothing is removed.
		if err := x.Remove(ctx, []digests.Entry{fresh, entry("collection:a", "sha1:NONE", 9)}); err != nil {
			t.Fatalf("Remove of entries that are not there: %v", err)
		}
		if got, _ := x.Lookup(ctx, []digests.Ref{old.Ref}); got[old.Ref] != old {
			t.Fatalf("Remove of another record's entry removed %v", old)
		}
		if err := x.Remove(ctx, []digests.Entry{old}); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		settle(t, x)
		got, err := x.Lookup(ctx, []digests.Ref{old.Ref, keep.Ref})
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		if diff := cmp.Diff(map[digests.Ref]digests.Entry{keep.Ref: keep}, got); diff != "" {
			t.Fatalf("Lookup after Remove (-want +got):\n%s", diff)
		}
		if n, err := x.Count(ctx); err != nil || n != 1 {
			t.Fatalf("Count after Remove = %d, %v; want 1", n, err)
		}
		if added := mustAdd(t, x, fresh); !added[0] {
			t.Fatalf("Add after Remove did not add")
		}
		settle(t, x)
		if got, _ := x.Lookup(ctx, []digests.Ref{fresh.Ref}); got[fresh.Ref] != fresh {
			t.Fatalf("Lookup after Remove and Add = %v, want %v", got[fresh.Ref], fresh)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		x := newIndex(t)
		ctx := t.Context()
		good := entry("collection:a", "sha1:GOOD", 1)
		bad := entry("collection:a", "", 2)
		if _, err := x.Add(ctx, []digests.Entry{good, bad}); !errors.Is(err, digests.ErrInvalid) {
			t.Fatalf("Add with an entry without digest = %v, want ErrInvalid", err)
		}
		if got, err := x.Lookup(ctx, []digests.Ref{good.Ref, {}, {Scope: string(make([]byte, 600)), Digest: "x"}}); err != nil || len(got) != 0 {
			t.Fatalf("Lookup after a refused Add, and of invalid refs = %v, %v; want none", got, err)
		}
	})
	t.Run("Many", func(t *testing.T) {
		x := newIndex(t)
		ctx := t.Context()
		const n = 2500 // more than one request of some backends
		es := make([]digests.Entry, n)
		refs := make([]digests.Ref, n)
		for i := range es {
			es[i] = entry("collection:big", fmt.Sprintf("sha1:%08d", i), i+1)
			refs[i] = es[i].Ref
		}
		for i, ok := range mustAdd(t, x, es...) {
			if !ok {
				t.Fatalf("Add of %d new entries did not add entry %d", n, i)
			}
		}
		settle(t, x)
		got, err := x.Lookup(ctx, refs)
		if err != nil || len(got) != n {
			t.Fatalf("Lookup of %d entries found %d, %v", n, len(got), err)
		}
		if c, err := x.Count(ctx); err != nil || c != n {
			t.Fatalf("Count = %d, %v; want %d", c, err, n)
		}
	})
}

// entry returns an entry of scope and digest whose other fields derive
// from i.
func entry(scope, digest string, i int) digests.Entry {
	return digests.Entry{
		Ref:      digests.Ref{Scope: scope, Digest: digest},
		URI:      fmt.Sprintf("https://example.org/page-%d.html", i),
		Date:     time.Date(2026, 11, 1, 12, 0, i%60, 123456000, time.UTC),
		RecordID: fmt.Sprintf("<urn:uuid:00000000-0000-4000-8000-%012d>", i),
		Key:      fmt.Sprintf("warc/2026/11/01/gridcrawl-%d.warc.gz", i%7),
		Offset:   int64(i) * 1000,
		Length:   int64(500 + i),
	}
}

func mustAdd(t *testing.T, x digests.Index, es ...digests.Entry) []bool {
	t.Helper()
	added, err := x.Add(context.Background(), es)
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	if len(added) != len(es) {
		t.Fatalf("Add of %d entries reported %d", len(es), len(added))
	}
	return added
}
