package schemas_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts/schemas"
)

func TestNames(t *testing.T) {
	names := schemas.Names()
	if len(names) == 0 {
		t.Fatal("Names() is empty")
	}
	if !slices.IsSorted(names) {
		t.Errorf("Names() = %q, want it sorted", names)
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "v1/") || !strings.HasSuffix(name, ".schema.json") {
			t.Errorf("Names() has %q, want v1/<name>.schema.json", name)
		}
		if _, err := schemas.FS.ReadFile(name); err != nil {
			t.Errorf("FS.ReadFile(%q) = %v", name, err)
		}
	}
	if !slices.Contains(names, "v1/profile.schema.json") {
		t.Errorf("Names() = %q, want it to hold v1/profile.schema.json", names)
	}
}

func TestFormats(t *testing.T) {
	tests := []struct {
		name   string
		format string
		value  any
		ok     bool
	}{
		{"re2 empty", schemas.FormatRE2, "", true},
		{"re2 valid", schemas.FormatRE2, `(?i)^https?://[^/]+/docs/\d+$`, true},
		{"re2 unclosed group", schemas.FormatRE2, "(a", false},
		{"re2 lookahead is not RE2", schemas.FormatRE2, "a(?=b)", false},
		{"re2 ignores numbers", schemas.FormatRE2, 3.0, true},

		{"delay empty object", schemas.FormatDelayRange, map[string]any{}, true},
		{"delay min below max", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": 1, "max_delay_ms": 2}`), true},
		{"delay min equals max", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": 2, "max_delay_ms": 2}`), true},
		{"delay min above max", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": 3, "max_delay_ms": 2}`), false},
		{"delay min above explicit zero max", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": 30000, "max_delay_ms": 0}`), false},
		{"delay zero min and max", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": 0, "max_delay_ms": 0}`), true},
		{"delay absent min above max", schemas.FormatDelayRange, jsonObject(`{"max_delay_ms": 100}`), true},
		{"delay min above absent max", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": 30000}`), true},
		{"delay min above null max", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": 30000, "max_delay_ms": null}`), true},
		{"delay absent min", schemas.FormatDelayRange, jsonObject(`{"max_delay_ms": 5}`), true},
		{"delay float64 values", schemas.FormatDelayRange, map[string]any{"min_delay_ms": 5.0, "max_delay_ms": 4.0}, false},
		{"delay int values", schemas.FormatDelayRange, map[string]any{"min_delay_ms": 5, "max_delay_ms": 4}, false},
		{"delay wrong type left to type keyword", schemas.FormatDelayRange, jsonObject(`{"min_delay_ms": "9", "max_delay_ms": 4}`), true},
		{"delay ignores strings", schemas.FormatDelayRange, "fast", true},
	}
	formats := schemas.Formats()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check, ok := formats[tt.format]
			if !ok {
				t.Fatalf("Formats() has no %q", tt.format)
			}
			v := tt.value
			if text, ok := v.(jsonObject); ok {
				dec := json.NewDecoder(strings.NewReader(string(text)))
				dec.UseNumber()
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					t.Fatalf("decode %s: %v", text, err)
				}
				v = m
			}
			err := check(v)
			if (err == nil) != tt.ok {
				t.Errorf("%s(%v) = %v, want ok = %v", tt.format, v, err, tt.ok)
			}
		})
	}
}

// jsonObject is the text of a JSON object, which the test decodes the way
// JSON Schema validators do, with numbers as json.Number.
type jsonObject string
