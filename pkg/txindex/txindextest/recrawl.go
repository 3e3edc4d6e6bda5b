package txindextest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// testRecrawlFields checks the rule of txindex.Apply for continuous crawls:
// a transition's recrawl state replaces the record's, NextDue is its Due
// while the record is terminal and nil in the pipeline, and ResetAttempts
// and ClearError do what they say.
func testRecrawlFields(t *testing.T, h Harness) {
	x := h.New(t)
	crawl := newCrawlID(t)
	now := time.Now()
	r := rec(crawl, "http://a.example/page", contracts.ToBeLoaded, now)
	mustCreate(t, x, r)
	fetched := at(now.Add(-time.Minute)).UTC()
	state := &txindex.Recrawl{
		Fetched: fetched, Status: 200, IntervalMS: 3_600_000, Due: fetched.Add(time.Hour),
		ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT", Digest: "sha1:ABC",
		RecordID: "<urn:uuid:1>", Stored: fetched, Changes: 2, Revisits: 3,
	}
	steps := []struct {
		tr      txindex.Transition
		wantDue *time.Time
	}{
		{txindex.Transition{Key: r.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed, Recrawl: state, Error: "http 503", AddAttempt: true}, nil},
		{txindex.Transition{Key: r.Key, From: contracts.ToBeParsed, To: contracts.Indexed}, &state.Due},
		{txindex.Transition{Key: r.Key, From: contracts.Indexed, To: contracts.ToBeLoaded, ResetAttempts: true}, nil},
		{txindex.Transition{Key: r.Key, From: contracts.ToBeLoaded, To: contracts.Indexed, ClearError: true}, &state.Due},
	}
	for i, s := range steps {
		ok, err := x.Transition(t.Context(), []txindex.Transition{s.tr})
		if err != nil || !slices.Equal(ok, []bool{true}) {
			t.Fatalf("step %d: Transition(%s -> %s) = %v, %v; want applied", i, s.tr.From, s.tr.To, ok, err)
		}
		got := mustGet(t, x, r.Key)
		if (got.NextDue == nil) != (s.wantDue == nil) || (got.NextDue != nil && !got.NextDue.Equal(*s.wantDue)) {
			t.Errorf("step %d (%s): NextDue = %v, want %v", i, s.tr.To, got.NextDue, s.wantDue)
		}
		if diff := cmp.Diff(state, got.Recrawl, cmpTime); diff != "" {
			t.Errorf("step %d: Recrawl (-want +got):\n%s", i, diff)
		}
		switch i {
		case 1:
			if got.Attempts != 1 || got.Error != "http 503" {
				t.Errorf("step 1: attempts %d, error %q; want 1, \"http 503\"", got.Attempts, got.Error)
			}
		case 3:
			if got.Attempts != 0 || got.Error != "" {
				t.Errorf("step 3: attempts %d, error %q; want 0 (reset), \"\" (cleared)", got.Attempts, got.Error)
			}
		}
	}
	// A record without recrawl state is never due.
	plain := rec(crawl, "http://a.example/plain", contracts.ToBeLoaded, now)
	mustCreate(t, x, plain)
	if _, err := x.Transition(t.Context(), []txindex.Transition{{Key: plain.Key, From: contracts.ToBeLoaded, To: contracts.Failed, Error: "http 404"}}); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, x, plain.Key); got.NextDue != nil || got.Recrawl != nil {
		t.Errorf("one-shot record: NextDue %v, Recrawl %+v; want nil, nil", got.NextDue, got.Recrawl)
	}
	// Lowering the depth of a parsed record sends it back to the pipeline:
	// it is no longer due.
	low, err := x.LowerDepth(t.Context(), []txindex.Lowering{{Key: r.Key, Depth: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := low[r.Key]; !ok || l.Status != contracts.ToBeParsed || l.NextDue != nil {
		t.Errorf("LowerDepth(indexed record) = %+v; want to-be-parsed without NextDue", low[r.Key])
	}
	if got := mustGet(t, x, r.Key); got.NextDue != nil {
		t.Errorf("after LowerDepth: NextDue = %v, want nil", got.NextDue)
	}
	if due, next, err := x.DueStats(t.Context(), crawl, now.Add(48*time.Hour)); err != nil || due != 0 || next != nil {
		t.Errorf("DueStats after LowerDepth = %d, %v, %v; want 0, nil, nil", due, next, err)
	}
}

// testDue checks Due and DueStats: only terminal records of the crawl whose
// due time has come, earliest first, within limit.
func testDue(t *testing.T, h Harness) {
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
	if due, next, err := x.DueStats(t.Context(), newCrawlID(t), base.Add(time.Hour)); err != nil || due != 0 || next != nil {
		t.Errorf("DueStats(unknown crawl) = %d, %v, %v; want 0, nil, nil", due, next, err)
	}
}
