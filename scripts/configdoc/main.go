// Command configdoc writes docs/configuration.md from the code: every struct
// field tagged env:"GRIDCRAWL_..." in the repository's non-test Go sources
// (with its envDefault, envSeparator and doc comment, grouped by the struct
// and the service binaries that read it), then the GRIDCRAWL_* variables
// that code reads without a tag (os.Getenv, os.LookupEnv, shell scripts),
// with where they are read. Run it from anywhere in the repository:
//
//	go run ./scripts/configdoc
//
// With -check it writes nothing and exits 1 when the page is out of date.
// Its test fails when the page and the code disagree.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// pagePath is where the page lives, relative to the repository root.
const pagePath = "docs/configuration.md"

func main() {
	check := flag.Bool("check", false, "write nothing; exit 1 when "+pagePath+" is out of date")
	quiet := flag.Bool("q", false, "print no warnings")
	flag.Parse()
	if err := run(*check, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func run(check, quiet bool) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("find the working directory: %w", err)
	}
	root, err := findRoot(wd)
	if err != nil {
		return err
	}
	r, err := scan(root)
	if err != nil {
		return err
	}
	page, warnings := render(r)
	if !quiet {
		for _, w := range warnings {
			fmt.Fprintln(os.Stderr, "configdoc: warning:", w)
		}
	}
	dst := filepath.Join(root, filepath.FromSlash(pagePath))
	if check {
		old, err := os.ReadFile(dst)
		if err != nil {
			return fmt.Errorf("read the page: %w", err)
		}
		if !bytes.Equal(old, page) {
			return errors.New(pagePath + " is out of date: run `go run ./scripts/configdoc`")
		}
		return nil
	}
	if err := os.WriteFile(dst, page, 0o644); err != nil {
		return fmt.Errorf("write the page: %w", err)
	}
	return nil
}

// findRoot returns the directory at or above dir whose go.mod declares
// modulePath.
func findRoot(dir string) (string, error) {
	for d := dir; ; {
		mod, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module "+modulePath+"\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of %s at or above %s", modulePath, dir)
		}
		d = parent
	}
}
