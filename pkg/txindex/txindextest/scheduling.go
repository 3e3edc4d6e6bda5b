package txindextest

// The tests of txindex.Scheduling: Due and DueStats.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// testDue checks Due and DueStats: only terminal records of the crawl whose
// due time has come, earliest first, within limit.
func testDue(t *testing.T, h Harness[scheduler]) {
	x := h.New(t)
	crawl, other := newCrawlID(t), newCrawlID(t)
	base := at(time.Now().Add(-time.Hour)).UTC()
	var all []txindex.Record
	var trs []txindex.Transition
	settle := func(crawlID, u string, due time.Time, to contracts.Status) string {
		r := rec(crawlID, u, contracts.ToBeLoaded, base)
		all = append(all, r)
		st := &txindex.Recrawl{Fetched: base, Status: 200, IntervalMS: due.Sub(base).Milliseconds(), Due: due}
		trs = append(trs, txindex.Transition{Key: r.Key, From: contracts.ToBeLoaded, To: to, Recrawl: st})
		return r.Key
	}
	// Due times base+1m .. base+10m, created in an order unlike due order.
	var wantOrder []string
	keys := map[int]string{}
	for _, m := range []int{7, 2, 9, 1, 5, 10, 3, 8, 4, 6} {
		to := contracts.Indexed
		if m == 4 {
			to = contracts.Failed
		}
		keys[m] = settle(crawl, fmt.Sprintf("http://d.example/%d", m), base.Add(time.Duration(m)*time.Minute), to)
	}
	for m := 1; m <= 10; m++ {
		wantOrder = append(wantOrder, keys[m])
	}
	pending := settle(crawl, "http://d.example/pending", base, contracts.ToBeParsed) // in the pipeline: not due
	settle(other, "http://d.example/1", base, contracts.Indexed)
	mustCreate(t, x, all...)
	ok, err := x.Transition(t.Context(), trs)
	if err != nil || countTrue(ok) != len(trs) {
		t.Fatalf("Transition = %v, %v; want all applied", ok, err)
	}
	keysOf := func(rs []txindex.Record) []string {
		var ks []string
		for _, r := range rs {
			ks = append(ks, r.Key)
		}
		return ks
	}
	cases := []struct {
		before time.Time
		limit  int
		want   []string
	}{
		{base, 100, nil},
		{base.Add(time.Minute), 100, wantOrder[:1]},
		{base.Add(6*time.Minute + time.Second), 100, wantOrder[:6]},
		{base.Add(time.Hour), 3, wantOrder[:3]},
		{base.Add(time.Hour), 100, wantOrder},
	}
	for _, c := range cases {
		got, err := x.Due(t.Context(), crawl, c.before, c.limit)
		if err != nil {
			t.Fatalf("Due(%v, %d) error: %v", c.before.Sub(base), c.limit, err)
		}
		if diff := cmp.Diff(c.want, keysOf(got)); diff != "" {
			t.Errorf("Due(base+%v, %d) keys (-want +got):\n%s", c.before.Sub(base), c.limit, diff)
		}
		for _, r := range got {
			if r.CrawlID != crawl || r.Recrawl == nil || r.NextDue == nil || r.NextDue.After(c.before) || r.Key == pending {
				t.Errorf("Due returned %+v", r)
			}
		}
	}
	due, next, err := x.DueStats(t.Context(), crawl, base.Add(6*time.Minute+time.Second))
	if err != nil || due != 6 || next == nil || !next.Equal(base.Add(time.Minute)) {
		t.Errorf("DueStats(base+6m) = %d, %v, %v; want 6, base+1m, nil", due, next, err)
	}
	// Taking a due record back into the pipeline removes it from both.
	ok, err = x.Transition(t.Context(), []txindex.Transition{{Key: wantOrder[0], From: contracts.Indexed, To: contracts.ToBeLoaded, ResetAttempts: true}})
	if err != nil || !ok[0] {
		t.Fatalf("Transition(due -> to-be-loaded) = %v, %v", ok, err)
	}
	due, next, err = x.DueStats(t.Context(), crawl, base.Add(6*time.Minute+time.Second))
	if err != nil || due != 5 || next == nil || !next.Equal(base.Add(2*time.Minute)) {
		t.Errorf("DueStats after taking one = %d, %v, %v; want 5, base+2m, nil", due, next, err)
	}
	got, err := x.Due(t.Context(), crawl, base.Add(time.Hour), 100)
	if err != nil || len(got) != 9 || got[0].Key != wantOrder[1] {
		t.Errorf("Due after taking one = %d records (first %v), %v; want 9 starting with the 2-minute one", len(got), keysOf(got[:min(1, len(got))]), err)
	}
	// Records created with a recrawl state follow the same rule: a settled
	// one is due, one in the pipeline is not, whatever NextDue the caller
	// passed.
	created := newCrawlID(t)
	settled := rec(created, "http://c.example/settled", contracts.Indexed, base)
	settled.Recrawl = &txindex.Recrawl{Fetched: base, IntervalMS: 60_000, Due: base.Add(time.Minute)}
	inPipeline := rec(created, "http://c.example/pipeline", contracts.ToBeLoaded, base)
	inPipeline.Recrawl = settled.Recrawl
	wrong := base
	inPipeline.NextDue = &wrong
	mustCreate(t, x, settled, inPipeline)
	if got, err := x.Due(t.Context(), created, base.Add(time.Hour), 10); err != nil || len(got) != 1 || got[0].Key != settled.Key {
		t.Errorf("Due of created records = %v, %v; want only the settled one", keysOf(got), err)
	}
	if due, next, err := x.DueStats(t.Context(), newCrawlID(t), base.Add(time.Hour)); err != nil || due != 0 || next != nil {
		t.Errorf("DueStats(unknown crawl) = %d, %v, %v; want 0, nil, nil", due, next, err)
	}
}

// testDueLowered checks that a due record whose depth is lowered, which
// sends it back to the pipeline to be parsed again, leaves the schedule,
// and that a lowering that changes only the depth of a settled record
// that was not parsed keeps it there.
func testDueLowered(t *testing.T, h Harness[scheduler]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	base := at(time.Now().Add(-time.Hour)).UTC()
	st := &txindex.Recrawl{Fetched: base, Status: 200, IntervalMS: 60_000, Due: base.Add(time.Minute)}
	parsed := rec(crawl, "http://l.example/parsed", contracts.ToBeLoaded, base)
	parsed.Depth = 3
	failed := rec(crawl, "http://l.example/failed", contracts.ToBeLoaded, base)
	failed.Depth = 3
	mustCreate(t, x, parsed, failed)
	ok, err := x.Transition(t.Context(), []txindex.Transition{
		{Key: parsed.Key, From: contracts.ToBeLoaded, To: contracts.Indexed, Recrawl: st},
		{Key: failed.Key, From: contracts.ToBeLoaded, To: contracts.Failed, Error: "http 404", Recrawl: st},
	})
	if err != nil || countTrue(ok) != 2 {
		t.Fatalf("Transition = %v, %v; want both applied", ok, err)
	}
	keys := func(rs []txindex.Record) []string {
		var ks []string
		for _, r := range rs {
			ks = append(ks, r.Key)
		}
		slices.Sort(ks)
		return ks
	}
	now := base.Add(time.Hour)
	both := keys([]txindex.Record{parsed, failed})
	if got, err := x.Due(t.Context(), crawl, now, 10); err != nil || !slices.Equal(keys(got), both) {
		t.Fatalf("Due before LowerDepth = %v, %v; want both records", keys(got), err)
	}
	low, err := x.LowerDepth(t.Context(), []txindex.Lowering{{Key: parsed.Key, Depth: 1}, {Key: failed.Key, Depth: 1}})
	if err != nil || len(low) != 2 {
		t.Fatalf("LowerDepth = %d records, %v; want 2", len(low), err)
	}
	// The indexed record goes back to to-be-parsed (txindex.Reparse); the
	// one that failed with a fetch error was never parsed and stays.
	got, err := x.Due(t.Context(), crawl, now, 10)
	if err != nil || !slices.Equal(keys(got), []string{failed.Key}) {
		t.Errorf("Due after LowerDepth = %v, %v; want only the failed record %q", keys(got), err, failed.Key)
	}
	due, next, err := x.DueStats(t.Context(), crawl, now)
	if err != nil || due != 1 || next == nil || !next.Equal(st.Due) {
		t.Errorf("DueStats after LowerDepth = %d, %v, %v; want 1, %v, nil", due, next, err, st.Due)
	}
}
