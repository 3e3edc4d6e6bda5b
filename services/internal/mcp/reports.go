package mcp

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// Row limits of a report (hosts, MIME types, failure reasons).
const (
	defaultReportLimit = 1000
	maxReportLimit     = 10000
)

// reportFuncs computes each report's body by name.
var reportFuncs = map[string]func(m *MCP, ctx context.Context, id string, limit int) (any, error){
	contracts.ReportHosts: func(m *MCP, ctx context.Context, id string, limit int) (any, error) {
		rows, err := m.deps.Tx.HostsReport(ctx, id, limit)
		out := make([]contracts.HostReportRow, 0, len(rows))
		for _, r := range rows {
			codes := make(map[string]int64, len(r.StatusCodes))
			for c, n := range r.StatusCodes {
				codes[strconv.Itoa(c)] = n
			}
			out = append(out, contracts.HostReportRow{Host: r.Host, URLs: r.URLs, Fetched: r.Fetched, Failed: r.Failed,
				Bytes: r.Bytes, StatusCodes: codes})
		}
		return contracts.Report[contracts.HostReportRow]{CrawlID: id, Report: contracts.ReportHosts, Rows: out}, err
	},
	contracts.ReportMIMETypes: func(m *MCP, ctx context.Context, id string, limit int) (any, error) {
		rows, err := m.deps.Tx.MIMETypesReport(ctx, id, limit)
		out := make([]contracts.MIMEReportRow, 0, len(rows))
		for _, r := range rows {
			out = append(out, contracts.MIMEReportRow{MIMEType: nonEmpty(r.MIMEType), Count: r.Count, Bytes: r.Bytes})
		}
		return contracts.Report[contracts.MIMEReportRow]{CrawlID: id, Report: contracts.ReportMIMETypes, Rows: out}, err
	},
	contracts.ReportStatusCodes: func(m *MCP, ctx context.Context, id string, _ int) (any, error) {
		rows, err := m.deps.Tx.StatusCodesReport(ctx, id)
		out := make([]contracts.StatusCodeReportRow, 0, len(rows))
		for _, r := range rows {
			row := contracts.StatusCodeReportRow{Count: r.Count}
			if r.StatusCode != 0 {
				row.StatusCode = &r.StatusCode
			}
			out = append(out, row)
		}
		return contracts.Report[contracts.StatusCodeReportRow]{CrawlID: id, Report: contracts.ReportStatusCodes, Rows: out}, err
	},
	contracts.ReportFailureReasons: func(m *MCP, ctx context.Context, id string, limit int) (any, error) {
		rows, err := m.deps.Tx.FailureReasonsReport(ctx, id, limit)
		out := make([]contracts.ReasonReportRow, 0, len(rows))
		for _, r := range rows {
			samples := r.SampleURLs
			if samples == nil {
				samples = []string{}
			}
			out = append(out, contracts.ReasonReportRow{Reason: nonEmpty(r.Reason), Count: r.Count, SampleURLs: samples})
		}
		return contracts.Report[contracts.ReasonReportRow]{CrawlID: id, Report: contracts.ReportFailureReasons, Rows: out}, err
	},
}

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
		jsonapi.Error(w, http.StatusNotFound, "no such report; the reports are "+strings.Join(contracts.ReportNames, ", "), "name")
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
	body, err := f(m, r.Context(), id, limit)
	if err != nil {
		m.log.Error("crawl report", "crawl_id", id, "report", name, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not compute the report", "")
		return
	}
	jsonapi.Write(w, http.StatusOK, body)
}
