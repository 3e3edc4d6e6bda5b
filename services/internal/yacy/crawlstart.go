package yacy

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/coordinator"
	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// The crawl start of YaCy Grid (its crawler's crawlStart.json) and of YaCy's
// own crawl start form (Crawler_p), mapped onto a gridcrawl profile. A
// parameter gridcrawl honours becomes a profile field; one whose YaCy
// meaning gridcrawl does not honour exactly is named in the answer's
// "unsupported" list and the crawl starts without it; one that would make
// the crawl something else (a sitemap crawl, an unparsable value) fails the
// request with 400 naming it. No parameter is ignored silently.

// CrawlStartPath is YaCy Grid's crawl start endpoint.
const CrawlStartPath = "/yacy/grid/crawler/crawlStart.json"

// The defaults of absent parameters: those of YaCy Grid's crawler
// (CrawlerDefaultValuesService), whose endpoint this is.
const (
	yacyDefaultDepth        = 3
	yacyDefaultRange        = "domain"
	yacyDefaultMustNotMatch = `.*\.(js|css|jpg|jpeg|png|dmg|mpg|mpeg|zip|gz|exe|pkg)`
	yacyDefaultCollection   = "user"
	// MaxFormBytes bounds a crawl start request's form (YaCy allows
	// thousands of start URLs in crawlingURL).
	MaxFormBytes = 4 << 20
	// yacyMaxFilterBytes is the longest filter a profile takes.
	yacyMaxFilterBytes = 4096
)

// yacyUnsupported names a parameter whose YaCy meaning gridcrawl does not
// honour exactly, and why.
type yacyUnsupported struct {
	Parameter string `json:"parameter"`
	Value     string `json:"value"`
	Reason    string `json:"reason"`
}

// yacyAction is the crawler action of YaCy Grid's answer.
type yacyAction struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Depth int    `json:"depth"`
}

// yacyAnswer is the answer to a crawl start: YaCy Grid's shape (success,
// metadata.count, data with the crawl start and its id, actions) plus
// gridcrawl's crawl id, the stored profile and the unsupported parameters.
type yacyAnswer struct {
	Success     bool              `json:"success"`
	Metadata    map[string]int    `json:"metadata"`
	Data        []map[string]any  `json:"data"`
	Actions     []yacyAction      `json:"actions"`
	CrawlID     string            `json:"crawl_id"`
	Profile     contracts.Profile `json:"profile"`
	Unsupported []yacyUnsupported `json:"unsupported"`
}

// yacyErrorAnswer is the answer to a crawl start that fails: YaCy Grid's
// success and comment, and gridcrawl's error and field (the YaCy
// parameter).
type yacyErrorAnswer struct {
	Success bool   `json:"success"`
	Comment string `json:"comment"`
	Error   string `json:"error"`
	Field   string `json:"field,omitempty"`
}

// yacyParamError reports an invalid or refused YaCy parameter.
type yacyParamError struct {
	param, reason string
}

func (e *yacyParamError) Error() string { return fmt.Sprintf("invalid %s: %s", e.param, e.reason) }

// yacyParamOf returns the YaCy parameter a profile field comes from, to
// name the parameter of a profile validation error, or "".
func yacyParamOf(field string) string {
	switch field {
	case "start_urls":
		return "crawlingURL"
	case "max_depth":
		return "crawlingDepth"
	case "scope":
		return "range"
	case "crawl_must_match":
		return "mustmatch"
	case "crawl_must_not_match":
		return "mustnotmatch"
	case "index_must_match":
		return "indexmustmatch"
	case "index_must_not_match":
		return "indexmustnotmatch"
	case "max_pages_per_host":
		return "crawlingDomMaxPages"
	case "user_agent":
		return "agentName"
	case "priority", "collection":
		return field
	case "render":
		return "loaderHeadless"
	}
	return ""
}

// yacyStart collects a crawl start's parameters.
type yacyStart struct {
	data        map[string]any // the crawl start as YaCy Grid echoes it
	urls        []*url.URL
	depth       int
	rng         string
	mustMatch   string // YaCy patterns: Java regexes matched against the whole URL
	mustNot     string
	indexMust   string
	indexNot    string
	crawlingQ   bool
	domMaxCheck string // "on", "off" or "" (not given)
	domMaxPages int    // YaCy's: -1 means no limit
	domMaxGiven bool
	collection  []string
	userAgent   string
	priority    int
	recrawl     string
	cacheGiven  bool // cachePolicy was given
	reloadAge   yacyAge
	deleteOld   string
	deleteAge   yacyAge
	render      string // from loaderHeadless; "" when not given
	unsupported []yacyUnsupported
}

// yacyAge is a YaCy "older than" setting: a number of units.
type yacyAge struct {
	n    int
	unit string
}

func (a yacyAge) String() string {
	if a.n == 1 {
		return "1 " + a.unit
	}
	return fmt.Sprintf("%d %ss", a.n, a.unit)
}

func (y *Surface) yacyCrawlStart(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		jsonapi.Write(w, http.StatusMethodNotAllowed, yacyErrorAnswer{Comment: "use GET or POST", Error: "use GET or POST"})
		return
	}
	form, files, err := yacyForm(w, r)
	if err != nil {
		code := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		jsonapi.Write(w, code, yacyErrorAnswer{Comment: err.Error(), Error: err.Error()})
		return
	}
	s, p, err := yacyProfile(form, files)
	if err != nil {
		a := yacyErrorAnswer{Comment: err.Error(), Error: err.Error()}
		var pe *yacyParamError
		if errors.As(err, &pe) {
			a.Field = pe.param
		}
		jsonapi.Write(w, http.StatusBadRequest, a)
		return
	}
	id, err := y.crawls.CreateCrawl(r.Context(), p)
	if err != nil && id == "" {
		if msg, full := coordinator.DiskFull(err); full {
			jsonapi.Write(w, http.StatusInsufficientStorage, yacyErrorAnswer{Comment: msg, Error: msg})
			return
		}
		y.log.Error("create crawl", "err", err)
		jsonapi.Write(w, http.StatusInternalServerError, yacyErrorAnswer{Comment: "could not store the crawl", Error: "could not store the crawl"})
		return
	}
	if err != nil {
		y.log.Warn("create crawl: start urls left to recovery", "crawl_id", id, "err", err)
	}
	s.data["id"] = id
	w.Header().Set("Location", "/api/v1/crawls/"+id)
	// A crawl that starts answers 200, as YaCy Grid does: scripts check it.
	jsonapi.Write(w, http.StatusOK, yacyAnswer{Success: true, Metadata: map[string]int{"count": 1}, Data: []map[string]any{s.data},
		Actions: []yacyAction{{Type: "crawler", ID: id, Depth: 0}}, CrawlID: id, Profile: p, Unsupported: s.unsupported})
}

// yacyForm reads the parameters of a GET query string or of a POST form,
// url-encoded or multipart, and the names of the files a multipart form
// uploads.
func yacyForm(w http.ResponseWriter, r *http.Request) (url.Values, map[string]string, error) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
	files := map[string]string{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := r.ParseMultipartForm(MaxFormBytes); err != nil {
			return nil, nil, fmt.Errorf("read multipart form: %w", err)
		}
		for name, fhs := range r.MultipartForm.File {
			if len(fhs) > 0 {
				files[name] = fhs[0].Filename
			}
		}
		return r.Form, files, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, nil, fmt.Errorf("read form: %w", err)
	}
	return r.Form, files, nil
}

// yacyProfile maps a crawl start's parameters onto a checked profile.
func yacyProfile(form url.Values, files map[string]string) (*yacyStart, contracts.Profile, error) {
	s := &yacyStart{data: yacyGridDefaults(), depth: yacyDefaultDepth, rng: yacyDefaultRange, mustMatch: ".*",
		mustNot: yacyDefaultMustNotMatch, indexMust: ".*", collection: []string{yacyDefaultCollection}, reloadAge: yacyAge{unit: "day"}, deleteAge: yacyAge{unit: "day"},
		unsupported: []yacyUnsupported{}}
	for _, name := range slices.Sorted(maps.Keys(form)) {
		v := form.Get(name)
		if err := s.set(name, v); err != nil {
			return nil, contracts.Profile{}, err
		}
		switch def := s.data[name].(type) {
		case string:
			s.data[name] = v
		case int:
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				s.data[name] = n
			} else {
				s.data[name] = def // a flag as a number: priority=true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		s.unsupport(name, files[name], "gridcrawl does not read uploaded files (YaCy's crawlingMode=file)")
	}
	s.data["crawlingDepth"], s.data["priority"] = s.depth, s.priority
	p, err := s.profile()
	if err != nil {
		return nil, contracts.Profile{}, err
	}
	p, err = coordinator.CheckProfile(p)
	if err != nil {
		var fe *contracts.FieldError
		if errors.As(err, &fe) {
			field, _, _ := strings.Cut(fe.Field, "[")
			if param := yacyParamOf(field); param != "" {
				return nil, contracts.Profile{}, &yacyParamError{param, fe.Reason}
			}
		}
		return nil, contracts.Profile{}, err
	}
	return s, p, nil
}

// yacyGridDefaults returns the crawl start YaCy Grid echoes for a request
// without parameters.
func yacyGridDefaults() map[string]any {
	return map[string]any{
		"crawlingMode": "url", "crawlingURL": "", "sitemapURL": "", "crawlingFile": "", "crawlingDepth": yacyDefaultDepth,
		"crawlingDepthExtension": "", "range": yacyDefaultRange, "mustmatch": ".*", "mustnotmatch": yacyDefaultMustNotMatch,
		"ipMustmatch": ".*", "ipMustnotmatch": "", "indexmustmatch": ".*", "indexmustnotmatch": "", "deleteold": "off",
		"deleteIfOlderNumber": 0, "deleteIfOlderUnit": "day", "recrawl": "nodoubles", "reloadIfOlderNumber": 0,
		"reloadIfOlderUnit": "day", "crawlingDomMaxCheck": "off", "crawlingDomMaxPages": 1000, "crawlingQ": "off",
		"cachePolicy": "if fresh", "collection": yacyDefaultCollection, "agentName": "", "priority": 0,
	}
}

// unsupport lists a parameter whose YaCy meaning gridcrawl does not honour.
func (s *yacyStart) unsupport(param, value, reason string) {
	s.unsupported = append(s.unsupported, yacyUnsupported{Parameter: param, Value: value, Reason: reason})
}

// only accepts the values of a parameter that ask for what gridcrawl does
// (compared ignoring case and spaces) and lists the others as unsupported.
func (s *yacyStart) only(param, v, reason string, honoured ...string) {
	norm := func(x string) string { return strings.ToLower(strings.ReplaceAll(x, " ", "")) }
	for _, h := range honoured {
		if norm(v) == norm(h) {
			return
		}
	}
	s.unsupport(param, v, reason)
}

// flag reads a YaCy checkbox and lists it as unsupported unless it is in
// the state gridcrawl implements (honoured).
func (s *yacyStart) flag(param, v string, honoured bool, reason string) error {
	on, err := yacyBool(param, v)
	if err != nil {
		return err
	}
	if on != honoured {
		s.unsupport(param, v, reason)
	}
	return nil
}

// set reads one parameter.
func (s *yacyStart) set(name, v string) error {
	var err error
	switch name {
	case "crawlingstart":
		// The form's submit button: it asks for a crawl start, which this is.
	case "crawlingMode":
		switch v {
		case "", "url":
		case "sitemap", "sitelist", "file":
			return &yacyParamError{name, "gridcrawl starts crawls from URLs only (crawlingMode=url), not from sitemaps, site lists or files"}
		default:
			return &yacyParamError{name, `must be "url", "sitemap", "sitelist" or "file"`}
		}
	case "crawlingURL":
		s.urls, err = yacyStartURLs(v)
	case "sitemapURL", "crawlingFile":
		if v != "" {
			s.unsupport(name, v, "read only with crawlingMode=sitemap or file, which gridcrawl does not support")
		}
	case "crawlingDepth":
		s.depth, err = yacyInt(name, v)
	case "crawlingDepthExtension":
		s.only(name, v, "gridcrawl has no pattern of URLs crawled beyond the depth limit", "")
	case "range":
		switch v {
		case "domain", "subpath", "wide":
			s.rng = v
		default:
			return &yacyParamError{name, `must be "domain", "subpath" or "wide"`}
		}
	case "mustmatch":
		s.mustMatch = v
	case "mustnotmatch":
		s.mustNot = v
	case "indexmustmatch":
		s.indexMust = v
	case "indexmustnotmatch":
		s.indexNot = v
	case "ipMustmatch":
		s.only(name, v, "gridcrawl does not filter URLs by the IP address of their host", "", ".*")
	case "ipMustnotmatch":
		s.only(name, v, "gridcrawl does not filter URLs by the IP address of their host", "")
	case "countryMustMatchSwitch":
		err = s.flag(name, v, false, "gridcrawl does not filter URLs by the country of their host")
	case "countryMustMatchList":
		// Read only with countryMustMatchSwitch on, as in YaCy.
	case "indexcontentmustmatch":
		s.only(name, v, "gridcrawl filters what it indexes by URL only, not by content", "", ".*")
	case "indexcontentmustnotmatch":
		s.only(name, v, "gridcrawl filters what it indexes by URL only, not by content", "")
	case "noindexWhenCanonicalUnequalURL":
		err = s.flag(name, v, false, "gridcrawl indexes a page whatever URL its rel=canonical names")
	case "deleteold":
		switch strings.ToLower(v) {
		case "", "off", "false", "on", "true", "age":
			s.deleteOld = strings.ToLower(v)
		default:
			return &yacyParamError{name, `must be "off", "on" or "age"`}
		}
	case "deleteIfOlderNumber":
		s.deleteAge.n, err = yacyInt(name, v)
	case "deleteIfOlderUnit":
		s.deleteAge.unit, err = yacyUnit(name, v)
	case "recrawl":
		switch v {
		case "nodoubles", "reload", "scheduler":
			s.recrawl = v
		default:
			return &yacyParamError{name, `must be "nodoubles", "reload" or "scheduler"`}
		}
	case "reloadIfOlderNumber":
		s.reloadAge.n, err = yacyInt(name, v)
	case "reloadIfOlderUnit":
		s.reloadAge.unit, err = yacyUnit(name, v)
	case "crawlingDomMaxCheck":
		var on bool
		if on, err = yacyBool(name, v); err == nil {
			s.domMaxCheck = map[bool]string{true: "on", false: "off"}[on]
		}
	case "crawlingDomMaxPages":
		s.domMaxPages, err = yacyInt(name, v)
		s.domMaxGiven = true
		if err == nil && (s.domMaxPages == 0 || s.domMaxPages < -1) {
			return &yacyParamError{name, "must be -1 (no limit) or positive"}
		}
	case "crawlingQ":
		s.crawlingQ, err = yacyBool(name, v)
	case "followFrames":
		err = s.flag(name, v, true, "gridcrawl always follows frame and iframe links")
	case "obeyHtmlRobotsNoindex":
		err = s.flag(name, v, true, "gridcrawl always obeys <meta name=robots> noindex")
	case "obeyHtmlRobotsNofollow":
		err = s.flag(name, v, true, "gridcrawl always obeys <meta name=robots> nofollow")
	case "indexText":
		err = s.flag(name, v, true, "gridcrawl always indexes the text of the pages it loads")
	case "indexMedia":
		err = s.flag(name, v, false, "gridcrawl indexes HTML and plain text pages only, not images, audio or video")
	case "storeHTCache":
		err = s.flag(name, v, true, "gridcrawl always keeps the responses it loads (WARC assets)")
	case "cachePolicy":
		s.cacheGiven = true
		switch strings.ToLower(strings.ReplaceAll(v, " ", "")) {
		case "nocache":
		case "iffresh", "ifexist", "cacheonly":
			s.unsupport(name, v, cacheReason)
		default:
			return &yacyParamError{name, `must be "nocache", "iffresh", "ifexist" or "cacheonly"`}
		}
	case "collection":
		s.collection = s.collections(v)
	case "agentName":
		s.agent(v)
	case "priority":
		s.priority, err = yacyPriority(name, v)
	case "crawlOrder":
		err = s.flag(name, v, false, "gridcrawl does not hand crawls to other YaCy peers")
	case "directDocByURL":
		err = s.flag(name, v, false, "gridcrawl does not index linked documents without loading them")
	case "snapshotsMaxDepth":
		var n int
		if n, err = yacyInt(name, v); err == nil && n >= 0 {
			s.unsupport(name, v, "gridcrawl makes no page snapshots")
		}
	case "snapshotsLoadImage", "snapshotsReplaceOld", "snapshotsMustnotmatch":
		// Read only when snapshots are made (snapshotsMaxDepth), as in YaCy.
	case "default_valency":
		s.only(name, v, "gridcrawl reads the text of every tag but script, style and the like", "", "EVAL")
	case "valency_switch_tag_names":
		s.only(name, v, "gridcrawl reads the text of every tag but script, style and the like", "")
	case "timezoneOffset":
		// Used by YaCy for dates in crawl start files only.
		_, err = yacyInt(name, v)
	case "crawlerOriginURLMustMatch":
		s.only(name, v, "gridcrawl does not filter links by the URL of the page they are on", "", ".*")
	case "crawlerOriginURLMustNotMatch":
		s.only(name, v, "gridcrawl does not filter links by the URL of the page they are on", "")
	case "indexMediaTypeMustMatch":
		s.only(name, v, "gridcrawl does not filter what it indexes by media type", "", ".*")
	case "indexMediaTypeMustNotMatch":
		s.only(name, v, "gridcrawl does not filter what it indexes by media type", "")
	case "indexSolrQueryMustMatch":
		s.only(name, v, "gridcrawl has no Solr query filter", "", "*:*")
	case "indexSolrQueryMustNotMatch":
		s.only(name, v, "gridcrawl has no Solr query filter", "")
	case "crawlerAlwaysCheckMediaType":
		err = s.flag(name, v, true, "gridcrawl always loads a URL to learn its media type")
	case "cleanSearchCache":
		err = s.flag(name, v, false, "gridcrawl keeps no search result cache to clean")
	case "bookmarkTitle":
		// The form shows the start page's title there; YaCy reads it only
		// to make a bookmark (createBookmark).
	case "createBookmark":
		err = s.flag(name, v, false, "gridcrawl keeps no bookmarks")
	case "intention":
		s.only(name, v, "gridcrawl publishes no YaCy news", "")
	// YaCy Grid's own parameters.
	case "loaderHeadless":
		// YaCy Grid loads every page through its headless browser unless
		// told not to; absent, the crawl keeps gridcrawl's default (never).
		var on bool
		if on, err = yacyBool(name, v); err == nil {
			s.render = map[bool]string{true: contracts.RenderAlways, false: contracts.RenderNever}[on]
		}
	case "userId":
		s.only(name, v, "gridcrawl has no user accounts: a crawl belongs to the API", "")
	case "storeAssets", "archiveWARC":
		err = s.flag(name, v, true, "gridcrawl always keeps the responses it loads as WARC records")
	case "archiveIndex", "archiveGraph":
		err = s.flag(name, v, false, "gridcrawl does not archive a crawl's index or link graph as files")
	default:
		switch {
		case strings.HasPrefix(name, "vocabulary_") && v == "":
		case strings.HasPrefix(name, "vocabulary_"):
			s.unsupport(name, v, "gridcrawl has no vocabulary scraper")
		default:
			s.unsupport(name, v, "not a YaCy crawl start parameter gridcrawl knows")
		}
	}
	return err
}

// yacyStartURLs splits crawlingURL into its URLs: YaCy separates them by
// line breaks or '|'; spaces separate them too. A URL without a scheme
// gets one as every crawl start does (contracts.WithScheme).
func yacyStartURLs(v string) ([]*url.URL, error) {
	fields := strings.FieldsFunc(v, func(r rune) bool { return r == '|' || r == ' ' || r == '\t' || r == '\r' || r == '\n' })
	urls := make([]*url.URL, 0, len(fields))
	for _, f := range fields {
		f = contracts.WithScheme(f)
		n, err := urlnorm.Normalize(f)
		if err != nil {
			return nil, &yacyParamError{"crawlingURL", fmt.Sprintf("%q: %v", f, err)}
		}
		u, err := urlnorm.Parse(n)
		if err != nil {
			return nil, &yacyParamError{"crawlingURL", fmt.Sprintf("%q: %v", f, err)}
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, &yacyParamError{"crawlingURL", fmt.Sprintf("%q: gridcrawl crawls http and https URLs only", f)}
		}
		if urlnorm.Host(u) == "" {
			return nil, &yacyParamError{"crawlingURL", fmt.Sprintf("%q: host is missing", f)}
		}
		urls = append(urls, u)
	}
	return urls, nil
}

// yacyInt parses a YaCy number.
func yacyInt(param, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, &yacyParamError{param, fmt.Sprintf("%q is not a whole number", v)}
	}
	return n, nil
}

// yacyBool parses a YaCy checkbox: "on" as the form sends it, or
// true/false as YaCy Grid's examples do.
func yacyBool(param, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "1", "yes":
		return true, nil
	case "", "off", "false", "0", "no":
		return false, nil
	}
	return false, &yacyParamError{param, fmt.Sprintf(`%q is neither "on" nor "off"`, v)}
}

// yacyUnit checks the unit of a YaCy "older than" setting.
func yacyUnit(param, v string) (string, error) {
	switch v {
	case "year", "month", "day", "hour", "minute":
		return v, nil
	}
	return "", &yacyParamError{param, `must be "year", "month", "day", "hour" or "minute"`}
}

// yacyPriority reads priority: a number from 0 to 9 (YaCy Grid's form
// sends 0), or a flag as in YaCy Grid's example priority=true, which asks
// for the higher of its two priorities: 1.
func yacyPriority(param, v string) (int, error) {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return n, nil
	}
	on, err := yacyBool(param, v)
	if err != nil {
		return 0, &yacyParamError{param, fmt.Sprintf("%q is neither a number from 0 to %d nor on/off", v, contracts.MaxPriority)}
	}
	if on {
		return 1, nil
	}
	return 0, nil
}

// collections reads YaCy's comma-separated collection names. YaCy's
// "name:pattern" puts only the URLs matching pattern into the collection:
// gridcrawl cannot, so such an entry is left out and listed.
func (s *yacyStart) collections(v string) []string {
	var out []string
	for _, c := range strings.Split(v, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if _, _, ok := strings.Cut(c, ":"); ok {
			s.unsupport("collection", c, "gridcrawl puts every document of a crawl into its collections: a collection for the URLs matching a pattern is left out")
			continue
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// agent reads agentName. YaCy names one of its agent profiles there; a
// value that looks like a User-Agent header (it has a '/', as in
// "examplebot/1.0") is sent as it is. YaCy's own crawler profiles keep
// gridcrawl's user agent: both ask the crawler to identify itself.
// Profiles that impersonate another client are not honoured.
func (s *yacyStart) agent(v string) {
	switch {
	case v == "":
	case strings.Contains(v, "/"):
		s.userAgent = v
	case strings.HasPrefix(strings.ToLower(v), "yacy"):
		if v != "YaCy Internet (cautious)" && !strings.EqualFold(v, "yacybot") {
			s.unsupport("agentName", v, "gridcrawl identifies itself with its own user agent and politeness, not those of YaCy's agent profile")
		}
	default:
		s.unsupport("agentName", v, "gridcrawl does not impersonate other clients: it sends its own user agent")
	}
}

// profile builds the crawl's profile from the parameters read.
func (s *yacyStart) profile() (contracts.Profile, error) {
	if len(s.urls) == 0 {
		return contracts.Profile{}, &yacyParamError{"crawlingURL", "at least one start URL is required"}
	}
	p := contracts.Profile{MaxDepth: s.depth, Collection: s.collection, UserAgent: s.userAgent, Priority: s.priority, Render: s.render}
	hosts := []string{}
	for _, u := range s.urls {
		p.StartURLs = append(p.StartURLs, u.String())
		if h := urlnorm.Host(u); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	p.Name = strings.Join(hosts, ",")
	if len(p.Name) > 64 {
		p.Name = fmt.Sprintf("crawl for %d start points", len(s.urls))
	}

	// YaCy matches its patterns against the whole URL (Java's matches);
	// gridcrawl's filters match anywhere in the URL, so they are anchored.
	// YaCy takes a mustmatch shorter than two characters for ".*".
	must, err := yacyPattern("mustmatch", s.mustMatch, len(s.mustMatch) < 2 || s.mustMatch == ".*")
	if err != nil {
		return p, err
	}
	site := ""
	switch s.rng {
	case "wide":
		p.Scope = contracts.ScopeAny
	case "domain":
		site = domainFilter(s.urls)
		if len(site) > yacyMaxFilterBytes && must == "" {
			// Too many hosts for one filter: their registrable domains
			// are the closest scope.
			site, p.Scope = "", contracts.ScopeDomain
			s.unsupport("range", s.rng, fmt.Sprintf("too many start hosts for a filter of at most %d bytes: the crawl follows their registrable domains, subdomains included", yacyMaxFilterBytes))
		}
	case "subpath":
		site = subpathFilter(s.urls)
		if len(site) > yacyMaxFilterBytes {
			return p, &yacyParamError{"range", fmt.Sprintf("too many start URLs for range=subpath: its filter would be longer than %d bytes", yacyMaxFilterBytes)}
		}
	}
	switch {
	case site == "":
		p.CrawlMustMatch = must
	case must == "":
		// The filter pins the start hosts, with or without "www.": within
		// their registrable domains.
		p.Scope, p.CrawlMustMatch = contracts.ScopeDomain, site
	default:
		// YaCy follows a URL that matches either mustmatch or the range.
		p.Scope, p.CrawlMustMatch = contracts.ScopeAny, must+"|"+site
	}
	mustNot, err := yacyPattern("mustnotmatch", s.mustNot, s.mustNot == "")
	if err != nil {
		return p, err
	}
	if !s.crawlingQ {
		// YaCy does not follow URLs with a query unless crawlingQ is on.
		mustNot = strings.TrimPrefix(mustNot+`|^[^#]*\?`, "|")
	}
	p.CrawlMustNotMatch = mustNot
	if p.IndexMustMatch, err = yacyPattern("indexmustmatch", s.indexMust, s.indexMust == "" || s.indexMust == ".*"); err != nil {
		return p, err
	}
	if p.IndexMustNotMatch, err = yacyPattern("indexmustnotmatch", s.indexNot, s.indexNot == ""); err != nil {
		return p, err
	}

	// YaCy limits pages per host only with crawlingDomMaxCheck on; scripts
	// for YaCy Grid send crawlingDomMaxPages alone, which counts too.
	if s.domMaxCheck == "on" || (s.domMaxCheck == "" && s.domMaxGiven) {
		if s.domMaxPages > 0 {
			p.MaxPagesPerHost = s.domMaxPages
		}
	}

	switch s.deleteOld {
	case "on", "true":
		s.unsupport("deleteold", s.deleteOld, "gridcrawl never deletes the documents of earlier crawls")
	case "age":
		s.unsupport("deleteold", "age (older than "+s.deleteAge.String()+")", "gridcrawl never deletes the documents of earlier crawls")
	}
	// Absent, cachePolicy and recrawl take YaCy Grid's defaults ("if
	// fresh", "nodoubles"), which gridcrawl does not honour either: the
	// answer echoes them in data, so it lists them too.
	if !s.cacheGiven {
		s.unsupport("cachePolicy", yacyGridDefaults()["cachePolicy"].(string)+" (YaCy Grid's default)", cacheReason)
	}
	switch s.recrawl {
	case "":
		s.unsupport("recrawl", yacyGridDefaults()["recrawl"].(string)+" (YaCy Grid's default)", nodoublesReason)
	case "nodoubles":
		s.unsupport("recrawl", s.recrawl, nodoublesReason)
	case "reload":
		if s.reloadAge.n > 0 {
			s.unsupport("recrawl", "reload (older than "+s.reloadAge.String()+")",
				"every crawl loads all the URLs it finds: pages loaded less than "+s.reloadAge.String()+" ago are loaded again too")
		}
	case "scheduler":
		s.unsupport("recrawl", s.recrawl, "gridcrawl does not repeat crawls on a schedule: the crawl runs once")
	}
	return p, nil
}

// The reasons why the cachePolicy and recrawl values other than nocache
// and reload are not honoured.
const (
	cacheReason     = "gridcrawl always loads pages from the web, never from a cache (cachePolicy=nocache)"
	nodoublesReason = "every crawl loads all the URLs it finds, also those indexed by earlier crawls"
)

// yacyPattern turns a YaCy URL pattern into a gridcrawl filter that matches
// the same URLs, or "" when the pattern filters nothing (none: YaCy's
// ".*" of a must-match pattern, "" of a must-not-match pattern).
func yacyPattern(param, re string, none bool) (string, error) {
	if none {
		return "", nil
	}
	anchored := "^(?:" + re + ")$"
	if _, err := regexp.Compile(anchored); err != nil {
		return "", &yacyParamError{param, "not a regular expression gridcrawl (Go RE2) can use: " + err.Error()}
	}
	return anchored, nil
}

// domainFilter matches the URLs of the start URLs' hosts, with or without
// "www.", on any port, by http or https: YaCy's range=domain.
func domainFilter(urls []*url.URL) string {
	var alts []string
	for _, u := range urls {
		h := regexp.QuoteMeta(strings.TrimPrefix(bracketed(urlnorm.Host(u)), "www."))
		if !slices.Contains(alts, h) {
			alts = append(alts, h)
		}
	}
	return `^https?://(?:www\.)?(?:` + strings.Join(alts, "|") + `)(?::[0-9]+)?(?:[/?#].*)?$`
}

// subpathFilter matches the URLs under the start URLs' directories (their
// path up to the last '/'), with or without "www.", by http or https:
// YaCy's range=subpath.
func subpathFilter(urls []*url.URL) string {
	var alts []string
	for _, u := range urls {
		dir := u.EscapedPath()
		if i := strings.LastIndexByte(dir, '/'); i >= 0 {
			dir = dir[:i+1]
		} else {
			dir = "/"
		}
		a := regexp.QuoteMeta(strings.TrimPrefix(urlnorm.HostPort(u), "www.") + dir)
		if !slices.Contains(alts, a) {
			alts = append(alts, a)
		}
	}
	return `^https?://(?:www\.)?(?:` + strings.Join(alts, "|") + `)`
}

// bracketed writes an IPv6 host as URLs do.
func bracketed(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}
