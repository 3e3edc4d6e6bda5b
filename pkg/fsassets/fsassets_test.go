package fsassets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/assets/assetstest"
)

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	assetstest.Run(t, assetstest.Harness{
		New: func(t *testing.T) assets.Store { return openStore(t, t.TempDir()) },
		Reopen: func(t *testing.T, x assets.Store) assets.Store {
			s := x.(*Store)
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openStore(t, s.dir)
		},
	})
}

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name, key string
		valid     bool
	}{
		{"simple", "a", true},
		{"nested", "crawl/2024/seg-00001.warc.gz", true},
		{"spaces and symbols", "a b/c=d+e~f@g", true},
		{"unicode", "crawl/straße/файл", true},
		{"dot inside", "a/b.c/d..e", true},
		{"max length", strings.Repeat("a/", MaxKeyLen/2-1) + "ab", true},
		{"max segment", strings.Repeat("x", MaxSegmentLen), true},
		{"empty", "", false},
		{"absolute", "/etc/passwd", false},
		{"trailing slash", "a/", false},
		{"double slash", "a//b", false},
		{"dot dot", "a/../b", false},
		{"leading dot dot", "../b", false},
		{"dot", "./a", false},
		{"only dot dot", "..", false},
		{"hidden segment", "a/.hidden", false},
		{"temp file name", "a/" + tmpPrefix + "123", false},
		{"backslash", `a\b`, false},
		{"windows parent", `..\b`, false},
		{"nul", "a\x00b", false},
		{"newline", "a\nb", false},
		{"delete char", "a\x7fb", false},
		{"invalid utf-8", "a\xffb", false},
		{"too long", strings.Repeat("a/", MaxKeyLen/2) + "a", false},
		{"segment too long", strings.Repeat("x", MaxSegmentLen+1), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateKey(tc.key)
			if got := err == nil; got != tc.valid {
				t.Errorf("ValidateKey(%q) = %v, want valid %v", tc.key, err, tc.valid)
			}
			if err != nil && !errors.Is(err, ErrInvalidKey) {
				t.Errorf("ValidateKey(%q) = %v, want it to wrap ErrInvalidKey", tc.key, err)
			}
		})
	}
}

func TestInvalidKeysRejected(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "store"))
	for _, key := range []string{"../escape", "/abs", "a//b", ".put-x"} {
		err := s.Put(t.Context(), key, strings.NewReader("x"), 1, "")
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) error = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Get(t.Context(), key, 0, -1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) error = %v, want ErrInvalidKey", key, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file escaped the store directory: stat error %v", err)
	}
}

func TestPutSizeMismatch(t *testing.T) {
	s := openStore(t, t.TempDir())
	for _, tc := range []struct {
		name string
		data string
		size int64
	}{
		{"short reader", "abc", 5},
		{"long reader", "abcdef", 3},
	} {
		key := "mismatch/" + strings.ReplaceAll(tc.name, " ", "-")
		if err := s.Put(t.Context(), key, strings.NewReader(tc.data), tc.size, ""); err == nil {
			t.Errorf("%s: Put(%q, %d bytes, size %d) = nil, want an error", tc.name, key, len(tc.data), tc.size)
		}
		if _, err := s.Get(t.Context(), key, 0, -1); !errors.Is(err, assets.ErrNotFound) {
			t.Errorf("%s: Get(%q) after a failed Put: error %v, want ErrNotFound", tc.name, key, err)
		}
	}
	// Unknown size.
	if err := s.Put(t.Context(), "unknown", strings.NewReader("abcdef"), -1, ""); err != nil {
		t.Fatalf("Put(size -1) error: %v", err)
	}
	rc, err := s.Get(t.Context(), "unknown", 0, -1)
	if err != nil {
		t.Fatalf("Get error: %v", err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "abcdef" {
		t.Errorf("Get(unknown) = %q, want %q", b, "abcdef")
	}
	// No temporary file is left behind, and none is listed.
	keys, err := s.List(t.Context(), "")
	if err != nil || len(keys) != 1 || keys[0] != "unknown" {
		t.Errorf("List() = %q, %v, want [unknown]", keys, err)
	}
	entries, err := os.ReadDir(filepath.Join(s.dir, "mismatch"))
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	if len(entries) != 0 {
		t.Errorf("failed Puts left %d files behind", len(entries))
	}
}

func TestPutCancelled(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, "k", strings.NewReader("x"), 1, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context: error %v, want context.Canceled", err)
	}
}

func TestKeyConflicts(t *testing.T) {
	s := openStore(t, t.TempDir())
	put := func(key string) error {
		return s.Put(t.Context(), key, bytes.NewReader([]byte(key)), int64(len(key)), "")
	}
	if err := put("a/b"); err != nil {
		t.Fatalf("Put(a/b): %v", err)
	}
	if err := put("a"); err == nil {
		t.Errorf("Put(a) over the directory of a/b = nil, want an error")
	}
	if err := put("x"); err != nil {
		t.Fatalf("Put(x): %v", err)
	}
	if err := put("x/y"); err == nil {
		t.Errorf("Put(x/y) under the object x = nil, want an error")
	}
	for _, key := range []string{"a", "x/y"} {
		if _, err := s.Get(t.Context(), key, 0, -1); !errors.Is(err, assets.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
		}
	}
	keys, err := s.List(t.Context(), "x/")
	if err != nil || len(keys) != 0 {
		t.Errorf("List(x/) = %q, %v, want none", keys, err)
	}
}

func TestGetOffsetPastEnd(t *testing.T) {
	s := openStore(t, t.TempDir())
	if err := s.Put(t.Context(), "k", strings.NewReader("abc"), 3, ""); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := s.Get(t.Context(), "k", 4, -1); err == nil {
		t.Errorf("Get(k, 4, -1) of a 3-byte object = nil error, want an error")
	}
	rc, err := s.Get(t.Context(), "k", 3, -1)
	if err != nil {
		t.Fatalf("Get(k, 3, -1) error: %v", err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); len(b) != 0 {
		t.Errorf("Get(k, 3, -1) = %q, want empty", b)
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "a/./b", "/x", `a\b`, "a//b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if ValidateKey(key) != nil {
			return
		}
		// A valid key stays inside the store directory.
		p := filepath.Join("/store", filepath.FromSlash(key))
		if !strings.HasPrefix(p, "/store/") || filepath.Clean(p) != p {
			t.Errorf("ValidateKey(%q) = nil, but it maps to %q", key, p)
		}
	})
}

// TestWritesOnAFullDisk fills a small tmpfs: an Append that runs out of
// space mid-write is cut back to the object's old size (readers of a WARC
// segment never see a partial record), a failed Put leaves neither object
// nor temporary file, and both work again once the file system is grown.
// Without the right to mount, the test fails when backends are required
// and skips otherwise.
func TestWritesOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs (needs root): %v: %s", err, out)
		if os.Getenv("GRIDCRAWL_REQUIRE_BACKENDS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	s := openStore(t, dir)
	ctx := t.Context()
	first := bytes.Repeat([]byte("a"), 256<<10)
	if _, err := s.Append(ctx, "seg", bytes.NewReader(first), int64(len(first))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		write func(b []byte) error
	}{
		{"append", func(b []byte) error {
			_, err := s.Append(ctx, "seg", bytes.NewReader(b), int64(len(b)))
			return err
		}},
		{"put", func(b []byte) error { return s.Put(ctx, "obj", bytes.NewReader(b), int64(len(b)), "") }},
	}
	big := bytes.Repeat([]byte("b"), 2<<20)
	for _, tt := range tests {
		if err := tt.write(big); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s of 2 MiB on a 1 MiB disk = %v, want ENOSPC", tt.name, err)
		}
	}
	checkObject(t, s, "seg", first)
	if _, err := s.Get(ctx, "obj", 0, -1); !errors.Is(err, assets.ErrNotFound) {
		t.Errorf("Get of the failed Put = %v, want not found", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 {
		t.Errorf("data directory holds %v (%v), want only seg", ents, err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=8m", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	for _, tt := range tests {
		if err := tt.write(big); err != nil {
			t.Errorf("%s once space was freed: %v", tt.name, err)
		}
	}
	checkObject(t, s, "seg", append(append([]byte(nil), first...), big...))
	checkObject(t, s, "obj", big)
}

func checkObject(t *testing.T, s *Store, key string, want []byte) {
	t.Helper()
	rc, err := s.Get(t.Context(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s holds %d bytes (%v), want its %d bytes", key, len(got), err, len(want))
	}
}
