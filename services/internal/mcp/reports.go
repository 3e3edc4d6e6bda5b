package mcp

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// Row limits of a report (hosts, MIME types, failure reasons).
const (
	defaultReportLimit = 1000
	maxReportLimit     = 10000
)

// Report is the body of GET /api/v1/crawls/{id}/reports/{name}.
type Report struct {
	CrawlID string `json:"crawl_id"`
	Report  string `json:"report"`
	Rows    any    `json:"rows"`
}

// HostReportRow is a row of the hosts report.
type HostReportRow struct {
	Host        string           `json:"host"`
	URLs        int64            `json:"urls"`
	Fetched     int64            `json:"fetched"`
	Failed      int64            `json:"failed"`
	Bytes       int64            `json:"bytes"`
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

// ReasonReportRow is a row of the failure reasons report.
type ReasonReportRow struct {
	Reason     *string  `json:"reason"`
	Count      int64    `json:"count"`
	SampleURLs []string `json:"sample_urls"`
}

// reportFuncs computes each report by name.
var reportFuncs = map[string]func(m *MCP, ctx context.Context, id string, limit int) (any, error){
	"hosts": func(m *MCP, ctx context.Context, id string, limit int) (any, error) {
		rows, err := m.deps.Tx.HostsReport(ctx, id, limit)
		out := make([]HostReportRow, 0, len(rows))
		for _, r := range rows {
			codes := make(map[string]int64, len(r.StatusCodes))
			for c, n := range r.StatusCodes {
				codes[strconv.Itoa(c)] = n
			}
			out = append(out, HostReportRow{Host: r.Host, URLs: r.URLs, Fetched: r.Fetched, Failed: r.Failed,
				Bytes: r.Bytes, StatusCodes: codes})
		}
		return out, err
	},
	"mime-types": func(m *MCP, ctx context.Context, id string, limit int) (any, error) {
		rows, err := m.deps.Tx.MIMETypesReport(ctx, id, limit)
		out := make([]MIMEReportRow, 0, len(rows))
		for _, r := range rows {
			out = append(out, MIMEReportRow{MIMEType: nonEmpty(r.MIMEType), Count: r.Count, Bytes: r.Bytes})
		}
		return out, err
	},
	"status-codes": func(m *MCP, ctx context.Context, id string, _ int) (any, error) {
		rows, err := m.deps.Tx.StatusCodesReport(ctx, id)
		out := make([]StatusCodeReportRow, 0, len(rows))
		for _, r := range rows {
			row := StatusCodeReportRow{Count: r.Count}
			if r.StatusCode != 0 {
				row.StatusCode = &r.StatusCode
			}
			out = append(out, row)
		}
		return out, err
	},
	"failure-reasons": func(m *MCP, ctx context.Context, id string, limit int) (any, error) {
		rows, err := m.deps.Tx.FailureReasonsReport(ctx, id, limit)
		out := make([]ReasonReportRow, 0, len(rows))
		for _, r := range rows {
			samples := r.SampleURLs
			if samples == nil {
				samples = []string{}
			}
			out = append(out, ReasonReportRow{Reason: nonEmpty(r.Reason), Count: r.Count, SampleURLs: samples})
		}
		return out, err
	},
}

// ReportNames lists the reports, in the order the API documents them.
var ReportNames = []string{"hosts", "mime-types", "status-codes", "failure-reasons"}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// report serves GET /api/v1/crawls/{id}/reports/{name}; the index
// computes the rows.
func (m *MCP) report(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	f, ok := reportFuncs[name]
	if !ok {
		jsonapi.Error(w, http.StatusNotFound, "no such report; the reports are "+strings.Join(ReportNames, ", "), "name")
		return
	}
	if !m.knownCrawl(w, r, id) {
		return
	}
	limit := defaultReportLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxReportLimit {
			jsonapi.Error(w, http.StatusBadRequest, fmt.Sprintf("must be a whole number from 1 to %d", maxReportLimit), "limit")
			return
		}
		limit = n
	}
	rows, err := f(m, r.Context(), id, limit)
	if err != nil {
		m.log.Error("crawl report", "crawl_id", id, "report", name, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not compute the report", "")
		return
	}
	jsonapi.Write(w, http.StatusOK, Report{CrawlID: id, Report: name, Rows: rows})
}
