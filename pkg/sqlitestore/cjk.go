package sqlitestore

import (
	"database/sql/driver"
	"strings"
	"unicode"
	"unicode/utf8"

	"modernc.org/sqlite"

	"github.com/gridcrawl/gridcrawl/pkg/search"
)

// Chinese, Japanese and Korean are written without spaces between words
// (Korean words carry particles: 서울은 is 서울 with a particle), and
// FTS5's unicode61 tokenizer keeps such a run of letters as one token, so
// that none of its words could be found. The full-text index therefore
// holds each CJK character as a token of its own, and a query word of CJK
// characters is searched as the phrase of its characters: 富士山 finds the
// three characters in a row, in 日本の富士山は高い, and not 富 and 山
// apart. A single character is a one-token phrase. Elasticsearch's
// standard tokenizer splits Han and kana the same way (see esindex).
//
// A query phrase of characters must not be matched across a space or a
// punctuation mark either (富士。山 does not hold 富士山), while a phrase
// of CJK words ("日本 富士山", quoted) must still find them with a space or
// a mark between them: cjkSplit puts the token cjkGap between two CJK
// characters with only spaces and punctuation between them, in documents
// and in queries alike. It is a private-use character, which unicode61
// indexes as a token and search.Words never keeps in a query, so that no
// user query matches it on its own.
//
// Text without CJK characters is indexed unchanged (search.HasCJK is a byte
// scan that stops at the first), so Latin-script search is what it was. The
// split text is never stored: web keeps the text as it came, its cjk
// column says whether web_fts indexed the split text (gridcrawl_cjk of
// each column), and the snippets of those documents are made in Go
// (cjkSnippet), since FTS5's snippet would quote the split text.
const cjkGap = "\uE000"

// cjkFunc is the SQL function that returns the text web_fts indexes for a
// column of a document whose cjk column is set: cjkSplit of its value.
const cjkFunc = "gridcrawl_cjk"

// hasCJKFunc is the SQL function of hasCJK, which marks the documents of an
// older index when it is migrated.
const hasCJKFunc = "gridcrawl_has_cjk"

func init() {
	// Registered with the driver, so that every connection of every
	// database of the package has it (the writer indexes, readers make
	// nothing of it, migrations reindex). It is pure: the same text always
	// gives the same tokens, which FTS5 needs to delete what it indexed.
	sqlite.MustRegisterDeterministicScalarFunction(cjkFunc, 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case string:
			return cjkSplit(v), nil
		case []byte:
			return cjkSplit(string(v)), nil
		}
		return args[0], nil
	})
	sqlite.MustRegisterDeterministicScalarFunction(hasCJKFunc, 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case string:
			return search.HasCJK(v), nil
		case []byte:
			return search.HasCJK(string(v)), nil
		}
		return false, nil
	})
}

// isTokenRune reports whether unicode61 (as web_fts configures it) makes r
// part of a token: letters, numbers and private-use characters, and the
// combining marks it folds away.
func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || unicode.Is(unicode.Co, r)
}

// cjkSplit returns s with a space on both sides of every CJK character
// (its combining marks stay with it), and cjkGap between two CJK characters
// that only spaces and punctuation part. Text without CJK characters comes
// back unchanged.
func cjkSplit(s string) string {
	if !search.HasCJK(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	const (
		none = iota
		cjkChar
		otherToken
		separator
	)
	prev := none
	lastTokenCJK := false // the last token character seen was CJK
	for _, r := range s {
		switch {
		case search.IsCJK(r):
			switch {
			case prev == separator && lastTokenCJK:
				b.WriteString(" " + cjkGap + " ")
			case prev == cjkChar || prev == otherToken:
				b.WriteByte(' ')
			}
			prev, lastTokenCJK = cjkChar, true
		case prev == cjkChar && unicode.IsMark(r):
			// A combining mark stays with its character.
		case isTokenRune(r):
			if prev == cjkChar {
				b.WriteByte(' ')
			}
			prev, lastTokenCJK = otherToken, false
		default:
			prev = separator
		}
		b.WriteRune(r)
	}
	return b.String()
}

// cjkSnippetRunes is the length of a snippet of a document with CJK text,
// in characters: about as wide on screen as FTS5's 24 tokens of Latin text.
const cjkSnippetRunes = 100

// cjkSnippet returns plain text of body around the first of terms it holds
// (compared case-insensitively), or its start, with "…" where it was cut
// and runs of white space made single spaces.
func cjkSnippet(body string, terms []string) string {
	at := -1
	lower := strings.ToLower(body)
	// ToLower may change the length of some characters; then the offsets
	// in lower are not those of body, and only exact matches are used.
	folded := len(lower) == len(body)
	for _, t := range terms {
		i := strings.Index(body, t)
		if folded {
			i = strings.Index(lower, strings.ToLower(t))
		}
		if i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	start := 0
	if at > 0 {
		// A few characters of context before the match.
		start = at
		for n := 0; n < cjkSnippetRunes/5 && start > 0; n++ {
			_, size := utf8.DecodeLastRuneInString(body[:start])
			start -= size
		}
	}
	end := start
	for n := 0; n < cjkSnippetRunes && end < len(body); n++ {
		_, size := utf8.DecodeRuneInString(body[end:])
		end += size
	}
	out := strings.Join(strings.Fields(body[start:end]), " ")
	if start > 0 {
		out = "…" + out
	}
	if end < len(body) {
		out += "…"
	}
	return out
}
