package contracts

import (
	"encoding/json"
	"time"
)

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

// ReasonCancelled is the error of a record that was pending when its crawl
// was cancelled: failed, a terminal status as every other failure, but no
// failure of the URL. CrawlStatus counts these apart (Cancelled).
const ReasonCancelled = "cancelled"

// ReasonRefusedByIndex starts the reason of a page whose document the search
// index refused (the rest of the reason is the index's own words).
const ReasonRefusedByIndex = "refused by the search index"

// MaxInlineProfileBytes bounds the profile text carried inside contracts.
const MaxInlineProfileBytes = 2048

// InlineProfile returns p when it is small enough to travel inside every
// contract of its crawl, and nil otherwise. A profile with thousands of
// start URLs or budget overrides would otherwise multiply every message's
// size; such a profile is read by crawl id from the profile store.
func InlineProfile(p Profile) *Profile {
	n := len(p.Name) + len(p.UserAgent) + len(p.CrawlMustMatch) + len(p.CrawlMustNotMatch) +
		len(p.IndexMustMatch) + len(p.IndexMustNotMatch)
	for _, u := range p.StartURLs {
		n += len(u)
	}
	for _, c := range p.Collection {
		n += len(c)
	}
	if p.Budget != nil {
		for _, o := range p.Budget.Overrides {
			// The domain and the field names and numbers around it.
			n += len(o.Domain) + 64
		}
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
	// Snapshot is the URL's record as the enqueuer wrote it, when its
	// store has revisions.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
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

// Snapshot is a URL's transaction record as the stage that sent a contract
// wrote (or read) it, with the revision its store gave that version. The
// stage that receives the contract hands both to its store, so that its
// checked write of the record is conditioned on the revision it was given
// instead of one it reads first (the txindex package's Revisions). It is a
// hint: a stale or missing snapshot costs a read, never a wrong write.
// Record is the record's JSON; Rev is opaque outside the store.
type Snapshot struct {
	Rev    string          `json:"rev"`
	Record json.RawMessage `json:"record"`
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
	// ResponseTimeMS is the time from sending the request to the end of the
	// response, in milliseconds (0 when unknown).
	ResponseTimeMS int `json:"response_time_ms,omitempty"`
	// Sitemaps are the Sitemap: lines of the origin's robots.txt, carried
	// with a start host's /sitemap.xml probe only.
	Sitemaps []string `json:"sitemaps,omitempty"`
	// Truncated reports a body cut by the loader's size limit.
	Truncated bool `json:"truncated,omitempty"`
	// Snapshot is the page's record as the loader (or whoever published
	// the contract) wrote it, when its store has revisions.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	// Render is set when the loader rendered the page in a headless
	// browser: the crawler parses the DOM it recorded, not the response.
	Render *RenderedPage `json:"render,omitempty"`
	// Original is set when the loader stored the response as a revisit
	// record (its payload was stored before, see Profile.Dedupe): Asset is
	// the revisit record, Original the response record that holds the
	// payload, which the crawler parses.
	Original *AssetRef `json:"original,omitempty"`
}

// RenderedPage is how the loader rendered a page.
type RenderedPage struct {
	// Reason is why: "always", or the auto rule's ("auto: ...").
	Reason string `json:"reason"`
	// DOM is the WARC conversion record holding the page's DOM after its
	// scripts ran, in the segment of the response.
	DOM AssetRef `json:"dom"`
	// Cut says what the per-page limits cut, empty when nothing was.
	Cut string `json:"cut,omitempty"`
	// Navigations are where the page's scripts tried to take the tab (a
	// script redirect): not followed by the browser, they are followed as
	// the crawler follows a redirect.
	Navigations []string `json:"navigations,omitempty"`
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

// Document is the searchable form of a fetched page: the "YaCy JSON" of
// YaCy Grid's crawler (https://github.com/yacy/yacy_grid_crawler). Its field names, types and meanings are those of YaCy Grid's web
// schema (yacy_grid_mcp's WebMapping, the YaCy Solr schema): the suffix
// tells the type (_s string, _sxt string list, _t text, _txt text list, _i
// integer, _l long, _dt date, _b boolean); title, content_type, keywords
// and author keep YaCy's names without a suffix. Lists are YaCy's
// multi-valued fields. The fields after Collection are gridcrawl's own,
// named by the same convention.
//
// "Inbound" links point to the page's own host, "outbound" links to any
// other host (YaCy's meaning). A document in the index is a loaded page:
// FailReason and FailType are empty and HTTPStatus is 200.
type Document struct {
	// ID is the transaction record key of the page (YaCy's id, the unique
	// key of the document).
	ID string `json:"id"`
	// CrawlID is the id of the crawl that fetched the page.
	CrawlID string `json:"crawl_id_s"`
	// URL is the page's URL.
	URL string `json:"url_s"`
	// LastModified is the HTTP Last-Modified of the response, or LoadDate
	// when the response had none or an invalid one.
	LastModified time.Time `json:"last_modified"`
	// LoadDate is when the page was fetched.
	LoadDate time.Time `json:"load_date_dt"`
	// ContentType holds the media type of the response, without parameters.
	ContentType []string `json:"content_type"`
	// Title holds the page title (one entry; the file name or host when the
	// page has none).
	Title []string `json:"title"`
	// Host is the URL's host, lowercase, without port.
	Host string `json:"host_s"`
	// SSLD is the smart second-level domain: the registrable domain.
	SSLD string `json:"ssld_s"`
	// Size is the size of the raw (decoded) response body in bytes.
	Size int `json:"size_i"`
	// FailReason and FailType are YaCy's failure fields, empty for a loaded
	// page; failures live in the transaction index.
	FailReason string `json:"failreason_s"`
	FailType   string `json:"failtype_s"`
	// HTTPStatus is the response's status code.
	HTTPStatus int `json:"httpstatus_i"`
	// FileExt is the lowercase file name extension of the URL path ("" when
	// none).
	FileExt string `json:"url_file_ext_s"`
	// HostOrganization is the registrable domain without its public suffix
	// ("example" for www.example.co.uk).
	HostOrganization string `json:"host_organization_s"`
	// InboundLinks and OutboundLinks are the page's links to its own host
	// and to other hosts, in order of first appearance; their anchor texts
	// are at the same positions of InboundAnchorText and OutboundAnchorText.
	InboundLinks  []string `json:"inboundlinks_sxt"`
	OutboundLinks []string `json:"outboundlinks_sxt"`
	// Images are the resolved URLs of the page's images (img src).
	Images []string `json:"images_sxt"`
	// Text is the visible text, whitespace collapsed.
	Text string `json:"text_t"`
	// Description holds the meta description, when the page has one.
	Description []string `json:"description_txt,omitempty"`
	// H1 to H6 are the texts of the page's headings of each level.
	H1 []string `json:"h1_txt,omitempty"`
	H2 []string `json:"h2_txt,omitempty"`
	H3 []string `json:"h3_txt,omitempty"`
	H4 []string `json:"h4_txt,omitempty"`
	H5 []string `json:"h5_txt,omitempty"`
	H6 []string `json:"h6_txt,omitempty"`
	// Language is a lowercase language tag, when the page declares one.
	Language string `json:"language_s,omitempty"`
	// CrawlDepth is the number of links from a start URL to the page.
	CrawlDepth int `json:"crawldepth_i"`
	// ReferrerURL is the URL of the page on which the crawler found this
	// one, empty for a start URL.
	ReferrerURL string `json:"referrer_url_s,omitempty"`
	// Canonical is the resolved URL of <link rel=canonical>.
	Canonical string `json:"canonical_s,omitempty"`
	// Robots is YaCy's bit pattern of the robots directives (RobotsAll and
	// the other Robots* constants).
	Robots int `json:"robots_i"`
	// Keywords is the meta keywords, separated by spaces.
	Keywords string `json:"keywords,omitempty"`
	// Author is the meta author.
	Author string `json:"author,omitempty"`
	// Charset is the character encoding the page was read in.
	Charset string `json:"charset_s,omitempty"`
	// WordCount is the number of words of Text.
	WordCount int `json:"wordcount_i"`
	// LinksCount counts all links (inbound and outbound, nofollow
	// included); the NofollowCount fields count those with rel=nofollow.
	LinksCount                 int `json:"linkscount_i"`
	LinksNofollowCount         int `json:"linksnofollowcount_i"`
	InboundLinksCount          int `json:"inboundlinkscount_i"`
	InboundLinksNofollowCount  int `json:"inboundlinksnofollowcount_i"`
	OutboundLinksCount         int `json:"outboundlinkscount_i"`
	OutboundLinksNofollowCount int `json:"outboundlinksnofollowcount_i"`
	// ImagesCount is the number of Images.
	ImagesCount int `json:"imagescount_i"`
	// ResponseTime is the time from sending the request to the end of the
	// response, in milliseconds.
	ResponseTime int `json:"responsetime_i"`
	// InboundAnchorText and OutboundAnchorText: see InboundLinks.
	InboundAnchorText  []string `json:"inboundlinks_anchortext_txt"`
	OutboundAnchorText []string `json:"outboundlinks_anchortext_txt"`
	// IP is the address the page was fetched from, when recorded.
	IP string `json:"ip_s,omitempty"`
	// URLProtocol is the URL's scheme; URLFileName the last path segment
	// without its extension; URLPaths the path segments before it.
	URLProtocol string   `json:"url_protocol_s"`
	URLFileName string   `json:"url_file_name_s"`
	URLPaths    []string `json:"url_paths_sxt,omitempty"`
	// Collection holds the crawl's collections (profile collection).
	Collection []string `json:"collection_sxt,omitempty"`

	// WARCKey, WARCOffset and WARCLength locate the page's WARC response
	// record in the asset store (gridcrawl's own fields).
	WARCKey    string `json:"warc_key_s"`
	WARCOffset int64  `json:"warc_offset_l"`
	WARCLength int64  `json:"warc_length_l"`
	// NoIndex asks the indexer to remove any stored document with ID
	// instead of storing this one; it travels in index contracts only and
	// is never stored.
	NoIndex bool `json:"noindex_b,omitempty"`
}

// Bits of Document.Robots, YaCy's robots_i: bits 0-5 for <meta
// name=robots>, bits 8-16 for the X-Robots-Tag response header.
const (
	RobotsMetaAll       = 1 << 0
	RobotsMetaIndex     = 1 << 1
	RobotsMetaFollow    = 1 << 2
	RobotsMetaNoIndex   = 1 << 3
	RobotsMetaNoFollow  = 1 << 4
	RobotsMetaNoArchive = 1 << 5

	RobotsHeaderAll              = 1 << 8
	RobotsHeaderNoIndex          = 1 << 9
	RobotsHeaderNoFollow         = 1 << 10
	RobotsHeaderNoArchive        = 1 << 11
	RobotsHeaderNoSnippet        = 1 << 12
	RobotsHeaderNoODP            = 1 << 13
	RobotsHeaderNoTranslate      = 1 << 14
	RobotsHeaderNoImageIndex     = 1 << 15
	RobotsHeaderUnavailableAfter = 1 << 16
)

// Asset returns the location of d's WARC record.
func (d *Document) Asset() AssetRef {
	return AssetRef{Key: d.WARCKey, Offset: d.WARCOffset, Length: d.WARCLength}
}

// FirstTitle returns d's title, "" when it has none.
func (d *Document) FirstTitle() string {
	if len(d.Title) == 0 {
		return ""
	}
	return d.Title[0]
}

// IndexContract carries parsed documents to the indexer. It is published to
// index_pending.
type IndexContract struct {
	V       int        `json:"v"`
	CrawlID string     `json:"crawl_id"`
	Docs    []Document `json:"docs"`
	// Snapshots are the records of the documents' pages as the crawler
	// wrote them (to-be-indexed), when its store has revisions.
	Snapshots []Snapshot `json:"snapshots,omitempty"`
}
