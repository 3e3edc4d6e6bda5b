package txindextest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// testHostsWithPorts: a record's host holds the port when it is not the
// scheme's default (as the frontier writes it), and the hosts report and
// the host filter keep two servers of one host name apart.
func testHostsWithPorts(t *testing.T, h Harness[reader]) {
	x := h.New(t)
	crawl := newCrawlID(t)
	now := time.Now()
	var recs []txindex.Record
	for _, hu := range [][2]string{{"a.example", "http://a.example/1"}, {"a.example", "http://a.example/2"},
		{"a.example:8080", "http://a.example:8080/1"}, {"a.example:8080", "http://a.example:8080/2"},
		{"a.example:8080", "http://a.example:8080/3"}} {
		r := rec(crawl, hu[1], contracts.ToBeLoaded, now)
		r.Host = hu[0]
		recs = append(recs, r)
	}
	mustCreate(t, x, recs...)
	got, err := x.HostsReport(t.Context(), crawl, 10)
	if err != nil {
		t.Fatalf("HostsReport: %v", err)
	}
	want := []txindex.HostRow{{Host: "a.example:8080", URLs: 3}, {Host: "a.example", URLs: 2}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("HostsReport of two ports of one host (-want +got):\n%s", diff)
	}
	if found := findAll(t, x, crawl, txindex.Filter{Host: "a.example:8080"}, 10); len(found) != 3 {
		t.Errorf("Find(host a.example:8080) = %d records, want 3", len(found))
	}
}
