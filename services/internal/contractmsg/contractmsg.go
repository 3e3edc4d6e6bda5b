// Package contractmsg encodes crawl contracts into queue messages, in batches
// of bounded size: loader contracts for records to fetch (ordered by crawl
// host group) and crawler contracts for fetched pages. MCP, the loader, the
// crawler and the recovery sweep all build their messages here, so the
// contracts are the same whoever publishes them.
package contractmsg

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// HeaderResumed marks a loader contract that a resume published again: the
// loader asks the profile store whether the crawl is still paused instead
// of trusting a state it cached before the resume.
const HeaderResumed = "x-gridcrawl-resumed"

// MaxPagesPerContract bounds the pages carried by one crawler contract.
const MaxPagesPerContract = 100

// Crawler builds the crawler contract messages for pages of one
// crawl, at most MaxPagesPerContract pages each. inline is the profile to
// carry (nil: services read it by crawl id).
func Crawler(crawlID string, inline *contracts.Profile, pages []contracts.CrawlerPage, reindex bool) ([]queue.Message, error) {
	return crawler(contracts.CrawlerContract{V: contracts.Version, CrawlID: crawlID, Profile: inline, Reindex: reindex}, pages)
}

// Relink is Crawler for pages to relink (see
// contracts.CrawlerContract.Relink).
func Relink(crawlID string, inline *contracts.Profile, pages []contracts.CrawlerPage) ([]queue.Message, error) {
	return crawler(contracts.CrawlerContract{V: contracts.Version, CrawlID: crawlID, Profile: inline, Relink: true}, pages)
}

// crawler builds contracts like c for pages, at most
// MaxPagesPerContract each.
func crawler(c contracts.CrawlerContract, pages []contracts.CrawlerPage) ([]queue.Message, error) {
	var msgs []queue.Message
	for len(pages) > 0 {
		n := min(len(pages), MaxPagesPerContract)
		c.Pages = pages[:n]
		body, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode crawler contract: %w", err)
		}
		msgs = append(msgs, queue.Message{Body: body})
		pages = pages[n:]
	}
	return msgs, nil
}

// MaxURLsPerContract bounds the URLs carried by one loader contract.
const MaxURLsPerContract = 500

// Loader builds loader contract messages for records of one crawl:
// their URLs ordered by crawl host group, at most MaxURLsPerContract per
// contract.
func Loader(crawlID string, p contracts.Profile, recs []txindex.Record) ([]queue.Message, error) {
	return LoaderWithSnapshots(crawlID, p, recs, nil)
}

// LoaderWithSnapshots is Loader with each URL carrying snap(its record's
// key), the record's snapshot for the loader's store (txindex.Snapshot);
// snap may be nil, and may return nil.
func LoaderWithSnapshots(crawlID string, p contracts.Profile, recs []txindex.Record, snap func(key string) *contracts.Snapshot) ([]queue.Message, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	inline := contracts.InlineProfile(p)
	recs = slices.Clone(recs)
	slices.SortStableFunc(recs, func(a, b txindex.Record) int { return strings.Compare(a.Group, b.Group) })
	var msgs []queue.Message
	for len(recs) > 0 {
		n := min(len(recs), MaxURLsPerContract)
		c := contracts.LoaderContract{V: contracts.Version, CrawlID: crawlID, Profile: inline, Group: recs[0].Group}
		for _, r := range recs[:n] {
			u := contracts.LoaderURL{URL: r.URL, Depth: r.Depth, Hops: r.Hops}
			if snap != nil {
				u.Snapshot = snap(r.Key)
			}
			if r.Group != c.Group {
				u.Group = r.Group
			}
			c.URLs = append(c.URLs, u)
		}
		body, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode loader contract: %w", err)
		}
		msgs = append(msgs, queue.Message{Body: body})
		recs = recs[n:]
	}
	return msgs, nil
}
