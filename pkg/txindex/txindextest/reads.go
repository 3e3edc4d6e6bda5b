package txindextest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The tests of txindex.Reads: List, the crawl log (Find) and the four
// reports.

func int64p(n int64) *int64 { return &n }

// findAll follows Find's cursor to the end in pages of limit.
func findAll(t *testing.T, x txindex.Reads, crawl string, f txindex.Filter, limit int) []txindex.Record {
	t.Helper()
	var out []txindex.Record
	after := ""
	for page := 0; ; page++ {
		if page > 100000 {
			t.Fatalf("Find(%+v) does not end", f)
		}
		rs, err := x.Find(t.Context(), crawl, f, after, limit)
		if err != nil {
			t.Fatalf("Find(%+v, after %q) error: %v", f, after, err)
		}
		if len(rs) > limit {
			t.Fatalf("Find(limit %d) returned %d records", limit, len(rs))
		}
		out = append(out, rs...)
		if len(rs) < limit {
			return out
		}
		after = rs[len(rs)-1].Key
	}
}

// outcome is what a test crawl did to one URL.
type outcome struct {
	host   string
	status contracts.Status
	reason string
	code   int
	mime   string
	bytes  *int64
	render string
}

// makeCrawl creates the records of outcomes in crawl and moves them to
// their outcome through Transition, as the loader does, and returns them
// as Get reads them.
func makeCrawl(t *testing.T, x txindex.Pipeline, crawl string, outs []outcome) []txindex.Record {
	t.Helper()
	now := time.Now()
	var recs []txindex.Record
	var ts []txindex.Transition
	for i, o := range outs {
		r := rec(crawl, fmt.Sprintf("http://%s/p%d", o.host, i), contracts.ToBeLoaded, now)
		recs = append(recs, r)
		if o.status != contracts.ToBeLoaded {
			ts = append(ts, txindex.Transition{Key: r.Key, From: contracts.ToBeLoaded, To: o.status,
				Error: o.reason, HTTPStatus: o.code, MIMEType: o.mime, Bytes: o.bytes, Render: o.render})
		}
	}
	mustCreate(t, x, recs...)
	applied, err := x.Transition(t.Context(), ts)
	if err != nil || countTrue(applied) != len(ts) {
		t.Fatalf("Transition(%d) = %d applied, %v", len(ts), countTrue(applied), err)
	}
	for i := range recs {
		recs[i] = mustGet(t, x, recs[i].Key)
		if recs[i].Render != outs[i].render {
			t.Fatalf("Get(%q).Render = %q, want %q", recs[i].Key, recs[i].Render, outs[i].render)
		}
	}
	return recs
}

// sampleOutcomes is a small crawl of three hosts with every kind of
// outcome, including fetched pages without a media type and pages rendered
// in a headless browser.
func sampleOutcomes() []outcome {
	var outs []outcome
	for i := range 40 {
		host := []string{"a.example", "b.example", "c.example"}[i%3]
		switch i % 8 {
		case 0:
			outs = append(outs, outcome{host: host, status: contracts.ToBeParsed, code: 200, mime: "text/html", bytes: int64p(int64(1000 + i))})
		case 1:
			outs = append(outs, outcome{host: host, status: contracts.ToBeParsed, code: 200, mime: "text/html", bytes: int64p(int64(1000 + i)),
				render: "auto: scripts and 12 characters of text"})
		case 2:
			outs = append(outs, outcome{host: host, status: contracts.Failed, reason: "HTTP 404", code: 404, mime: "text/html", bytes: int64p(17)})
		case 3:
			outs = append(outs, outcome{host: host, status: contracts.Failed, reason: "robots.txt disallowed"})
		case 4:
			outs = append(outs, outcome{host: host, status: contracts.Failed, reason: "fetch: connection refused"})
		case 5:
			outs = append(outs, outcome{host: host, status: contracts.ToBeParsed, code: 200, bytes: int64p(0)})
		case 6:
			outs = append(outs, outcome{host: host, status: contracts.ToBeParsed, code: 200, mime: "application/pdf", bytes: int64p(int64(50000 + i))})
		default:
			outs = append(outs, outcome{host: host, status: contracts.ToBeLoaded})
		}
	}
	// URLs a cancel left unfetched.
	outs = append(outs, outcome{host: "a.example", status: contracts.Failed, reason: contracts.ReasonCancelled},
		outcome{host: "b.example", status: contracts.Failed, reason: contracts.ReasonCancelled})
	return outs
}

func testFind(t *testing.T, h Harness[reader]) {
	x := h.New(t)
	crawl, other := newCrawlID(t), newCrawlID(t)
	recs := makeCrawl(t, x, crawl, sampleOutcomes())
	makeCrawl(t, x, other, sampleOutcomes()[:5])
	for _, tc := range []struct {
		name  string
		f     txindex.Filter
		limit int
	}{
		{"everything", txindex.Filter{}, 7},
		{"status", txindex.Filter{Status: contracts.Failed}, 4},
		{"host", txindex.Filter{Host: "b.example"}, 3},
		{"reason", txindex.Filter{Reason: "robots.txt disallowed"}, 2},
		{"status and host", txindex.Filter{Status: contracts.ToBeParsed, Host: "a.example"}, 2},
		{"all three", txindex.Filter{Status: contracts.Failed, Host: "c.example", Reason: "HTTP 404"}, 1},
		{"no match", txindex.Filter{Host: "none.example"}, 5},
	} {
		var want []txindex.Record
		for _, r := range recs {
			if (tc.f.Status == "" || r.Status == tc.f.Status) && (tc.f.Host == "" || r.Host == tc.f.Host) &&
				(tc.f.Reason == "" || r.Error == tc.f.Reason) {
				want = append(want, r)
			}
		}
		sort.Slice(want, func(i, j int) bool { return want[i].Key < want[j].Key })
		got := findAll(t, x, crawl, tc.f, tc.limit)
		// Find returns records as Get does, history included.
		if diff := cmp.Diff(want, got, cmpTime[0], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Find (-want +got):\n%s", tc.name, diff)
		}
		if n, err := x.CountMatching(t.Context(), crawl, tc.f); err != nil || n != int64(len(want)) {
			t.Errorf("%s: CountMatching = %d, %v, want %d", tc.name, n, err, len(want))
		}
	}
}

// testFindStable lists a crawl in small pages while other goroutines
// create records and change statuses: every record that existed when the
// listing began comes exactly once.
func testFindStable(t *testing.T, h Harness[reader]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	now := time.Now()
	var initial []txindex.Record
	for i := range 300 {
		initial = append(initial, rec(crawl, fmt.Sprintf("http://s.example/%d", i), contracts.ToBeLoaded, now))
	}
	mustCreate(t, x, initial...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	// The writers stop after a while, so that the listing, which sees the
	// new records after its cursor, ends on a slow store too.
	go func() { // new records, keys all over the key space
		defer wg.Done()
		for i := range 30 {
			select {
			case <-stop:
				return
			default:
			}
			var batch []txindex.Record
			for j := range 10 {
				batch = append(batch, rec(crawl, fmt.Sprintf("http://s.example/new/%d/%d", i, j), contracts.ToBeLoaded, now))
			}
			if _, err := x.Create(t.Context(), batch); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // status changes of the listed records
		defer wg.Done()
		for i := range 2 * len(initial) {
			select {
			case <-stop:
				return
			default:
			}
			r := initial[i%len(initial)]
			from, to := contracts.ToBeLoaded, contracts.ToBeParsed
			if (i/len(initial))%2 == 1 {
				from, to = to, from
			}
			if _, err := x.Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: from, To: to}}); err != nil {
				errs <- err
				return
			}
		}
	}()
	var got []txindex.Record
	after := ""
	for {
		rs, err := x.Find(t.Context(), crawl, txindex.Filter{}, after, 20)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("Find(after %q) error: %v", after, err)
		}
		got = append(got, rs...)
		if len(rs) < 20 {
			break
		}
		after = rs[len(rs)-1].Key
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write: %v", err)
	}
	seen := map[string]int{}
	for _, r := range got {
		seen[r.Key]++
		if seen[r.Key] == 2 {
			t.Errorf("record %q listed twice", r.URL)
		}
	}
	for _, r := range initial {
		if seen[r.Key] == 0 {
			t.Errorf("record %q, there before the listing, not listed", r.URL)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b txindex.Record) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("listing not in key order")
	}
}

// testReports compares each report with what the records of a full
// listing say, and with the crawl as it was made.
func testReports(t *testing.T, h Harness[reader]) {
	x := h.New(t)
	crawl, other := newCrawlID(t), newCrawlID(t)
	outs := sampleOutcomes()
	makeCrawl(t, x, crawl, outs)
	makeCrawl(t, x, other, outs[:9])
	all := findAll(t, x, crawl, txindex.Filter{}, 1000)
	if len(all) != len(outs) {
		t.Fatalf("listing has %d records, the crawl made %d", len(all), len(outs))
	}
	want := Expected(all)

	hosts, err := x.HostsReport(t.Context(), crawl, 100)
	if err != nil {
		t.Fatalf("HostsReport: %v", err)
	}
	if diff := cmp.Diff(want.Hosts, hosts, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("HostsReport (-want +got):\n%s", diff)
	}
	hosts, err = x.HostsReport(t.Context(), crawl, 2)
	if err != nil || len(hosts) != 2 {
		t.Errorf("HostsReport(limit 2) = %d rows, %v, want 2", len(hosts), err)
	}
	mimes, err := x.MIMETypesReport(t.Context(), crawl, 100)
	if err != nil {
		t.Fatalf("MIMETypesReport: %v", err)
	}
	if diff := cmp.Diff(want.MIMETypes, mimes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("MIMETypesReport (-want +got):\n%s", diff)
	}
	codes, err := x.StatusCodesReport(t.Context(), crawl)
	if err != nil {
		t.Fatalf("StatusCodesReport: %v", err)
	}
	if diff := cmp.Diff(want.StatusCodes, codes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("StatusCodesReport (-want +got):\n%s", diff)
	}
	reasons, err := x.FailureReasonsReport(t.Context(), crawl, 100)
	if err != nil {
		t.Fatalf("FailureReasonsReport: %v", err)
	}
	if diff := cmp.Diff(want.FailureReasons, reasons, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("FailureReasonsReport (-want +got):\n%s", diff)
	}
	// And against the crawl as made, independently of the index: 15 of the
	// first 40 URLs failed, 5 of each reason, and the 2 more were cancelled.
	var failed int64
	for _, r := range reasons {
		failed += r.Count
	}
	if failed != 17 || len(reasons) != 4 {
		t.Errorf("failure reasons count %d records in %d reasons, want 17 in 4", failed, len(reasons))
	}
	var hostFailed int64
	for _, h := range want.Hosts {
		hostFailed += h.Failed
	}
	if hostFailed != 15 {
		t.Errorf("hosts report counts %d failed URLs, want 15: the 2 cancelled ones are no failure of their hosts", hostFailed)
	}
	for _, r := range []func() (int, error){
		func() (int, error) { rs, err := x.HostsReport(t.Context(), newCrawlID(t), 10); return len(rs), err },
		func() (int, error) { rs, err := x.StatusCodesReport(t.Context(), newCrawlID(t)); return len(rs), err },
	} {
		if n, err := r(); n != 0 || err != nil {
			t.Errorf("report of an unknown crawl = %d rows, %v, want 0, nil", n, err)
		}
	}
}

// Reports holds the four reports of one crawl.
type Reports struct {
	Hosts          []txindex.HostRow
	MIMETypes      []txindex.MIMERow
	StatusCodes    []txindex.StatusCodeRow
	FailureReasons []txindex.ReasonRow
}

// Expected computes, in Go, the reports that the index must compute from
// recs, every record of one crawl, without limits. End-to-end tests use it
// on a full listing too.
func Expected(recs []txindex.Record) Reports {
	var out Reports
	hosts := map[string]*txindex.HostRow{}
	mimes := map[string]*txindex.MIMERow{}
	codes := map[int]int64{}
	reasons := map[string]*txindex.ReasonRow{}
	byKey := slices.Clone(recs)
	sort.Slice(byKey, func(i, j int) bool { return byKey[i].Key < byKey[j].Key })
	for _, r := range byKey {
		h := hosts[r.Host]
		if h == nil {
			h = &txindex.HostRow{Host: r.Host, StatusCodes: map[int]int64{}}
			hosts[r.Host] = h
		}
		h.URLs++
		if r.Bytes != nil {
			h.Bytes += *r.Bytes
		}
		if r.HTTPStatus != 0 {
			h.Fetched++
			h.StatusCodes[r.HTTPStatus]++
			m := mimes[r.MIMEType]
			if m == nil {
				m = &txindex.MIMERow{MIMEType: r.MIMEType}
				mimes[r.MIMEType] = m
			}
			m.Count++
			if r.Bytes != nil {
				m.Bytes += *r.Bytes
			}
		}
		if r.HTTPStatus != 0 || r.Status.Terminal() {
			codes[r.HTTPStatus]++ // code 0: settled without a response
		}
		if r.Status == contracts.Failed {
			if r.Error != contracts.ReasonCancelled {
				h.Failed++ // a cancel's unfetched URL is no failure of its host
			}
			rr := reasons[r.Error]
			if rr == nil {
				rr = &txindex.ReasonRow{Reason: r.Error}
				reasons[r.Error] = rr
			}
			rr.Count++
			if len(rr.SampleURLs) < txindex.MaxSamples {
				rr.SampleURLs = append(rr.SampleURLs, r.URL)
			}
		}
	}
	for _, h := range hosts {
		out.Hosts = append(out.Hosts, *h)
	}
	sort.Slice(out.Hosts, func(i, j int) bool {
		a, b := out.Hosts[i], out.Hosts[j]
		return a.URLs > b.URLs || a.URLs == b.URLs && a.Host < b.Host
	})
	for _, m := range mimes {
		out.MIMETypes = append(out.MIMETypes, *m)
	}
	sort.Slice(out.MIMETypes, func(i, j int) bool {
		a, b := out.MIMETypes[i], out.MIMETypes[j]
		return a.Count > b.Count || a.Count == b.Count && a.MIMEType < b.MIMEType
	})
	for c, n := range codes {
		out.StatusCodes = append(out.StatusCodes, txindex.StatusCodeRow{StatusCode: c, Count: n})
	}
	sort.Slice(out.StatusCodes, func(i, j int) bool { return out.StatusCodes[i].StatusCode < out.StatusCodes[j].StatusCode })
	for _, r := range reasons {
		out.FailureReasons = append(out.FailureReasons, *r)
	}
	sort.Slice(out.FailureReasons, func(i, j int) bool {
		a, b := out.FailureReasons[i], out.FailureReasons[j]
		return a.Count > b.Count || a.Count == b.Count && a.Reason < b.Reason
	})
	return out
}

func testList(t *testing.T, h Harness[reader]) {
	x := h.New(t)
	crawl, other := newCrawlID(t), newCrawlID(t)
	now := time.Now()
	var recs []txindex.Record
	for i := range 23 {
		s := contracts.Statuses[i%len(contracts.Statuses)]
		recs = append(recs, rec(crawl, fmt.Sprintf("http://l.example/%d", i), s, now))
	}
	mustCreate(t, x, recs...)
	mustCreate(t, x, rec(other, "http://l.example/0", contracts.ToBeLoaded, now))

	for _, tc := range []struct {
		name   string
		status contracts.Status
		limit  int
	}{
		{"all statuses", "", 5},
		{"all in one page", "", 100},
		{"one status", contracts.ToBeLoaded, 2},
		{"terminal status", contracts.Failed, 3},
	} {
		var want []string
		for _, r := range recs {
			if tc.status == "" || r.Status == tc.status {
				want = append(want, r.Key)
			}
		}
		slices.Sort(want)
		var got []string
		after := ""
		for page := 0; ; page++ {
			if page > len(recs)+1 {
				t.Fatalf("%s: List does not end", tc.name)
			}
			rs, err := x.List(t.Context(), crawl, tc.status, after, tc.limit)
			if err != nil {
				t.Fatalf("%s: List(after %q) error: %v", tc.name, after, err)
			}
			if len(rs) > tc.limit {
				t.Fatalf("%s: List(limit %d) returned %d records", tc.name, tc.limit, len(rs))
			}
			for _, r := range rs {
				if r.CrawlID != crawl || (tc.status != "" && r.Status != tc.status) {
					t.Errorf("%s: List returned %q of crawl %q in %q", tc.name, r.Key, r.CrawlID, r.Status)
				}
				got = append(got, r.Key)
			}
			if len(rs) < tc.limit {
				break
			}
			after = rs[len(rs)-1].Key
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: keys of all pages (-want +got):\n%s", tc.name, diff)
		}
	}

	rs, err := x.List(t.Context(), crawl, contracts.ToBeLoaded, "", 1)
	if err != nil || len(rs) != 1 {
		t.Fatalf("List(limit 1) = %d records, %v, want 1, nil", len(rs), err)
	}
	if diff := cmp.Diff(mustGet(t, x, rs[0].Key), rs[0], cmpTime); diff != "" {
		t.Errorf("List record differs from Get (-Get +List):\n%s", diff)
	}
	rs, err = x.List(t.Context(), newCrawlID(t), "", "", 10)
	if err != nil || len(rs) != 0 {
		t.Errorf("List(unknown crawl) = %d records, %v, want 0, nil", len(rs), err)
	}
}
