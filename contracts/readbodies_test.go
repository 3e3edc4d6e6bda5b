package contracts_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestReportFixturesDecodeIntoRows decodes the rows of every valid report
// fixture strictly into the row type of its report, which the generic
// fixture tests read as maps.
func TestReportFixturesDecodeIntoRows(t *testing.T) {
	rowTypes := map[string]func() any{
		contracts.ReportHosts:          func() any { return new(contracts.Report[contracts.HostReportRow]) },
		contracts.ReportMIMETypes:      func() any { return new(contracts.Report[contracts.MIMEReportRow]) },
		contracts.ReportStatusCodes:    func() any { return new(contracts.Report[contracts.StatusCodeReportRow]) },
		contracts.ReportFailureReasons: func() any { return new(contracts.Report[contracts.ReasonReportRow]) },
	}
	if len(rowTypes) != len(contracts.ReportNames) {
		t.Errorf("ReportNames = %v, want a row type for each", contracts.ReportNames)
	}
	seen := map[string]bool{}
	for name, data := range fixtures(t, "valid", "report") {
		var head contracts.Report[json.RawMessage]
		if err := json.Unmarshal(data, &head); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mk, ok := rowTypes[head.Report]
		if !ok {
			t.Errorf("%s: report %q has no row type", name, head.Report)
			continue
		}
		if err := decodeStrict(data, mk()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		seen[head.Report] = true
	}
	for _, name := range contracts.ReportNames {
		if !seen[name] {
			t.Errorf("no valid fixture of report %q", name)
		}
	}
}

// TestReadBodiesValidate marshals Go values of the crawl log, segment,
// report and timeline bodies, with every field set and in their minimal
// forms, and checks that their schema accepts them: a field added to a Go
// type and not to its schema fails here.
func TestReadBodiesValidate(t *testing.T) {
	at := time.Date(2025, 11, 21, 8, 39, 0, 0, time.UTC)
	str := func(s string) *string { return &s }
	code, size, bytes := 200, int64(4096), int64(2048)
	full := contracts.URLRecord{
		Key: "k1", URL: "https://example.com/a", Host: "example.com", Status: contracts.Indexed, StatusTime: at,
		Depth: 2, Hops: 1, Referrer: str("https://example.com/"), Attempts: 1, HTTPStatus: &code,
		MIMEType: str("text/html"), Bytes: &bytes, Render: str("always"), Reason: str("none"), Sitemap: str("sitemap"), Lastmod: &at,
		Recrawl: &contracts.URLRecrawl{Fetched: at, Status: 304, IntervalMS: 3600000, Due: at.Add(time.Hour),
			ETag: `"e"`, LastModified: "Fri, 21 Nov 2025 08:39:00 GMT", Digest: "sha1:ABC", RecordID: "<urn:uuid:1>",
			Stored: at, Changes: 1, Revisits: 2},
		NextDue: &at, CreatedAt: &at,
		History: []contracts.URLEvent{{Status: contracts.ToBeLoaded, Time: at}, {Status: contracts.Indexed, Time: at}},
		WARC:    &contracts.WARCRef{Segment: "warc/s.warc.gz", Offset: 10, Length: 20, URL: "/api/v1/crawls/c/warc?key=k1"},
	}
	minimal := contracts.URLRecord{Key: "k2", URL: "http://a/", Host: "a", Status: contracts.ToBeLoaded, StatusTime: at,
		History: []contracts.URLEvent{}}
	rate := 1.5
	tests := []struct {
		name   string
		schema string
		value  any
	}{
		{"url record full", "url_record", full},
		{"url record minimal", "url_record", minimal},
		{"url record recrawl without response", "url_record", contracts.URLRecord{Key: "k", URL: "http://a/", Host: "a",
			Status: contracts.Failed, StatusTime: at, Recrawl: &contracts.URLRecrawl{Fetched: at, IntervalMS: 1, Due: at}}},
		{"crawl log", "url_list", contracts.CrawlLog{CrawlID: "c", Sort: "time", URLs: []contracts.URLRecord{full, minimal}, NextCursor: str("abc")}},
		{"crawl log last page", "url_list", contracts.CrawlLog{CrawlID: "c", Sort: "key", URLs: []contracts.URLRecord{}}},
		{"segment list", "segment_list", contracts.SegmentList{CrawlID: "c", TotalSize: size, Segments: []contracts.Segment{
			{Name: "s.warc.gz", Key: "warc/s.warc.gz", Size: &size, Modified: &at, Records: 3, URL: "/u", CDXJURL: "/u.cdxj", WETURL: "/u.wet.gz", WATURL: "/u.wat.gz"},
			{Name: "t.warc.gz", Key: "warc/t.warc.gz", Records: 1, URL: "/v", CDXJURL: "/v.cdxj", WETURL: "/v.wet.gz", WATURL: "/v.wat.gz"},
		}}},
		{"segment list empty", "segment_list", contracts.SegmentList{CrawlID: "c", Segments: []contracts.Segment{}}},
		{"hosts report", "report", contracts.Report[contracts.HostReportRow]{CrawlID: "c", Report: contracts.ReportHosts,
			Rows: []contracts.HostReportRow{{Host: "a", URLs: 3, Fetched: 2, Failed: 1, Bytes: 10, StatusCodes: map[string]int64{"200": 2}}}}},
		{"mime types report", "report", contracts.Report[contracts.MIMEReportRow]{CrawlID: "c", Report: contracts.ReportMIMETypes,
			Rows: []contracts.MIMEReportRow{{MIMEType: str("text/html"), Count: 2, Bytes: 10}, {Count: 1}}}},
		{"status codes report", "report", contracts.Report[contracts.StatusCodeReportRow]{CrawlID: "c", Report: contracts.ReportStatusCodes,
			Rows: []contracts.StatusCodeReportRow{{StatusCode: &code, Count: 2}, {Count: 1}}}},
		{"failure reasons report", "report", contracts.Report[contracts.ReasonReportRow]{CrawlID: "c", Report: contracts.ReportFailureReasons,
			Rows: []contracts.ReasonReportRow{{Reason: str("http 404"), Count: 1, SampleURLs: []string{"http://a/x"}}}}},
		{"empty report", "report", contracts.Report[contracts.HostReportRow]{CrawlID: "c", Report: contracts.ReportHosts, Rows: []contracts.HostReportRow{}}},
		{"timeline", "timeline", contracts.Timeline{CrawlID: "c", IntervalMS: 1000, Points: []contracts.TimelinePoint{
			{Time: at, Counts: map[string]int64{"to-be-loaded": 1}},
			{Time: at.Add(time.Second), Counts: map[string]int64{"indexed": 1}, PagesPerSecond: &rate, Refetched: 1},
		}}},
		{"timeline empty", "timeline", contracts.Timeline{CrawlID: "c", IntervalMS: 1000, Points: []contracts.TimelinePoint{}}},
	}
	compiled := compileAll(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validateValue(compiled[tt.schema], tt.value); err != nil {
				t.Errorf("schema %s rejects %+v: %v", tt.schema, tt.value, err)
			}
		})
	}
	// A report's name and rows go together: hosts rows under another
	// report's name are refused.
	wrong := contracts.Report[contracts.HostReportRow]{CrawlID: "c", Report: contracts.ReportMIMETypes,
		Rows: []contracts.HostReportRow{{Host: "a", StatusCodes: map[string]int64{}}}}
	if err := validateValue(compiled["report"], wrong); err == nil {
		t.Errorf("schema report accepts hosts rows named %q", wrong.Report)
	}
}
