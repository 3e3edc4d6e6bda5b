package extract

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Meta is an HTML page's metadata in the layout of Common Crawl's WAT files
// (the "HTML-Metadata" object of webarchive-commons' extractor): the head's
// title, base, meta tags, link elements and scripts, and the page's links
// with the element and attribute they come from ("A@/href", "IMG@/src",
// ...). URLs are as the page wrote them, not resolved: WAT readers resolve
// them against the page (or Head.Base).
type Meta struct {
	Head  MetaHead   `json:"Head"`
	Links []MetaLink `json:"Links,omitempty"`
}

// MetaHead is the head part of Meta.
type MetaHead struct {
	Title   string              `json:"Title,omitempty"`
	Base    string              `json:"Base,omitempty"`
	Metas   []map[string]string `json:"Metas,omitempty"`
	Link    []MetaLink          `json:"Link,omitempty"`
	Scripts []MetaLink          `json:"Scripts,omitempty"`
}

// MetaLink is one link of Meta.
type MetaLink struct {
	Path  string `json:"path"`
	URL   string `json:"url"`
	Text  string `json:"text,omitempty"`
	Alt   string `json:"alt,omitempty"`
	Title string `json:"title,omitempty"`
	Rel   string `json:"rel,omitempty"`
	Type  string `json:"type,omitempty"`
}

// MetaLimits bounds what Metadata keeps.
type MetaLimits struct {
	// MaxItems bounds the metas, head links, scripts and links, together
	// (default DefaultMaxLinks).
	MaxItems int
	// MaxBytes bounds the bytes of the strings kept (default
	// DefaultMaxLinkBytes); callers bound it by the page's size.
	MaxBytes int
}

// maxMetaValue caps each string Metadata keeps.
const maxMetaValue = 2048

// linkAttr is the attribute holding the URL of the elements Metadata lists.
var linkAttr = map[atom.Atom]string{
	atom.A: "href", atom.Area: "href", atom.Link: "href", atom.Img: "src", atom.Script: "src",
	atom.Iframe: "src", atom.Frame: "src", atom.Embed: "src", atom.Source: "src", atom.Audio: "src",
	atom.Video: "src", atom.Form: "action", atom.Object: "data",
}

// Metadata reads an HTML page's metadata (see Meta), its character set
// taken as HTML does (contentType's charset first). It streams like HTML,
// and keeps at most lim's items and bytes; a token over MaxTokenBytes ends
// it with what was read so far.
func Metadata(r io.Reader, contentType string, lim MetaLimits) (Meta, error) {
	if lim.MaxItems <= 0 {
		lim.MaxItems = DefaultMaxLinks
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultMaxLinkBytes
	}
	rd, _, err := decodeReader(r, contentType, true)
	if err != nil {
		return Meta{}, fmt.Errorf("extract metadata: %w", err)
	}
	m := metaReader{lim: lim, anchor: -1}
	z := html.NewTokenizer(rd)
	z.SetMaxBuf(MaxTokenBytes)
	var raw atom.Atom
	for {
		tt := z.Next()
		prevRaw := raw
		raw = 0
		switch tt {
		case html.ErrorToken:
			err := z.Err()
			m.endAnchor()
			if err == io.EOF || errors.Is(err, html.ErrBufferExceeded) {
				return m.out, nil
			}
			return m.out, fmt.Errorf("extract metadata: read html: %w", err)
		case html.TextToken:
			switch {
			case prevRaw == atom.Title:
				if m.out.Head.Title == "" {
					m.out.Head.Title = m.spend(collapse(z.Text(), MaxTitleBytes))
				}
			case prevRaw == 0 && m.anchor >= 0:
				m.text.write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			switch a {
			case atom.Iframe, atom.Noembed, atom.Noframes, atom.Noscript, atom.Plaintext,
				atom.Script, atom.Style, atom.Textarea, atom.Title, atom.Xmp:
				raw = a
			case atom.Body:
				m.inBody = true
			}
			if tt == html.SelfClosingTagToken && a != atom.Script {
				raw = 0
			}
			m.start(z, a, hasAttr)
		case html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.A:
				m.endAnchor()
			case atom.Head:
				m.inBody = true
			}
		}
	}
}

type metaReader struct {
	lim    MetaLimits
	out    Meta
	items  int
	bytes  int
	inBody bool
	anchor int // index in out.Links of the open <a>, or -1
	text   collapser
}

// spend charges s against the byte budget and returns it, or "" when the
// budget is spent.
func (m *metaReader) spend(s string) string {
	if m.bytes+len(s) > m.lim.MaxBytes {
		return ""
	}
	m.bytes += len(s)
	return s
}

func (m *metaReader) value(v []byte) string {
	return strings.ToValidUTF8(string(bytes.TrimSpace(v[:min(len(v), maxMetaValue)])), "\uFFFD")
}

func (m *metaReader) endAnchor() {
	if m.anchor >= 0 {
		m.out.Links[m.anchor].Text = m.spend(m.text.String())
		m.anchor = -1
	}
}

func (m *metaReader) start(z *html.Tokenizer, a atom.Atom, hasAttr bool) {
	if a == atom.A {
		m.endAnchor()
	}
	if a == atom.Meta {
		if m.items >= m.lim.MaxItems {
			return
		}
		attrs := map[string]string{}
		size := 0
		for hasAttr {
			var k, v []byte
			k, v, hasAttr = z.TagAttr()
			key, val := m.value(k), m.value(v)
			if _, dup := attrs[key]; !dup && key != "" {
				attrs[key] = val
				size += len(key) + len(val)
			}
		}
		if len(attrs) > 0 && m.bytes+size <= m.lim.MaxBytes {
			m.bytes += size
			m.items++
			m.out.Head.Metas = append(m.out.Head.Metas, attrs)
		}
		return
	}
	attr, ok := linkAttr[a]
	if a == atom.Base {
		attr, ok = "href", true
	}
	if !ok {
		return
	}
	var l MetaLink
	found := false
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) {
		case attr:
			if !found {
				l.URL, found = m.value(v), true
			}
		case "alt":
			l.Alt = m.value(v)
		case "title":
			l.Title = m.value(v)
		case "rel":
			l.Rel = m.value(v)
		case "type":
			l.Type = m.value(v)
		}
	}
	if !found {
		return
	}
	if a == atom.Base {
		if m.out.Head.Base == "" {
			m.out.Head.Base = m.spend(l.URL)
		}
		return
	}
	if m.items >= m.lim.MaxItems || m.bytes+len(l.URL)+len(l.Alt)+len(l.Title)+len(l.Rel)+len(l.Type) > m.lim.MaxBytes {
		return
	}
	m.bytes += len(l.URL) + len(l.Alt) + len(l.Title) + len(l.Rel) + len(l.Type)
	m.items++
	l.Path = strings.ToUpper(a.String()) + "@/" + attr
	switch {
	case !m.inBody && a == atom.Link:
		m.out.Head.Link = append(m.out.Head.Link, l)
	case !m.inBody && a == atom.Script:
		m.out.Head.Scripts = append(m.out.Head.Scripts, l)
	default:
		m.out.Links = append(m.out.Links, l)
		if a == atom.A {
			m.anchor = len(m.out.Links) - 1
			m.text = collapser{max: MaxAnchorTextBytes}
		}
	}
}
