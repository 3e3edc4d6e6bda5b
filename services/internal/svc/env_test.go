package svc

import (
	"bytes"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// envSections has two sections with fields of the same Go name (as the
// loader's and the crawler's configurations do), each read from its own
// variable.
type envSections struct {
	Common
	Loader struct {
		Workers int           `env:"GRIDCRAWL_TEST_LOADER_WORKERS" envDefault:"4"`
		Timeout time.Duration `env:"GRIDCRAWL_TEST_TIMEOUT" envDefault:"1s"`
	}
	Crawler struct {
		Workers int     `env:"GRIDCRAWL_TEST_CRAWLER_WORKERS" envDefault:"4"`
		Secure  bool    `env:"GRIDCRAWL_TEST_SECURE"`
		Ratio   float64 `env:"GRIDCRAWL_TEST_RATIO"`
		Small   uint8   `env:"GRIDCRAWL_TEST_SMALL"`
	}
	// A variable in a syntax of its own, as the loader's section has it.
	AllowNets string `env:"GRIDCRAWL_ALLOW_NETS"`
}

// TestParseEnvAllowNets: allowed networks in every form ParseNets takes
// are read as given.
func TestParseEnvAllowNets(t *testing.T) {
	t.Setenv("GRIDCRAWL_ALLOW_NETS", "loopback, private,10.1.0.0/16,::1")
	var cfg envSections
	if err := ParseEnv(&cfg); err != nil || cfg.AllowNets != "loopback, private,10.1.0.0/16,::1" {
		t.Errorf("ParseEnv = %v, allow nets %q; want no error, the value as given", err, cfg.AllowNets)
	}
}

// TestParseEnv: an invalid value is reported by its variable and value
// (every invalid one), never by the Go field it was meant for.
func TestParseEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // the error's lines; nil: no error
	}{
		{"valid", map[string]string{"GRIDCRAWL_TEST_CRAWLER_WORKERS": "8", "GRIDCRAWL_TEST_TIMEOUT": "2m"}, nil},
		{"second field of a name", map[string]string{"GRIDCRAWL_TEST_CRAWLER_WORKERS": "many"},
			[]string{`GRIDCRAWL_TEST_CRAWLER_WORKERS="many": not a whole number`}},
		{"first field of a name", map[string]string{"GRIDCRAWL_TEST_LOADER_WORKERS": "1.5"},
			[]string{`GRIDCRAWL_TEST_LOADER_WORKERS="1.5": not a whole number`}},
		{"several", map[string]string{"GRIDCRAWL_TEST_TIMEOUT": "10", "GRIDCRAWL_TEST_SECURE": "yes", "GRIDCRAWL_TEST_RATIO": "half"}, []string{
			`GRIDCRAWL_TEST_TIMEOUT="10": not a duration (such as 500ms, 30s, 10m, 1h)`,
			`GRIDCRAWL_TEST_SECURE="yes": not a boolean (true or false, 1 or 0)`,
			`GRIDCRAWL_TEST_RATIO="half": not a number`}},
		{"out of range", map[string]string{"GRIDCRAWL_TEST_SMALL": "300"}, []string{`GRIDCRAWL_TEST_SMALL="300": out of range (a uint8)`}},
		{"negative unsigned", map[string]string{"GRIDCRAWL_TEST_SMALL": "-1"}, []string{`GRIDCRAWL_TEST_SMALL="-1": not a whole number of at least 0`}},
		{"a real section", map[string]string{"GRIDCRAWL_QUEUE_MAX_ATTEMPTS": "five"}, []string{`GRIDCRAWL_QUEUE_MAX_ATTEMPTS="five": not a whole number`}},
		{"a host name for a network", map[string]string{"GRIDCRAWL_ALLOW_NETS": "localhost"}, []string{
			`GRIDCRAWL_ALLOW_NETS="localhost": "localhost" is a host name, not a network: want loopback, private, ` +
				`a CIDR prefix such as 192.168.1.0/24 or an IP address, separated by commas (loopback is this machine)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var cfg envSections
			err := ParseEnv(&cfg)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ParseEnv = %v, want nil", err)
				}
				if cfg.Crawler.Workers != 8 || cfg.Loader.Workers != 4 || cfg.Loader.Timeout != 2*time.Minute {
					t.Errorf("ParseEnv: %+v, want crawler workers 8, loader workers 4, timeout 2m", cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseEnv = nil, want %q", tt.want)
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("ParseEnv = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestParseLogLevel: the four level names, in any case; anything else is
// refused with the variable and the allowed values.
func TestParseLogLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    slog.Level
		wantErr string
	}{
		{"debug", slog.LevelDebug, ""},
		{"INFO", slog.LevelInfo, ""},
		{"Warn", slog.LevelWarn, ""},
		{"error", slog.LevelError, ""},
		{"verbose", 0, `GRIDCRAWL_LOG_LEVEL="verbose": unknown level (one of debug, info, warn, error)`},
		{"warning", 0, `GRIDCRAWL_LOG_LEVEL="warning": unknown level (one of debug, info, warn, error)`},
		{"info+2", 0, `GRIDCRAWL_LOG_LEVEL="info+2": unknown level (one of debug, info, warn, error)`},
		{"", 0, `GRIDCRAWL_LOG_LEVEL="": unknown level (one of debug, info, warn, error)`},
	}
	for _, tt := range tests {
		got, err := ParseLogLevel(tt.in)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("ParseLogLevel(%q) error = %v, want %q", tt.in, err, tt.wantErr)
		}
	}
}

// TestMainRefusesConfiguration: a service started with a bad value logs
// the variable and exits 2 before it opens any backend.
func TestMainRefusesConfiguration(t *testing.T) {
	tests := []struct {
		name, key, value, want string
	}{
		{"log level", "GRIDCRAWL_LOG_LEVEL", "chatty", `GRIDCRAWL_LOG_LEVEL=\"chatty\": unknown level (one of debug, info, warn, error)`},
		{"number", "GRIDCRAWL_TEST_CRAWLER_WORKERS", "x", `GRIDCRAWL_TEST_CRAWLER_WORKERS=\"x\": not a whole number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tt.key, tt.value)
			var cfg envSections
			var logs bytes.Buffer
			built := false
			code := Main(t.Context(), "test", &logs, &cfg, func() *Common { return &cfg.Common },
				func(*wire.Set, *slog.Logger) (Runner, error) { built = true; return nil, nil })
			if code != 2 || built || !strings.Contains(logs.String(), tt.want) || strings.Contains(logs.String(), "Workers") {
				t.Errorf("Main with %s=%s = %d (built %v), log:\n%s\nwant 2, not built, logging %s", tt.key, tt.value, code, built, logs.String(), tt.want)
			}
		})
	}
}

// TestFormatVersion: the stamped version, else the module version, else
// the short revision (never Go's bare "(devel)"); the revision with its
// time and whether the tree was modified; the Go version.
func TestFormatVersion(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "73f834b00427c5f093203f719c4aff842e74d949"},
		{Key: "vcs.time", Value: "2026-11-23T16:59:09Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name  string
		stamp string
		bi    debug.BuildInfo
		want  string
	}{
		{"release", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gridcrawl/gridcrawl", Version: "v1.2.3"}},
			"github.com/gridcrawl/gridcrawl v1.2.3 go1.26.8 " + platform},
		{"no version", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gridcrawl/gridcrawl", Version: "(devel)"}},
			"github.com/gridcrawl/gridcrawl unversioned (built without a version stamp or VCS information: make build stamps one) go1.26.8 " + platform},
		{"revision", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "m", Version: "v0.0.0-20261123165909-73f834b00427+dirty"}, Settings: rev},
			"m v0.0.0-20261123165909-73f834b00427+dirty revision 73f834b00427c5f093203f719c4aff842e74d949 (2026-11-23T16:59:09Z) modified go1.26.8 " + platform},
		{"devel with a revision", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "m", Version: "(devel)"}, Settings: rev},
			"m 73f834b00427-dirty (2026-11-23T16:59:09Z) go1.26.8 " + platform},
		{"clean revision", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "m", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			"m abc go1.26.8 " + platform},
		{"stamped", "v0.3.0-12-g73f834b-dirty", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "m", Version: "(devel)"}, Settings: rev},
			"m v0.3.0-12-g73f834b-dirty revision 73f834b00427c5f093203f719c4aff842e74d949 (2026-11-23T16:59:09Z) modified go1.26.8 " + platform},
	}
	for _, tt := range tests {
		if got := formatVersion(tt.stamp, &tt.bi); got != tt.want {
			t.Errorf("formatVersion(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestSetGCPercent: GRIDCRAWL_GC_PERCENT sets the collector's target unless
// GOGC is set, and values below 25 are refused.
func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	c := &Common{GCPercent: 400}
	if !setGCPercent(c, func(string) string { return "" }) {
		t.Error("setGCPercent without GOGC = false, want true")
	}
	if got := debug.SetGCPercent(100); got != 400 {
		t.Errorf("GC percent after setGCPercent = %d, want 400", got)
	}
	gogc := func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	}
	if setGCPercent(c, gogc) {
		t.Error("setGCPercent with GOGC set = true, want false")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent after setGCPercent with GOGC set = %d, want 100 as before", got)
	}
	for p, ok := range map[int]bool{24: false, 25: true, 400: true, -1: false} {
		if err := validGCPercent(p); (err == nil) != ok {
			t.Errorf("validGCPercent(%d) = %v, want ok %v", p, err, ok)
		}
	}
}
