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

// Quoted returns the words of q, each in double quotes, separated by spaces:
// a query that FTS5 and Elasticsearch's simple_query_string both read as
// "all these words".
func Quoted(q string) string {
	ws := Words(q)
	for i, w := range ws {
		ws[i] = `"` + w + `"`
	}
	return strings.Join(ws, " ")
}
