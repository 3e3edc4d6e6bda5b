package growbuf

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

// TestReadAll: ReadAll returns what the stream holds up to the limit, after
// dst's bytes, and allocates at most the stated multiple of what it
// returns: at the limit, once the size when the length is announced and
// under twice when it is not, never a step past the limit; a stream that
// ends early, under four times (at most the announced length).
func TestReadAll(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name        string
		stream      int   // bytes the stream holds
		first, most int64 // ReadAll's first and limit
		announced   bool
		small       bool    // the stream returns one byte per Read at first
		maxAlloc    float64 // times the bytes returned, plus 64 KiB
	}{
		{name: "announced, at the limit", stream: 8 * mib, first: 256 << 10, most: 8 * mib, announced: true, maxAlloc: 1.05},
		{name: "announced, over the limit", stream: 20 * mib, first: 256 << 10, most: 8*mib + 1, announced: true, maxAlloc: 1.05},
		{name: "announced, ends early", stream: 300 << 10, first: 256 << 10, most: 8 * mib, announced: true, maxAlloc: 29}, // 8 MiB and first, no more
		{name: "unknown, at the limit", stream: 8 * mib, first: 32 << 10, most: 8 * mib, maxAlloc: 2},
		{name: "unknown, one byte over a power of two", stream: 8*mib + 1, first: 32 << 10, most: 8*mib + 1, maxAlloc: 2},
		{name: "unknown, endless", stream: 64 * mib, first: 32 << 10, most: 8*mib + 1, maxAlloc: 2},
		{name: "unknown, odd limit", stream: 64 * mib, first: 32 << 10, most: 5*mib + 7, maxAlloc: 2},
		{name: "unknown, small", stream: 20 << 10, first: 32 << 10, most: 8 * mib, maxAlloc: 1},
		{name: "unknown, trickled", stream: 100 << 10, first: 1, most: 8 * mib, small: true, maxAlloc: 4},
		{name: "empty", stream: 0, first: 32 << 10, most: 8 * mib, maxAlloc: 0},
		{name: "zero limit", stream: 10, first: 32 << 10, most: 0, maxAlloc: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := make([]byte, tc.stream)
			for i := range src {
				src[i] = byte(i * 7)
			}
			var r io.Reader = bytes.NewReader(src)
			if tc.small {
				r = io.MultiReader(iotest.OneByteReader(io.LimitReader(r, 1000)), r)
			}
			dst := append(make([]byte, 0, 3), "abc"...)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got, err := ReadAll(dst, r, tc.first, tc.most, tc.announced)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatalf("ReadAll: %v", err)
			}
			want := append([]byte("abc"), src[:min(int64(len(src)), tc.most)]...)
			if !bytes.Equal(got, want) {
				t.Fatalf("ReadAll returned %d bytes, want the %d of dst and the stream", len(got), len(want))
			}
			n := float64(len(got) - 3)
			if alloc := float64(after.TotalAlloc - before.TotalAlloc); alloc > tc.maxAlloc*n+64<<10 {
				t.Errorf("ReadAll of %.0f bytes allocated %.0f, want at most %.2f times", n, alloc, tc.maxAlloc)
			}
		})
	}
}

// TestReadAllError: an error of the reader comes back with the bytes read
// before it.
func TestReadAllError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader([]byte("hello")), iotest.ErrReader(boom))
	got, err := ReadAll(nil, r, 2, 100, false)
	if !errors.Is(err, boom) || string(got) != "hello" {
		t.Errorf("ReadAll = %q, %v; want %q, %v", got, err, "hello", boom)
	}
}

// reservingReader records the room ReadAll reserves.
type reservingReader struct {
	io.Reader
	reserved int64 // the largest reservation
	calls    int
	refuse   error
}

func (r *reservingReader) Reserve(n int64) error {
	r.calls++
	if r.refuse != nil {
		return r.refuse
	}
	r.reserved = max(r.reserved, n)
	return nil
}

// TestReadAllReserves: a reader that takes budget for room gets every room
// reserved before it is allocated, announced or not, and a refusal ends the
// read.
func TestReadAllReserves(t *testing.T) {
	for _, announced := range []bool{false, true} {
		r := &reservingReader{Reader: bytes.NewReader(make([]byte, 3<<20))}
		got, err := ReadAll(nil, r, 64<<10, 8<<20, announced)
		if err != nil {
			t.Fatal(err)
		}
		if r.reserved < int64(cap(got)) {
			t.Errorf("announced %v: reserved at most %d bytes for a room of %d", announced, r.reserved, cap(got))
		}
	}
	boom := errors.New("no memory")
	r := &reservingReader{Reader: bytes.NewReader(make([]byte, 3<<20)), refuse: boom}
	if _, err := ReadAll(nil, r, 64<<10, 8<<20, false); !errors.Is(err, boom) || r.calls != 1 {
		t.Errorf("ReadAll with a refused reservation = %v after %d calls, want %v after 1", err, r.calls, boom)
	}
}
