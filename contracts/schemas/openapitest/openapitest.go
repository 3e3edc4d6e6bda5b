// Package openapitest checks real HTTP answers of MCP against gridcrawl's
// OpenAPI document (schemas.OpenAPI): that the document describes the
// request's path, method and status, the answer's content type and required
// headers, and that a JSON body validates against the response's schema.
// Tests of MCP's routes and the end-to-end tests use it.
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gridcrawl/gridcrawl/contracts/schemas"
)

// docURL is where the document is registered with the schema compiler.
const docURL = "https://gridcrawl.dev/openapi.json"

// Operation is one method of one path of the document.
type Operation struct {
	Method string // upper case, such as "GET"
	Path   string // the document's path template, such as "/api/v1/crawls/{id}"
}

// Doc is the parsed document with a cache of compiled response schemas. It
// is safe for concurrent use.
type Doc struct {
	root     map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// Load parses the embedded document.
func Load() (*Doc, error) {
	var root map[string]any
	if err := json.Unmarshal(schemas.OpenAPI(), &root); err != nil {
		return nil, fmt.Errorf("parse openapi.json: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.OpenAPI()))
	if err != nil {
		return nil, fmt.Errorf("parse openapi.json: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for name, check := range schemas.Formats() {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: check})
	}
	if err := c.AddResource(docURL, inst); err != nil {
		return nil, fmt.Errorf("add openapi.json: %w", err)
	}
	return &Doc{root: root, compiler: c, compiled: map[string]*jsonschema.Schema{}}, nil
}

// Operations returns every operation of the document, sorted by path and
// method.
func (d *Doc) Operations() []Operation {
	var ops []Operation
	for p, item := range d.paths() {
		for m := range item.(map[string]any) {
			if isMethod(m) {
				ops = append(ops, Operation{Method: strings.ToUpper(m), Path: p})
			}
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method)
	})
	return ops
}

func (d *Doc) paths() map[string]any {
	p, _ := d.root["paths"].(map[string]any)
	return p
}

func isMethod(m string) bool {
	return slices.Contains([]string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}, m)
}

// Match returns the document's path template that urlPath is an instance
// of: a template segment "{x}" matches one non-empty segment, and a
// template with more literal segments wins over one with fewer.
func (d *Doc) Match(urlPath string) (string, bool) {
	best, bestLiterals := "", -1
	got := strings.Split(urlPath, "/")
	for tmpl := range d.paths() {
		want := strings.Split(tmpl, "/")
		if len(want) != len(got) {
			continue
		}
		literals, ok := 0, true
		for i, w := range want {
			switch {
			case strings.HasPrefix(w, "{") && strings.HasSuffix(w, "}"):
				ok = ok && got[i] != ""
			case w == got[i]:
				literals++
			default:
				ok = false
			}
		}
		if ok && literals > bestLiterals {
			best, bestLiterals = tmpl, literals
		}
	}
	return best, bestLiterals >= 0
}

// Validate checks one answer: the document must describe the path, the
// method (HEAD as GET) and the status; the answer's content type must be
// one the response describes (or there is no body when it describes none);
// the response's required headers must be there; and a JSON body must
// validate against the response's schema. A 401 or 404 for a path the
// document does not have, and a 401 or 405 for a method it does not give a
// path, are checked against the shared responses Unauthorized, NotFound and
// MethodNotAllowed — or, for a 405, against the 405 the path's other
// operations describe (a path may keep its own error format).
func (d *Doc) Validate(method, urlPath string, status int, header http.Header, body []byte) error {
	tmpl, ok := d.Match(urlPath)
	if !ok {
		switch status {
		case http.StatusUnauthorized:
			return d.check(method, urlPath, status, "#/components/responses/Unauthorized", header, body)
		case http.StatusNotFound:
			return d.check(method, urlPath, status, "#/components/responses/NotFound", header, body)
		}
		return fmt.Errorf("the document has no path matching %s", urlPath)
	}
	m := strings.ToLower(method)
	if m == "head" {
		m = "get"
	}
	item := d.paths()[tmpl].(map[string]any)
	if _, ok := item[m].(map[string]any); !ok {
		switch status {
		case http.StatusUnauthorized:
			return d.check(method, tmpl, status, "#/components/responses/Unauthorized", header, body)
		case http.StatusMethodNotAllowed:
			for _, other := range slices.Sorted(maps.Keys(item)) {
				op, _ := item[other].(map[string]any)
				if r, _ := op["responses"].(map[string]any); isMethod(other) && r["405"] != nil {
					return d.check(method, tmpl, status, "#/paths/"+escape(tmpl)+"/"+other+"/responses/405", header, body)
				}
			}
			return d.check(method, tmpl, status, "#/components/responses/MethodNotAllowed", header, body)
		}
		return fmt.Errorf("the document has no %s %s", method, tmpl)
	}
	return d.check(method, tmpl, status, "#/paths/"+escape(tmpl)+"/"+m+"/responses/"+strconv.Itoa(status), header, body)
}

// check validates an answer against the response at pointer.
func (d *Doc) check(method, tmpl string, status int, pointer string, header http.Header, body []byte) error {
	resp, ok := d.resolve(pointer)
	if !ok {
		return fmt.Errorf("%s %s does not describe status %d", method, tmpl, status)
	}
	if ref, ok := resp["$ref"].(string); ok {
		pointer = ref
		if resp, ok = d.resolve(ref); !ok {
			return fmt.Errorf("%s %s %d: unresolved %s", method, tmpl, status, ref)
		}
	}
	headers, _ := resp["headers"].(map[string]any)
	for name, h := range headers {
		if req, _ := h.(map[string]any)["required"].(bool); req && header.Get(name) == "" {
			return fmt.Errorf("%s %s %d: required header %s is missing", method, tmpl, status, name)
		}
	}
	content, _ := resp["content"].(map[string]any)
	switch {
	case len(content) == 0 && len(body) > 0:
		return fmt.Errorf("%s %s %d: the document describes no body, got %q", method, tmpl, status, body)
	case len(body) == 0 && (len(content) == 0 || method == http.MethodHead || status/100 == 3):
		return nil // no body where one may be left out (a redirect, a HEAD)
	}
	ct := header.Get("Content-Type")
	media, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("%s %s %d: content type %q: %w", method, tmpl, status, ct, err)
	}
	key := ""
	for k := range content {
		if km, _, err := mime.ParseMediaType(k); err == nil && km == media {
			key = k
		}
	}
	if key == "" {
		return fmt.Errorf("%s %s %d: content type %q is not one of the document's %v", method, tmpl, status, ct, keys(content))
	}
	if media != "application/json" {
		return nil
	}
	sch, err := d.schema(pointer + "/content/" + escape(key) + "/schema")
	if err != nil {
		return fmt.Errorf("%s %s %d: %w", method, tmpl, status, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s %d: body is not JSON: %w: %q", method, tmpl, status, err, body)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%s %s %d: body %s: %w", method, tmpl, status, body, err)
	}
	return nil
}

// schema compiles (once) the schema at a pointer of the document.
func (d *Doc) schema(pointer string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.compiled[pointer]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(docURL + pointer)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", pointer, err)
	}
	d.compiled[pointer] = s
	return s, nil
}

func (d *Doc) resolve(ref string) (map[string]any, bool) {
	var node any = d.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, false
		}
		node = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)]
	}
	m, ok := node.(map[string]any)
	return m, ok
}

// escape escapes a JSON pointer token.
func escape(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
