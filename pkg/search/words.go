package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Word rules shared by every Index implementation, so that all backends find
// the same documents for the same user input.
const (
	// MaxTerms is the most words of a query that are kept.
	MaxTerms = 32
	// MaxTermBytes is the longest word kept; longer ones are dropped.
	MaxTermBytes = 256
)

// Words splits a user query into the words an Index must AND together: runs
// of letters, digits and combining marks holding at least one letter or
// digit, valid UTF-8, at most MaxTermBytes long; at most MaxTerms of them.
// A word never holds a quote or a backslash, so implementations may quote it
// for their engine without escaping.
func Words(q string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(q, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	}) {
		if len(w) > MaxTermBytes || !utf8.ValidString(w) ||
			strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) < 0 {
			continue
		}
		out = append(out, w)
		if len(out) == MaxTerms {
			break
		}
	}
	return out
}

// Parsed is a user query read by Parse. Every backend searches for the
// documents that hold all of Words and Phrases, none of Exclude, and match
// each operator group: a host in Sites, an extension in FileTypes and every
// string of InURL.
type Parsed struct {
	// Words are single words (see Words).
	Words []string
	// Phrases are quoted runs of two or more words, to be found in order.
	Phrases [][]string
	// Exclude are words and phrases (one or more words) that a document
	// must not hold: -word or -"some phrase".
	Exclude [][]string
	// Sites are site: values, lowercase hosts or domains without scheme,
	// port or path: a document matches one when its host equals it or is a
	// subdomain of it.
	Sites []string
	// FileTypes are filetype: values, lowercase, without a leading dot,
	// matched against the URL's file extension.
	FileTypes []string
	// InURL are inurl: values, lowercase: the URL must contain each.
	InURL []string
}

// HasTerms reports whether p has words or phrases to match in the text.
func (p Parsed) HasTerms() bool { return len(p.Words) > 0 || len(p.Phrases) > 0 }

// Matches reports whether p selects anything: text terms or an operator
// that restricts by host, file type or URL. A query of excluded words only
// selects nothing.
func (p Parsed) Matches() bool {
	return p.HasTerms() || len(p.Sites) > 0 || len(p.FileTypes) > 0 || len(p.InURL) > 0
}

// maxOperatorBytes bounds the value of one operator.
const maxOperatorBytes = 256

// Parse reads a user query the way YaCy does for the operators its users
// type most: "quoted phrases", -word and -"phrase", site:host,
// filetype:ext and inurl:text (operator names are case-insensitive).
// Everything else is words as in Words. No input is a syntax error: an
// unclosed quote runs to the end, and an operator without a value is
// ignored. At most MaxTerms words (in words, phrases and exclusions
// together) and MaxTerms operator values are kept.
func Parse(q string) Parsed {
	var p Parsed
	terms, ops := 0, 0
	addTerms := func(ws []string, exclude bool) {
		if len(ws) > MaxTerms-terms {
			ws = ws[:MaxTerms-terms]
		}
		if len(ws) == 0 {
			return
		}
		terms += len(ws)
		switch {
		case exclude:
			p.Exclude = append(p.Exclude, ws)
		case len(ws) == 1:
			p.Words = append(p.Words, ws[0])
		default:
			p.Phrases = append(p.Phrases, ws)
		}
	}
	for len(q) > 0 {
		q = strings.TrimLeftFunc(q, unicode.IsSpace)
		if q == "" {
			break
		}
		exclude := false
		if q[0] == '-' && len(q) > 1 && !unicode.IsSpace(rune(q[1])) {
			exclude, q = true, q[1:]
		}
		if q[0] == '"' {
			end := strings.IndexByte(q[1:], '"')
			var inner string
			if end < 0 {
				inner, q = q[1:], ""
			} else {
				inner, q = q[1:1+end], q[2+end:]
			}
			if exclude {
				addTerms(Words(inner), true)
			} else {
				// Each word of a phrase counts once towards MaxTerms.
				addTerms(Words(inner), false)
			}
			continue
		}
		end := strings.IndexFunc(q, unicode.IsSpace)
		if end < 0 {
			end = len(q)
		}
		tok := q[:end]
		q = q[end:]
		if name, val, ok := strings.Cut(tok, ":"); ok && !exclude && val != "" && ops < MaxTerms && len(val) <= maxOperatorBytes && utf8.ValidString(val) {
			switch strings.ToLower(name) {
			case "site":
				if s := siteValue(val); s != "" {
					p.Sites = append(p.Sites, s)
					ops++
				}
				continue
			case "filetype":
				if s := strings.TrimPrefix(strings.ToLower(val), "."); s != "" {
					p.FileTypes = append(p.FileTypes, s)
					ops++
				}
				continue
			case "inurl":
				p.InURL = append(p.InURL, strings.ToLower(val))
				ops++
				continue
			}
		}
		for _, w := range Words(tok) {
			addTerms([]string{w}, exclude)
		}
	}
	return p
}

// siteValue reduces a site: value to a lowercase host: without scheme,
// user info, port, path or trailing dot.
func siteValue(v string) string {
	v = strings.ToLower(v)
	if _, rest, ok := strings.Cut(v, "://"); ok {
		v = rest
	}
	if i := strings.IndexAny(v, "/?#"); i >= 0 {
		v = v[:i]
	}
	if i := strings.LastIndexByte(v, '@'); i >= 0 {
		v = v[i+1:]
	}
	if i := strings.LastIndexByte(v, ':'); i >= 0 && !strings.Contains(v[i+1:], "]") {
		v = v[:i]
	}
	return strings.TrimSuffix(strings.Trim(v, "[]"), ".")
}

// SiteMatches reports whether host is site or a subdomain of it.
func SiteMatches(host, site string) bool {
	return host == site || strings.HasSuffix(host, "."+site)
}
