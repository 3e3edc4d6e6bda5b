package main

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// section is one struct's table on the page.
type section struct {
	S        *structType
	Binaries []string // service binaries that read it
	Rows     []field  // the variables listed here, sorted
	Also     []string // variables it reads that are listed in an earlier section
}

// binaries returns the service binaries (main packages under services/)
// that parse the struct with key k: those whose own structs contain it,
// directly or through other structs, and those that import the package of a
// containing struct that no other struct contains (such as the all-in-one
// grid's Config, parsed by the package the grid command calls).
func (r *repo) binaries(k string) []string {
	parents := map[string][]string{}
	for _, s := range r.Structs {
		for _, ref := range s.Refs {
			parents[ref] = append(parents[ref], s.key())
		}
	}
	seen := map[string]bool{}
	out := map[string]bool{}
	var visit func(k string)
	visit = func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		s := r.Structs[k]
		if s == nil {
			return
		}
		if _, ok := r.Mains[s.Dir]; ok {
			out[path.Base(s.Dir)] = true
		} else if len(parents[k]) == 0 {
			for dir, imps := range r.Mains {
				if slices.Contains(imps, s.Dir) {
					out[path.Base(dir)] = true
				}
			}
		}
		for _, p := range parents[k] {
			visit(p)
		}
	}
	visit(k)
	return slices.Sorted(maps.Keys(out))
}

// sections orders the structs with env tags: those read by most binaries
// first (the backends every service shares), then by package and name. Each
// variable gets its row in the first section that reads it.
func (r *repo) sections() []*section {
	var out []*section
	for _, s := range r.Structs {
		if len(s.Fields) > 0 {
			out = append(out, &section{S: s, Binaries: r.binaries(s.key())})
		}
	}
	slices.SortFunc(out, func(a, b *section) int {
		return cmp.Or(-cmp.Compare(len(a.Binaries), len(b.Binaries)), cmp.Compare(a.S.Dir, b.S.Dir), cmp.Compare(a.S.Name, b.S.Name))
	})
	listed := map[string]bool{}
	for _, sec := range out {
		for _, f := range sec.S.Fields {
			if listed[f.Var] {
				sec.Also = append(sec.Also, f.Var)
				continue
			}
			listed[f.Var] = true
			sec.Rows = append(sec.Rows, f)
		}
		slices.SortFunc(sec.Rows, func(a, b field) int { return cmp.Compare(a.Var, b.Var) })
		slices.Sort(sec.Also)
	}
	return out
}

// tagged returns every variable named by an env tag, with the sections
// (package.Type) that read it, in section order.
func tagged(secs []*section) map[string][]*section {
	out := map[string][]*section{}
	for _, sec := range secs {
		for _, f := range sec.S.Fields {
			out[f.Var] = append(out[f.Var], sec)
		}
	}
	return out
}

// fixture reports whether a name that no env tag reads is a test's example
// rather than a setting: it appears in test files only, and no code reads it
// from the environment except tests that set it themselves.
func fixture(u *usage) bool {
	for f := range u.Mentions {
		if !strings.HasSuffix(f, "_test.go") {
			return false
		}
	}
	for f := range u.Reads {
		if !u.Sets[f] {
			return false
		}
	}
	return true
}

// places renders files compactly: a Go file as its directory, marked
// "(tests)" when only its tests are meant; other files by path.
func places(files map[string]bool) string {
	dirs := map[string]string{} // place -> "" or "tests"
	for f := range files {
		if !strings.HasSuffix(f, ".go") {
			dirs["`"+f+"`"] = ""
			continue
		}
		d := "`" + path.Dir(f) + "`"
		test := strings.HasSuffix(f, "_test.go")
		if kind, ok := dirs[d]; !ok || (kind == "tests" && !test) {
			dirs[d] = map[bool]string{true: "tests"}[test]
		}
	}
	var out []string
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if dirs[d] == "tests" {
			d += " (tests)"
		}
		out = append(out, d)
	}
	return strings.Join(out, ", ")
}

// typeName says in words what a Go field type takes.
func typeName(goType, sep string) string {
	switch goType {
	case "time.Duration":
		return "duration"
	case "bool":
		return "boolean"
	case "string":
		return "text"
	case "int", "int64", "int32", "uint", "uint64":
		return "integer"
	}
	if strings.HasPrefix(goType, "[]") {
		return fmt.Sprintf("list, `%s`-separated", cmp.Or(sep, ","))
	}
	return goType
}

// defaultCell shows a field's default: its envDefault, else what code
// computes for an empty value, else its zero value.
func defaultCell(f field) string {
	if f.HasDef && f.Default != "" {
		return "`" + f.Default + "`"
	}
	if d := computedDefaults[f.Var]; d != "" {
		return "(empty: `" + d + "`)"
	}
	switch f.Type {
	case "bool":
		return "`false`"
	case "int", "int64", "int32", "uint", "uint64":
		return "`0`"
	}
	return "(empty)"
}

// render writes the configuration page. Warnings name what the page had to
// take from notes instead of the code.
func render(r *repo) (page []byte, warnings []string) {
	secs := r.sections()
	tags := tagged(secs)
	var fromNotes []string
	defer func() {
		if len(fromNotes) > 0 {
			slices.Sort(fromNotes)
			warnings = append(warnings, fmt.Sprintf("%d fields have no doc comment and are described from scripts/configdoc/notes.go: %s",
				len(fromNotes), strings.Join(fromNotes, ", ")))
		}
	}()
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("# Configuration\n\n")
	p("<!-- Generated by `go run ./scripts/configdoc` from the Go sources; do not edit by hand. -->\n\n")
	p("Every setting of the gridcrawl services is an environment variable, parsed at start-up with\n")
	p("[caarlos0/env](https://github.com/caarlos0/env) into one struct per part of the system. An invalid value stops\n")
	p("the service with exit status 2 and a message naming the variable and its value, all of them at once:\n\n")
	p("```\nGRIDCRAWL_LOADER_WORKERS=\"lots\": not a whole number\nGRIDCRAWL_FETCH_TIMEOUT=\"3\": not a duration (such as 500ms, 30s, 10m, 1h)\n```\n\n")
	p("With no backend variable set, every service uses the embedded backends under `GRIDCRAWL_DATA`; each real backend is\n")
	p("chosen by setting its URL. Durations are Go durations (`500ms`, `30s`, `10m`, `1h`); sizes are bytes unless a row\n")
	p("says otherwise. The tables below are generated from the `env` tags of the code, their defaults (`envDefault`) and\n")
	p("the fields' doc comments; the last sections list the variables that code reads without a tag (command-line\n")
	p("tools, scripts, tests). `go test ./scripts/configdoc` fails when this page and the code disagree.\n\n")

	p("| section | package | read by |\n|---|---|---|\n")
	for _, sec := range secs {
		p("| [`%s`](#%s) | `%s` | %s |\n", sec.S.title(), anchor(sec.S.title()), sec.S.Dir, binList(sec.Binaries))
	}
	p("| [Read without a tag](#read-without-a-tag) | | command-line tools, scripts, tests |\n\n")

	for _, sec := range secs {
		p("## %s\n\n", sec.S.title())
		if sec.S.Doc != "" {
			p("%s\n\n", sec.S.Doc)
		}
		p("Declared in `%s`; read by %s.\n\n", sec.S.Dir, binList(sec.Binaries))
		if len(sec.Rows) > 0 {
			p("| variable | type | default | meaning |\n|---|---|---|---|\n")
		}
		for _, f := range sec.Rows {
			meaning := ""
			for _, other := range tags[f.Var] {
				for _, g := range other.S.Fields {
					if g.Var == f.Var && meaning == "" {
						meaning = g.Doc
					}
				}
			}
			if meaning == "" {
				meaning = notes[f.Var]
				if meaning != "" {
					fromNotes = append(fromNotes, sec.S.title()+"."+f.Field)
				} else {
					meaning = "(not documented)"
					warnings = append(warnings, fmt.Sprintf("%s (%s.%s): no doc comment and no note: the page says \"not documented\"", f.Var, sec.S.title(), f.Field))
				}
			} else if notes[f.Var] != "" {
				warnings = append(warnings, fmt.Sprintf("%s: the code documents it now; its note in scripts/configdoc/notes.go is unused", f.Var))
			}
			if a := addenda[f.Var]; a != "" {
				meaning += " " + a
			}
			def := defaultCell(f)
			var also []string
			for _, other := range tags[f.Var] {
				if other == sec {
					continue
				}
				also = append(also, "`"+other.S.title()+"`")
				for _, g := range other.S.Fields {
					if g.Var == f.Var && defaultCell(g) != def {
						def += fmt.Sprintf(" (%s: %s)", other.S.title(), defaultCell(g))
					}
				}
			}
			if len(also) > 0 {
				meaning += " Also read by " + strings.Join(also, ", ") + "."
			}
			p("| `%s` | %s | %s | %s |\n", f.Var, typeName(f.Type, f.Sep), def, meaning)
		}
		if len(sec.Rows) > 0 {
			p("\n")
		}
		if len(sec.Also) > 0 {
			var links []string
			for _, v := range sec.Also {
				links = append(links, fmt.Sprintf("`%s` (see [`%s`](#%s))", v, tags[v][0].S.title(), anchor(tags[v][0].S.title())))
			}
			p("Also reads %s.\n\n", strings.Join(links, ", "))
		}
	}

	var others, fixtures []string
	for _, n := range slices.Sorted(maps.Keys(r.Uses)) {
		if tags[n] != nil {
			continue
		}
		if fixture(r.Uses[n]) {
			fixtures = append(fixtures, n)
		} else {
			others = append(others, n)
		}
	}
	p("## Read without a tag\n\n")
	p("These variables are read directly (`os.Getenv`, `os.LookupEnv`, the test helper `testenv.Backend`, or a shell\n")
	p("script's `$VARIABLE`) by the `grid` command, scripts and tests. Variables of the tables above that tests and\n")
	p("scripts also read or set are not repeated here.\n\n")
	p("| variable | default | meaning | read in | set in |\n|---|---|---|---|---|\n")
	for _, n := range others {
		u := r.Uses[n]
		meaning := notes[n]
		if meaning == "" {
			meaning = "(not documented)"
			warnings = append(warnings, fmt.Sprintf("%s: read without a tag and no note in scripts/configdoc/notes.go", n))
		}
		read := places(u.Reads)
		if read == "" {
			read = "mentioned in " + places(u.Mentions)
		}
		def := "(empty)"
		if u.Default != "" {
			def = "`" + u.Default + "`"
		}
		p("| `%s` | %s | %s | %s | %s |\n", n, def, meaning, read, places(u.Sets))
	}
	p("\n## Names in tests that are not settings\n\n")
	p("Tests use these names as examples (of a misspelled or unknown variable, or of the parser's own cases);\n")
	p("no service reads them.\n\n")
	p("| name | used in |\n|---|---|\n")
	for _, n := range fixtures {
		p("| `%s` | %s |\n", n, places(r.Uses[n].Mentions))
	}
	for _, m := range []map[string]string{notes, computedDefaults, addenda} {
		for n := range m {
			if r.Uses[n] == nil && tags[n] == nil {
				warnings = append(warnings, fmt.Sprintf("%s: scripts/configdoc/notes.go names a variable no code has", n))
			}
		}
	}
	slices.Sort(warnings)
	return b.Bytes(), warnings
}

// binList renders binary names as `bin/NAME`.
func binList(bins []string) string {
	if len(bins) == 0 {
		return "no service binary"
	}
	var out []string
	for _, b := range bins {
		out = append(out, "`"+b+"`")
	}
	return strings.Join(out, ", ")
}

// anchor is the GitHub heading anchor of a package.Type heading.
func anchor(title string) string {
	return strings.ToLower(strings.ReplaceAll(title, ".", ""))
}
