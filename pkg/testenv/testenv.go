// Package testenv tells tests which real backends (RabbitMQ, Elasticsearch,
// MinIO) they may use. A backend is named by its environment variables, as
// scripts/services/up.sh prints them. Where a variable is unset the test is
// skipped, except in CI (CI=true) and with GRIDCRAWL_REQUIRE_BACKENDS=1
// (make test), where it fails: a real backend that cannot start never
// passes silently.
package testenv

import (
	"net"
	"net/url"
	"os"
	"testing"
)

// Required reports whether tests must fail rather than skip when a backend
// is not configured.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("GRIDCRAWL_REQUIRE_BACKENDS") == "1"
}

// Backend returns the values of the environment variables vars, in order.
// If one is unset it skips t, or fails it when backends are Required.
func Backend(t testing.TB, vars ...string) []string {
	t.Helper()
	out := make([]string, len(vars))
	for i, k := range vars {
		v := os.Getenv(k)
		if v == "" {
			if Required() {
				t.Fatalf("%s is not set: the real backends must run here (CI=true or GRIDCRAWL_REQUIRE_BACKENDS=1); start them with scripts/services/up.sh and export what it prints", k)
			}
			t.Skipf("%s is not set; start the backends with scripts/services/up.sh and export what it prints", k)
		}
		out[i] = v
	}
	return out
}

// Unavailable skips t because something a backend test needs (a tool, a
// directory) is missing, or fails it when backends are Required: in CI a
// test that cannot run is a failure, never a silent skip.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format+" (backends are required here: CI=true or GRIDCRAWL_REQUIRE_BACKENDS=1)", args...)
	}
	t.Skipf(format, args...)
}

// LoopbackURL returns the URL in the environment variable name, as Backend
// does, and fails t when it is not on loopback: tests only talk to this
// machine.
func LoopbackURL(t testing.TB, name string) string {
	t.Helper()
	raw := Backend(t, name)[0]
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s %q: %v", name, raw, err)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Fatalf("%s %q is not on loopback; tests only talk to loopback", name, raw)
	}
	return raw
}
