package txindextest

// The tests of txindex.Pipeline: Create, Transition and LowerDepth with
// their checks and concurrent writers, the fields they keep, the status
// history, Get, GetMany, Counts, CountHost and Stale, and Reopen.

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

func testCreateOnlyAbsent(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	now := time.Now()
	a := rec(crawl, "http://a.example/", contracts.ToBeLoaded, now)
	a.Referrer = "http://ref.example/"
	a.Hops = 2
	aDup := a
	aDup.Depth = 7 // must not overwrite a
	b := rec(crawl, "http://b.example/x", contracts.ToBeLoaded, now)
	c := rec(crawl, "http://c.example/y?q=1", contracts.ToBeParsed, now)
	d := rec(crawl, "http://d.example/", contracts.ToBeLoaded, now)

	for _, step := range []struct {
		name string
		recs []txindex.Record
		want []bool
	}{
		{"fresh batch with an inner duplicate", []txindex.Record{a, b, aDup, c}, []bool{true, true, false, true}},
		{"batch against existing", []txindex.Record{b, d, a}, []bool{false, true, false}},
		{"all existing", []txindex.Record{d, c}, []bool{false, false}},
	} {
		got, err := x.Create(t.Context(), step.recs)
		if err != nil {
			t.Fatalf("%s: Create error: %v", step.name, err)
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: Create created (-want +got):\n%s", step.name, diff)
		}
	}
	for _, want := range []txindex.Record{a, b, c, d} {
		if diff := cmp.Diff(want, mustGet(t, x, want.Key), cmpTime); diff != "" {
			t.Errorf("Get(%q) (-want +got):\n%s", want.Key, diff)
		}
	}
}

func testCreateEmpty(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	got, err := x.Create(t.Context(), nil)
	if err != nil || len(got) != 0 {
		t.Errorf("Create(nil) = %v, %v, want [], nil", got, err)
	}
	applied, err := x.Transition(t.Context(), nil)
	if err != nil || len(applied) != 0 {
		t.Errorf("Transition(nil) = %v, %v, want [], nil", applied, err)
	}
}

func testCreateConcurrent(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	const n = 16
	shared := rec(crawl, "http://shared.example/", contracts.ToBeLoaded, time.Now())
	var wg sync.WaitGroup
	results := make([][]bool, n)
	errs := make([]error, n)
	for i := range n {
		own := rec(crawl, fmt.Sprintf("http://own.example/%d", i), contracts.ToBeLoaded, time.Now())
		// Vary the position of the shared key inside the batch.
		batch := []txindex.Record{own, shared}
		if i%2 == 0 {
			batch = []txindex.Record{shared, own}
		}
		wg.Go(func() {
			created, err := x.Create(t.Context(), batch)
			if err == nil && len(created) == 2 && i%2 == 0 {
				created[0], created[1] = created[1], created[0]
			}
			results[i], errs[i] = created, err
		})
	}
	wg.Wait()
	sharedCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Create in goroutine %d error: %v", i, errs[i])
		}
		if len(results[i]) != 2 {
			t.Fatalf("Create in goroutine %d = %v, want 2 results", i, results[i])
		}
		if !results[i][0] {
			t.Errorf("Create of goroutine %d's own key = not created, want created", i)
		}
		if results[i][1] {
			sharedCreated++
		}
	}
	if sharedCreated != 1 {
		t.Errorf("%d concurrent Creates of one key reported %d created, want 1", n, sharedCreated)
	}
	counts, err := x.Counts(t.Context(), crawl)
	if err != nil {
		t.Fatalf("Counts error: %v", err)
	}
	if got := counts[contracts.ToBeLoaded]; got != n+1 {
		t.Errorf("Counts[%s] = %d, want %d", contracts.ToBeLoaded, got, n+1)
	}
}

func testGetMany(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	a := rec(crawl, "http://a.example/", contracts.ToBeLoaded, time.Now())
	b := rec(crawl, "http://b.example/", contracts.Indexed, time.Now())
	mustCreate(t, x, a, b)
	missing := txindex.Key(crawl, "http://missing.example/")

	if _, err := x.Get(t.Context(), missing); !errors.Is(err, txindex.ErrNotFound) {
		t.Errorf("Get(%q) error = %v, want ErrNotFound", missing, err)
	}
	got, err := x.GetMany(t.Context(), []string{a.Key, missing, b.Key})
	if err != nil {
		t.Fatalf("GetMany error: %v", err)
	}
	want := map[string]txindex.Record{a.Key: a, b.Key: b}
	if diff := cmp.Diff(want, got, cmpTime); diff != "" {
		t.Errorf("GetMany (-want +got):\n%s", diff)
	}
	got, err = x.GetMany(t.Context(), nil)
	if err != nil || len(got) != 0 {
		t.Errorf("GetMany(nil) = %v, %v, want empty, nil", got, err)
	}

	// More keys than fit one request of most stores.
	var many []txindex.Record
	var keys []string
	for i := range 1200 {
		r := rec(crawl, fmt.Sprintf("http://many.example/%d", i), contracts.ToBeLoaded, time.Now())
		many = append(many, r)
		keys = append(keys, r.Key, txindex.Key(crawl, fmt.Sprintf("http://absent.example/%d", i)))
	}
	mustCreate(t, x, many...)
	got, err = x.GetMany(t.Context(), keys)
	if err != nil {
		t.Fatalf("GetMany(%d keys) error: %v", len(keys), err)
	}
	if len(got) != len(many) {
		t.Errorf("GetMany(%d keys) returned %d records, want %d", len(keys), len(got), len(many))
	}
	for _, r := range many {
		if _, ok := got[r.Key]; !ok {
			t.Fatalf("GetMany result lacks %q", r.Key)
		}
	}
}

func testTransitionChecked(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	old := time.Now().Add(-time.Hour)
	a := rec(crawl, "http://a.example/", contracts.ToBeLoaded, old)
	mustCreate(t, x, a)
	missing := txindex.Key(crawl, "http://missing.example/")

	for _, step := range []struct {
		name string
		ts   []txindex.Transition
		want []bool
	}{
		{"wrong from", []txindex.Transition{{Key: a.Key, From: contracts.ToBeParsed, To: contracts.ToBeIndexed, Error: "x"}}, []bool{false}},
		{"unknown key", []txindex.Transition{{Key: missing, From: contracts.ToBeLoaded, To: contracts.ToBeParsed}}, []bool{false}},
	} {
		got, err := x.Transition(t.Context(), step.ts)
		if err != nil {
			t.Fatalf("%s: Transition error: %v", step.name, err)
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: Transition applied (-want +got):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(a, mustGet(t, x, a.Key), cmpTime); diff != "" {
			t.Errorf("%s: record changed (-want +got):\n%s", step.name, diff)
		}
	}
	if _, err := x.Get(t.Context(), missing); !errors.Is(err, txindex.ErrNotFound) {
		t.Errorf("Get(%q) after a transition of an unknown key: error %v, want ErrNotFound", missing, err)
	}

	start := at(time.Now()).Add(-time.Millisecond)
	got, err := x.Transition(t.Context(), []txindex.Transition{
		{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed},
		// Redelivery of the same transition in the same batch.
		{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed},
	})
	if err != nil {
		t.Fatalf("Transition error: %v", err)
	}
	if n := countTrue(got); n != 1 {
		t.Errorf("Transition of one record twice in a batch = %v, want exactly one applied", got)
	}
	r := mustGet(t, x, a.Key)
	if r.Status != contracts.ToBeParsed {
		t.Errorf("Get(%q).Status = %q, want %q", a.Key, r.Status, contracts.ToBeParsed)
	}
	if r.StatusTime.Before(start) {
		t.Errorf("Get(%q).StatusTime = %v, want at or after %v", a.Key, r.StatusTime, start)
	}
	// Redelivery in a later batch.
	got, err = x.Transition(t.Context(), []txindex.Transition{{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed}})
	if err != nil || !slices.Equal(got, []bool{false}) {
		t.Errorf("repeated Transition = %v, %v, want [false], nil", got, err)
	}
}

func testTransitionOutcome(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	a := rec(crawl, "http://a.example/", contracts.ToBeLoaded, time.Now().Add(-time.Hour))
	b := rec(crawl, "http://b.example/", contracts.ToBeLoaded, time.Now().Add(-time.Hour))
	mustCreate(t, x, a, b)
	asset := contracts.AssetRef{Key: "warc/" + crawl + "/1.warc.gz", Offset: 1234, Length: 5678}

	steps := []struct {
		name   string
		tr     txindex.Transition
		update func(r *txindex.Record)
	}{
		{
			name: "fetch failed, retry",
			tr:   txindex.Transition{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeLoaded, Error: "timeout", AddAttempt: true},
			update: func(r *txindex.Record) {
				r.Error, r.Attempts = "timeout", 1
			},
		},
		{
			name: "fetched",
			tr: txindex.Transition{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed,
				HTTPStatus: 200, Asset: &asset, AddAttempt: true},
			update: func(r *txindex.Record) {
				r.Status, r.HTTPStatus, r.Asset, r.Attempts = contracts.ToBeParsed, 200, asset, 2
			},
		},
		{
			name: "zero outcome keeps fields",
			tr:   txindex.Transition{Key: a.Key, From: contracts.ToBeParsed, To: contracts.ToBeIndexed},
			update: func(r *txindex.Record) {
				r.Status = contracts.ToBeIndexed
			},
		},
		{
			name: "failed",
			tr:   txindex.Transition{Key: b.Key, From: contracts.ToBeLoaded, To: contracts.Failed, Error: "robots", HTTPStatus: 404},
			update: func(r *txindex.Record) {
				r.Status, r.Error, r.HTTPStatus = contracts.Failed, "robots", 404
			},
		},
	}
	want := map[string]txindex.Record{a.Key: a, b.Key: b}
	for _, s := range steps {
		got, err := x.Transition(t.Context(), []txindex.Transition{s.tr})
		if err != nil || !slices.Equal(got, []bool{true}) {
			t.Fatalf("%s: Transition = %v, %v, want [true], nil", s.name, got, err)
		}
		w := want[s.tr.Key]
		s.update(&w)
		want[s.tr.Key] = w
		r := mustGet(t, x, s.tr.Key)
		if diff := cmp.Diff(w, r, cmpTime, cmpopts.IgnoreFields(txindex.Record{}, "StatusTime")); diff != "" {
			t.Errorf("%s: Get(%q) (-want +got):\n%s", s.name, s.tr.Key, diff)
		}
	}
}

func testTransitionRenew(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	old := time.Now().Add(-time.Hour)
	a := rec(crawl, "http://a.example/", contracts.ToBeParsed, old)
	mustCreate(t, x, a)
	start := at(time.Now()).Add(-time.Millisecond)
	got, err := x.Transition(t.Context(), []txindex.Transition{{Key: a.Key, From: contracts.ToBeParsed, To: contracts.ToBeParsed}})
	if err != nil || !slices.Equal(got, []bool{true}) {
		t.Fatalf("Transition(from == to) = %v, %v, want [true], nil", got, err)
	}
	r := mustGet(t, x, a.Key)
	if r.Status != contracts.ToBeParsed || r.StatusTime.Before(start) {
		t.Errorf("after renewal Get(%q) = status %q time %v, want status %q time at or after %v",
			a.Key, r.Status, r.StatusTime, contracts.ToBeParsed, start)
	}
}

func testTransitionConcurrent(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	a := rec(crawl, "http://a.example/", contracts.ToBeIndexed, time.Now())
	mustCreate(t, x, a)
	const n = 8
	var wg sync.WaitGroup
	applied := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got, err := x.Transition(t.Context(), []txindex.Transition{{Key: a.Key, From: contracts.ToBeIndexed, To: contracts.Indexed, AddAttempt: true}})
			errs[i] = err
			if err == nil && len(got) == 1 {
				applied[i] = got[0]
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Transition in goroutine %d error: %v", i, err)
		}
	}
	if c := countTrue(applied); c != 1 {
		t.Errorf("%d concurrent Transitions of one record: %d applied, want 1", n, c)
	}
	if r := mustGet(t, x, a.Key); r.Attempts != 1 || r.Status != contracts.Indexed {
		t.Errorf("Get(%q) = status %q attempts %d, want %q 1", a.Key, r.Status, r.Attempts, contracts.Indexed)
	}
}

func testTransitionIfDepth(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	a := rec(crawl, "http://a.example/", contracts.ToBeParsed, time.Now().Add(-time.Hour))
	a.Depth = 3
	mustCreate(t, x, a)
	other, same := 4, 3
	got, err := x.Transition(t.Context(), []txindex.Transition{{Key: a.Key, From: contracts.ToBeParsed, To: contracts.ToBeIndexed, IfDepth: &other}})
	if err != nil || !slices.Equal(got, []bool{false}) {
		t.Errorf("Transition(IfDepth %d) of a record at depth %d = %v, %v, want [false], nil", other, a.Depth, got, err)
	}
	if r := mustGet(t, x, a.Key); r.Status != contracts.ToBeParsed {
		t.Errorf("Get(%q).Status = %q after a transition at another depth, want %q", a.Key, r.Status, contracts.ToBeParsed)
	}
	got, err = x.Transition(t.Context(), []txindex.Transition{{Key: a.Key, From: contracts.ToBeParsed, To: contracts.ToBeIndexed, IfDepth: &same}})
	if err != nil || !slices.Equal(got, []bool{true}) {
		t.Errorf("Transition(IfDepth %d) of a record at depth %d = %v, %v, want [true], nil", same, a.Depth, got, err)
	}
	if r := mustGet(t, x, a.Key); r.Status != contracts.ToBeIndexed {
		t.Errorf("Get(%q).Status = %q, want %q", a.Key, r.Status, contracts.ToBeIndexed)
	}
}

func testLowerDepth(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	old := time.Now().Add(-time.Hour)
	// One record at depth 5 per status, and what lowering it does.
	cases := []struct {
		status  contracts.Status
		errText string
		reparse bool
	}{
		{contracts.ToBeLoaded, "", false},
		{contracts.ToBeParsed, "", false},
		{contracts.ToBeIndexed, "", true},
		{contracts.Indexed, "", true},
		{contracts.Redirected, "to http://elsewhere.example/", true},
		{contracts.Failed, "http 404", false},
		{contracts.Failed, contracts.ReasonExcluded, true},
		{contracts.Retired, "", false},
	}
	var recs []txindex.Record
	wantCounts := map[contracts.Status]int64{}
	for i, c := range cases {
		r := rec(crawl, fmt.Sprintf("http://h%d.example/", i), c.status, old)
		r.Depth, r.Hops, r.Error = 5, 2, c.errText
		recs = append(recs, r)
		wantCounts[c.status]++
	}
	mustCreate(t, x, recs...)
	missing := txindex.Key(crawl, "http://missing.example/")

	// Not lower: nothing changes.
	var ls []txindex.Lowering
	for _, r := range recs {
		ls = append(ls, txindex.Lowering{Key: r.Key, Depth: 5}, txindex.Lowering{Key: r.Key, Depth: 6, Hops: 1})
	}
	ls = append(ls, txindex.Lowering{Key: missing, Depth: 0})
	got, err := x.LowerDepth(t.Context(), ls)
	if err != nil || len(got) != 0 {
		t.Errorf("LowerDepth(not lower) = %v, %v, want nothing changed", got, err)
	}
	for _, r := range recs {
		if diff := cmp.Diff(r, mustGet(t, x, r.Key), cmpTime); diff != "" {
			t.Errorf("after LowerDepth(not lower): record changed (-want +got):\n%s", diff)
		}
	}
	if _, err := x.Get(t.Context(), missing); !errors.Is(err, txindex.ErrNotFound) {
		t.Errorf("Get(%q) after lowering an unknown key: error %v, want ErrNotFound", missing, err)
	}

	// Lower, twice per key in one call: the smaller depth applies.
	start := at(time.Now()).Add(-time.Millisecond)
	ls = ls[:0]
	for _, r := range recs {
		ls = append(ls, txindex.Lowering{Key: r.Key, Depth: 3, Hops: 1}, txindex.Lowering{Key: r.Key, Depth: 2}, txindex.Lowering{Key: r.Key, Depth: 4})
	}
	got, err = x.LowerDepth(t.Context(), ls)
	if err != nil {
		t.Fatalf("LowerDepth error: %v", err)
	}
	for i, c := range cases {
		want := recs[i]
		want.Depth, want.Hops = 2, 0
		if c.reparse {
			want.Status = contracts.ToBeParsed
			wantCounts[c.status]--
			wantCounts[contracts.ToBeParsed]++
		}
		r := mustGet(t, x, want.Key)
		if diff := cmp.Diff(want, r, cmpTime, cmpopts.IgnoreFields(txindex.Record{}, "StatusTime")); diff != "" {
			t.Errorf("%s %q: after LowerDepth (-want +got):\n%s", c.status, c.errText, diff)
		}
		if c.reparse && r.StatusTime.Before(start) {
			t.Errorf("%s %q: StatusTime = %v after reopening, want at or after %v", c.status, c.errText, r.StatusTime, start)
		}
		if !c.reparse && !r.StatusTime.Equal(want.StatusTime) {
			t.Errorf("%s %q: StatusTime = %v, want unchanged %v", c.status, c.errText, r.StatusTime, want.StatusTime)
		}
		if diff := cmp.Diff(txindex.Lowered{Record: r, From: c.status}, got[want.Key], cmpTime); diff != "" {
			t.Errorf("%s %q: LowerDepth returned (-want +got):\n%s", c.status, c.errText, diff)
		}
	}
	if len(got) != len(recs) {
		t.Errorf("LowerDepth changed %d records, want %d", len(got), len(recs))
	}
	counts, err := x.Counts(t.Context(), crawl)
	if err != nil {
		t.Fatalf("Counts error: %v", err)
	}
	if diff := cmp.Diff(nonZero(wantCounts), nonZero(counts)); diff != "" {
		t.Errorf("Counts after LowerDepth (-want +got):\n%s", diff)
	}

	// Redelivery: the same lowering again changes nothing.
	got, err = x.LowerDepth(t.Context(), ls)
	if err != nil || len(got) != 0 {
		t.Errorf("repeated LowerDepth = %v, %v, want nothing changed", got, err)
	}
}

func testLowerDepthConcurrent(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	a := rec(crawl, "http://a.example/", contracts.Indexed, time.Now())
	a.Depth = 20
	mustCreate(t, x, a)
	const n = 8
	var wg sync.WaitGroup
	changed := make([]*txindex.Lowered, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got, err := x.LowerDepth(t.Context(), []txindex.Lowering{{Key: a.Key, Depth: 10 + i}})
			errs[i] = err
			if r, ok := got[a.Key]; ok {
				changed[i] = &r
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("LowerDepth in goroutine %d error: %v", i, err)
		}
	}
	if changed[0] == nil {
		t.Errorf("LowerDepth to the smallest depth reported no change")
	}
	reopened := 0
	for i, r := range changed {
		if r != nil && r.Depth != 10+i {
			t.Errorf("LowerDepth to %d returned depth %d", 10+i, r.Depth)
		}
		if r != nil && r.From == contracts.Indexed {
			reopened++
		}
	}
	if reopened != 1 {
		t.Errorf("%d concurrent LowerDepth calls report reopening the indexed record, want 1", reopened)
	}
	if r := mustGet(t, x, a.Key); r.Depth != 10 || r.Status != contracts.ToBeParsed {
		t.Errorf("Get(%q) = depth %d status %q, want 10 %q", a.Key, r.Depth, r.Status, contracts.ToBeParsed)
	}
	counts, err := x.Counts(t.Context(), crawl)
	if err != nil {
		t.Fatalf("Counts error: %v", err)
	}
	if diff := cmp.Diff(map[contracts.Status]int64{contracts.ToBeParsed: 1}, nonZero(counts)); diff != "" {
		t.Errorf("Counts after concurrent LowerDepth (-want +got):\n%s", diff)
	}
}

func testCounts(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl, other := newCrawlID(t), newCrawlID(t)
	now := time.Now()
	var recs []txindex.Record
	want := map[contracts.Status]int64{}
	for i, s := range contracts.Statuses {
		for j := range i + 1 {
			recs = append(recs, rec(crawl, fmt.Sprintf("http://h%d.example/%d", i, j), s, now))
			want[s]++
		}
	}
	recs = append(recs, rec(other, "http://h0.example/0", contracts.ToBeLoaded, now))
	mustCreate(t, x, recs...)

	check := func(name, crawlID string, want map[contracts.Status]int64) {
		t.Helper()
		got, err := x.Counts(t.Context(), crawlID)
		if err != nil {
			t.Fatalf("%s: Counts(%q) error: %v", name, crawlID, err)
		}
		if diff := cmp.Diff(nonZero(want), nonZero(got)); diff != "" {
			t.Errorf("%s: Counts(%q) (-want +got):\n%s", name, crawlID, diff)
		}
	}
	check("after create", crawl, want)
	check("other crawl", other, map[contracts.Status]int64{contracts.ToBeLoaded: 1})
	check("unknown crawl", newCrawlID(t), nil)

	applied, err := x.Transition(t.Context(), []txindex.Transition{
		{Key: recs[0].Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed},
		{Key: recs[1].Key, From: contracts.ToBeParsed, To: contracts.Failed},
		{Key: recs[2].Key, From: contracts.ToBeLoaded, To: contracts.Failed}, // wrong from
	})
	if err != nil {
		t.Fatalf("Transition error: %v", err)
	}
	if diff := cmp.Diff([]bool{true, true, false}, applied); diff != "" {
		t.Errorf("Transition applied (-want +got):\n%s", diff)
	}
	want[contracts.ToBeLoaded]--
	want[contracts.Failed]++
	check("after transitions", crawl, want)
}

func testCountHost(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl, other := newCrawlID(t), newCrawlID(t)
	now := time.Now()
	mustCreate(t, x,
		rec(crawl, "http://a.example/1", contracts.ToBeLoaded, now),
		rec(crawl, "http://a.example/2", contracts.Indexed, now),
		rec(crawl, "https://a.example:8443/3", contracts.Failed, now),
		rec(crawl, "http://b.example/1", contracts.ToBeLoaded, now),
		rec(other, "http://a.example/1", contracts.ToBeLoaded, now),
	)
	for _, tc := range []struct {
		crawl, host string
		want        int64
	}{
		{crawl, "a.example", 3},
		{crawl, "b.example", 1},
		{crawl, "c.example", 0},
		{other, "a.example", 1},
	} {
		got, err := x.CountHost(t.Context(), tc.crawl, tc.host)
		if err != nil || got != tc.want {
			t.Errorf("CountHost(%q, %q) = %d, %v, want %d, nil", tc.crawl, tc.host, got, err, tc.want)
		}
	}
}

func testStale(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	// A random second in the 1980s: far older than any live record, and
	// unlikely to be near another run's.
	base := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(mrand.Int64N(10*365*24*3600)) * time.Second)
	old1 := rec(crawl, "http://s.example/1", contracts.ToBeParsed, base)
	old2 := rec(crawl, "http://s.example/2", contracts.ToBeLoaded, base.Add(time.Second))
	old3 := rec(crawl, "http://s.example/3", contracts.ToBeIndexed, base.Add(2*time.Second))
	edge := rec(crawl, "http://s.example/edge", contracts.ToBeLoaded, base.Add(3*time.Second))
	terminal := rec(crawl, "http://s.example/done", contracts.Indexed, base.Add(500*time.Millisecond))
	failed := rec(crawl, "http://s.example/failed", contracts.Failed, base.Add(600*time.Millisecond))
	fresh := rec(crawl, "http://s.example/fresh", contracts.ToBeLoaded, time.Now())
	// Created out of order, so that insertion order cannot pass for age order.
	mustCreate(t, x, old3, fresh, terminal, old1, edge, failed, old2)
	t.Cleanup(func() {
		// Leave nothing stale behind in a shared store.
		var ts []txindex.Transition
		for _, r := range []txindex.Record{old1, old2, old3, edge, fresh} {
			ts = append(ts, txindex.Transition{Key: r.Key, From: r.Status, To: contracts.Failed})
		}
		// t.Context is already cancelled when cleanups run.
		if _, err := x.Transition(context.Background(), ts); err != nil {
			t.Logf("cleanup Transition error: %v", err)
		}
	})

	before := edge.StatusTime // exclusive
	all, err := x.Stale(t.Context(), before, 10000, nil)
	if err != nil {
		t.Fatalf("Stale error: %v", err)
	}
	assertOldestFirst(t, all, before)
	var ours []string
	for _, r := range all {
		if r.CrawlID == crawl {
			ours = append(ours, r.Key)
		}
	}
	if diff := cmp.Diff([]string{old1.Key, old2.Key, old3.Key}, ours); diff != "" {
		t.Errorf("Stale(%v) keys of this crawl (-want +got):\n%s", before, diff)
	}
	for _, r := range all {
		if r.Key == old2.Key {
			if diff := cmp.Diff(old2, r, cmpTime); diff != "" {
				t.Errorf("Stale record (-want +got):\n%s", diff)
			}
		}
	}

	limited, err := x.Stale(t.Context(), before, 2, nil)
	if err != nil {
		t.Fatalf("Stale(limit 2) error: %v", err)
	}
	if len(limited) != 2 {
		t.Fatalf("Stale(limit 2) returned %d records, want 2", len(limited))
	}
	assertOldestFirst(t, limited, before)
	for i := range limited {
		if !limited[i].StatusTime.Equal(all[i].StatusTime) {
			t.Errorf("Stale(limit 2)[%d] at %v, want the oldest, at %v", i, limited[i].StatusTime, all[i].StatusTime)
		}
	}

	// A renewed lease is no longer stale.
	if _, err := x.Transition(t.Context(), []txindex.Transition{{Key: old1.Key, From: old1.Status, To: old1.Status}}); err != nil {
		t.Fatalf("Transition error: %v", err)
	}
	all, err = x.Stale(t.Context(), before, 10000, nil)
	if err != nil {
		t.Fatalf("Stale error: %v", err)
	}
	for _, r := range all {
		if r.Key == old1.Key {
			t.Errorf("Stale returned %q after its lease was renewed", old1.Key)
		}
	}
}

// testStaleOwned checks that Stale leaves out exactly the to-be-loaded
// records of the owned shards: their other pending records, the records
// of other shards and those without a shard stay stale.
func testStaleOwned(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	shards := newShards(3)
	owned, free, unused := shards[0], shards[1], shards[2]
	base := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(mrand.Int64N(10*365*24*3600)) * time.Second)
	var recs []txindex.Record
	add := func(path string, s contracts.Status, shard string) txindex.Record {
		r := rec(crawl, "http://o.example/"+path, s, base.Add(time.Duration(len(recs))*time.Second))
		r.Shard = shard
		recs = append(recs, r)
		return r
	}
	add("owned-load", contracts.ToBeLoaded, owned)
	ownedParse := add("owned-parse", contracts.ToBeParsed, owned)
	ownedIndex := add("owned-index", contracts.ToBeIndexed, owned)
	add("owned-load-2", contracts.ToBeLoaded, owned)
	freeLoad := add("free-load", contracts.ToBeLoaded, free)
	noShard := add("no-shard", contracts.ToBeLoaded, "")
	before := base.Add(time.Hour)
	mustCreate(t, x, recs...)
	t.Cleanup(func() {
		var ts []txindex.Transition
		for _, r := range recs {
			ts = append(ts, txindex.Transition{Key: r.Key, From: r.Status, To: contracts.Failed})
		}
		if _, err := x.Transition(context.Background(), ts); err != nil {
			t.Logf("cleanup Transition error: %v", err)
		}
	})
	for _, tc := range []struct {
		name  string
		owned []string
		want  []txindex.Record
	}{
		{"none owned", nil, recs},
		{"none owned, empty list", []string{}, recs},
		{"one owned", []string{unused, owned}, []txindex.Record{ownedParse, ownedIndex, freeLoad, noShard}},
		{"both owned", []string{owned, free}, []txindex.Record{ownedParse, ownedIndex, noShard}},
		{"other shards owned", []string{unused}, recs},
	} {
		all, err := x.Stale(t.Context(), before, 10000, tc.owned)
		if err != nil {
			t.Fatalf("%s: Stale(owned %q) error: %v", tc.name, tc.owned, err)
		}
		assertOldestFirst(t, all, before)
		var got []txindex.Record
		for _, r := range all {
			if r.CrawlID == crawl {
				got = append(got, r)
			}
		}
		if diff := cmp.Diff(tc.want, got, cmpTime); diff != "" {
			t.Errorf("%s: Stale(owned %q) records of this crawl (-want +got):\n%s", tc.name, tc.owned, diff)
		}
	}
}

func assertOldestFirst(t *testing.T, recs []txindex.Record, before time.Time) {
	t.Helper()
	for i, r := range recs {
		if !r.Status.Pending() {
			t.Errorf("Stale returned %q in status %q, which is not pending", r.Key, r.Status)
		}
		if !r.StatusTime.Before(before) {
			t.Errorf("Stale(%v) returned %q at %v", before, r.Key, r.StatusTime)
		}
		if i > 0 && r.StatusTime.Before(recs[i-1].StatusTime) {
			t.Errorf("Stale result %d at %v is older than result %d at %v", i, r.StatusTime, i-1, recs[i-1].StatusTime)
		}
	}
}

func testReopen(t *testing.T, h Harness[txindex.Pipeline]) {
	if h.Reopen == nil {
		t.Skip("harness has no Reopen")
	}
	x := h.New(t)
	crawl := newCrawlID(t)
	a := rec(crawl, "http://a.example/", contracts.ToBeLoaded, time.Now())
	b := rec(crawl, "http://b.example/", contracts.ToBeLoaded, time.Now())
	mustCreate(t, x, a, b)
	asset := contracts.AssetRef{Key: "k", Offset: 1, Length: 2}
	if _, err := x.Transition(t.Context(), []txindex.Transition{{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed, Asset: &asset, HTTPStatus: 200}}); err != nil {
		t.Fatalf("Transition error: %v", err)
	}
	wantA := mustGet(t, x, a.Key)

	x = h.Reopen(t, x)
	if diff := cmp.Diff(wantA, mustGet(t, x, a.Key), cmpTime); diff != "" {
		t.Errorf("Get(%q) after reopen (-want +got):\n%s", a.Key, diff)
	}
	counts, err := x.Counts(t.Context(), crawl)
	if err != nil {
		t.Fatalf("Counts error: %v", err)
	}
	want := map[contracts.Status]int64{contracts.ToBeLoaded: 1, contracts.ToBeParsed: 1}
	if diff := cmp.Diff(want, nonZero(counts)); diff != "" {
		t.Errorf("Counts after reopen (-want +got):\n%s", diff)
	}
	created, err := x.Create(t.Context(), []txindex.Record{b})
	if err != nil || !slices.Equal(created, []bool{false}) {
		t.Errorf("Create(existing) after reopen = %v, %v, want [false], nil", created, err)
	}
}

// testSitemapFields checks that a record's sitemap kind and lastmod are
// kept from Create through a transition to contracts.Sitemap, and that a
// record without them reads back without them.
func testSitemapFields(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	now := time.Now()
	lastmod := time.Date(2024, 3, 1, 8, 20, 30, 0, time.UTC)
	sm := rec(crawl, "http://a.example/sitemap.xml", contracts.ToBeLoaded, now)
	sm.Sitemap = txindex.SitemapProbe
	page := rec(crawl, "http://a.example/listed", contracts.ToBeLoaded, now)
	page.Lastmod = &lastmod
	plain := rec(crawl, "http://a.example/plain", contracts.ToBeLoaded, now)
	mustCreate(t, x, sm, page, plain)
	ok, err := x.Transition(t.Context(), []txindex.Transition{
		{Key: sm.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed, HTTPStatus: 404},
		{Key: sm.Key, From: contracts.ToBeParsed, To: contracts.Sitemap, Error: "no sitemap at this address (http 404)"},
	})
	if err != nil || !slices.Equal(ok, []bool{true, true}) {
		t.Fatalf("Transition = %v, %v; want both applied", ok, err)
	}
	got := mustGet(t, x, sm.Key)
	if got.Sitemap != txindex.SitemapProbe || got.Status != contracts.Sitemap || got.Lastmod != nil {
		t.Errorf("Get(probe) = sitemap %q, status %s, lastmod %v; want %q, %s, nil", got.Sitemap, got.Status, got.Lastmod, txindex.SitemapProbe, contracts.Sitemap)
	}
	many, err := x.GetMany(t.Context(), []string{page.Key, plain.Key})
	if err != nil {
		t.Fatalf("GetMany error: %v", err)
	}
	if g := many[page.Key]; g.Lastmod == nil || !g.Lastmod.Equal(lastmod) || g.Sitemap != "" {
		t.Errorf("GetMany(listed page) = lastmod %v, sitemap %q; want %v, \"\"", g.Lastmod, g.Sitemap, lastmod)
	}
	if g := many[plain.Key]; g.Lastmod != nil || g.Sitemap != "" {
		t.Errorf("GetMany(plain page) = lastmod %v, sitemap %q; want nil, \"\"", g.Lastmod, g.Sitemap)
	}
	counts, err := x.Counts(t.Context(), crawl)
	if err != nil {
		t.Fatalf("Counts error: %v", err)
	}
	want := map[contracts.Status]int64{contracts.ToBeLoaded: 2, contracts.Sitemap: 1}
	if diff := cmp.Diff(want, nonZero(counts)); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

func testHistory(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	start := at(time.Now().Add(-time.Hour))
	a := rec(crawl, "http://h.example/a", contracts.ToBeLoaded, start)
	mustCreate(t, x, a)
	want := []contracts.Status{contracts.ToBeLoaded}
	// A lease renewal (From == To) adds no event; each change adds one.
	steps := []struct{ from, to contracts.Status }{
		{contracts.ToBeLoaded, contracts.ToBeLoaded},
		{contracts.ToBeLoaded, contracts.ToBeParsed},
		{contracts.ToBeParsed, contracts.ToBeParsed},
		{contracts.ToBeParsed, contracts.ToBeIndexed},
	}
	for i := range 2 * txindex.MaxHistory {
		if i%2 == 0 {
			steps = append(steps, struct{ from, to contracts.Status }{contracts.ToBeIndexed, contracts.Retired})
		} else {
			steps = append(steps, struct{ from, to contracts.Status }{contracts.Retired, contracts.ToBeIndexed})
		}
	}
	for i, s := range steps {
		before := at(time.Now())
		applied, err := x.Transition(t.Context(), []txindex.Transition{{Key: a.Key, From: s.from, To: s.to}})
		if err != nil || !applied[0] {
			t.Fatalf("Transition %d %s -> %s = %v, %v", i, s.from, s.to, applied, err)
		}
		if s.from != s.to {
			want = append(want, s.to)
		}
		r := mustGet(t, x, a.Key)
		var got []contracts.Status
		for _, e := range r.History {
			got = append(got, e.Status)
		}
		w := want
		if len(w) > txindex.MaxHistory {
			w = append([]contracts.Status{want[0]}, want[len(want)-txindex.MaxHistory+1:]...)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Fatalf("after transition %d, history statuses (-want +got):\n%s", i, diff)
		}
		if !r.History[0].Time.Equal(start) {
			t.Errorf("first event at %v, want the creation time %v", r.History[0].Time, start)
		}
		if last := r.History[len(r.History)-1]; s.from != s.to && last.Time.Before(before) {
			t.Errorf("transition %d: last event at %v, before the transition began (%v)", i, last.Time, before)
		}
	}
	// LowerDepth sending a parsed record back adds an event.
	b := rec(crawl, "http://h.example/b", contracts.Indexed, start)
	b.Depth = 3
	mustCreate(t, x, b)
	if _, err := x.LowerDepth(t.Context(), []txindex.Lowering{{Key: b.Key, Depth: 1}}); err != nil {
		t.Fatal(err)
	}
	r := mustGet(t, x, b.Key)
	if len(r.History) != 2 || r.History[0].Status != contracts.Indexed || r.History[1].Status != contracts.ToBeParsed {
		t.Errorf("history after LowerDepth = %+v, want indexed then to-be-parsed", r.History)
	}
}

// testRecrawlFields checks the rule of txindex.Apply for continuous crawls:
// a transition's recrawl state replaces the record's, NextDue is its Due
// while the record is terminal and nil in the pipeline, and ResetAttempts
// and ClearError do what they say.
func testRecrawlFields(t *testing.T, h Harness[txindex.Pipeline]) {
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
}

// testRenderField checks the rule of txindex.Apply for Render: a
// transition that carries a fetch (Transition.Fetched) sets it, empty
// included, any other keeps it; Create keeps a record's; Get and GetMany
// read it, also after Reopen.
func testRenderField(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	now := time.Now()
	const auto = "auto: scripts and 12 characters of text"
	a := rec(crawl, "http://a.example/app", contracts.ToBeLoaded, now)
	made := rec(crawl, "http://a.example/made", contracts.ToBeParsed, now)
	made.Render = "always"
	mustCreate(t, x, a, made)
	size := int64(4096)
	steps := []struct {
		name string
		tr   txindex.Transition
		want string
	}{
		{"retry without a response keeps none",
			txindex.Transition{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeLoaded, Error: "timeout", AddAttempt: true}, ""},
		{"rendered fetch sets it",
			txindex.Transition{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed, HTTPStatus: 200,
				MIMEType: "text/html", Bytes: &size, Render: auto}, auto},
		{"crawler's transition keeps it",
			txindex.Transition{Key: a.Key, From: contracts.ToBeParsed, To: contracts.Indexed}, auto},
		{"back to the loader keeps it",
			txindex.Transition{Key: a.Key, From: contracts.Indexed, To: contracts.ToBeLoaded, ResetAttempts: true}, auto},
		{"failed fetch without a response keeps it",
			txindex.Transition{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeLoaded, Error: "timeout", AddAttempt: true}, auto},
		{"plain HTTP fetch clears it",
			txindex.Transition{Key: a.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed, HTTPStatus: 200,
				MIMEType: "text/html", Bytes: &size}, ""},
		{"Render alone is a fetch",
			txindex.Transition{Key: a.Key, From: contracts.ToBeParsed, To: contracts.ToBeParsed, Render: "always"}, "always"},
	}
	for _, s := range steps {
		ok, err := x.Transition(t.Context(), []txindex.Transition{s.tr})
		if err != nil || !slices.Equal(ok, []bool{true}) {
			t.Fatalf("%s: Transition(%s -> %s) = %v, %v; want applied", s.name, s.tr.From, s.tr.To, ok, err)
		}
		if got := mustGet(t, x, a.Key); got.Render != s.want {
			t.Errorf("%s: Get(%q).Render = %q, want %q", s.name, a.Key, got.Render, s.want)
		}
	}
	many, err := x.GetMany(t.Context(), []string{a.Key, made.Key})
	if err != nil {
		t.Fatalf("GetMany error: %v", err)
	}
	if got := many[a.Key].Render; got != "always" {
		t.Errorf("GetMany(%q).Render = %q, want %q", a.Key, got, "always")
	}
	if got := many[made.Key].Render; got != "always" {
		t.Errorf("GetMany(created with Render).Render = %q, want %q", got, "always")
	}
	if h.Reopen == nil {
		return
	}
	x = h.Reopen(t, x)
	if got := mustGet(t, x, a.Key); got.Render != "always" {
		t.Errorf("Get(%q).Render after reopen = %q, want %q", a.Key, got.Render, "always")
	}
}

// testPeek checks Peek: it never shows an absent record, and shows every
// created one, as created, once its lagging view has caught up (within a
// few seconds; a store whose reads are current shows them at once), also
// for more keys than fit one request.
func testPeek(t *testing.T, h Harness[txindex.Pipeline]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	var recs []txindex.Record
	var keys []string
	for i := range 1100 {
		r := rec(crawl, fmt.Sprintf("http://peek.example/%d", i), contracts.ToBeLoaded, time.Now())
		recs = append(recs, r)
		keys = append(keys, r.Key, txindex.Key(crawl, fmt.Sprintf("http://absent.example/%d", i)))
	}
	mustCreate(t, x, recs...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := x.Peek(t.Context(), keys)
		if err != nil {
			t.Fatalf("Peek error: %v", err)
		}
		for k, r := range got {
			if r.Key != k || r.Status != contracts.ToBeLoaded {
				t.Fatalf("Peek[%q] = record %q in %q, want the record created", k, r.Key, r.Status)
			}
		}
		if len(got) > len(recs) {
			t.Fatalf("Peek returned %d records of %d keys with %d records", len(got), len(keys), len(recs))
		}
		if len(got) == len(recs) {
			// The fields Peek promises; the others may be filled or not.
			promised := func(r txindex.Record) txindex.Record {
				return txindex.Record{Key: r.Key, CrawlID: r.CrawlID, URL: r.URL, Host: r.Host, Group: r.Group,
					Depth: r.Depth, Hops: r.Hops, Referrer: r.Referrer, Status: r.Status}
			}
			want := map[string]txindex.Record{}
			for _, r := range recs {
				want[r.Key] = promised(r)
			}
			for k, r := range got {
				got[k] = promised(r)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Peek (-want +got):\n%s", diff)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Peek shows %d of %d records created 10 s ago", len(got), len(recs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
