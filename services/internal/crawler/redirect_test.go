package crawler

import (
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/embedtest"
)

// TestChainEnd decides the end of redirect chains over records in the
// embedded transaction index. Each case's page is parsed with its record's
// hops and referrer.
func TestChainEnd(t *testing.T) {
	const crawl = "c1"
	u := func(p string) string { return "http://a.test" + p }
	// rec is a record: URL, hops, referrer, status and reason.
	type rec struct {
		url, referrer string
		hops          int
		status        contracts.Status
		reason        string
	}
	cases := []struct {
		name     string
		recs     []rec
		page     string
		hops     int
		referrer string
		target   string
		want     string
	}{
		{name: "a new target within the limit", page: u("/r3"), hops: 3, referrer: u("/r2"), target: u("/r4")},
		{name: "one hop over the limit", page: u("/r10"), hops: 10, referrer: u("/r9"), target: u("/r11"),
			want: "too many redirects (10)"},
		{name: "the page itself", page: u("/self"), target: u("/self"),
			want: "redirect loop: back to " + u("/self") + " after 1 hop"},
		{name: "back to the URL that redirected here", page: u("/b"), hops: 1, referrer: u("/a"), target: u("/a"),
			recs: []rec{{url: u("/a"), status: contracts.Redirected, reason: "to " + u("/b")}},
			want: "redirect loop: back to " + u("/a") + " after 2 hops"},
		{name: "back along the referrers", page: u("/r4"), hops: 3, referrer: u("/r3"), target: u("/r2"),
			recs: []rec{{url: u("/r1"), status: contracts.Redirected, reason: "to " + u("/r2")},
				{url: u("/r2"), hops: 1, referrer: u("/r1"), status: contracts.ToBeParsed},
				{url: u("/r3"), hops: 2, referrer: u("/r2"), status: contracts.ToBeParsed}},
			want: "redirect loop: back to " + u("/r2") + " after 3 hops"},
		{name: "into a loop another chain entered", page: u("/c4"), hops: 2, referrer: u("/c3"), target: u("/c2"),
			recs: []rec{{url: u("/enter"), status: contracts.Redirected, reason: "to " + u("/c3")},
				{url: u("/c2"), status: contracts.Redirected, reason: "to " + u("/c3")},
				{url: u("/c3"), hops: 1, referrer: u("/enter"), status: contracts.Redirected, reason: "to " + u("/c4")}},
			want: "redirect loop: back to " + u("/c2") + " after 3 hops"},
		{name: "into another chain, no loop", page: u("/x"), target: u("/y"),
			recs: []rec{{url: u("/y"), status: contracts.Redirected, reason: "to " + u("/z")},
				{url: u("/z"), hops: 1, referrer: u("/y"), status: contracts.Failed, reason: "http 404"}}},
		{name: "to a page already indexed", page: u("/p"), hops: 4, referrer: u("/o"), target: u("/q"),
			recs: []rec{{url: u("/q"), status: contracts.Indexed}}},
		{name: "a loop is named before the limit", page: u("/l10"), hops: 10, referrer: u("/l9"), target: u("/l9"),
			recs: []rec{{url: u("/l9"), hops: 9, referrer: u("/l8"), status: contracts.Redirected, reason: "to " + u("/l10")}},
			want: "redirect loop: back to " + u("/l9") + " after 2 hops"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := embedtest.Open(t)
			now := time.Now()
			var rs []txindex.Record
			for _, r := range tc.recs {
				rs = append(rs, txindex.Record{Key: txindex.Key(crawl, r.url), CrawlID: crawl, URL: r.url, Host: "a.test",
					Hops: r.hops, Referrer: r.referrer, Status: r.status, Error: r.reason, StatusTime: now, CreatedAt: now})
			}
			if len(rs) > 0 {
				if _, err := st.Tx.Create(t.Context(), rs); err != nil {
					t.Fatal(err)
				}
			}
			c := New(Config{MaxRedirects: 10}, Deps{Tx: st.Tx})
			p := contracts.CrawlerPage{URL: tc.page, Hops: tc.hops}
			got, err := c.chainEnd(t.Context(), crawl, p, tc.referrer, tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("chainEnd(%q at %d hops -> %q) = %q, want %q", tc.page, tc.hops, tc.target, got, tc.want)
			}
		})
	}
}
