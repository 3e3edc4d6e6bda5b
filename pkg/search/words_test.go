package search

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWords(t *testing.T) {
	cases := []struct {
		name, q string
		want    []string
	}{
		{"plain", "hello world", []string{"hello", "world"}},
		{"syntax dropped", `"quoted" (group) -not a:b c*`, []string{"quoted", "group", "not", "a", "b", "c"}},
		{"unicode", "Grüße aus Köln", []string{"Grüße", "aus", "Köln"}},
		{"marks only", "\u0301\u0301", nil},
		{"too long", strings.Repeat("x", MaxTermBytes+1) + " y", []string{"y"}},
		{"empty", "  --  ", nil},
	}
	for _, tc := range cases {
		if got := Words(tc.q); !cmp.Equal(got, tc.want) {
			t.Errorf("Words(%q) = %q, want %q", tc.q, got, tc.want)
		}
	}
	if n := len(Words(strings.Repeat("w ", 100))); n != MaxTerms {
		t.Errorf("Words(100 words) kept %d, want %d", n, MaxTerms)
	}
	if got := Quoted(`a "b`); got != `"a" "b"` {
		t.Errorf("Quoted = %q", got)
	}
}

func FuzzWords(f *testing.F) {
	f.Add(`"a" (b) c*`)
	f.Fuzz(func(t *testing.T, q string) {
		for _, w := range Words(q) {
			if strings.ContainsAny(w, "\"\\ ") || w == "" {
				t.Fatalf("Words(%q) gave %q", q, w)
			}
		}
	})
}
