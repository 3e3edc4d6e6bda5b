package mcp

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestWholeNumber(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"exponent", "1e6", "1000000"},
		{"upper exponent with plus", "1E+3", "1000"},
		{"fraction zero", "20.0", "20"},
		{"negative", "-2.5e1", "-25"},
		{"zero fraction", "0.0", "0"},
		{"negative exponent whole", "1500e-3", ""},
		{"negative exponent whole number", "2500e-2", "25"},
		{"fraction", "1.5", ""},
		{"small", "1e-7", ""},
		{"zero with negative exponent", "0e-5", "0"},
		{"forty digits", "1e39", "1" + strings.Repeat("0", 39)},
		{"too many digits", "1e41", ""},
		{"huge exponent", "1e999999999", ""},
		{"long fraction of zeros", "7." + strings.Repeat("0", 100), "7"},
		{"long fraction not whole", "7." + strings.Repeat("0", 100) + "1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := wholeNumber(tc.in); got != tc.want {
				t.Errorf("wholeNumber(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestDecodeWholeNumbers checks that integer fields of profiles and patches
// take whole numbers in any JSON notation.
func TestDecodeWholeNumbers(t *testing.T) {
	p, err := decodeBody[contracts.Profile](strings.NewReader(`{"start_urls":["https://a.test/"],"max_pages":1e6,"max_depth":3.0,"politeness":{"min_delay_ms":2.5e3,"delay_factor":1.5},"budget":{"overrides":[{"domain":"a.test","total_budget":4E2}]}}`), maxProfileBytes)
	if err != nil {
		t.Fatalf("decode profile: %v", err)
	}
	if p.MaxPages != 1000000 || p.MaxDepth != 3 || p.Politeness.MinDelayMS != 2500 || p.Politeness.DelayFactor != 1.5 || p.Budget.Overrides[0].TotalBudget != 400 {
		t.Errorf("decoded max_pages %d, max_depth %d, min_delay_ms %d, delay_factor %v, total_budget %d; want 1000000, 3, 2500, 1.5, 400",
			p.MaxPages, p.MaxDepth, p.Politeness.MinDelayMS, p.Politeness.DelayFactor, p.Budget.Overrides[0].TotalBudget)
	}
	patch, err := decodeBody[contracts.ProfilePatch](strings.NewReader(`{"politeness":{"min_delay_ms":7e2}}`), maxPatchBytes)
	if err != nil {
		t.Fatalf("decode patch: %v", err)
	}
	if patch.Politeness == nil || patch.Politeness.MinDelayMS == nil || *patch.Politeness.MinDelayMS != 700 {
		t.Errorf("decoded patch politeness %+v, want min_delay_ms 700", patch.Politeness)
	}
}

// FuzzWholeNumber checks wholeNumber against exact rational arithmetic: an
// answer is the number's value, and no whole number of a few digits is
// missed.
func FuzzWholeNumber(f *testing.F) {
	for _, s := range []string{"1e6", "20.0", "-2.5e1", "1.5", "0e-5", "1e41", "7.000", "1E+3", "12", "-0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n string) {
		var v any
		if len(n) > 60 || n != strings.TrimSpace(n) || json.Unmarshal([]byte(n), &v) != nil {
			return
		}
		if _, ok := v.(float64); !ok {
			return
		}
		if i := strings.IndexAny(n, "eE"); i >= 0 {
			if e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+")); err != nil || e > 100 || e < -100 {
				return // big.Rat would build a huge power of ten
			}
		}
		r, ok := new(big.Rat).SetString(n)
		if !ok {
			t.Fatalf("big.Rat cannot read JSON number %q", n)
		}
		w := wholeNumber(n)
		switch {
		case w != "":
			wr, ok := new(big.Rat).SetString(w)
			if !ok || wr.Cmp(r) != 0 || strings.ContainsAny(w, ".eE") {
				t.Errorf("wholeNumber(%q) = %q, not its value", n, w)
			}
		case r.IsInt() && len(r.Num().String()) <= maxWholeDigits:
			t.Errorf("wholeNumber(%q) = \"\", want %s", n, r.Num())
		}
	})
}
