// Package sitemap reads sitemaps (the sitemaps.org protocol 0.9): XML
// <urlset> files, <sitemapindex> files and plain text files of one URL a
// line, each plain or gzipped, within the protocol's limits of MaxURLs
// entries and MaxBytes uncompressed bytes per file. A file over a limit is
// cut, not refused: its first entries are kept and Result.Cut says why the
// rest was dropped, so that a crawl records the reason on the sitemap's
// record. It imports no backend.
package sitemap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The protocol's limits per sitemap file.
const (
	// MaxURLs is the most entries (<url> or <sitemap>) a file may list.
	MaxURLs = 50000
	// MaxBytes is the most bytes a file may have, uncompressed (50 MiB).
	MaxBytes = 50 << 20
	// maxLocBytes bounds one <loc> (the protocol says less than 2048
	// characters).
	maxLocBytes = 2048
)

// ErrNotSitemap is returned for a body that is neither a sitemap XML file
// (root element urlset or sitemapindex) nor a text sitemap.
var ErrNotSitemap = errors.New("not a sitemap")

// Entry is one <url> of a urlset, one <sitemap> of an index, or one line
// of a text sitemap.
type Entry struct {
	// Loc is the entry's URL as written, trimmed.
	Loc string
	// Lastmod is the entry's <lastmod> in UTC, nil when it has none or it
	// is not a W3C Datetime between 1970 and 2200.
	Lastmod *time.Time
}

// Result is a parsed sitemap.
type Result struct {
	// Index reports a sitemap index: its entries are sitemaps.
	Index bool
	// Entries are the file's entries in order, at most MaxURLs.
	Entries []Entry
	// Cut is empty when the whole file was read; otherwise it says which
	// limit cut it (or where it broke off) and what was kept.
	Cut string
}

// Parse reads a sitemap body, gunzipping it first when it starts with the
// gzip magic bytes (a .xml.gz file served without Content-Encoding). truncated
// tells that the body was already cut by the fetcher's size limit; an XML
// error at the end of such a body is reported as that cut, not as an error.
// Only a body that is no sitemap at all is an error: one that breaks off
// after some entries keeps them, with Cut saying where it broke.
func Parse(body []byte, truncated bool) (Result, error) {
	var r io.Reader = bytes.NewReader(body)
	gz := len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return Result{}, fmt.Errorf("gunzip: %w", err)
		}
		r = zr
	}
	lr := &limitReader{r: r, n: MaxBytes}
	br := bufio.NewReader(lr)
	first, err := firstByte(br)
	if err != nil {
		return Result{}, ErrNotSitemap
	}
	var res Result
	if first == '<' {
		res, err = parseXML(br)
	} else {
		res, err = parseText(br)
	}
	if err != nil {
		if len(res.Entries) == 0 && res.Cut == "" && (errors.Is(err, ErrNotSitemap) || !lr.over && !truncated) {
			return Result{}, err
		}
		if res.Cut == "" {
			res.Cut = "broke off: " + err.Error()
		}
	}
	switch {
	case lr.over:
		res.Cut = fmt.Sprintf("larger than %d bytes uncompressed: cut there, %d entries kept", MaxBytes, len(res.Entries))
	case truncated && err != nil:
		res.Cut = fmt.Sprintf("cut by the loader's body size limit: %d entries kept", len(res.Entries))
	}
	if gz && !lr.over && err == nil {
		// Read the rest, so that a corrupt gzip trailer is noticed.
		if _, err := io.Copy(io.Discard, lr); err != nil && res.Cut == "" {
			res.Cut = "gzip: " + err.Error()
		}
	}
	return res, nil
}

// limitReader reads at most n bytes and notes whether there were more.
type limitReader struct {
	r    io.Reader
	n    int64
	over bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var one [1]byte
		if k, _ := io.ReadFull(l.r, one[:]); k > 0 {
			l.over = true
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	return k, err
}

// firstByte returns the first byte after a UTF-8 byte order mark and
// white space, without consuming it.
func firstByte(br *bufio.Reader) (byte, error) {
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, []byte{0xef, 0xbb, 0xbf}) {
		_, _ = br.Discard(3)
	}
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.Discard(1)
		default:
			return b[0], nil
		}
	}
}

// parseXML reads a urlset or sitemapindex. Namespaces are ignored: many
// sitemaps declare none or a wrong one, and their elements are unambiguous.
func parseXML(r io.Reader) (Result, error) {
	d := xml.NewDecoder(r)
	d.Strict = false
	d.Entity = xml.HTMLEntity
	var res Result
	root := ""
	var cur *Entry
	var field string // "loc" or "lastmod" while inside one
	var text strings.Builder
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if root == "" {
				return res, ErrNotSitemap
			}
			return res, nil
		}
		if err != nil {
			if root == "" {
				return res, ErrNotSitemap
			}
			return res, fmt.Errorf("xml: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			switch {
			case root == "":
				if name != "urlset" && name != "sitemapindex" {
					return res, ErrNotSitemap
				}
				root, res.Index = name, name == "sitemapindex"
			case cur == nil && (name == "url" && !res.Index || name == "sitemap" && res.Index):
				if len(res.Entries) == MaxURLs {
					res.Cut = fmt.Sprintf("lists more than %d entries: the first %d kept", MaxURLs, MaxURLs)
					return res, nil
				}
				cur = &Entry{}
			case cur != nil && (name == "loc" || name == "lastmod"):
				field = name
				text.Reset()
			}
		case xml.CharData:
			if field != "" && text.Len() < maxLocBytes+64 {
				text.Write(t)
			}
		case xml.EndElement:
			name := t.Name.Local
			switch {
			case field != "" && name == field:
				v := strings.TrimSpace(text.String())
				if field == "loc" {
					cur.Loc = v
				} else {
					cur.Lastmod = ParseLastmod(v)
				}
				field = ""
			case cur != nil && (name == "url" || name == "sitemap"):
				if cur.Loc != "" && len(cur.Loc) <= maxLocBytes {
					res.Entries = append(res.Entries, *cur)
				}
				cur = nil
			}
		}
	}
}

// parseText reads a text sitemap: one URL a line, blank lines skipped.
func parseText(r io.Reader) (Result, error) {
	var res Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLocBytes+2)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "http://") && !strings.HasPrefix(line, "https://") {
			if len(res.Entries) == 0 {
				return res, ErrNotSitemap
			}
			continue
		}
		if len(res.Entries) == MaxURLs {
			res.Cut = fmt.Sprintf("lists more than %d entries: the first %d kept", MaxURLs, MaxURLs)
			return res, nil
		}
		res.Entries = append(res.Entries, Entry{Loc: line})
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("text: %w", err)
	}
	if len(res.Entries) == 0 {
		return res, ErrNotSitemap
	}
	return res, nil
}

// lastmodLayouts are the W3C Datetime forms the protocol allows, finest
// first, plus the common form without a time zone.
var lastmodLayouts = []string{
	time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", "2006-01-02", "2006-01", "2006",
}

// ParseLastmod parses a <lastmod> value; it returns nil for one that is not
// a W3C Datetime between 1970 and 2200. The time is UTC at second precision.
func ParseLastmod(s string) *time.Time {
	for _, l := range lastmodLayouts {
		t, err := time.Parse(l, s)
		if err != nil {
			continue
		}
		if t.Year() < 1970 || t.Year() > 2200 {
			return nil
		}
		t = t.UTC().Truncate(time.Second)
		return &t
	}
	return nil
}
