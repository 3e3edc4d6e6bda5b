// Package apiclient is the Go client of MCP's HTTP API (MCP is YaCy Grid's
// Master Connect Program, the coordinator): one method per endpoint the
// grid command uses, with the bodies of package contracts. An error answer
// comes back as an *Error decoded from contracts.ErrorResponse.
//
// The client talks to a running MCP over the network, or, through the
// RoundTripper of InProcess, to an MCP handler in the same process: the
// command line reads a data directory that no grid runs on through the very
// handler a running grid serves, so that there is one implementation of
// every read.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// maxBody bounds a JSON answer the client reads whole, and maxErrorBody an
// error answer of a streamed endpoint.
const (
	maxBody      = 64 << 20
	maxErrorBody = 1 << 20
)

// Client is a client of one MCP's API. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client of the MCP whose API is at base (such as
// http://127.0.0.1:8080), which sends token, when not empty, as bearer
// token, through hc (nil: http.DefaultClient).
func New(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: base, token: token, http: hc}
}

// Base returns the base URL of the API.
func (c *Client) Base() string { return c.base }

// Error is an answer of the API with an error status (3xx and above).
type Error struct {
	Method string
	// Path is the request's path and query, relative to the API.
	Path string
	// StatusCode is the HTTP status code, Status its line ("404 Not Found").
	StatusCode int
	Status     string
	// Message and Field are the error body's error and field; Message is
	// empty when the answer had no such body.
	Message string
	Field   string
}

// Error says what the API answered: "GET /api/v1/crawls/x: no such crawl
// (404)", or the status line when the answer had no error body.
func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s %s: %s", e.Method, e.Path, e.Status)
	}
	return fmt.Sprintf("%s %s: %s (%d)", e.Method, e.Path, e.Message, e.StatusCode)
}

// IsNotFound reports whether err is the API's 404 answer.
func IsNotFound(err error) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

// send sends a request with an optional JSON body and returns the
// response of any status.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

// apiError returns the *Error of resp, an error answer whose body is data.
func apiError(method, path string, resp *http.Response, data []byte) *Error {
	e := &Error{Method: method, Path: path, StatusCode: resp.StatusCode, Status: resp.Status}
	var body contracts.ErrorResponse
	if json.Unmarshal(data, &body) == nil && body.Error != "" {
		e.Message, e.Field = body.Error, body.Field
	}
	return e
}

// do sends a request and decodes its JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		return apiError(method, path, resp, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// Open answers GET path, a path relative to the API such as the URL of a
// contracts.Segment, as a stream the caller must close: exports are not
// held in memory whole.
func (c *Client) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, apiError(http.MethodGet, path, resp, data)
	}
	return resp.Body, nil
}

func crawlPath(id string) string { return "/api/v1/crawls/" + url.PathEscape(id) }

// CreateCrawl starts the crawl of profile p (POST /api/v1/crawls).
func (c *Client) CreateCrawl(ctx context.Context, p contracts.Profile) (contracts.CreateCrawlResponse, error) {
	var out contracts.CreateCrawlResponse
	body, err := json.Marshal(p)
	if err != nil {
		return out, fmt.Errorf("encode profile: %w", err)
	}
	err = c.do(ctx, http.MethodPost, "/api/v1/crawls", body, &out)
	return out, err
}

// Crawl returns the status of crawl id (GET /api/v1/crawls/{id}).
func (c *Client) Crawl(ctx context.Context, id string) (contracts.CrawlStatus, error) {
	var out contracts.CrawlStatus
	err := c.do(ctx, http.MethodGet, crawlPath(id), nil, &out)
	return out, err
}

// Crawls returns the status of every crawl (GET /api/v1/crawls).
func (c *Client) Crawls(ctx context.Context) (contracts.CrawlList, error) {
	var out contracts.CrawlList
	err := c.do(ctx, http.MethodGet, "/api/v1/crawls", nil, &out)
	return out, err
}

// Cancel cancels crawl id and returns its status (DELETE
// /api/v1/crawls/{id}).
func (c *Client) Cancel(ctx context.Context, id string) (contracts.CrawlStatus, error) {
	var out contracts.CrawlStatus
	err := c.do(ctx, http.MethodDelete, crawlPath(id), nil, &out)
	return out, err
}

// Resume resumes paused crawl id and returns its status (POST
// /api/v1/crawls/{id}/resume).
func (c *Client) Resume(ctx context.Context, id string) (contracts.CrawlStatus, error) {
	var out contracts.CrawlStatus
	err := c.do(ctx, http.MethodPost, crawlPath(id)+"/resume", nil, &out)
	return out, err
}

// Patch changes the settings of crawl id that a crawl may change once
// started (PATCH /api/v1/crawls/{id}) and returns its status.
func (c *Client) Patch(ctx context.Context, id string, p contracts.ProfilePatch) (contracts.CrawlStatus, error) {
	var out contracts.CrawlStatus
	body, err := json.Marshal(p)
	if err != nil {
		return out, fmt.Errorf("encode profile patch: %w", err)
	}
	err = c.do(ctx, http.MethodPatch, crawlPath(id), body, &out)
	return out, err
}

// SearchQuery is a query of Search.
type SearchQuery struct {
	// Q is the query text.
	Q string
	// Crawl, when set, limits the hits to one crawl.
	Crawl string
	// Limit is the number of hits (0: the API's default); Offset the hits
	// to skip.
	Limit, Offset int
	// AllCrawls asks for every crawl's copy of a URL instead of one hit per
	// URL (all_crawls).
	AllCrawls bool
}

// Search searches the indexed documents (GET /api/v1/search).
func (c *Client) Search(ctx context.Context, q SearchQuery) (contracts.SearchResponse, error) {
	v := url.Values{"q": {q.Q}}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Offset != 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Crawl != "" {
		v.Set("crawl", q.Crawl)
	}
	if q.AllCrawls {
		v.Set("all_crawls", "true")
	}
	var out contracts.SearchResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/search?"+v.Encode(), nil, &out)
	return out, err
}

// LogQuery selects a page of the crawl log: the URLs in a status, of a
// host, that failed for a reason (each: any when empty), Limit of them
// (0: the API's default) after Cursor (the NextCursor of the page before).
type LogQuery struct {
	Status contracts.Status
	Host   string
	Reason string
	Limit  int
	Cursor string
	// Sort is the order of the listing: "time" (by status time) or "url";
	// empty: the API's default.
	Sort string
}

// CrawlLog returns a page of crawl id's URL records (GET
// /api/v1/crawls/{id}/urls).
func (c *Client) CrawlLog(ctx context.Context, id string, q LogQuery) (contracts.CrawlLog, error) {
	v := url.Values{}
	for k, s := range map[string]string{"status": string(q.Status), "host": q.Host, "reason": q.Reason, "cursor": q.Cursor, "sort": q.Sort} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := crawlPath(id) + "/urls"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out contracts.CrawlLog
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Report returns report name (one of contracts.ReportNames) of crawl id,
// limit rows at most (0: the API's default), with its rows undecoded:
// their type is the report's, and DecodeRows reads them (GET
// /api/v1/crawls/{id}/reports/{name}).
func (c *Client) Report(ctx context.Context, id, name string, limit int) (contracts.Report[json.RawMessage], error) {
	path := crawlPath(id) + "/reports/" + url.PathEscape(name)
	if limit != 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var out contracts.Report[json.RawMessage]
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// FailureReasons returns the failure reasons report of crawl id, most
// frequent first, limit rows at most (0: the API's default).
func (c *Client) FailureReasons(ctx context.Context, id string, limit int) ([]contracts.ReasonReportRow, error) {
	rep, err := c.Report(ctx, id, contracts.ReportFailureReasons, limit)
	if err != nil {
		return nil, err
	}
	return DecodeRows[contracts.ReasonReportRow](rep.Rows)
}

// DecodeRows decodes the rows of a report into the report's row type,
// such as contracts.HostReportRow for the hosts report.
func DecodeRows[Row any](raw []json.RawMessage) ([]Row, error) {
	rows := make([]Row, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &rows[i]); err != nil {
			return nil, fmt.Errorf("decode report row %d: %w", i+1, err)
		}
	}
	return rows, nil
}

// Segments lists crawl id's WARC segments (GET
// /api/v1/crawls/{id}/segments).
func (c *Client) Segments(ctx context.Context, id string) (contracts.SegmentList, error) {
	var out contracts.SegmentList
	err := c.do(ctx, http.MethodGet, crawlPath(id)+"/segments", nil, &out)
	return out, err
}

// CDXJ streams crawl id's merged CDXJ index (GET /api/v1/crawls/{id}/cdxj).
func (c *Client) CDXJ(ctx context.Context, id string) (io.ReadCloser, error) {
	return c.Open(ctx, crawlPath(id)+"/cdxj")
}

// Documents streams crawl id's indexed documents, one JSON object a line
// (GET /api/v1/crawls/{id}/documents).
func (c *Client) Documents(ctx context.Context, id string) (io.ReadCloser, error) {
	return c.Open(ctx, crawlPath(id)+"/documents")
}

// WACZ streams crawl id as one WACZ file (GET /api/v1/crawls/{id}/wacz),
// with each page's text in pages/pages.jsonl when text is set.
func (c *Client) WACZ(ctx context.Context, id string, text bool) (io.ReadCloser, error) {
	p := crawlPath(id) + "/wacz"
	if text {
		p += "?text=1"
	}
	return c.Open(ctx, p)
}

// CollectionWACZ opens every crawl of the collection name as one WACZ file
// (GET /api/v1/collections/{name}/wacz), with each page's text when text.
func (c *Client) CollectionWACZ(ctx context.Context, name string, text bool) (io.ReadCloser, error) {
	p := "/api/v1/collections/" + url.PathEscape(name) + "/wacz"
	if text {
		p += "?text=1"
	}
	return c.Open(ctx, p)
}

// Readiness returns which of the MCP's backends answer (GET /readyz); a
// full disk of embedded backends is the backend "disk".
func (c *Client) Readiness(ctx context.Context) (metrics.Readiness, error) {
	var rd metrics.Readiness
	resp, err := c.send(ctx, http.MethodGet, "/readyz", nil)
	if err != nil {
		return rd, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return rd, fmt.Errorf("GET /readyz: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&rd); err != nil {
		return rd, fmt.Errorf("decode /readyz: %w", err)
	}
	return rd, nil
}

// Healthy reports whether the MCP answers its /healthz with 200.
func (c *Client) Healthy(ctx context.Context) bool {
	resp, err := c.send(ctx, http.MethodGet, "/healthz", nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
