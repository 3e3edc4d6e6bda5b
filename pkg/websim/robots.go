package websim

import "strings"

// crawlerToken is the product token of gridcrawl's user agent, the token a
// robots.txt group must name to apply to gridcrawl specifically.
const crawlerToken = "gridcrawl"

// robotsRule is one Allow or Disallow line. Patterns use RFC 9309 syntax:
// "*" matches any run of characters and a final "$" anchors the end.
type robotsRule struct {
	allow   bool
	pattern string
}

// robotsGroup is a run of User-agent lines and the rules that follow them.
type robotsGroup struct {
	comment string
	agents  []string
	rules   []robotsRule
}

// robotsFile is the robots.txt of one simulated host. The text served is
// rendered from the groups, so the rules that Expect evaluates and the text a
// crawler parses cannot disagree.
type robotsFile struct {
	// missing makes /robots.txt answer 404, which allows everything.
	missing bool
	header  string
	groups  []robotsGroup
	footer  string
}

// text renders the robots.txt body.
func (f robotsFile) text() string {
	var b strings.Builder
	if f.header != "" {
		b.WriteString(f.header)
		b.WriteString("\n")
	}
	for i, g := range f.groups {
		if i > 0 || f.header != "" {
			b.WriteString("\n")
		}
		if g.comment != "" {
			b.WriteString("# " + g.comment + "\n")
		}
		for _, a := range g.agents {
			b.WriteString("User-agent: " + a + "\n")
		}
		for _, r := range g.rules {
			if r.allow {
				b.WriteString("Allow: " + r.pattern + "\n")
			} else {
				b.WriteString("Disallow: " + r.pattern + "\n")
			}
		}
	}
	if f.footer != "" {
		b.WriteString("\n" + f.footer + "\n")
	}
	return b.String()
}

// allowed reports whether gridcrawl may fetch pathQuery (path plus "?query"
// if any): the group naming gridcrawl applies, else the "*" group; within it
// the longest matching pattern wins and Allow wins a tie.
func (f robotsFile) allowed(pathQuery string) bool {
	if f.missing {
		return true
	}
	var group *robotsGroup
	for i := range f.groups {
		for _, a := range f.groups[i].agents {
			switch {
			case strings.EqualFold(a, crawlerToken):
				group = &f.groups[i]
			case a == "*" && group == nil:
				group = &f.groups[i]
			}
		}
	}
	if group == nil {
		return true
	}
	best, allow := -1, true
	for _, r := range group.rules {
		if r.pattern == "" || !robotsMatch(r.pattern, pathQuery) {
			continue
		}
		if n := len(r.pattern); n > best || (n == best && r.allow) {
			best, allow = n, r.allow
		}
	}
	return allow
}

// robotsMatch reports whether a robots.txt path pattern matches path.
func robotsMatch(pattern, path string) bool {
	anchored := strings.HasSuffix(pattern, "$")
	pattern = strings.TrimSuffix(pattern, "$")
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(path, parts[0]) {
		return false
	}
	rest := path[len(parts[0]):]
	if len(parts) == 1 {
		return !anchored || rest == ""
	}
	for i, p := range parts[1:] {
		if anchored && i == len(parts)-2 {
			return strings.HasSuffix(rest, p)
		}
		j := strings.Index(rest, p)
		if j < 0 {
			return false
		}
		rest = rest[j+len(p):]
	}
	return true
}
