package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/netguard"
)

const hint = "run `go run ./scripts/configdoc`"

// repoRoot finds the repository root from the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := findRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readPage returns the committed configuration page.
func readPage(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(pagePath)))
	if err != nil {
		t.Fatalf("read the page: %v (%s)", err, hint)
	}
	return string(b)
}

// TestPageUpToDate fails when the committed page is not what the generator
// writes from the code as it is now.
func TestPageUpToDate(t *testing.T) {
	root := repoRoot(t)
	r, err := scan(root)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	want, warnings := render(r)
	for _, w := range warnings {
		t.Log("warning:", w)
	}
	got := readPage(t, root)
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		g, w := "(end of page)", "(end of page)"
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s is out of date: %s\nfirst difference, line %d:\n page: %s\n code: %s", pagePath, hint, i+1, g, w)
		}
	}
}

// oracleNameRE and oracleNames find GRIDCRAWL_* names on their own, apart
// from the generator's scanner, so that a scanner that misses a file or a
// name cannot agree with itself.
var oracleNameRE = regexp.MustCompile(`GRIDCRAWL_[A-Z0-9_]+`)

// oracleNames returns every GRIDCRAWL_* name (prefixes ending in "_" left
// out) in the repository's Go files, the shell scripts under scripts/ and
// the Makefile, with a file it appears in. The generator's own directory is
// left out: its notes name variables, they do not read them.
func oracleNames(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(strings.TrimPrefix(p, root), string(filepath.Separator)))
		if d.IsDir() {
			switch {
			case rel == "":
				return nil
			case strings.HasPrefix(d.Name(), "."), rel == "scripts/configdoc", rel == "bin", rel == "data", rel == "artifacts", d.Name() == "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !(strings.HasSuffix(rel, ".go") || rel == "Makefile" || (strings.HasPrefix(rel, "scripts/") && strings.HasSuffix(rel, ".sh"))) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range oracleNameRE.FindAllString(string(b), -1) {
			if !strings.HasSuffix(m, "_") && out[m] == "" {
				out[m] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("found only %d GRIDCRAWL_* names in the code: the walk is broken", len(out))
	}
	return out
}

// pageRowRE matches a table row of the page that lists a name.
var pageRowRE = regexp.MustCompile("^\\| `(GRIDCRAWL_[A-Z0-9_]+)` \\|")

// pageRows returns the names the page's tables list, once per row.
func pageRows(page string) []string {
	var out []string
	for _, line := range strings.Split(page, "\n") {
		if m := pageRowRE.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// TestEveryNameOnce fails when a GRIDCRAWL_* name of the code is missing
// from the page, when the page lists a name no code has, or when it lists a
// name twice.
func TestEveryNameOnce(t *testing.T) {
	root := repoRoot(t)
	code := oracleNames(t, root)
	rows := pageRows(readPage(t, root))
	seen := map[string]bool{}
	for _, n := range rows {
		if seen[n] {
			t.Errorf("%s lists %s twice (%s)", pagePath, n, hint)
		}
		seen[n] = true
		if code[n] == "" {
			t.Errorf("%s lists %s, which no code has (%s)", pagePath, n, hint)
		}
	}
	var missing []string
	for n, file := range code {
		if !seen[n] {
			missing = append(missing, n+" (in "+file+")")
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("%s does not list %s (%s)", pagePath, m, hint)
	}
}

// TestNotesNameVariables fails on a note for a variable that no code has
// (renamed or removed): its text would never reach the page.
func TestNotesNameVariables(t *testing.T) {
	code := oracleNames(t, repoRoot(t))
	for _, m := range []map[string]string{notes, computedDefaults, addenda} {
		for n := range m {
			if code[n] == "" {
				t.Errorf("scripts/configdoc/notes.go describes %s, which no code has: rename or delete the entry", n)
			}
		}
	}
}

// TestShellDefaults checks the reading of ${NAME:-default}, nested ones
// included.
func TestShellDefaults(t *testing.T) {
	tests := []struct {
		line string
		want map[string]string
	}{
		{`X="${GRIDCRAWL_A_B:-180}"`, map[string]string{"GRIDCRAWL_A_B": "180"}},
		{`d="${GRIDCRAWL_DIR:-${XDG:-$HOME/.cache}/x}" y=${GRIDCRAWL_Y:-}`, map[string]string{"GRIDCRAWL_DIR": "${XDG:-$HOME/.cache}/x", "GRIDCRAWL_Y": ""}},
		{`echo "$GRIDCRAWL_A ${GRIDCRAWL_B}"`, map[string]string{}},
	}
	for _, tt := range tests {
		got := shellDefaults(tt.line)
		if len(got) != len(tt.want) {
			t.Errorf("shellDefaults(%q) = %v, want %v", tt.line, got, tt.want)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("shellDefaults(%q) = %v, want %v", tt.line, got, tt.want)
			}
		}
	}
}

// TestTaggedInTables fails when a variable named by an env tag in non-test
// code is not in a struct's table (the sections before "Read without a
// tag"), or when a variable without a tag is: the page must tell what the
// services parse from what tools and tests read.
func TestTaggedInTables(t *testing.T) {
	root := repoRoot(t)
	tagRE := regexp.MustCompile(`env:"(GRIDCRAWL_[A-Z0-9_]+)`)
	tagged := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range tagRE.FindAllStringSubmatch(string(b), -1) {
			tagged[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	page := readPage(t, root)
	cut := strings.Index(page, "\n## Read without a tag\n")
	if cut < 0 {
		t.Fatalf("%s has no section \"Read without a tag\" (%s)", pagePath, hint)
	}
	inTables := map[string]bool{}
	for _, n := range pageRows(page[:cut]) {
		inTables[n] = true
	}
	for n := range tagged {
		if !inTables[n] {
			t.Errorf("%s: %s has an env tag but is not in a struct's table (%s)", pagePath, n, hint)
		}
	}
	for n := range inTables {
		if !tagged[n] {
			t.Errorf("%s: %s is in a struct's table but no env tag names it (%s)", pagePath, n, hint)
		}
	}
}

// TestAllowNetsWords checks that the note of GRIDCRAWL_ALLOW_NETS names
// every word netguard.ParseNets takes for a network.
func TestAllowNetsWords(t *testing.T) {
	for _, word := range []string{"loopback", "private"} {
		if _, err := netguard.ParseNets(word); err != nil {
			t.Fatalf("ParseNets(%q) = %v: the word is no longer taken", word, err)
		}
		if !strings.Contains(notes["GRIDCRAWL_ALLOW_NETS"], "`"+word+"`") {
			t.Errorf("note of GRIDCRAWL_ALLOW_NETS = %q, want it to name `%s`", notes["GRIDCRAWL_ALLOW_NETS"], word)
		}
	}
}

// TestLogFormats checks that the note of GRIDCRAWL_LOG_LEVEL names the log
// format of each logger the commands build: JSON in svc (the service
// binaries), key=value text in grid (grid up, grid crawl).
func TestLogFormats(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct{ file, handler, word string }{
		{"services/internal/svc/svc.go", "slog.NewJSONHandler", "JSON lines"},
		{"services/internal/grid/cli.go", "slog.NewTextHandler", "`key=value`"},
	} {
		src, err := os.ReadFile(filepath.Join(root, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), tc.handler) {
			t.Errorf("%s has no %s: update this test and the note", tc.file, tc.handler)
		}
		if !strings.Contains(notes["GRIDCRAWL_LOG_LEVEL"], tc.word) {
			t.Errorf("note of GRIDCRAWL_LOG_LEVEL = %q, want it to say %s (%s in %s)", notes["GRIDCRAWL_LOG_LEVEL"], tc.word, tc.handler, tc.file)
		}
	}
}
