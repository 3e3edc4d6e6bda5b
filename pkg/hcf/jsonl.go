package hcf

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// Limits bound what ParseRequests and ParseIDs accept.
type Limits struct {
	// MaxLineBytes bounds one line; DefaultMaxLineBytes when zero.
	MaxLineBytes int
	// MaxLines bounds the number of lines, empty ones included;
	// DefaultMaxLines when zero.
	MaxLines int
}

// Default limits.
const (
	DefaultMaxLineBytes = 1 << 20
	DefaultMaxLines     = 100_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = DefaultMaxLineBytes
	}
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultMaxLines
	}
	return l
}

// LineError is the error of one line of JSON lines input.
type LineError struct {
	// Line is the number of the line, from 1.
	Line int
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "line N: reason".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// scanLines calls fn with every non-blank line of r and its number. A line
// over the limit, or too many lines, is a *LineError; an error of r is
// returned wrapped.
func scanLines(r io.Reader, lim Limits, fn func(n int, line []byte) error) error {
	lim = lim.withDefaults()
	// A read error ends the input in the middle of a line; the error of that
	// line is the read error, not the truncated JSON.
	er := &errReader{r: r}
	sc := bufio.NewScanner(er)
	sc.Buffer(make([]byte, 0, min(64<<10, lim.MaxLineBytes+1)), lim.MaxLineBytes+1)
	n := 0
	for sc.Scan() {
		n++
		if n > lim.MaxLines {
			return &LineError{Line: n, Reason: fmt.Sprintf("more than %d lines", lim.MaxLines)}
		}
		line := sc.Bytes()
		if len(line) > lim.MaxLineBytes {
			return &LineError{Line: n, Reason: fmt.Sprintf("longer than %d bytes", lim.MaxLineBytes)}
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if err := fn(n, line); err != nil {
			if er.err != nil {
				return fmt.Errorf("read line %d: %w", n, er.err)
			}
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &LineError{Line: n + 1, Reason: fmt.Sprintf("longer than %d bytes", lim.MaxLineBytes)}
		}
		return fmt.Errorf("read line %d: %w", n+1, err)
	}
	return nil
}

// errReader remembers the first error of r other than io.EOF.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// wireRequest is one line of an Add body. Keys match as encoding/json
// matches them (case-insensitively); other keys are ignored.
type wireRequest struct {
	FP    json.RawMessage `json:"fp"`
	QData json.RawMessage `json:"qdata"`
	FData json.RawMessage `json:"fdata"`
	P     json.RawMessage `json:"p"`
}

// ParseRequests reads JSON lines of requests, {"fp":…,"qdata":…,"fdata":…,
// "p":…}, as the frontier API receives them: fp is a required non-empty
// string, p an optional integer from 0 to MaxPriority, qdata and fdata any
// JSON, kept compacted. Blank lines are skipped. The first invalid line
// fails the whole input with a *LineError.
func ParseRequests(r io.Reader, lim Limits) ([]Request, error) {
	var out []Request
	err := scanLines(r, lim, func(n int, line []byte) error {
		req, reason := parseRequest(line)
		if reason != "" {
			return &LineError{Line: n, Reason: reason}
		}
		out = append(out, req)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseRequest parses one non-blank line, or returns why it cannot.
func parseRequest(line []byte) (Request, string) {
	if line[0] != '{' {
		return Request{}, "want a JSON object"
	}
	var w wireRequest
	if err := json.Unmarshal(line, &w); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Request{}, fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, se.Error())
		}
		return Request{}, "invalid JSON: " + err.Error()
	}
	var req Request
	switch {
	case w.FP == nil:
		return Request{}, "fp is missing"
	case w.FP[0] != '"':
		return Request{}, "fp must be a string"
	}
	if reason := lossyString(w.FP); reason != "" {
		return Request{}, "fp " + reason
	}
	if err := json.Unmarshal(w.FP, &req.FP); err != nil {
		return Request{}, "fp: " + err.Error()
	}
	switch {
	case req.FP == "":
		return Request{}, "fp is empty"
	case len(req.FP) > MaxFPBytes:
		return Request{}, fmt.Sprintf("fp is longer than %d bytes", MaxFPBytes)
	}
	if w.P != nil && string(w.P) != "null" {
		p, reason := parsePriority(w.P)
		if reason != "" {
			return Request{}, reason
		}
		req.P = p
	}
	req.QData = compact(w.QData)
	req.FData = compact(w.FData)
	return req, ""
}

// lossyString returns why the JSON string token raw would not decode to the
// text it was written as, or "" when it would. encoding/json turns invalid
// UTF-8 and unpaired surrogate escapes ("\ud800") into U+FFFD, so two
// different fingerprints would become one.
func lossyString(raw []byte) string {
	if !utf8.Valid(raw) {
		return "is not valid UTF-8"
	}
	// pending is a high surrogate escape waiting for its low half.
	pending := false
	for i := 1; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			if pending {
				return "holds an unpaired surrogate escape"
			}
			continue
		}
		i++
		if raw[i] != 'u' || i+4 >= len(raw) {
			if pending {
				return "holds an unpaired surrogate escape"
			}
			continue
		}
		v, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
		i += 4
		if err != nil {
			continue // json.Unmarshal reports it
		}
		switch {
		case v >= 0xD800 && v < 0xDC00:
			if pending {
				return "holds an unpaired surrogate escape"
			}
			pending = true
		case v >= 0xDC00 && v < 0xE000:
			if !pending {
				return "holds an unpaired surrogate escape"
			}
			pending = false
		default:
			if pending {
				return "holds an unpaired surrogate escape"
			}
		}
	}
	if pending {
		return "holds an unpaired surrogate escape"
	}
	return ""
}

// parsePriority parses the JSON value of p.
func parsePriority(raw json.RawMessage) (int, string) {
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, "p must be a number"
	}
	p, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		// 1.0 and 1e2 are integers too.
		f, ferr := strconv.ParseFloat(string(raw), 64)
		if ferr != nil && !errors.Is(ferr, strconv.ErrRange) {
			return 0, "p must be a number"
		}
		if f != math.Trunc(f) || math.IsInf(f, 0) {
			return 0, "p must be an integer"
		}
		if f < 0 || f > MaxPriority {
			return 0, fmt.Sprintf("p must be between 0 and %d", MaxPriority)
		}
		p = int64(f)
	}
	if p < 0 || p > MaxPriority {
		return 0, fmt.Sprintf("p must be between 0 and %d", MaxPriority)
	}
	return int(p), ""
}

// compact returns raw without insignificant white space, or nil when it is
// absent or null. raw must be valid JSON.
func compact(raw json.RawMessage) json.RawMessage {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		// Unreachable for a value that json.Unmarshal accepted.
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}

// ParseIDs reads JSON lines of batch ids to delete: each line is an id as a
// JSON string or an array of them. Blank lines are skipped. The first invalid
// line fails the whole input with a *LineError.
func ParseIDs(r io.Reader, lim Limits) ([]string, error) {
	var ids []string
	err := scanLines(r, lim, func(n int, line []byte) error {
		switch line[0] {
		case '"':
			var id string
			if err := json.Unmarshal(line, &id); err != nil {
				return &LineError{Line: n, Reason: "invalid JSON string: " + err.Error()}
			}
			ids = append(ids, id)
			return nil
		case '[':
			var arr []json.RawMessage
			if err := json.Unmarshal(line, &arr); err != nil {
				return &LineError{Line: n, Reason: "invalid JSON array: " + err.Error()}
			}
			for i, raw := range arr {
				var id string
				if raw[0] != '"' || json.Unmarshal(raw, &id) != nil {
					return &LineError{Line: n, Reason: fmt.Sprintf("element %d is not a string", i)}
				}
				ids = append(ids, id)
			}
			return nil
		}
		return &LineError{Line: n, Reason: "want a batch id string or an array of them"}
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// AppendString appends s to dst as a JSON string. Unlike encoding/json it
// does not escape <, > and &, so URLs stay readable; invalid UTF-8 becomes
// U+FFFD as encoding/json makes it.
func AppendString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 break JavaScript string literals; encoding/json
		// escapes them too.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendData appends raw, or null when it is nil.
func appendData(dst []byte, raw json.RawMessage) []byte {
	if raw == nil {
		return append(dst, "null"...)
	}
	return append(dst, raw...)
}

// AppendRequests appends qs as the JSON array [[fp,qdata],…].
func AppendRequests(dst []byte, qs []Queued) []byte {
	dst = append(dst, '[')
	for i, q := range qs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = AppendString(dst, q.FP)
		dst = append(dst, ',')
		dst = appendData(dst, q.QData)
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// DecodeRequests is the inverse of AppendRequests.
func DecodeRequests(raw []byte) ([]Queued, error) {
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("decode batch requests: %w", err)
	}
	out := make([]Queued, len(pairs))
	for i, p := range pairs {
		if err := json.Unmarshal(p[0], &out[i].FP); err != nil {
			return nil, fmt.Errorf("decode batch request %d: %w", i, err)
		}
		if q := Data(p[1]); q != nil {
			out[i].QData = q
		}
	}
	return out, nil
}

// AppendBatch appends b as one line of a queue read, without the newline:
// {"id":…,"requests":[[fp,qdata],…]}.
func AppendBatch(dst []byte, b Batch) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, b.ID)
	dst = append(dst, `,"requests":`...)
	dst = AppendRequests(dst, b.Requests)
	return append(dst, '}')
}

// AppendFingerprint appends f as one line of a fingerprint read, without
// the newline: {"fp":…} with "fdata" when f has it.
func AppendFingerprint(dst []byte, f Fingerprint) []byte {
	dst = append(dst, `{"fp":`...)
	dst = AppendString(dst, f.FP)
	if f.FData != nil {
		dst = append(dst, `,"fdata":`...)
		dst = append(dst, f.FData...)
	}
	return append(dst, '}')
}
