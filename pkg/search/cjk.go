package search

import (
	"unicode"
	"unicode/utf8"
)

// IsCJK reports whether r is a Han, Hiragana, Katakana or Hangul character,
// or the prolonged sound mark of kana (which belongs to no script): the
// characters of scripts written without spaces between words, or (Korean)
// with particles attached to them, which every Index finds inside longer
// runs of such characters.
func IsCJK(r rune) bool {
	if r < 0x1100 {
		return false
	}
	return r == 'ー' || unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// HasCJK reports whether s holds a CJK character (IsCJK). Every one is at
// least U+1100, encoded from a lead byte of 0xE1 on, so only such bytes are
// decoded: text without them costs a byte scan.
func HasCJK(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0xE1 {
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if IsCJK(r) {
			return true
		}
		i += n - 1
	}
	return false
}
