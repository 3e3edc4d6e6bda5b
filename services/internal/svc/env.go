package svc

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v10"

	"github.com/gridcrawl/gridcrawl/pkg/netguard"
)

// ParseEnv parses the GRIDCRAWL_* environment variables into cfg, a pointer
// to a struct with env tags. Its errors name the variable and its value, not
// the Go field the value was meant for: caarlos0/env reports a field name
// ("parse error on field \"Workers\" of type \"int\""), which tells an
// operator nothing, and several sections have a field of the same name.
//
// Variables whose value is a list in a syntax of its own (listSyntax) are
// checked here too, so that a bad one is refused at start-up with the same
// NAME="value": reason as a bad number, not later by the service that reads
// it, in the words of a Go parser.
func ParseEnv(cfg any) error {
	err := env.Parse(cfg)
	if err != nil {
		if named := envErrors(reflect.TypeOf(cfg)); len(named) > 0 {
			return errors.Join(named...)
		}
		return fmt.Errorf("parse environment: %w", err)
	}
	var errs []error
	for _, name := range envNames(reflect.TypeOf(cfg)) {
		check := listSyntax(name)
		if check == nil {
			continue
		}
		if v := os.Getenv(name); v != "" {
			if err := check(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	}
	return errors.Join(errs...)
}

// listSyntax returns the syntax check of the variable name, whose value is
// a list parsed by a domain package, or nil for others.
func listSyntax(name string) func(string) error {
	switch name {
	case "GRIDCRAWL_ALLOW_NETS":
		return func(v string) error { _, err := netguard.ParseNets(v); return err }
	case "GRIDCRAWL_RESOLVE":
		return func(v string) error { _, err := netguard.ParseOverrides(v); return err }
	}
	return nil
}

// envFields calls f once for each variable that an env tag of the struct t
// points to names (walking nested structs), with the tagged field's type.
func envFields(t reflect.Type, f func(name string, typ reflect.Type)) {
	seen := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			field := t.Field(i)
			if !field.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(field.Tag.Get("env"), ",")
			if name == "" {
				walk(field.Type)
				continue
			}
			if !seen[name] {
				seen[name] = true
				f(name, field.Type)
			}
		}
	}
	walk(t)
}

// envNames returns the variables named by the env tags of the struct t
// points to, each once.
func envNames(t reflect.Type) []string {
	var names []string
	envFields(t, func(name string, _ reflect.Type) { names = append(names, name) })
	return names
}

// envErrors parses every variable that the env tags of the struct t points
// to name, each on its own, and returns an error for each whose value does
// not parse.
func envErrors(t reflect.Type) []error {
	var errs []error
	envFields(t, func(name string, typ reflect.Type) {
		if err := parseOne(name, typ); err != nil {
			errs = append(errs, err)
		}
	})
	return errs
}

// parseOne parses the variable name into a value of type typ the way
// env.Parse does, and explains the failure.
func parseOne(name string, typ reflect.Type) error {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return nil
	}
	probe := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "V", Type: typ, Tag: reflect.StructTag(`env:"` + name + `"`)}}))
	err := env.Parse(probe.Interface())
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s=%q: %s", name, v, want(typ, err))
}

var durationType = reflect.TypeFor[time.Duration]()

// want says what a value of type t looks like, for a message about a value
// that is not one.
func want(t reflect.Type, err error) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	inner := err
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) == 1 { // AggregateError has no Unwrap
		inner = agg.Errors[0]
	}
	var pe env.ParseError
	if errors.As(inner, &pe) {
		inner = pe.Err
	}
	switch {
	case t == durationType:
		return "not a duration (such as 500ms, 30s, 10m, 1h)"
	case errors.Is(inner, strconv.ErrRange):
		return fmt.Sprintf("out of range (a %s)", t.Kind())
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "not a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "not a whole number of at least 0"
	case reflect.Float32, reflect.Float64:
		return "not a number"
	case reflect.Bool:
		return "not a boolean (true or false, 1 or 0)"
	}
	return inner.Error()
}

// LogLevels are the values GRIDCRAWL_LOG_LEVEL accepts.
var LogLevels = []string{"debug", "info", "warn", "error"}

// ParseLogLevel returns the slog level named by s, one of LogLevels (in any
// case). Other values are refused rather than read as info, so that a typo
// does not silently hide the debug logs that were asked for.
func ParseLogLevel(s string) (slog.Level, error) {
	for i, name := range LogLevels {
		if strings.EqualFold(s, name) {
			return []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}[i], nil
		}
	}
	return 0, fmt.Errorf("GRIDCRAWL_LOG_LEVEL=%q: unknown level (one of %s)", s, strings.Join(LogLevels, ", "))
}

// stamp is the version make build stamps into the binaries with
// -ldflags "-X github.com/gridcrawl/gridcrawl/services/internal/svc.stamp=..."
// (git describe --always --dirty); empty in a binary built otherwise.
var stamp string

// Version describes the running binary: its version, the VCS revision and
// time it was built from (with "modified" when the working tree had
// changes), and the Go version, as runtime/debug.ReadBuildInfo reports them.
// The version is the one make build stamps; else the main module's version
// (go install of a tagged release); else, for a go build in a git checkout,
// which Go calls "(devel)", the short revision, so that two builds can be
// told apart.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{GoVersion: runtime.Version(), Main: debug.Module{Path: "github.com/gridcrawl/gridcrawl"}}
	}
	return formatVersion(stamp, bi)
}

// formatVersion formats stamped, the version stamped at build time, and bi
// for Version.
func formatVersion(stamped string, bi *debug.BuildInfo) string {
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var b strings.Builder
	v := stamped
	if v == "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	fromRev := false
	if v == "" && rev != "" {
		v, fromRev = rev[:min(len(rev), 12)], true
		if modified {
			v += "-dirty"
		}
	}
	if v == "" {
		v = "unversioned (built without a version stamp or VCS information: make build stamps one)"
	}
	fmt.Fprintf(&b, "%s %s", bi.Main.Path, v)
	if rev != "" && !fromRev {
		fmt.Fprintf(&b, " revision %s", rev)
	}
	if rev != "" {
		if at != "" {
			fmt.Fprintf(&b, " (%s)", at)
		}
		if modified && !fromRev {
			b.WriteString(" modified")
		}
	}
	fmt.Fprintf(&b, " %s %s/%s", bi.GoVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
