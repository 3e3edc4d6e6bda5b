package browser

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// MinVisibleText is the visible text, in characters, under which an HTML
// answer that loads scripts is taken for a shell its scripts fill.
const MinVisibleText = 200

// appRoots are the ids of the elements single-page-app frameworks mount
// into (React's create-react-app and Vite templates, Vue, Next.js,
// Nuxt, Svelte, Ember, Gatsby).
var appRoots = map[string]bool{"root": true, "app": true, "__next": true, "__nuxt": true, "svelte": true,
	"ember-app": true, "___gatsby": true, "main-app": true}

// maxScan bounds the bytes NeedsRender reads: a shell is small, and a page
// with more than this much HTML before its text is no shell.
const maxScan = 1 << 20

// NeedsRender is the rule of the "auto" render mode: it reports why an
// HTML answer needs its scripts run to show its text and links, or ""
// when it does not. In order:
//
//   - a <noscript> that asks for JavaScript ("enable JavaScript", "requires
//     JavaScript", "JavaScript is required"...);
//   - an empty mount element of a single-page-app framework (an element
//     with id root, app, __next, __nuxt..., or an <app-root>) and scripts;
//   - scripts and less than MinVisibleText characters of visible text
//     (outside script, style, noscript, template and the head).
func NeedsRender(page []byte) string {
	if len(page) > maxScan {
		page = page[:maxScan]
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	var (
		scripts, text  int
		skip           int // depth inside elements whose text is not shown
		inNoscript     bool
		noscript       strings.Builder
		rootOpen       string // the id of an app root just opened
		emptyRoot      string
		rootHasContent bool
	)
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return autoVerdict(scripts, text, emptyRoot, noscript.String())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			id := ""
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if string(k) == "id" {
					id = string(v)
				}
			}
			if rootOpen != "" {
				rootHasContent = true
			}
			switch {
			case a == atom.Script:
				scripts++
			case string(name) == "app-root" && tt == html.StartTagToken:
				rootOpen, rootHasContent = "app-root", false
			case appRoots[id] && tt == html.StartTagToken:
				rootOpen, rootHasContent = "#"+id, false
			}
			if tt == html.StartTagToken {
				switch a {
				case atom.Script, atom.Style, atom.Template, atom.Head, atom.Title:
					skip++
				case atom.Noscript:
					skip++
					inNoscript = true
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.Script, atom.Style, atom.Template, atom.Head, atom.Title:
				skip = max(skip-1, 0)
			case atom.Noscript:
				skip = max(skip-1, 0)
				inNoscript = false
			}
			if rootOpen != "" {
				if !rootHasContent && emptyRoot == "" {
					emptyRoot = rootOpen
				}
				rootOpen = ""
			}
		case html.TextToken:
			t := bytes.TrimSpace(z.Text())
			if len(t) == 0 {
				continue
			}
			if rootOpen != "" {
				rootHasContent = true
			}
			switch {
			case inNoscript:
				if noscript.Len() < 4096 {
					noscript.Write(t)
					noscript.WriteByte(' ')
				}
			case skip == 0:
				text += len([]rune(string(t)))
			}
		}
	}
}

func autoVerdict(scripts, text int, emptyRoot, noscript string) string {
	ns := strings.ToLower(noscript)
	switch {
	case strings.Contains(ns, "javascript") && (strings.Contains(ns, "enable") || strings.Contains(ns, "requir") ||
		strings.Contains(ns, "need") || strings.Contains(ns, "turn on") || strings.Contains(ns, "activate")):
		return "auto: <noscript> asks for JavaScript"
	case emptyRoot != "" && scripts > 0:
		return "auto: empty app root " + emptyRoot
	case scripts > 0 && text < MinVisibleText:
		return fmt.Sprintf("auto: scripts and %d characters of text", text)
	}
	return ""
}
