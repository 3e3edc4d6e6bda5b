// Package schemas embeds the versioned JSON Schemas (draft 2020-12) of
// gridcrawl's queue messages and API bodies. They mirror the Go types of
// package contracts, which stay the source of truth; the tests of package
// contracts keep the two from drifting.
//
// Every schema's $id is BaseURL followed by its file name, and schemas refer
// to each other by relative references ("profile.schema.json"), so a
// validator must be given all of them. Besides the standard formats ("uri",
// "date-time"), the schemas use the custom formats listed by Formats; a
// validator that does not know them ignores them, one that registers them
// also checks the rules of contracts.Profile.Validate that standard keywords
// cannot express: regular expression syntax and min_delay_ms <= max_delay_ms.
package schemas

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
)

// FS holds the schemas, as "v1/<name>.schema.json", and the OpenAPI
// document, as "openapi.json".
//
//go:embed v1/*.json openapi.json
var FS embed.FS

//go:generate go test -run TestOpenAPIDocument -update

// OpenAPI returns the OpenAPI 3.1 document of MCP's HTTP API, served at
// GET /api/v1/openapi.json. It is generated (go generate) from
// openapi.src.json, which describes the paths, and the schemas of v1, which
// it holds under components/schemas by their short names ("profile" for
// v1/profile.schema.json) with references rewritten to point inside the
// document; a test keeps it up to date.
func OpenAPI() []byte {
	b, err := FS.ReadFile("openapi.json")
	if err != nil {
		// The file is embedded at build time, so reading it cannot fail.
		panic(fmt.Sprintf("read embedded openapi.json: %v", err))
	}
	return b
}

// BaseURL is the URL that the $id of every version 1 schema starts with.
const BaseURL = "https://gridcrawl.dev/schemas/v1/"

// Names of the custom formats the schemas use.
const (
	// FormatRE2 marks a string that must compile as a Go (RE2) regular
	// expression, like the filters of contracts.Profile.
	FormatRE2 = "gridcrawl-re2"
	// FormatDelayRange marks a politeness object whose min_delay_ms must not
	// exceed its max_delay_ms once defaults are applied. Defaults apply field
	// by field and never contradict the other field (an absent max_delay_ms
	// is at least min_delay_ms, an absent min_delay_ms at most
	// max_delay_ms), so only two given values, 0 included, can be wrong.
	FormatDelayRange = "gridcrawl-delay-range"
	// FormatSitemapDepth marks a profile whose sitemap_depth must not
	// exceed its max_depth (3 when absent).
	FormatSitemapDepth = "gridcrawl-sitemap-depth"
)

// Names returns the paths of the schemas in FS, sorted, such as
// "v1/profile.schema.json".
func Names() []string {
	names, err := fs.Glob(FS, "v1/*.json")
	if err != nil {
		// The pattern is constant and valid, so Glob cannot fail.
		panic(fmt.Sprintf("glob embedded schemas: %v", err))
	}
	return names
}

// Formats returns the check of every custom format the schemas use, keyed by
// format name, for registration with a JSON Schema validator (for
// github.com/santhosh-tekuri/jsonschema/v6: RegisterFormat with a Format of
// that name and check, plus AssertFormat). A check is given a decoded JSON
// value (numbers as float64 or json.Number) and returns nil for values of a
// type it does not constrain.
func Formats() map[string]func(v any) error {
	return map[string]func(v any) error{
		FormatRE2:          checkRE2,
		FormatDelayRange:   checkDelayRange,
		FormatSitemapDepth: checkSitemapDepth,
	}
}

func checkSitemapDepth(v any) error {
	obj, ok := v.(map[string]any)
	if !ok || obj["sitemap_depth"] == nil {
		return nil
	}
	d, okD := number(obj["sitemap_depth"])
	maxDepth := float64(3) // contracts.DefaultMaxDepth; this package imports no contracts
	if obj["max_depth"] != nil {
		var okM bool
		if maxDepth, okM = number(obj["max_depth"]); !okM {
			return nil
		}
	}
	if !okD || d <= maxDepth {
		return nil // wrong types fail other keywords
	}
	return fmt.Errorf("sitemap_depth %v is greater than max_depth %v", d, maxDepth)
}

func checkRE2(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if _, err := regexp.Compile(s); err != nil {
		return fmt.Errorf("compile regular expression: %w", err)
	}
	return nil
}

func checkDelayRange(v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if obj["min_delay_ms"] == nil || obj["max_delay_ms"] == nil {
		return nil // absent or null: defaulted to agree with the other
	}
	lo, okLo := number(obj["min_delay_ms"])
	hi, okHi := number(obj["max_delay_ms"])
	if !okLo || !okHi {
		return nil // wrong types and out-of-range numbers fail other keywords
	}
	if lo <= hi {
		return nil
	}
	return fmt.Errorf("min_delay_ms %v is greater than max_delay_ms %v", lo, hi)
}

// number returns v as a float64. Float comparison is exact for every value
// the schema's bounds allow.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	default:
		return 0, false
	}
}
