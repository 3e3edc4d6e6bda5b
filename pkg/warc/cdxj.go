package warc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
)

// CDXJ index lines (pywb's format, also written by its cdx-indexer -j):
//
//	com,example)/page 20261123195000 {"url": "http://example.com/page", "mime": "text/html", "status": "200", "digest": "KOLZ...", "length": "665", "offset": "791", "filename": "seg.warc.gz"}
//
// one line per response, revisit or resource record, sorted bytewise, so that
// pywb (and any tool reading CDXJ) finds a capture by binary search. The
// JSON's numbers are strings, as pywb writes them; digest is the record's
// payload digest without its "sha1:" label. gridcrawl adds "crawl", the id
// of the crawl that fetched the record; readers of CDXJ ignore fields they
// do not know.

// MIMERevisit is the mime of a revisit record's CDXJ line, which pywb reads
// as "resolve the payload elsewhere".
const MIMERevisit = "warc/revisit"

// CDXJTimeLayout is the layout of a CDXJ line's timestamp (14 digits, UTC).
const CDXJTimeLayout = "20060102150405"

// CDXJ is one line of a CDXJ index.
type CDXJ struct {
	// Key is the SURT of URL (see SURT).
	Key  string
	Time time.Time
	URL  string
	// MIME is the media type of the response, MIMERevisit for a revisit
	// record, "" when unknown (written "-").
	MIME string
	// Status is the HTTP status code; 0 (unknown, and for a revisit
	// record, as pywb indexes it) leaves it out of the line.
	Status int
	// Digest is the payload digest as the record states it ("sha1:..."); the
	// line holds it without the label.
	Digest string
	// Length and Offset locate the record (its gzip member in a .gz file)
	// in Filename, the segment's file name without any directory.
	Length, Offset int64
	Filename       string
	// Crawl is the id of the crawl that fetched the record ("" to omit).
	Crawl string
}

// AppendLine appends c as one CDXJ line, newline included, to dst.
func (c CDXJ) AppendLine(dst []byte) []byte {
	dst = append(dst, c.Key...)
	dst = append(dst, ' ')
	dst = c.Time.UTC().AppendFormat(dst, CDXJTimeLayout)
	dst = append(dst, ` {"url": `...)
	dst = appendJSONString(dst, c.URL)
	dst = append(dst, `, "mime": `...)
	dst = appendJSONString(dst, dashIfEmpty(c.MIME))
	if c.Status > 0 {
		dst = append(dst, `, "status": "`...)
		dst = strconv.AppendInt(dst, int64(c.Status), 10)
		dst = append(dst, '"')
	}
	if d := cdxjDigest(c.Digest); d != "" {
		dst = append(dst, `, "digest": `...)
		dst = appendJSONString(dst, d)
	}
	dst = append(dst, `, "length": "`...)
	dst = strconv.AppendInt(dst, c.Length, 10)
	dst = append(dst, `", "offset": "`...)
	dst = strconv.AppendInt(dst, c.Offset, 10)
	dst = append(dst, `", "filename": `...)
	dst = appendJSONString(dst, c.Filename)
	if c.Crawl != "" {
		dst = append(dst, `, "crawl": `...)
		dst = appendJSONString(dst, c.Crawl)
	}
	return append(dst, "}\n"...)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cdxjDigest drops the algorithm label of a "sha1:..." digest, as pywb
// writes it.
func cdxjDigest(d string) string {
	if _, v, ok := strings.Cut(d, ":"); ok && strings.EqualFold(d[:4], "sha1") {
		return v
	}
	return d
}

// appendJSONString appends s as a JSON string the way Python's json.dumps
// writes it (pywb's indexer): ASCII only, "&", "<" and ">" as they are.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r < 0x20 || r >= 0x7f:
			if r == utf8.RuneError {
				r = 0xfffd
			}
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				dst = append(dst, '\\', 'u', hex[r1>>12&15], hex[r1>>8&15], hex[r1>>4&15], hex[r1&15])
				r = r2
			}
			dst = append(dst, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
		default:
			dst = append(dst, byte(r))
		}
	}
	return append(dst, '"')
}

// cdxjFields is a CDXJ line's JSON block as read.
type cdxjFields struct {
	URL      string `json:"url"`
	MIME     string `json:"mime"`
	Status   string `json:"status"`
	Digest   string `json:"digest"`
	Length   any    `json:"length"`
	Offset   any    `json:"offset"`
	Filename string `json:"filename"`
	Crawl    string `json:"crawl"`
}

// ParseCDXJ parses one CDXJ line (without or with its newline). Numbers may
// be JSON strings or numbers; "-" reads as unknown. The digest is returned
// with a "sha1:" label.
func ParseCDXJ(line []byte) (CDXJ, error) {
	line = bytes.TrimRight(line, "\r\n")
	key, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return CDXJ{}, fmt.Errorf("parse cdxj line %q: no timestamp: %w", truncate(line), ErrMalformed)
	}
	stamp, js, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return CDXJ{}, fmt.Errorf("parse cdxj line %q: no json: %w", truncate(line), ErrMalformed)
	}
	t, err := parseCDXJTime(string(stamp))
	if err != nil {
		return CDXJ{}, fmt.Errorf("parse cdxj line %q: %w", truncate(line), err)
	}
	var f cdxjFields
	if err := json.Unmarshal(js, &f); err != nil {
		return CDXJ{}, fmt.Errorf("parse cdxj line %q: %w: %w", truncate(line), ErrMalformed, err)
	}
	c := CDXJ{Key: string(key), Time: t, URL: f.URL, Filename: f.Filename, Crawl: f.Crawl}
	if f.MIME != "-" {
		c.MIME = f.MIME
	}
	if f.Status != "" && f.Status != "-" {
		if c.Status, err = strconv.Atoi(f.Status); err != nil {
			return CDXJ{}, fmt.Errorf("parse cdxj line %q: status: %w", truncate(line), ErrMalformed)
		}
	}
	if f.Digest != "" && f.Digest != "-" {
		c.Digest = f.Digest
		if !strings.Contains(f.Digest, ":") {
			c.Digest = "sha1:" + f.Digest
		}
	}
	for _, n := range []struct {
		v   any
		dst *int64
	}{{f.Length, &c.Length}, {f.Offset, &c.Offset}} {
		switch v := n.v.(type) {
		case string:
			if *n.dst, err = strconv.ParseInt(v, 10, 64); err != nil {
				return CDXJ{}, fmt.Errorf("parse cdxj line %q: %q is not a number: %w", truncate(line), v, ErrMalformed)
			}
		case float64:
			*n.dst = int64(v)
		case nil:
		default:
			return CDXJ{}, fmt.Errorf("parse cdxj line %q: offset or length: %w", truncate(line), ErrMalformed)
		}
	}
	return c, nil
}

// parseCDXJTime reads a 4 to 14 digit timestamp; missing digits are the
// earliest value.
func parseCDXJTime(s string) (time.Time, error) {
	const pad = "00000101000000"
	if len(s) < 4 || len(s) > 14 {
		return time.Time{}, fmt.Errorf("timestamp %q: %w", s, ErrMalformed)
	}
	t, err := time.Parse(CDXJTimeLayout, s+pad[len(s):])
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q: %w", s, ErrMalformed)
	}
	return t, nil
}

// SortCDXJ sorts CDXJ lines (each with its newline) bytewise, as pywb
// expects, dropping exact duplicates.
func SortCDXJ(lines [][]byte) [][]byte {
	slices.SortFunc(lines, bytes.Compare)
	return slices.CompactFunc(lines, bytes.Equal)
}

// CDXJOf returns the CDXJ line of rec, which lies at offset and length in
// the file filename, and false for a record that is not indexed (only
// response, revisit and resource records are, as pywb indexes them).
func CDXJOf(rec Record, offset, length int64, filename string) (CDXJ, bool) {
	typ := rec.Header.Get(FieldType)
	if typ != TypeResponse && typ != TypeRevisit && typ != TypeResource {
		return CDXJ{}, false
	}
	target := rec.Header.Get(FieldTargetURI)
	key, err := SURT(target)
	if err != nil {
		return CDXJ{}, false
	}
	date, err := time.Parse(time.RFC3339Nano, rec.Header.Get(FieldDate))
	if err != nil {
		return CDXJ{}, false
	}
	c := CDXJ{Key: key, Time: date, URL: target, Digest: rec.Header.Get(FieldPayloadDigest),
		Offset: offset, Length: length, Filename: filename}
	switch typ {
	case TypeResource:
		c.MIME = mediaTypeOf(rec.Header.Get(FieldContentType))
		if c.Digest == "" {
			c.Digest = Digest(rec.Block)
		}
		c.Status = 200
	default:
		status, ctype := statusAndType(rec.Block)
		c.Status = status
		c.MIME = mediaTypeOf(ctype)
		if typ == TypeRevisit {
			// pywb resolves the payload, and so the replayed status and
			// type, from the original.
			c.MIME, c.Status = MIMERevisit, 0
		}
	}
	return c, true
}

// statusAndType reads the status code and Content-Type of the HTTP
// response header at the start of block, without touching the body.
func statusAndType(block []byte) (int, string) {
	end := httpHeaderEnd(block)
	if end < 0 {
		end = len(block)
	}
	head := string(block[:end])
	line, rest, _ := strings.Cut(head, "\n")
	status, err := parseStatusLine(strings.TrimRight(line, "\r"))
	if err != nil {
		return 0, ""
	}
	for l := range strings.SplitSeq(rest, "\n") {
		name, value, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "Content-Type") {
			return status, strings.TrimSpace(value)
		}
	}
	return status, ""
}

// mediaTypeOf returns the media type of a Content-Type value, lower case and
// without parameters.
func mediaTypeOf(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// byteCounter counts the bytes read through it.
type byteCounter struct {
	r io.Reader
	n int64
}

func (c *byteCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// IndexWARC reads a whole .warc or .warc.gz stream (one record per gzip
// member when compressed, as Segment writes and as is customary) and
// returns the CDXJ lines of its records (see CDXJOf), sorted, naming the
// file filename. It is the index of a segment stored without one.
func IndexWARC(r io.Reader, filename string, maxBlock int64) ([][]byte, error) {
	if maxBlock <= 0 {
		maxBlock = DefaultMaxBlock
	}
	cr := &byteCounter{r: r}
	br := bufio.NewReaderSize(cr, 64<<10)
	pos := func() int64 { return cr.n - int64(br.Buffered()) }
	var lines [][]byte
	var zr *gzip.Reader
	for {
		start := pos()
		magic, err := br.Peek(2)
		if len(magic) == 0 && errors.Is(err, io.EOF) {
			break
		}
		var rec Record
		if bytes.Equal(magic, gzipMagic) {
			if zr == nil {
				zr, err = gzip.NewReader(br)
			} else {
				err = zr.Reset(br)
			}
			if err != nil {
				return nil, fmt.Errorf("index warc at %d: gzip: %w", start, err)
			}
			zr.Multistream(false)
			rec, err = readRecord(bufio.NewReader(zr), maxBlock, nil)
			if err == nil {
				// Drain the member so that its trailer is consumed.
				_, err = io.Copy(io.Discard, zr)
			}
		} else {
			// pywb's length of a plain record ends with its block.
			rec, err = readRecordNoTrailer(br, maxBlock, nil)
		}
		if err == io.EOF && !bytes.Equal(magic, gzipMagic) {
			break // blank lines at the end
		}
		if err != nil {
			return nil, fmt.Errorf("index warc at %d: %w", start, err)
		}
		c, ok := CDXJOf(rec, start, pos()-start, filename)
		if !bytes.Equal(magic, gzipMagic) {
			skipTrailer(br)
		}
		if ok {
			lines = append(lines, c.AppendLine(nil))
		}
	}
	return SortCDXJ(lines), nil
}

// CDXJOf returns the CDXJ line of r, which Append put at offset and length
// in this segment, with its offset in the stored file base+offset (see the
// package function CDXJOf). The length of a record in an uncompressed
// segment ends with its block, as pywb counts it.
func (s *Segment) CDXJOf(r Record, base, offset, length int64, filename string) (CDXJ, bool) {
	if !s.compress {
		length -= int64(len(trailer))
	}
	return CDXJOf(r, base+offset, length, filename)
}
