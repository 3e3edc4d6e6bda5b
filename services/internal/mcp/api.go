package mcp

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/diskspace"
	"github.com/gridcrawl/gridcrawl/services/internal/frontier"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Limits of request bodies.
const (
	maxProfileBytes = 4 << 20
	maxPatchBytes   = 1 << 20
)

// Handler returns the HTTP API.
func (m *MCP) Handler() http.Handler {
	return m.guard(m.auth(m.routes()))
}

// routes registers every endpoint of the API. The OpenAPI document
// (openapi.json in contracts/schemas) describes each of them; a test checks
// the two against each other.
func (m *MCP) routes() *router {
	mux := newRouter()
	mux.HandleFunc("GET /healthz", metrics.Healthz)
	mux.HandleFunc("GET /readyz", m.readyz)
	mux.Handle("GET /metrics", m.deps.Metrics.Handler())
	mux.HandleFunc("POST /api/v1/crawls", m.createCrawl)
	mux.HandleFunc("GET /api/v1/crawls", m.listCrawls)
	mux.HandleFunc("GET /api/v1/crawls/{id}", m.getCrawl)
	mux.HandleFunc("DELETE /api/v1/crawls/{id}", m.cancelCrawl)
	mux.HandleFunc("PATCH /api/v1/crawls/{id}", m.patchCrawl)
	mux.HandleFunc("POST /api/v1/crawls/{id}/pause", m.pauseCrawl)
	mux.HandleFunc("POST /api/v1/crawls/{id}/resume", m.resumeCrawl)
	mux.HandleFunc("GET /api/v1/search", m.search)
	mux.HandleFunc("GET /yacysearch.json", m.yacySearchJSON)
	mux.HandleFunc("GET /yacy/grid/mcp/index/yacysearch.json", m.yacySearchJSON)
	mux.HandleFunc("GET /yacysearch.rss", m.yacySearchRSS)
	mux.HandleFunc("GET /api/v1/frontier", m.frontierReport)
	// The crawl log, reports and timeline (issue 11).
	mux.HandleFunc("GET /api/v1/crawls/{id}/urls", m.crawlLog)
	mux.HandleFunc("GET /api/v1/crawls/{id}/warc", m.warcRecord)
	mux.HandleFunc("GET /api/v1/crawls/{id}/segments", m.listSegments)
	mux.HandleFunc("GET /api/v1/crawls/{id}/segments/{name}", m.segmentFile)
	mux.HandleFunc("GET /api/v1/crawls/{id}/cdxj", m.crawlCDXJ)
	mux.HandleFunc("GET /api/v1/crawls/{id}/documents", m.crawlDocuments)
	mux.HandleFunc("GET /api/v1/crawls/{id}/reports/{name}", m.report)
	mux.HandleFunc("GET /api/v1/crawls/{id}/timeline", m.timeline)
	mux.HandleFunc(yacyCrawlStartPath, m.yacyCrawlStart)
	mux.Handle("/hcf/", m.hcfHandler())
	mux.HandleFunc("GET "+openAPIPath, serveOpenAPI)
	m.uiRoutes(mux)
	return mux
}

func (m *MCP) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || publicUIPath(r.URL.Path) || m.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			http.Redirect(w, r, "/login", http.StatusSeeOther) // the dashboard asks for the token
			return
		}
		if r.Header.Get("Sec-Fetch-Mode") == "cors" || r.Header.Get("Sec-Fetch-Mode") == "same-origin" {
			// The dashboard's own requests: no Basic challenge, which would
			// make the browser pop up its password dialog.
			w.Header().Set("WWW-Authenticate", `Bearer realm="gridcrawl"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gridcrawl", Basic realm="gridcrawl"`)
		}
		writeError(w, http.StatusUnauthorized, "missing or wrong API token", "")
	})
}

func (m *MCP) authorized(r *http.Request) bool {
	if m.cfg.Token == "" {
		return m.deps.Embedded && fromLoopback(r)
	}
	got := ""
	// Auth schemes are case-insensitive (RFC 9110 §11.1): "bearer" is Bearer.
	if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		got = strings.TrimLeft(cred, " ")
	} else if user, _, ok := r.BasicAuth(); ok {
		got = user // HCF clients send the token as the basic-auth user name
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(m.cfg.Token)) == 1 || m.validSession(r)
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg, field string) {
	writeJSON(w, code, contracts.ErrorResponse{Error: msg, Field: field})
}

// decodeProfile reads a profile body strictly and names the offending field.
func decodeProfile(r io.Reader) (contracts.Profile, error) {
	p, err := decodeBody[contracts.Profile](r, maxProfileBytes)
	if err != nil {
		return p, err
	}
	return checkProfile(p)
}

// checkProfile applies a submitted profile's defaults, validates it and
// normalizes its start URLs: every way of creating a crawl goes through it.
func checkProfile(p contracts.Profile) (contracts.Profile, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return p, err
	}
	for i, s := range p.StartURLs {
		n, err := urlnorm.Normalize(s)
		if err != nil {
			return p, &contracts.FieldError{Field: fmt.Sprintf("start_urls[%d]", i), Reason: err.Error()}
		}
		p.StartURLs[i] = n
	}
	return p, nil
}

func newCrawlID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
}

// diskFull tells whether err, of creating a crawl, is the data directory's
// lack of space, and returns the message that says so.
func diskFull(err error) (string, bool) {
	switch {
	case errors.Is(err, diskspace.ErrFull):
		return err.Error(), true
	case diskspace.IsFull(err):
		return "disk full: " + err.Error(), true
	}
	return "", false
}

// CreateCrawl stores a validated profile, writes its start URLs and publishes
// their loader contracts.
func (m *MCP) CreateCrawl(ctx context.Context, p contracts.Profile) (string, error) {
	if err := m.deps.Disk.Full(); err != nil {
		return "", fmt.Errorf("refuse new crawl: %w", err)
	}
	id := newCrawlID()
	if err := m.deps.Profiles.Put(ctx, profiles.Crawl{ID: id, Profile: p, State: contracts.CrawlRunning, CreatedAt: time.Now().UTC()}); err != nil {
		m.deps.Gate.Note(err)
		return "", fmt.Errorf("store crawl: %w", err)
	}
	var cands []frontier.Candidate
	if p.SitemapsEnabled() {
		cands = sitemapProbes(p)
	}
	for _, u := range p.StartURLs {
		cands = append(cands, frontier.Candidate{URL: u})
	}
	// A failure after the profile is stored leaves records for the recovery
	// sweep, never a crawl without records: start URLs are created first.
	if _, err := m.frontier.Enqueue(ctx, id, p, cands); err != nil {
		return id, fmt.Errorf("enqueue start urls: %w", err)
	}
	m.log.Info("crawl created", "crawl_id", id, "start_urls", len(p.StartURLs))
	return id, nil
}

// sitemapProbes returns the /sitemap.xml of each start URL's origin, once
// each, as sitemap probes at the profile's sitemap depth. They go before
// the start URLs, so that a loader fetches a host's probe before its first
// page: the start URLs' contract is then settled with the first page and
// does not hold its shard's prefetch slot for another politeness delay
// while the page's links arrive. A start URL that is itself a probe is read
// as a sitemap. The loader hands each probe the Sitemap: lines of its
// origin's robots.txt.
func sitemapProbes(p contracts.Profile) []frontier.Candidate {
	var out []frontier.Candidate
	seen := map[string]bool{}
	for _, s := range p.StartURLs {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		probe, err := urlnorm.Normalize((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/sitemap.xml"}).String())
		if err != nil || seen[probe] {
			continue
		}
		seen[probe] = true
		out = append(out, frontier.Candidate{URL: probe, Depth: p.SitemapDepth, Sitemap: txindex.SitemapProbe})
	}
	return out
}

func (m *MCP) createCrawl(w http.ResponseWriter, r *http.Request) {
	p, err := decodeProfile(r.Body)
	if err != nil {
		var fe *contracts.FieldError
		if errors.As(err, &fe) {
			writeError(w, http.StatusBadRequest, fe.Error(), fe.Field)
			return
		}
		writeError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	id, err := m.CreateCrawl(r.Context(), p)
	if err != nil && id == "" {
		if msg, full := diskFull(err); full {
			writeError(w, http.StatusInsufficientStorage, msg, "")
			return
		}
		m.log.Error("create crawl", "err", err)
		writeError(w, http.StatusInternalServerError, "could not store the crawl", "")
		return
	}
	if err != nil {
		m.log.Warn("create crawl: start urls left to recovery", "crawl_id", id, "err", err)
	}
	w.Header().Set("Location", "/api/v1/crawls/"+id)
	writeJSON(w, http.StatusCreated, contracts.CreateCrawlResponse{V: contracts.Version, CrawlID: id, State: contracts.CrawlRunning})
}

// Status reads a crawl's state and counts its records and documents. It only
// reads: whether a crawl finished is decided by the work (CheckFinished).
func (m *MCP) Status(ctx context.Context, id string) (contracts.CrawlStatus, error) {
	c, err := m.deps.Profiles.Get(ctx, id)
	if err != nil {
		return contracts.CrawlStatus{}, err
	}
	return m.status(ctx, c)
}

func (m *MCP) status(ctx context.Context, c profiles.Crawl) (contracts.CrawlStatus, error) {
	counts, err := m.deps.Tx.Counts(ctx, c.ID)
	if err != nil {
		return contracts.CrawlStatus{}, fmt.Errorf("count records: %w", err)
	}
	docs, err := m.deps.Search.Count(ctx, c.ID)
	if err != nil {
		return contracts.CrawlStatus{}, fmt.Errorf("count documents: %w", err)
	}
	st := contracts.CrawlStatus{V: contracts.Version, CrawlID: c.ID, State: c.State, Profile: c.Profile,
		Counts: map[contracts.Status]int64{}, Documents: docs, CreatedAt: c.CreatedAt, FinishedAt: c.FinishedAt}
	for _, s := range contracts.Statuses {
		n := counts[s]
		st.Counts[s] = n
		st.Total += n
		if s.Pending() {
			st.Pending += n
		}
	}
	st.Retired = counts[contracts.Retired]
	if c.Profile.Recrawl != nil {
		if st.Recrawl, err = m.recrawlStatus(ctx, c); err != nil {
			return contracts.CrawlStatus{}, err
		}
	}
	return st, nil
}

func (m *MCP) getCrawl(w http.ResponseWriter, r *http.Request) {
	st, err := m.Status(r.Context(), r.PathValue("id"))
	if errors.Is(err, profiles.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such crawl", "")
		return
	}
	if err != nil {
		m.log.Error("crawl status", "crawl_id", r.PathValue("id"), "err", err)
		writeError(w, http.StatusInternalServerError, "could not compute crawl status", "")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (m *MCP) listCrawls(w http.ResponseWriter, r *http.Request) {
	cs, err := m.deps.Profiles.List(r.Context())
	if err != nil {
		m.log.Error("list crawls", "err", err)
		writeError(w, http.StatusInternalServerError, "could not list crawls", "")
		return
	}
	out := contracts.CrawlList{V: contracts.Version, Crawls: []contracts.CrawlStatus{}}
	for _, c := range cs {
		st, err := m.status(r.Context(), c)
		if err != nil {
			m.log.Error("crawl status", "crawl_id", c.ID, "err", err)
			writeError(w, http.StatusInternalServerError, "could not compute crawl status", "")
			return
		}
		out.Crawls = append(out.Crawls, st)
	}
	writeJSON(w, http.StatusOK, out)
}

// Cancel cancels a running or paused crawl and fails its pending records;
// cancelling a cancelled crawl fails what is still pending again. It fails
// with errConflict for a finished crawl, and with profiles.ErrNotFound.
func (m *MCP) Cancel(ctx context.Context, id string) error {
	if _, _, err := m.apply(ctx, id, verbCancel, "cancelled through the api"); err != nil {
		return err
	}
	return m.failPending(ctx, id)
}

// failPending fails the pending records of a cancelled crawl.
func (m *MCP) failPending(ctx context.Context, id string) error {
	for _, s := range []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed, contracts.ToBeIndexed} {
		after := ""
		for {
			recs, err := m.deps.Tx.List(ctx, id, s, after, 1000)
			if err != nil {
				return fmt.Errorf("list %s records: %w", s, err)
			}
			if len(recs) == 0 {
				break
			}
			ts := make([]txindex.Transition, len(recs))
			for i, r := range recs {
				ts[i] = txindex.Transition{Key: r.Key, From: s, To: contracts.Failed, Error: "cancelled"}
			}
			if _, err := m.deps.Tx.Transition(ctx, ts); err != nil {
				return fmt.Errorf("fail cancelled records: %w", err)
			}
			after = recs[len(recs)-1].Key
		}
	}
	return nil
}

func (m *MCP) cancelCrawl(w http.ResponseWriter, r *http.Request) {
	m.answer(w, r, "cancel crawl", m.Cancel(r.Context(), r.PathValue("id")))
}

// answer writes the crawl's status after a verb, or the verb's error: 404
// for an unknown crawl, 409 for a verb refused in the crawl's state, 400 for
// an invalid request.
func (m *MCP) answer(w http.ResponseWriter, r *http.Request, action string, err error) {
	var fe *contracts.FieldError
	switch {
	case errors.Is(err, profiles.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such crawl", "")
	case errors.Is(err, errConflict):
		writeError(w, http.StatusConflict, err.Error(), "")
	case errors.Is(err, errNothingToChange):
		writeError(w, http.StatusBadRequest, err.Error(), "")
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, fe.Error(), fe.Field)
	case err != nil:
		m.log.Error(action, "crawl_id", r.PathValue("id"), "err", err)
		writeError(w, http.StatusInternalServerError, "could not "+action, "")
	default:
		m.getCrawl(w, r)
	}
}

func (m *MCP) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := strings.TrimSpace(q.Get("q"))
	if query == "" {
		writeError(w, http.StatusBadRequest, "query parameter q is required", "q")
		return
	}
	limit, offset := 10, 0
	var err error
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 100 {
			writeError(w, http.StatusBadRequest, "limit must be between 1 and 100", "limit")
			return
		}
	}
	if s := q.Get("offset"); s != "" {
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 || offset > 10000 {
			writeError(w, http.StatusBadRequest, "offset must be between 0 and 10000", "offset")
			return
		}
	}
	var all bool
	if s := q.Get("all_crawls"); s != "" {
		if all, err = strconv.ParseBool(s); err != nil {
			writeError(w, http.StatusBadRequest, "all_crawls must be true or false", "all_crawls")
			return
		}
	}
	res, err := m.deps.Search.Search(r.Context(), search.Query{Q: query, CrawlID: q.Get("crawl"), Offset: offset, Limit: limit, AllCrawls: all})
	if err != nil {
		m.log.Error("search", "err", err)
		writeError(w, http.StatusInternalServerError, "search failed", "")
		return
	}
	hits := res.Hits
	if hits == nil {
		hits = []contracts.SearchHit{}
	}
	writeJSON(w, http.StatusOK, contracts.SearchResponse{V: contracts.Version, Query: query, Total: res.Total, Offset: offset, Hits: hits})
}

// Patch changes a crawl's politeness and budget settings mid-crawl. The new
// profile version reaches the loaders with the next contracts (and their
// profile caches within seconds); URLs parked as retired are put back to
// to-be-loaded and republished, so that the loaders re-evaluate their groups
// under the new budgets: those still over budget are retired again. An empty
// patch fails with errNothingToChange, a finished or cancelled crawl with
// errConflict; a patch that leaves the settings as they are changes nothing
// (no new version).
func (m *MCP) Patch(ctx context.Context, id string, patch contracts.ProfilePatch) (contracts.Profile, int, error) {
	if reflect.ValueOf(patch).IsZero() {
		return contracts.Profile{}, 0, errNothingToChange
	}
	// No finish check of this crawl between the new settings and the URLs
	// they put back to work.
	mu := m.crawlLock(id)
	mu.Lock()
	defer mu.Unlock()
	c, err := m.deps.Profiles.Get(ctx, id)
	if err != nil {
		return contracts.Profile{}, 0, err
	}
	if !slices.Contains(verbRules[verbPatch].accept, c.State) {
		return c.Profile, 0, fmt.Errorf("patch crawl %s: it is %s: %w", id, c.State, errConflict)
	}
	p := c.Profile
	if patch.Politeness != nil {
		p.Politeness = patch.Politeness.Apply(p.Politeness) // absent fields keep their value
	}
	if patch.Budget != nil {
		p.Budget = patch.Budget
	}
	if patch.Recrawl != nil {
		if p.Recrawl == nil {
			return c.Profile, 0, &contracts.FieldError{Field: "recrawl", Reason: "a one-shot crawl cannot become continuous: start a crawl with a recrawl schedule"}
		}
		p.Recrawl = patch.Recrawl
	}
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return c.Profile, 0, err
	}
	if reflect.DeepEqual(p, c.Profile) {
		return c.Profile, 0, nil // the settings are already these: no new version
	}
	p.Version++
	if err := m.deps.Profiles.SetProfile(ctx, id, p); err != nil {
		return c.Profile, 0, fmt.Errorf("store profile: %w", err)
	}
	n, err := m.unretire(ctx, id, p)
	if err != nil {
		return p, n, err
	}
	m.log.Info("crawl settings changed", "crawl_id", id, "version", p.Version, "changed", profileChanges(c.Profile, p), "unretired", n)
	return p, n, nil
}

// unretire moves the crawl's retired records back to to-be-loaded and
// publishes them.
func (m *MCP) unretire(ctx context.Context, id string, p contracts.Profile) (int, error) {
	n := 0
	for {
		recs, err := m.deps.Tx.List(ctx, id, contracts.Retired, "", 1000)
		if err != nil {
			return n, fmt.Errorf("list retired records: %w", err)
		}
		if len(recs) == 0 {
			return n, nil
		}
		ts := make([]txindex.Transition, len(recs))
		for i, r := range recs {
			ts[i] = txindex.Transition{Key: r.Key, From: contracts.Retired, To: contracts.ToBeLoaded}
		}
		applied, err := m.deps.Tx.Transition(ctx, ts)
		if err != nil {
			return n, fmt.Errorf("unretire records: %w", err)
		}
		var back []txindex.Record
		for i, r := range recs {
			if applied[i] {
				back = append(back, r)
			}
		}
		if err := m.frontier.Publish(ctx, id, p, back); err != nil {
			return n, err
		}
		n += len(back)
	}
}

// errNothingToChange is the error of an empty PATCH.
var errNothingToChange = errors.New("nothing to change: the patch sets none of " + patchFields())

// patchFields lists the JSON names of the fields of a profile patch.
func patchFields() string {
	t := reflect.TypeFor[contracts.ProfilePatch]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

func (m *MCP) patchCrawl(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	patch, err := decodeBody[contracts.ProfilePatch](r.Body, maxPatchBytes)
	if err != nil {
		m.answer(w, r, "change the crawl", err)
		return
	}
	_, n, err := m.Patch(r.Context(), id, patch)
	if err != nil && n > 0 {
		m.log.Warn("patch crawl: some retired urls put back", "crawl_id", id, "unretired", n)
	}
	m.answer(w, r, "change the crawl", err)
}

// SetPaused pauses a running crawl or resumes a paused one. Pausing a
// paused crawl and resuming a running one succeed without a change; a
// finished or cancelled crawl fails with errConflict.
func (m *MCP) SetPaused(ctx context.Context, id string, paused bool) error {
	v := verbResume
	if paused {
		v = verbPause
	}
	_, _, err := m.apply(ctx, id, v, string(v)+"d through the api")
	return err
}

func (m *MCP) pauseCrawl(w http.ResponseWriter, r *http.Request) {
	m.answer(w, r, "pause the crawl", m.SetPaused(r.Context(), r.PathValue("id"), true))
}

func (m *MCP) resumeCrawl(w http.ResponseWriter, r *http.Request) {
	m.answer(w, r, "resume the crawl", m.SetPaused(r.Context(), r.PathValue("id"), false))
}
