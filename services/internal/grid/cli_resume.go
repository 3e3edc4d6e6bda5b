package grid

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
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
	// resumeIt resumes it (--resume).
	resumeIt
	// startNew cancels it and starts a new crawl (--new).
	startNew
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
// (resumed, if paused), or "" to start a new crawl, having cancelled the
// unfinished ones when asked to.
func (r *crawlRun) resumable(ctx context.Context) (string, error) {
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
	way := r.unfinished
	switch way {
	case askUser:
		resume, err := ask(r.stdin, r.stderr, "grid crawl: "+what+".\n"+
			"grid crawl: resume it, or start a new crawl (which cancels it)? [R]esume / [n]ew: ")
		if err != nil {
			return "", err
		}
		way = startNew
		if resume {
			way = resumeIt
		}
	case resumeUntold:
		fmt.Fprintf(r.stderr, "grid crawl: %s: resuming it.\n"+
			"grid crawl: to start a new crawl instead (cancelling it), run grid crawl --new; to stop following it, press Ctrl-C (it stays stored)\n", what)
	case resumeIt:
		fmt.Fprintf(r.stderr, "grid crawl: %s: resuming it (--resume)\n", what)
	}
	if way == startNew {
		for _, c := range same {
			if _, err := r.c.Cancel(ctx, c.CrawlID); err != nil {
				return "", fmt.Errorf("cancel unfinished crawl %s: %w", c.CrawlID, err)
			}
			fmt.Fprintf(r.stderr, "grid crawl: cancelled the unfinished crawl %s of the same start URLs\n", c.CrawlID)
		}
		return "", nil
	}
	if old.State == contracts.CrawlPaused {
		if _, err := r.c.Resume(ctx, old.CrawlID); err != nil {
			return "", fmt.Errorf("resume paused crawl %s: %w", old.CrawlID, err)
		}
	}
	return old.CrawlID, nil
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

// ask writes question to w and reads a yes (resume, the default: an empty
// line) or no (new) answer from in, asking again until it is one.
func ask(in io.Reader, w io.Writer, question string) (bool, error) {
	sc := bufio.NewScanner(in)
	for {
		fmt.Fprint(w, question)
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return false, fmt.Errorf("read the answer: %w", err)
			}
			return false, usageError{fmt.Errorf("no answer: run grid crawl with --resume or --new")}
		}
		switch strings.ToLower(strings.TrimSpace(sc.Text())) {
		case "", "r", "resume", "y", "yes":
			return true, nil
		case "n", "new":
			return false, nil
		}
	}
}
