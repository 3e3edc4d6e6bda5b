package mcp

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/coordinator"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// guardServer serves MCP's API on embedded backends (real SQLite), listening
// on loopback; token "" lets loopback clients in without one.
func guardServer(t *testing.T, token string) (*MCP, string) {
	t.Helper()
	set, err := wire.Open(t.Context(), wire.Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	cfg := lifecycleConfig()
	cfg.Listen, cfg.Token = "127.0.0.1:0", token
	if err := cfg.Config.Validate(true); err != nil {
		t.Fatal(err)
	}
	co := coordinator.New(cfg.coConfig, coordinator.Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets})
	m := New(cfg.Config, Deps{Crawls: co, Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets, HCF: set.HCF, Embedded: true})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return m, srv.URL
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func send(t *testing.T, method, u, host, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

const guardProfile = `{"start_urls":["http://a.test/"],"max_depth":0}`

// TestBrowserProtection sends what a hostile page in the operator's browser
// can send (DNS rebinding's foreign Host, cross-origin and text/plain POSTs)
// next to what the dashboard, curl and API clients send.
func TestBrowserProtection(t *testing.T) {
	m, api := guardServer(t, "")
	self := strings.TrimPrefix(api, "http://")
	port := self[strings.LastIndex(self, ":")+1:]
	tests := []struct {
		name, method, path, host, body string
		hdr                            map[string]string
		want                           int
		creates                        bool
	}{
		{"rebinding host name", "GET", "/api/v1/crawls", "evil.example:" + port, "", nil, http.StatusMisdirectedRequest, false},
		{"rebinding host on the dashboard", "GET", "/", "attacker.test", "", nil, http.StatusMisdirectedRequest, false},
		{"rebinding host on a post", "POST", "/api/v1/crawls", "evil.example", guardProfile,
			map[string]string{"Content-Type": "application/json"}, http.StatusMisdirectedRequest, false},
		{"localhost", "GET", "/api/v1/crawls", "localhost:" + port, "", nil, http.StatusOK, false},
		{"127.0.0.1", "GET", "/api/v1/crawls", "127.0.0.1:" + port, "", nil, http.StatusOK, false},
		{"[::1]", "GET", "/api/v1/crawls", "[::1]:" + port, "", nil, http.StatusOK, false},
		{"healthz with any host", "GET", "/healthz", "monitor.internal", "", nil, http.StatusOK, false},
		{"dashboard", "GET", "/", "", "", nil, http.StatusOK, false},
		{"cross-origin json post", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, http.StatusForbidden, false},
		{"cross-origin text/plain post", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain;charset=UTF-8"}, http.StatusForbidden, false},
		{"origin of another port", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Origin": "http://127.0.0.1:1", "Content-Type": "application/json"}, http.StatusForbidden, false},
		{"null origin", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Origin": "null", "Content-Type": "application/json"}, http.StatusForbidden, false},
		{"cross-site fetch metadata", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, http.StatusForbidden, false},
		{"cross-origin cancel", "DELETE", "/api/v1/crawls/x", "", "",
			map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, false},
		{"cross-origin hcf", "POST", "/hcf/1/s/q", "", `{"fp":"/"}`,
			map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, false},
		{"same-origin text/plain post", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Origin": api, "Content-Type": "text/plain"}, http.StatusUnsupportedMediaType, false},
		{"form post without origin", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, false},
		{"dashboard post", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Origin": api, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, http.StatusCreated, true},
		{"curl post", "POST", "/api/v1/crawls", "", guardProfile,
			map[string]string{"Content-Type": "application/json"}, http.StatusCreated, true},
		{"client without content type", "POST", "/api/v1/crawls", "", guardProfile, nil, http.StatusCreated, true},
	}
	created := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := send(t, tt.method, api+tt.path, tt.host, tt.body, tt.hdr)
			if res.StatusCode != tt.want {
				t.Fatalf("%s %s (Host %q, %v) = %d %s, want %d", tt.method, tt.path, tt.host, tt.hdr, res.StatusCode, body, tt.want)
			}
			if tt.want >= 400 && !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Errorf("refusal Content-Type = %q, want a JSON error body", res.Header.Get("Content-Type"))
			}
			if tt.creates {
				created++
			}
			cs, err := m.deps.Profiles.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != created {
				t.Errorf("crawls stored = %d, want %d", len(cs), created)
			}
		})
	}
}

// TestAllowedOrigins lets a configured origin (a proxy's) send state-changing
// requests.
func TestAllowedOrigins(t *testing.T) {
	m := New(Config{Token: "t", AllowedOrigins: []string{"https://crawl.example.org"}}, Deps{})
	tests := []struct {
		origin, host string
		want         bool
	}{
		{"https://crawl.example.org", "10.0.0.5:8080", true},
		{"https://crawl.example.org/", "10.0.0.5:8080", false}, // browsers never send a path
		{"https://evil.example", "10.0.0.5:8080", false},
		{"http://10.0.0.5:8080", "10.0.0.5:8080", true},
		{"http://10.0.0.5", "10.0.0.5:80", true},
		{"https://10.0.0.5", "10.0.0.5:80", false},
		{"null", "10.0.0.5:8080", false},
	}
	for _, tt := range tests {
		if got := m.originAllowed(tt.origin, tt.host); got != tt.want {
			t.Errorf("originAllowed(%q, %q) = %v, want %v", tt.origin, tt.host, got, tt.want)
		}
	}
}

// TestLoginCookie logs in through the form and uses the API with the cookie
// alone; the bearer token keeps working.
func TestLoginCookie(t *testing.T) {
	const token = "s3cret-token"
	m, api := guardServer(t, token)

	res, _ := send(t, "GET", api+"/", "", "", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("GET / without login = %d to %q, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
	}
	res, body := send(t, "GET", api+"/login", "", "", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Fatalf("GET /login = %d, want 200 with the token form", res.StatusCode)
	}
	if res, _ := send(t, "GET", api+"/api/v1/crawls", "", "", map[string]string{"Sec-Fetch-Mode": "cors"}); res.StatusCode != http.StatusUnauthorized ||
		strings.Contains(res.Header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("dashboard fetch without login = %d, WWW-Authenticate %q; want 401 without a Basic challenge (no browser dialog)",
			res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
	form := func(tok string) string { return url.Values{"token": {tok}}.Encode() }
	formHdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if res, _ := send(t, "POST", api+"/login", "", form("wrong"), formHdr); res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Fatalf("login with a wrong token = %d with %d cookies, want 401 and none", res.StatusCode, len(res.Cookies()))
	}
	crossHdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}
	if res, _ := send(t, "POST", api+"/login", "", form(token), crossHdr); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin login = %d, want 403", res.StatusCode)
	}
	res, _ = send(t, "POST", api+"/login", "", form(token), map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": api})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d, want 303", res.StatusCode)
	}
	var c *http.Cookie
	for _, k := range res.Cookies() {
		if k.Name == sessionCookie {
			c = k
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge <= 0 {
		t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/, with a lifetime", c)
	}
	if strings.Contains(c.Value, token) {
		t.Errorf("session cookie %q holds the token itself", c.Value)
	}
	withCookie := func(v string) map[string]string { return map[string]string{"Cookie": sessionCookie + "=" + v} }

	tampered := c.Value[:len(c.Value)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", c.Value[len(c.Value)-1])+1)%16])
	expired := m.sessionValue(time.Now().Add(-time.Minute))
	other := (&MCP{cfg: Config{Token: "another token"}}).sessionValue(time.Now().Add(time.Hour))
	tests := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"cookie", withCookie(c.Value), http.StatusOK},
		{"bearer", map[string]string{"Authorization": "Bearer " + token}, http.StatusOK},
		{"bearer in lower case", map[string]string{"Authorization": "bearer " + token}, http.StatusOK},
		{"BEARER, two spaces", map[string]string{"Authorization": "BEARER  " + token}, http.StatusOK},
		{"bearer with a wrong token", map[string]string{"Authorization": "bearer x" + token}, http.StatusUnauthorized},
		{"basic in lower case", map[string]string{"Authorization": "basic " + basic(token)}, http.StatusOK},
		{"basic user", map[string]string{"Authorization": "Basic " + basic(token)}, http.StatusOK},
		{"nothing", nil, http.StatusUnauthorized},
		{"tampered cookie", withCookie(tampered), http.StatusUnauthorized},
		{"expired cookie", withCookie(expired), http.StatusUnauthorized},
		{"cookie of another token", withCookie(other), http.StatusUnauthorized},
		{"token as cookie", withCookie(token), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		if res, body := send(t, "GET", api+"/api/v1/crawls", "", "", tt.hdr); res.StatusCode != tt.want {
			t.Errorf("%s: GET /api/v1/crawls = %d %s, want %d", tt.name, res.StatusCode, body, tt.want)
		}
	}
	// The cookie creates crawls from the dashboard's own origin, not from another.
	hdr := withCookie(c.Value)
	hdr["Content-Type"], hdr["Origin"] = "application/json", api
	if res, body := send(t, "POST", api+"/api/v1/crawls", "", guardProfile, hdr); res.StatusCode != http.StatusCreated {
		t.Errorf("same-origin POST with the cookie = %d %s, want 201", res.StatusCode, body)
	}
	hdr["Origin"] = "http://evil.example"
	if res, _ := send(t, "POST", api+"/api/v1/crawls", "", guardProfile, hdr); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST with the cookie = %d, want 403", res.StatusCode)
	}
	res, body = send(t, "GET", api+"/", "", "", withCookie(c.Value))
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-login="token"`) || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET / logged in = %d (CSP %q), want the dashboard with its logout button and a CSP", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	res, _ = send(t, "POST", api+"/logout", "", "", withCookie(c.Value))
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].MaxAge >= 0 {
		t.Errorf("logout = %d with cookies %v, want 303 clearing the cookie", res.StatusCode, res.Cookies())
	}
}

func basic(user string) string {
	req, _ := http.NewRequest("GET", "http://x/", nil)
	req.SetBasicAuth(user, "")
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// TestDashboardAssets serves the embedded dashboard without any outside
// reference: no CDN, every script and stylesheet from /ui/.
func TestDashboardAssets(t *testing.T) {
	_, api := guardServer(t, "")
	for _, p := range []string{"/", "/ui/app.js", "/ui/chart.js", "/ui/app.css"} {
		res, body := send(t, "GET", api+p, "", "", nil)
		if res.StatusCode != http.StatusOK || len(body) < 100 {
			t.Errorf("GET %s = %d, %d bytes", p, res.StatusCode, len(body))
		}
		for _, bad := range []string{"http://", "https://cdn", "//cdn", "innerHTML"} {
			if strings.Contains(body, bad) && !(bad == "http://" && strings.Contains(p, ".js")) {
				t.Errorf("GET %s contains %q", p, bad)
			}
		}
	}
}
