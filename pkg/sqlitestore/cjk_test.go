package sqlitestore

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gridcrawl/gridcrawl/pkg/search"
)

func TestCJKSplit(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"latin unchanged", "Straße, café’s “quotes” — 404", "Straße, café’s “quotes” — 404"},
		{"han run", "日本の富士山", "日 本 の 富 士 山"},
		{"hangul words", "서울은 한국", "서 울 은  " + cjkGap + " 한 국"},
		{"punctuation parts characters", "富士。山", "富 士。 " + cjkGap + " 山"},
		{"latin beside cjk", "東京tower 東京 tower", "東 京 tower 東 京 tower"},
		{"katakana with prolonged sound mark", "タワー", "タ ワ ー"},
		{"combining mark stays", "か\u3099き", "か\u3099 き"},
	} {
		if got := cjkSplit(tc.in); got != tc.want {
			t.Errorf("%s: cjkSplit(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestCJKSnippet(t *testing.T) {
	long := ""
	for range 60 {
		long += "日本語の文章です。"
	}
	for _, tc := range []struct {
		name, body string
		terms      []string
		want       string
	}{
		{"short text whole", "北京的故宫\n很有名。", []string{"故宫"}, "北京的故宫 很有名。"},
		{"no match: the start", "北京的故宫很有名。", []string{"长城"}, "北京的故宫很有名。"},
		// 20 characters before the match, 100 in all.
		{"around the match", long + "富士山" + long, []string{"富士山"},
			"…" + string([]rune(long)[len([]rune(long))-20:]) + "富士山" + string([]rune(long)[:77]) + "…"},
		{"latin term case-insensitive", "東京 Tower です", []string{"tower"}, "東京 Tower です"},
	} {
		if got := cjkSnippet(tc.body, tc.terms); got != tc.want {
			t.Errorf("%s: cjkSnippet(%q, %q) = %q, want %q", tc.name, tc.body, tc.terms, got, tc.want)
		}
	}
}

// FuzzCJKSplit: text without CJK characters comes back unchanged; in split
// text no token (a run of letters, numbers and marks) holds a CJK
// character beside another character other than its combining marks; a
// snippet of any text is valid UTF-8 when the text is.
func FuzzCJKSplit(f *testing.F) {
	for _, s := range []string{"日本の富士山は高い。", "서울은 한국의 수도입니다.", "東京tower。タワー", "plain text", "か\u3099\xff富"} {
		f.Add(s, "富士山")
	}
	f.Fuzz(func(t *testing.T, s, term string) {
		got := cjkSplit(s)
		if !search.HasCJK(s) && got != s {
			t.Fatalf("cjkSplit(%q) = %q, want it unchanged", s, got)
		}
		for _, tok := range strings.FieldsFunc(got, func(r rune) bool { return !isTokenRune(r) }) {
			if !search.HasCJK(tok) {
				continue
			}
			base := strings.Map(func(r rune) rune {
				if unicode.IsMark(r) {
					return -1
				}
				return r
			}, tok)
			if utf8.RuneCountInString(base) > 1 {
				t.Fatalf("cjkSplit(%q) = %q has the token %q", s, got, tok)
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(cjkSnippet(s, []string{term})) {
			t.Fatalf("cjkSnippet(%q, %q) is not valid UTF-8", s, term)
		}
	})
}
