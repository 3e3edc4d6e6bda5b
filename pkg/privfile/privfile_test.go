package privfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestModes(t *testing.T) {
	old := syscall.Umask(0) // the most permissive umask: the modes must come from this package
	t.Cleanup(func() { syscall.Umask(old) })
	root := t.TempDir()

	dir := filepath.Join(root, "a", "b")
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "db")
	if err := Touch(file); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(root, "existing")
	if err := os.WriteFile(existing, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Touch(existing); err != nil {
		t.Fatal(err)
	}
	if err := Touch(filepath.Join(root, "missing", "db")); err == nil {
		t.Error("Touch in a missing directory succeeded, want an error")
	}

	tests := []struct {
		path string
		want os.FileMode
	}{
		{filepath.Join(root, "a"), DirMode},
		{dir, DirMode},
		{file, FileMode},
		{existing, 0o640}, // left as it was, content too
	}
	for _, tt := range tests {
		fi, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != tt.want {
			t.Errorf("%s: mode %v, want %v", tt.path, got, tt.want)
		}
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "x" {
		t.Errorf("existing file = %q, %v; want it untouched", b, err)
	}
}
