package yacy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"html"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// Searching the YaCy way: GET /yacysearch.json (YaCy's path),
// /yacy/grid/mcp/index/yacysearch.json (YaCy Grid's MCP path) and
// /yacysearch.rss answer in the shapes of YaCy's yacysearch.json template
// (with yacysearchitem.json and yacysearchtrailer.json) and yacysearch.rss,
// so that clients written for YaCy work unchanged. Like YaCy, these answers
// never fail on a bad number: a startRecord or maximumRecords that is not a
// number is read as its default.
const (
	// yacyDefaultRecords is YaCy's default maximumRecords.
	yacyDefaultRecords = 10
	// yacyMaxRecords caps maximumRecords, as YaCy does for clients that may
	// not raise its configured default.
	yacyMaxRecords = 100
	// yacyMaxStart caps startRecord: deeper pages are not served.
	yacyMaxStart = 10000
	// yacyMaxMaskBytes bounds urlmaskfilter.
	yacyMaxMaskBytes = 256
	// yacyMaskWindow is how many of the best matches a urlmaskfilter is
	// applied to: totalResults then counts the matches among them.
	yacyMaskWindow = 1000
	// yacyMaxCallbackBytes bounds a JSONP callback name.
	yacyMaxCallbackBytes = 64
	// rfc1123Z is YaCy's date format (HeaderFramework.formatRFC1123), with
	// a numeric zone: "Tue, 25 Apr 2017 00:00:00 +0000".
	rfc1123Z = "Mon, 02 Jan 2006 15:04:05 -0700"
)

// openSearchNS is the OpenSearch 1.1 namespace of the RSS answer.
const openSearchNS = "http://a9.com/-/spec/opensearch/1.1/"

// jsonpName is what a JSONP callback name may be: a JavaScript identifier,
// or a dotted path of them.
var jsonpName = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*$`)

// yacyParams is a YaCy search request.
type yacyParams struct {
	query      string // the user's query, operators included
	collection string
	crawl      string
	allCrawls  bool
	start      int
	rows       int
	contentdom string
	resource   string
	verify     string
	navHosts   bool
	navTypes   bool
	mask       *regexp.Regexp // nil: every URL
	maskSrc    string
	callback   string
}

// readYaCyParams reads a request's parameters the way yacysearch.java does:
// query (or search), maximumRecords (or count, rows), startRecord (or
// offset, start), contentdom, resource, verify, nav, urlmaskfilter,
// collection and callback, and gridcrawl's crawl and all_crawls. Numbers
// that are not numbers take their default; only an unusable urlmaskfilter or
// callback is an error.
func readYaCyParams(v url.Values) (yacyParams, *contracts.FieldError) {
	first := func(names ...string) string {
		for _, n := range names {
			if v.Has(n) {
				return v.Get(n)
			}
		}
		return ""
	}
	number := func(def int, names ...string) int {
		n, err := strconv.Atoi(strings.TrimSpace(first(names...)))
		if err != nil {
			return def
		}
		return n
	}
	p := yacyParams{
		query:      strings.TrimSpace(first("query", "search")),
		collection: strings.TrimSpace(v.Get("collection")),
		crawl:      strings.TrimSpace(v.Get("crawl")),
		allCrawls:  v.Get("all_crawls") == "true" || v.Get("all_crawls") == "1",
		rows:       number(yacyDefaultRecords, "maximumRecords", "count", "rows"),
		start:      number(0, "startRecord", "offset", "start"),
		contentdom: strings.ToLower(strings.TrimSpace(v.Get("contentdom"))),
		resource:   strings.ToLower(strings.TrimSpace(v.Get("resource"))),
		verify:     strings.TrimSpace(v.Get("verify")),
		callback:   v.Get("callback"),
	}
	if p.rows < 1 {
		p.rows = yacyDefaultRecords
	}
	p.rows = min(p.rows, yacyMaxRecords)
	p.start = min(max(p.start, 0), yacyMaxStart)
	if p.contentdom == "" {
		p.contentdom = "text"
	}
	if p.resource != "local" {
		p.resource = "global"
	}
	if p.verify == "" {
		p.verify = "false"
	}
	// A collection: operator in the query, like YaCy's; the parameter wins.
	if q, c := cutCollection(p.query); c != "" {
		p.query = q
		if p.collection == "" {
			p.collection = c
		}
	}
	nav := "all"
	if v.Has("nav") {
		nav = v.Get("nav")
	}
	for _, n := range strings.Split(nav, ",") {
		switch strings.ToLower(strings.TrimSpace(n)) {
		case "all":
			p.navHosts, p.navTypes = true, true
		case "hosts":
			p.navHosts = true
		case "filetype":
			p.navTypes = true
		}
	}
	if m := strings.TrimSpace(v.Get("urlmaskfilter")); m != "" && m != ".*" {
		if len(m) > yacyMaxMaskBytes {
			return p, &contracts.FieldError{Field: "urlmaskfilter", Reason: "longer than " + strconv.Itoa(yacyMaxMaskBytes) + " bytes"}
		}
		// Compiled alone first, so that it cannot close the group that
		// anchors it (YaCy's mask must match the whole URL).
		if _, err := regexp.Compile(m); err != nil {
			return p, &contracts.FieldError{Field: "urlmaskfilter", Reason: "not a regular expression: " + err.Error()}
		}
		p.mask, p.maskSrc = regexp.MustCompile(`^(?:`+m+`)$`), m
	}
	if p.callback != "" && (len(p.callback) > yacyMaxCallbackBytes || !jsonpName.MatchString(p.callback)) {
		return p, &contracts.FieldError{Field: "callback", Reason: "must be a JavaScript name of at most " + strconv.Itoa(yacyMaxCallbackBytes) + " bytes"}
	}
	return p, nil
}

// cutCollection removes the first collection:NAME operator from q.
func cutCollection(q string) (string, string) {
	fields := strings.Fields(q)
	for i, f := range fields {
		name, val, ok := strings.Cut(f, ":")
		if ok && val != "" && strings.EqualFold(name, "collection") {
			return strings.Join(append(fields[:i:i], fields[i+1:]...), " "), val
		}
	}
	return q, ""
}

// yacyFound is the part of a search that the answers are made of.
type yacyFound struct {
	total int64
	hits  []contracts.SearchHit
	hosts []search.FacetValue
	types []search.FacetValue
}

// yacySearch runs p against the index. Only text is indexed, so that a
// search for another content domain (image, audio, video, app) finds
// nothing, and so does a query that selects nothing (YaCy answers an empty
// query with an empty result, not an error).
func (y *Surface) yacySearch(ctx context.Context, p yacyParams) (yacyFound, error) {
	switch p.contentdom {
	case "image", "audio", "video", "app":
		return yacyFound{}, nil
	}
	if !search.Parse(p.query).Matches() {
		return yacyFound{}, nil
	}
	q := search.Query{Q: p.query, CrawlID: p.crawl, Collection: p.collection, Offset: p.start, Limit: p.rows,
		Facets: p.navHosts || p.navTypes, AllCrawls: p.allCrawls}
	if p.mask == nil {
		res, err := y.search.Search(ctx, q)
		if err != nil {
			return yacyFound{}, err
		}
		return yacyFound{total: res.Total, hits: res.Hits, hosts: res.Facets[search.FacetHosts],
			types: res.Facets[search.FacetFileTypes]}, nil
	}
	// The index cannot apply a regular expression: filter its best matches.
	q.Offset, q.Limit, q.Facets = 0, yacyMaskWindow, false
	res, err := y.search.Search(ctx, q)
	if err != nil {
		return yacyFound{}, err
	}
	var kept []contracts.SearchHit
	for _, h := range res.Hits {
		if p.mask.MatchString(h.URL) {
			kept = append(kept, h)
		}
	}
	f := yacyFound{total: int64(len(kept))}
	if p.start < len(kept) {
		f.hits = kept[p.start:min(p.start+p.rows, len(kept))]
	}
	if p.navHosts {
		f.hosts = countFacet(kept, func(h contracts.SearchHit) string { return hitURL(h).host })
	}
	if p.navTypes {
		f.types = countFacet(kept, func(h contracts.SearchHit) string { return hitURL(h).ext })
	}
	return f, nil
}

// countFacet counts the non-empty values of hits, most frequent first (ties
// by value), at most search.MaxFacetValues, as search.Result.Facets does.
func countFacet(hits []contracts.SearchHit, value func(contracts.SearchHit) string) []search.FacetValue {
	counts := map[string]int64{}
	for _, h := range hits {
		if v := value(h); v != "" {
			counts[v]++
		}
	}
	out := make([]search.FacetValue, 0, len(counts))
	for v, n := range counts {
		out = append(out, search.FacetValue{Value: v, Count: n})
	}
	slices.SortFunc(out, func(a, b search.FacetValue) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Value, b.Value))
	})
	return out[:min(len(out), search.MaxFacetValues)]
}

// urlParts are the parts of a hit's URL that YaCy answers with.
type urlParts struct {
	host, path, file, ext string
}

// hitURL splits a hit's URL: host (the hit's own when it has one), path
// without query, file (the last path segment) and its lowercase extension.
func hitURL(h contracts.SearchHit) urlParts {
	var p urlParts
	if u, err := url.Parse(h.URL); err == nil {
		p.host, p.path = u.Hostname(), u.EscapedPath()
	}
	if h.Host != "" {
		p.host = h.Host
	}
	if p.path == "" {
		p.path = "/"
	}
	p.file = p.path[strings.LastIndexByte(p.path, '/')+1:]
	if e := path.Ext(p.file); len(e) > 1 {
		p.ext = strings.ToLower(e[1:])
	}
	return p
}

// sizeName formats a size as YaCy does: whole mbyte, kbyte or byte, rounded
// down ("207 kbyte" for 212832).
func sizeName(n int) string {
	switch kb := n / 1024; {
	case kb/1024 > 0:
		return strconv.Itoa(kb/1024) + " mbyte"
	case kb > 0:
		return strconv.Itoa(kb) + " kbyte"
	}
	return strconv.Itoa(n) + " byte"
}

// pubDate is the hit's last modification, or its fetch time when the
// server sent none, in YaCy's RFC 1123 form.
func pubDate(h contracts.SearchHit) string {
	t := h.LastModified
	if t.IsZero() {
		t = h.FetchTime
	}
	return t.UTC().Format(rfc1123Z)
}

// snippetHTML is a hit's snippet (its description when it has none) as
// YaCy sends it: HTML-escaped text with the query's words in <b>.
func snippetHTML(h contracts.SearchHit, words []string) string {
	s := h.Snippet
	if s == "" {
		s = h.Description
	}
	want := map[string]bool{}
	var cjk []string // words found inside longer runs (see search.IsCJK)
	for _, w := range words {
		want[strings.ToLower(w)] = true
		if search.HasCJK(w) {
			cjk = append(cjk, w)
		}
	}
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) }
	var b strings.Builder
	for s != "" {
		// A run of word characters, then a run of others.
		n := strings.IndexFunc(s, func(r rune) bool { return !isWord(r) })
		if n < 0 {
			n = len(s)
		}
		if w := s[:n]; want[strings.ToLower(w)] {
			b.WriteString("<b>" + html.EscapeString(w) + "</b>")
		} else if len(cjk) > 0 && search.HasCJK(w) {
			boldWithin(&b, w, cjk)
		} else {
			b.WriteString(html.EscapeString(w))
		}
		s = s[n:]
		n = strings.IndexFunc(s, isWord)
		if n < 0 {
			n = len(s)
		}
		b.WriteString(html.EscapeString(s[:n]))
		s = s[n:]
	}
	return b.String()
}

// boldWithin writes the run w, HTML-escaped, with every occurrence of one
// of words in <b>, the longest where several start at one place: CJK words
// are written without spaces around them, so they are found inside runs.
func boldWithin(b *strings.Builder, w string, words []string) {
	for w != "" {
		best := ""
		for _, x := range words {
			if len(x) > len(best) && strings.HasPrefix(w, x) {
				best = x
			}
		}
		if best != "" {
			b.WriteString("<b>" + html.EscapeString(best) + "</b>")
			w = w[len(best):]
			continue
		}
		_, size := utf8.DecodeRuneInString(w)
		b.WriteString(html.EscapeString(w[:size]))
		w = w[size:]
	}
}

// queryWords are the words of a query to highlight: its words and the words
// of its phrases.
func queryWords(q string) []string {
	p := search.Parse(q)
	ws := append([]string(nil), p.Words...)
	for _, ph := range p.Phrases {
		ws = append(ws, ph...)
	}
	return ws
}

// The JSON answer. Every number is a string, as YaCy's templates write them.
type (
	yacyJSON struct {
		Channels []yacyChannel `json:"channels"`
	}
	yacyChannel struct {
		Title        string      `json:"title"`
		Description  string      `json:"description"`
		Link         string      `json:"link"`
		TotalResults string      `json:"totalResults"`
		StartIndex   string      `json:"startIndex"`
		ItemsPerPage string      `json:"itemsPerPage"`
		SearchTerms  string      `json:"searchTerms"`
		Items        []yacyItem  `json:"items"`
		Navigation   []yacyFacet `json:"navigation"`
	}
	yacyItem struct {
		Title       string `json:"title"`
		Link        string `json:"link"`
		Description string `json:"description"`
		PubDate     string `json:"pubDate"`
		Size        string `json:"size"`
		SizeName    string `json:"sizename"`
		GUID        string `json:"guid"`
		Host        string `json:"host"`
		Path        string `json:"path"`
		File        string `json:"file"`
		URLHash     string `json:"urlhash"`
		Ranking     string `json:"ranking"`
	}
	yacyFacet struct {
		Name        string           `json:"facetname"`
		DisplayName string           `json:"displayname"`
		Type        string           `json:"type"`
		Min         string           `json:"min"`
		Max         string           `json:"max"`
		Mean        string           `json:"mean"`
		Elements    []yacyFacetValue `json:"elements"`
	}
	yacyFacetValue struct {
		Name     string `json:"name"`
		Count    string `json:"count"`
		Modifier string `json:"modifier"`
		URL      string `json:"url"`
	}
)

// searchLink is the URL of a search for query with p's other parameters, on
// the page named file, relative as YaCy's navigation URLs are.
func (p yacyParams) searchLink(file, query string, start int) string {
	v := url.Values{}
	v.Set("maximumRecords", strconv.Itoa(p.rows))
	v.Set("resource", p.resource)
	v.Set("verify", p.verify)
	v.Set("contentdom", p.contentdom)
	if p.collection != "" {
		v.Set("collection", p.collection)
	}
	if p.crawl != "" {
		v.Set("crawl", p.crawl)
	}
	if p.maskSrc != "" {
		v.Set("urlmaskfilter", p.maskSrc)
	}
	v.Set("startRecord", strconv.Itoa(start))
	// The query first, as in YaCy's links.
	return file + "?query=" + url.QueryEscape(query) + "&" + v.Encode()
}

// yacySearchAnswer builds the JSON answer.
func yacySearchAnswer(p yacyParams, f yacyFound) yacyJSON {
	words := queryWords(p.query)
	ch := yacyChannel{
		Title:        "gridcrawl search for " + p.query,
		Description:  "Search for " + p.query,
		Link:         p.searchLink("yacysearch.json", p.query, p.start),
		TotalResults: strconv.FormatInt(f.total, 10),
		StartIndex:   strconv.Itoa(p.start),
		ItemsPerPage: strconv.Itoa(p.rows),
		SearchTerms:  url.QueryEscape(p.query),
		Items:        make([]yacyItem, 0, len(f.hits)),
		Navigation:   []yacyFacet{},
	}
	for _, h := range f.hits {
		u := hitURL(h)
		title := h.Title
		if title == "" {
			title = h.URL
		}
		ch.Items = append(ch.Items, yacyItem{
			Title: title, Link: h.URL, Description: snippetHTML(h, words), PubDate: pubDate(h),
			Size: strconv.Itoa(h.Size), SizeName: sizeName(h.Size), GUID: h.ID,
			Host: u.host, Path: u.path, File: u.file, URLHash: h.ID,
			Ranking: strconv.FormatFloat(h.Score, 'g', -1, 64),
		})
	}
	facet := func(name, display, operator string, values []search.FacetValue) {
		fc := yacyFacet{Name: name, DisplayName: display, Type: "String", Min: "0", Max: "0", Mean: "0",
			Elements: make([]yacyFacetValue, 0, len(values))}
		for _, v := range values {
			mod := operator + ":" + v.Value
			fc.Elements = append(fc.Elements, yacyFacetValue{Name: v.Value, Count: strconv.FormatInt(v.Count, 10),
				Modifier: url.QueryEscape(mod), URL: p.searchLink("yacysearch.json", p.query+" "+mod, 0)})
		}
		ch.Navigation = append(ch.Navigation, fc)
	}
	if p.navHosts {
		facet("hosts", "Provider", "site", f.hosts)
	}
	if p.navTypes {
		facet("filetype", "Filetype", "filetype", f.types)
	}
	return yacyJSON{Channels: []yacyChannel{ch}}
}

// The RSS answer: RSS 2.0 with OpenSearch 1.1 elements, as yacysearch.rss.
type (
	yacyRSS struct {
		XMLName    xml.Name       `xml:"rss"`
		Version    string         `xml:"version,attr"`
		OpenSearch string         `xml:"xmlns:opensearch,attr"`
		Channel    yacyRSSChannel `xml:"channel"`
	}
	yacyRSSChannel struct {
		Title        string        `xml:"title"`
		Description  string        `xml:"description"`
		Link         string        `xml:"link"`
		TotalResults int64         `xml:"opensearch:totalResults"`
		StartIndex   int           `xml:"opensearch:startIndex"`
		ItemsPerPage int           `xml:"opensearch:itemsPerPage"`
		Query        yacyRSSQuery  `xml:"opensearch:Query"`
		Items        []yacyRSSItem `xml:"item"`
	}
	yacyRSSQuery struct {
		Role        string `xml:"role,attr"`
		SearchTerms string `xml:"searchTerms,attr"`
	}
	yacyRSSItem struct {
		Title       string      `xml:"title"`
		Link        string      `xml:"link"`
		Description string      `xml:"description"`
		PubDate     string      `xml:"pubDate"`
		GUID        yacyRSSGUID `xml:"guid"`
	}
	yacyRSSGUID struct {
		IsPermaLink string `xml:"isPermaLink,attr"`
		ID          string `xml:",chardata"`
	}
)

// yacyRSSAnswer builds the RSS answer from the JSON one.
func yacyRSSAnswer(p yacyParams, f yacyFound) yacyRSS {
	ch := yacySearchAnswer(p, f).Channels[0]
	r := yacyRSS{Version: "2.0", OpenSearch: openSearchNS, Channel: yacyRSSChannel{
		Title: ch.Title, Description: ch.Description, Link: p.searchLink("yacysearch.rss", p.query, p.start),
		TotalResults: f.total, StartIndex: p.start, ItemsPerPage: p.rows,
		Query: yacyRSSQuery{Role: "request", SearchTerms: p.query},
	}}
	for _, it := range ch.Items {
		r.Channel.Items = append(r.Channel.Items, yacyRSSItem{Title: it.Title, Link: it.Link,
			Description: it.Description, PubDate: it.PubDate, GUID: yacyRSSGUID{IsPermaLink: "false", ID: it.GUID}})
	}
	return r
}

// yacySearchJSON answers /yacysearch.json and YaCy Grid's
// /yacy/grid/mcp/index/yacysearch.json, as JSONP when a callback is given.
func (y *Surface) yacySearchJSON(w http.ResponseWriter, r *http.Request) {
	p, f, ok := y.yacyRun(w, r)
	if !ok {
		return
	}
	body, err := json.Marshal(yacySearchAnswer(p, f))
	if err != nil {
		y.log.Error("yacy search answer", "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "search failed", "")
		return
	}
	if p.callback != "" {
		// YaCy wraps its answer as callback([...]).
		w.Header().Set("Content-Type", "application/javascript; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		body = bytes.Join([][]byte{[]byte("/**/" + p.callback + "(["), body, []byte("])\n")}, nil)
	} else {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		body = append(body, '\n')
	}
	_, _ = w.Write(body)
}

// yacySearchRSS answers /yacysearch.rss.
func (y *Surface) yacySearchRSS(w http.ResponseWriter, r *http.Request) {
	p, f, ok := y.yacyRun(w, r)
	if !ok {
		return
	}
	body, err := xml.MarshalIndent(yacyRSSAnswer(p, f), "", "\t")
	if err != nil {
		y.log.Error("yacy search rss answer", "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "search failed", "")
		return
	}
	w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

// yacyRun reads the request and searches; on failure it has answered.
func (y *Surface) yacyRun(w http.ResponseWriter, r *http.Request) (yacyParams, yacyFound, bool) {
	p, fe := readYaCyParams(r.URL.Query())
	if fe != nil {
		jsonapi.Error(w, http.StatusBadRequest, fe.Error(), fe.Field)
		return p, yacyFound{}, false
	}
	f, err := y.yacySearch(r.Context(), p)
	if err != nil {
		y.log.Error("yacy search", "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "search failed", "")
		return p, yacyFound{}, false
	}
	return p, f, true
}
