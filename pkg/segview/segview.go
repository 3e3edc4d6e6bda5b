// Package segview gives an export its part of a WARC segment. A loader
// appends the records of every crawl it fetches for to the segment it has
// open, so one segment may hold records of several crawls; a crawl's
// archive holds the crawl's records only. A View is that part: the
// segment's records that the export holds, byte for byte (each record of a
// .warc.gz segment is a gzip member of its own: nothing is recompressed),
// with the segment's index lines pointing into it.
//
// Which records an export holds (see warc.SelectRecords): the indexed
// records its Scope selects, with the records the loader wrote with each
// (its request record, a rendered page's DOM and the metadata about it),
// the records held alone (the originals of a deduplicated crawl's
// revisits), and the segment's warcinfo record. A segment whose index lines
// are all the export's own is held whole, read as stored; only a segment
// holding other crawls' records is read once more to tell its records
// apart, inflating the export's own records and those the index does not
// list (requests, metadata), and passing over the other crawls' indexed
// records as stored.
package segview

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// Scope says which of a segment's index lines an export holds.
type Scope struct {
	// Member reports whether line c's record is one of the export's own:
	// the records the loader wrote with it come with it.
	Member func(c warc.CDXJ) bool
	// Alone reports whether line c's record is held by itself, without
	// the records written with it (nil: none is).
	Alone func(c warc.CDXJ) bool
	// PartName is the file name of a view of part of the segment, which
	// its lines name ("" keeps the segment's): the parts two exports hold
	// of one segment are different files, which a collection of both
	// must not mix up.
	PartName string
}

// View is the part of a segment an export holds.
type View struct {
	// Key is the segment's key in the store.
	Key string
	// Name is the view's file name, which its index lines give ("": the
	// segment's).
	Name string
	// Sel is the part held; nil holds the whole object (up to Size).
	Sel *warc.Selection
	// Size is the view's size in bytes, -1 when unknown (the whole object
	// of a store that cannot tell its size).
	Size int64
	// Modified is when the segment was last written (zero: unknown).
	Modified time.Time
	// Lines counts the index lines held; Members those of the export's
	// own records.
	Lines, Members int
}

// Whole is the view of all of segment key, of unknown size: what a
// segment without an index holds for an export of it all.
func Whole(key string) View { return View{Key: key, Size: -1} }

// MaxLine bounds one index line.
const MaxLine = 1 << 20

// Build returns the view of segment key for scope and calls yield with
// each index line it holds (newline included; the slice is not kept after
// yield returns), its offset that of the record in the view, in the
// order stored. A segment stored without an index is indexed first. The
// extent of the segment is taken before its index is read: a record
// appended later (the segment of a running loader grows) is not in the
// view, nor its line. A missing segment is an error wrapping
// assets.ErrNotFound.
//
// Memory: the lines held of one segment, and one record's block (up to
// maxBlock) for a segment that holds other crawls' records.
func Build(ctx context.Context, store assets.Store, key string, scope Scope, maxBlock int64, yield func(line []byte) error) (View, error) {
	v := View{Key: key, Size: -1}
	if st, ok := store.(assets.Stater); ok {
		info, err := st.Stat(ctx, key)
		switch {
		case err == nil:
			v.Size, v.Modified = info.Size, info.Modified
		case errors.Is(err, errors.ErrUnsupported):
		default:
			return v, fmt.Errorf("stat segment %s: %w", key, err)
		}
	}
	type held struct {
		start, end int // in buf
		offset     int64
	}
	var (
		buf    []byte
		lines  []held
		shared bool
		own    = map[int64]bool{}
		alone  = map[int64]bool{}
		others = map[int64]int64{} // lengths of the indexed records not the export's own: passed over
	)
	err := eachLine(ctx, store, key, v.Size, maxBlock, func(line []byte) error {
		c, err := warc.ParseCDXJ(line)
		if err != nil {
			return fmt.Errorf("index of %s: %w", key, err)
		}
		if v.Size >= 0 && c.Offset+c.Length > v.Size {
			return nil // appended after the extent was taken
		}
		switch {
		case scope.Member(c):
			own[c.Offset] = true
			v.Members++
		case scope.Alone != nil && scope.Alone(c):
			alone[c.Offset] = true
			others[c.Offset] = c.Length
			shared = true
		default:
			others[c.Offset] = c.Length
			shared = true
			return nil
		}
		start := len(buf)
		buf = append(buf, bytes.TrimRight(line, "\r\n")...)
		buf = append(buf, '\n')
		lines = append(lines, held{start, len(buf), c.Offset})
		return nil
	})
	if err != nil {
		return v, err
	}
	v.Lines = len(lines)
	if shared {
		rc, err := store.Get(ctx, key, 0, v.Size)
		if err != nil {
			return v, fmt.Errorf("read segment %s: %w", key, err)
		}
		ranges, err := warc.SelectRecords(rc, maxBlock, func(o int64) bool { return own[o] }, func(o int64) bool { return alone[o] },
			func(o int64) (int64, bool) { n, ok := others[o]; return n, ok })
		rc.Close()
		if err != nil {
			return v, fmt.Errorf("segment %s: %w", key, err)
		}
		v.Sel = warc.NewSelection(ranges)
		v.Size = v.Sel.Size()
		v.Name = scope.PartName
	}
	var renamed []byte
	var out []byte
	for _, l := range lines {
		line := buf[l.start:l.end]
		if v.Sel != nil {
			off, ok := v.Sel.Map(l.offset)
			if !ok {
				v.Lines-- // a line whose record the segment does not hold
				continue
			}
			if out, err = setOffset(out[:0], line, off); err != nil {
				return v, fmt.Errorf("index of %s: %w", key, err)
			}
			line = out
			if v.Name != "" {
				if renamed, err = setFilename(renamed[:0], line, path.Base(key), v.Name); err != nil {
					return v, fmt.Errorf("index of %s: %w", key, err)
				}
				line = renamed
			}
		}
		if err := yield(line); err != nil {
			return v, err
		}
	}
	return v, nil
}

// eachLine calls f with each line of the index of segment key, or, for a
// segment stored without one, of the index made of its first size bytes
// (size < 0: all).
func eachLine(ctx context.Context, store assets.Store, key string, size, maxBlock int64, f func([]byte) error) error {
	rc, err := store.Get(ctx, assets.CDXJKey(key), 0, -1)
	if errors.Is(err, assets.ErrNotFound) {
		seg, err := store.Get(ctx, key, 0, size)
		if err != nil {
			return fmt.Errorf("read segment %s: %w", key, err)
		}
		defer seg.Close()
		lines, err := warc.IndexWARC(seg, path.Base(key), maxBlock)
		if err != nil {
			return fmt.Errorf("index segment %s: %w", key, err)
		}
		for _, l := range lines {
			if err := f(l); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read index of %s: %w", key, err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := f(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read index of %s: %w", key, err)
	}
	return nil
}

// offsetField starts the value of a CDXJ line's offset. A JSON string
// escapes its quotes, so the text appears nowhere else in a line.
var offsetField = []byte(`"offset": `)

// setOffset appends line to dst with its offset set to off, all else byte
// for byte as it was.
func setOffset(dst, line []byte, off int64) ([]byte, error) {
	i := bytes.Index(line, offsetField)
	if i < 0 {
		return nil, fmt.Errorf("index line %.80q has no offset: %w", line, warc.ErrMalformed)
	}
	i += len(offsetField)
	j := i
	quoted := j < len(line) && line[j] == '"'
	if quoted {
		j++
	}
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	if quoted {
		if j >= len(line) || line[j] != '"' {
			return nil, fmt.Errorf("index line %.80q: offset is not a number: %w", line, warc.ErrMalformed)
		}
		j++
	}
	dst = append(dst, line[:i]...)
	if quoted {
		dst = append(dst, '"')
	}
	dst = strconv.AppendInt(dst, off, 10)
	if quoted {
		dst = append(dst, '"')
	}
	return append(dst, line[j:]...), nil
}

// setFilename appends line to dst with its filename, from, set to to.
func setFilename(dst, line []byte, from, to string) ([]byte, error) {
	field := []byte(`"filename": "` + from + `"`)
	i := bytes.Index(line, field)
	if i < 0 {
		return nil, fmt.Errorf("index line %.80q does not name %s: %w", line, from, warc.ErrMalformed)
	}
	dst = append(dst, line[:i]...)
	dst = append(dst, `"filename": "`...)
	dst = append(dst, to...)
	dst = append(dst, '"')
	return append(dst, line[i+len(field):]...), nil
}

// maxGap is the most bytes between two ranges of a view read through
// (and dropped) rather than asked of the store apart.
const maxGap = 1 << 20

// Open returns a reader of the bytes [offset, offset+length) of v (length
// < 0: to its end). A view of part of a segment is read with one store
// read per run of its ranges less than maxGap apart.
func Open(ctx context.Context, store assets.Store, v View, offset, length int64) (io.ReadCloser, error) {
	if v.Sel == nil {
		if v.Size >= 0 && (length < 0 || offset+length > v.Size) {
			length = max(v.Size-offset, 0)
		}
		return store.Get(ctx, v.Key, offset, length)
	}
	return &rangeReader{ctx: ctx, store: store, key: v.Key, parts: v.Sel.Part(offset, length)}, nil
}

// rangeReader reads ranges of an object in order.
type rangeReader struct {
	ctx   context.Context
	store assets.Store
	key   string
	parts []warc.Range
	i     int   // the range being read
	done  int64 // of parts[i]
	rc    io.ReadCloser
	pos   int64 // where rc reads next
	end   int64 // where rc ends
}

func (r *rangeReader) Read(p []byte) (int, error) {
	for r.i < len(r.parts) {
		part := r.parts[r.i]
		if r.done == part.Length {
			r.i, r.done = r.i+1, 0
			continue
		}
		start := part.Offset + r.done
		if r.rc == nil || start < r.pos || start >= r.end {
			if err := r.openAt(start); err != nil {
				return 0, err
			}
		}
		if r.pos < start {
			n, err := io.CopyN(io.Discard, r.rc, start-r.pos)
			r.pos += n
			if err != nil {
				return 0, r.short(err)
			}
		}
		n, err := r.rc.Read(p[:min(int64(len(p)), part.Length-r.done)])
		r.pos += int64(n)
		r.done += int64(n)
		if n > 0 {
			return n, nil
		}
		if err != nil {
			return 0, r.short(err)
		}
	}
	return 0, io.EOF
}

// openAt opens the store's read from start to the end of the last range
// less than maxGap past the one being read.
func (r *rangeReader) openAt(start int64) error {
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
	end := r.parts[r.i].End()
	for j := r.i + 1; j < len(r.parts) && r.parts[j].Offset-end <= maxGap; j++ {
		end = r.parts[j].End()
	}
	rc, err := r.store.Get(r.ctx, r.key, start, end-start)
	if err != nil {
		return fmt.Errorf("read segment %s: %w", r.key, err)
	}
	r.rc, r.pos, r.end = rc, start, end
	return nil
}

func (r *rangeReader) short(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read segment %s at %d: %w", r.key, r.pos, err)
}

func (r *rangeReader) Close() error {
	if r.rc == nil {
		return nil
	}
	return r.rc.Close()
}
