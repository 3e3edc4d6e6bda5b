package contracts

import "time"

// Queue names of the grid.
const (
	QueueLoader  = "loader_pending"
	QueueCrawler = "crawler_pending"
	QueueIndex   = "index_pending"
)

// ReasonExcluded is the error of a record whose page was parsed and its
// links followed, but which is not indexed: the page asked not to be (meta
// robots noindex) or the profile's index filters exclude it.
const ReasonExcluded = "excluded from index (noindex or index filter)"

// MaxInlineProfileBytes bounds the profile text carried inside contracts.
const MaxInlineProfileBytes = 2048

// InlineProfile returns p when it is small enough to travel inside every
// contract of its crawl, and nil otherwise. A profile with thousands of
// start URLs would otherwise multiply every message's size.
func InlineProfile(p Profile) *Profile {
	n := len(p.Name) + len(p.UserAgent) + len(p.CrawlMustMatch) + len(p.CrawlMustNotMatch) +
		len(p.IndexMustMatch) + len(p.IndexMustNotMatch)
	for _, u := range p.StartURLs {
		n += len(u)
	}
	for _, c := range p.Collection {
		n += len(c)
	}
	if n > MaxInlineProfileBytes {
		return nil
	}
	return &p
}

// LoaderURL is one URL to fetch.
type LoaderURL struct {
	URL   string `json:"url"`
	Depth int    `json:"depth"`
	// Hops counts the redirects that led to URL.
	Hops int `json:"hops,omitempty"`
	// Group is the crawl host group of URL when it differs from the
	// contract's.
	Group string `json:"chg,omitempty"`
}

// GroupOf returns the crawl host group of u within c.
func (c *LoaderContract) GroupOf(u LoaderURL) string {
	if u.Group != "" {
		return u.Group
	}
	return c.Group
}

// LoaderContract asks a loader to fetch URLs of one crawl. It is published to
// loader_pending. Its URLs are ordered by crawl host group; Group names the
// group of the URLs that carry none. Batching the new URLs of many pages
// into one contract keeps broker traffic far below one message per page.
type LoaderContract struct {
	V       int    `json:"v"`
	CrawlID string `json:"crawl_id"`
	// Profile is the crawl's profile when it is small (see InlineProfile);
	// otherwise services read the immutable profile of CrawlID from the
	// profile store, once per crawl.
	Profile *Profile    `json:"profile,omitempty"`
	Group   string      `json:"chg,omitempty"`
	URLs    []LoaderURL `json:"urls"`
}

// AssetRef locates one WARC record inside an asset object.
type AssetRef struct {
	Key    string `json:"key"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
}

// CrawlerPage is one fetched page for the crawler to parse.
type CrawlerPage struct {
	URL         string    `json:"url"`
	Depth       int       `json:"depth"`
	Hops        int       `json:"hops,omitempty"`
	Asset       AssetRef  `json:"asset"`
	StatusCode  int       `json:"status_code"`
	ContentType string    `json:"content_type,omitempty"`
	FetchedAt   time.Time `json:"fetched_at"`
}

// CrawlerContract asks a crawler to parse fetched pages of one crawl. It is
// published to crawler_pending. With Reindex set the crawler only re-parses
// pages that are already to-be-indexed and republishes their documents.
// With Relink set the pages were parsed before, at a greater depth, and
// found since on a shorter path: the crawler extracts and follows their
// links again at their new depth and settles them as before, without
// republishing their documents, which are indexed already.
type CrawlerContract struct {
	V       int    `json:"v"`
	CrawlID string `json:"crawl_id"`
	// Profile is as in LoaderContract.
	Profile *Profile      `json:"profile,omitempty"`
	Pages   []CrawlerPage `json:"pages"`
	Reindex bool          `json:"reindex,omitempty"`
	Relink  bool          `json:"relink,omitempty"`
}

// Link is an outgoing link of a document.
type Link struct {
	URL      string `json:"url"`
	Text     string `json:"text,omitempty"`
	Nofollow bool   `json:"nofollow,omitempty"`
}

// Document is the searchable form of a fetched page (the "YaCy JSON" of seed
// 004). ID is the transaction record key of the page.
type Document struct {
	ID          string    `json:"id"`
	CrawlID     string    `json:"crawl_id"`
	URL         string    `json:"url"`
	Host        string    `json:"host"`
	Title       string    `json:"title"`
	Description string    `json:"description,omitempty"`
	Language    string    `json:"language,omitempty"`
	Headings    []string  `json:"headings,omitempty"`
	Text        string    `json:"text"`
	Links       []Link    `json:"links,omitempty"`
	ContentType string    `json:"content_type"`
	StatusCode  int       `json:"status_code"`
	Depth       int       `json:"depth"`
	FetchTime   time.Time `json:"fetch_time"`
	Asset       AssetRef  `json:"asset"`
	// NoIndex is set when the page asked not to be indexed (meta robots) or
	// the profile's index filters exclude it; such documents are not stored.
	NoIndex bool `json:"noindex,omitempty"`
}

// IndexContract carries parsed documents to the indexer. It is published to
// index_pending.
type IndexContract struct {
	V       int        `json:"v"`
	CrawlID string     `json:"crawl_id"`
	Docs    []Document `json:"docs"`
}
