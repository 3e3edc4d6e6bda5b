package contractmsg

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

func TestLoaderBatchesGroups(t *testing.T) {
	var recs []txindex.Record
	for i := range 1200 {
		g := fmt.Sprintf("h%d.test", i%7)
		recs = append(recs, txindex.Record{URL: fmt.Sprintf("http://%s/%d", g, i), Group: g, Depth: 1})
	}
	p := contracts.Profile{StartURLs: []string{"http://h0.test/"}}.WithDefaults()
	msgs, err := Loader("c1", p, recs)
	if err != nil {
		t.Fatal(err)
	}
	if want := (1200 + MaxURLsPerContract - 1) / MaxURLsPerContract; len(msgs) != want {
		t.Fatalf("Loader(1200 urls) = %d messages, want %d", len(msgs), want)
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
	msgs, _ = Loader("c1", big, recs[:1])
	var c contracts.LoaderContract
	_ = json.Unmarshal(msgs[0].Body, &c)
	if c.Profile != nil {
		t.Errorf("profile with %d start urls carried inline", len(big.StartURLs))
	}
}
