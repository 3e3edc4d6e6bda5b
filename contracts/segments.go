package contracts

import "time"

// Segment is one WARC segment of a crawl, as GET
// /api/v1/crawls/{id}/segments lists it. A segment belongs to the loader
// that wrote it and may hold records of several crawls; it is listed (and
// downloaded) as the crawl's part of it.
type Segment struct {
	// Name is the file name of the crawl's part of the segment, the
	// "filename" of the crawl's CDXJ lines: the segment's, or
	// NAME_CRAWLID.warc.gz for a segment other crawls' records share.
	Name string `json:"name"`
	// Key is the segment's key in the asset store.
	Key string `json:"key"`
	// Size is the size in bytes of the crawl's part; Modified when the
	// segment was last written (null when the store cannot tell).
	Size     *int64     `json:"size"`
	Modified *time.Time `json:"modified"`
	// Records counts the crawl's URL records whose response lies in the
	// segment.
	Records int64 `json:"records"`
	// URL downloads the segment; CDXJURL its CDXJ index; WETURL and WATURL
	// its Common Crawl WET (page text) and WAT (record metadata) files of
	// the crawl's records, made on demand. All are relative to the API.
	URL     string `json:"url"`
	CDXJURL string `json:"cdxj_url"`
	WETURL  string `json:"wet_url"`
	WATURL  string `json:"wat_url"`
}

// SegmentList is the body of GET /api/v1/crawls/{id}/segments.
type SegmentList struct {
	CrawlID  string    `json:"crawl_id"`
	Segments []Segment `json:"segments"`
	// TotalSize sums the known sizes of the segments.
	TotalSize int64 `json:"total_size"`
}
