// Package hcftest is the conformance suite of hcf.Store: every
// implementation, embedded or remote, must pass Run.
//
// The suite is written for stores shared with other tests and earlier runs:
// every test uses project names of its own, except the documentation's examples, which
// use project 78 as the HCF documentation's examples do and therefore need a store of their own
// (Harness.New must return one).
package hcftest

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
)

// Harness makes the stores under test.
type Harness struct {
	// New returns an empty store whose batch ids take their time from now,
	// closed when t ends.
	New func(t *testing.T, now func() time.Time) hcf.Store
	// Reopen closes s and returns a new store on the same storage, with
	// clock now, closed when t ends. Nil skips the restart tests.
	Reopen func(t *testing.T, s hcf.Store, now func() time.Time) hcf.Store
}

// ExampleMillis are the creation times of the two batches of the HCF documentation's
// example, "00013967d8af7b0001" and "01013967d8af7e0001".
var ExampleMillis = []int64{0x13967d8af7b, 0x13967d8af7e}

// Clock returns a clock that answers the given unix milliseconds in turn,
// then one millisecond more at every call. It is safe for concurrent use.
func Clock(ms ...int64) func() time.Time {
	var mu sync.Mutex
	calls := 0
	last := time.Now().UnixMilli()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case calls < len(ms):
			last = ms[calls]
		case calls > 0:
			last++
		}
		calls++
		return time.UnixMilli(last)
	}
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"SeedExamples", testSeed},
		{"Dedupe", testDedupe},
		{"DedupeAfterDelete", testDedupeAfterDelete},
		{"Ordering", testOrdering},
		{"BatchSize", testBatchSize},
		{"MinCount", testMinCount},
		{"DeleteBatches", testDeleteBatches},
		{"DataKeptByteForByte", testData},
		{"FingerprintsSorted", testFingerprints},
		{"DeleteSlot", testDeleteSlot},
		{"Lists", testLists},
		{"Isolation", testIsolation},
		{"Invalid", testInvalid},
		{"EmptyAdd", testEmptyAdd},
		{"CallbackError", testCallbackError},
		{"ConcurrentAdd", testConcurrentAdd},
		{"Reopen", testReopen},
		{"ReopenClockBehind", testReopenClockBehind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

// newProject returns a project name no other test or run uses.
func newProject() string { return "hcft-" + rand.Text()[:16] }

// slot returns a slot of a fresh project.
func slot() hcf.Slot { return hcf.Slot{Project: newProject(), Frontier: "test", Name: "example.com"} }

func add(t *testing.T, s hcf.Store, sl hcf.Slot, want int, reqs ...hcf.Request) {
	t.Helper()
	got, err := s.Add(t.Context(), sl, reqs)
	if err != nil {
		t.Fatalf("Add(%v, %d requests) error: %v", sl, len(reqs), err)
	}
	if got != want {
		t.Fatalf("Add(%v, %d requests) = %d new, want %d", sl, len(reqs), got, want)
	}
}

func batches(t *testing.T, s hcf.Store, sl hcf.Slot, mincount int) []hcf.Batch {
	t.Helper()
	var out []hcf.Batch
	if err := s.Batches(t.Context(), sl, mincount, func(b hcf.Batch) error {
		out = append(out, b)
		return nil
	}); err != nil {
		t.Fatalf("Batches(%v, %d) error: %v", sl, mincount, err)
	}
	return out
}

func fingerprints(t *testing.T, s hcf.Store, sl hcf.Slot) []hcf.Fingerprint {
	t.Helper()
	var out []hcf.Fingerprint
	if err := s.Fingerprints(t.Context(), sl, func(f hcf.Fingerprint) error {
		out = append(out, f)
		return nil
	}); err != nil {
		t.Fatalf("Fingerprints(%v) error: %v", sl, err)
	}
	return out
}

func deleteBatches(t *testing.T, s hcf.Store, sl hcf.Slot, ids ...string) {
	t.Helper()
	if err := s.DeleteBatches(t.Context(), sl, ids); err != nil {
		t.Fatalf("DeleteBatches(%v, %q) error: %v", sl, ids, err)
	}
}

// fps returns the fingerprints of the requests of bs, in order.
func fps(bs []hcf.Batch) []string {
	var out []string
	for _, b := range bs {
		for _, q := range b.Requests {
			out = append(out, q.FP)
		}
	}
	return out
}

// sizes returns the number of requests of each batch.
func sizes(bs []hcf.Batch) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = len(b.Requests)
	}
	return out
}

func ids(bs []hcf.Batch) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

// reqs returns requests with fingerprints prefix0…prefix(n-1) and priority p.
func reqs(prefix string, n, p int) []hcf.Request {
	out := make([]hcf.Request, n)
	for i := range out {
		out[i] = hcf.Request{FP: fmt.Sprintf("%s%04d", prefix, i), P: p}
	}
	return out
}

// raw makes a json.RawMessage of s, nil for "".
func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// cmpRaw compares JSON byte for byte, nil and empty alike.
var cmpRaw = cmp.Comparer(func(a, b json.RawMessage) bool { return string(a) == string(b) })

func testSeed(t *testing.T, h Harness) {
	s := h.New(t, Clock(ExampleMillis...))
	ctx := t.Context()
	sl := hcf.Slot{Project: "78", Frontier: "test", Name: "example.com"}

	// The first example, in a slot of its own.
	add(t, s, hcf.Slot{Project: "78", Frontier: "first", Name: "example.com"}, 1, hcf.Request{FP: "/some/path.html"})

	s = h.New(t, Clock(ExampleMillis...))
	add(t, s, sl, 2, hcf.Request{FP: "/"}, hcf.Request{FP: "page1.html", P: 1, QData: raw(`{"depth":1}`)})
	want := []hcf.Batch{
		{ID: "00013967d8af7b0001", Requests: []hcf.Queued{{FP: "/"}}},
		{ID: "01013967d8af7e0001", Requests: []hcf.Queued{{FP: "page1.html", QData: raw(`{"depth":1}`)}}},
	}
	if diff := cmp.Diff(want, batches(t, s, sl, 0), cmpRaw); diff != "" {
		t.Fatalf("Batches after the documented add (-want +got):\n%s", diff)
	}
	// Reading does not delete.
	if diff := cmp.Diff(want, batches(t, s, sl, 0), cmpRaw); diff != "" {
		t.Fatalf("Batches read again (-want +got):\n%s", diff)
	}
	deleteBatches(t, s, sl, "00013967d8af7b0001")
	if diff := cmp.Diff(want[1:], batches(t, s, sl, 0), cmpRaw); diff != "" {
		t.Fatalf("Batches after deleting the first (-want +got):\n%s", diff)
	}
	wantFP := []hcf.Fingerprint{{FP: "/"}, {FP: "page1.html"}}
	if diff := cmp.Diff(wantFP, fingerprints(t, s, sl), cmpRaw); diff != "" {
		t.Fatalf("Fingerprints (-want +got):\n%s", diff)
	}
	if err := s.DeleteSlot(ctx, sl); err != nil {
		t.Fatalf("DeleteSlot(%v) error: %v", sl, err)
	}
	if got := batches(t, s, sl, 0); len(got) != 0 {
		t.Errorf("Batches after DeleteSlot = %v, want none", got)
	}
	if got := fingerprints(t, s, sl); len(got) != 0 {
		t.Errorf("Fingerprints after DeleteSlot = %v, want none", got)
	}
}

func testDedupe(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	add(t, s, sl, 2, hcf.Request{FP: "a"}, hcf.Request{FP: "b"})
	add(t, s, sl, 1, hcf.Request{FP: "b", QData: raw(`"second"`)}, hcf.Request{FP: "c"})
	// Inside one call a fingerprint counts once and its first occurrence wins.
	add(t, s, sl, 2,
		hcf.Request{FP: "d", QData: raw(`1`), FData: raw(`"first"`)},
		hcf.Request{FP: "d", QData: raw(`2`), FData: raw(`"second"`), P: 3},
		hcf.Request{FP: "e"},
		hcf.Request{FP: "a"})
	want := []string{"a", "b", "c", "d", "e"}
	if diff := cmp.Diff(want, fps(batches(t, s, sl, 0))); diff != "" {
		t.Errorf("queued fingerprints (-want +got):\n%s", diff)
	}
	var d hcf.Queued
	for _, b := range batches(t, s, sl, 0) {
		for _, q := range b.Requests {
			if q.FP == "d" {
				d = q
			}
		}
	}
	if string(d.QData) != "1" {
		t.Errorf("qdata of d = %s, want 1 (first occurrence)", d.QData)
	}
	wantFP := []hcf.Fingerprint{{FP: "a"}, {FP: "b"}, {FP: "c"}, {FP: "d", FData: raw(`"first"`)}, {FP: "e"}}
	if diff := cmp.Diff(wantFP, fingerprints(t, s, sl), cmpRaw); diff != "" {
		t.Errorf("Fingerprints (-want +got):\n%s", diff)
	}
}

func testDedupeAfterDelete(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	add(t, s, sl, 3, reqs("u", 3, 0)...)
	deleteBatches(t, s, sl, ids(batches(t, s, sl, 0))...)
	if got := batches(t, s, sl, 0); len(got) != 0 {
		t.Fatalf("Batches after deleting all = %v, want none", got)
	}
	add(t, s, sl, 1, append(reqs("u", 3, 0), hcf.Request{FP: "v"})...)
	if diff := cmp.Diff([]string{"v"}, fps(batches(t, s, sl, 0))); diff != "" {
		t.Errorf("queued after re-adding deleted fingerprints (-want +got):\n%s", diff)
	}
}

func testOrdering(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	add(t, s, sl, 4,
		hcf.Request{FP: "x1", P: 2},
		hcf.Request{FP: "y1", P: 0},
		hcf.Request{FP: "z1", P: 1},
		hcf.Request{FP: "y2", P: 0})
	add(t, s, sl, 3,
		hcf.Request{FP: "z2", P: 1},
		hcf.Request{FP: "y3", P: 0},
		hcf.Request{FP: "w1", P: 255})
	got := batches(t, s, sl, 0)
	want := [][]string{{"y1", "y2"}, {"y3"}, {"z1"}, {"z2"}, {"x1"}, {"w1"}}
	var gotFPs [][]string
	for _, b := range got {
		gotFPs = append(gotFPs, fps([]hcf.Batch{b}))
	}
	if diff := cmp.Diff(want, gotFPs); diff != "" {
		t.Fatalf("batches in read order (-want +got):\n%s", diff)
	}
	wantP := []int{0, 0, 1, 1, 2, 255}
	for i, b := range got {
		p, _, _, ok := hcf.ParseBatchID(b.ID)
		if !ok || p != wantP[i] {
			t.Errorf("ParseBatchID(%q) = p %d, ok %v, want p %d", b.ID, p, ok, wantP[i])
		}
	}
	if !slices.IsSorted(ids(got)) {
		t.Errorf("batch ids %q are not sorted", ids(got))
	}
	if got := len(slices.Compact(slices.Clone(ids(got)))); got != len(want) {
		t.Errorf("batch ids %q are not distinct", ids(batches(t, s, sl, 0)))
	}
}

func testBatchSize(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	add(t, s, sl, 250, reqs("a", 250, 0)...)
	// Batches are formed per call: later calls never fill earlier batches.
	add(t, s, sl, 30, reqs("b", 30, 0)...)
	add(t, s, sl, 30, reqs("c", 30, 0)...)
	got := batches(t, s, sl, 0)
	if diff := cmp.Diff([]int{100, 100, 50, 30, 30}, sizes(got)); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	want := append(append(fps([]hcf.Batch{{Requests: queued(reqs("a", 250, 0))}}),
		fps([]hcf.Batch{{Requests: queued(reqs("b", 30, 0))}})...),
		fps([]hcf.Batch{{Requests: queued(reqs("c", 30, 0))}})...)
	if diff := cmp.Diff(want, fps(got)); diff != "" {
		t.Errorf("requests in read order (-want +got):\n%s", diff)
	}
}

func queued(rs []hcf.Request) []hcf.Queued {
	out := make([]hcf.Queued, len(rs))
	for i, r := range rs {
		out[i] = hcf.Queued{FP: r.FP, QData: r.QData}
	}
	return out
}

func testMinCount(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	add(t, s, sl, 250, reqs("a", 250, 0)...)
	for _, p := range []string{"b", "c", "d"} {
		add(t, s, sl, 10, reqs(p, 10, 0)...)
	}
	// Batches hold 100, 100, 50, 10, 10, 10.
	for _, tc := range []struct {
		mincount int
		want     []int
	}{
		{-1, []int{100, 100, 50, 10, 10, 10}},
		{0, []int{100, 100, 50, 10, 10, 10}},
		{1, []int{100}},
		{100, []int{100}},
		{101, []int{100, 100}},
		{250, []int{100, 100, 50}},
		{251, []int{100, 100, 50, 10}},
		{270, []int{100, 100, 50, 10, 10}},
		{280, []int{100, 100, 50, 10, 10, 10}},
		{1000, []int{100, 100, 50, 10, 10, 10}},
	} {
		got := batches(t, s, sl, tc.mincount)
		if diff := cmp.Diff(tc.want, sizes(got)); diff != "" {
			t.Errorf("Batches(mincount %d) sizes (-want +got):\n%s", tc.mincount, diff)
		}
		n := len(fps(got))
		if tc.mincount > 0 && tc.mincount <= 280 && (n < tc.mincount || n >= tc.mincount+hcf.MaxBatch) {
			t.Errorf("Batches(mincount %d) returned %d requests, want at least %d and less than %d", tc.mincount, n, tc.mincount, tc.mincount+hcf.MaxBatch)
		}
	}
}

func testDeleteBatches(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	other := hcf.Slot{Project: sl.Project, Frontier: sl.Frontier, Name: "other.example"}
	for i := range 5 {
		add(t, s, sl, 1, hcf.Request{FP: fmt.Sprint("q", i)})
	}
	add(t, s, other, 1, hcf.Request{FP: "o"})
	all := ids(batches(t, s, sl, 0))
	if len(all) != 5 {
		t.Fatalf("Batches = %d, want 5", len(all))
	}
	otherIDs := ids(batches(t, s, other, 0))
	// Unknown, malformed and other slots' ids are ignored; repeats are fine.
	deleteBatches(t, s, sl, all[0], all[2], "ff0000000000000001", "not-an-id", strings.ToUpper(all[1]), "", all[0], otherIDs[0])
	if diff := cmp.Diff([]string{all[1], all[3], all[4]}, ids(batches(t, s, sl, 0))); diff != "" {
		t.Errorf("ids after delete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(otherIDs, ids(batches(t, s, other, 0))); diff != "" {
		t.Errorf("other slot's ids after delete (-want +got):\n%s", diff)
	}
	deleteBatches(t, s, sl)
	deleteBatches(t, s, sl, all...)
	if got := batches(t, s, sl, 0); len(got) != 0 {
		t.Errorf("Batches after deleting all = %v, want none", got)
	}
	// The fingerprints stay.
	if got := len(fingerprints(t, s, sl)); got != 5 {
		t.Errorf("Fingerprints after deleting batches = %d, want 5", got)
	}
}

func testData(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	const q = `{"b":1,"a":[1.50,"\u00e9<&>",null,true],"c":{"d":"e\nf"}}`
	const f = `[1e3,"x",{"z":{}}]`
	add(t, s, sl, 4,
		hcf.Request{FP: "data", QData: raw(q), FData: raw(f)},
		hcf.Request{FP: "null", QData: raw("null"), FData: raw("null")},
		hcf.Request{FP: "str", QData: raw(`"s"`), FData: raw(`0`)},
		hcf.Request{FP: "weird \"fp\"\n\t<é>\u2028"})
	wantQ := []hcf.Queued{{FP: "data", QData: raw(q)}, {FP: "null"}, {FP: "str", QData: raw(`"s"`)}, {FP: "weird \"fp\"\n\t<é>\u2028"}}
	if diff := cmp.Diff(wantQ, batches(t, s, sl, 0)[0].Requests, cmpRaw); diff != "" {
		t.Errorf("queued requests (-want +got):\n%s", diff)
	}
	wantF := []hcf.Fingerprint{{FP: "data", FData: raw(f)}, {FP: "null"}, {FP: "str", FData: raw(`0`)}, {FP: "weird \"fp\"\n\t<é>\u2028"}}
	if diff := cmp.Diff(wantF, fingerprints(t, s, sl), cmpRaw); diff != "" {
		t.Errorf("Fingerprints (-want +got):\n%s", diff)
	}
}

func testFingerprints(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	in := []string{"b", "a", "B", "é", "a/b", "a.b", "zz", "Z", "0", "~", "a\x00b"}
	var rs []hcf.Request
	for i, fp := range in {
		r := hcf.Request{FP: fp}
		if i%2 == 0 {
			r.FData = raw(fmt.Sprintf(`{"i":%d}`, i))
		}
		rs = append(rs, r)
	}
	// Many more, to cross any page boundary of the implementation.
	rs = append(rs, reqs("m", 2500, 0)...)
	add(t, s, sl, len(rs), rs...)
	var want []hcf.Fingerprint
	for _, r := range rs {
		want = append(want, hcf.Fingerprint{FP: r.FP, FData: r.FData})
	}
	slices.SortFunc(want, func(a, b hcf.Fingerprint) int { return strings.Compare(a.FP, b.FP) })
	if diff := cmp.Diff(want, fingerprints(t, s, sl), cmpRaw); diff != "" {
		t.Errorf("Fingerprints (-want +got):\n%s", diff)
	}
}

func testDeleteSlot(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	keep := hcf.Slot{Project: sl.Project, Frontier: sl.Frontier, Name: "keep.example"}
	add(t, s, sl, 1200, reqs("d", 1200, 1)...)
	add(t, s, keep, 3, reqs("d", 3, 0)...)
	if err := s.DeleteSlot(t.Context(), sl); err != nil {
		t.Fatalf("DeleteSlot(%v) error: %v", sl, err)
	}
	if got := batches(t, s, sl, 0); len(got) != 0 {
		t.Errorf("Batches after DeleteSlot = %d batches, want none", len(got))
	}
	if got := fingerprints(t, s, sl); len(got) != 0 {
		t.Errorf("Fingerprints after DeleteSlot = %d, want none", len(got))
	}
	slots, err := s.Slots(t.Context(), sl.Project, sl.Frontier)
	if err != nil {
		t.Fatalf("Slots error: %v", err)
	}
	if diff := cmp.Diff([]string{keep.Name}, slots); diff != "" {
		t.Errorf("Slots after DeleteSlot (-want +got):\n%s", diff)
	}
	if got := len(fps(batches(t, s, keep, 0))); got != 3 {
		t.Errorf("other slot's queue after DeleteSlot = %d requests, want 3", got)
	}
	// The fingerprints are forgotten: adding them again enqueues them.
	add(t, s, sl, 2, reqs("d", 2, 0)...)
	if err := s.DeleteSlot(t.Context(), hcf.Slot{Project: sl.Project, Frontier: "absent", Name: "absent"}); err != nil {
		t.Errorf("DeleteSlot(absent) error: %v", err)
	}
}

func testLists(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	p := newProject()
	for _, x := range []struct{ frontier, slot string }{
		{"news", "b.example"}, {"news", "a.example"}, {"archive", "x.example"}, {"news", "a.example"}, {"Zeta", "z"},
	} {
		if _, err := s.Add(t.Context(), hcf.Slot{Project: p, Frontier: x.frontier, Name: x.slot}, reqs(x.slot, 2, 0)); err != nil {
			t.Fatalf("Add error: %v", err)
		}
	}
	add(t, s, hcf.Slot{Project: newProject(), Frontier: "elsewhere", Name: "e"}, 1, hcf.Request{FP: "e"})
	fr, err := s.Frontiers(t.Context(), p)
	if err != nil {
		t.Fatalf("Frontiers(%q) error: %v", p, err)
	}
	if diff := cmp.Diff([]string{"Zeta", "archive", "news"}, fr); diff != "" {
		t.Errorf("Frontiers(%q) (-want +got):\n%s", p, diff)
	}
	sl, err := s.Slots(t.Context(), p, "news")
	if err != nil {
		t.Fatalf("Slots(%q, news) error: %v", p, err)
	}
	if diff := cmp.Diff([]string{"a.example", "b.example"}, sl); diff != "" {
		t.Errorf("Slots(%q, news) (-want +got):\n%s", p, diff)
	}
	none, err := s.Frontiers(t.Context(), newProject())
	if err != nil || len(none) != 0 {
		t.Errorf("Frontiers(unknown project) = %q, %v, want none", none, err)
	}
	none, err = s.Slots(t.Context(), p, "unknown")
	if err != nil || len(none) != 0 {
		t.Errorf("Slots(unknown frontier) = %q, %v, want none", none, err)
	}
	// A slot whose queue is empty is still a slot.
	news := hcf.Slot{Project: p, Frontier: "news", Name: "a.example"}
	deleteBatches(t, s, news, ids(batches(t, s, news, 0))...)
	sl, err = s.Slots(t.Context(), p, "news")
	if err != nil {
		t.Fatalf("Slots(%q, news) error: %v", p, err)
	}
	if diff := cmp.Diff([]string{"a.example", "b.example"}, sl); diff != "" {
		t.Errorf("Slots(%q, news) after emptying a queue (-want +got):\n%s", p, diff)
	}
	for _, name := range []string{"z"} {
		if err := s.DeleteSlot(t.Context(), hcf.Slot{Project: p, Frontier: "Zeta", Name: name}); err != nil {
			t.Fatalf("DeleteSlot error: %v", err)
		}
	}
	fr, err = s.Frontiers(t.Context(), p)
	if err != nil {
		t.Fatalf("Frontiers(%q) error: %v", p, err)
	}
	if diff := cmp.Diff([]string{"archive", "news"}, fr); diff != "" {
		t.Errorf("Frontiers(%q) after deleting Zeta's only slot (-want +got):\n%s", p, diff)
	}
}

func testIsolation(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	p := newProject()
	slots := []hcf.Slot{
		{Project: p, Frontier: "f", Name: "s"},
		{Project: p, Frontier: "f", Name: "s2"},
		{Project: p, Frontier: "f2", Name: "s"},
		{Project: newProject(), Frontier: "f", Name: "s"},
		// Names that a careless key encoding would confuse with the first.
		{Project: p + "/f", Frontier: "s", Name: "x"},
		{Project: p, Frontier: "f/s", Name: "x"},
	}
	for i, sl := range slots {
		add(t, s, sl, 2, hcf.Request{FP: "same"}, hcf.Request{FP: fmt.Sprint("own", i)})
	}
	for i, sl := range slots {
		want := []string{"same", fmt.Sprint("own", i)}
		if diff := cmp.Diff(want, fps(batches(t, s, sl, 0))); diff != "" {
			t.Errorf("queue of %v (-want +got):\n%s", sl, diff)
		}
		var got []string
		for _, f := range fingerprints(t, s, sl) {
			got = append(got, f.FP)
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("fingerprints of %v (-want +got):\n%s", sl, diff)
		}
	}
}

func testInvalid(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	long := strings.Repeat("x", hcf.MaxFPBytes+1)
	for _, tc := range []struct {
		name string
		slot hcf.Slot
		reqs []hcf.Request
	}{
		{"empty fp", sl, []hcf.Request{{FP: "ok1"}, {FP: ""}}},
		{"long fp", sl, []hcf.Request{{FP: "ok1"}, {FP: long}}},
		{"negative p", sl, []hcf.Request{{FP: "ok1"}, {FP: "x", P: -1}}},
		{"p too large", sl, []hcf.Request{{FP: "ok1"}, {FP: "x", P: 256}}},
		{"bad qdata", sl, []hcf.Request{{FP: "ok1"}, {FP: "x", QData: raw("{")}}},
		{"bad fdata", sl, []hcf.Request{{FP: "ok1"}, {FP: "x", FData: raw("nul")}}},
		{"empty slot", hcf.Slot{Project: sl.Project, Frontier: "f"}, []hcf.Request{{FP: "ok1"}}},
		{"empty project", hcf.Slot{Frontier: "f", Name: "s"}, []hcf.Request{{FP: "ok1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := s.Add(t.Context(), tc.slot, tc.reqs)
			if !errors.Is(err, hcf.ErrInvalid) {
				t.Errorf("Add(%s) = %d, %v, want ErrInvalid", tc.name, n, err)
			}
		})
	}
	if got := batches(t, s, sl, 0); len(got) != 0 {
		t.Errorf("Batches after invalid adds = %v, want none (nothing applied)", got)
	}
	add(t, s, sl, 1, hcf.Request{FP: "ok1"})
}

func testEmptyAdd(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	add(t, s, sl, 0)
	slots, err := s.Slots(t.Context(), sl.Project, sl.Frontier)
	if err != nil || len(slots) != 0 {
		t.Errorf("Slots after an empty Add = %q, %v, want none", slots, err)
	}
}

func testCallbackError(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	for i := range 3 {
		add(t, s, sl, 1, hcf.Request{FP: fmt.Sprint(i)})
	}
	stop := errors.New("stop")
	calls := 0
	err := s.Batches(t.Context(), sl, 0, func(hcf.Batch) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Batches with a failing callback = %v after %d calls, want %v after 1", err, calls, stop)
	}
	calls = 0
	err = s.Fingerprints(t.Context(), sl, func(hcf.Fingerprint) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Fingerprints with a failing callback = %v after %d calls, want %v after 1", err, calls, stop)
	}
}

func testConcurrentAdd(t *testing.T, h Harness) {
	s := h.New(t, Clock())
	sl := slot()
	const workers, n = 8, 60
	var wg sync.WaitGroup
	counts := make([]int, workers)
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			rs := reqs("c", n, w%3)
			// Different orders, so that the calls overlap differently.
			if w%2 == 1 {
				slices.Reverse(rs)
			}
			counts[w], errs[w] = s.Add(t.Context(), sl, rs)
		})
	}
	wg.Wait()
	total := 0
	for w := range workers {
		if errs[w] != nil {
			t.Fatalf("Add of worker %d error: %v", w, errs[w])
		}
		total += counts[w]
	}
	if total != n {
		t.Errorf("newcounts of %d concurrent Adds of the same %d fingerprints sum to %d, want %d", workers, n, total, n)
	}
	got := fps(batches(t, s, sl, 0))
	slices.Sort(got)
	if diff := cmp.Diff(fps([]hcf.Batch{{Requests: queued(reqs("c", n, 0))}}), got); diff != "" {
		t.Errorf("queued fingerprints (-want +got):\n%s", diff)
	}
	if bs := batches(t, s, sl, 0); !slices.IsSorted(ids(bs)) || len(slices.Compact(slices.Clone(ids(bs)))) != len(bs) {
		t.Errorf("batch ids %q are not sorted and distinct", ids(bs))
	}
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen")
	}
	now := time.Now().UnixMilli()
	s := h.New(t, Clock(now))
	sl := slot()
	add(t, s, sl, 150, reqs("r", 150, 2)...)
	add(t, s, sl, 1, hcf.Request{FP: "first", P: 0, QData: raw(`{"k":[1]}`), FData: raw(`"f"`)})
	before := batches(t, s, sl, 0)
	beforeFP := fingerprints(t, s, sl)
	s = h.Reopen(t, s, Clock(now+1000))
	if diff := cmp.Diff(before, batches(t, s, sl, 0), cmpRaw); diff != "" {
		t.Fatalf("Batches after Reopen (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(beforeFP, fingerprints(t, s, sl), cmpRaw); diff != "" {
		t.Fatalf("Fingerprints after Reopen (-want +got):\n%s", diff)
	}
	// Seen fingerprints stay seen.
	add(t, s, sl, 1, hcf.Request{FP: "r0001", P: 2}, hcf.Request{FP: "later", P: 2})
	got := batches(t, s, sl, 0)
	if diff := cmp.Diff([]string{before[0].ID, before[1].ID, before[2].ID}, ids(got)[:3]); diff != "" {
		t.Errorf("ids after Reopen and Add (-want +got):\n%s", diff)
	}
	if last := got[len(got)-1]; len(last.Requests) != 1 || last.Requests[0].FP != "later" {
		t.Errorf("last batch after Reopen and Add = %v, want the one with \"later\"", last)
	}
}

func testReopenClockBehind(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen")
	}
	now := time.Now().UnixMilli()
	s := h.New(t, Clock(now))
	sl := slot()
	add(t, s, sl, 1, hcf.Request{FP: "before"})
	// The clock went back an hour across the restart: new batches must
	// still be read after the old ones of their priority.
	s = h.Reopen(t, s, Clock(now-3600_000))
	add(t, s, sl, 1, hcf.Request{FP: "after"})
	if diff := cmp.Diff([]string{"before", "after"}, fps(batches(t, s, sl, 0))); diff != "" {
		t.Errorf("queue after a restart with the clock behind (-want +got):\n%s", diff)
	}
}
