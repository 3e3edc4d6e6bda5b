package grid

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// rateWindow is the span over which progress measures the current rate.
const rateWindow = 5 * time.Second

// progress shows a crawl's progress on w: on a terminal one line, redrawn
// in place (with a carriage return) at every status read; elsewhere, such
// as a log file or a pipe, a plain line every `every`, and a last one when
// the crawl ends.
type progress struct {
	w     io.Writer
	tty   bool
	every time.Duration

	drawn     int       // length of the line on the terminal
	wrote     time.Time // when the last plain line was written
	unwritten string    // the plain line of the last status, when not written
	window    []sample  // recent samples, for the current rate
}

// sample is the number of settled URLs at one time.
type sample struct {
	t       time.Time
	settled int64
}

// settled counts the URLs of st that are done: indexed, redirected or
// failed. They are the pages of pages/s.
func settled(st contracts.CrawlStatus) int64 {
	return st.Counts[contracts.Indexed] + st.Counts[contracts.Redirected] + st.Counts[contracts.Failed]
}

// elapsed is how long the crawl of st has run at now: until it finished,
// when it did.
func elapsed(st contracts.CrawlStatus, now time.Time) time.Duration {
	if st.CreatedAt.IsZero() {
		return 0
	}
	end := now
	if st.FinishedAt != nil {
		end = *st.FinishedAt
	}
	return max(end.Sub(st.CreatedAt), 0)
}

// averageRate is the settled URLs per second of the crawl of st so far.
func averageRate(st contracts.CrawlStatus, now time.Time) float64 {
	d := elapsed(st, now)
	if d < time.Millisecond {
		return 0
	}
	return float64(settled(st)) / d.Seconds()
}

// fmtElapsed formats d to the second, as 45s, 4m05s or 2h04m05s.
func fmtElapsed(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
}

// progressLine is the text of one progress report of st: its state unless
// running, the elapsed time, the URLs settled of those known, the count of
// each status (outcomeParts: they add up to the URLs known), for a
// continuous crawl the URLs due, and the rate.
func progressLine(st contracts.CrawlStatus, elapsed time.Duration, rate float64) string {
	state := ""
	if st.State != contracts.CrawlRunning {
		state = string(st.State) + "  "
	}
	due := ""
	if st.Recrawl != nil {
		due = fmt.Sprintf("  %d due", st.Recrawl.Due)
	}
	return fmt.Sprintf("%s%s  %d/%d urls  %s%s  %.1f pages/s",
		state, fmtElapsed(elapsed), st.Total-st.Pending, st.Total, strings.Join(outcomeParts(st, false), "  "), due, rate)
}

// outcomeParts returns the count of every status of st, so that they add
// up to its total: the terminal statuses (sitemap among them, and any a
// newer MCP reports, by name), then the retired and the pending URLs. Short
// parts are abbreviated for a narrow terminal.
func outcomeParts(st contracts.CrawlStatus, short bool) []string {
	type part struct {
		n          int64
		long, abbr string
	}
	parts := []part{
		{st.Counts[contracts.Indexed], "indexed", "idx"},
		{st.Counts[contracts.Redirected], "redirected", "redir"},
		{st.Counts[contracts.Failed], "failed", "fail"},
		{st.Counts[contracts.Sitemap], "sitemap", "smap"},
	}
	var others []string
	for s := range st.Counts {
		switch {
		case s == contracts.Indexed || s == contracts.Redirected || s == contracts.Failed || s == contracts.Sitemap,
			s == contracts.Retired, s.Pending():
		default:
			others = append(others, string(s))
		}
	}
	slices.Sort(others)
	for _, s := range others {
		parts = append(parts, part{st.Counts[contracts.Status(s)], s, s})
	}
	parts = append(parts, part{st.Retired, "retired", "ret"}, part{st.Pending, "pending", "pend"})
	out := make([]string, len(parts))
	for i, p := range parts {
		name := p.long
		if short {
			name = p.abbr
		}
		out[i] = fmt.Sprintf("%d %s", p.n, name)
	}
	return out
}

// shortProgressLine is progressLine in abbreviations, for a narrow
// terminal.
func shortProgressLine(st contracts.CrawlStatus, elapsed time.Duration, rate float64) string {
	state := ""
	if st.State != contracts.CrawlRunning {
		state = string(st.State) + " "
	}
	due := ""
	if st.Recrawl != nil {
		due = fmt.Sprintf(" %d due", st.Recrawl.Due)
	}
	return fmt.Sprintf("%s%s %d/%d urls %s%s %.1f p/s",
		state, fmtElapsed(elapsed), st.Total-st.Pending, st.Total, strings.Join(outcomeParts(st, true), " "), due, rate)
}

// rate returns the current rate: the settled URLs per second over the last
// rateWindow, or the average over the whole crawl while the window is
// shorter than a second.
func (p *progress) rate(st contracts.CrawlStatus, now time.Time) float64 {
	p.window = append(p.window, sample{now, settled(st)})
	for len(p.window) > 2 && now.Sub(p.window[1].t) >= rateWindow {
		p.window = p.window[1:]
	}
	first, last := p.window[0], p.window[len(p.window)-1]
	if d := last.t.Sub(first.t); d >= time.Second {
		// A continuous crawl's round takes settled URLs back: no negative rate.
		return float64(max(last.settled-first.settled, 0)) / d.Seconds()
	}
	return averageRate(st, now)
}

// show reports st, read at now.
func (p *progress) show(st contracts.CrawlStatus, now time.Time) {
	rate := p.rate(st, now)
	if p.tty {
		p.draw(st, elapsed(st, now), rate)
		return
	}
	line := progressLine(st, elapsed(st, now), rate)
	if p.wrote.IsZero() || now.Sub(p.wrote) >= p.every {
		p.wrote, p.unwritten = now, ""
		fmt.Fprintln(p.w, line)
		return
	}
	p.unwritten = line
}

// done reports st, the crawl's last status: its rate is the average of the
// whole crawl.
func (p *progress) done(st contracts.CrawlStatus, now time.Time) {
	if p.tty {
		p.draw(st, elapsed(st, now), averageRate(st, now))
		p.end()
		return
	}
	fmt.Fprintln(p.w, progressLine(st, elapsed(st, now), averageRate(st, now)))
}

// end ends the progress report of a crawl that is followed no longer: on a
// terminal it ends the line, so that what follows starts on a line of its
// own; elsewhere it writes the last status read, if not written yet.
func (p *progress) end() {
	if p.tty && p.drawn > 0 {
		fmt.Fprintln(p.w)
		p.drawn = 0
	}
	if !p.tty && p.unwritten != "" {
		fmt.Fprintln(p.w, p.unwritten)
		p.unwritten = ""
	}
}

// draw redraws the terminal's line.
func (p *progress) draw(st contracts.CrawlStatus, elapsed time.Duration, rate float64) {
	line := fitLine(st, elapsed, rate, terminalWidth(p.w))
	pad := max(p.drawn-len(line), 0)
	fmt.Fprint(p.w, "\r"+line+strings.Repeat(" ", pad))
	p.drawn = len(line)
}

// fitLine returns the longest of the progress lines of st that fits in
// width columns (0: unknown, any fits) without the last one, so that it
// never wraps: a wrapped line cannot be redrawn in place. The longest has a
// bar of the settled URLs; the shortest, cut to the width, is for very
// narrow terminals.
func fitLine(st contracts.CrawlStatus, elapsed time.Duration, rate float64, width int) string {
	const barWidth = 20
	n := 0
	if st.Total > 0 {
		n = int((st.Total - st.Pending) * barWidth / st.Total)
	}
	full := progressLine(st, elapsed, rate)
	short := shortProgressLine(st, elapsed, rate)
	for _, line := range []string{"[" + strings.Repeat("#", n) + strings.Repeat(".", barWidth-n) + "] " + full, full, short} {
		if width == 0 || len(line) < width {
			return line
		}
	}
	return short[:max(width-1, 0)]
}

// isTerminal reports whether w, a reader or writer, is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// terminalWidth returns the columns of the terminal w, 0 when unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
