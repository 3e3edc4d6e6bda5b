package warc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
)

// Scanned is a record read by a Scanner, with where and how it lies in the
// file: what a WAT envelope's Container says about it.
type Scanned struct {
	Record
	// Offset and Length locate the record in the file: its gzip member
	// when Compressed, else the record from its version line to the end
	// of its trailer.
	Offset, Length int64
	Compressed     bool
	// HeaderLength is the bytes of the WARC header, version line to blank
	// line; SlopLength the bytes after the block (the trailer).
	HeaderLength, SlopLength int64
	// Gzip describes the record's gzip member when Compressed.
	Gzip GzipMember
}

// GzipMember is what a WAT envelope's Gzip-Metadata says about a member.
type GzipMember struct {
	HeaderLength, FooterLength, InflatedLength int64
	InflatedCRC                                uint32
}

// Scanner reads the records of a .warc or .warc.gz stream in order, one at
// a time, with each one's place in the stream (Scanned). A compressed
// stream must hold one record per gzip member, as Segment writes it and as
// is customary. Only the record being read is held in memory.
type Scanner struct {
	maxBlock int64
	cr       *byteCounter
	br       *bufio.Reader
	zr       *gzip.Reader
	err      error
	spans    func(offset int64) (length int64, ok bool)
}

// Skip makes the scanner pass over, without inflating them, the
// compressed records whose gzip member's length spans tells by its offset
// (as an index of the file gives them): such a record comes back with its
// Offset, Length and Compressed only, and a nil Header. The file's index
// must be right, or the scan fails at the next record.
func (s *Scanner) Skip(spans func(offset int64) (length int64, ok bool)) { s.spans = spans }

// NewScanner returns a Scanner reading r; a record's block may be at most
// maxBlock bytes (DefaultMaxBlock if not positive), else Next fails with an
// error wrapping ErrTooLarge.
func NewScanner(r io.Reader, maxBlock int64) *Scanner {
	if maxBlock <= 0 {
		maxBlock = DefaultMaxBlock
	}
	cr := &byteCounter{r: r}
	return &Scanner{maxBlock: maxBlock, cr: cr, br: bufio.NewReaderSize(cr, 64<<10)}
}

// crcCounter counts and checksums the bytes read through it.
type crcCounter struct {
	r   io.Reader
	n   int64
	crc uint32
}

func (c *crcCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.crc = crc32.Update(c.crc, crc32.IEEETable, p[:n])
	return n, err
}

func (s *Scanner) pos() int64 { return s.cr.n - int64(s.br.Buffered()) }

// Next returns the next record, or io.EOF after the last one. Any other
// error ends the scan: later calls return it again.
func (s *Scanner) Next() (Scanned, error) {
	if s.err != nil {
		return Scanned{}, s.err
	}
	sc, err := s.next()
	if err != nil {
		s.err = err
	}
	return sc, err
}

func (s *Scanner) next() (Scanned, error) {
	start := s.pos()
	magic, err := s.br.Peek(2)
	if len(magic) == 0 && errors.Is(err, io.EOF) {
		return Scanned{}, io.EOF
	}
	if !bytes.Equal(magic, gzipMagic) {
		rec, head, err := readRecordHead(s.br, s.maxBlock, nil)
		if err == io.EOF {
			return Scanned{}, io.EOF // blank lines at the end
		}
		if err != nil {
			return Scanned{}, fmt.Errorf("scan warc at %d: %w", start, err)
		}
		end := s.pos()
		skipTrailer(s.br)
		return Scanned{Record: rec, Offset: start, Length: s.pos() - start, HeaderLength: head,
			SlopLength: s.pos() - end}, nil
	}
	if s.spans != nil {
		if n, ok := s.spans(start); ok && n > 0 {
			return s.pass(start, n)
		}
	}
	if s.zr == nil {
		s.zr, err = gzip.NewReader(s.br)
	} else {
		err = s.zr.Reset(s.br)
	}
	if err != nil {
		return Scanned{}, fmt.Errorf("scan warc at %d: gzip: %w", start, err)
	}
	gzHead := s.pos() - start
	s.zr.Multistream(false)
	inflated := &crcCounter{r: s.zr}
	zbr := bufio.NewReader(inflated)
	rec, head, err := readRecordHead(zbr, s.maxBlock, nil)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		// Drain the member, so that its footer is read and checked.
		_, err = io.Copy(io.Discard, zbr)
	}
	if err != nil {
		return Scanned{}, fmt.Errorf("scan warc at %d: %w", start, err)
	}
	length := s.pos() - start
	return Scanned{Record: rec, Offset: start, Length: length, Compressed: true, HeaderLength: head,
		SlopLength: inflated.n - head - int64(len(rec.Block)),
		Gzip:       GzipMember{HeaderLength: gzHead, FooterLength: 8, InflatedLength: inflated.n, InflatedCRC: inflated.crc}}, nil
}

// pass passes over the n bytes of the record whose gzip member starts at
// start.
func (s *Scanner) pass(start, n int64) (Scanned, error) {
	if _, err := io.CopyN(io.Discard, s.br, n); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Scanned{}, fmt.Errorf("scan warc at %d: the index gives a %d-byte record: %w", start, n, err)
	}
	return Scanned{Offset: start, Length: n, Compressed: true}, nil
}
