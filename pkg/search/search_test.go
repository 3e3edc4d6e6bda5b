package search

import "testing"

func TestCollapse(t *testing.T) {
	for _, tc := range []struct {
		q    Query
		want bool
	}{
		{Query{Q: "a"}, true},
		{Query{Q: "a", Collection: "c"}, true},
		{Query{Q: "a", AllCrawls: true}, false},
		{Query{Q: "a", CrawlID: "c1"}, false}, // one document per URL already
	} {
		if got := tc.q.Collapse(); got != tc.want {
			t.Errorf("%+v.Collapse() = %v, want %v", tc.q, got, tc.want)
		}
	}
}
