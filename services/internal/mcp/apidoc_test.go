package mcp

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// delimiterRow is the second line of a markdown table: |---|---|.
var delimiterRow = regexp.MustCompile(`^\|(\s*:?-{3,}:?\s*\|)+\s*$`)

// TestAPIDocTables checks that every run of table rows in docs/api.md is a
// table: a header row, then a delimiter row. Rows that follow a paragraph
// without a header render as text, outside any table.
func TestAPIDocTables(t *testing.T) {
	b, err := os.ReadFile("../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	inFence := false
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(lines[i], "|") {
			continue
		}
		start := i
		for i < len(lines) && strings.HasPrefix(lines[i], "|") {
			i++
		}
		if i-start < 2 || !delimiterRow.MatchString(lines[start+1]) {
			t.Errorf("docs/api.md line %d: table rows without a header and delimiter row (they render as text): %.80s", start+1, lines[start])
		}
		if start > 0 && strings.TrimSpace(lines[start-1]) != "" {
			t.Errorf("docs/api.md line %d: table right after a paragraph line (needs a blank line): %.80s", start+1, lines[start])
		}
	}
}
