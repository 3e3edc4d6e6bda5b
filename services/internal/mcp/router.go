package mcp

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// router is the API's request multiplexer: an http.ServeMux that keeps the
// patterns registered with it, so that tests can check the OpenAPI document
// against the routes actually served, and that answers a path it does not
// serve (404) and a method a path does not take (405, with the Allow header
// ServeMux computes) with JSON error bodies instead of ServeMux's text.
type router struct {
	mux      *http.ServeMux
	patterns []string
}

func newRouter() *router { return &router{mux: http.NewServeMux()} }

// Handle registers h for pattern.
func (rt *router) Handle(pattern string, h http.Handler) {
	rt.mux.Handle(pattern, h)
	rt.patterns = append(rt.patterns, pattern)
}

// HandleFunc registers f for pattern.
func (rt *router) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	rt.Handle(pattern, http.HandlerFunc(f))
}

// Patterns returns the registered patterns, sorted, such as
// "GET /api/v1/crawls/{id}".
func (rt *router) Patterns() []string {
	return slices.Sorted(slices.Values(rt.patterns))
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := rt.mux.Handler(r)
	if pattern != "" {
		rt.mux.ServeHTTP(w, r) // sets the path values h reads
		return
	}
	// No pattern: ServeMux's "not found" or "method not allowed" answer.
	h.ServeHTTP(&jsonMuxErrors{ResponseWriter: w, r: r}, r)
}

// jsonMuxErrors turns ServeMux's text answers for an unknown path or a
// wrong method into JSON error bodies, keeping their status and headers.
type jsonMuxErrors struct {
	http.ResponseWriter
	r *http.Request
	// written is set once the status is written; replaced once the JSON
	// body replaced ServeMux's text, whose writes are then dropped.
	written, replaced bool
}

func (j *jsonMuxErrors) WriteHeader(code int) {
	if j.written {
		return
	}
	j.written = true
	h := j.Header()
	var msg string
	switch code {
	case http.StatusNotFound:
		msg = fmt.Sprintf("no endpoint at %s (the API is described at %s)", j.r.URL.Path, openAPIPath)
	case http.StatusMethodNotAllowed:
		msg = fmt.Sprintf("method %s is not allowed on %s: use %s", j.r.Method, j.r.URL.Path, h.Get("Allow"))
	default:
		j.ResponseWriter.WriteHeader(code)
		return
	}
	j.replaced = true
	h.Del("X-Content-Type-Options")
	jsonapi.Error(j.ResponseWriter, code, msg, "")
}

// Write drops ServeMux's text body once WriteHeader wrote the JSON one.
func (j *jsonMuxErrors) Write(b []byte) (int, error) {
	if !j.written {
		j.WriteHeader(http.StatusOK)
	}
	if j.replaced {
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}
