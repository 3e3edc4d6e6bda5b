package frontier

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
)

// MaxPagesPerContract bounds the pages carried by one crawler contract.
const MaxPagesPerContract = 100

// CrawlerMessages builds the crawler contract messages for pages of one
// crawl, at most MaxPagesPerContract pages each. inline is the profile to
// carry (nil: services read it by crawl id).
func CrawlerMessages(crawlID string, inline *contracts.Profile, pages []contracts.CrawlerPage, reindex bool) ([]queue.Message, error) {
	return crawlerMessages(contracts.CrawlerContract{V: contracts.Version, CrawlID: crawlID, Profile: inline, Reindex: reindex}, pages)
}

// RelinkMessages is CrawlerMessages for pages to relink (see
// contracts.CrawlerContract.Relink).
func RelinkMessages(crawlID string, inline *contracts.Profile, pages []contracts.CrawlerPage) ([]queue.Message, error) {
	return crawlerMessages(contracts.CrawlerContract{V: contracts.Version, CrawlID: crawlID, Profile: inline, Relink: true}, pages)
}

// crawlerMessages builds contracts like c for pages, at most
// MaxPagesPerContract each.
func crawlerMessages(c contracts.CrawlerContract, pages []contracts.CrawlerPage) ([]queue.Message, error) {
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

// RetryDelay is the delay before a contract whose processing failed is
// delivered again: growing with its attempts, at most 30 seconds.
func RetryDelay(attempt int) time.Duration {
	return min(time.Duration(attempt)*2*time.Second, 30*time.Second)
}
