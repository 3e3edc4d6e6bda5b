package warc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/gridcrawl/gridcrawl/pkg/growbuf"
)

const (
	// MaxHeaderSize bounds the named fields of a record, version line and
	// blank line included.
	MaxHeaderSize = 1 << 20
	// DefaultMaxBlock is the block limit of a Reader whose MaxBlock is zero.
	DefaultMaxBlock = 64 << 20
	// maxBlankLines is how many stray blank lines may precede a record.
	maxBlankLines = 8
	// eagerAlloc is the block size up to which the block is allocated at
	// once; larger blocks grow as their bytes arrive, so a lying
	// Content-Length cannot make the reader allocate more than it reads.
	eagerAlloc = 1 << 20
)

var gzipMagic = []byte{0x1f, 0x8b}

// gzipReaders holds decompressors for ReadRecord: a decompressor's window
// and tables are larger than most records, so reusing them saves most of
// what reading a record allocates.
var gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}

// ReadRecord reads one record from r, which must be positioned at the start
// of a record: a gzip member holding it, or the plain record (detected from
// the first bytes). The block may be at most maxBlock bytes, else the error
// wraps ErrTooLarge; decompression stops at the limit too. ReadRecord may
// read past the end of the record: give it a reader bounded to the record,
// as Segment.Append's offset and length allow.
func ReadRecord(r io.Reader, maxBlock int64) (Record, error) {
	return ReadRecordWith(r, maxBlock, nil)
}

// ReadRecordWith is ReadRecord reading a block larger than 1 MiB through
// wrap (when not nil): a caller can bound the memory of concurrent reads
// (pkg/bytebudget, whose readers reserve the room the block is read into).
func ReadRecordWith(r io.Reader, maxBlock int64, wrap func(io.Reader) io.Reader) (Record, error) {
	if maxBlock < 0 {
		maxBlock = 0
	}
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err != nil && len(magic) == 0 {
		if err == io.EOF {
			return Record{}, fmt.Errorf("read warc record: %w", io.ErrUnexpectedEOF)
		}
		return Record{}, fmt.Errorf("read warc record: %w", err)
	}
	if !bytes.Equal(magic, gzipMagic) {
		rec, err := readRecord(br, maxBlock, wrap)
		if err == io.EOF {
			err = fmt.Errorf("read warc record: %w", io.ErrUnexpectedEOF)
		}
		return rec, err
	}
	zr := gzipReaders.Get().(*gzip.Reader)
	defer gzipReaders.Put(zr)
	if err := zr.Reset(br); err != nil {
		return Record{}, fmt.Errorf("read warc record: gzip: %w", err)
	}
	zr.Multistream(false)
	limited := io.LimitReader(zr, MaxHeaderSize+maxBlock+int64(len(trailer)))
	rec, err := readRecord(bufio.NewReader(limited), maxBlock, wrap)
	if err == io.EOF {
		err = fmt.Errorf("read warc record: %w", io.ErrUnexpectedEOF)
	}
	return rec, err
}

// Reader reads the records of a .warc or .warc.gz stream (any number of gzip
// members, each holding any number of records) in order.
type Reader struct {
	// MaxBlock bounds each record's block (DefaultMaxBlock if zero). Set it
	// before the first call to Next.
	MaxBlock int64

	src     io.Reader
	br      *bufio.Reader
	started bool
	err     error
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: r}
}

// Next returns the next record, or io.EOF after the last one. Any other
// error ends the stream: later calls return it again.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	if !r.started {
		r.started = true
		br := bufio.NewReader(r.src)
		r.br = br
		magic, err := br.Peek(2)
		if err != nil && len(magic) == 0 {
			if err != io.EOF {
				err = fmt.Errorf("read warc: %w", err)
			}
			r.err = err
			return Record{}, err
		}
		if bytes.Equal(magic, gzipMagic) {
			zr, err := gzip.NewReader(br)
			if err != nil {
				r.err = fmt.Errorf("read warc: gzip: %w", err)
				return Record{}, r.err
			}
			r.br = bufio.NewReader(zr)
		}
	}
	maxBlock := r.MaxBlock
	if maxBlock <= 0 {
		maxBlock = DefaultMaxBlock
	}
	rec, err := readRecord(r.br, maxBlock, nil)
	if err != nil {
		r.err = err
		return Record{}, err
	}
	return rec, nil
}

// readRecordNoTrailer reads one record up to the end of its block. It
// returns io.EOF, unwrapped, if the input ends before the record starts
// (stray blank lines aside).
func readRecordNoTrailer(br *bufio.Reader, maxBlock int64, wrap func(io.Reader) io.Reader) (Record, error) {
	rec, _, err := readRecordHead(br, maxBlock, wrap)
	return rec, err
}

// readHeader reads a record's version line and header fields, up to the
// blank line after them, and returns the header and its length in bytes.
func readHeader(br *bufio.Reader) (Header, int64, error) {
	budget := MaxHeaderSize
	var line []byte
	var err error
	headStart := budget
	for blanks := 0; ; blanks++ {
		headStart = budget
		line, err = readLine(br, &budget)
		if err == io.EOF && len(line) == 0 {
			return nil, 0, io.EOF
		}
		if err != nil {
			return nil, 0, headerErr(err)
		}
		if len(line) > 0 {
			break
		}
		if blanks >= maxBlankLines {
			return nil, 0, fmt.Errorf("read warc record: too many blank lines: %w", ErrMalformed)
		}
	}
	if !bytes.HasPrefix(line, []byte("WARC/")) {
		return nil, 0, fmt.Errorf("read warc record: version line %q: %w", truncate(line), ErrMalformed)
	}

	var h Header
	var value []byte // of the last field, which continuation lines extend
	flush := func() {
		if len(h) > 0 {
			h[len(h)-1].Value = string(value)
		}
	}
	for {
		line, err = readLine(br, &budget)
		if err != nil {
			return nil, 0, headerErr(err)
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(h) == 0 {
				return nil, 0, fmt.Errorf("read warc record: continuation line first: %w", ErrMalformed)
			}
			if len(value) > 0 {
				value = append(value, ' ')
			}
			value = append(value, bytes.TrimSpace(line)...)
			continue
		}
		name, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return nil, 0, fmt.Errorf("read warc record: field line %q: %w", truncate(line), ErrMalformed)
		}
		flush()
		h = append(h, Field{Name: string(bytes.TrimSpace(name))})
		value = append(value[:0], bytes.TrimSpace(v)...)
	}
	flush()
	headLen := int64(headStart - budget)
	return h, headLen, nil
}

// readRecordHead is readRecordNoTrailer that also returns how many bytes
// the header took, from its version line to its blank line.
func readRecordHead(br *bufio.Reader, maxBlock int64, wrap func(io.Reader) io.Reader) (Record, int64, error) {
	h, headLen, err := readHeader(br)
	if err != nil {
		return Record{}, 0, err
	}
	cl := h.Get(FieldContentLength)
	n, err := strconv.ParseInt(cl, 10, 64)
	if err != nil || n < 0 {
		return Record{}, 0, fmt.Errorf("read warc record: Content-Length %q: %w", truncate([]byte(cl)), ErrMalformed)
	}
	if n > maxBlock {
		return Record{}, 0, fmt.Errorf("read warc record: %d-byte block over the %d-byte limit: %w", n, maxBlock, ErrTooLarge)
	}
	var block []byte
	if n <= eagerAlloc {
		block = make([]byte, n)
		_, err = io.ReadFull(br, block)
	} else {
		// Doubling up to the exact size, not past it (bytes.Buffer would
		// end at twice the block).
		src := io.LimitReader(br, n)
		if wrap != nil {
			src = wrap(src)
		}
		block, err = growbuf.ReadAll(nil, src, eagerAlloc, n, false)
		if err == nil && int64(len(block)) < n {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Record{}, 0, fmt.Errorf("read warc record block: %w", err)
	}
	return Record{Header: h, Block: block}, headLen, nil
}

// readRecord reads one record and its trailer. It returns io.EOF, unwrapped,
// if the input ends before the record starts (stray blank lines aside).
func readRecord(br *bufio.Reader, maxBlock int64, wrap func(io.Reader) io.Reader) (Record, error) {
	rec, err := readRecordNoTrailer(br, maxBlock, wrap)
	if err == nil {
		skipTrailer(br)
	}
	return rec, err
}

// skipTrailer reads the two line ends after a record's block; it accepts
// bare LFs and a missing trailer at the end of the input.
func skipTrailer(br *bufio.Reader) {
	for range 2 {
		if c, err := br.Peek(1); err != nil || (c[0] != '\r' && c[0] != '\n') {
			break
		}
		if c, _ := br.ReadByte(); c == '\r' {
			if next, err := br.Peek(1); err == nil && next[0] == '\n' {
				br.ReadByte()
			}
		}
	}
}

func headerErr(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read warc record header: %w", err)
}

// readLine reads a line without its line end, charging it to budget. At the
// end of the input it returns the partial line with io.EOF.
func readLine(br *bufio.Reader, budget *int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		*budget -= len(chunk)
		if *budget < 0 {
			return nil, fmt.Errorf("header over %d bytes: %w", MaxHeaderSize, ErrTooLarge)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return line, err
		}
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, nil
	}
}

func truncate(b []byte) string {
	const max = 64
	if len(b) > max {
		return strings.ToValidUTF8(string(b[:max]), "?") + "..."
	}
	return strings.ToValidUTF8(string(b), "?")
}
