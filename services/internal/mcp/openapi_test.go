package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts/schemas"
	"github.com/gridcrawl/gridcrawl/contracts/schemas/openapitest"
)

// pendingRoutes are operations the OpenAPI document describes whose
// handlers are built on other branches of issue 11 and not merged here.
// The test fails once such a route is registered: then delete its line.
var pendingRoutes = map[string]string{}

// routeOperation turns a ServeMux pattern into the method and the OpenAPI
// path it serves: "{$}" (exactly this path) is dropped, "{rest...}" becomes
// "{rest}", and a subtree "/ui/" becomes "/ui/{path}". A pattern without a
// method has method "*": its handler checks the method itself.
func routeOperation(pattern string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "*", pattern
	}
	switch {
	case strings.HasSuffix(path, "/{$}"):
		path = strings.TrimSuffix(path, "{$}")
	case strings.HasSuffix(path, "/"):
		path += "{path}"
	}
	path = strings.ReplaceAll(path, "...}", "}")
	return method, path
}

// TestOpenAPIDescribesEveryRoute checks the document against the routes
// MCP registers (read from its router, not from a list kept by hand): every
// route is described, and every described operation is routed.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	docMethods := map[string][]string{} // path → methods
	for _, op := range doc.Operations() {
		documented[op.Method+" "+op.Path] = true
		docMethods[op.Path] = append(docMethods[op.Path], op.Method)
	}
	patterns := New(Config{}, Deps{}).routes().Patterns()
	if len(patterns) < 20 {
		t.Fatalf("the router lists %d patterns, want every route: %q", len(patterns), patterns)
	}
	routed := map[string]bool{}
	for _, p := range patterns {
		method, path := routeOperation(p)
		if method == "*" {
			if len(docMethods[path]) == 0 {
				t.Errorf("route %q (any method) is not in the OpenAPI document", p)
			}
			for _, m := range docMethods[path] {
				routed[m+" "+path] = true
			}
			continue
		}
		routed[method+" "+path] = true
		if !documented[method+" "+path] {
			t.Errorf("route %q is not in the OpenAPI document as %s %s", p, method, path)
		}
	}
	for op := range documented {
		_, pending := pendingRoutes[op]
		switch {
		case routed[op] && pending:
			t.Errorf("%s is routed now: delete it from pendingRoutes", op)
		case !routed[op] && !pending:
			t.Errorf("the OpenAPI document describes %s, which MCP does not route", op)
		}
	}
	for op := range pendingRoutes {
		if !documented[op] {
			t.Errorf("pendingRoutes has %s, which the document does not describe", op)
		}
	}
}

// TestDocumentedOperationsAreServed sends a request for every operation of
// the document and checks that the router serves it: no "no endpoint" 404
// and no 405 for a method the document gives the path.
func TestDocumentedOperationsAreServed(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	l := newLifecycleMCP(t, lifecycleConfig())
	base := strings.TrimSuffix(l.api, "/api/v1/crawls")
	// Redirects are answers to check, not to follow.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fill := strings.NewReplacer("{id}", "nope", "{name}", "hosts", "{project}", "p", "{frontier}", "f", "{slot}", "s")
	for _, op := range doc.Operations() {
		if _, pending := pendingRoutes[op.Method+" "+op.Path]; pending {
			continue
		}
		t.Run(op.Method+" "+op.Path, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), op.Method, base+fill.Replace(op.Path), strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(body, &e)
			if resp.StatusCode == http.StatusMethodNotAllowed || strings.HasPrefix(e.Error, "no endpoint at ") {
				t.Errorf("%s %s = %d %s: not routed", op.Method, op.Path, resp.StatusCode, body)
			}
			if err := doc.Validate(op.Method, fill.Replace(op.Path), resp.StatusCode, resp.Header, body); err != nil {
				t.Errorf("the answer is not one the document describes: %v", err)
			}
		})
	}
}

// TestServeOpenAPI checks that GET /api/v1/openapi.json serves the
// embedded document unchanged.
func TestServeOpenAPI(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	resp, err := http.Get(strings.TrimSuffix(l.api, "/api/v1/crawls") + openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET %s = %d %q, want 200 application/json", openAPIPath, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !slices.Equal(body, schemas.OpenAPI()) {
		t.Errorf("GET %s served %d bytes that differ from the embedded document", openAPIPath, len(body))
	}
}
