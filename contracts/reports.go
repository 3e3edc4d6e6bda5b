package contracts

// The names of the crawl reports, the {name} of
// GET /api/v1/crawls/{id}/reports/{name}.
const (
	ReportHosts          = "hosts"
	ReportMIMETypes      = "mime-types"
	ReportStatusCodes    = "status-codes"
	ReportFailureReasons = "failure-reasons"
)

// ReportNames lists the reports, in the order the API documents them.
var ReportNames = []string{ReportHosts, ReportMIMETypes, ReportStatusCodes, ReportFailureReasons}

// Report is the body of GET /api/v1/crawls/{id}/reports/{name}, whose rows
// are of the report's Row type: HostReportRow, MIMEReportRow,
// StatusCodeReportRow or ReasonReportRow. A client that does not know the
// report beforehand reads it as Report[json.RawMessage].
type Report[Row any] struct {
	CrawlID string `json:"crawl_id"`
	Report  string `json:"report"`
	Rows    []Row  `json:"rows"`
}

// HostReportRow is a row of the hosts report: the URLs of one host.
type HostReportRow struct {
	Host    string `json:"host"`
	URLs    int64  `json:"urls"`
	Fetched int64  `json:"fetched"`
	Failed  int64  `json:"failed"`
	Bytes   int64  `json:"bytes"`
	// StatusCodes counts the host's URLs by HTTP status code ("200").
	StatusCodes map[string]int64 `json:"status_codes"`
}

// MIMEReportRow is a row of the MIME types report; MIMEType is null for
// responses without a known type.
type MIMEReportRow struct {
	MIMEType *string `json:"mime_type"`
	Count    int64   `json:"count"`
	Bytes    int64   `json:"bytes"`
}

// StatusCodeReportRow is a row of the status codes report; StatusCode is
// null for the URLs without a response.
type StatusCodeReportRow struct {
	StatusCode *int  `json:"status_code"`
	Count      int64 `json:"count"`
}

// ReasonReportRow is a row of the failure reasons report, with up to three
// of the URLs that failed for the reason.
type ReasonReportRow struct {
	Reason     *string  `json:"reason"`
	Count      int64    `json:"count"`
	SampleURLs []string `json:"sample_urls"`
}
