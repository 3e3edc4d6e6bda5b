// Package warc writes and reads WARC 1.1 records (ISO 28500:2017), the
// format gridcrawl stores fetched exchanges in.
//
// A Segment accumulates the records of one asset object in memory; with
// compression each record is its own gzip member (the customary .warc.gz
// layout), so any record can be read alone from its offset and length with
// ReadRecord. A Reader reads a whole .warc or .warc.gz stream. Digests are
// SHA-1 in base32, written "sha1:...", as is customary.
package warc

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/klauspost/compress/gzip"
)

// Version is the version line written at the start of every record.
const Version = "WARC/1.1"

// Record types written by this package.
const (
	TypeWarcinfo = "warcinfo"
	TypeRequest  = "request"
	TypeResponse = "response"
)

// Names of the WARC named fields this package sets or reads.
const (
	FieldType          = "WARC-Type"
	FieldRecordID      = "WARC-Record-ID"
	FieldDate          = "WARC-Date"
	FieldTargetURI     = "WARC-Target-URI"
	FieldContentType   = "Content-Type"
	FieldContentLength = "Content-Length"
	FieldConcurrentTo  = "WARC-Concurrent-To"
	FieldIPAddress     = "WARC-IP-Address"
	FieldPayloadDigest = "WARC-Payload-Digest"
	FieldBlockDigest   = "WARC-Block-Digest"
	FieldTruncated     = "WARC-Truncated"
	FieldWarcinfoID    = "WARC-Warcinfo-ID"
)

// Content types of the blocks this package builds.
const (
	ContentTypeRequest  = "application/http;msgtype=request"
	ContentTypeResponse = "application/http;msgtype=response"
	ContentTypeWarcinfo = "application/warc-fields"
)

// Sentinel errors.
var (
	// ErrTooLarge is returned when a record's block or header exceeds the
	// reader's limit.
	ErrTooLarge = errors.New("warc record too large")
	// ErrMalformed is returned for input that is not a valid WARC record.
	ErrMalformed = errors.New("malformed warc record")
	// ErrInvalidRecord is returned by Append for a record that cannot be
	// written: a mandatory field missing, a bad field name or value, or a
	// Content-Length that does not match the block.
	ErrInvalidRecord = errors.New("invalid warc record")
)

// Field is one named field of a record header.
type Field struct {
	Name, Value string
}

// Header is the ordered list of a record's named fields. Field names compare
// case-insensitively.
type Header []Field

// Get returns the value of the first field called name, or "".
func (h Header) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Set sets the field called name to value, replacing the first such field
// in place and removing the others, or appending it.
func (h *Header) Set(name, value string) {
	found := false
	out := (*h)[:0]
	for _, f := range *h {
		if strings.EqualFold(f.Name, name) {
			if found {
				continue
			}
			found = true
			f.Value = value
		}
		out = append(out, f)
	}
	if !found {
		out = append(out, Field{Name: name, Value: value})
	}
	*h = out
}

// Del removes every field called name.
func (h *Header) Del(name string) {
	*h = slices.DeleteFunc(*h, func(f Field) bool { return strings.EqualFold(f.Name, name) })
}

// Record is one WARC record: its named fields and its content block.
type Record struct {
	Header Header
	Block  []byte
}

// RecordID returns the record's WARC-Record-ID, such as
// "<urn:uuid:5a1a4b6e-...>".
func RecordID(r Record) string { return r.Header.Get(FieldRecordID) }

// NewRecordID returns a fresh WARC-Record-ID.
func NewRecordID() string { return "<urn:uuid:" + uuid.NewString() + ">" }

// FormatDate formats t as a WARC-Date: UTC, W3C ISO 8601 with sub-second
// digits only when t has them (WARC 1.1 allows up to nanoseconds; we keep
// microseconds).
func FormatDate(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.999999Z")
}

// Digest returns the customary WARC digest of b: "sha1:" and the SHA-1 in
// base32.
func Digest(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// httpHeaderEnd returns the index where the body of an HTTP message starts,
// or -1 if the header block has no end.
func httpHeaderEnd(msg []byte) int {
	crlf := bytes.Index(msg, []byte("\r\n\r\n"))
	lf := bytes.Index(msg, []byte("\n\n"))
	switch {
	case crlf >= 0 && (lf < 0 || crlf < lf):
		return crlf + 4
	case lf >= 0:
		return lf + 2
	}
	return -1
}

// NewRequestRecord returns a request record for an HTTP request (request
// line, headers and body as sent). The record gets a fresh id; set another
// with Header.Set(FieldRecordID, ...) if needed.
func NewRequestRecord(targetURI string, date time.Time, httpRequest []byte) Record {
	return Record{
		Header: Header{
			{FieldType, TypeRequest},
			{FieldRecordID, NewRecordID()},
			{FieldDate, FormatDate(date)},
			{FieldTargetURI, targetURI},
			{FieldContentType, ContentTypeRequest},
		},
		Block: httpRequest,
	}
}

// NewResponseRecord returns a response record for an HTTP response (status
// line, headers and body as received). ip is the server's address ("" to
// omit), truncated marks a body cut by the size limit (WARC-Truncated:
// length), and concurrentTo is the id of the matching request record (""
// to omit). The payload digest covers the bytes after the HTTP header block.
func NewResponseRecord(targetURI string, date time.Time, ip string, httpResponse []byte, truncated bool, concurrentTo string) Record {
	h := Header{
		{FieldType, TypeResponse},
		{FieldRecordID, NewRecordID()},
		{FieldDate, FormatDate(date)},
		{FieldTargetURI, targetURI},
	}
	if ip != "" {
		h = append(h, Field{FieldIPAddress, ip})
	}
	if concurrentTo != "" {
		h = append(h, Field{FieldConcurrentTo, concurrentTo})
	}
	h = append(h, Field{FieldContentType, ContentTypeResponse})
	if end := httpHeaderEnd(httpResponse); end >= 0 {
		h = append(h, Field{FieldPayloadDigest, Digest(httpResponse[end:])})
	}
	if truncated {
		h = append(h, Field{FieldTruncated, "length"})
	}
	return Record{Header: h, Block: httpResponse}
}

// NewWarcinfoRecord returns a warcinfo record whose block lists fields
// ("software", "operator", ...) in application/warc-fields form, sorted by
// name.
func NewWarcinfoRecord(date time.Time, fields map[string]string) Record {
	var b bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		b.WriteString(oneLine(k))
		b.WriteString(": ")
		b.WriteString(oneLine(fields[k]))
		b.WriteString("\r\n")
	}
	return Record{
		Header: Header{
			{FieldType, TypeWarcinfo},
			{FieldRecordID, NewRecordID()},
			{FieldDate, FormatDate(date)},
			{FieldContentType, ContentTypeWarcinfo},
		},
		Block: b.Bytes(),
	}
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// validName reports whether s is an RFC 2616 token, as WARC field names are.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}

// appendHeader validates r and appends its serialized header (version line
// to blank line) to dst, filling Content-Length and WARC-Block-Digest.
func appendHeader(dst []byte, r Record) ([]byte, error) {
	for _, name := range []string{FieldType, FieldRecordID, FieldDate} {
		if r.Header.Get(name) == "" {
			return dst, fmt.Errorf("append record: missing %s: %w", name, ErrInvalidRecord)
		}
	}
	dst = append(dst, Version+"\r\n"...)
	hasLength, hasDigest := false, false
	for _, f := range r.Header {
		if !validName(f.Name) {
			return dst, fmt.Errorf("append record: field name %q: %w", f.Name, ErrInvalidRecord)
		}
		if strings.ContainsAny(f.Value, "\r\n") {
			return dst, fmt.Errorf("append record: field %s has a line break: %w", f.Name, ErrInvalidRecord)
		}
		switch {
		case strings.EqualFold(f.Name, FieldContentLength):
			n, err := strconv.ParseInt(strings.TrimSpace(f.Value), 10, 64)
			if err != nil || n != int64(len(r.Block)) {
				return dst, fmt.Errorf("append record: Content-Length %q for a %d-byte block: %w", f.Value, len(r.Block), ErrInvalidRecord)
			}
			hasLength = true
		case strings.EqualFold(f.Name, FieldBlockDigest):
			hasDigest = true
		}
		dst = append(dst, f.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, f.Value...)
		dst = append(dst, "\r\n"...)
	}
	if !hasDigest {
		dst = append(dst, FieldBlockDigest+": "...)
		dst = append(dst, Digest(r.Block)...)
		dst = append(dst, "\r\n"...)
	}
	if !hasLength {
		dst = append(dst, FieldContentLength+": "...)
		dst = strconv.AppendInt(dst, int64(len(r.Block)), 10)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...), nil
}

// Segment accumulates the records of one asset object in memory. It is not
// safe for concurrent use.
type Segment struct {
	compress bool
	buf      bytes.Buffer
	count    int
	gz       *gzip.Writer
	gzSmall  *gzip.Writer // for small records (smallRecord)
	head     []byte       // scratch for record headers
}

// NewSegment returns an empty segment; with compress, every record is
// written as its own gzip member.
func NewSegment(compress bool) *Segment {
	return &Segment{compress: compress}
}

var trailer = []byte("\r\n\r\n")

// smallRecord bounds the records (header and block) a segment compresses
// at gzip's best level: requests, revisits, robots.txt, redirects, whose
// bytes are what a recrawl of unchanged pages stores, and which cost little
// to compress (they are under 1 KiB but for long URLs and headers). Larger
// records use BestSpeed: the loader compresses every page it fetches, and
// level 1 costs a third of the default's CPU for WARC's mostly textual
// records. At 4 KiB, pages of 4 KB went to the best level, which took a
// third of a loader's CPU.
const smallRecord = 2048

// Append writes r at the end of the segment and returns where it lies: the
// record (or its gzip member) is Bytes()[offset:offset+length]. It fills
// Content-Length and WARC-Block-Digest if r has none, without modifying r.
// On error the segment is unchanged.
func (s *Segment) Append(r Record) (offset, length int64, err error) {
	head, err := appendHeader(s.head[:0], r)
	s.head = head[:0]
	if err != nil {
		return 0, 0, err
	}
	start := s.buf.Len()
	if !s.compress {
		s.buf.Grow(len(head) + len(r.Block) + len(trailer))
		s.buf.Write(head)
		s.buf.Write(r.Block)
		s.buf.Write(trailer)
	} else {
		gz := &s.gz
		level := gzip.BestSpeed
		if len(head)+len(r.Block) <= smallRecord {
			gz, level = &s.gzSmall, gzip.BestCompression
		}
		if *gz == nil {
			*gz, _ = gzip.NewWriterLevel(&s.buf, level)
		} else {
			(*gz).Reset(&s.buf)
		}
		// Writes to a bytes.Buffer cannot fail, so neither can these.
		(*gz).Write(head)
		(*gz).Write(r.Block)
		(*gz).Write(trailer)
		if err := (*gz).Close(); err != nil {
			s.buf.Truncate(start)
			return 0, 0, fmt.Errorf("append record: compress: %w", err)
		}
	}
	s.count++
	return int64(start), int64(s.buf.Len() - start), nil
}

// Len returns the number of bytes in the segment.
func (s *Segment) Len() int64 { return int64(s.buf.Len()) }

// Count returns the number of records in the segment.
func (s *Segment) Count() int { return s.count }

// Bytes returns the segment's content. It aliases the segment's buffer and
// is valid until the next Append or Reset.
func (s *Segment) Bytes() []byte { return s.buf.Bytes() }

// Reset empties the segment, keeping its buffer for reuse.
func (s *Segment) Reset() {
	s.buf.Reset()
	s.count = 0
}
