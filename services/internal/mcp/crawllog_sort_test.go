package mcp

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// TestCrawlLogSort pages through a crawl log in each order and compares it
// with the records sorted by the test itself.
func TestCrawlLogSort(t *testing.T) {
	for _, b := range storeBackends() {
		t.Run(b.name, func(t *testing.T) { testCrawlLogSort(t, newLifecycleMCPOn(t, lifecycleConfig(), b.new(t))) })
	}
}

func testCrawlLogSort(t *testing.T, l *lifecycleMCP) {
	var starts []string
	for i := range 7 {
		starts = append(starts, fmt.Sprintf("http://h%d.test/p%d", (i*3)%7, i))
	}
	id := l.create(t, contracts.Profile{StartURLs: starts, Sitemaps: new(bool)})
	// Move the records one by one, so that their status times differ and
	// their time order is neither key nor URL order.
	recs := l.records(t, id)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range recs {
			if !yield(k) {
				return
			}
		}
	})
	for i, k := range keys {
		if i%2 == 0 {
			continue
		}
		time.Sleep(2 * time.Millisecond)
		if _, err := l.set.Tx.Transition(t.Context(), []txindex.Transition{{Key: k, From: contracts.ToBeLoaded, To: contracts.Failed, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	recs = l.records(t, id)
	all := make([]txindex.Record, 0, len(recs))
	for _, r := range recs {
		all = append(all, r)
	}
	oracle := map[string]func(a, b txindex.Record) int{
		"time": func(a, b txindex.Record) int {
			if c := a.StatusTime.Compare(b.StatusTime); c != 0 {
				return c
			}
			return strings.Compare(a.Key, b.Key)
		},
		"url": func(a, b txindex.Record) int {
			if c := strings.Compare(a.URL, b.URL); c != 0 {
				return c
			}
			return strings.Compare(a.Key, b.Key)
		},
		"key": func(a, b txindex.Record) int { return strings.Compare(a.Key, b.Key) },
	}
	for _, tc := range []struct{ name, param, order string }{
		{"default", "", "time"}, {"time", "time", "time"}, {"url", "url", "url"}, {"key", "key", "key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := slices.Clone(all)
			slices.SortFunc(want, oracle[tc.order])
			var wantURLs, got []string
			for _, r := range want {
				wantURLs = append(wantURLs, r.URL)
			}
			cursor := ""
			for page := 0; page < 10; page++ {
				q := url.Values{"limit": {"3"}}
				if tc.param != "" {
					q.Set("sort", tc.param)
				}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				var log contracts.CrawlLog
				if code := l.do(t, "GET", "/"+id+"/urls?"+q.Encode(), nil, &log); code != 200 {
					t.Fatalf("GET urls?%s = %d", q.Encode(), code)
				}
				if log.Sort != tc.order {
					t.Errorf("sort of the page = %q, want %q", log.Sort, tc.order)
				}
				for _, u := range log.URLs {
					got = append(got, u.URL)
				}
				if log.NextCursor == nil {
					break
				}
				cursor = *log.NextCursor
			}
			if diff := cmp.Diff(wantURLs, got); diff != "" {
				t.Errorf("crawl log in %s order (-want +got):\n%s", tc.order, diff)
			}
		})
	}
	var e contracts.ErrorResponse
	if code := l.do(t, "GET", "/"+id+"/urls?sort=hash", nil, &e); code != 400 || e.Field != "sort" {
		t.Errorf("GET urls?sort=hash = %d field %q, want 400 sort", code, e.Field)
	}
	var first contracts.CrawlLog
	l.do(t, "GET", "/"+id+"/urls?sort=url&limit=1", nil, &first)
	if first.NextCursor == nil {
		t.Fatal("no cursor after a page of 1")
	}
	if code := l.do(t, "GET", "/"+id+"/urls?sort=time&cursor="+*first.NextCursor, nil, &e); code != 400 || e.Field != "cursor" {
		t.Errorf("a url-order cursor with sort=time = %d field %q, want 400 cursor", code, e.Field)
	}

	// Past the scan bound the default is key order, and an explicit time
	// order is refused.
	l.m.sortScanLimit = len(all) - 1
	var big contracts.CrawlLog
	if code := l.do(t, "GET", "/"+id+"/urls", nil, &big); code != 200 || big.Sort != "key" {
		t.Errorf("GET urls past the bound = %d sort %q, want 200 key", code, big.Sort)
	}
	if code := l.do(t, "GET", "/"+id+"/urls?sort=time", nil, &e); code != 400 || e.Field != "sort" {
		t.Errorf("GET urls?sort=time past the bound = %d field %q, want 400 sort", code, e.Field)
	}
	if code := l.do(t, "GET", "/"+id+"/urls?sort=time&status=failed", nil, &big); code != 200 || big.Sort != "time" || len(big.URLs) != 3 {
		t.Errorf("GET urls?sort=time&status=failed past the bound = %d sort %q with %d URLs, want 200 time with 3", code, big.Sort, len(big.URLs))
	}
}

// FuzzLogCursor: a cursor either is refused or reads back as the cursor it
// encodes.
func FuzzLogCursor(f *testing.F) {
	for _, c := range []logCursor{{order: "key", key: "k1"}, {order: "time", value: "00000000000000000001", key: "k"}, {order: "url", value: "http://a/", key: "x"}} {
		f.Add(c.String())
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseLogCursor(s)
		if !ok {
			return
		}
		if c.order != sortKey && c.order != sortTime && c.order != sortURL {
			t.Fatalf("parseLogCursor(%q) has order %q", s, c.order)
		}
		if back, ok := parseLogCursor(c.String()); !ok || back != c {
			t.Errorf("parseLogCursor(%q) = %+v, which encodes to %q and reads back as %+v, %v", s, c, c.String(), back, ok)
		}
	})
}
