// Package assetstest is the conformance suite of assets.Store: every
// implementation, local or remote, must pass Run.
//
// The suite tolerates a store shared with other tests: every test writes
// under a key prefix of its own.
package assetstest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
)

// Harness makes the stores under test.
type Harness struct {
	// New returns a store, closed by the harness when t ends.
	New func(t *testing.T) assets.Store
	// Reopen closes x and returns a new store on the same storage. Nil skips
	// the restart test.
	Reopen func(t *testing.T, x assets.Store) assets.Store
}

// Run runs the conformance suite against h. Stores that implement
// assets.Appender also run the Append tests, and assets.Stater the Stat
// test; the others skip them.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"PutGet", testPutGet},
		{"GetRange", testGetRange},
		{"NotFound", testNotFound},
		{"Replace", testReplace},
		{"PutIsAtomic", testAtomic},
		{"List", testList},
		{"Large", testLarge},
		{"Reopen", testReopen},
		{"Append", testAppend},
		{"AppendReopen", testAppendReopen},
		{"Stat", testStat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, h) })
	}
}

// prefix returns a key prefix no other test or run uses.
func prefix() string { return "assetstest/" + strings.ToLower(rand.Text()) + "/" }

// data returns n reproducible pseudo-random bytes.
func data(n int, seed uint64) []byte {
	r := mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

func mustPut(t *testing.T, s assets.Store, key string, b []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)), "application/warc"); err != nil {
		t.Fatalf("Put(%q, %d bytes) error: %v", key, len(b), err)
	}
}

func get(t *testing.T, s assets.Store, key string, offset, length int64) ([]byte, error) {
	t.Helper()
	rc, err := s.Get(t.Context(), key, offset, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func mustGet(t *testing.T, s assets.Store, key string, offset, length int64) []byte {
	t.Helper()
	b, err := get(t, s, key, offset, length)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d) error: %v", key, offset, length, err)
	}
	return b
}

func testPutGet(t *testing.T, h Harness) {
	s := h.New(t)
	p := prefix()
	for _, tc := range []struct {
		name string
		key  string
		data []byte
	}{
		{"small", p + "small.warc.gz", []byte("WARC/1.1\r\nWARC-Type: response\r\n\r\n")},
		{"empty", p + "empty", []byte{}},
		{"nested key", p + "a/b/c/d.warc", data(70_000, 1)},
		{"odd characters", p + "crawl id=1/seg+ment 2 ~x.warc", []byte("odd")},
	} {
		mustPut(t, s, tc.key, tc.data)
		if got := mustGet(t, s, tc.key, 0, -1); !bytes.Equal(got, tc.data) {
			t.Errorf("%s: Get(%q) = %d bytes, want the %d bytes put", tc.name, tc.key, len(got), len(tc.data))
		}
	}
}

func testGetRange(t *testing.T, h Harness) {
	s := h.New(t)
	key := prefix() + "range.warc"
	b := data(10_000, 2)
	mustPut(t, s, key, b)
	for _, tc := range []struct {
		name           string
		offset, length int64
		want           []byte
	}{
		{"head", 0, 100, b[:100]},
		{"middle", 1234, 4321, b[1234 : 1234+4321]},
		{"tail by length", 9000, 1000, b[9000:]},
		{"to end", 5000, -1, b[5000:]},
		{"one byte", 9999, 1, b[9999:]},
		{"last byte to end", 9999, -1, b[9999:]},
		{"length past end", 9500, 2000, b[9500:]},
	} {
		got := mustGet(t, s, key, tc.offset, tc.length)
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: Get(%q, %d, %d) = %d bytes, want %d bytes", tc.name, key, tc.offset, tc.length, len(got), len(tc.want))
		}
	}
}

func testNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	p := prefix()
	mustPut(t, s, p+"dir/present", []byte("x"))
	for _, key := range []string{p + "absent", p + "dir/absent", p + "absent/deeper/key"} {
		if _, err := get(t, s, key, 0, -1); !errors.Is(err, assets.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
		}
		if _, err := get(t, s, key, 10, 5); !errors.Is(err, assets.ErrNotFound) {
			t.Errorf("Get(%q, 10, 5) error = %v, want ErrNotFound", key, err)
		}
	}
}

func testReplace(t *testing.T, h Harness) {
	s := h.New(t)
	p := prefix()
	key := p + "replaced"
	mustPut(t, s, key, data(5000, 3))
	second := []byte("shorter second version")
	mustPut(t, s, key, second)
	if got := mustGet(t, s, key, 0, -1); !bytes.Equal(got, second) {
		t.Errorf("Get(%q) after replace = %q, want %q", key, got, second)
	}
	keys, err := s.List(t.Context(), p)
	if err != nil {
		t.Fatalf("List(%q) error: %v", p, err)
	}
	if diff := cmp.Diff([]string{key}, keys); diff != "" {
		t.Errorf("List(%q) after replace (-want +got):\n%s", p, diff)
	}
}

// testAtomic replaces an object while others read it: every read must see
// one whole version.
func testAtomic(t *testing.T, h Harness) {
	s := h.New(t)
	key := prefix() + "atomic"
	const size = 256 << 10
	versions := [][]byte{bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size)}
	mustPut(t, s, key, versions[0])
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				b, err := get(t, s, key, 0, -1)
				if err != nil {
					errs <- fmt.Errorf("Get(%q) during replace: %w", key, err)
					return
				}
				if !bytes.Equal(b, versions[0]) && !bytes.Equal(b, versions[1]) {
					errs <- fmt.Errorf("Get(%q) during replace read %d bytes that are neither version", key, len(b))
					return
				}
			}
		})
	}
	for i := range 20 {
		if err := s.Put(t.Context(), key, bytes.NewReader(versions[i%2]), size, "application/octet-stream"); err != nil {
			t.Errorf("Put(%q) #%d error: %v", key, i, err)
			break
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testList(t *testing.T, h Harness) {
	s := h.New(t)
	p := prefix()
	keys := []string{"a/2", "a/1", "a-x", "a/b/deep", "ab", "b", "c/x/y/z"}
	for _, k := range keys {
		mustPut(t, s, p+k, []byte(k))
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a-x", "a/1", "a/2", "a/b/deep", "ab", "b", "c/x/y/z"}},
		{"a", []string{"a-x", "a/1", "a/2", "a/b/deep", "ab"}},
		{"a/", []string{"a/1", "a/2", "a/b/deep"}},
		{"a/b", []string{"a/b/deep"}},
		{"c/x/", []string{"c/x/y/z"}},
		{"b", []string{"b"}},
		{"zz", nil},
		{"zz/", nil},
	} {
		got, err := s.List(t.Context(), p+tc.prefix)
		if err != nil {
			t.Errorf("List(%q) error: %v", p+tc.prefix, err)
			continue
		}
		var rel []string
		for _, k := range got {
			if !strings.HasPrefix(k, p+tc.prefix) {
				t.Errorf("List(%q) returned %q", p+tc.prefix, k)
				continue
			}
			rel = append(rel, strings.TrimPrefix(k, p))
		}
		if diff := cmp.Diff(tc.want, rel); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", p+tc.prefix, diff)
		}
	}
}

func testLarge(t *testing.T, h Harness) {
	s := h.New(t)
	key := prefix() + "large.warc.gz"
	b := data(8<<20, 4)
	mustPut(t, s, key, b)
	if got := mustGet(t, s, key, 0, -1); !bytes.Equal(got, b) {
		t.Errorf("Get(%q) = %d bytes, not the %d bytes put", key, len(got), len(b))
	}
	off, n := int64(5<<20+17), int64(1<<20+3)
	if got := mustGet(t, s, key, off, n); !bytes.Equal(got, b[off:off+n]) {
		t.Errorf("Get(%q, %d, %d) = %d bytes, not the bytes put", key, off, n, len(got))
	}
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("harness has no Reopen")
	}
	s := h.New(t)
	p := prefix()
	b := data(3000, 5)
	mustPut(t, s, p+"x/kept", b)
	s = h.Reopen(t, s)
	if got := mustGet(t, s, p+"x/kept", 1000, 10); !bytes.Equal(got, b[1000:1010]) {
		t.Errorf("Get after reopen = %x, want %x", got, b[1000:1010])
	}
	keys, err := s.List(t.Context(), p)
	if err != nil || !cmp.Equal(keys, []string{p + "x/kept"}) {
		t.Errorf("List(%q) after reopen = %q, %v, want [%q]", p, keys, err, p+"x/kept")
	}
}

// appender returns s as an assets.Appender, or skips t.
func appender(t *testing.T, s assets.Store) assets.Appender {
	t.Helper()
	a, ok := s.(assets.Appender)
	if !ok {
		t.Skip("store does not implement assets.Appender")
	}
	return a
}

func mustAppend(t *testing.T, a assets.Appender, key string, b []byte) int64 {
	t.Helper()
	off, err := a.Append(t.Context(), key, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("Append(%q, %d bytes) error: %v", key, len(b), err)
	}
	return off
}

// testAppend checks that appends return the previous size as offset, that
// every range returned stays readable while the object grows, and that a
// failed append leaves the object unchanged.
func testAppend(t *testing.T, h Harness) {
	s := h.New(t)
	a := appender(t, s)
	key := prefix() + "seg/open.warc.gz"
	var all []byte
	type span struct{ off, n int64 }
	var spans []span
	for i, n := range []int{1, 700, 70_000, 3} {
		b := data(n, uint64(10+i))
		off := mustAppend(t, a, key, b)
		if off != int64(len(all)) {
			t.Fatalf("Append #%d offset = %d, want %d (the size before)", i, off, len(all))
		}
		all = append(all, b...)
		spans = append(spans, span{off, int64(n)})
		for j, sp := range spans {
			if got := mustGet(t, s, key, sp.off, sp.n); !bytes.Equal(got, all[sp.off:sp.off+sp.n]) {
				t.Fatalf("after append #%d, Get(%q, %d, %d) of append #%d = %d bytes, not the bytes appended", i, key, sp.off, sp.n, j, len(got))
			}
		}
	}
	if got := mustGet(t, s, key, 0, -1); !bytes.Equal(got, all) {
		t.Errorf("Get(%q) = %d bytes, want the %d bytes appended", key, len(got), len(all))
	}
	// A reader that gives fewer bytes than announced fails the append.
	if _, err := a.Append(t.Context(), key, bytes.NewReader([]byte("short")), 10); err == nil {
		t.Errorf("Append(%q) of 5 bytes announced as 10: no error", key)
	}
	if got := mustGet(t, s, key, 0, -1); !bytes.Equal(got, all) {
		t.Errorf("after a failed append, Get(%q) = %d bytes, want the %d bytes appended before", key, len(got), len(all))
	}
	if off := mustAppend(t, a, key, []byte("end")); off != int64(len(all)) {
		t.Errorf("Append after a failed one: offset %d, want %d", off, len(all))
	}
	keys, err := s.List(t.Context(), strings.TrimSuffix(key, "open.warc.gz"))
	if err != nil || !cmp.Equal(keys, []string{key}) {
		t.Errorf("List = %q, %v, want [%q]", keys, err, key)
	}
}

// testAppendReopen checks that appended bytes survive a restart and that
// appending continues at the end.
func testAppendReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("harness has no Reopen")
	}
	s := h.New(t)
	a := appender(t, s)
	key := prefix() + "kept.warc"
	b1, b2 := data(5000, 21), data(100, 22)
	mustAppend(t, a, key, b1)
	s = h.Reopen(t, s)
	a = appender(t, s)
	if off := mustAppend(t, a, key, b2); off != int64(len(b1)) {
		t.Errorf("Append after reopen: offset %d, want %d", off, len(b1))
	}
	if got := mustGet(t, s, key, 0, -1); !bytes.Equal(got, append(b1, b2...)) {
		t.Errorf("Get after reopen = %d bytes, want %d", len(got), len(b1)+len(b2))
	}
}

func testStat(t *testing.T, h Harness) {
	s := h.New(t)
	st, ok := s.(assets.Stater)
	if !ok {
		t.Skip("not an assets.Stater")
	}
	p := prefix()
	b := data(12345, 7)
	before := time.Now().Add(-time.Minute)
	mustPut(t, s, p+"dir/obj", b)
	info, err := st.Stat(t.Context(), p+"dir/obj")
	if err != nil || info.Size != int64(len(b)) || info.Modified.Before(before) || info.Modified.After(time.Now().Add(time.Minute)) {
		t.Errorf("Stat = %+v, %v, want size %d, modified about now", info, err, len(b))
	}
	if ap, ok := s.(assets.Appender); ok {
		if _, err := ap.Append(t.Context(), p+"dir/obj", bytes.NewReader(b[:5]), 5); err != nil {
			t.Fatal(err)
		}
		if info, err := st.Stat(t.Context(), p+"dir/obj"); err != nil || info.Size != int64(len(b)+5) {
			t.Errorf("Stat after Append = %+v, %v, want size %d", info, err, len(b)+5)
		}
	}
	for _, key := range []string{p + "absent", p + "dir", p + "dir/obj/deeper"} {
		if _, err := st.Stat(t.Context(), key); !errors.Is(err, assets.ErrNotFound) {
			t.Errorf("Stat(%q) error = %v, want ErrNotFound", key, err)
		}
	}
}
