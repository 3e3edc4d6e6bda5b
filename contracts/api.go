package contracts

import (
	"encoding/json"
	"time"
)

// Status is the state of one URL in the transaction index.
type Status string

// The statuses of a transaction record. ToBeLoaded, ToBeParsed and
// ToBeIndexed are in flight; the others are terminal.
const (
	ToBeLoaded  Status = "to-be-loaded"
	ToBeParsed  Status = "to-be-parsed"
	ToBeIndexed Status = "to-be-indexed"
	Indexed     Status = "indexed"
	// Redirected marks a 3xx response whose target was handed to the frontier.
	Redirected Status = "redirected"
	Failed     Status = "failed"
	// Retired parks a URL whose crawl host group spent its total budget. It
	// is neither pending nor terminal: it does not keep a crawl from
	// finishing, and raising the budget puts it back to to-be-loaded.
	Retired Status = "retired"
	// Sitemap marks a sitemap that was read (its URLs handed to the
	// frontier, its limits noted in the record's error), or a start host's
	// /sitemap.xml that does not exist (4xx): neither is a page of the
	// crawl, and a missing /sitemap.xml is no failure.
	Sitemap Status = "sitemap"
)

// Statuses lists every status in pipeline order.
// Sitemap comes last so that the letters the SQLite history column gives
// the statuses by position stay those of the records written before it.
var Statuses = []Status{ToBeLoaded, ToBeParsed, ToBeIndexed, Indexed, Redirected, Failed, Retired, Sitemap}

// Pending reports whether s keeps a crawl from finishing.
func (s Status) Pending() bool { return s == ToBeLoaded || s == ToBeParsed || s == ToBeIndexed }

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	return s == Indexed || s == Redirected || s == Failed || s == Sitemap
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// CrawlState is the state of a whole crawl.
type CrawlState string

// Crawl states.
const (
	CrawlRunning   CrawlState = "running"
	CrawlFinished  CrawlState = "finished"
	CrawlCancelled CrawlState = "cancelled"
	// CrawlPaused: the crawl's loaders hold its URLs (POST .../pause), or it
	// ran out of work with pause_at_finish set.
	CrawlPaused CrawlState = "paused"
	// CrawlUpToDate: a continuous crawl (profile recrawl) with nothing to
	// do until its next URL is due. It never finishes; it is running again
	// while due URLs are fetched.
	CrawlUpToDate CrawlState = "up_to_date"
)

// CreateCrawlResponse is the body of a successful POST /api/v1/crawls.
type CreateCrawlResponse struct {
	V       int        `json:"v"`
	CrawlID string     `json:"crawl_id"`
	State   CrawlState `json:"state"`
}

// CrawlStatus is the body of GET /api/v1/crawls/{id}.
type CrawlStatus struct {
	V       int              `json:"v"`
	CrawlID string           `json:"crawl_id"`
	State   CrawlState       `json:"state"`
	Profile Profile          `json:"profile"`
	Counts  map[Status]int64 `json:"counts"`
	Total   int64            `json:"total"`
	Pending int64            `json:"pending"`
	// Retired counts URLs parked by exhausted group budgets.
	Retired int64 `json:"retired"`
	// Excluded counts the failed records that were fetched and parsed but
	// left out of the index on purpose (ReasonExcluded: a noindex page, or
	// one the index filters refuse): they are among Counts[Failed], shown
	// apart because they are no failure. Absent when none.
	Excluded int64 `json:"excluded,omitempty"`
	// Cancelled counts the failed records of a cancelled crawl that were
	// still pending when it was cancelled (ReasonCancelled): they are among
	// Counts[Failed], shown apart because they are no failure of their URL.
	// Absent when none and while the crawl is not cancelled.
	Cancelled int64     `json:"cancelled,omitempty"`
	Documents int64     `json:"documents"`
	CreatedAt time.Time `json:"created_at"`
	// FinishedAt is when the crawl finished or was cancelled; absent while
	// it is running or paused.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Recrawl describes the schedule of a continuous crawl; absent for a
	// one-shot crawl.
	Recrawl *RecrawlStatus `json:"recrawl,omitempty"`
	// Outcome says what a crawl that ran out of work (finished, up to date,
	// or paused at finish) achieved when that is not what its state
	// suggests: nothing fetched, or nothing indexed. Absent while the crawl
	// has work, and when it indexed pages.
	Outcome *CrawlOutcome `json:"outcome,omitempty"`
}

// OutcomeKind classifies a CrawlOutcome.
type OutcomeKind string

// Outcome kinds, worst first.
const (
	// OutcomeRefused: every start URL was refused by the loader's network
	// guard (a private, loopback or link-local address not allowed by
	// GRIDCRAWL_ALLOW_NETS).
	OutcomeRefused OutcomeKind = "refused"
	// OutcomeNothingFetched: every start URL failed without a response
	// (for another reason) and nothing was indexed.
	OutcomeNothingFetched OutcomeKind = "nothing_fetched"
	// OutcomeNothingIndexed: pages were fetched but none was indexed.
	OutcomeNothingIndexed OutcomeKind = "nothing_indexed"
)

// CrawlOutcome is a warning about a crawl that ran out of work without
// indexing anything, and what to do about it.
type CrawlOutcome struct {
	Kind OutcomeKind `json:"kind"`
	// Summary is one sentence for people: what happened, the most common
	// failure reason, and how to fix it when there is a known way.
	Summary string `json:"summary"`
}

// RecrawlStatus is the schedule of a continuous crawl as it stands.
type RecrawlStatus struct {
	// Due counts the URLs whose next fetch is due and not yet taken.
	Due int64 `json:"due"`
	// NextDue is the earliest next fetch of a settled URL; absent when
	// none is scheduled.
	NextDue *time.Time `json:"next_due,omitempty"`
}

// CrawlList is the body of GET /api/v1/crawls.
type CrawlList struct {
	V      int           `json:"v"`
	Crawls []CrawlStatus `json:"crawls"`
}

// SearchHit is one result of GET /api/v1/search.
type SearchHit struct {
	ID          string    `json:"id"`
	CrawlID     string    `json:"crawl_id"`
	URL         string    `json:"url"`
	Title       string    `json:"title"`
	Description string    `json:"description,omitempty"`
	Snippet     string    `json:"snippet,omitempty"`
	ContentType string    `json:"content_type"`
	Language    string    `json:"language,omitempty"`
	FetchTime   time.Time `json:"fetch_time"`
	// Host, Size (bytes of the body) and LastModified are the document's
	// host_s, size_i and last_modified.
	Host         string    `json:"host"`
	Size         int       `json:"size"`
	LastModified time.Time `json:"last_modified"`
	Score        float64   `json:"score"`
}

// SearchResponse is the body of GET /api/v1/search.
type SearchResponse struct {
	V      int         `json:"v"`
	Query  string      `json:"query"`
	Total  int64       `json:"total"`
	Offset int         `json:"offset"`
	Hits   []SearchHit `json:"hits"`
}

// ErrorResponse is the body of every 4xx and 5xx answer of the API.
type ErrorResponse struct {
	Error string `json:"error"`
	// Field names the invalid field of the request, when there is one.
	Field string `json:"field,omitempty"`
}

// FrontierTotals counts crawl host groups by state and the URLs they hold,
// summed over the loaders that reported.
type FrontierTotals struct {
	Groups       int `json:"groups"`
	Ready        int `json:"ready"`
	Waiting      int `json:"waiting"`
	Busy         int `json:"busy"`
	Inactive     int `json:"inactive"`
	Retired      int `json:"retired"`
	Idle         int `json:"idle"`
	Queued       int `json:"queued"`
	RetiredItems int `json:"retired_items"`
	// Filed is the number of URLs in the loaders' durable frontiers.
	Filed int `json:"filed,omitempty"`
}

// FrontierLoader is the politeness report of one live loader: its
// scheduler's counts and its groups with the most queued URLs, each with its
// state, next eligible time, delay and why, queue length, session balance,
// spend and budget, last and average cost, recent status codes and errors.
type FrontierLoader struct {
	LoaderID string    `json:"loader_id"`
	Time     time.Time `json:"time"`
	// IntervalMS is how often the loader writes its report; MCP takes a
	// loader whose report is three intervals (and 2 s) old for gone (a restart gives
	// a loader a new id, and its old report is not deleted when it is
	// killed). Absent in reports of older loaders.
	IntervalMS int64           `json:"interval_ms,omitempty"`
	Report     json.RawMessage `json:"report"`
	// Browser is the loader's headless browser, once a page was rendered.
	Browser *FrontierBrowser `json:"browser,omitempty"`
	// Dedup is the payload-digest index of deduplication across crawls,
	// once the loader counted it.
	Dedup *FrontierDedup `json:"dedup,omitempty"`
	// Filed are the queues of the loader's durable frontier (a loader
	// with GRIDCRAWL_LOADER_FRONTIER_DIR), the earliest due first, at most
	// 200.
	Filed []FrontierFiled `json:"filed,omitempty"`
	// FiledURLs is the number of URLs in the loader's durable frontier,
	// all queues.
	FiledURLs int `json:"filed_urls,omitempty"`
}

// FrontierFiled is one queue of a loader's durable frontier: a crawl's URLs
// filed for one crawl host group, as the store counts them.
type FrontierFiled struct {
	Group   string `json:"group"`
	CrawlID string `json:"crawl_id"`
	// Filed is the number of the queue's URLs in the store, Taken those of
	// them in the group's window (scheduled or being fetched).
	Filed int `json:"filed"`
	Taken int `json:"taken"`
	// OldestDue is the earliest due time of the queue's URLs: how late the
	// group is with the crawl.
	OldestDue time.Time `json:"oldest_due"`
}

// FrontierDedup is the payload-digest index as one loader sees it.
type FrontierDedup struct {
	Entries    int64 `json:"entries"`
	MaxEntries int64 `json:"max_entries"`
	Revisits   int64 `json:"revisits"`
}

// FrontierBrowser is what a loader's headless browser did.
type FrontierBrowser struct {
	Rendered  int64            `json:"rendered"`
	Cut       int64            `json:"cut,omitempty"`
	Failed    int64            `json:"failed"`
	RenderMS  float64          `json:"render_ms"`
	TabsInUse int64            `json:"tabs_in_use"`
	Restarts  map[string]int64 `json:"restarts"`
	Memory    int64            `json:"memory_bytes,omitempty"`
}

// FrontierReportPrefix is where each loader stores its frontier report in
// the asset store (one object per loader, named by its id), and where MCP
// reads them for GET /api/v1/frontier.
const FrontierReportPrefix = "reports/frontier/"

// FrontierReport is the body of GET /api/v1/frontier.
type FrontierReport struct {
	V       int              `json:"v"`
	Time    time.Time        `json:"time"`
	Totals  FrontierTotals   `json:"totals"`
	Loaders []FrontierLoader `json:"loaders"`
}

// Timeline is the body of GET /api/v1/crawls/{id}/timeline: the crawl's
// counts per status sampled by MCP every IntervalMS while it was not
// finished or cancelled (older stretches thinned to bound the points).
type Timeline struct {
	CrawlID    string          `json:"crawl_id"`
	IntervalMS int64           `json:"interval_ms"`
	Points     []TimelinePoint `json:"points"`
}

// TimelinePoint is one sample. PagesPerSecond is the rate at which URLs
// left to-be-loaded (were fetched or settled by a loader) since the point
// before; null for the first point.
type TimelinePoint struct {
	Time           time.Time        `json:"time"`
	Counts         map[string]int64 `json:"counts"`
	PagesPerSecond *float64         `json:"pages_per_second"`
	// Refetched counts a continuous crawl's URLs that the due check took
	// back to to-be-loaded since the crawl started: they left
	// to-be-loaded once more than the counts show.
	Refetched int64 `json:"refetched,omitempty"`
}
