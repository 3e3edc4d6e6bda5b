package grid

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
)

// unfinishedWay is what grid crawl does when a crawl of the same start URLs
// is unfinished in the data directory: an interrupted grid crawl leaves its
// crawl running there, and the grid resumes it whenever it runs again, so
// a second crawl of the same URLs would run beside it, starved behind its
// queue.
type unfinishedWay int

const (
	// resumeUntold resumes it and says so, and how to start a new crawl
	// instead: without a terminal to ask on.
	resumeUntold unfinishedWay = iota
	// resumeIt resumes it as it was (--resume).
	resumeIt
	// startNew cancels it and starts a new crawl (--new).
	startNew
	// updateIt resumes it with the settings of the command line, which
	// must be ones a started crawl can change (--update).
	updateIt
	// askUser asks on the terminal.
	askUser
	// ignoreUnfinished starts a new crawl and leaves the others alone: the
	// crawls of another grid (--api) are not this data directory's.
	ignoreUnfinished
)

// dashboardURL is the address of crawl id's own page on the dashboard at
// base (the dashboard routes by the URL's fragment: #/crawl/ID).
func dashboardURL(base, id string) string {
	return base + "/#/crawl/" + url.PathEscape(id)
}

// resumable finds an unfinished crawl of the start URLs r starts and
// decides, as r.unfinished says, whether to resume it: it returns its id
// (resumed, if paused; with the settings of p when asked to update it), or
// "" to start a new crawl of p, having cancelled the unfinished ones when
// asked to. Settings of p that differ from the unfinished crawl's are never
// dropped silently: they are listed, and without a terminal to ask on, one
// of --resume, --update and --new must say what to do.
func (r *crawlRun) resumable(ctx context.Context, p contracts.Profile) (string, error) {
	if r.unfinished == ignoreUnfinished {
		return "", nil
	}
	list, err := r.c.Crawls(ctx)
	if err != nil {
		return "", err
	}
	var same []contracts.CrawlStatus
	for _, c := range list.Crawls {
		if (c.State == contracts.CrawlRunning || c.State == contracts.CrawlPaused) && sameStarts(c.Profile.StartURLs, r.starts) {
			same = append(same, c)
		}
	}
	if len(same) == 0 {
		return "", nil
	}
	// The newest is the one an interrupted grid crawl left last.
	slices.SortFunc(same, func(a, b contracts.CrawlStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	old := same[0]
	what := fmt.Sprintf("crawl %s of the same start URLs is unfinished in %s (%s, %d of %d URLs pending, started %s ago)",
		old.CrawlID, r.dataDir, old.State, old.Pending, old.Total, fmtElapsed(time.Since(old.CreatedAt)))
	diffs := settingDiffs(old.Profile, p)
	fixed := fixedSettings(diffs)
	differ := ""
	if len(diffs) > 0 {
		differ = "grid crawl: its settings differ from this command's: " + formatDiffs(diffs) + "\n"
		if len(fixed) > 0 {
			differ += "grid crawl: a crawl cannot change " + strings.Join(fixed, ", ") + " once started: only a new crawl has the new value\n"
		}
	}
	way := r.unfinished
	switch way {
	case askUser:
		choices := []choice{{"resume", "r", resumeIt}, {"new", "n", startNew}}
		question := "resume it, or start a new crawl (which cancels it)? [R]esume / [n]ew: "
		if len(diffs) > 0 {
			// No default: the answer decides what becomes of the new settings.
			question = "resume it as it was, or start a new crawl with the new settings (which cancels it)? [r]esume as it was / [n]ew: "
			if len(fixed) == 0 {
				choices = append(choices, choice{"update", "u", updateIt})
				question = "resume it as it was, resume it with the new settings, or start a new crawl (which cancels it)? " +
					"[r]esume as it was / [u]pdate and resume / [n]ew: "
			}
		} else {
			choices = append(choices, choice{"", "", resumeIt}, choice{"yes", "y", resumeIt})
		}
		if way, err = ask(r.stdin, r.stderr, "grid crawl: "+what+".\n"+differ+"grid crawl: "+question, choices); err != nil {
			return "", err
		}
	case resumeUntold:
		if len(diffs) > 0 {
			update := ""
			if len(fixed) == 0 {
				update = ", or --update to resume it with the new settings"
			}
			return "", usageError{fmt.Errorf("%s.\n%sgrid crawl: nothing was started or changed: run grid crawl again with --resume to resume it as it was, "+
				"with --new to cancel it and start a new crawl with the new settings%s", what, differ, update)}
		}
		fmt.Fprintf(r.stderr, "grid crawl: %s: resuming it.\n"+
			"grid crawl: to start a new crawl instead (cancelling it), run grid crawl --new; to stop following it, press Ctrl-C (it stays stored)\n", what)
	case resumeIt:
		fmt.Fprintf(r.stderr, "grid crawl: %s: resuming it (--resume)\n", what)
		if len(diffs) > 0 {
			fmt.Fprintf(r.stderr, "%sgrid crawl: resuming it as it was (--resume): %s\n", differ, formatKept(diffs))
		}
	case updateIt:
		if len(fixed) > 0 {
			return "", usageError{fmt.Errorf("%s.\n%sgrid crawl: --update cannot give it the new settings: run grid crawl with --resume to resume it as it was, "+
				"or with --new to cancel it and start a new crawl", what, differ)}
		}
		fmt.Fprintf(r.stderr, "grid crawl: %s: resuming it (--update)\n%s", what, differ)
	}
	switch way {
	case startNew:
		for _, c := range same {
			if _, err := r.c.Cancel(ctx, c.CrawlID); err != nil {
				return "", fmt.Errorf("cancel unfinished crawl %s: %w", c.CrawlID, err)
			}
			fmt.Fprintf(r.stderr, "grid crawl: cancelled the unfinished crawl %s of the same start URLs\n", c.CrawlID)
		}
		return "", nil
	case updateIt:
		if len(diffs) > 0 {
			if _, err := r.c.Patch(ctx, old.CrawlID, patchOf(diffs)); err != nil {
				return "", fmt.Errorf("change the settings of crawl %s: %w", old.CrawlID, err)
			}
			fmt.Fprintf(r.stderr, "grid crawl: crawl %s now has %s\n", old.CrawlID, formatNew(diffs))
		}
	}
	if old.State == contracts.CrawlPaused {
		if _, err := r.c.Resume(ctx, old.CrawlID); err != nil {
			return "", fmt.Errorf("resume paused crawl %s: %w", old.CrawlID, err)
		}
	}
	return old.CrawlID, nil
}

// settingDiff is a setting of grid crawl's flags whose value in an
// unfinished crawl differs from the command line's.
type settingDiff struct {
	flag     string // the flag's name, without dashes
	old, new string // the values, as the flag takes them
	// patch sets the new value in a PATCH of the crawl; nil for a setting
	// a started crawl cannot change.
	patch func(*contracts.ProfilePatch)
}

// settingDiffs returns the settings of grid crawl's flags in which the
// profile p of the command line differs from old, an unfinished crawl's,
// in the order of the flags' help. Both have their defaults applied, so
// that a flag left out compares as its default. Settings that no flag
// sets (filters, budgets) are not compared.
func settingDiffs(old, p contracts.Profile) []settingDiff {
	old, p = old.WithDefaults(), p.WithDefaults()
	var ds []settingDiff
	add := func(flag, o, n string, patch func(*contracts.ProfilePatch)) {
		if o != n {
			ds = append(ds, settingDiff{flag, o, n, patch})
		}
	}
	first := func(cs []string) string {
		if len(cs) == 0 {
			return ""
		}
		return cs[0]
	}
	dedupe := func(d string) string {
		if d == "" {
			return contracts.DedupeCollection
		}
		return d
	}
	add("collection", first(old.Collection), first(p.Collection), nil)
	dedupeNew := dedupe(p.Dedupe)
	add("dedupe", dedupe(old.Dedupe), dedupeNew, func(pp *contracts.ProfilePatch) { pp.Dedupe = &dedupeNew })
	add("depth", strconv.Itoa(old.MaxDepth), strconv.Itoa(p.MaxDepth), nil)
	add("max-pages", strconv.Itoa(old.MaxPages), strconv.Itoa(p.MaxPages), nil)
	delay := p.Politeness.MinDelayMS
	add("min-delay-ms", strconv.Itoa(old.Politeness.MinDelayMS), strconv.Itoa(delay), func(pp *contracts.ProfilePatch) {
		pp.Politeness = &contracts.PolitenessPatch{MinDelayMS: &delay}
	})
	// A PATCH replaces a continuous crawl's schedule; a one-shot crawl
	// cannot become continuous, nor the reverse.
	var recrawl func(*contracts.ProfilePatch)
	if old.Recrawl != nil && p.Recrawl != nil {
		recrawl = func(pp *contracts.ProfilePatch) { pp.Recrawl = p.Recrawl }
	}
	add("recrawl", recrawlFlag(old.Recrawl), recrawlFlag(p.Recrawl), recrawl)
	add("scope", string(old.Scope), string(p.Scope), nil)
	add("sitemap-depth", strconv.Itoa(old.SitemapDepth), strconv.Itoa(p.SitemapDepth), nil)
	add("sitemaps", strconv.FormatBool(old.SitemapsEnabled()), strconv.FormatBool(p.SitemapsEnabled()), nil)
	return ds
}

// recrawlFlag returns schedule rc as --recrawl takes it: 24h,
// adaptive:1h-30d, or "" for a one-shot crawl.
func recrawlFlag(rc *contracts.Recrawl) string {
	switch {
	case rc == nil:
		return ""
	case rc.Adaptive != nil:
		return "adaptive:" + rc.Adaptive.Min + "-" + rc.Adaptive.Max
	}
	return rc.Interval
}

// fixedSettings returns the flags of ds that a started crawl cannot change.
func fixedSettings(ds []settingDiff) []string {
	var fixed []string
	for _, d := range ds {
		if d.patch == nil {
			fixed = append(fixed, "--"+d.flag)
		}
	}
	return fixed
}

// patchOf returns the PATCH that gives a crawl the new values of ds, which
// a started crawl can all change.
func patchOf(ds []settingDiff) contracts.ProfilePatch {
	var pp contracts.ProfilePatch
	for _, d := range ds {
		d.patch(&pp)
	}
	return pp
}

// flagValue quotes an empty value, which would read as nothing.
func flagValue(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// formatDiffs lays out ds as "--depth 3 -> 0, --min-delay-ms 500 -> 0".
func formatDiffs(ds []settingDiff) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("--%s %s -> %s", d.flag, flagValue(d.old), flagValue(d.new)))
	}
	return strings.Join(parts, ", ")
}

// formatKept lays out the old values of ds, which a resumed crawl keeps:
// "--depth stays 3 (not 0)".
func formatKept(ds []settingDiff) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("--%s stays %s (not %s)", d.flag, flagValue(d.old), flagValue(d.new)))
	}
	return strings.Join(parts, ", ")
}

// formatNew lays out the new values of ds: "--min-delay-ms 0, --dedupe off".
func formatNew(ds []settingDiff) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		parts = append(parts, "--"+d.flag+" "+flagValue(d.new))
	}
	return strings.Join(parts, ", ")
}

// sameStarts reports whether a and b are the same start URLs, in any order,
// as MCP normalizes them.
func sameStarts(a, b []string) bool {
	norm := func(us []string) []string {
		out := make([]string, 0, len(us))
		for _, u := range us {
			if n, err := urlnorm.Normalize(u); err == nil {
				u = n
			}
			out = append(out, u)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

// choice is an answer ask takes: a word, or its first letter key, and
// what it means. An empty word is the answer to an empty line.
type choice struct {
	word, key string
	way       unfinishedWay
}

// ask writes question to w and reads the answer from in, one of choices
// (case and surrounding space do not matter), asking again until it is
// one.
func ask(in io.Reader, w io.Writer, question string, choices []choice) (unfinishedWay, error) {
	sc := bufio.NewScanner(in)
	for {
		fmt.Fprint(w, question)
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return 0, fmt.Errorf("read the answer: %w", err)
			}
			return 0, usageError{fmt.Errorf("no answer: run grid crawl with --resume, --update or --new")}
		}
		answer := strings.ToLower(strings.TrimSpace(sc.Text()))
		for _, c := range choices {
			if answer == c.word || (c.key != "" && answer == c.key) {
				return c.way, nil
			}
		}
		// Ask again on the line after the answer.
		question = question[strings.LastIndex(question, "\n")+1:]
	}
}
