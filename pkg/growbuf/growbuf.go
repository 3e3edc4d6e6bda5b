// Package growbuf reads a stream of bounded length into one slice that grows
// as its bytes arrive, and never past the bound.
//
// bytes.Buffer.ReadFrom and io.ReadAll grow by doubling (or by a quarter,
// for large slices) past what the stream holds: an 8 MiB body read through
// them allocates 16 MiB of buffer and as much again of discarded smaller
// ones, and a copy into an exact slice adds its size once more. Where bodies
// at the size cap are what a hostile web sends, that multiplies a service's
// peak memory. ReadAll allocates, for a stream cut at its bound of n bytes,
// n when the length is announced, and less than 2n otherwise, with the last
// step landing on the bound rather than past it.
package growbuf

import "io"

// ReadAll appends the bytes of r to dst until io.EOF or until limit bytes
// were appended, and returns the extended slice. The bytes of dst are kept
// and not counted in limit.
//
// The room beyond dst starts at first bytes (at most limit). When announced
// is true, limit is the stream's announced length (plus one, to see its
// end), or the bound if that is smaller: once first bytes have arrived, the
// rest is allocated at once, so a stream that lies about its length costs
// at most limit, and only once it has sent first bytes. Otherwise the room
// doubles as it fills, and takes limit at once when doubling again would
// pass it: less than twice what was read for a stream that reaches the
// limit, less than four times for one that ends before (io.ReadAll's
// growth allocates about as much).
//
// When r has a method Reserve(n int64) error (a pkg/bytebudget Reader),
// ReadAll calls it with the room beyond dst before allocating that room, so
// that a budget of bytes read bounds what is allocated too; its error ends
// the read.
//
// An error other than io.EOF is returned with the bytes read so far.
func ReadAll(dst []byte, r io.Reader, first, limit int64, announced bool) ([]byte, error) {
	base := len(dst)
	first = min(max(first, 0), limit)
	res, _ := r.(reserver)
	if res != nil {
		if err := res.Reserve(max(first, int64(cap(dst)-base))); err != nil {
			return dst, err
		}
	}
	if int64(cap(dst)-base) < first {
		grown := make([]byte, base, base+int(first))
		copy(grown, dst)
		dst = grown
	}
	for {
		if len(dst) == cap(dst) {
			have := int64(cap(dst) - base)
			if have >= limit {
				return dst, nil
			}
			next := limit
			if !announced && 4*have < limit {
				next = 2 * have
			}
			next = min(max(next, 512), limit)
			if res != nil {
				if err := res.Reserve(next); err != nil {
					return dst, err
				}
			}
			grown := make([]byte, len(dst), base+int(next))
			copy(grown, dst)
			dst = grown
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// reserver is a reader that takes a share of a memory budget for room
// before it is allocated.
type reserver interface {
	Reserve(n int64) error
}
