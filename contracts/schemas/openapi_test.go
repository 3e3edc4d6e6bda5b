package schemas_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts/schemas"
)

var update = flag.Bool("update", false, "rewrite openapi.json from openapi.src.json and the schemas in v1")

// buildOpenAPI makes the OpenAPI document: openapi.src.json (paths,
// parameters, responses, security schemes and the schemas of bodies that
// are not gridcrawl contracts) with every schema of v1 added under
// components/schemas by its short name. The schemas lose $id and $schema
// (the document's jsonSchemaDialect is theirs) and their references become
// references inside the document, so that OpenAPI tools need no other file.
func buildOpenAPI() ([]byte, error) {
	src, err := os.ReadFile("openapi.src.json")
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	var doc map[string]any
	if err := decodeNumbers(src, &doc); err != nil {
		return nil, fmt.Errorf("parse openapi.src.json: %w", err)
	}
	components, _ := doc["components"].(map[string]any)
	if components == nil {
		return nil, fmt.Errorf("openapi.src.json has no components")
	}
	comps, _ := components["schemas"].(map[string]any)
	if comps == nil {
		return nil, fmt.Errorf("openapi.src.json has no components/schemas")
	}
	for _, name := range schemas.Names() {
		data, err := schemas.FS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		var s map[string]any
		if err := decodeNumbers(data, &s); err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		short := strings.TrimSuffix(path.Base(name), ".schema.json")
		if _, ok := comps[short]; ok {
			return nil, fmt.Errorf("openapi.src.json defines schema %q, which is the name of %s", short, name)
		}
		delete(s, "$id")
		delete(s, "$schema")
		comps[short] = rewriteRefs(short, s)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode document: %w", err)
	}
	return buf.Bytes(), nil
}

func decodeNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// rewriteRefs turns the references of schema file short into references
// inside the document: "#/$defs/x" into "#/components/schemas/short/$defs/x"
// and "other.schema.json#/$defs/x" into "#/components/schemas/other/$defs/x".
func rewriteRefs(short string, v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if r, ok := sub.(string); ok && k == "$ref" {
				file, frag, _ := strings.Cut(r, "#")
				target := short
				if file != "" {
					target = strings.TrimSuffix(file, ".schema.json")
				}
				v[k] = "#/components/schemas/" + target + frag
				continue
			}
			v[k] = rewriteRefs(short, sub)
		}
	case []any:
		for i, sub := range v {
			v[i] = rewriteRefs(short, sub)
		}
	}
	return v
}

// TestOpenAPIDocument checks that openapi.json, the document MCP serves, is
// what openapi.src.json and the schemas make (go generate, or go test -run
// TestOpenAPIDocument -update, rewrites it), and that the embedded copy is
// that file.
func TestOpenAPIDocument(t *testing.T) {
	want, err := buildOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("openapi.json is stale: run go generate ./contracts/schemas (-built +file):\n%s", diff)
	}
	if !*update && !bytes.Equal(schemas.OpenAPI(), got) {
		t.Errorf("OpenAPI() differs from openapi.json")
	}
}

// TestOpenAPIReferences checks that every $ref of the document points at a
// node of it, that operation ids are unique and that every operation
// answers with described responses.
func TestOpenAPIReferences(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(schemas.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	var refs []string
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if r, ok := sub.(string); ok && k == "$ref" {
					refs = append(refs, r)
					if _, err := resolvePointer(doc, r); err != nil {
						t.Errorf("%s: $ref %q: %v", at, r, err)
					}
					continue
				}
				walk(at+"/"+k, sub)
			}
		case []any:
			for i, sub := range v {
				walk(fmt.Sprintf("%s/%d", at, i), sub)
			}
		}
	}
	walk("#", doc)
	if len(refs) < 50 {
		t.Errorf("found %d references, want the document to reuse its schemas and responses", len(refs))
	}
	ids := map[string]string{}
	paths, _ := doc["paths"].(map[string]any)
	for p, item := range paths {
		for method, o := range item.(map[string]any) {
			if !slices.Contains([]string{"get", "put", "post", "delete", "patch", "head", "options"}, method) {
				continue
			}
			op := o.(map[string]any)
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s %s has no operationId", method, p)
			} else if prev, ok := ids[id]; ok {
				t.Errorf("operationId %q of %s %s is also %s's", id, method, p, prev)
			}
			ids[id] = method + " " + p
			responses, _ := op["responses"].(map[string]any)
			if len(responses) == 0 {
				t.Errorf("%s %s has no responses", method, p)
			}
			if _, ok := responses["405"]; !ok {
				t.Errorf("%s %s does not describe 405", method, p)
			}
		}
	}
}

// resolvePointer returns the node a local reference "#/a/b" points at.
func resolvePointer(doc any, ref string) (any, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("not a local reference")
	}
	node := doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q is not an object", tok)
		}
		if node, ok = m[tok]; !ok {
			return nil, fmt.Errorf("no %q", tok)
		}
	}
	return node, nil
}
