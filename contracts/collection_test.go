package contracts_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestValidateCollection(t *testing.T) {
	tests := []struct {
		name       string
		collection []string
		ok         bool
	}{
		{"none", nil, true},
		{"one", []string{"user"}, true},
		{"every allowed byte", []string{"AZaz09_-."}, true},
		{"64 bytes", []string{strings.Repeat("a", 64)}, true},
		{"16 names", strings.Split(strings.Repeat("c,", 15)+"c", ","), true},
		{"17 names", strings.Split(strings.Repeat("c,", 16)+"c", ","), false},
		{"65 bytes", []string{strings.Repeat("a", 65)}, false},
		{"empty name", []string{"user", ""}, false},
		{"space", []string{"my docs"}, false},
		{"comma", []string{"a,b"}, false},
		{"colon", []string{"a:b"}, false},
		{"non-ascii letter", []string{"dokumentü"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := validProfile()
			p.Collection = tc.collection
			err := p.Validate()
			if tc.ok {
				if err != nil {
					t.Errorf("Validate(collection %q) = %v, want nil", tc.collection, err)
				}
				return
			}
			var fe *contracts.FieldError
			if !errors.As(err, &fe) || fe.Field != "collection" {
				t.Errorf("Validate(collection %q) = %v, want a FieldError naming collection", tc.collection, err)
			}
		})
	}
}

func TestInlineProfileCountsCollection(t *testing.T) {
	p := validProfile()
	p.UserAgent = ""
	// 2048 bytes of start URL and collections in all fit; one more does not.
	u := "https://example.com/" + strings.Repeat("a", 2048-len("https://example.com/")-16*64)
	p.StartURLs = []string{u}
	for range 16 {
		p.Collection = append(p.Collection, strings.Repeat("c", 64))
	}
	if contracts.InlineProfile(p) == nil {
		t.Errorf("InlineProfile of a profile of exactly %d bytes = nil, want the profile", contracts.MaxInlineProfileBytes)
	}
	p.StartURLs = []string{u + "a"}
	if contracts.InlineProfile(p) != nil {
		t.Errorf("InlineProfile of a profile one byte over %d = the profile, want nil", contracts.MaxInlineProfileBytes)
	}
}

// TestInlineProfileCountsOverrides: 60,000 budget overrides used to be copied
// into every contract of the crawl (2.6 MB each), since InlineProfile did not
// count them. Now Validate refuses more than MaxBudgetOverrides, and a
// profile whose overrides make it large travels by reference.
func TestInlineProfileCountsOverrides(t *testing.T) {
	overrides := func(n int) []contracts.BudgetOverride {
		out := make([]contracts.BudgetOverride, n)
		for i := range out {
			out[i] = contracts.BudgetOverride{Domain: fmt.Sprintf("site%05d.example.org", i), TotalBudget: 10}
		}
		return out
	}
	tests := []struct {
		n          int
		inline     bool
		validField string
	}{
		{0, true, ""},
		{10, true, ""},
		{100, false, ""},
		{contracts.MaxBudgetOverrides, false, ""},
		{contracts.MaxBudgetOverrides + 1, false, "budget.overrides"},
		{60000, false, "budget.overrides"},
	}
	for _, tt := range tests {
		p := validProfile()
		p.Budget = &contracts.Budget{Overrides: overrides(tt.n)}
		if got := contracts.InlineProfile(p) != nil; got != tt.inline {
			t.Errorf("%d overrides: inline = %v, want %v", tt.n, got, tt.inline)
		}
		field := ""
		var fe *contracts.FieldError
		if err := p.Validate(); errors.As(err, &fe) {
			field = fe.Field
		}
		if field != tt.validField {
			t.Errorf("%d overrides: Validate field = %q, want %q", tt.n, field, tt.validField)
		}
	}
}
