// Package txindextest is the conformance suite of txindex.Index: every
// implementation, embedded or remote, must pass Run.
//
// The suite has one section per part of the index, each usable alone
// against a factory of any type that has that part (and the Pipeline, whose
// writes make the records the other sections read): RunPipeline,
// RunScheduling, RunReads and RunOwners. Run runs the four.
//
// The suite is written for stores shared with other tests and earlier runs:
// every test uses crawl ids and loader shards of its own (the reads of
// Owners span crawls, and a shard count no store's loaders use names
// shards of no one else), and Stale, which spans crawls and shards, is
// checked against records whose status times lie in a random stretch of
// the distant past and that are made terminal when the test ends.
package txindextest

import (
	"crypto/rand"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// Harness makes the indices under test: X is what they are, txindex.Index
// for Run, or a type with the parts that a section needs.
type Harness[X any] struct {
	// New returns an index, empty of the test's crawls, closed by the harness
	// when t ends.
	New func(t *testing.T) X
	// Reopen closes x and returns a new index on the same storage. Nil skips
	// the restart tests.
	Reopen func(t *testing.T, x X) X
}

// test is one named test of a section, on indices of type X.
type test[X any] struct {
	name string
	f    func(*testing.T, Harness[X])
}

// The indices the sections test: the pipeline's writes make the records
// that the due check and the reads read.
type (
	scheduler interface {
		txindex.Pipeline
		txindex.Scheduling
	}
	reader interface {
		txindex.Pipeline
		txindex.Reads
	}
	owners interface {
		txindex.Pipeline
		txindex.Owners
	}
)

// Run runs the conformance suite against h: every section.
func Run(t *testing.T, h Harness[txindex.Index]) {
	t.Run("Pipeline", func(t *testing.T) { RunPipeline(t, h) })
	t.Run("Scheduling", func(t *testing.T) { RunScheduling(t, h) })
	t.Run("Reads", func(t *testing.T) { RunReads(t, h) })
	t.Run("Owners", func(t *testing.T) { RunOwners(t, h) })
}

// RunPipeline runs the section of txindex.Pipeline against h: checked and
// idempotent writes, concurrent writers of one record, the outcome, render
// and recrawl fields, the status history, the reads of the pipeline, and
// durability across Reopen.
func RunPipeline[X txindex.Pipeline](t *testing.T, h Harness[X]) {
	run(t, view(h, func(x X) txindex.Pipeline { return x }), []test[txindex.Pipeline]{
		{"CreateOnlyAbsent", testCreateOnlyAbsent},
		{"CreateEmpty", testCreateEmpty},
		{"CreateConcurrentSameKey", testCreateConcurrent},
		{"GetAndGetMany", testGetMany},
		{"Peek", testPeek},
		{"TransitionChecked", testTransitionChecked},
		{"TransitionSetsOutcome", testTransitionOutcome},
		{"TransitionRenewsLease", testTransitionRenew},
		{"TransitionConcurrentSameKey", testTransitionConcurrent},
		{"TransitionIfDepth", testTransitionIfDepth},
		{"LowerDepth", testLowerDepth},
		{"LowerDepthConcurrentSameKey", testLowerDepthConcurrent},
		{"Counts", testCounts},
		{"CountHost", testCountHost},
		{"Stale", testStale},
		{"StaleLeavesOwnedShards", testStaleOwned},
		{"History", testHistory},
		{"Reopen", testReopen},
		{"SitemapFields", testSitemapFields},
		{"RecrawlFields", testRecrawlFields},
		{"RenderField", testRenderField},
	})
}

// RunScheduling runs the section of txindex.Scheduling against h: which
// records are due, in which order, and how the pipeline's writes take them
// in and out of the schedule.
func RunScheduling[X interface {
	txindex.Pipeline
	txindex.Scheduling
}](t *testing.T, h Harness[X]) {
	run(t, view(h, func(x X) scheduler { return x }), []test[scheduler]{
		{"Due", testDue},
		{"DueLeavesWithLowerDepth", testDueLowered},
	})
}

// RunReads runs the section of txindex.Reads against h: listings and their
// pages, the crawl log's filters and its stability under writes, and the
// reports against the records they summarize.
func RunReads[X interface {
	txindex.Pipeline
	txindex.Reads
}](t *testing.T, h Harness[X]) {
	run(t, view(h, func(x X) reader { return x }), []test[reader]{
		{"List", testList},
		{"Find", testFind},
		{"FindStable", testFindStable},
		{"Reports", testReports},
		{"HostsWithPorts", testHostsWithPorts},
	})
}

// view returns h with its indices seen as V, which as converts them to.
func view[V, X any](h Harness[X], as func(X) V) Harness[V] {
	v := Harness[V]{New: func(t *testing.T) V { return as(h.New(t)) }}
	if h.Reopen != nil {
		// The index to reopen is one that v.New made from an X.
		v.Reopen = func(t *testing.T, x V) V { return as(h.Reopen(t, any(x).(X))) }
	}
	return v
}

// run runs tests against h, each as a subtest.
func run[X any](t *testing.T, h Harness[X], tests []test[X]) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

// cmpTime compares times by instant, so that stores may return them in any
// location, and records without their History, which only Get and Find
// must fill (testHistory checks it).
var cmpTime = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmpopts.IgnoreFields(txindex.Record{}, "History"),
}

// newCrawlID returns a crawl id no other test or run uses.
func newCrawlID(t *testing.T) string {
	t.Helper()
	return "txt-" + rand.Text()
}

// at returns a time with millisecond precision, which every store keeps.
func at(t time.Time) time.Time { return t.Truncate(time.Millisecond) }

// rec returns a record of crawlID for rawURL in status s at time ts.
func rec(crawlID, rawURL string, s contracts.Status, ts time.Time) txindex.Record {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	return txindex.Record{
		Key:        txindex.Key(crawlID, rawURL),
		CrawlID:    crawlID,
		URL:        rawURL,
		Host:       u.Hostname(),
		Group:      u.Hostname(),
		Depth:      1,
		Status:     s,
		StatusTime: at(ts),
		CreatedAt:  at(ts),
	}
}

func mustCreate(t *testing.T, x txindex.Pipeline, recs ...txindex.Record) {
	t.Helper()
	created, err := x.Create(t.Context(), recs)
	if err != nil {
		t.Fatalf("Create(%d records) error: %v", len(recs), err)
	}
	for i, c := range created {
		if !c {
			t.Fatalf("Create(%q) = not created, want created", recs[i].Key)
		}
	}
}

func mustGet(t *testing.T, x txindex.Pipeline, key string) txindex.Record {
	t.Helper()
	r, err := x.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q) error: %v", key, err)
	}
	return r
}

func nonZero(m map[contracts.Status]int64) map[contracts.Status]int64 {
	out := map[contracts.Status]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
