package mcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// The browser surface of the API (the dashboard, the session cookie) is
// guarded against the attacks a page in the operator's own browser can
// mount: DNS rebinding (a hostile name resolving to 127.0.0.1 reaches the
// loopback-only API with the attacker's Host) and cross-site request forgery
// (a hostile page posting a crawl with a text/plain body, or with the
// session cookie). Clients that are not browsers send neither Origin nor
// Sec-Fetch-* headers and are not affected.

// sessionCookie is the name of the dashboard's login cookie.
const sessionCookie = "gridcrawl_session"

// sessionLifetime is how long a login lasts.
const sessionLifetime = 7 * 24 * time.Hour

// guard refuses requests with a foreign Host in loopback mode (421), state-
// changing requests of another origin (403), and JSON API bodies sent with
// another content type (415), before authentication.
func (m *MCP) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.loopbackOnly() && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && !loopbackHost(r.Host) {
			jsonapi.Error(w, http.StatusMisdirectedRequest, "this API listens on loopback and answers only to the Host names localhost, 127.0.0.1 and [::1]", "")
			return
		}
		if stateChanging(r.Method) {
			if msg := m.crossOrigin(r); msg != "" {
				jsonapi.Error(w, http.StatusForbidden, msg, "")
				return
			}
			if strings.HasPrefix(r.URL.Path, "/api/") && !jsonContentType(r.Header.Get("Content-Type")) {
				jsonapi.Error(w, http.StatusUnsupportedMediaType, "the request body must be sent with Content-Type: application/json", "")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackOnly reports whether the Host check applies: an embedded grid
// listening on a loopback address, or one that lets loopback clients in
// without a token.
func (m *MCP) loopbackOnly() bool {
	if !m.deps.Embedded {
		return false
	}
	if m.cfg.Token == "" {
		return true
	}
	listen := m.cfg.Listen
	m.mu.Lock()
	if m.addr != nil {
		listen = m.addr.String()
	}
	m.mu.Unlock()
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// loopbackHost reports whether a Host header names the local machine:
// localhost or a loopback address, with any port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// crossOrigin returns why a state-changing request comes from a page of
// another origin, or "" when it does not. A request with neither Origin nor
// Sec-Fetch-Site is not from a browser (curl, HCF and YaCy clients) and
// passes.
func (m *MCP) crossOrigin(r *http.Request) string {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return "cross-site request refused (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return ""
	}
	if m.originAllowed(o, r.Host) {
		return ""
	}
	return "cross-origin request refused (Origin " + strconv.Quote(o) + " is not this server)"
}

// originAllowed reports whether origin is the API's own (its host and port
// are the request's Host) or one of GRIDCRAWL_ALLOWED_ORIGINS.
func (m *MCP) originAllowed(origin, host string) bool {
	for _, a := range m.cfg.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false // "null" included: sandboxed frames, data: URLs
	}
	return strings.EqualFold(withPort(u.Host, u.Scheme), withPort(host, u.Scheme))
}

func withPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(host, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

// jsonContentType reports whether a request body's Content-Type is JSON.
// An absent Content-Type passes: browsers always send one with a body
// (text/plain for a string), so only other clients send none, and a
// cross-origin browser request has already been refused by its Origin.
func jsonContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// sessionValue returns the cookie value of a login that expires at exp: the
// expiry and an HMAC of it keyed by the API token, so that changing the
// token ends every session and MCP keeps no session state.
func (m *MCP) sessionValue(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(m.cfg.Token))
	mac.Write([]byte("gridcrawl-session-v1." + e))
	return "v1." + e + "." + hex.EncodeToString(mac.Sum(nil))
}

// validSession reports whether r carries an unexpired session cookie made
// with the current token.
func (m *MCP) validSession(r *http.Request) bool {
	if m.cfg.Token == "" {
		return false
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return false
	}
	sec, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || time.Now().Unix() >= sec {
		return false
	}
	want := m.sessionValue(time.Unix(sec, 0))
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(want)) == 1
}

// secureRequest reports whether the browser reached MCP over HTTPS, directly
// or through a proxy, so that the cookie is marked Secure.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// login checks the token of the login form and sets the session cookie.
func (m *MCP) login(w http.ResponseWriter, r *http.Request) {
	if m.cfg.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := r.PostFormValue("token")
	if subtle.ConstantTimeCompare([]byte(token), []byte(m.cfg.Token)) != 1 {
		m.log.Warn("dashboard login refused", "remote", r.RemoteAddr)
		m.loginPage(w, http.StatusUnauthorized, "Wrong token.")
		return
	}
	exp := time.Now().Add(sessionLifetime)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: m.sessionValue(exp), Path: "/", Expires: exp, MaxAge: int(sessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r),
	})
	m.log.Info("dashboard login", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout clears the session cookie.
func (m *MCP) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
