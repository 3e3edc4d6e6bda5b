package testenv

import (
	"testing"
)

func TestBackendReturnsValues(t *testing.T) {
	t.Setenv("GRIDCRAWL_TESTENV_A", "a")
	t.Setenv("GRIDCRAWL_TESTENV_B", "b")
	got := Backend(t, "GRIDCRAWL_TESTENV_A", "GRIDCRAWL_TESTENV_B")
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("Backend() = %q, want [a b]", got)
	}
}

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		ci, require string
		want        bool
	}{{"", "", false}, {"true", "", true}, {"", "1", true}, {"false", "0", false}} {
		t.Setenv("CI", tc.ci)
		t.Setenv("GRIDCRAWL_REQUIRE_BACKENDS", tc.require)
		if got := Required(); got != tc.want {
			t.Errorf("Required() with CI=%q GRIDCRAWL_REQUIRE_BACKENDS=%q = %v, want %v", tc.ci, tc.require, got, tc.want)
		}
	}
}
