package grid

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/apiclient"
)

// logUsage is the part of the usage text for urls and report.
const logUsage = `  urls    [--data DIR] [--api URL] [--failed] [--status S] [--host H] [--reason R] [--sort time|url|key] [--limit N] [--json] CRAWL_ID
                                                list a crawl's URLs with status, HTTP status and reason
  report  [--data DIR] [--api URL] [--json] NAME CRAWL_ID
                                                a crawl report: hosts, mime-types, status-codes, failure-reasons
`

func cmdURLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("urls", "[flags] CRAWL_ID", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	failed := fs.Bool("failed", false, "only failed URLs (--status failed)")
	status := fs.String("status", "", "only URLs in this status")
	host := fs.String("host", "", "only URLs of this host (host name, with :port when not the default)")
	reason := fs.String("reason", "", "only URLs that failed for exactly this reason")
	limit := fs.Int("limit", 0, "print at most N URLs (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON record per line")
	order := fs.String("sort", logSortTime, "order of the URLs: time (when each reached its status, oldest first), url, or key (the index's order,\n"+
		"for a crawl too large for the API to sort)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("want exactly one CRAWL_ID")}
	}
	if *order != logSortTime && *order != logSortURL && *order != logSortKey {
		return usageError{fmt.Errorf("invalid --sort %q: want time, url or key", *order)}
	}
	// Without --sort the API's default order: time, or key for a crawl too
	// large to sort.
	sortParam := ""
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "sort" {
			sortParam = *order
		}
	})
	if *failed {
		if *status != "" && *status != string(contracts.Failed) {
			return usageError{errors.New("--failed and --status " + *status + " contradict each other")}
		}
		*status = string(contracts.Failed)
	}
	if *limit < 0 {
		return usageError{errors.New("--limit must not be negative")}
	}
	c, err := openAPI(*api, *data)
	if err != nil {
		return err
	}
	defer c.close()
	page := 1000
	if *limit > 0 && *limit < page {
		page = *limit
	}
	q := apiclient.LogQuery{Status: contracts.Status(*status), Host: *host, Reason: *reason, Limit: page, Sort: sortParam}
	sorted := logOrder{by: *order}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "STATUS\tHTTP\tREASON\tURL")
	}
	enc := json.NewEncoder(stdout)
	printed := 0
	for {
		res, err := c.CrawlLog(ctx, pos[0], q)
		if err != nil {
			return err
		}
		for _, r := range res.URLs {
			if *limit > 0 && printed == *limit {
				return tw.Flush()
			}
			printed++
			if sortParam != "" && !sorted.next(r) {
				fmt.Fprintf(stderr, "grid urls: the grid at %s did not list its crawl log by %s: the URLs are in its own order\n", c.Base(), *order)
			}
			if *asJSON {
				if err := enc.Encode(r); err != nil {
					return err
				}
				continue
			}
			code, why := "-", "-"
			if r.HTTPStatus != nil {
				code = strconv.Itoa(*r.HTTPStatus)
			}
			if r.Reason != nil {
				why = oneLine(*r.Reason)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Status, code, why, r.URL)
		}
		if res.NextCursor == nil || (*limit > 0 && printed == *limit) {
			break
		}
		q.Cursor = *res.NextCursor
	}
	return tw.Flush()
}

// Orders of grid urls (--sort), as the crawl log API's sort parameter
// takes them.
const (
	logSortTime = "time"
	logSortURL  = "url"
	logSortKey  = "key"
)

// logOrder checks that the records of a crawl log come in the order asked
// for by --sort: an MCP whose API predates the sort parameter ignores it.
type logOrder struct {
	by   string
	last *contracts.URLRecord
	told bool // out of order once: said so
}

// next takes the next record r and reports false the first time one comes
// out of order.
func (o *logOrder) next(r contracts.URLRecord) bool {
	last := o.last
	o.last = &r
	if last == nil || o.told {
		return true
	}
	var inOrder bool
	switch o.by {
	case logSortTime:
		inOrder = !r.StatusTime.Before(last.StatusTime)
	case logSortURL:
		inOrder = last.URL <= r.URL
	default:
		inOrder = last.Key <= r.Key
	}
	o.told = !inOrder
	return inOrder
}

// oneLine keeps a reason on one line of the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", "[flags] NAME CRAWL_ID", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError{errors.New("want NAME CRAWL_ID; NAME is one of " + strings.Join(contracts.ReportNames, ", "))}
	}
	name, id := pos[0], pos[1]
	if !slices.Contains(contracts.ReportNames, name) {
		return usageError{fmt.Errorf("unknown report %q; one of %s", name, strings.Join(contracts.ReportNames, ", "))}
	}
	c, err := openAPI(*api, *data)
	if err != nil {
		return err
	}
	defer c.close()
	rep, err := c.Report(ctx, id, name, 0)
	if err != nil {
		return err
	}
	if *asJSON {
		rows, err := json.Marshal(rep.Rows)
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "%s\n", rows)
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	str := func(s *string) string {
		if s == nil {
			return "-"
		}
		return oneLine(*s)
	}
	switch name {
	case "hosts":
		rows, err := apiclient.DecodeRows[contracts.HostReportRow](rep.Rows)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "HOST\tURLS\tFETCHED\tFAILED\tBYTES\tSTATUS CODES")
		for _, r := range rows {
			codes := make([]string, 0, len(r.StatusCodes))
			for c, n := range r.StatusCodes {
				codes = append(codes, fmt.Sprintf("%s:%d", c, n))
			}
			sort.Strings(codes)
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", r.Host, r.URLs, r.Fetched, r.Failed, r.Bytes, strings.Join(codes, " "))
		}
	case "mime-types":
		rows, err := apiclient.DecodeRows[contracts.MIMEReportRow](rep.Rows)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "MIME TYPE\tCOUNT\tBYTES")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", str(r.MIMEType), r.Count, r.Bytes)
		}
	case "status-codes":
		rows, err := apiclient.DecodeRows[contracts.StatusCodeReportRow](rep.Rows)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "STATUS CODE\tCOUNT")
		for _, r := range rows {
			code := "none"
			if r.StatusCode != nil {
				code = strconv.Itoa(*r.StatusCode)
			}
			fmt.Fprintf(tw, "%s\t%d\n", code, r.Count)
		}
	case "failure-reasons":
		rows, err := apiclient.DecodeRows[contracts.ReasonReportRow](rep.Rows)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "COUNT\tREASON\tSAMPLE URLS")
		for _, r := range rows {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", r.Count, str(r.Reason), strings.Join(r.SampleURLs, " "))
		}
	}
	return tw.Flush()
}
