package mcp

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/services/internal/coordinator"
	"github.com/gridcrawl/gridcrawl/services/internal/hcfapi"
	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/yacy"
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
	mux.HandleFunc("GET /api/v1/frontier", m.frontierReport)
	mux.HandleFunc("GET /api/v1/crawls/{id}/urls", m.crawlLog)
	mux.HandleFunc("GET /api/v1/crawls/{id}/warc", m.warcRecord)
	mux.HandleFunc("GET /api/v1/crawls/{id}/segments", m.listSegments)
	mux.HandleFunc("GET /api/v1/crawls/{id}/segments/{name}", m.segmentFile)
	mux.HandleFunc("GET /api/v1/crawls/{id}/cdxj", m.crawlCDXJ)
	mux.HandleFunc("GET /api/v1/crawls/{id}/documents", m.crawlDocuments)
	mux.HandleFunc("GET /api/v1/crawls/{id}/wacz", m.crawlWACZ)
	mux.HandleFunc("GET /api/v1/collections/{name}/wacz", m.collectionWACZ)
	mux.HandleFunc("GET /api/v1/crawls/{id}/reports/{name}", m.report)
	mux.HandleFunc("GET /api/v1/crawls/{id}/timeline", m.timeline)
	yacy.New(m.crawls, m.deps.Search, m.log).Routes(mux)
	hcfapi.New(m.deps.HCF, m.log).Routes(mux)
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
		jsonapi.Error(w, http.StatusUnauthorized, "missing or wrong API token", "")
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

// decodeProfile reads a profile body strictly and names the offending field.
func decodeProfile(r io.Reader) (contracts.Profile, error) {
	p, err := decodeBody[contracts.Profile](r, maxProfileBytes)
	if err != nil {
		return p, err
	}
	if p.Idempotency != nil {
		return p, &contracts.FieldError{Field: "idempotency", Reason: "is set by MCP from the Idempotency-Key header, not by the body"}
	}
	return coordinator.CheckProfile(p)
}

// idempotencyWindow is how long an Idempotency-Key is remembered: a POST
// with the key of a crawl created longer ago creates a new crawl.
const idempotencyWindow = 24 * time.Hour

func (m *MCP) createCrawl(w http.ResponseWriter, r *http.Request) {
	var key string
	if vals := r.Header.Values("Idempotency-Key"); len(vals) > 0 {
		var ok bool
		if key, ok = idempotencyKey(vals); !ok {
			jsonapi.Error(w, http.StatusBadRequest, fmt.Sprintf("Idempotency-Key must be one string of 1 to %d printable characters, such as \"8e03978e-40d5-43e8-bc93-6894a57f9324\"", contracts.MaxIdempotencyKeyLen), "Idempotency-Key")
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxProfileBytes+1))
	if err != nil {
		jsonapi.Error(w, http.StatusBadRequest, "could not read the request body", "")
		return
	}
	p, err := decodeProfile(bytes.NewReader(body))
	if err != nil {
		var fe *contracts.FieldError
		if errors.As(err, &fe) {
			jsonapi.Error(w, http.StatusBadRequest, fe.Error(), fe.Field)
			return
		}
		jsonapi.Error(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	if key != "" {
		sum := sha256.Sum256(body)
		p.Idempotency = &contracts.Idempotency{Key: key, RequestSHA256: hex.EncodeToString(sum[:])}
		if !m.startCreating(key) {
			jsonapi.Error(w, http.StatusConflict, "a request with this Idempotency-Key is still being answered: retry once it is", "Idempotency-Key")
			return
		}
		defer m.doneCreating(key)
		c, found, err := m.crawlOfKey(r, key)
		if err != nil {
			m.log.Error("find idempotency key", "err", err)
			jsonapi.Error(w, http.StatusInternalServerError, "could not read the crawls", "")
			return
		}
		if found {
			if c.Profile.Idempotency.RequestSHA256 != p.Idempotency.RequestSHA256 {
				jsonapi.Error(w, http.StatusUnprocessableEntity, "this Idempotency-Key was used for crawl "+c.ID+" with another request body: send the same body, or a new key for a new crawl", "Idempotency-Key")
				return
			}
			w.Header().Set("Location", "/api/v1/crawls/"+c.ID)
			jsonapi.Write(w, http.StatusCreated, contracts.CreateCrawlResponse{V: contracts.Version, CrawlID: c.ID, State: contracts.CrawlRunning})
			return
		}
	}
	id, err := m.crawls.CreateCrawl(r.Context(), p)
	if err != nil && id == "" {
		if msg, full := coordinator.DiskFull(err); full {
			jsonapi.Error(w, http.StatusInsufficientStorage, msg, "")
			return
		}
		m.log.Error("create crawl", "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not store the crawl", "")
		return
	}
	if err != nil {
		m.log.Warn("create crawl: start urls left to recovery", "crawl_id", id, "err", err)
	}
	w.Header().Set("Location", "/api/v1/crawls/"+id)
	jsonapi.Write(w, http.StatusCreated, contracts.CreateCrawlResponse{V: contracts.Version, CrawlID: id, State: contracts.CrawlRunning})
}

// idempotencyKey reads the Idempotency-Key header's values: one
// structured-field string ("…", RFC 8941) or, leniently, one bare token.
func idempotencyKey(vals []string) (string, bool) {
	if len(vals) != 1 {
		return "", false
	}
	k := strings.TrimSpace(vals[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	return k, contracts.ValidIdempotencyKey(k)
}

// startCreating marks key as under way; false when it already is.
func (m *MCP) startCreating(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.creating[key] {
		return false
	}
	if m.creating == nil {
		m.creating = map[string]bool{}
	}
	m.creating[key] = true
	return true
}

func (m *MCP) doneCreating(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.creating, key)
}

// crawlOfKey finds the crawl created within idempotencyWindow by a POST
// with key. The key is stored in the crawl's profile, in the profile store,
// so that it is found after a restart and by every MCP of a grid.
func (m *MCP) crawlOfKey(r *http.Request, key string) (profiles.Crawl, bool, error) {
	cs, err := m.deps.Profiles.List(r.Context())
	if err != nil {
		return profiles.Crawl{}, false, err
	}
	since := time.Now().Add(-idempotencyWindow)
	for _, c := range cs {
		if c.Profile.Idempotency != nil && c.Profile.Idempotency.Key == key && c.CreatedAt.After(since) {
			return c, true, nil
		}
	}
	return profiles.Crawl{}, false, nil
}

func (m *MCP) getCrawl(w http.ResponseWriter, r *http.Request) {
	st, err := m.crawls.Status(r.Context(), r.PathValue("id"))
	if errors.Is(err, profiles.ErrNotFound) {
		jsonapi.Error(w, http.StatusNotFound, "no such crawl", "")
		return
	}
	if err != nil {
		m.log.Error("crawl status", "crawl_id", r.PathValue("id"), "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not compute crawl status", "")
		return
	}
	jsonapi.Write(w, http.StatusOK, st)
}

func (m *MCP) listCrawls(w http.ResponseWriter, r *http.Request) {
	sts, err := m.crawls.Statuses(r.Context())
	if err != nil {
		m.log.Error("list crawls", "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not list crawls", "")
		return
	}
	jsonapi.Write(w, http.StatusOK, contracts.CrawlList{V: contracts.Version, Crawls: append([]contracts.CrawlStatus{}, sts...)})
}

func (m *MCP) cancelCrawl(w http.ResponseWriter, r *http.Request) {
	m.answer(w, r, "cancel crawl", m.crawls.Cancel(r.Context(), r.PathValue("id")))
}

// answer writes the crawl's status after a verb, or the verb's error: 404
// for an unknown crawl, 409 for a verb refused in the crawl's state, 400 for
// an invalid request.
func (m *MCP) answer(w http.ResponseWriter, r *http.Request, action string, err error) {
	var fe *contracts.FieldError
	switch {
	case errors.Is(err, profiles.ErrNotFound):
		jsonapi.Error(w, http.StatusNotFound, "no such crawl", "")
	case errors.Is(err, coordinator.ErrConflict):
		jsonapi.Error(w, http.StatusConflict, err.Error(), "")
	case errors.Is(err, coordinator.ErrNothingToChange):
		jsonapi.Error(w, http.StatusBadRequest, err.Error(), "")
	case errors.As(err, &fe):
		jsonapi.Error(w, http.StatusBadRequest, fe.Error(), fe.Field)
	case err != nil:
		m.log.Error(action, "crawl_id", r.PathValue("id"), "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not "+action, "")
	default:
		m.getCrawl(w, r)
	}
}

func (m *MCP) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := strings.TrimSpace(q.Get("q"))
	if query == "" {
		jsonapi.Error(w, http.StatusBadRequest, "query parameter q is required", "q")
		return
	}
	limit, offset := 10, 0
	var err error
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 100 {
			jsonapi.Error(w, http.StatusBadRequest, "limit must be between 1 and 100", "limit")
			return
		}
	}
	if s := q.Get("offset"); s != "" {
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 || offset > 10000 {
			jsonapi.Error(w, http.StatusBadRequest, "offset must be between 0 and 10000", "offset")
			return
		}
	}
	var all bool
	if s := q.Get("all_crawls"); s != "" {
		if all, err = strconv.ParseBool(s); err != nil {
			jsonapi.Error(w, http.StatusBadRequest, "all_crawls must be true or false", "all_crawls")
			return
		}
	}
	res, err := m.deps.Search.Search(r.Context(), search.Query{Q: query, CrawlID: q.Get("crawl"), Offset: offset, Limit: limit, AllCrawls: all})
	if err != nil {
		m.log.Error("search", "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "search failed", "")
		return
	}
	hits := res.Hits
	if hits == nil {
		hits = []contracts.SearchHit{}
	}
	jsonapi.Write(w, http.StatusOK, contracts.SearchResponse{V: contracts.Version, Query: query, Total: res.Total, Offset: offset, Hits: hits})
}

func (m *MCP) patchCrawl(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	patch, err := decodeBody[contracts.ProfilePatch](r.Body, maxPatchBytes)
	if err != nil {
		m.answer(w, r, "change the crawl", err)
		return
	}
	_, n, err := m.crawls.Patch(r.Context(), id, patch)
	if err != nil && n > 0 {
		m.log.Warn("patch crawl: some retired urls put back", "crawl_id", id, "unretired", n)
	}
	m.answer(w, r, "change the crawl", err)
}

func (m *MCP) pauseCrawl(w http.ResponseWriter, r *http.Request) {
	m.answer(w, r, "pause the crawl", m.crawls.SetPaused(r.Context(), r.PathValue("id"), true))
}

func (m *MCP) resumeCrawl(w http.ResponseWriter, r *http.Request) {
	m.answer(w, r, "resume the crawl", m.crawls.SetPaused(r.Context(), r.PathValue("id"), false))
}
