package extract

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
)

// Text extracts a text/plain document: Result.Text only, whitespace
// collapsed and capped at lim.MaxTextBytes. The input is read as UTF-8 (after
// an optional byte order mark) and reading stops once the cap is reached.
func Text(r io.Reader, lim Limits) (Result, error) {
	return TextWithContentType(r, "", lim)
}

// TextWithContentType is Text for a document served with the Content-Type
// header value contentType, decoded from its charset parameter if present
// and known.
func TextWithContentType(r io.Reader, contentType string, lim Limits) (Result, error) {
	lim = lim.withDefaults()
	rd, cs, err := decodeReader(r, contentType, false)
	if err != nil {
		return Result{}, fmt.Errorf("extract text: %w", err)
	}
	c := collapser{max: lim.MaxTextBytes}
	buf := make([]byte, 32<<10)
	carry := 0
	for {
		n, err := rd.Read(buf[carry:])
		data := buf[:carry+n]
		keep := 0
		if err == nil {
			keep = incompleteRuneTail(data)
		}
		c.write(data[:len(data)-keep])
		carry = copy(buf, data[len(data)-keep:])
		if c.full {
			break
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Result{Text: c.String(), Charset: cs}, fmt.Errorf("extract text: read: %w", err)
		}
	}
	return Result{Text: c.String(), Truncated: c.full, Charset: cs}, nil
}

// incompleteRuneTail returns how many bytes at the end of p begin a UTF-8
// sequence that is not complete yet.
func incompleteRuneTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return 0
			}
			return len(p) - i
		}
	}
	return 0
}

// collapser accumulates text with runs of whitespace collapsed to one space,
// no leading or trailing space, invalid UTF-8 replaced by U+FFFD, and at most
// max bytes (cut at a character boundary). Once something does not fit,
// full is set and everything after it is dropped.
type collapser struct {
	buf     []byte
	max     int
	pending bool // whitespace since the last character written
	full    bool
}

func (c *collapser) reset() {
	c.buf, c.pending, c.full = c.buf[:0], false, false
}

func (c *collapser) len() int { return len(c.buf) }

// space records a word boundary.
func (c *collapser) space() { c.pending = true }

func (c *collapser) String() string { return string(c.buf) }

// room makes room for n more bytes, writing a pending separator first; it
// reports false (and sets full) if they do not fit.
func (c *collapser) room(n int) bool {
	sep := c.pending && len(c.buf) > 0
	if sep {
		n++
	}
	if len(c.buf)+n > c.max {
		c.full = true
		return false
	}
	if sep {
		c.buf = append(c.buf, ' ')
	}
	c.pending = false
	return true
}

// asciiSpace marks the ASCII bytes treated as whitespace: all controls and
// space.
var asciiSpace = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c <= ' '; c++ {
		t[c] = true
	}
	t[0x7f] = true
	return t
}()

func (c *collapser) write(p []byte) {
	for i := 0; i < len(p) && !c.full; {
		b := p[i]
		if b < utf8.RuneSelf {
			if asciiSpace[b] {
				c.pending = true
				i++
				continue
			}
			j := i + 1
			for j < len(p) && p[j] < utf8.RuneSelf && !asciiSpace[p[j]] {
				j++
			}
			word := p[i:j]
			if !c.room(len(word)) {
				// Keep what fits of an over-long ASCII run.
				if fit := c.max - len(c.buf); fit > 0 && len(c.buf) == 0 {
					c.buf = append(c.buf, word[:fit]...)
				}
				return
			}
			c.buf = append(c.buf, word...)
			i = j
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			if !c.room(3) {
				return
			}
			c.buf = utf8.AppendRune(c.buf, utf8.RuneError)
		} else if unicode.IsSpace(r) {
			c.pending = true
		} else {
			if !c.room(size) {
				return
			}
			c.buf = append(c.buf, p[i:i+size]...)
		}
		i += size
	}
}

// collapse returns p collapsed and capped at max bytes.
func collapse(p []byte, max int) string {
	c := collapser{max: max}
	c.write(p)
	return c.String()
}

// decodeReader returns r decoded to UTF-8 and the canonical name of the
// encoding it was read in. The encoding comes from a byte order mark, else
// contentType's charset parameter, else (for HTML) a meta declaration in the
// first 1024 bytes, else UTF-8 is assumed.
func decodeReader(r io.Reader, contentType string, isHTML bool) (io.Reader, string, error) {
	br := bufio.NewReaderSize(r, 4096)
	preview, err := br.Peek(1024)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, "", fmt.Errorf("read: %w", err)
	}
	name := ""
	switch {
	case bytes.HasPrefix(preview, []byte("\xef\xbb\xbf")):
		_, _ = br.Discard(3)
		return br, "utf-8", nil
	case bytes.HasPrefix(preview, []byte("\xfe\xff")):
		_, _ = br.Discard(2)
		name = "utf-16be"
	case bytes.HasPrefix(preview, []byte("\xff\xfe")):
		_, _ = br.Discard(2)
		name = "utf-16le"
	}
	if name == "" && contentType != "" {
		if _, params, err := mime.ParseMediaType(contentType); err == nil {
			if _, n := charset.Lookup(params["charset"]); n != "" {
				name = n
			}
		}
	}
	if name == "" && isHTML {
		if _, n := charset.Lookup(metaCharset(preview)); n != "" {
			name = n
			if strings.HasPrefix(n, "utf-16") {
				name = "utf-8" // as the HTML standard says for a meta declaration
			}
		}
	}
	if name == "" || name == "utf-8" {
		return br, "utf-8", nil
	}
	dr, err := charset.NewReaderLabel(name, br)
	if err != nil {
		return br, "utf-8", nil // an encoding we cannot decode: read it as UTF-8
	}
	return dr, name, nil
}

// metaCharset returns the charset label declared by a <meta charset> or
// <meta http-equiv=content-type content="...; charset=..."> in p, or "".
func metaCharset(p []byte) string {
	z := html.NewTokenizer(bytes.NewReader(p))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "meta" {
				continue
			}
			var cs, content string
			isContentType := false
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "charset":
					cs = string(v)
				case "http-equiv":
					isContentType = asciiEqualFold(bytes.TrimSpace(v), "content-type")
				case "content":
					content = string(v)
				}
			}
			if cs != "" {
				return cs
			}
			if isContentType {
				if cs := charsetParam(content); cs != "" {
					return cs
				}
			}
		}
	}
}

// indexFoldASCII returns the index of the first instance of the lowercase
// ASCII word in s, ignoring ASCII case, or -1.
func indexFoldASCII(s, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		j := 0
		for ; j < len(word); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != word[j] {
				break
			}
		}
		if j == len(word) {
			return i
		}
	}
	return -1
}

// charsetParam extracts the charset from a Content-Type-like value, leniently
// (quotes optional, no full media type needed).
func charsetParam(s string) string {
	// The index is found in s itself: lowercasing s first can change its
	// length (invalid UTF-8 becomes U+FFFD), and an index into the lowered
	// copy would then cut s out of range.
	i := indexFoldASCII(s, "charset")
	if i < 0 {
		return ""
	}
	s = strings.TrimLeft(s[i+len("charset"):], " \t\n\r\f")
	if !strings.HasPrefix(s, "=") {
		return ""
	}
	s = strings.TrimLeft(s[1:], " \t\n\r\f")
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		s = s[1:]
		if j := strings.IndexByte(s, q); j >= 0 {
			return s[:j]
		}
		return ""
	}
	if j := strings.IndexAny(s, "; \t\n\r\f"); j >= 0 {
		s = s[:j]
	}
	return s
}
