package contracts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/contracts/schemas"
)

// goTypes maps each schema, by short name (its file name without
// ".schema.json"), to a constructor of the Go type it describes. A report
// is read with rows of any shape here; TestReportFixturesDecodeIntoRows
// decodes each report's rows into their own type.
var goTypes = map[string]func() any{
	"profile":               func() any { return new(contracts.Profile) },
	"loader_contract":       func() any { return new(contracts.LoaderContract) },
	"crawler_contract":      func() any { return new(contracts.CrawlerContract) },
	"index_contract":        func() any { return new(contracts.IndexContract) },
	"document":              func() any { return new(contracts.Document) },
	"create_crawl_response": func() any { return new(contracts.CreateCrawlResponse) },
	"crawl_status":          func() any { return new(contracts.CrawlStatus) },
	"crawl_list":            func() any { return new(contracts.CrawlList) },
	"search_response":       func() any { return new(contracts.SearchResponse) },
	"error_response":        func() any { return new(contracts.ErrorResponse) },
	"profile_patch":         func() any { return new(contracts.ProfilePatch) },
	"frontier_report":       func() any { return new(contracts.FrontierReport) },
	"url_record":            func() any { return new(contracts.URLRecord) },
	"url_list":              func() any { return new(contracts.CrawlLog) },
	"segment_list":          func() any { return new(contracts.SegmentList) },
	"report":                func() any { return new(contracts.Report[map[string]any]) },
	"timeline":              func() any { return new(contracts.Timeline) },
}

// schemaNames returns the short names of every schema the tests know.
func schemaNames() []string {
	names := make([]string, 0, len(goTypes))
	for name := range goTypes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// shortName turns "v1/profile.schema.json" into "profile".
func shortName(name string) string {
	return strings.TrimSuffix(path.Base(name), ".schema.json")
}

// newCompiler returns a compiler that knows every embedded schema under its
// $id and asserts the standard and the gridcrawl formats, as a service
// validating messages would set it up.
func newCompiler(tb testing.TB) *jsonschema.Compiler {
	tb.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for name, check := range schemas.Formats() {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: check})
	}
	for _, name := range schemas.Names() {
		data, err := schemas.FS.ReadFile(name)
		if err != nil {
			tb.Fatalf("read %s: %v", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			tb.Fatalf("parse %s: %v", name, err)
		}
		if err := c.AddResource(schemas.BaseURL+path.Base(name), doc); err != nil {
			tb.Fatalf("add %s: %v", name, err)
		}
	}
	return c
}

// compileAll compiles every embedded schema, keyed by short name.
func compileAll(tb testing.TB) map[string]*jsonschema.Schema {
	tb.Helper()
	c := newCompiler(tb)
	out := map[string]*jsonschema.Schema{}
	for _, name := range schemas.Names() {
		sch, err := c.Compile(schemas.BaseURL + path.Base(name))
		if err != nil {
			tb.Fatalf("compile %s: %v", name, err)
		}
		out[shortName(name)] = sch
	}
	return out
}

// validateJSON validates raw JSON bytes against sch.
func validateJSON(sch *jsonschema.Schema, data []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("parse instance: %w", err)
	}
	return sch.Validate(inst)
}

// validateValue marshals v and validates the result against sch.
func validateValue(sch *jsonschema.Schema, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("marshal %T: %w", v, err)
	}
	return validateJSON(sch, data)
}

// decodeStrict decodes data into v the way MCP decodes request bodies:
// unknown fields are errors, and so is anything after the JSON value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode %T: data after the JSON value", v)
	}
	return nil
}

// TestSchemaFiles is the meta-test: every schema file compiles, is a draft
// 2020-12 schema whose $id matches its file name, and documents itself.
func TestSchemaFiles(t *testing.T) {
	entries, err := fs.ReadDir(schemas.FS, "v1")
	if err != nil {
		t.Fatalf("read embedded v1: %v", err)
	}
	var listed []string
	for _, e := range entries {
		listed = append(listed, "v1/"+e.Name())
	}
	if diff := cmp.Diff(listed, schemas.Names()); diff != "" {
		t.Errorf("Names() differs from the files in v1 (-files +Names):\n%s", diff)
	}
	var short []string
	for _, name := range schemas.Names() {
		short = append(short, shortName(name))
	}
	if diff := cmp.Diff(schemaNames(), short); diff != "" {
		t.Errorf("schemas differ from the Go types tested (-goTypes +schemas):\n%s", diff)
	}

	c := newCompiler(t)
	for _, name := range schemas.Names() {
		t.Run(shortName(name), func(t *testing.T) {
			if !strings.HasSuffix(name, ".schema.json") {
				t.Errorf("file name %q does not end in .schema.json", name)
			}
			data, err := schemas.FS.ReadFile(name)
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("parse %s: %v", name, err)
			}
			if got, want := doc["$id"], schemas.BaseURL+path.Base(name); got != want {
				t.Errorf("$id = %v, want %q", got, want)
			}
			if got, want := doc["$schema"], "https://json-schema.org/draft/2020-12/schema"; got != want {
				t.Errorf("$schema = %v, want %q", got, want)
			}
			for _, key := range []string{"title", "description"} {
				if s, _ := doc[key].(string); s == "" {
					t.Errorf("%s is missing", key)
				}
			}
			if _, err := c.Compile(schemas.BaseURL + path.Base(name)); err != nil {
				t.Errorf("compile: %v", err)
			}
			checkDescribed(t, "#", doc)
		})
	}
}

// checkDescribed reports every property under s (recursively) that has no
// description.
func checkDescribed(t *testing.T, at string, s map[string]any) {
	t.Helper()
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		ps, ok := p.(map[string]any)
		if !ok {
			t.Errorf("%s/properties/%s is not an object", at, name)
			continue
		}
		if d, _ := ps["description"].(string); d == "" {
			t.Errorf("%s/properties/%s has no description", at, name)
		}
		checkDescribed(t, at+"/properties/"+name, ps)
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if sub, ok := s[key].(map[string]any); ok {
			checkDescribed(t, at+"/"+key, sub)
		}
	}
	defs, _ := s["$defs"].(map[string]any)
	for name, d := range defs {
		if ds, ok := d.(map[string]any); ok {
			checkDescribed(t, at+"/$defs/"+name, ds)
		}
	}
}

// TestSchemaMatchesGoFields checks, for every object a schema describes,
// that its properties are exactly the JSON names of the Go struct's fields,
// and that its required properties are exactly the fields without
// omitempty (the fields Go always writes). Together with the round trip of
// TestGoValuesValidate this keeps Go and the schemas from drifting.
func TestSchemaMatchesGoFields(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		pointer []string // path from the schema root to the object schema
		goValue any
		// notRequired lists fields without omitempty that the schema still
		// lets a sender omit, because they have a default.
		notRequired []string
	}{
		{"profile", "profile", nil, contracts.Profile{}, []string{"max_depth", "politeness"}},
		{"politeness", "profile", []string{"$defs", "politeness"}, contracts.Politeness{}, []string{"min_delay_ms", "max_delay_ms", "delay_factor", "robots"}},
		{"loader contract", "loader_contract", nil, contracts.LoaderContract{}, nil},
		{"loader url", "loader_contract", []string{"$defs", "url"}, contracts.LoaderURL{}, nil},
		{"crawler contract", "crawler_contract", nil, contracts.CrawlerContract{}, nil},
		{"crawler page", "crawler_contract", []string{"$defs", "page"}, contracts.CrawlerPage{}, nil},
		{"rendered page", "crawler_contract", []string{"$defs", "page", "properties", "render"}, contracts.RenderedPage{}, nil},
		{"index contract", "index_contract", nil, contracts.IndexContract{}, nil},
		{"snapshot", "loader_contract", []string{"$defs", "url", "properties", "snapshot"}, contracts.Snapshot{}, nil},
		{"document", "document", nil, contracts.Document{}, nil},
		{"asset ref", "document", []string{"$defs", "asset_ref"}, contracts.AssetRef{}, nil},
		{"create crawl response", "create_crawl_response", nil, contracts.CreateCrawlResponse{}, nil},
		{"crawl status", "crawl_status", nil, contracts.CrawlStatus{}, nil},
		{"crawl list", "crawl_list", nil, contracts.CrawlList{}, nil},
		{"search response", "search_response", nil, contracts.SearchResponse{}, nil},
		{"search hit", "search_response", []string{"$defs", "hit"}, contracts.SearchHit{}, nil},
		{"error response", "error_response", nil, contracts.ErrorResponse{}, nil},
		{"budget", "profile", []string{"$defs", "budget"}, contracts.Budget{}, nil},
		{"budget override", "profile", []string{"$defs", "budget_override"}, contracts.BudgetOverride{}, nil},
		{"render override", "profile", []string{"$defs", "render_override"}, contracts.RenderOverride{}, nil},
		{"profile patch", "profile_patch", nil, contracts.ProfilePatch{}, nil},
		{"recrawl", "profile", []string{"$defs", "recrawl"}, contracts.Recrawl{}, nil},
		{"idempotency", "profile", []string{"$defs", "idempotency"}, contracts.Idempotency{}, nil},
		{"adaptive recrawl", "profile", []string{"$defs", "recrawl", "properties", "adaptive"}, contracts.AdaptiveRecrawl{}, nil},
		{"recrawl status", "crawl_status", []string{"properties", "recrawl"}, contracts.RecrawlStatus{}, nil},
		{"crawl outcome", "crawl_status", []string{"properties", "outcome"}, contracts.CrawlOutcome{}, nil},
		{"politeness patch", "profile_patch", []string{"$defs", "politeness_patch"}, contracts.PolitenessPatch{}, nil},
		{"frontier report", "frontier_report", nil, contracts.FrontierReport{}, nil},
		{"frontier totals", "frontier_report", []string{"$defs", "totals"}, contracts.FrontierTotals{}, nil},
		{"frontier loader", "frontier_report", []string{"$defs", "loader"}, contracts.FrontierLoader{}, nil},
		{"frontier browser", "frontier_report", []string{"$defs", "loader", "properties", "browser"}, contracts.FrontierBrowser{}, nil},
		{"frontier dedup", "frontier_report", []string{"$defs", "loader", "properties", "dedup"}, contracts.FrontierDedup{}, nil},
		{"frontier filed queue", "frontier_report", []string{"$defs", "filed_queue"}, contracts.FrontierFiled{}, nil},
		{"url record", "url_record", nil, contracts.URLRecord{}, []string{"depth", "hops", "referrer", "attempts",
			"http_status", "mime_type", "bytes", "render", "reason", "sitemap", "lastmod", "recrawl", "next_due", "created_at", "history", "warc"}},
		{"url recrawl", "url_record", []string{"$defs", "recrawl"}, contracts.URLRecrawl{}, nil},
		{"url event", "url_record", []string{"$defs", "history_entry"}, contracts.URLEvent{}, nil},
		{"warc ref", "url_record", []string{"$defs", "warc"}, contracts.WARCRef{}, nil},
		{"crawl log", "url_list", nil, contracts.CrawlLog{}, nil},
		{"segment list", "segment_list", nil, contracts.SegmentList{}, nil},
		{"segment", "segment_list", []string{"properties", "segments", "items"}, contracts.Segment{}, nil},
		{"report", "report", nil, contracts.Report[map[string]any]{}, nil},
		{"hosts report row", "report", []string{"$defs", "host_row"}, contracts.HostReportRow{}, nil},
		{"mime types report row", "report", []string{"$defs", "mime_type_row"}, contracts.MIMEReportRow{}, nil},
		{"status codes report row", "report", []string{"$defs", "status_code_row"}, contracts.StatusCodeReportRow{}, nil},
		{"failure reasons report row", "report", []string{"$defs", "failure_reason_row"}, contracts.ReasonReportRow{}, nil},
		{"timeline", "timeline", nil, contracts.Timeline{}, nil},
		{"timeline point", "timeline", []string{"$defs", "point"}, contracts.TimelinePoint{}, nil},
	}
	covered := map[reflect.Type]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := schemas.FS.ReadFile("v1/" + tt.file + ".schema.json")
			if err != nil {
				t.Fatalf("read schema %s: %v", tt.file, err)
			}
			var node any
			if err := json.Unmarshal(data, &node); err != nil {
				t.Fatalf("parse schema %s: %v", tt.file, err)
			}
			for _, key := range tt.pointer {
				m, _ := node.(map[string]any)
				node = m[key]
			}
			obj, ok := node.(map[string]any)
			if !ok {
				t.Fatalf("%s#/%s is not a schema object", tt.file, strings.Join(tt.pointer, "/"))
			}
			if obj["additionalProperties"] != false {
				t.Errorf("additionalProperties = %v, want false (Go decodes with DisallowUnknownFields)", obj["additionalProperties"])
			}
			props, _ := obj["properties"].(map[string]any)
			var schemaProps []string
			for name := range props {
				schemaProps = append(schemaProps, name)
			}
			var schemaRequired []string
			req, _ := obj["required"].([]any)
			for _, r := range req {
				schemaRequired = append(schemaRequired, r.(string))
			}
			goFields, goRequired := jsonFields(reflect.TypeOf(tt.goValue))
			covered[reflect.TypeOf(tt.goValue)] = true
			goRequired = slices.DeleteFunc(goRequired, func(f string) bool { return slices.Contains(tt.notRequired, f) })
			sortStrings := cmp.Options{cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()}
			if diff := cmp.Diff(goFields, schemaProps, sortStrings); diff != "" {
				t.Errorf("properties differ from the Go fields of %T (-go +schema):\n%s", tt.goValue, diff)
			}
			if diff := cmp.Diff(goRequired, schemaRequired, sortStrings); diff != "" {
				t.Errorf("required differs from the Go fields without omitempty of %T (-go +schema):\n%s", tt.goValue, diff)
			}
		})
	}
	// Every struct reachable from a schema's Go type must have a row above.
	for _, mk := range goTypes {
		for _, st := range structsOf(reflect.TypeOf(mk()).Elem()) {
			if !covered[st] {
				t.Errorf("Go struct %v has no schema object in this test", st)
			}
		}
	}
}

// jsonFields returns the JSON names of t's exported fields and those among
// them without omitempty or omitzero (the fields Go always writes).
func jsonFields(t reflect.Type) (names, required []string) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		if o := strings.Split(opts, ","); !slices.Contains(o, "omitempty") && !slices.Contains(o, "omitzero") {
			required = append(required, name)
		}
	}
	return names, required
}

// structsOf returns the struct types of package contracts reachable from t.
func structsOf(t reflect.Type) []reflect.Type {
	seen := map[reflect.Type]bool{}
	var out []reflect.Type
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(t.Elem())
		case reflect.Struct:
			if seen[t] || t.PkgPath() != reflect.TypeFor[contracts.Profile]().PkgPath() {
				return
			}
			seen[t] = true
			out = append(out, t)
			for f := range t.Fields() {
				walk(f.Type)
			}
		}
	}
	walk(t)
	return out
}
