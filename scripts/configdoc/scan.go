package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// modulePath is the module whose sources are scanned; imports under it are
// resolved to directories of the repository.
const modulePath = "github.com/gridcrawl/gridcrawl"

// nameRE finds GRIDCRAWL_* names in any text. A match that ends in "_" is a
// prefix (GRIDCRAWL_S3_*), not a name, and is dropped by names.
var nameRE = regexp.MustCompile(`\bGRIDCRAWL_[A-Z0-9_]+`)

// names returns the GRIDCRAWL_* names in text, prefixes left out.
func names(text string) []string {
	var out []string
	for _, m := range nameRE.FindAllString(text, -1) {
		if !strings.HasSuffix(m, "_") {
			out = append(out, m)
		}
	}
	return out
}

// selfDir is this generator's directory: its notes name variables without
// reading them, so it is not scanned.
const selfDir = "scripts/configdoc"

// skipDir reports whether a directory holds no code of the repository:
// hidden directories (.git), build output, data directories of local runs,
// and testdata, which the go tool ignores too.
func skipDir(name string) bool {
	switch name {
	case "bin", "data", "artifacts", "testdata", "node_modules":
		return true
	}
	return strings.HasPrefix(name, ".") && name != "."
}

// codeFile reports whether the repository-relative path rel is code whose
// GRIDCRAWL_* names must be documented: Go sources, shell scripts under
// scripts/ and the Makefile.
func codeFile(rel string) bool {
	switch {
	case strings.HasSuffix(rel, ".go"):
		return true
	case strings.HasPrefix(rel, "scripts/") && strings.HasSuffix(rel, ".sh"):
		return true
	}
	return rel == "Makefile"
}

// codeFiles lists the code files under root, slash-separated and sorted.
func codeFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != root && (skipDir(d.Name()) || rel == selfDir) {
				return filepath.SkipDir
			}
			return nil
		}
		if codeFile(rel) {
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// field is one struct field tagged env:"GRIDCRAWL_...".
type field struct {
	Var     string // the variable
	Field   string // the Go field name
	Type    string // the Go type as written
	Default string // envDefault
	HasDef  bool   // an envDefault tag is present
	Sep     string // envSeparator
	Doc     string // the field's doc or line comment, on one line
}

// structType is a struct type declared in a non-test Go file.
type structType struct {
	Dir    string // repository-relative directory of its package
	Pkg    string // package name
	Name   string
	Doc    string
	Fields []field
	Refs   []string // keys of the struct types its fields are (or point to)
}

func (s *structType) key() string { return s.Dir + "." + s.Name }

// title is how the page names the struct: package.Type.
func (s *structType) title() string { return s.Pkg + "." + s.Name }

// usage is what the code does with one GRIDCRAWL_* name outside env tags.
type usage struct {
	Reads    map[string]bool // files that read it (os.Getenv, os.LookupEnv, testenv.Backend, $NAME in shell)
	Sets     map[string]bool // files that set or print it (Setenv, "NAME=..." strings, NAME= in shell)
	Mentions map[string]bool // every code file it appears in
	Default  string          // a shell default, ${NAME:-default}
}

// repo is what scan learns from the repository.
type repo struct {
	Structs map[string]*structType // by key
	Mains   map[string][]string    // main package directories under services/ -> the repository directories they import
	Uses    map[string]*usage      // every GRIDCRAWL_* name in code -> its use
}

func (r *repo) use(name string) *usage {
	u := r.Uses[name]
	if u == nil {
		u = &usage{Reads: map[string]bool{}, Sets: map[string]bool{}, Mentions: map[string]bool{}}
		r.Uses[name] = u
	}
	return u
}

// scan reads every code file under root.
func scan(root string) (*repo, error) {
	files, err := codeFiles(root)
	if err != nil {
		return nil, fmt.Errorf("list code files: %w", err)
	}
	r := &repo{Structs: map[string]*structType{}, Mains: map[string][]string{}, Uses: map[string]*usage{}}
	fset := token.NewFileSet()
	var errs []error
	for _, rel := range files {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", rel, err)
		}
		for _, n := range names(string(src)) {
			r.use(n).Mentions[rel] = true
		}
		if !strings.HasSuffix(rel, ".go") {
			r.scanShell(rel, src)
			continue
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			errs = append(errs, fmt.Errorf("parse %s: %w", rel, err))
			continue
		}
		r.scanGoCalls(rel, f)
		if !strings.HasSuffix(rel, "_test.go") {
			if err := r.scanGoDecls(rel, f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for dir, imps := range r.Mains {
		slices.Sort(imps)
		r.Mains[dir] = slices.Compact(imps)
	}
	return r, errors.Join(errs...)
}

var (
	shellReadRE = regexp.MustCompile(`\$\{?(GRIDCRAWL_[A-Z0-9_]*[A-Z0-9])\b`)
	shellSetRE  = regexp.MustCompile(`(?:^|[\s'"])(GRIDCRAWL_[A-Z0-9_]*[A-Z0-9])=`)
)

// scanShell records the reads, sets and defaults of a shell script or the
// Makefile. Comment lines only mention names.
func (r *repo) scanShell(rel string, src []byte) {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range shellReadRE.FindAllStringSubmatch(line, -1) {
			r.use(m[1]).Reads[rel] = true
		}
		for name, def := range shellDefaults(line) {
			if u := r.use(name); u.Default == "" {
				u.Default = def
			}
		}
		for _, m := range shellSetRE.FindAllStringSubmatch(line, -1) {
			r.use(m[1]).Sets[rel] = true
		}
	}
}

// shellDefaults returns the defaults a shell line gives variables,
// ${NAME:-default}, where the default may hold ${...} itself.
func shellDefaults(line string) map[string]string {
	out := map[string]string{}
	for rest := line; ; {
		i := strings.Index(rest, "${GRIDCRAWL_")
		if i < 0 {
			return out
		}
		rest = rest[i+2:]
		name, after, ok := strings.Cut(rest, ":-")
		if !ok || len(names(name)) != 1 || names(name)[0] != name {
			continue
		}
		depth := 1
		for j, c := range after {
			if c == '{' {
				depth++
			} else if c == '}' {
				depth--
			}
			if depth == 0 {
				out[name] = after[:j]
				break
			}
		}
	}
}

// scanGoCalls records the GRIDCRAWL_* names a Go file reads from the
// environment (os.Getenv, os.LookupEnv, testenv.Backend) or sets (Setenv,
// and "NAME=value" strings given to child processes or printed for a shell).
func (r *repo) scanGoCalls(rel string, f *ast.File) {
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			var args []ast.Expr
			read := true
			switch sel.Sel.Name {
			case "Getenv", "LookupEnv":
				if len(n.Args) > 0 {
					args = n.Args[:1]
				}
			case "Backend": // testenv.Backend(t, vars...)
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testenv" && len(n.Args) > 1 {
					args = n.Args[1:]
				}
			case "Setenv":
				if len(n.Args) > 0 {
					args, read = n.Args[:1], false
				}
			}
			for _, a := range args {
				if s, ok := stringLit(a); ok && len(names(s)) == 1 && names(s)[0] == s {
					if read {
						r.use(s).Reads[rel] = true
					} else {
						r.use(s).Sets[rel] = true
					}
				}
			}
		case *ast.BasicLit:
			if s, ok := stringLit(n); ok {
				if name, _, found := strings.Cut(s, "="); found && strings.HasPrefix(name, "GRIDCRAWL_") && len(names(name)) == 1 && names(name)[0] == name {
					r.use(name).Sets[rel] = true
				}
			}
		}
		return true
	})
}

// stringLit returns the value of a string literal.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// scanGoDecls records the struct types of a non-test Go file, their env
// tagged fields, and, for a main package under services/, its imports.
func (r *repo) scanGoDecls(rel string, f *ast.File) error {
	dir := path.Dir(rel)
	imports := map[string]string{} // local name -> repository directory
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || !strings.HasPrefix(p, modulePath+"/") {
			continue
		}
		d := strings.TrimPrefix(p, modulePath+"/")
		local := path.Base(d)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		imports[local] = d
		if f.Name.Name == "main" && strings.HasPrefix(dir, "services/") {
			r.Mains[dir] = append(r.Mains[dir], d)
		}
	}
	if f.Name.Name == "main" && strings.HasPrefix(dir, "services/") && r.Mains[dir] == nil {
		r.Mains[dir] = []string{}
	}
	var errs []error
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			doc := ts.Doc
			if doc == nil && len(gd.Specs) == 1 {
				doc = gd.Doc
			}
			s := &structType{Dir: dir, Pkg: f.Name.Name, Name: ts.Name.Name, Doc: oneLine(doc)}
			for _, fl := range st.Fields.List {
				if ref := typeKey(fl.Type, dir, imports); ref != "" {
					s.Refs = append(s.Refs, ref)
				}
				if fl.Tag == nil {
					continue
				}
				tag, err := strconv.Unquote(fl.Tag.Value)
				if err != nil {
					continue
				}
				tags := reflect.StructTag(tag)
				name, _, _ := strings.Cut(tags.Get("env"), ",")
				if !strings.HasPrefix(name, "GRIDCRAWL_") {
					continue
				}
				if len(fl.Names) != 1 {
					errs = append(errs, fmt.Errorf("%s: %s.%s: one env tag on %d fields", rel, f.Name.Name, ts.Name.Name, len(fl.Names)))
					continue
				}
				def, hasDef := tags.Lookup("envDefault")
				doc := oneLine(fl.Doc)
				if doc == "" {
					doc = oneLine(fl.Comment)
				}
				s.Fields = append(s.Fields, field{Var: name, Field: fl.Names[0].Name, Type: exprString(fl.Type),
					Default: def, HasDef: hasDef, Sep: tags.Get("envSeparator"), Doc: doc})
			}
			if r.Structs[s.key()] != nil {
				errs = append(errs, fmt.Errorf("%s: struct %s declared twice", rel, s.key()))
			}
			r.Structs[s.key()] = s
		}
	}
	return errors.Join(errs...)
}

// typeKey returns the key of the struct type that the field type e names
// (through pointers), or "" when it names none of the repository's types.
func typeKey(e ast.Expr, dir string, imports map[string]string) string {
	for {
		star, ok := e.(*ast.StarExpr)
		if !ok {
			break
		}
		e = star.X
	}
	switch e := e.(type) {
	case *ast.Ident:
		return dir + "." + e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && imports[x.Name] != "" {
			return imports[x.Name] + "." + e.Sel.Name
		}
	}
	return ""
}

// exprString renders a field type as written.
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.MapType:
		return "map[" + exprString(e.Key) + "]" + exprString(e.Value)
	}
	return "?"
}

// oneLine joins a comment's lines into one line of Markdown-safe text.
func oneLine(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	s := strings.Join(strings.Fields(cg.Text()), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
