package contracts_test

import (
	"errors"
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
