package contracts

import "time"

// URLRecord is one URL of a crawl as the crawl log shows it (the body of
// GET /api/v1/crawls/{id}/urls?url=U and an entry of CrawlLog): its
// transaction record, with null for what the record does not know.
type URLRecord struct {
	// Key is the record's key in the transaction index: stable, and the
	// order of the crawl log.
	Key        string    `json:"key"`
	URL        string    `json:"url"`
	Host       string    `json:"host"`
	Status     Status    `json:"status"`
	StatusTime time.Time `json:"status_time"`
	Depth      int       `json:"depth"`
	Hops       int       `json:"hops"`
	// Referrer is the page that linked the URL, null for a start URL.
	Referrer   *string `json:"referrer"`
	Attempts   int     `json:"attempts"`
	HTTPStatus *int    `json:"http_status"`
	MIMEType   *string `json:"mime_type"`
	Bytes      *int64  `json:"bytes"`
	// Render is why the loader rendered the page in a headless browser
	// ("always", "auto: ..."), null when it did not (or the server
	// predates rendering).
	Render *string `json:"render"`
	Reason *string `json:"reason"`
	// Sitemap is the record's sitemap kind ("probe" or "sitemap"), null
	// for a page.
	Sitemap *string `json:"sitemap"`
	// Lastmod is the <lastmod> of the sitemap entry that listed the URL.
	Lastmod *time.Time `json:"lastmod"`
	// Recrawl and NextDue are the continuous crawl's schedule of the URL.
	Recrawl   *URLRecrawl `json:"recrawl"`
	NextDue   *time.Time  `json:"next_due"`
	CreatedAt *time.Time  `json:"created_at"`
	// History is the URL's statuses oldest first (bounded: the oldest go
	// first).
	History []URLEvent `json:"history"`
	// WARC is where the fetched response is archived, null when nothing
	// was.
	WARC *WARCRef `json:"warc"`
}

// URLRecrawl is what the last fetch of a continuous crawl's URL left for
// the next one.
type URLRecrawl struct {
	// Fetched is when the URL was last fetched, and Status the HTTP status
	// of that fetch (304 included; absent without a response).
	Fetched time.Time `json:"fetched"`
	Status  int       `json:"status,omitempty"`
	// IntervalMS is the time from Fetched to the next fetch, in
	// milliseconds, and Due that time.
	IntervalMS int64     `json:"interval_ms"`
	Due        time.Time `json:"due"`
	// ETag and LastModified are the stored response's validators, sent
	// back as If-None-Match and If-Modified-Since.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	// Digest is the WARC payload digest of the stored response; RecordID
	// and Stored are its WARC-Record-ID and WARC-Date, which revisit
	// records refer to.
	Digest   string    `json:"digest,omitempty"`
	RecordID string    `json:"record_id,omitempty"`
	Stored   time.Time `json:"stored,omitzero"`
	// Changes counts the refetches that found new content; Revisits those
	// that found the page unchanged.
	Changes  int `json:"changes,omitempty"`
	Revisits int `json:"revisits,omitempty"`
}

// URLEvent is one status change of a URL.
type URLEvent struct {
	Status Status    `json:"status"`
	Time   time.Time `json:"time"`
}

// WARCRef says where a URL's response record lies and where MCP serves it.
type WARCRef struct {
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"`
	Length  int64  `json:"length"`
	// URL serves the record (application/warc), relative to the API.
	URL string `json:"url"`
}

// CrawlLog is the body of GET /api/v1/crawls/{id}/urls: one page of the
// crawl's URL records in key order. NextCursor, passed as cursor, reads the
// next page; it is null after the last.
type CrawlLog struct {
	CrawlID string `json:"crawl_id"`
	// Sort is the order of the listing: "time" (status_time, then key),
	// "url" (then key) or "key" (the index's order).
	Sort       string      `json:"sort"`
	URLs       []URLRecord `json:"urls"`
	NextCursor *string     `json:"next_cursor"`
}
