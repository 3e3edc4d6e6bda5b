package warc

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
)

// Common Crawl's derived formats (https://commoncrawl.org/get-started):
// WET holds the plain text of each page, WAT a JSON metadata envelope of
// every record of a WARC file. Both are WARC files of their own, one gzip
// member per record (.warc.wet.gz, .warc.wat.gz), starting with a warcinfo
// record. Their records get ids derived from the record they describe (a
// name-based UUID), so that the file made twice from the same segment is
// the same file.

// Suffixes of the derived files, after the WARC file's own name
// ("x.warc.gz" gives "x.warc.wet.gz", as Common Crawl names them).
const (
	WETSuffix = ".wet.gz"
	WATSuffix = ".wat.gz"
)

// DerivedName returns the name of the derived file (suffix WETSuffix or
// WATSuffix) of the WARC file name: "x.warc.gz" gives "x.warc.wet.gz".
func DerivedName(name, suffix string) string {
	return strings.TrimSuffix(name, ".gz") + suffix
}

// derivedNamespace names the derived record ids (uuid.NewSHA1).
var derivedNamespace = uuid.MustParse("5b7c0e52-7a3c-4c49-9a7e-4d1f5f4f6a21")

// derivedID returns the id of the record of kind ("wet", "wat",
// "warcinfo") made from the record (or file) source.
func derivedID(kind, source string) string {
	return "<urn:uuid:" + uuid.NewSHA1(derivedNamespace, []byte(kind+" "+source)).String() + ">"
}

// memberWriter writes records each as its own gzip member.
type memberWriter struct {
	w    io.Writer
	gz   *gzip.Writer
	head []byte
	n    int
}

func newMemberWriter(w io.Writer) *memberWriter {
	gz, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	return &memberWriter{w: w, gz: gz}
}

func (m *memberWriter) write(r Record) error {
	head, err := appendHeader(m.head[:0], r)
	m.head = head[:0]
	if err != nil {
		return err
	}
	m.gz.Reset(m.w)
	if _, err := m.gz.Write(head); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	if _, err := m.gz.Write(r.Block); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	if _, err := m.gz.Write(trailer); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	if err := m.gz.Close(); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	m.n++
	return nil
}

// derivedWarcinfo returns the warcinfo record that starts the derived file
// filename, made at date, its block fields sorted by name.
func derivedWarcinfo(kind, filename string, date time.Time, fields map[string]string) Record {
	r := NewWarcinfoRecord(date, fields)
	r.Header.Set(FieldRecordID, derivedID(kind+"-warcinfo", filename))
	r.Header = append(r.Header, Field{FieldFilename, filename})
	return r
}

// FieldFilename is the warcinfo field naming the file it starts.
const FieldFilename = "WARC-Filename"

// WETWriter writes a WET file: a warcinfo record, then one conversion
// record of Content-Type text/plain per page, which refers to the page's
// response record. It is not safe for concurrent use.
type WETWriter struct {
	mw *memberWriter
}

// NewWETWriter writes the warcinfo record of the WET file filename (made
// at date, with the warcinfo fields given) to w and returns a writer for
// its pages.
func NewWETWriter(w io.Writer, filename string, date time.Time, fields map[string]string) (*WETWriter, error) {
	ww := &WETWriter{mw: newMemberWriter(w)}
	if err := ww.mw.write(derivedWarcinfo("wet", filename, date, fields)); err != nil {
		return nil, fmt.Errorf("write wet warcinfo: %w", err)
	}
	return ww, nil
}

// WETPage is one page of a WET file.
type WETPage struct {
	// TargetURI, Date and RecordID are those of the page's response record.
	TargetURI, Date, RecordID string
	// Title and Text are the page's; the block is the title on its first
	// line, then the text, as Common Crawl writes it. Line breaks in the
	// title become spaces.
	Title, Text string
}

// WETBlock returns the block of p's conversion record.
func WETBlock(title, text string) []byte {
	title = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(title)
	b := make([]byte, 0, len(title)+1+len(text))
	b = append(b, title...)
	b = append(b, '\n')
	return append(b, text...)
}

// Write appends p's conversion record.
func (w *WETWriter) Write(p WETPage) error {
	block := WETBlock(p.Title, p.Text)
	r := Record{Header: Header{
		{FieldType, TypeConversion},
		{FieldTargetURI, p.TargetURI},
		{FieldDate, p.Date},
		{FieldRecordID, derivedID("wet", p.RecordID)},
		{FieldRefersTo, p.RecordID},
		{FieldBlockDigest, Digest(block)},
		{FieldContentType, "text/plain"},
	}, Block: block}
	if err := w.mw.write(r); err != nil {
		return fmt.Errorf("write wet record of %s: %w", p.RecordID, err)
	}
	return nil
}

// Count returns the records written, the warcinfo record included.
func (w *WETWriter) Count() int { return w.mw.n }
