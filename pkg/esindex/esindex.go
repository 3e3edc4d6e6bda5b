// Package esindex keeps the transaction index, the crawl profiles and the
// search index in Elasticsearch 8: the grid-mode implementations of
// txindex.Index, profiles.Store and search.Index.
//
// One Client holds one HTTP client and five indices, created at Open with
// explicit, strict mappings: "<prefix>-transactions", "<prefix>-profiles",
// "<prefix>-web" (YaCy web documents; YaCy Grid's index is "web"),
// "<prefix>-digests" (payload digests of deduplication, digests.Index) and
// "<prefix>-owners" (the loader shards' leases, txindex.Owners). Only
// core Elasticsearch features are used (no
// scripts, no update- or delete-by-query), so the bare integ-test
// distribution serves it.
//
// # Visibility
//
// Gets (get, mget) are realtime in Elasticsearch; searches, aggregations and
// _count see only what the last refresh made visible. The interfaces promise
// that whatever a call reports done is visible to every following read, so
// Options.Refresh chooses who pays for the refresh; see Refresh.
//
// The default, RefreshOnRead, was chosen by measurement (BenchmarkCreate,
// BenchmarkTransition, BenchmarkUpsert, BenchmarkPage on one local node):
// a bulk Create of 100 records took 6 ms with it, 23 ms with refresh=true
// and about 1 s with refresh=wait_for (the refresh interval); a Transition
// of 100 records 12, 36 and 1000 ms; an Upsert of 50 documents 9, 18 and
// 1000 ms; the whole transaction-index work of a page (three transitions,
// a Create of its outlinks and a Counts) from 8 goroutines 65, 12 and 2
// pages/s. Each write is one request with every policy.
//
// # Termination
//
// A crawl is finished when none of its records is in a non-terminal status.
// TerminationQuery returns the body of a plain _count request that answers
// this from outside gridcrawl.
package esindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// webRefresh is the web index's refresh interval.
const webRefresh = "30s"

// DefaultPrefix is the index name prefix when Options.Prefix is empty.
const DefaultPrefix = "gridcrawl"

// Refresh says how writes become visible to searches, aggregations and
// counts. Every policy keeps the interfaces' visibility contracts, also
// across processes; they differ in who pays for the refresh.
type Refresh string

// Refresh policies.
const (
	// RefreshOnRead (the default) leaves writes alone and refreshes an index
	// (POST <index>/_refresh) before every read that is not a get: Counts,
	// CountHost, Stale, List, profile List, Search and Count. A write costs
	// one request and makes no segment of its own; a refresh of an index that
	// has not changed costs next to nothing. Writes far outnumber such reads
	// in a crawl (a page is one Transition, its new URLs one Create; Counts
	// and CountHost are read only for crawls with page limits), so this is
	// the policy with the fewest requests and refreshes per page. Concurrent
	// readers of one Client share a refresh.
	RefreshOnRead Refresh = "on-read"
	// RefreshWaitFor sends writes with refresh=wait_for: no extra request and
	// no extra segment, but every write waits for the next scheduled refresh
	// (index.refresh_interval, 1 s by default), which slows each caller.
	RefreshWaitFor Refresh = "wait-for"
	// RefreshOnWrite sends writes with refresh=true: no extra request and no
	// wait, but one new segment per write request, which Elasticsearch must
	// merge away again.
	RefreshOnWrite Refresh = "on-write"
)

// Options configure a Client.
type Options struct {
	// URL is the Elasticsearch endpoint, such as http://127.0.0.1:9200, or
	// several nodes of one cluster separated by commas. The client spreads
	// requests over the nodes, and a request that fails to reach one (a
	// network error, or status 502, 503 or 504) is sent again to another;
	// a node that failed rests for a minute, doubling with each further
	// failure up to 32 minutes, unless every node failed (see retries.go).
	URL string
	// Prefix starts the name of every index; DefaultPrefix when empty. It
	// must be lower case.
	Prefix string
	// Logger receives start-up and retry messages; slog.Default() when nil.
	Logger *slog.Logger
	// Refresh is the refresh policy; RefreshOnRead when empty.
	Refresh Refresh
	// Replicas is the number of replicas (index.number_of_replicas) of
	// the indices that Open creates: transactions, profiles, documents,
	// digests, shard leases and the HCF fingerprints. Zero suits a single
	// node; a cluster wants at least one. With zero and UpdateReplicas
	// unset the HCF index keeps its former auto_expand_replicas "0-1".
	Replicas int
	// UpdateReplicas makes Open also set Replicas on existing indices
	// whose number of replicas differs (a dynamic setting), with a log
	// line per index; unset, existing indices keep theirs.
	UpdateReplicas bool
	// WaitForActiveShards is the wait_for_active_shards of writes: how
	// many copies of each shard (the primary counts as one) must be
	// active before a write starts, "all", or empty for the index's
	// default (1, the primary alone). It is a check made before the
	// write, not a quorum of the write: Elasticsearch acknowledges a write
	// once the primary and every in-sync replica have it.
	WaitForActiveShards string
	// Shards is the number of primary shards of the documents index that
	// Open creates; 1 when zero. The transactions and profiles indices have
	// one shard: a crawl's records are counted, sorted and paged together,
	// and one shard makes every refreshed view of them a consistent
	// snapshot (see TerminationQuery).
	Shards int
	// Transport is the HTTP transport; a pooled http.Transport when nil.
	Transport http.RoundTripper
}

// Client is one connection to Elasticsearch and the gridcrawl indices
// on it. It is safe for concurrent use.
type Client struct {
	es      *elasticsearch.Client
	log     *slog.Logger
	refresh Refresh
	tr      *http.Transport // owned, closed by Close; nil when given
	// replicas and updateReplicas are Options.Replicas and
	// Options.UpdateReplicas; waitShards is Options.WaitForActiveShards.
	replicas       int
	updateReplicas bool
	waitShards     string

	txIndex, profilesIndex, docsIndex string
	digestsIndex, ownersIndex         string
	refreshers                        map[string]*refresher

	tx       *TxIndex
	profiles *Profiles
	search   *Search
	digests  *Digests

	reads readCounter // what the client read, by index and kind (Reads)
}

// Open connects to Elasticsearch and creates the indices that are absent,
// with their mappings and settings. For indices that exist it puts the
// mappings again, which adds fields that a newer gridcrawl maps and fails on
// a conflicting mapping. Of the settings of existing indices, only the
// number of replicas changes, with Options.UpdateReplicas; a number of
// shards other than configured is logged as a warning.
func Open(ctx context.Context, opts Options) (*Client, error) {
	addrs, err := parseAddresses(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("open elasticsearch: %w", err)
	}
	urls := redactURLs(addrs)
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Prefix != strings.ToLower(opts.Prefix) || strings.ContainsAny(opts.Prefix, ` "*\<|,>/?#:`) {
		return nil, fmt.Errorf("open elasticsearch %q: invalid index prefix %q", urls, opts.Prefix)
	}
	switch opts.Refresh {
	case "":
		opts.Refresh = RefreshOnRead
	case RefreshOnRead, RefreshWaitFor, RefreshOnWrite:
	default:
		return nil, fmt.Errorf("open elasticsearch %q: unknown refresh policy %q", urls, opts.Refresh)
	}
	if opts.Replicas < 0 || opts.Shards < 0 {
		return nil, fmt.Errorf("open elasticsearch %q: negative shards or replicas", urls)
	}
	if err := CheckWaitForActiveShards(opts.WaitForActiveShards, opts.Replicas); err != nil {
		return nil, fmt.Errorf("open elasticsearch %q: %w", urls, err)
	}
	if opts.Shards == 0 {
		opts.Shards = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{
		log:            opts.Logger,
		refresh:        opts.Refresh,
		replicas:       opts.Replicas,
		updateReplicas: opts.UpdateReplicas,
		waitShards:     opts.WaitForActiveShards,
		txIndex:        opts.Prefix + "-transactions",
		profilesIndex:  opts.Prefix + "-profiles",
		docsIndex:      opts.Prefix + "-web",
		digestsIndex:   opts.Prefix + "-digests",
		ownersIndex:    opts.Prefix + "-owners",
		reads:          readCounter{prefix: opts.Prefix},
	}
	c.refreshers = map[string]*refresher{
		c.txIndex: newRefresher(), c.profilesIndex: newRefresher(), c.docsIndex: newRefresher(),
		c.digestsIndex: newRefresher(), c.ownersIndex: newRefresher(),
	}
	rt := opts.Transport
	if rt == nil {
		c.tr = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}
		rt = c.tr
	}
	es, err := elasticsearch.NewClient(clientConfig(addrs, rt))
	if err != nil {
		return nil, fmt.Errorf("open elasticsearch %q: %w", urls, err)
	}
	c.es = es
	for _, ix := range []struct {
		name   string
		shards int
		props  map[string]any
	}{
		{c.txIndex, 1, txMapping},
		{c.profilesIndex, 1, profilesMapping},
		{c.docsIndex, opts.Shards, webMapping()},
		{c.digestsIndex, 1, digestsMapping},
		{c.ownersIndex, 1, ownersMapping},
	} {
		if err := c.ensureIndex(ctx, ix.name, ix.shards, opts.Replicas, ix.props); err != nil {
			c.Close()
			return nil, fmt.Errorf("open elasticsearch %q: %w", urls, err)
		}
	}
	// Refresh intervals. Digest look-ups read the refreshed view (see
	// Digests): an explicit interval keeps the index refreshing while
	// nothing searches it (a shard with the default goes search-idle after
	// 30 s and skips its refreshes). The web index needs no scheduled
	// refresh: gridcrawl's searches refresh it first (RefreshOnRead), and
	// each refresh of a crawl's stream of documents is a segment to merge
	// (a refresh a second was a third of Elasticsearch's time in a crawl);
	// others who search it directly see documents within webRefresh.
	for _, ix := range []struct{ name, interval string }{{c.digestsIndex, "1s"}, {c.docsIndex, webRefresh}} {
		settings := strings.NewReader(`{"index":{"refresh_interval":"` + ix.interval + `"}}`)
		if err := c.do(ctx, esapi.IndicesPutSettingsRequest{Index: []string{ix.name}, Body: settings}, nil); err != nil {
			c.Close()
			return nil, fmt.Errorf("open elasticsearch %q: set refresh interval of %q: %w", urls, ix.name, err)
		}
	}
	c.tx = &TxIndex{c: c, cache: newVersionCache()}
	c.profiles = &Profiles{c: c}
	c.search = &Search{c: c}
	c.digests = &Digests{c: c}
	return c, nil
}

// TxIndex returns the transaction index.
func (c *Client) TxIndex() *TxIndex { return c.tx }

// Profiles returns the crawl profile store.
func (c *Client) Profiles() *Profiles { return c.profiles }

// Search returns the search index.
func (c *Client) Search() *Search { return c.search }

// Digests returns the payload-digest index of deduplication.
func (c *Client) Digests() *Digests { return c.digests }

// IndexNames returns the names of the transactions, profiles and documents
// indices.
func (c *Client) IndexNames() (transactions, profiles, documents string) {
	return c.txIndex, c.profilesIndex, c.docsIndex
}

// DeleteIndices deletes the five indices with everything in them. Absent
// indices are not an error. It is meant for tests.
func (c *Client) DeleteIndices(ctx context.Context) error {
	ignore := true
	names := []string{c.txIndex, c.profilesIndex, c.docsIndex, c.digestsIndex, c.ownersIndex}
	req := esapi.IndicesDeleteRequest{Index: names, IgnoreUnavailable: &ignore}
	if err := c.do(ctx, req, nil); err != nil {
		return fmt.Errorf("delete indices %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}

// Close releases idle connections. The indices of c must not be used after.
func (c *Client) Close() {
	if c.tr != nil {
		c.tr.CloseIdleConnections()
	}
}

func (c *Client) ensureIndex(ctx context.Context, name string, shards, replicas int, props map[string]any) error {
	mapping := map[string]any{"dynamic": "strict", "properties": props}
	body, err := json.Marshal(map[string]any{
		"settings": map[string]any{"index": map[string]any{
			"number_of_shards":   shards,
			"number_of_replicas": replicas,
		}},
		"mappings": mapping,
	})
	if err != nil {
		return fmt.Errorf("create index %q: %w", name, err)
	}
	err = c.do(ctx, esapi.IndicesCreateRequest{Index: name, Body: bytes.NewReader(body)}, nil)
	if err == nil {
		c.log.Info("created elasticsearch index", "index", name)
		return nil
	}
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Type != "resource_already_exists_exception" {
		return fmt.Errorf("create index %q: %w", name, err)
	}
	if err := c.checkSettings(ctx, name, shards); err != nil {
		return err
	}
	props, err = c.keepExisting(ctx, name, props)
	if err != nil {
		return fmt.Errorf("put mapping of index %q: %w", name, err)
	}
	body, err = json.Marshal(map[string]any{"dynamic": "strict", "properties": props})
	if err != nil {
		return fmt.Errorf("put mapping of index %q: %w", name, err)
	}
	if err := c.do(ctx, esapi.IndicesPutMappingRequest{Index: []string{name}, Body: bytes.NewReader(body)}, nil); err != nil {
		return fmt.Errorf("put mapping of index %q: %w", name, err)
	}
	return nil
}

// keepExisting returns props with the definition that index name has
// already for each field it maps with the same type. Elasticsearch cannot
// change how an existing field is indexed (index, doc_values, sub-fields),
// so an index created by an older version keeps those and still works,
// only at the older cost; a field mapped with another type is left in
// props, so that putting it fails as a conflict.
func (c *Client) keepExisting(ctx context.Context, name string, props map[string]any) (map[string]any, error) {
	var res map[string]struct {
		Mappings struct {
			Properties map[string]map[string]any `json:"properties"`
		} `json:"mappings"`
	}
	if err := c.do(ctx, esapi.IndicesGetMappingRequest{Index: []string{name}}, &res); err != nil {
		return nil, err
	}
	existing := res[name].Mappings.Properties
	out := make(map[string]any, len(props))
	for f, def := range props {
		out[f] = def
		old, ok := existing[f]
		if !ok {
			continue
		}
		if typeOf(old) == typeOf(def.(map[string]any)) {
			out[f] = withSubFields(old, def.(map[string]any))
		}
	}
	return out, nil
}

// withSubFields returns the existing field definition old with the
// sub-fields (multi-fields) of def it lacks: Elasticsearch allows adding
// them to an existing field.
func withSubFields(old, def map[string]any) map[string]any {
	add, ok := def["fields"].(map[string]any)
	if !ok {
		return old
	}
	out := make(map[string]any, len(old)+1)
	for k, v := range old {
		out[k] = v
	}
	fields := map[string]any{}
	if have, ok := old["fields"].(map[string]any); ok {
		for k, v := range have {
			fields[k] = v
		}
	}
	for k, v := range add {
		if _, ok := fields[k]; !ok {
			fields[k] = v
		}
	}
	out["fields"] = fields
	return out
}

// typeOf returns the type of a field mapping; "object" when it has none.
func typeOf(def map[string]any) string {
	if t, ok := def["type"].(string); ok {
		return t
	}
	return "object"
}

// writeRefresh is the refresh parameter of write requests.
func (c *Client) writeRefresh() string {
	switch c.refresh {
	case RefreshWaitFor:
		return "wait_for"
	case RefreshOnWrite:
		return "true"
	}
	return ""
}

// readRefresh makes every write acknowledged so far visible to the searches
// of index that follow, when the policy leaves that to readers. Concurrent
// readers share refreshes.
func (c *Client) readRefresh(ctx context.Context, index string) error {
	if c.refresh != RefreshOnRead {
		return nil
	}
	err := c.refreshers[index].refresh(ctx, func(ctx context.Context) error {
		return c.do(ctx, esapi.IndicesRefreshRequest{Index: []string{index}}, nil)
	})
	if err != nil {
		return fmt.Errorf("refresh index %q: %w", index, err)
	}
	return nil
}

// StatusError is an error answer of Elasticsearch.
type StatusError struct {
	// Status is the HTTP status code.
	Status int
	// Type and Reason come from the error object of the answer, when it has
	// one.
	Type, Reason string
}

// Error describes the answer.
func (e *StatusError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("elasticsearch status %d", e.Status)
	}
	return fmt.Sprintf("elasticsearch status %d: %s: %s", e.Status, e.Type, e.Reason)
}

// isStatus reports whether err is a StatusError with status code.
func isStatus(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == code
}

// esError is the error object of Elasticsearch answers and bulk items.
type esError struct {
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	CausedBy *struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	} `json:"caused_by"`
}

func (e *esError) statusError(status int) *StatusError {
	se := &StatusError{Status: status, Type: e.Type, Reason: e.Reason}
	if e.CausedBy != nil {
		se.Reason += " (" + e.CausedBy.Type + ": " + e.CausedBy.Reason + ")"
	}
	return se
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// do runs req and decodes a 2xx answer into out when out is not nil. Other
// answers are returned as *StatusError.
func (c *Client) do(ctx context.Context, req esapi.Request, out any) error {
	c.reads.request(req)
	res, err := req.Do(ctx, c.es)
	if err != nil {
		return err
	}
	defer func() {
		// Drain so that the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxErrorBody))
		_ = res.Body.Close()
	}()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		se := &StatusError{Status: res.StatusCode}
		if json.Unmarshal(b, &e) == nil && len(e.Error) > 0 {
			var obj esError
			if json.Unmarshal(e.Error, &obj) == nil {
				se = obj.statusError(res.StatusCode)
			} else {
				se.Reason = string(e.Error)
			}
		}
		return se
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// Field mappings. Indexed keywords that hold outside input (URLs) have
// ignore_above, so that an absurd value is stored but not indexed instead
// of failing the write (Lucene refuses terms over 32 KiB); fields kept in
// _source only have no such limit.
var (
	keyword    = map[string]any{"type": "keyword"}
	date       = map[string]any{"type": "date"}
	integer    = map[string]any{"type": "integer"}
	text       = map[string]any{"type": "text"}
	storedOnly = map[string]any{"type": "object", "enabled": false}
	sourceOnly = func(typ string) map[string]any {
		return map[string]any{"type": typ, "index": false, "doc_values": false}
	}
	// aggOnly is a field that is aggregated but never searched.
	aggOnly = func(typ string) map[string]any {
		return map[string]any{"type": typ, "index": false}
	}
	// withSub returns def with the sub-field (multi-field) name.
	withSub = func(def map[string]any, name string, sub map[string]any) map[string]any {
		def["fields"] = map[string]any{name: sub}
		return def
	}

	// txMapping indexes only the fields that queries use: crawl_id, host
	// and status (filters, the terms aggregation of Counts, the
	// termination query), status_time (Stale's range and sort), next_due
	// (Due's range and sort: only settled records of continuous crawls
	// have one), loader_shard (Waiting's filter, and Stale's exclusion of
	// owned shards) and key (List's sort). The reports aggregate error,
	// http_status (through the sub-fields error.r and http_status.n, which
	// can be added to an index whose error and http_status are source
	// only), mime_type and bytes from doc values; the crawl log filters on
	// error.r. The others are read from _source only, so a write of a
	// record costs no inverted index or doc values for them. Indices
	// created by older versions, which index every field, keep their
	// mapping (see ensureIndex) and gain the new fields; their records
	// written before count as unknown in the reports until they are
	// written again, and have no loader_shard, as Record.Shard allows.
	txMapping = map[string]any{
		"key":         keyword,
		"crawl_id":    keyword,
		"url":         sourceOnly("keyword"),
		"host":        keyword,
		"chg":         sourceOnly("keyword"),
		"depth":       sourceOnly("integer"),
		"hops":        sourceOnly("integer"),
		"referrer":    sourceOnly("keyword"),
		"status":      keyword,
		"status_time": date,
		"attempts":    sourceOnly("integer"),
		"error":       withSub(sourceOnly("keyword"), reasonField, map[string]any{"type": "keyword", "ignore_above": 1024}),
		"http_status": withSub(sourceOnly("integer"), codeField, aggOnly("integer")),
		"asset":       storedOnly,
		"created_at":  sourceOnly("date"),
		"mime_type":   aggOnly("keyword"),
		"bytes":       aggOnly("long"),
		"history":     storedOnly,
		"sitemap":     sourceOnly("keyword"),
		"lastmod":     sourceOnly("date"),
		"recrawl":     storedOnly,
		"next_due":    date,
		"render":      sourceOnly("keyword"),
		"write":       sourceOnly("keyword"), // the write id (txDoc)

		"loader_shard": keyword, // Record.Shard
	}

	profilesMapping = map[string]any{
		"crawl_id":    keyword,
		"profile":     storedOnly,
		"state":       keyword,
		"created_at":  date,
		"finished_at": date,
	}
)

// unindexed are the document fields kept in _source only: the link, image
// and anchor text lists can hold thousands of entries per page, and no query
// searches or aggregates them, so indexing them would cost more than all
// the other fields together.
var unindexed = map[string]bool{
	"inboundlinks_sxt": true, "outboundlinks_sxt": true, "images_sxt": true,
	"inboundlinks_anchortext_txt": true, "outboundlinks_anchortext_txt": true,
}

// webMapping is the strict mapping of the web index, made from
// contracts.DocumentFields by YaCy's suffix convention: _s and _sxt keyword
// (values over 8191 characters kept in _source but not indexed), _t and
// _txt text, _i integer, _l long, _dt date, _b boolean. The title boost is
// applied by the query, not the mapping. noindex_b is never stored;
// write_id_s, not a field of the document, is the write id of the Upsert
// that stored it.
func webMapping() map[string]any {
	props := map[string]any{}
	for _, f := range contracts.DocumentFields() {
		if f.Name == "noindex_b" {
			continue
		}
		var m map[string]any
		switch f.Type {
		case contracts.FieldKeyword:
			m = map[string]any{"type": "keyword", "ignore_above": 8191}
		default:
			m = map[string]any{"type": string(f.Type)}
		}
		if unindexed[f.Name] {
			m["index"] = false
			if f.Type == contracts.FieldKeyword {
				m["doc_values"] = false
			}
		}
		props[f.Name] = m
	}
	props["url_s"].(map[string]any)["fields"] = map[string]any{"text": text}
	props[writeIDField] = map[string]any{"type": "keyword", "index": false, "doc_values": false}
	return props
}

// redactURL returns u without its password, for messages. The client's own
// errors may still quote u: callers redact those (wire.Backends.Redact).
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// redactURLs returns the addresses without their passwords, separated by
// commas, for messages.
func redactURLs(addrs []string) string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = redactURL(a)
	}
	return strings.Join(out, ",")
}

// SplitURLs returns the addresses of a comma-separated list, each trimmed
// of spaces, without empty ones.
func SplitURLs(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// parseAddresses returns the node addresses of list (see Options.URL):
// each an http or https URL with a host and no query or fragment. Its
// errors name an address without its password.
func parseAddresses(list string) ([]string, error) {
	addrs := SplitURLs(list)
	if len(addrs) == 0 {
		return nil, errors.New("empty url")
	}
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		u, err := url.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("address %s: not a URL", redactURL(a))
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("address %q: want http[s]://[user:password@]host:port[/path]", u.Redacted())
		}
		if seen[u.Host+u.Path] {
			return nil, fmt.Errorf("address %q: listed twice", u.Redacted())
		}
		seen[u.Host+u.Path] = true
	}
	return addrs, nil
}
