package contracts

import "time"

// Segment is one WARC segment of a crawl, as GET
// /api/v1/crawls/{id}/segments lists it. A segment belongs to the loader
// that wrote it and may hold records of several crawls.
type Segment struct {
	// Name is the segment's file name, the "filename" of its CDXJ lines.
	Name string `json:"name"`
	// Key is the segment's key in the asset store.
	Key string `json:"key"`
	// Size is the segment's size in bytes; Modified when it was last
	// written (null when the store cannot tell).
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
