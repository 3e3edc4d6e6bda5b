// Package contracts holds the versioned messages that gridcrawl's services
// exchange and the bodies of the MCP HTTP API, as Go types mirroring the JSON
// Schemas in contracts/schemas. It imports only the standard library so every
// service, client and tool can depend on it.
package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
)

// Version is the schema version of every message and API body in this package.
const Version = 1

// Scope limits which discovered links a crawl follows.
type Scope string

// The scopes a profile may name.
const (
	ScopeHost   Scope = "host"   // only the hosts of the start URLs, each with its port
	ScopeDomain Scope = "domain" // the registrable domains (eTLD+1) of the start URLs
	ScopeAny    Scope = "any"    // any host
)

// Robots policy values.
const (
	RobotsObey   = "obey"
	RobotsIgnore = "ignore"
)

// Politeness holds a crawl's default politeness settings.
//
// Decoded from JSON, defaults apply field by field: an absent field takes its
// default and an explicit value, 0 included, is kept (see UnmarshalJSON). A
// Go value is taken as it is, except that the zero Politeness means "not
// given" (all defaults, see Profile.WithDefaults) and an empty Robots means
// "obey".
type Politeness struct {
	// MinDelayMS is the least time between two fetches from one host group.
	MinDelayMS int `json:"min_delay_ms"`
	// MaxDelayMS caps the delay computed from the fetch duration.
	MaxDelayMS int `json:"max_delay_ms"`
	// DelayFactor multiplies the last fetch duration to give the next delay.
	DelayFactor float64 `json:"delay_factor"`
	// Robots is "obey" (default) or "ignore".
	Robots string `json:"robots"`
}

// DefaultPoliteness returns the politeness of a profile that gives none.
func DefaultPoliteness() Politeness {
	return Politeness{MinDelayMS: DefaultMinDelayMS, MaxDelayMS: DefaultMaxDelayMS, DelayFactor: DefaultFactor, Robots: RobotsObey}
}

// UnmarshalJSON decodes a politeness object, rejecting unknown fields, and
// fills its absent fields with their defaults: min_delay_ms 500 (or
// max_delay_ms when that is smaller), max_delay_ms 10000 (or min_delay_ms
// when that is larger), delay_factor 2, robots "obey" (also for ""). So
// {"min_delay_ms":300} keeps the adaptive delay, {"delay_factor":0} turns it
// off, and defaults never contradict a field that was given. A null object
// is ignored.
func (p *Politeness) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	var f PolitenessPatch
	if err := decodeStrict(b, &f); err != nil {
		return err
	}
	*p = f.WithDefaults()
	return nil
}

// WithDefaults returns the politeness of a profile that gives only f's
// non-nil fields: the others take their defaults as in
// Politeness.UnmarshalJSON. Clients that build a profile in Go from some
// settings (grid crawl's flags) use it to default like the API.
func (f PolitenessPatch) WithDefaults() Politeness {
	p := DefaultPoliteness()
	switch {
	case f.MinDelayMS != nil && f.MaxDelayMS != nil:
		p.MinDelayMS, p.MaxDelayMS = *f.MinDelayMS, *f.MaxDelayMS
	case f.MinDelayMS != nil:
		p.MinDelayMS = *f.MinDelayMS
		p.MaxDelayMS = max(DefaultMaxDelayMS, p.MinDelayMS)
	case f.MaxDelayMS != nil:
		p.MaxDelayMS = *f.MaxDelayMS
		p.MinDelayMS = max(min(DefaultMinDelayMS, p.MaxDelayMS), 0)
	}
	if f.DelayFactor != nil {
		p.DelayFactor = *f.DelayFactor
	}
	if f.Robots != nil && *f.Robots != "" {
		p.Robots = *f.Robots
	}
	return p
}

// PolitenessPatch is a politeness object as sent, with nil for absent (or
// null) fields. In a PATCH body (ProfilePatch) absent fields keep the
// crawl's current value, field by field (Apply); in a profile they take
// their defaults (WithDefaults).
type PolitenessPatch struct {
	MinDelayMS  *int     `json:"min_delay_ms,omitempty"`
	MaxDelayMS  *int     `json:"max_delay_ms,omitempty"`
	DelayFactor *float64 `json:"delay_factor,omitempty"`
	Robots      *string  `json:"robots,omitempty"`
}

// Apply returns cur with the fields pp gives replaced; a nil pp changes
// nothing. The result still needs Profile.WithDefaults and Validate (a
// raised min_delay_ms above the current max_delay_ms is an error, not a
// silent raise of the maximum).
func (pp *PolitenessPatch) Apply(cur Politeness) Politeness {
	if pp == nil {
		return cur
	}
	if pp.MinDelayMS != nil {
		cur.MinDelayMS = *pp.MinDelayMS
	}
	if pp.MaxDelayMS != nil {
		cur.MaxDelayMS = *pp.MaxDelayMS
	}
	if pp.DelayFactor != nil {
		cur.DelayFactor = *pp.DelayFactor
	}
	if pp.Robots != nil && *pp.Robots != "" { // empty keeps the policy, as the schema says
		cur.Robots = *pp.Robots
	}
	return cur
}

// decodeStrict decodes one JSON value from b into v, rejecting unknown
// fields: a type with its own UnmarshalJSON does not inherit the caller's
// json.Decoder.DisallowUnknownFields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Profile is a crawl profile as submitted to MCP. Once accepted it is
// immutable and travels inside every loader and crawler contract of its crawl.
//
// The defaults of absent fields are the constants below (DefaultMaxDepth,
// DefaultScope, DefaultPoliteness...), the same for the API and for `grid
// crawl`. Decoding JSON applies those of max_depth and politeness, whose
// zero values are meaningful (see UnmarshalJSON); WithDefaults applies the
// others, whose zero values mean "not given".
type Profile struct {
	Name              string     `json:"name,omitempty"`
	StartURLs         []string   `json:"start_urls"`
	MaxDepth          int        `json:"max_depth"`
	Scope             Scope      `json:"scope,omitempty"`
	CrawlMustMatch    string     `json:"crawl_must_match,omitempty"`
	CrawlMustNotMatch string     `json:"crawl_must_not_match,omitempty"`
	IndexMustMatch    string     `json:"index_must_match,omitempty"`
	IndexMustNotMatch string     `json:"index_must_not_match,omitempty"`
	MaxPages          int        `json:"max_pages,omitempty"`
	MaxPagesPerHost   int        `json:"max_pages_per_host,omitempty"`
	UserAgent         string     `json:"user_agent,omitempty"`
	Politeness        Politeness `json:"politeness,omitzero"`
	Priority          int        `json:"priority,omitempty"`
	// Collection names the collections (YaCy's collection_sxt) every
	// document of the crawl belongs to, so that search can filter on them.
	Collection []string `json:"collection,omitempty"`
	// Budget sets Heritrix-style queue budgets per crawl host group.
	Budget *Budget `json:"budget,omitempty"`
	// Sitemaps turns the reading of sitemaps on or off: the Sitemap: lines
	// of each start host's robots.txt and its /sitemap.xml, with the sitemap
	// index files and gzipped sitemaps they lead to. Nil (absent) means on;
	// use SitemapsEnabled.
	Sitemaps *bool `json:"sitemaps,omitempty"`
	// SitemapDepth is the depth of the sitemaps and of the URLs they list:
	// 0 (default) makes sitemap URLs start URLs; a page linked from one has
	// depth SitemapDepth+1. At most MaxDepth.
	SitemapDepth int `json:"sitemap_depth,omitempty"`
	// Recrawl makes the crawl continuous: every page is fetched again on
	// the schedule it sets, and the crawl never finishes (it is up_to_date
	// while nothing is due). Nil: a one-shot crawl.
	Recrawl *Recrawl `json:"recrawl,omitempty"`
	// Render says when the loader loads a page in a headless browser:
	// RenderNever ("never", the default; "" means never), RenderAlways
	// ("always") or RenderAuto ("auto": fetch over HTTP and render only the
	// pages whose answer shows they need scripts). Use RenderFor.
	Render string `json:"render,omitempty"`
	// RenderOverrides set Render for the hosts of some domains (a host is
	// Domain or under it; the longest matching Domain wins), like
	// budget.overrides.
	RenderOverrides []RenderOverride `json:"render_overrides,omitempty"`
	// RenderRobots says which of a rendered page's requests obey
	// robots.txt: RenderRobotsPages ("pages", the default; "" means it) the
	// page only, as a browser's user would; RenderRobotsAll ("all") every
	// subresource too, checked against its own origin's robots.txt.
	RenderRobots string `json:"render_robots,omitempty"`
	// Dedupe says what the loader deduplicates payloads across:
	// DedupeCollection ("collection", the default; "" means it) every crawl
	// of the profile's first collection, or of this crawl alone when it
	// has none; DedupeCrawl ("crawl") this crawl; DedupeOff ("off")
	// nothing. A 200 response whose payload digest the scope holds is
	// stored as a revisit record of the original. Use DedupeScope.
	Dedupe string `json:"dedupe,omitempty"`
	// Version counts the changes made to the profile mid-crawl (PATCH); 0 as
	// submitted.
	Version int `json:"version,omitempty"`
	// Idempotency is set by MCP, never by the body, when the crawl was
	// created by a POST with an Idempotency-Key header: stored with the
	// crawl, so that a retry of the same request finds it in either mode.
	Idempotency *Idempotency `json:"idempotency,omitempty"`
}

// Idempotency records the Idempotency-Key request that created a crawl.
type Idempotency struct {
	// Key is the header's value (at most MaxIdempotencyKeyLen bytes of
	// printable ASCII).
	Key string `json:"key"`
	// RequestSHA256 is the hex SHA-256 of the request body: a retry with
	// the key must send the same body.
	RequestSHA256 string `json:"request_sha256"`
}

// MaxIdempotencyKeyLen bounds an Idempotency-Key.
const MaxIdempotencyKeyLen = 255

// ValidIdempotencyKey reports whether k is a non-empty key of at most
// MaxIdempotencyKeyLen bytes of printable ASCII without quotes or
// backslashes (the characters of a structured-field string, RFC 8941, that
// need no escape).
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Dedupe modes (Profile.Dedupe).
const (
	DedupeOff        = "off"
	DedupeCrawl      = "crawl"
	DedupeCollection = "collection"
)

// DedupeScope returns the scope of the payload-digest index that the
// responses of crawl crawlID are deduplicated within: "collection:<name>"
// for the first collection of a profile whose Dedupe is collection (or
// empty), "crawl:<crawlID>" for Dedupe crawl or a profile without a
// collection, and "" for Dedupe off.
func (p *Profile) DedupeScope(crawlID string) string {
	switch p.Dedupe {
	case DedupeOff:
		return ""
	case "", DedupeCollection:
		if len(p.Collection) > 0 && p.Collection[0] != "" {
			return "collection:" + p.Collection[0]
		}
	}
	return "crawl:" + crawlID
}

// SitemapsEnabled reports whether the crawl reads sitemaps: unless
// Sitemaps is false.
func (p Profile) SitemapsEnabled() bool { return p.Sitemaps == nil || *p.Sitemaps }

// RenderOverride sets the render mode of the hosts that are Domain or
// under it.
type RenderOverride struct {
	Domain string `json:"domain"`
	Render string `json:"render"`
}

// Render modes (Profile.Render, RenderOverride.Render).
const (
	RenderNever  = "never"
	RenderAlways = "always"
	RenderAuto   = "auto"
)

// Render robots policies (Profile.RenderRobots).
const (
	RenderRobotsPages = "pages"
	RenderRobotsAll   = "all"
)

// RenderFor returns the render mode of the pages of host, never "": that
// of the render override with the longest domain host is or is under, else
// Render, else RenderNever. A port on host is ignored, and case does not
// matter. Domains match as budget.overrides do in pkg/politeness: whole
// labels, so "example.org" covers "example.org" and "www.example.org" but
// not "notexample.org". It scans the overrides and allocates nothing
// when host is lower case.
func (p *Profile) RenderFor(host string) string {
	mode := p.Render
	if len(p.RenderOverrides) > 0 {
		h := renderHost(host)
		best := -1
		for _, o := range p.RenderOverrides {
			if d := overrideDomain(o.Domain); len(d) > best && domainCovers(d, h) {
				best, mode = len(d), o.Render
			}
		}
	}
	if mode == "" {
		return RenderNever
	}
	return mode
}

// renderHost returns host without its port, IPv6 brackets and trailing
// dot, in lower case (as pkg/politeness.NormalizeHost, without netip).
func renderHost(host string) string {
	h := strings.TrimSpace(host)
	if strings.HasPrefix(h, "[") {
		h, _, _ = strings.Cut(h[1:], "]")
	} else if strings.Count(h, ":") == 1 {
		h, _, _ = strings.Cut(h, ":")
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// overrideDomain returns the domain of an override as it is matched: without
// surrounding spaces and dots. Case is left to domainCovers.
func overrideDomain(d string) string { return strings.Trim(strings.TrimSpace(d), ".") }

// domainCovers reports whether host (lower case) is domain or under it.
func domainCovers(domain, host string) bool {
	n := len(host) - len(domain)
	return n >= 0 && strings.EqualFold(host[n:], domain) && (n == 0 || host[n-1] == '.')
}

// Cost policies a budget may name.
const (
	CostZero         = "zero"
	CostUnit         = "unit"
	CostWag          = "wag"
	CostAntiCalendar = "anti-calendar"
)

// UnmarshalJSON decodes a profile, rejecting unknown fields, with
// max_depth DefaultMaxDepth when absent (an explicit 0 fetches only the
// start URLs) and politeness defaulted field by field (see
// Politeness.UnmarshalJSON). A null profile is ignored.
func (p *Profile) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	type profile Profile // without methods, so that decoding does not recurse
	v := profile{MaxDepth: DefaultMaxDepth}
	if err := decodeStrict(b, &v); err != nil {
		return err
	}
	*p = Profile(v)
	return nil
}

// Budget is a crawl's per-group budget (Heritrix's queue budgets, https://github.com/internetarchive/heritrix3).
type Budget struct {
	// BalanceReplenish is the session balance: after spending it a group
	// yields to the others and gets a fresh balance. 0 means 3000.
	BalanceReplenish int64 `json:"balance_replenish,omitempty"`
	// TotalBudget is a group's lifetime budget: once spent, the group is
	// retired and its URLs are parked as "retired". 0 means no limit.
	TotalBudget int64 `json:"total_budget,omitempty"`
	// CostPolicy prices each URL: "zero", "unit" (default), "wag" or
	// "anti-calendar".
	CostPolicy string `json:"cost_policy,omitempty"`
	// PauseAtFinish pauses the crawl when it runs out of work instead of
	// finishing it, so that budgets can be raised.
	PauseAtFinish bool `json:"pause_at_finish,omitempty"`
	// HoldQueues crawls site-first (Heritrix's hold-queues): a new crawl
	// host group starts inactive and is activated only when the active ones
	// cannot keep the loader's fetchers busy, so that sites are finished one
	// after another instead of all at once. A PATCH that sets it holds the
	// groups that have not been fetched from yet.
	HoldQueues bool `json:"hold_queues,omitempty"`
	// Overrides set other budgets for the groups of some domains.
	Overrides []BudgetOverride `json:"overrides,omitempty"`
}

// BudgetOverride replaces the budget for groups whose host is Domain or
// under it.
type BudgetOverride struct {
	Domain           string `json:"domain"`
	BalanceReplenish int64  `json:"balance_replenish,omitempty"`
	TotalBudget      int64  `json:"total_budget,omitempty"`
}

// ProfilePatch is the body of PATCH /api/v1/crawls/{id}: the settings that
// may change mid-crawl. Absent fields keep their value: politeness field by
// field (PolitenessPatch), while a budget or a list of render overrides
// given replaces the crawl's as a whole.
type ProfilePatch struct {
	Politeness *PolitenessPatch `json:"politeness,omitempty"`
	Budget     *Budget          `json:"budget,omitempty"`
	// Recrawl replaces a continuous crawl's schedule (a one-shot crawl
	// cannot become continuous, nor the reverse).
	Recrawl *Recrawl `json:"recrawl,omitempty"`
	// Render replaces the crawl's render mode ("" is RenderNever).
	Render *string `json:"render,omitempty"`
	// RenderOverrides replaces the crawl's render overrides as a whole; an
	// empty list removes them.
	RenderOverrides *[]RenderOverride `json:"render_overrides,omitempty"`
	// RenderRobots replaces the crawl's render robots policy ("" is
	// RenderRobotsPages).
	RenderRobots *string `json:"render_robots,omitempty"`
	// Dedupe replaces the crawl's dedupe mode ("" is DedupeCollection).
	Dedupe *string `json:"dedupe,omitempty"`
}

// Recrawl is the schedule of a continuous crawl: a fixed Interval, or an
// Adaptive one. Durations are Go durations with a "d" (24h) unit as well:
// "90s", "6h", "30d", "1d12h".
type Recrawl struct {
	// Interval fetches every page again this long after its last fetch.
	Interval string `json:"interval,omitempty"`
	// Adaptive starts each page at Min and, after each fetch, halves its
	// interval when the page changed and doubles it when it did not,
	// within Min and Max.
	Adaptive *AdaptiveRecrawl `json:"adaptive,omitempty"`
}

// AdaptiveRecrawl bounds an adaptive recrawl interval.
type AdaptiveRecrawl struct {
	Min string `json:"min"`
	Max string `json:"max"`
}

// Recrawl interval limits.
const (
	MinRecrawlInterval = time.Second
	MaxRecrawlInterval = 366 * 24 * time.Hour
)

// Bounds returns the shortest and longest interval of r (both the interval
// of a fixed schedule). It assumes r is valid.
func (r Recrawl) Bounds() (lo, hi time.Duration) {
	if r.Adaptive != nil {
		lo, _ = ParseInterval(r.Adaptive.Min)
		hi, _ = ParseInterval(r.Adaptive.Max)
		return lo, hi
	}
	d, _ := ParseInterval(r.Interval)
	return d, d
}

// Next returns the interval after a fetch: cur is the interval before it
// (0 for a page's first fetch), changed whether the fetch found new
// content. It is the one rule of the schedule.
func (r Recrawl) Next(cur time.Duration, changed bool) time.Duration {
	lo, hi := r.Bounds()
	switch {
	case cur <= 0:
		return lo
	case changed:
		cur /= 2
	default:
		cur *= 2
	}
	return min(max(cur, lo), hi)
}

// validate checks r and returns a *FieldError naming the first invalid
// field under name.
func (r Recrawl) validate(name string) error {
	check := func(field, v string) (time.Duration, error) {
		d, err := ParseInterval(v)
		if err != nil {
			return 0, &FieldError{name + "." + field, err.Error()}
		}
		if d < MinRecrawlInterval || d > MaxRecrawlInterval {
			return 0, &FieldError{name + "." + field, "must be between 1s and 366d"}
		}
		return d, nil
	}
	switch {
	case (r.Interval == "") == (r.Adaptive == nil):
		return &FieldError{name, `must set exactly one of "interval" and "adaptive"`}
	case r.Interval != "":
		_, err := check("interval", r.Interval)
		return err
	}
	lo, err := check("adaptive.min", r.Adaptive.Min)
	if err != nil {
		return err
	}
	hi, err := check("adaptive.max", r.Adaptive.Max)
	if err != nil {
		return err
	}
	if hi < lo {
		return &FieldError{name + ".adaptive.max", "must not be shorter than adaptive.min"}
	}
	return nil
}

// ParseInterval parses a Go duration that may also use the unit "d" (24
// hours): "30d", "1d12h", "90m". It refuses negative and empty values.
func ParseInterval(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("must be a duration such as \"24h\" or \"30d\"")
	}
	var total time.Duration
	rest := s
	if i := strings.IndexByte(rest, 'd'); i >= 0 {
		days, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil || days < 0 || days > 100000 || rest[:i] == "" || strings.ContainsAny(rest[:i], "+-eE") {
			return 0, fmt.Errorf("%q is not a duration such as \"24h\" or \"30d\"", s)
		}
		total, rest = time.Duration(days*float64(24*time.Hour)), rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 || strings.HasPrefix(rest, "+") {
			return 0, fmt.Errorf("%q is not a duration such as \"24h\" or \"30d\"", s)
		}
		total += d
	}
	return total, nil
}

// Profile limits and defaults. The defaults are those of the API and of
// `grid crawl` alike: one place defines them.
const (
	MaxStartURLs  = 10000
	MaxDepthLimit = 100
	MaxPriority   = 9
	// MaxCollections bounds the collection names of a profile, each of
	// 1 to MaxCollectionLen bytes of letters, digits, '_', '-' and '.'.
	MaxCollections   = 16
	MaxCollectionLen = 64
	// DefaultMaxDepth follows links up to three hops from the start URLs:
	// a site's home page, its sections and their pages.
	DefaultMaxDepth = 3
	// DefaultScope keeps a crawl on the hosts of its start URLs.
	DefaultScope      = ScopeHost
	DefaultUserAgent  = "gridcrawl/1.0 (+https://github.com/gridcrawl/gridcrawl)"
	DefaultMinDelayMS = 500
	DefaultMaxDelayMS = 10000
	DefaultFactor     = 2.0
	maxRegexLen       = 4096
	// MaxBudgetOverrides bounds budget.overrides.
	MaxBudgetOverrides = 1000
	// MaxRenderOverrides bounds render_overrides.
	MaxRenderOverrides = 1000
	// maxRegexRepeat bounds the repetition counts of a profile regex,
	// multiplied through nested repetitions: "x{5}" counts 5, "(?:x{5}){4}"
	// 20. Matching costs about the expanded size times the URL's length, and
	// every link of every page is matched.
	maxRegexRepeat = 100
	// maxRegexInsts bounds a profile regex's compiled program.
	maxRegexInsts = 10000
	maxURLLen     = 2048
)

// FieldError reports an invalid field of a request body. Field is a JSON path
// such as "start_urls[2]" or "politeness.min_delay_ms"; it is empty when the
// error is about the body as a whole, and Reason then says so by itself
// ("request body is empty").
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

// WithDefaults returns p with the defaults of the fields whose zero value
// means "not given": scope, user agent, a zero Politeness (all of
// DefaultPoliteness) and an empty robots policy ("obey"). Other politeness
// values are kept as they are, zeros included: JSON decoding has already
// defaulted the absent ones. MaxDepth is never changed: 0 is a valid depth
// (JSON decoding defaults an absent max_depth). A start URL without a
// scheme gets one by WithScheme's rule ("example.org/a" becomes
// "https://example.org/a").
func (p Profile) WithDefaults() Profile {
	if len(p.StartURLs) > 0 {
		urls := make([]string, len(p.StartURLs))
		for i, s := range p.StartURLs {
			urls[i] = WithScheme(s)
		}
		p.StartURLs = urls
	}
	if p.Scope == "" {
		p.Scope = DefaultScope
	}
	if p.UserAgent == "" {
		p.UserAgent = DefaultUserAgent
	}
	if p.Politeness == (Politeness{}) {
		p.Politeness = DefaultPoliteness()
	}
	if p.Politeness.Robots == "" {
		p.Politeness.Robots = RobotsObey
	}
	return p
}

// regexCost returns why the valid regular expression re would cost too much
// to match against every link of a crawl, or "".
func regexCost(re string) string {
	tree, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return "not a valid regular expression: " + err.Error()
	}
	if n := maxRepeat(tree); n > maxRegexRepeat {
		return fmt.Sprintf("repeats up to %d times (counts of nested repetitions multiplied); at most %d", n, maxRegexRepeat)
	}
	prog, err := syntax.Compile(tree.Simplify())
	if err != nil {
		return "not a valid regular expression: " + err.Error()
	}
	if n := len(prog.Inst); n > maxRegexInsts {
		return fmt.Sprintf("compiles to %d instructions; at most %d", n, maxRegexInsts)
	}
	return ""
}

// maxRepeat returns the largest product of repetition counts along one path
// of re's syntax tree ({n,} counts n; *, + and ? count 1).
func maxRepeat(re *syntax.Regexp) int {
	inner := 1
	for _, sub := range re.Sub {
		inner = max(inner, maxRepeat(sub))
	}
	if re.Op == syntax.OpRepeat {
		n := re.Max
		if n < 0 {
			n = re.Min
		}
		return max(n, 1) * inner
	}
	return inner
}

// isControl reports whether r is an ASCII control character (C0 or DEL):
// HTTP clients refuse them in a header value, so every fetch would fail.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Validate checks p (after WithDefaults) and returns a *FieldError naming the
// first invalid field.
func (p Profile) Validate() error {
	if len(p.StartURLs) == 0 {
		return &FieldError{"start_urls", "at least one start URL is required"}
	}
	if len(p.StartURLs) > MaxStartURLs {
		return &FieldError{"start_urls", fmt.Sprintf("at most %d start URLs", MaxStartURLs)}
	}
	for i, s := range p.StartURLs {
		if err := checkHTTPURL(s); err != nil {
			return &FieldError{fmt.Sprintf("start_urls[%d]", i), err.Error()}
		}
	}
	if p.MaxDepth < 0 || p.MaxDepth > MaxDepthLimit {
		return &FieldError{"max_depth", fmt.Sprintf("must be between 0 and %d", MaxDepthLimit)}
	}
	switch p.Scope {
	case ScopeHost, ScopeDomain, ScopeAny:
	default:
		return &FieldError{"scope", `must be "host", "domain" or "any"`}
	}
	for _, f := range []struct{ name, re string }{
		{"crawl_must_match", p.CrawlMustMatch}, {"crawl_must_not_match", p.CrawlMustNotMatch},
		{"index_must_match", p.IndexMustMatch}, {"index_must_not_match", p.IndexMustNotMatch},
	} {
		if len(f.re) > maxRegexLen {
			return &FieldError{f.name, fmt.Sprintf("longer than %d characters", maxRegexLen)}
		}
		if _, err := regexp.Compile(f.re); err != nil {
			return &FieldError{f.name, "not a valid regular expression: " + err.Error()}
		}
		if reason := regexCost(f.re); reason != "" {
			return &FieldError{f.name, reason}
		}
	}
	if p.MaxPages < 0 {
		return &FieldError{"max_pages", "must not be negative"}
	}
	if p.MaxPagesPerHost < 0 {
		return &FieldError{"max_pages_per_host", "must not be negative"}
	}
	if len(p.UserAgent) > 512 || strings.ContainsFunc(p.UserAgent, isControl) {
		return &FieldError{"user_agent", "must be at most 512 bytes without control characters (an HTTP header value)"}
	}
	pol := p.Politeness
	if pol.MinDelayMS < 0 || pol.MinDelayMS > 3600_000 {
		return &FieldError{"politeness.min_delay_ms", "must be between 0 and 3600000"}
	}
	if pol.MaxDelayMS < pol.MinDelayMS || pol.MaxDelayMS > 3600_000 {
		return &FieldError{"politeness.max_delay_ms", "must be between min_delay_ms and 3600000"}
	}
	if pol.DelayFactor < 0 || pol.DelayFactor > 1000 {
		return &FieldError{"politeness.delay_factor", "must be between 0 and 1000"}
	}
	if pol.Robots != RobotsObey && pol.Robots != RobotsIgnore {
		return &FieldError{"politeness.robots", `must be "obey" or "ignore"`}
	}
	if p.SitemapDepth < 0 || p.SitemapDepth > p.MaxDepth {
		return &FieldError{"sitemap_depth", "must be between 0 and max_depth"}
	}
	if p.Priority < 0 || p.Priority > MaxPriority {
		return &FieldError{"priority", fmt.Sprintf("must be between 0 and %d", MaxPriority)}
	}
	if len(p.Collection) > MaxCollections {
		return &FieldError{"collection", fmt.Sprintf("at most %d names", MaxCollections)}
	}
	for i, c := range p.Collection {
		if !validCollection(c) {
			return &FieldError{"collection", fmt.Sprintf("name %d: must be 1 to %d bytes of letters, digits, '_', '-' and '.'", i, MaxCollectionLen)}
		}
	}
	if p.Version < 0 {
		return &FieldError{"version", "must not be negative"}
	}
	if p.Idempotency != nil && (!ValidIdempotencyKey(p.Idempotency.Key) || len(p.Idempotency.RequestSHA256) != 64) {
		return &FieldError{"idempotency", "must be a key of 1 to 255 printable characters and a SHA-256 in hex"}
	}
	if p.Recrawl != nil {
		if err := p.Recrawl.validate("recrawl"); err != nil {
			return err
		}
	}
	if b := p.Budget; b != nil {
		if b.BalanceReplenish < 0 {
			return &FieldError{"budget.balance_replenish", "must not be negative"}
		}
		if b.TotalBudget < 0 {
			return &FieldError{"budget.total_budget", "must not be negative"}
		}
		switch b.CostPolicy {
		case "", CostZero, CostUnit, CostWag, CostAntiCalendar:
		default:
			return &FieldError{"budget.cost_policy", `must be "zero", "unit", "wag" or "anti-calendar"`}
		}
		if len(b.Overrides) > MaxBudgetOverrides {
			return &FieldError{"budget.overrides", fmt.Sprintf("at most %d overrides", MaxBudgetOverrides)}
		}
		for i, o := range b.Overrides {
			if o.Domain == "" || len(o.Domain) > 253 || strings.ContainsAny(o.Domain, "/: ") {
				return &FieldError{fmt.Sprintf("budget.overrides[%d].domain", i), "must be a host or domain name"}
			}
			if o.BalanceReplenish < 0 || o.TotalBudget < 0 {
				return &FieldError{fmt.Sprintf("budget.overrides[%d]", i), "budgets must not be negative"}
			}
		}
	}
	return p.validateRender()
}

// validateRender checks render, render_overrides and render_robots.
func (p Profile) validateRender() error {
	const modes = `must be "never", "always" or "auto"`
	if !validRender(p.Render) && p.Render != "" {
		return &FieldError{"render", modes}
	}
	if len(p.RenderOverrides) > MaxRenderOverrides {
		return &FieldError{"render_overrides", fmt.Sprintf("at most %d overrides", MaxRenderOverrides)}
	}
	first := make(map[string]int, len(p.RenderOverrides))
	for i, o := range p.RenderOverrides {
		d := strings.ToLower(overrideDomain(o.Domain))
		if d == "" || len(o.Domain) > 253 || strings.ContainsAny(o.Domain, "/: ") || strings.ContainsFunc(o.Domain, isControl) {
			return &FieldError{fmt.Sprintf("render_overrides[%d].domain", i), "must be a host or domain name"}
		}
		if j, ok := first[d]; ok {
			// Two overrides of one domain leave its mode undecided.
			return &FieldError{fmt.Sprintf("render_overrides[%d].domain", i), fmt.Sprintf("%q is already render_overrides[%d]", o.Domain, j)}
		}
		first[d] = i
		if !validRender(o.Render) {
			return &FieldError{fmt.Sprintf("render_overrides[%d].render", i), modes}
		}
	}
	switch p.RenderRobots {
	case "", RenderRobotsPages, RenderRobotsAll:
	default:
		return &FieldError{"render_robots", `must be "pages" or "all"`}
	}
	if !ValidDedupe(p.Dedupe) {
		return &FieldError{"dedupe", dedupeModes}
	}
	return nil
}

const dedupeModes = `must be "off", "crawl" or "collection"`

// ValidDedupe reports whether mode is a dedupe mode or "" (the default,
// DedupeCollection).
func ValidDedupe(mode string) bool {
	return mode == "" || mode == DedupeOff || mode == DedupeCrawl || mode == DedupeCollection
}

// validRender reports whether mode is a render mode ("" is not).
func validRender(mode string) bool {
	return mode == RenderNever || mode == RenderAlways || mode == RenderAuto
}

// validCollection reports whether c is a valid collection name.
func validCollection(c string) bool {
	if c == "" || len(c) > MaxCollectionLen {
		return false
	}
	for i := 0; i < len(c); i++ {
		switch b := c[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '_', b == '-', b == '.':
		default:
			return false
		}
	}
	return true
}

// checkHTTPURL checks a start URL (after WithScheme) and says what is wrong
// with it, quoting it.
func checkHTTPURL(s string) error {
	if len(s) > maxURLLen {
		return fmt.Errorf("longer than %d bytes", maxURLLen)
	}
	if s == "" {
		return errors.New("is empty: write a URL such as https://example.org/")
	}
	if strings.ContainsAny(s, " \t\r\n\f\v") {
		return fmt.Errorf("%q is not a URL: it has white space inside (write one URL per entry, spaces as %%20)", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%q is not a URL: %v", s, err)
	}
	switch {
	case u.Scheme == "" && u.Host == "" && !strings.HasPrefix(s, "/"):
		return fmt.Errorf("%q has no scheme: write http://%s or https://%s", s, s, s)
	case u.Scheme == "":
		return fmt.Errorf("%q has no scheme and host: write a URL such as https://example.org/", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: scheme must be http or https", s)
	case u.Hostname() == "":
		return fmt.Errorf("%q: host is missing", s)
	}
	return nil
}

// Delay returns the politeness settings as durations.
func (p Politeness) Delay() (minDelay, maxDelay time.Duration) {
	return time.Duration(p.MinDelayMS) * time.Millisecond, time.Duration(p.MaxDelayMS) * time.Millisecond
}
