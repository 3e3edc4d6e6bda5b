package warc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Bounds of what a WAT envelope copies from a record: the envelope of a
// hostile record stays a small multiple of the record.
const (
	// MaxWATFields bounds the header fields (WARC, HTTP, warc-fields) an
	// envelope lists per header; more are left out.
	MaxWATFields = 500
	// MaxWATValue bounds each copied value; longer ones are cut.
	MaxWATValue = 8 << 10
)

// WATWriter writes a WAT file: a warcinfo record, then one metadata record
// (Content-Type application/json) per record of a WARC file, in Common
// Crawl's envelope (the layout of webarchive-commons' WAT extractor). It
// is not safe for concurrent use.
type WATWriter struct {
	mw     *memberWriter
	source string
	buf    bytes.Buffer
}

// NewWATWriter writes the warcinfo record of the WAT file filename (made at
// date, with the warcinfo fields given) to w and returns a writer for the
// envelopes of the records of the WARC file source (its file name, which
// each envelope's Container names).
func NewWATWriter(w io.Writer, filename, source string, date time.Time, fields map[string]string) (*WATWriter, error) {
	ww := &WATWriter{mw: newMemberWriter(w), source: source}
	if err := ww.mw.write(derivedWarcinfo("wat", filename, date, fields)); err != nil {
		return nil, fmt.Errorf("write wat warcinfo: %w", err)
	}
	return ww, nil
}

// Count returns the records written, the warcinfo record included.
func (w *WATWriter) Count() int { return w.mw.n }

// watGzip is a Container's Gzip-Metadata.
type watGzip struct {
	DeflateLength  string `json:"Deflate-Length"`
	HeaderLength   string `json:"Header-Length"`
	FooterLength   string `json:"Footer-Length"`
	InflatedCRC    string `json:"Inflated-CRC"`
	InflatedLength string `json:"Inflated-Length"`
}

type watContainer struct {
	Filename   string   `json:"Filename"`
	Compressed bool     `json:"Compressed"`
	Offset     string   `json:"Offset"`
	Gzip       *watGzip `json:"Gzip-Metadata,omitempty"`
}

type watInner struct {
	Format              string            `json:"Format"`
	HeaderLength        string            `json:"WARC-Header-Length"`
	BlockDigest         string            `json:"Block-Digest"`
	ActualContentLength string            `json:"Actual-Content-Length"`
	Header              map[string]string `json:"WARC-Header-Metadata"`
	Payload             map[string]any    `json:"Payload-Metadata"`
}

// WATEnvelope is the JSON of a WAT metadata record.
type WATEnvelope struct {
	Container watContainer `json:"Container"`
	Envelope  watInner     `json:"Envelope"`
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func cut(s string) string {
	if len(s) > MaxWATValue {
		s = s[:MaxWATValue]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Envelope returns the WAT envelope of s, a record of the WARC file source.
// html, when not nil, is the HTML-Metadata of its payload (an HTML page's
// head, metas and links, marshalled as JSON as it is): it goes into the
// HTTP-Response-Metadata of a response, into the Payload-Metadata of other
// records.
func Envelope(s Scanned, source string, html any) WATEnvelope {
	var e WATEnvelope
	e.Container = watContainer{Filename: source, Compressed: s.Compressed, Offset: itoa(s.Offset)}
	if s.Compressed {
		e.Container.Gzip = &watGzip{DeflateLength: itoa(s.Length), HeaderLength: itoa(s.Gzip.HeaderLength),
			FooterLength: itoa(s.Gzip.FooterLength), InflatedCRC: strconv.FormatUint(uint64(s.Gzip.InflatedCRC), 10),
			InflatedLength: itoa(s.Gzip.InflatedLength)}
	}
	hm := map[string]string{}
	for i, f := range s.Header {
		if i >= MaxWATFields {
			break
		}
		if _, dup := hm[f.Name]; !dup {
			hm[cut(f.Name)] = cut(f.Value)
		}
	}
	e.Envelope = watInner{Format: "WARC", HeaderLength: itoa(s.HeaderLength), BlockDigest: Digest(s.Block),
		ActualContentLength: itoa(int64(len(s.Block))), Header: hm}
	ctype := s.Header.Get(FieldContentType)
	p := map[string]any{"Actual-Content-Type": cut(ctype), "Actual-Content-Length": itoa(int64(len(s.Block))),
		"Trailing-Slop-Length": itoa(s.SlopLength)}
	mt := strings.ReplaceAll(strings.ToLower(ctype), " ", "")
	switch {
	case strings.HasPrefix(mt, "application/http") && strings.Contains(mt, "msgtype=request"):
		if m, ok := httpMetadata(s.Block, true); ok {
			p["HTTP-Request-Metadata"] = m
		}
	case strings.HasPrefix(mt, "application/http"):
		if m, ok := httpMetadata(s.Block, false); ok {
			if html != nil {
				m["HTML-Metadata"] = html
			}
			p["HTTP-Response-Metadata"] = m
		}
	case strings.HasPrefix(mt, ContentTypeWarcinfo):
		fields := warcFields(s.Block)
		if s.Header.Get(FieldType) == TypeWarcinfo {
			info := map[string]string{}
			for _, f := range fields {
				if _, dup := info[f.Name]; !dup {
					info[f.Name] = f.Value
				}
			}
			p["WARC-Info-Metadata"] = info
		} else {
			recs := make([]map[string]string, 0, len(fields))
			for _, f := range fields {
				recs = append(recs, map[string]string{"Name": f.Name, "Value": f.Value})
			}
			p["WARC-Metadata-Metadata"] = map[string]any{"Metadata-Records": recs}
		}
	default:
		if html != nil {
			p["HTML-Metadata"] = html
		}
	}
	e.Envelope.Payload = p
	return e
}

// warcFields reads an application/warc-fields block (name: value lines).
func warcFields(block []byte) []Field {
	var out []Field
	for line := range bytes.Lines(block) {
		if len(out) >= MaxWATFields {
			break
		}
		name, value, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":"))
		if !ok {
			continue
		}
		out = append(out, Field{cut(string(bytes.TrimSpace(name))), cut(string(bytes.TrimSpace(value)))})
	}
	return out
}

// httpMetadata returns the HTTP-Request-Metadata or HTTP-Response-Metadata
// of an HTTP message as stored in a record's block, and false when the
// block does not start with an HTTP message head.
func httpMetadata(block []byte, request bool) (map[string]any, bool) {
	end := httpHeaderEnd(block)
	if end < 0 {
		return nil, false
	}
	head := block[:end]
	first, rest, _ := bytes.Cut(head, []byte("\n"))
	parts := strings.SplitN(strings.TrimSpace(string(first)), " ", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	m := map[string]any{}
	if request {
		m["Request-Message"] = map[string]string{"Method": cut(parts[0]), "Path": cut(parts[1]), "Version": cut(parts[2])}
	} else {
		if !strings.HasPrefix(parts[0], "HTTP/") {
			return nil, false
		}
		m["Response-Message"] = map[string]string{"Version": cut(parts[0]), "Status": cut(parts[1]), "Reason": cut(parts[2])}
	}
	headers := map[string]string{}
	n := 0
	for line := range bytes.Lines(rest) {
		name, value, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":"))
		if !ok || n >= MaxWATFields {
			continue
		}
		n++
		k := cut(string(bytes.TrimSpace(name)))
		if old, dup := headers[k]; dup {
			headers[k] = cut(old + ", " + string(bytes.TrimSpace(value)))
		} else {
			headers[k] = cut(string(bytes.TrimSpace(value)))
		}
	}
	entity := block[end:]
	m["Headers"] = headers
	m["Headers-Length"] = itoa(int64(end))
	m["Entity-Length"] = itoa(int64(len(entity)))
	m["Entity-Digest"] = Digest(entity)
	m["Entity-Trailing-Slop-Length"] = "0"
	return m, true
}

// SetHTML sets the HTML-Metadata of e's payload to html, where Envelope
// would have put it.
func (e *WATEnvelope) SetHTML(html any) {
	if m, ok := e.Envelope.Payload["HTTP-Response-Metadata"].(map[string]any); ok {
		m["HTML-Metadata"] = html
		return
	}
	if _, req := e.Envelope.Payload["HTTP-Request-Metadata"]; !req {
		e.Envelope.Payload["HTML-Metadata"] = html
	}
}

// Write appends the metadata record of s, a record of the source WARC
// file, with html as its payload's HTML-Metadata (nil: none; see
// Envelope).
func (w *WATWriter) Write(s Scanned, html any) error {
	return w.WriteEnvelope(s.Header, s.Offset, Envelope(s, w.source, html))
}

// WriteEnvelope appends the metadata record holding env, the envelope of
// the record with header h at offset in the source WARC file.
func (w *WATWriter) WriteEnvelope(h Header, offset int64, env WATEnvelope) error {
	w.buf.Reset()
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		return fmt.Errorf("encode wat envelope: %w", err)
	}
	block := bytes.TrimRight(w.buf.Bytes(), "\n")
	id := h.Get(FieldRecordID)
	target := h.Get(FieldTargetURI)
	if target == "" {
		target = w.source // a warcinfo record's envelope names its file, as Common Crawl's do
	}
	date := h.Get(FieldDate)
	if date == "" {
		date = FormatDate(time.Unix(0, 0))
	}
	r := Record{Header: Header{
		{FieldType, TypeMetadata},
		{FieldTargetURI, oneLine(target)},
		{FieldDate, oneLine(date)},
		{FieldRecordID, derivedID("wat", id+" "+itoa(offset))},
		{FieldRefersTo, oneLine(id)},
		{FieldContentType, "application/json"},
		{FieldBlockDigest, Digest(block)},
	}, Block: block}
	if err := w.mw.write(r); err != nil {
		return fmt.Errorf("write wat record of %s: %w", id, err)
	}
	return nil
}
