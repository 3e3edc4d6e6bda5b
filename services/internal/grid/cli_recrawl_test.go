package grid

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestCrawlContinuous: grid crawl --recrawl follows a continuous crawl to
// the end of its first round, when it is first up to date, and returns:
// exit 0 when it indexed pages (1, naming the crawl's first round, when
// not); stdout's summary has the due URLs and the next due time, stderr
// says how to keep the crawl going and follow it; the progress lines show
// the state and the due count. grid status, with no grid running, shows
// the schedule, the due count and the next due time.
func TestCrawlContinuous(t *testing.T) {
	tests := []struct {
		name                string
		pages               map[string]cliPage
		code                int
		total, indexed, bad int64 // the site's oracle: URLs (with /sitemap.xml), indexed, failed
	}{
		{"pages indexed", map[string]cliPage{"/": {200, html("/a", "/b"), ""}, "/a": {200, html("/"), ""}, "/b": {200, html(), ""}}, 0, 4, 3, 0},
		{"nothing indexed", map[string]cliPage{}, 1, 2, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site := newCLISite(t, tt.pages)
			dir := cliEnv(t)
			t.Setenv("GRIDCRAWL_DUE_CHECK_INTERVAL", "100ms")
			before := time.Now()
			code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", "--recrawl", "1h", site.url("/"))
			if code != tt.code {
				t.Fatalf("grid crawl --recrawl 1h = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			// The next due time: an hour after the first fetch, which was
			// after before; printed to the second, rounded up.
			next := `next due in (59m[0-5]\ds|1h00m00s) \(at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+\)`
			summary := regexp.MustCompile(fmt.Sprintf(`^crawl (\S+) up_to_date in \d+s: %d indexed, 0 redirected, %d failed, 0 retired, %d documents, \d+\.\d pages/s; 0 due, %s\n$`,
				tt.indexed, tt.bad, tt.indexed, next))
			m := summary.FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("stdout = %q, want it to match %s", stdout, summary)
			}
			id := m[1]
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			progress := regexp.MustCompile(`^\d+s  \d+/\d+ urls  \d+ indexed  \d+ redirected  \d+ failed  \d+ sitemap  \d+ retired  \d+ pending  \d+ due  \d+\.\d pages/s$`)
			last := regexp.MustCompile(fmt.Sprintf(`^up_to_date  \d+s  %d/%d urls  %d indexed  0 redirected  %d failed  %d sitemap  0 retired  0 pending  0 due  \d+\.\d pages/s$`,
				tt.total, tt.total, tt.indexed, tt.bad, tt.total-tt.indexed-tt.bad))
			i := 1
			for ; i < len(lines) && progress.MatchString(lines[i]); i++ {
			}
			if i >= len(lines) || !last.MatchString(lines[i]) {
				t.Fatalf("stderr:\n%s\nwant progress lines, then the last one matching %s", stderr, last)
			}
			want := []string{
				"grid crawl: crawl " + id + " is continuous (recrawl every 1h) and up to date: its first round is done",
				"grid crawl: it is stored in " + dir + " and recrawls while a grid runs there: grid up --data " + dir,
				"grid crawl: follow it with: grid status --data " + dir + " " + id,
			}
			if tt.code != 0 {
				want = append(want, "grid crawl: crawl "+id+" did its first round with nothing indexed: 1 failed, 0 redirected, 0 retired",
					"top failure reasons:", "        1  http 404  (e.g. "+site.url("/")+")")
			}
			if got := lines[i+1:]; strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("stderr after the progress:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}

			// grid status reads the data directory: the crawl is up to date.
			code, stdout, stderr = runCLI(t.Context(), "status", "--data", dir)
			// A crawl that indexed nothing has its outcome under its line.
			outcome := ""
			if tt.code != 0 {
				outcome = `  nothing_indexed: nothing indexed \(http 404\)\n`
			}
			line := regexp.MustCompile(fmt.Sprintf(`^%s  up_to_date  total %d  pending 0  indexed %d  redirected 0  failed %d  sitemap %d  retired 0  documents %d  recrawl every 1h: 0 due, %s  %s\n%s$`,
				regexp.QuoteMeta(id), tt.total, tt.indexed, tt.bad, tt.total-tt.indexed-tt.bad, tt.indexed, next, regexp.QuoteMeta(site.url("/")), outcome))
			if code != 0 || !line.MatchString(stdout) {
				t.Errorf("grid status = %d, stdout %q, stderr %q; want it to match %s", code, stdout, stderr, line)
			}
			code, stdout, _ = runCLI(t.Context(), "status", "--data", dir, "--json", id)
			var st contracts.CrawlStatus
			if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.Recrawl == nil || st.Recrawl.NextDue == nil ||
				st.Recrawl.NextDue.Before(before.Add(time.Hour)) || st.Recrawl.NextDue.After(time.Now().Add(time.Hour)) {
				t.Errorf("grid status --json = %d %q (%v), want the next due time an hour after the first fetch", code, stdout, err)
			}
		})
	}
}

// openPTY opens a pseudo-terminal of cols columns and returns its two
// ends: what is written to tty, a program's terminal, is read from ptm.
func openPTY(t *testing.T, cols int) (ptm, tty *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pseudo-terminal number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: uint16(cols)}); err != nil {
		t.Fatalf("set the terminal's size: %v", err)
	}
	return ptm, tty
}

// screen returns the lines a terminal shows for out: a carriage return
// moves back to the start of the line, whose characters are then
// overwritten; a newline starts the next line.
func screen(out []byte) []string {
	var lines []string
	var cur []rune
	col := 0
	for _, r := range string(out) {
		switch r {
		case '\r':
			col = 0
		case '\n':
			lines = append(lines, strings.TrimRight(string(cur), " "))
			cur, col = nil, 0
		default:
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
		}
	}
	if len(cur) > 0 {
		lines = append(lines, strings.TrimRight(string(cur), " "))
	}
	return lines
}

// TestCrawlContinuousTerminal: on a terminal, grid crawl --recrawl redraws
// one progress line in place, which ends showing the crawl up to date,
// with its bar full and its due count, followed by how to follow it.
func TestCrawlContinuousTerminal(t *testing.T) {
	site := newCLISite(t, map[string]cliPage{"/": {200, html("/a", "/b"), ""}, "/a": {200, html(), ""}, "/b": {200, html(), ""}})
	dir := cliEnv(t)
	t.Setenv("GRIDCRAWL_DUE_CHECK_INTERVAL", "100ms")
	ptm, tty := openPTY(t, 160)
	read := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		_, err := io.Copy(&buf, ptm) // ends with EIO once the terminal is closed
		if err != nil && !errors.Is(err, syscall.EIO) {
			fmt.Fprintf(&buf, "\n(read error: %v)", err)
		}
		read <- buf.Bytes()
	}()
	var stdout bytes.Buffer
	code := Main(t.Context(), []string{"crawl", "--data", dir, "--min-delay-ms", "0", "--recrawl", "2s", site.url("/")}, &stdout, tty)
	tty.Close()
	out := <-read
	lines := screen(out)
	if code != 0 {
		t.Fatalf("grid crawl on a terminal = %d, want 0\nstdout:\n%s\nscreen:\n%s", code, stdout.String(), strings.Join(lines, "\n"))
	}
	id := strings.Fields(stdout.String())[1]
	want := []*regexp.Regexp{
		regexp.MustCompile(`^grid crawl: crawl ` + regexp.QuoteMeta(id) + ` started; dashboard http://127\.0\.0\.1:\d+/#/crawl/` + regexp.QuoteMeta(id) + `$`),
		regexp.MustCompile(`^\[####################\] up_to_date  \d+s  4/4 urls  3 indexed  0 redirected  0 failed  1 sitemap  0 retired  0 pending  0 due  \d+\.\d pages/s$`),
		regexp.MustCompile(`^grid crawl: crawl ` + regexp.QuoteMeta(id) + ` is continuous \(recrawl every 2s\) and up to date: its first round is done$`),
		regexp.MustCompile(`^grid crawl: it is stored in `),
		regexp.MustCompile(`^grid crawl: follow it with: grid status --data `),
	}
	if len(lines) != len(want) {
		t.Fatalf("the terminal shows %d lines, want %d (one progress line, redrawn):\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d on the terminal = %q, want it to match %s", i+1, lines[i], re)
		}
	}
	if !bytes.Contains(out, []byte("\r")) {
		t.Errorf("no carriage return on the terminal: the progress line was not redrawn")
	}
}

// TestContinuousProgressText: the progress lines of a continuous crawl
// have its due count; its rate is never negative when a round takes
// settled URLs back; the next due time reads as a person counts time.
func TestContinuousProgressText(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := contracts.CrawlStatus{State: contracts.CrawlUpToDate, CreatedAt: t0, Total: 50, Recrawl: &contracts.RecrawlStatus{Due: 3},
		Counts: map[contracts.Status]int64{contracts.Indexed: 45, contracts.Failed: 5}}
	for _, tt := range []struct {
		width int
		want  string
	}{
		{0, "[####################] up_to_date  1m05s  50/50 urls  45 indexed  0 redirected  5 failed  0 sitemap  0 retired  0 pending  3 due  1.5 pages/s"},
		{120, "up_to_date  1m05s  50/50 urls  45 indexed  0 redirected  5 failed  0 sitemap  0 retired  0 pending  3 due  1.5 pages/s"},
		{90, "up_to_date 1m05s 50/50 urls 45 idx 0 redir 5 fail 0 smap 0 ret 0 pend 3 due 1.5 p/s"},
	} {
		if got := fitLine(st, 65*time.Second, 1.5, tt.width); got != tt.want {
			t.Errorf("fitLine(width %d) = %q, want %q", tt.width, got, tt.want)
		}
	}

	// A round takes 20 settled URLs back to be fetched again.
	p := &progress{w: io.Discard, every: time.Second}
	running := st
	running.State = contracts.CrawlRunning
	p.show(running, t0.Add(10*time.Second))
	running.Counts = map[contracts.Status]int64{contracts.Indexed: 25, contracts.Failed: 5, contracts.ToBeLoaded: 20}
	if r := p.rate(running, t0.Add(12*time.Second)); r != 0 {
		t.Errorf("rate while a round takes URLs back = %v, want 0", r)
	}

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	at := func(d time.Duration) *contracts.RecrawlStatus {
		return &contracts.RecrawlStatus{Due: 2, NextDue: new(now.Add(d))}
	}
	for _, tt := range []struct {
		rs   *contracts.RecrawlStatus
		want string
	}{
		{nil, "nothing scheduled"},
		{&contracts.RecrawlStatus{}, "0 due, no URL scheduled"},
		{at(1500 * time.Millisecond), "2 due, next due in 2s (at " + now.Add(1500*time.Millisecond).Format("2006-01-02 15:04:05 MST") + ")"},
		{at(59*time.Minute + 59*time.Second), "2 due, next due in 59m59s (at " + now.Add(59*time.Minute+59*time.Second).Format("2006-01-02 15:04:05 MST") + ")"},
		{at(30 * 24 * time.Hour), "2 due, next due in 30d00h (at " + now.Add(30*24*time.Hour).Format("2006-01-02 15:04:05 MST") + ")"},
		{at(-time.Minute), "2 due, next due now (since " + now.Add(-time.Minute).Format("2006-01-02 15:04:05 MST") + ")"},
	} {
		if got := fmtNextDue(tt.rs, now); got != tt.want {
			t.Errorf("fmtNextDue(%+v) = %q, want %q", tt.rs, got, tt.want)
		}
	}
	for _, tt := range []struct {
		rc   *contracts.Recrawl
		want string
	}{
		{nil, "none"},
		{&contracts.Recrawl{Interval: "1d12h"}, "every 1d12h"},
		{&contracts.Recrawl{Adaptive: &contracts.AdaptiveRecrawl{Min: "1h", Max: "30d"}}, "adaptive 1h-30d"},
	} {
		if got := fmtSchedule(tt.rc); got != tt.want {
			t.Errorf("fmtSchedule(%+v) = %q, want %q", tt.rc, got, tt.want)
		}
	}
}
