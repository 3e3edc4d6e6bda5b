package sqlitestore

import (
	"context"
	"fmt"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Reads methods of TxIndex: listings, the crawl log and the
// reports, which are GROUP BY queries.

// List returns up to limit records of crawlID after the key after, in key
// order; status filters when not empty.
//
// No index orders a crawl's records by key (one would be written at a random
// place for every record), so List picks the cheaper of two ways per call:
// walking the key index from after and skipping other crawls and statuses,
// which costs about limit × all records / matching records; or reading every
// matching record through the crawl/status index and sorting, which costs
// about the matching records. The counts table gives both sizes.
func (x *TxIndex) List(ctx context.Context, crawlID string, status contracts.Status, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	counts, err := x.Counts(ctx, crawlID)
	if err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	var matching int64
	for s, n := range counts {
		if status == "" || s == status {
			matching += n
		}
	}
	if matching == 0 {
		return nil, nil
	}
	var all int64
	if err := x.total.QueryRowContext(ctx).Scan(&all); err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	byKey := matching*matching > int64(limit)*all
	return x.list(ctx, crawlID, status, after, limit, byKey)
}

func (x *TxIndex) list(ctx context.Context, crawlID string, status contracts.Status, after string, limit int, byKey bool) ([]txindex.Record, error) {
	st := x.listByKey
	switch {
	case byKey:
	case status == "":
		st = x.listCrawl
	default:
		st = x.listByStatus
	}
	rows, err := st.QueryContext(ctx, crawlID, string(status), after, limit)
	if err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("list records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// Find returns up to limit records of crawlID after the key after, in key
// order, that match f. Keys only grow along a listing, so it is stable.
//
// Without host and reason it lists like List (which picks the cheaper of
// two plans by the counts). With them the planner reads the matching
// records through records_crawl_host or records_crawl_status and sorts
// them by key. No index serves reasons: one would be maintained on every
// transition (they all set error) for an operator's query.
func (x *TxIndex) Find(ctx context.Context, crawlID string, f txindex.Filter, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	var recs []txindex.Record
	var err error
	if f.Host == "" && f.Reason == "" {
		recs, err = x.List(ctx, crawlID, f.Status, after, limit)
		if err != nil {
			return nil, err
		}
		// List does not decode histories, which the hot path does not
		// need; read them for this page.
		return x.withHistory(ctx, crawlID, recs)
	}
	q := `SELECT ` + recordCols + ` FROM records WHERE crawl_id = ? AND key > ?`
	args := []any{crawlID, after}
	if f.Host != "" {
		q += ` AND host = ?`
		args = append(args, f.Host)
	}
	if f.Reason != "" {
		q += ` AND error = ?`
		args = append(args, f.Reason)
	}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	q += ` ORDER BY key LIMIT ?`
	args = append(args, limit)
	rows, err := x.st.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("find records of crawl %q: %w", crawlID, err)
	}
	recs, err = scanRecordsHistory(rows, true)
	if err != nil {
		return nil, fmt.Errorf("find records of crawl %q: %w", crawlID, err)
	}
	return recs, nil
}

// withHistory sets the History of recs from the index.
func (x *TxIndex) withHistory(ctx context.Context, crawlID string, recs []txindex.Record) ([]txindex.Record, error) {
	if len(recs) == 0 {
		return recs, nil
	}
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	q := `SELECT key, history FROM records WHERE key IN (` + placeholders(len(keys)) + `)`
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	rows, err := x.st.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("find records of crawl %q: history: %w", crawlID, err)
	}
	defer rows.Close()
	hist := make(map[string]string, len(recs))
	for rows.Next() {
		var k, h string
		if err := rows.Scan(&k, &h); err != nil {
			return nil, fmt.Errorf("find records of crawl %q: history: %w", crawlID, err)
		}
		hist[k] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find records of crawl %q: history: %w", crawlID, err)
	}
	for i := range recs {
		if recs[i].History, err = decodeHistory(hist[recs[i].Key]); err != nil {
			return nil, fmt.Errorf("find records of crawl %q: %w", crawlID, err)
		}
	}
	return recs, nil
}

// HostsReport groups the records of crawlID by host, through
// records_crawl_host.
func (x *TxIndex) HostsReport(ctx context.Context, crawlID string, limit int) ([]txindex.HostRow, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := x.st.r.QueryContext(ctx, `SELECT host, count(*), sum(http_status <> 0),
		sum(status = ?2 AND coalesce(error, '') <> ?4), coalesce(sum(bytes), 0) FROM records WHERE crawl_id = ?1
		GROUP BY host ORDER BY count(*) DESC, host LIMIT ?3`, crawlID, string(contracts.Failed), limit, contracts.ReasonCancelled)
	if err != nil {
		return nil, fmt.Errorf("hosts report of crawl %q: %w", crawlID, err)
	}
	var out []txindex.HostRow
	byHost := map[string]int{}
	for rows.Next() {
		var r txindex.HostRow
		if err := rows.Scan(&r.Host, &r.URLs, &r.Fetched, &r.Failed, &r.Bytes); err != nil {
			rows.Close()
			return nil, fmt.Errorf("hosts report of crawl %q: %w", crawlID, err)
		}
		r.StatusCodes = map[int]int64{}
		byHost[r.Host] = len(out)
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hosts report of crawl %q: %w", crawlID, err)
	}
	if len(out) == 0 {
		return out, nil
	}
	hosts := make([]any, 0, len(out)+1)
	hosts = append(hosts, crawlID)
	for _, r := range out {
		hosts = append(hosts, r.Host)
	}
	rows, err = x.st.r.QueryContext(ctx, `SELECT host, http_status, count(*) FROM records
		WHERE crawl_id = ? AND host IN (`+placeholders(len(out))+`) AND http_status <> 0
		GROUP BY host, http_status`, hosts...)
	if err != nil {
		return nil, fmt.Errorf("hosts report of crawl %q: %w", crawlID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var host string
		var code int
		var n int64
		if err := rows.Scan(&host, &code, &n); err != nil {
			return nil, fmt.Errorf("hosts report of crawl %q: %w", crawlID, err)
		}
		out[byHost[host]].StatusCodes[code] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hosts report of crawl %q: %w", crawlID, err)
	}
	return out, nil
}

// MIMETypesReport groups the records of crawlID with an HTTP status by
// media type.
func (x *TxIndex) MIMETypesReport(ctx context.Context, crawlID string, limit int) ([]txindex.MIMERow, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := x.st.r.QueryContext(ctx, `SELECT mime_type, count(*), coalesce(sum(bytes), 0) FROM records
		WHERE crawl_id = ? AND http_status <> 0 GROUP BY mime_type ORDER BY count(*) DESC, mime_type LIMIT ?`,
		crawlID, limit)
	if err != nil {
		return nil, fmt.Errorf("mime types report of crawl %q: %w", crawlID, err)
	}
	defer rows.Close()
	var out []txindex.MIMERow
	for rows.Next() {
		var r txindex.MIMERow
		if err := rows.Scan(&r.MIMEType, &r.Count, &r.Bytes); err != nil {
			return nil, fmt.Errorf("mime types report of crawl %q: %w", crawlID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mime types report of crawl %q: %w", crawlID, err)
	}
	return out, nil
}

// CountMatching counts the records of crawlID that match f.
func (x *TxIndex) CountMatching(ctx context.Context, crawlID string, f txindex.Filter) (int64, error) {
	q := `SELECT count(*) FROM records WHERE crawl_id = ?`
	args := []any{crawlID}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	if f.Host != "" {
		q += ` AND host = ?`
		args = append(args, f.Host)
	}
	if f.Reason != "" {
		q += ` AND error = ?`
		args = append(args, f.Reason)
	}
	var n int64
	if err := x.st.r.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count matching records of crawl %q: %w", crawlID, err)
	}
	return n, nil
}

// terminalSQL is the SQL list of the terminal statuses.
var terminalSQL = func() string {
	var q []string
	for _, s := range contracts.Statuses {
		if s.Terminal() {
			q = append(q, "'"+string(s)+"'")
		}
	}
	return "(" + strings.Join(q, ",") + ")"
}()

// StatusCodesReport groups the records of crawlID by HTTP status; those
// without one count only when settled.
func (x *TxIndex) StatusCodesReport(ctx context.Context, crawlID string) ([]txindex.StatusCodeRow, error) {
	rows, err := x.st.r.QueryContext(ctx, `SELECT http_status, count(*) FROM records WHERE crawl_id = ?
		AND (http_status != 0 OR status IN `+terminalSQL+`)
		GROUP BY http_status ORDER BY http_status`, crawlID)
	if err != nil {
		return nil, fmt.Errorf("status codes report of crawl %q: %w", crawlID, err)
	}
	defer rows.Close()
	var out []txindex.StatusCodeRow
	for rows.Next() {
		var r txindex.StatusCodeRow
		if err := rows.Scan(&r.StatusCode, &r.Count); err != nil {
			return nil, fmt.Errorf("status codes report of crawl %q: %w", crawlID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("status codes report of crawl %q: %w", crawlID, err)
	}
	return out, nil
}

// FailureReasonsReport groups the failed records of crawlID by reason, with
// the first URLs by key of each in the same query (a window function).
func (x *TxIndex) FailureReasonsReport(ctx context.Context, crawlID string, limit int) ([]txindex.ReasonRow, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := x.st.r.QueryContext(ctx, `SELECT error, n, url FROM (
			SELECT error, url, count(*) OVER (PARTITION BY error) AS n,
				row_number() OVER (PARTITION BY error ORDER BY key) AS i
			FROM records WHERE crawl_id = ? AND status = ?)
		WHERE i <= ? ORDER BY n DESC, error, i`, crawlID, string(contracts.Failed), txindex.MaxSamples)
	if err != nil {
		return nil, fmt.Errorf("failure reasons report of crawl %q: %w", crawlID, err)
	}
	defer rows.Close()
	var out []txindex.ReasonRow
	for rows.Next() {
		var reason, u string
		var n int64
		if err := rows.Scan(&reason, &n, &u); err != nil {
			return nil, fmt.Errorf("failure reasons report of crawl %q: %w", crawlID, err)
		}
		if len(out) == 0 || out[len(out)-1].Reason != reason {
			if len(out) == limit {
				break
			}
			out = append(out, txindex.ReasonRow{Reason: reason, Count: n})
		}
		last := &out[len(out)-1]
		last.SampleURLs = append(last.SampleURLs, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failure reasons report of crawl %q: %w", crawlID, err)
	}
	return out, nil
}
