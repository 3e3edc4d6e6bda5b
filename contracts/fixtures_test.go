package contracts_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// invalidProfiles records, for every fixture in testdata/invalid/profile,
// the field that Profile.Validate must name, or "" when strict decoding
// must already reject the body.
var invalidProfiles = map[string]string{
	"bad_robots.json":                        "politeness.robots",
	"bad_scope.json":                         "scope",
	"crawl_must_match_bad_regex.json":        "crawl_must_match",
	"dedupe_unknown.json":                    "dedupe",
	"dedupe_upper_case.json":                 "dedupe",
	"delay_factor_over_1000.json":            "politeness.delay_factor",
	"empty_start_urls.json":                  "start_urls",
	"ftp_scheme_start_url.json":              "start_urls[0]",
	"index_must_not_match_bad_regex.json":    "index_must_not_match",
	"mailto_second_start_url.json":           "start_urls[1]",
	"max_delay_over_one_hour.json":           "politeness.max_delay_ms",
	"max_depth_101.json":                     "max_depth",
	"min_delay_above_explicit_zero_max.json": "politeness.max_delay_ms",
	"min_delay_greater_than_max_delay.json":  "politeness.max_delay_ms",
	"missing_start_urls.json":                "start_urls",
	"negative_delay_factor.json":             "politeness.delay_factor",
	"negative_max_depth.json":                "max_depth",
	"negative_max_pages.json":                "max_pages",
	"negative_max_pages_per_host.json":       "max_pages_per_host",
	"negative_min_delay.json":                "politeness.min_delay_ms",
	"negative_priority.json":                 "priority",
	"null_start_urls.json":                   "start_urls",
	"priority_10.json":                       "priority",
	"relative_start_url.json":                "start_urls[0]",
	"render_override_domain_only_dots.json":  "render_overrides[0].domain",
	"render_override_domain_with_port.json":  "render_overrides[1].domain",
	"render_override_empty_render.json":      "render_overrides[0].render",
	"render_robots_unknown.json":             "render_robots",
	"render_unknown.json":                    "render",
	"render_upper_case.json":                 "render",
	"start_url_bad_escape.json":              "start_urls[0]",
	"start_url_without_host.json":            "start_urls[0]",
	"unknown_field_depth.json":               "",
	"unknown_politeness_field.json":          "",
	"unknown_render_override_field.json":     "",
	"user_agent_with_newline.json":           "user_agent",
	"user_agent_with_nul.json":               "user_agent",
	"wrong_type_array_not_object.json":       "",
	"wrong_type_delay_factor_string.json":    "",
	"wrong_type_hold_queues_string.json":     "",
	"wrong_type_max_depth_fraction.json":     "",
	"wrong_type_max_depth_string.json":       "",
	"wrong_type_politeness_string.json":      "",
	"wrong_type_start_url_number.json":       "",
	"wrong_type_start_urls_string.json":      "",
}

// fixtures returns the JSON files of testdata/<kind>/<schema>, by file name.
func fixtures(t *testing.T, kind, schema string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", kind, schema, "*.json"))
	if err != nil {
		t.Fatalf("glob fixtures: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read fixture: %v", err)
		}
		out[filepath.Base(p)] = data
	}
	return out
}

func TestFixtureDirectories(t *testing.T) {
	for _, kind := range []string{"valid", "invalid"} {
		entries, err := os.ReadDir(filepath.Join("testdata", kind))
		if err != nil {
			t.Fatalf("read testdata/%s: %v", kind, err)
		}
		var dirs []string
		for _, e := range entries {
			dirs = append(dirs, e.Name())
			if _, ok := goTypes[e.Name()]; !ok {
				t.Errorf("testdata/%s/%s names no schema", kind, e.Name())
			}
		}
		for _, name := range schemaNames() {
			if !slices.Contains(dirs, name) {
				t.Errorf("testdata/%s has no fixtures for schema %s", kind, name)
			}
		}
	}
	invalid := fixtures(t, "invalid", "profile")
	if len(invalid) < 12 {
		t.Errorf("testdata/invalid/profile has %d fixtures, want at least 12", len(invalid))
	}
	for name := range invalid {
		if _, ok := invalidProfiles[name]; !ok {
			t.Errorf("testdata/invalid/profile/%s has no expected field in invalidProfiles", name)
		}
	}
	for name := range invalidProfiles {
		if _, ok := invalid[name]; !ok {
			t.Errorf("invalidProfiles names %s, which is not in testdata/invalid/profile", name)
		}
	}
}

// TestValidFixtures checks that every valid fixture passes its schema,
// decodes strictly into its Go type and, for profiles, passes
// WithDefaults().Validate() — and that the defaulted profile still passes
// the schema, as it does inside contracts.
func TestValidFixtures(t *testing.T) {
	compiled := compileAll(t)
	for _, schema := range schemaNames() {
		sch := compiled[schema]
		for name, data := range fixtures(t, "valid", schema) {
			t.Run(schema+"/"+strings.TrimSuffix(name, ".json"), func(t *testing.T) {
				if err := validateJSON(sch, data); err != nil {
					t.Errorf("schema rejects valid fixture: %v", err)
				}
				v := goTypes[schema]()
				if err := decodeStrict(data, v); err != nil {
					t.Fatalf("Go rejects valid fixture: %v", err)
				}
				p, ok := v.(*contracts.Profile)
				if !ok {
					return
				}
				d := p.WithDefaults()
				if err := d.Validate(); err != nil {
					t.Errorf("WithDefaults().Validate() = %v, want nil", err)
				}
				if err := validateValue(sch, d); err != nil {
					t.Errorf("schema rejects the defaulted profile %+v: %v", d, err)
				}
			})
		}
	}
}

// TestInvalidFixtures checks that every invalid fixture fails its schema
// and, for profiles, the Go path too, on the expected field.
func TestInvalidFixtures(t *testing.T) {
	compiled := compileAll(t)
	for _, schema := range schemaNames() {
		sch := compiled[schema]
		for name, data := range fixtures(t, "invalid", schema) {
			t.Run(schema+"/"+strings.TrimSuffix(name, ".json"), func(t *testing.T) {
				if err := validateJSON(sch, data); err == nil {
					t.Errorf("schema accepts invalid fixture %s", data)
				}
				if schema != "profile" {
					return
				}
				wantField, ok := invalidProfiles[name]
				if !ok {
					t.Fatalf("no expected field recorded for %s", name)
				}
				var p contracts.Profile
				if err := decodeStrict(data, &p); err != nil {
					if wantField != "" {
						t.Errorf("decode error %v, want it to decode and fail Validate on %q", err, wantField)
					}
					return
				}
				if wantField == "" {
					t.Fatalf("decodes into %+v, want a decode error", p)
				}
				err := p.WithDefaults().Validate()
				var fe *contracts.FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("Validate(%+v) = %v, want a *FieldError on %q", p.WithDefaults(), err, wantField)
				}
				if fe.Field != wantField {
					t.Errorf("Validate(%+v) field = %q, want %q", p.WithDefaults(), fe.Field, wantField)
				}
			})
		}
	}
}
