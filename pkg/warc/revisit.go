package warc

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Record types and fields of revisit records (WARC 1.1 §6.7).
const (
	TypeRevisit  = "revisit"
	TypeResource = "resource"

	FieldProfile           = "WARC-Profile"
	FieldRefersTo          = "WARC-Refers-To"
	FieldRefersToTargetURI = "WARC-Refers-To-Target-URI"
	FieldRefersToDate      = "WARC-Refers-To-Date"
)

// Revisit profiles (WARC 1.1 §6.7.2 and §6.7.3).
const (
	// ProfileIdenticalPayloadDigest marks a fetch whose payload is the same
	// as an earlier one's (same payload digest).
	ProfileIdenticalPayloadDigest = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
	// ProfileServerNotModified marks a conditional fetch the server answered
	// 304 Not Modified.
	ProfileServerNotModified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
)

// Revisit describes a fetch whose content is not stored again because an
// earlier record (the original) holds it.
type Revisit struct {
	// TargetURI is the URL fetched; Date when it was fetched; IP the
	// server's address ("" to omit).
	TargetURI string
	Date      time.Time
	IP        string
	// Profile is ProfileServerNotModified (the server answered 304) or
	// ProfileIdenticalPayloadDigest (a 200 whose payload digest equals the
	// original's).
	Profile string
	// HTTPResponse is the response as received: status line and header;
	// anything after the header block (a body) is left out of the record.
	HTTPResponse []byte
	// OriginalHeader, with ProfileServerNotModified, is the original
	// response's status line and header. When set, the block is that
	// header freshened with the 304's fields (see FreshenHeader) instead of
	// the 304's own header: replay tools serve a revisit with its block's
	// status and the original's payload, and pywb replays a 304 header as
	// an empty 304, not as the page.
	OriginalHeader []byte
	// PayloadDigest is the original's payload digest ("sha1:...", its
	// WARC-Payload-Digest). Required for ProfileIdenticalPayloadDigest (it
	// is also this fetch's); with ProfileServerNotModified it is what the
	// 304 vouches for.
	PayloadDigest string
	// RefersToTargetURI and RefersToDate are the original's WARC-Target-URI
	// and WARC-Date (required: replay tools look the original up by them).
	RefersToTargetURI string
	RefersToDate      time.Time
	// RefersTo is the original's WARC-Record-ID ("" to omit: the original
	// may lie in another loader's segment, unknown by id).
	RefersTo string
	// ConcurrentTo is the id of this fetch's request record ("" to omit).
	ConcurrentTo string
}

// NewRevisitRecord returns the revisit record of v: the HTTP status line and
// header of the new response as its block (application/http, no body), with
// WARC-Profile, WARC-Payload-Digest and WARC-Refers-To-Target-URI /
// -Date (and WARC-Refers-To when known). It fails with ErrInvalidRecord for
// an unknown profile, a missing original or digest, or a response without a
// status line.
func NewRevisitRecord(v Revisit) (Record, error) {
	switch {
	case v.Profile != ProfileIdenticalPayloadDigest && v.Profile != ProfileServerNotModified:
		return Record{}, fmt.Errorf("new revisit record: profile %q: %w", v.Profile, ErrInvalidRecord)
	case v.TargetURI == "" || v.RefersToTargetURI == "" || v.RefersToDate.IsZero():
		return Record{}, fmt.Errorf("new revisit record: target and original (uri and date) are required: %w", ErrInvalidRecord)
	case v.Profile == ProfileIdenticalPayloadDigest && v.PayloadDigest == "":
		return Record{}, fmt.Errorf("new revisit record: identical-payload-digest without a digest: %w", ErrInvalidRecord)
	}
	block := v.HTTPResponse
	if end := httpHeaderEnd(block); end >= 0 {
		block = block[:end]
	} else {
		return Record{}, fmt.Errorf("new revisit record: http response has no end of header: %w", ErrInvalidRecord)
	}
	if v.Profile == ProfileServerNotModified && len(v.OriginalHeader) > 0 {
		fresh, err := FreshenHeader(v.OriginalHeader, block)
		if err != nil {
			return Record{}, fmt.Errorf("new revisit record: %w: %w", ErrInvalidRecord, err)
		}
		block = fresh
	}
	if _, err := parseStatusLine(firstLine(block)); err != nil {
		return Record{}, fmt.Errorf("new revisit record: %w: %w", ErrInvalidRecord, err)
	}
	h := Header{
		{FieldType, TypeRevisit},
		{FieldRecordID, NewRecordID()},
		{FieldDate, FormatDate(v.Date)},
		{FieldTargetURI, v.TargetURI},
	}
	if v.IP != "" {
		h = append(h, Field{FieldIPAddress, v.IP})
	}
	if v.ConcurrentTo != "" {
		h = append(h, Field{FieldConcurrentTo, v.ConcurrentTo})
	}
	h = append(h, Field{FieldProfile, v.Profile})
	if v.RefersTo != "" {
		h = append(h, Field{FieldRefersTo, v.RefersTo})
	}
	h = append(h,
		Field{FieldRefersToTargetURI, v.RefersToTargetURI},
		Field{FieldRefersToDate, FormatDate(v.RefersToDate)},
		Field{FieldContentType, ContentTypeResponse})
	if v.PayloadDigest != "" {
		h = append(h, Field{FieldPayloadDigest, v.PayloadDigest})
	}
	h = append(h, Field{FieldContentLength, strconv.Itoa(len(block))})
	return Record{Header: h, Block: block}, nil
}

// PayloadDigest returns the WARC payload digest of an HTTP response as
// NewResponseRecord computes it (over the bytes after the header block, as
// received), and "" when the response has no end of header. A recrawl
// compares it with the last fetch's to choose a revisit record.
func PayloadDigest(httpResponse []byte) string {
	end := httpHeaderEnd(httpResponse)
	if end < 0 {
		return ""
	}
	return Digest(httpResponse[end:])
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\r' || c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

// notFreshened are the fields a 304 does not update in the stored header:
// they describe the stored payload (RFC 9111 §3.2 and §4.3.4).
var notFreshened = map[string]bool{
	"content-length": true, "content-encoding": true, "transfer-encoding": true, "content-range": true,
}

// FreshenHeader returns the original response's status line and header
// (anything after its header block is ignored) with every field that the
// 304 response notModified carries replaced by the 304's, as a cache
// freshens a stored response (RFC 9111 §4.3.4): the header of the page as
// the server would have sent it in full. Fields describing the payload
// (Content-Length, Content-Encoding, Transfer-Encoding, Content-Range) are
// the original's. The result ends with the blank line.
func FreshenHeader(original, notModified []byte) ([]byte, error) {
	end := httpHeaderEnd(original)
	if end < 0 {
		return nil, fmt.Errorf("freshen header: original has no end of header: %w", ErrMalformed)
	}
	origLines := headerLines(original[:end])
	if len(origLines) == 0 {
		return nil, fmt.Errorf("freshen header: original has no status line: %w", ErrMalformed)
	}
	if _, err := parseStatusLine(origLines[0]); err != nil {
		return nil, fmt.Errorf("freshen header: %w", err)
	}
	if e := httpHeaderEnd(notModified); e >= 0 {
		notModified = notModified[:e]
	}
	newLines := headerLines(notModified)
	if len(newLines) > 0 {
		newLines = newLines[1:] // the 304's status line
	}
	updated := map[string]bool{}
	var fresh []string
	for _, l := range newLines {
		name, _, ok := strings.Cut(l, ":")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" || notFreshened[name] {
			continue
		}
		updated[name] = true
		fresh = append(fresh, l)
	}
	var b strings.Builder
	b.WriteString(origLines[0])
	b.WriteString("\r\n")
	for _, l := range origLines[1:] {
		name, _, _ := strings.Cut(l, ":")
		if updated[strings.ToLower(strings.TrimSpace(name))] {
			continue
		}
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	for _, l := range fresh {
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String()), nil
}

// headerLines splits an HTTP header block into its lines, without line
// ends or the blank line; continuation lines join the line before.
func headerLines(block []byte) []string {
	var out []string
	for _, l := range strings.Split(string(block), "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case l == "":
		case (l[0] == ' ' || l[0] == '\t') && len(out) > 0:
			out[len(out)-1] += " " + strings.TrimSpace(l)
		default:
			out = append(out, l)
		}
	}
	return out
}

// HTTPHeader returns a copy of the status line and header block of an HTTP
// message (a response record's block), blank line included: what a 304's
// revisit record freshens (Revisit.OriginalHeader).
func HTTPHeader(msg []byte) ([]byte, error) {
	end := httpHeaderEnd(msg)
	if end < 0 {
		return nil, fmt.Errorf("http header: no end of header: %w", ErrMalformed)
	}
	return append([]byte(nil), msg[:end]...), nil
}
