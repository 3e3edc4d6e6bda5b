package frontier

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitequeue"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

func TestScopeFollow(t *testing.T) {
	base := contracts.Profile{StartURLs: []string{"http://www.example.test/", "https://other.org:8443/x"}, MaxDepth: 2}.WithDefaults()
	cases := []struct {
		name       string
		mod        func(*contracts.Profile)
		url        string
		depth, hop int
		want       bool
		why        string
	}{
		{"same host", nil, "http://www.example.test/a", 1, 0, true, ""},
		{"second start host", nil, "https://other.org:8443/y", 2, 0, true, ""},
		{"too deep", nil, "http://www.example.test/a", 3, 0, false, "too deep"},
		{"other host in host scope", nil, "http://blog.example.test/", 1, 0, false, "out of scope"},
		{"sibling host in domain scope", func(p *contracts.Profile) { p.Scope = contracts.ScopeDomain }, "http://blog.example.test/", 1, 0, true, ""},
		{"foreign domain in domain scope", func(p *contracts.Profile) { p.Scope = contracts.ScopeDomain }, "http://example.org/", 1, 0, false, "out of scope"},
		{"anything in any scope", func(p *contracts.Profile) { p.Scope = contracts.ScopeAny }, "http://example.org/", 1, 0, true, ""},
		{"too many redirects", nil, "http://www.example.test/r", 0, 4, false, "too many redirects"},
		{"must match", func(p *contracts.Profile) { p.CrawlMustMatch = `/docs/` }, "http://www.example.test/blog/", 1, 0, false, "crawl filter"},
		{"must match ok", func(p *contracts.Profile) { p.CrawlMustMatch = `/docs/` }, "http://www.example.test/docs/a", 1, 0, true, ""},
		{"must not match", func(p *contracts.Profile) { p.CrawlMustNotMatch = `\.pdf$` }, "http://www.example.test/a.pdf", 1, 0, false, "crawl filter"},
		{"scheme", func(p *contracts.Profile) { p.Scope = contracts.ScopeAny }, "ftp://www.example.test/", 1, 0, false, "scheme"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.StartURLs = append([]string(nil), base.StartURLs...)
			if tc.mod != nil {
				tc.mod(&p)
			}
			s, err := NewScope(p, 3)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(tc.url)
			got, why := s.Follow(u, tc.url, tc.depth, tc.hop)
			if got != tc.want || why != tc.why {
				t.Errorf("Follow(%q, %d, %d) = %v, %q; want %v, %q", tc.url, tc.depth, tc.hop, got, why, tc.want, tc.why)
			}
		})
	}
}

func TestScopeIndex(t *testing.T) {
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}, IndexMustMatch: `/keep/`, IndexMustNotMatch: `draft`}.WithDefaults()
	s, err := NewScope(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]bool{"http://a.test/keep/1": true, "http://a.test/other": false, "http://a.test/keep/draft": false} {
		if got := s.Index(u); got != want {
			t.Errorf("Index(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestLoaderMessagesBatchGroups(t *testing.T) {
	var recs []txindex.Record
	for i := range 1200 {
		g := fmt.Sprintf("h%d.test", i%7)
		recs = append(recs, txindex.Record{URL: fmt.Sprintf("http://%s/%d", g, i), Group: g, Depth: 1})
	}
	p := contracts.Profile{StartURLs: []string{"http://h0.test/"}}.WithDefaults()
	msgs, err := LoaderMessages("c1", p, recs)
	if err != nil {
		t.Fatal(err)
	}
	if want := (1200 + MaxURLsPerContract - 1) / MaxURLsPerContract; len(msgs) != want {
		t.Fatalf("LoaderMessages(1200 urls) = %d messages, want %d", len(msgs), want)
	}
	seen := 0
	lastGroup := ""
	for _, m := range msgs {
		var c contracts.LoaderContract
		if err := json.Unmarshal(m.Body, &c); err != nil {
			t.Fatal(err)
		}
		if c.Profile == nil {
			t.Errorf("small profile not carried inline")
		}
		for _, u := range c.URLs {
			g := c.GroupOf(u)
			if g < lastGroup {
				t.Fatalf("URLs not ordered by group: %q after %q", g, lastGroup)
			}
			lastGroup = g
			pu, _ := url.Parse(u.URL)
			if pu.Host != g {
				t.Errorf("url %s carries group %q", u.URL, g)
			}
			seen++
		}
	}
	if seen != 1200 {
		t.Errorf("contracts carry %d urls, want 1200", seen)
	}
	big := p
	for i := range 500 {
		big.StartURLs = append(big.StartURLs, fmt.Sprintf("http://h%d.test/", i))
	}
	msgs, _ = LoaderMessages("c1", big, recs[:1])
	var c contracts.LoaderContract
	_ = json.Unmarshal(msgs[0].Body, &c)
	if c.Profile != nil {
		t.Errorf("profile with %d start urls carried inline", len(big.StartURLs))
	}
}

func newFrontier(t *testing.T) (*Frontier, queue.Queue) {
	t.Helper()
	dir := t.TempDir()
	tx, err := sqlitestore.OpenTxIndex(filepath.Join(dir, "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	q, err := sqlitequeue.Open(filepath.Join(dir, "q.db"), sqlitequeue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return &Frontier{Tx: tx, Queue: q, Group: HostGrouper}, q
}

func TestEnqueueDedupesAndRepublishesOnlyForTheSameReferrer(t *testing.T) {
	f, q := newFrontier(t)
	ctx := context.Background()
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}}.WithDefaults()
	cands := []Candidate{{URL: "http://a.test/1", Depth: 1, Referrer: "page-x"}, {URL: "http://a.test/1", Depth: 1, Referrer: "page-x"}, {URL: "http://a.test/2", Depth: 1, Referrer: "page-x"}}
	n, err := f.Enqueue(ctx, "c", p, cands)
	if err != nil || n != 2 {
		t.Fatalf("Enqueue = %d, %v; want 2 created", n, err)
	}
	// The same page again (a redelivery): nothing new, but its URLs are
	// published again since they are still to-be-loaded.
	if n, err := f.Enqueue(ctx, "c", p, cands); err != nil || n != 0 {
		t.Fatalf("second Enqueue = %d, %v; want 0 created", n, err)
	}
	// Another page finding the same URLs publishes nothing.
	other := []Candidate{{URL: "http://a.test/1", Depth: 1, Referrer: "page-y"}}
	if n, err := f.Enqueue(ctx, "c", p, other); err != nil || n != 0 {
		t.Fatalf("third Enqueue = %d, %v; want 0 created", n, err)
	}
	if got, err := q.Len(ctx, contracts.QueueLoader); err != nil || got != 2 {
		t.Errorf("loader_pending holds %d messages (%v), want 2 (first and redelivered page)", got, err)
	}
}

func TestEnqueueLimits(t *testing.T) {
	f, _ := newFrontier(t)
	ctx := context.Background()
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}, MaxPages: 5, MaxPagesPerHost: 3, Scope: contracts.ScopeAny}.WithDefaults()
	var cands []Candidate
	for _, h := range []string{"a.test", "b.test"} {
		for i := range 4 {
			cands = append(cands, Candidate{URL: fmt.Sprintf("http://%s/%d", h, i), Depth: 1})
		}
	}
	n, err := f.Enqueue(ctx, "c", p, cands)
	if err != nil || n != 5 {
		t.Fatalf("Enqueue = %d, %v; want 5 (max_pages)", n, err)
	}
	for _, h := range []string{"a.test", "b.test"} {
		if c, _ := f.Tx.CountHost(ctx, "c", h); c > 3 {
			t.Errorf("host %s has %d records, want at most 3", h, c)
		}
	}
	if n, _ := f.Enqueue(ctx, "c", p, []Candidate{{URL: "http://c.test/", Depth: 1}}); n != 0 {
		t.Errorf("Enqueue past max_pages created %d", n)
	}
}

func TestProfileCache(t *testing.T) {
	c := NewProfileCache(nil)
	p := &contracts.Profile{Name: "x"}
	if got, err := c.Resolve(context.Background(), "c", p); err != nil || got != p {
		t.Errorf("Resolve(inline) = %v, %v", got, err)
	}
	if _, err := c.Resolve(context.Background(), "c", nil); err == nil {
		t.Errorf("Resolve(unknown crawl) succeeded")
	}
}

func TestGrouperAliasesAndByIP(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want map[string]string
	}{
		{"by host", Config{}, map[string]string{"a.test": "a.test", "B.test": "b.test"}},
		{"aliases", Config{Aliases: "kommune=rana.kommune.no|vefsn.kommune.no"},
			map[string]string{"rana.kommune.no": "kommune", "vefsn.kommune.no": "kommune", "nb.no": "nb.no"}},
		{"by ip", Config{ByIP: true, Resolve: "a.test=192.0.2.1,b.test=192.0.2.1,c.test=192.0.2.2"},
			map[string]string{"a.test": "192.0.2.1", "b.test": "192.0.2.1", "c.test": "192.0.2.2", "192.0.2.1": "192.0.2.1"}},
		{"alias before ip", Config{ByIP: true, Aliases: "pair=a.test|c.test", Resolve: "a.test=192.0.2.1,c.test=192.0.2.2"},
			map[string]string{"a.test": "pair", "c.test": "pair"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.cfg.Grouper()
			if err != nil {
				t.Fatal(err)
			}
			for host, want := range tc.want {
				if got := g(host); got != want {
					t.Errorf("group(%q) = %q, want %q", host, got, want)
				}
			}
		})
	}
	bad := Config{Aliases: "not.an.alias=a.test", Shards: 1}
	if err := bad.Validate(); err == nil {
		t.Errorf("Validate(alias with dots) = nil, want an error")
	}
}
