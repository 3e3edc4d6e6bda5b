package mcp

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

// The dashboard is a few static files embedded in the binary: plain HTML,
// CSS and JavaScript modules that call the JSON API from the browser and draw
// their charts as SVG. Nothing is fetched from elsewhere.

//go:embed ui
var uiFiles embed.FS

// uiStatic serves /ui/.
var uiStatic = func() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded directory exists: a build error
	}
	return http.StripPrefix("/ui/", http.FileServerFS(sub))
}()

var loginTmpl = template.Must(template.ParseFS(uiFiles, "ui/login.html"))

// uiCSP keeps the dashboard to its own scripts and styles: even a crawled
// page's text shown by a bug as markup could run nothing.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// handleFuncer is a request multiplexer such as http.ServeMux.
type handleFuncer interface {
	HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request))
}

// uiRoutes adds the dashboard's routes to mux: GET /, GET /ui/ (static
// files), GET and POST /login, POST /logout.
func (m *MCP) uiRoutes(mux handleFuncer) {
	mux.HandleFunc("GET /{$}", m.uiIndex)
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		uiHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		uiStatic.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		if m.cfg.Token == "" || m.validSession(r) {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		m.loginPage(w, http.StatusOK, "")
	})
	mux.HandleFunc("POST /login", m.login)
	mux.HandleFunc("POST /logout", m.logout)
}

// publicUIPath reports whether path is served without authentication: the
// login form and the dashboard's static files, which hold no crawl data.
func publicUIPath(path string) bool {
	return path == "/login" || strings.HasPrefix(path, "/ui/")
}

func uiHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

func (m *MCP) uiIndex(w http.ResponseWriter, _ *http.Request) {
	b, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		http.Error(w, "dashboard missing from the build", http.StatusInternalServerError)
		return
	}
	if m.cfg.Token != "" {
		// The logout button is shown only where there is a login.
		b = bytes.Replace(b, []byte(`data-login="none"`), []byte(`data-login="token"`), 1)
	}
	uiHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func (m *MCP) loginPage(w http.ResponseWriter, code int, msg string) {
	uiHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = loginTmpl.Execute(w, struct{ Error string }{msg})
}
