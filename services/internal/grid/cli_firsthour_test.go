package grid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// The tests of this file follow a newcomer's first hour with grid crawl:
// a site on their own machine, a crawl interrupted and started again, a
// typo in the configuration.

// TestCrawlRefusedAddresses: with loopback not allowed, a crawl of a site
// on this machine ends with exit status 1 and says in plain words that
// nothing was fetched because the addresses are not allowed, naming
// GRIDCRAWL_ALLOW_NETS and --allow-net; its failure reason names the
// variable too. --allow-net loopback crawls it. A crawl that fetched pages
// but had some URLs refused says so beside its summary.
func TestCrawlRefusedAddresses(t *testing.T) {
	site := newCLISite(t, map[string]cliPage{"/": {200, html("/a"), ""}, "/a": {200, html(), ""}})
	t.Run("all refused", func(t *testing.T) {
		dir := cliEnv(t)
		t.Setenv("GRIDCRAWL_ALLOW_NETS", "")
		code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", site.url("/"))
		if code != 1 {
			t.Fatalf("grid crawl of a loopback site = %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for _, want := range []string{"grid crawl: nothing was fetched: crawl ", "addresses are not allowed (" + site.url("/") + ")",
			"loopback, private or link-local networks", "--allow-net loopback", "GRIDCRAWL_ALLOW_NETS=loopback"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr = %q, want %q in it", stderr, want)
			}
		}
		id := strings.Fields(stdout)[1]
		// grid status tells the refused crawl's outcome under its line.
		if code, out, errOut := runCLI(t.Context(), "status", "--data", dir, id); code != 0 ||
			!strings.Contains(out, "  "+string(contracts.OutcomeRefused)+": ") || !strings.Contains(out, "GRIDCRAWL_ALLOW_NETS") {
			t.Errorf("grid status = %d %q %q; want the outcome %q naming GRIDCRAWL_ALLOW_NETS under the crawl's line", code, out, errOut, contracts.OutcomeRefused)
		}
		code, out, errOut := runCLI(t.Context(), "urls", "--data", dir, "--failed", "--json", id)
		if code != 0 || !strings.Contains(out, "GRIDCRAWL_ALLOW_NETS") {
			t.Errorf("grid urls --failed = %d %q %q; want the refused URLs with a reason naming GRIDCRAWL_ALLOW_NETS", code, out, errOut)
		}
	})
	t.Run("allowed by the flag", func(t *testing.T) {
		dir := cliEnv(t)
		t.Setenv("GRIDCRAWL_ALLOW_NETS", "")
		code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", "--allow-net", "private", "--allow-net=loopback", site.url("/"))
		if code != 0 || !strings.Contains(stdout, ": 2 indexed,") || strings.Contains(stderr, "not fetched") {
			t.Fatalf("grid crawl --allow-net loopback = %d, want 0 and 2 indexed, no refusal\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
	t.Run("some refused", func(t *testing.T) {
		dir := cliEnv(t)
		// 127.0.0.2 is not allowed: only 127.0.0.1 is.
		t.Setenv("GRIDCRAWL_ALLOW_NETS", "127.0.0.1")
		other := strings.Replace(site.url("/"), "127.0.0.1", "127.0.0.2", 1)
		code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", "--depth", "0", site.url("/"), other)
		if code != 0 || !strings.Contains(stdout, ": 1 indexed,") {
			t.Fatalf("grid crawl = %d, want 0 and 1 indexed\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		// 127.0.0.2's page and its /sitemap.xml probe.
		if !regexp.MustCompile(`grid crawl: [12] URLs were not fetched: their addresses are on loopback, private or link-local networks`).MatchString(stderr) ||
			!strings.Contains(stderr, "--allow-net loopback") {
			t.Errorf("stderr = %q, want the refused URLs counted and how to allow them", stderr)
		}
	})
}

// TestCrawlAllowNetHelp: grid crawl -h explains the network guard and
// names GRIDCRAWL_ALLOW_NETS and --allow-net, and what the flag means for
// a grid already running; a bad --allow-net is a usage error.
func TestCrawlAllowNetHelp(t *testing.T) {
	code, _, stderr := runCLI(t.Context(), "crawl", "-h")
	for _, want := range []string{"-allow-net", "GRIDCRAWL_ALLOW_NETS", "loopback", "keeps\nthe GRIDCRAWL_ALLOW_NETS it was started with", "--resume", "--new"} {
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("grid crawl -h = %d, stderr %q; want 0 and %q in it", code, stderr, want)
		}
	}
	code, _, stderr = runCLI(t.Context(), "crawl", "--allow-net", "localhost", "http://127.0.0.1:1/")
	if code != 2 || !strings.Contains(stderr, `"localhost" is a host name, not a network`) {
		t.Errorf("grid crawl --allow-net localhost = %d, stderr %q; want 2, explaining the value", code, stderr)
	}
}

// TestConfigErrorsAlike: a bad GRIDCRAWL_ALLOW_NETS exits 2 as
// VAR="value": reason, as other bad variables do; urls, report and export
// explain a missing data directory as status and search do.
func TestConfigErrorsAlike(t *testing.T) {
	dir := cliEnv(t)
	for _, value := range []string{"localhost", "127.0.0.0/33"} {
		t.Setenv("GRIDCRAWL_ALLOW_NETS", value)
		code, _, stderr := runCLI(t.Context(), "crawl", "--data", dir, "http://127.0.0.1:1/")
		want := fmt.Sprintf("grid crawl: GRIDCRAWL_ALLOW_NETS=%q: %q is ", value, value)
		if code != 2 || !strings.HasPrefix(stderr, want) || strings.Contains(stderr, "ParseAddr") || strings.Contains(stderr, "ParsePrefix") {
			t.Errorf("GRIDCRAWL_ALLOW_NETS=%s grid crawl = %d, stderr %q; want 2 and a line starting %q", value, code, stderr, want)
		}
	}
	t.Setenv("GRIDCRAWL_ALLOW_NETS", "")
	missing := filepath.Join(dir, "nope")
	want := "data directory " + missing + " does not exist (no grid has run there; start one with grid up --data " + missing
	for _, args := range [][]string{
		{"status"}, {"search", "words"}, {"urls", "c1"}, {"report", "hosts", "c1"}, {"export", "cdxj", "c1"}, {"export", "segments", "c1"},
	} {
		code, _, stderr := runCLI(t.Context(), append([]string{args[0], "--data", missing}, args[1:]...)...)
		if code != 1 || !strings.HasPrefix(stderr, "grid "+args[0]+": "+want) {
			t.Errorf("grid %v with a missing data directory = %d, stderr %q; want 1 and %q", args, code, stderr, want)
		}
	}
}

// TestProgressAddsUp: the parts of the progress line, long and short, add
// up to the URLs it counts, whatever statuses the crawl has (sitemap, and
// one a newer MCP may report).
func TestProgressAddsUp(t *testing.T) {
	st := contracts.CrawlStatus{State: contracts.CrawlRunning, Retired: 2, Pending: 6,
		Counts: map[contracts.Status]int64{contracts.Indexed: 3, contracts.Redirected: 1, contracts.Failed: 3, contracts.Sitemap: 1,
			contracts.Retired: 2, contracts.ToBeLoaded: 4, contracts.ToBeParsed: 2, "excluded": 5}}
	for _, n := range st.Counts {
		st.Total += n
	}
	number := regexp.MustCompile(`(\d+) ([a-z-]+)`)
	for _, line := range []string{progressLine(st, time.Second, 1), shortProgressLine(st, time.Second, 1)} {
		var sum int64
		names := 0
		for _, m := range number.FindAllStringSubmatch(line, -1) {
			if m[2] == "urls" || m[2] == "pages" || m[2] == "p" {
				continue
			}
			n, _ := strconv.ParseInt(m[1], 10, 64)
			sum += n
			names++
		}
		if sum != st.Total || names != 7 || !strings.Contains(line, fmt.Sprintf("%d/%d urls", st.Total-st.Pending, st.Total)) {
			t.Errorf("progress line %q: parts add up to %d in %d parts, want %d in 7", line, sum, names, st.Total)
		}
	}
	if line := progressLine(st, time.Second, 1); !strings.Contains(line, "1 sitemap") || !strings.Contains(line, "5 excluded") {
		t.Errorf("progress line %q, want the sitemap and excluded counts", line)
	}
}

// TestCrawlWithoutScheme: a start URL without a scheme gets http:// (an IP
// address: a site on this machine), and grid crawl says so.
func TestCrawlWithoutScheme(t *testing.T) {
	site := newCLISite(t, map[string]cliPage{"/": {200, html(), ""}})
	bare := strings.TrimPrefix(site.url("/"), "http://")
	code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", cliEnv(t), "--min-delay-ms", "0", bare)
	if code != 0 || !strings.Contains(stderr, "grid crawl: "+bare+" has no scheme: crawling http://"+bare+"\n") || !strings.Contains(stdout, ": 1 indexed,") {
		t.Errorf("grid crawl %s = %d\nstdout:\n%s\nstderr:\n%s\nwant 0, the page indexed and a note on the scheme", bare, code, stdout, stderr)
	}
}

// TestVersionStamped: make build's ldflags stamp the version grid version
// prints.
func TestVersionStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "grid")
	cmd := exec.Command("go", "build", "-ldflags", "-X github.com/gridcrawl/gridcrawl/services/internal/svc.stamp=v9.8.7-3-gabcdef0-dirty",
		"-o", bin, "github.com/gridcrawl/gridcrawl/services/grid")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build grid: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "grid github.com/gridcrawl/gridcrawl v9.8.7-3-gabcdef0-dirty ") {
		t.Errorf("grid version = %q, %v; want the stamped version", out, err)
	}
}

// interruptedCrawl runs grid crawl of site's / and interrupts it while it
// fetches /block, as Ctrl-C does; it returns the data directory and the
// crawl's id, which is stored there unfinished.
func interruptedCrawl(t *testing.T, site *cliSite) (dir, id string) {
	t.Helper()
	dir = cliEnv(t)
	t.Setenv("GRIDCRAWL_LOADER_SHUTDOWN_TIMEOUT", "100ms")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- Main(ctx, []string{"crawl", "--data", dir, "--min-delay-ms", "0", site.url("/")}, &stdout, &stderr)
	}()
	<-site.arrived
	cancel()
	if code := <-done; code != 130 {
		t.Fatalf("interrupted grid crawl = %d, want 130\nstderr:\n%s", code, stderr.String())
	}
	m := regexp.MustCompile(`crawl (\S+) is stored in .* and still running`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("interrupted grid crawl: stderr %q, want the crawl stored and still running", stderr.String())
	}
	if !strings.Contains(stderr.String(), "or run this grid crawl again: it offers to resume it") {
		t.Errorf("interrupted grid crawl: stderr %q, want it to say running it again offers to resume", stderr.String())
	}
	site.unblock()
	return dir, m[1]
}

// crawlStates returns the state of every crawl in dir, by id.
func crawlStates(t *testing.T, dir string) map[string]contracts.CrawlState {
	t.Helper()
	code, out, errOut := runCLI(t.Context(), "status", "--data", dir, "--json")
	var list contracts.CrawlList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("grid status = %d %q (%v) %q", code, out, err, errOut)
	}
	states := map[string]contracts.CrawlState{}
	for _, c := range list.Crawls {
		states[c.CrawlID] = c.State
	}
	return states
}

func resumeSite(t *testing.T) *cliSite {
	return newCLISite(t, map[string]cliPage{"/": {200, html("/block", "/a"), ""}, "/a": {200, html(), ""}, "/block": {200, html(), ""}})
}

// TestCrawlAgainAfterInterrupt: grid crawl of the same start URLs after an
// interrupted one, with plain pipes: --resume follows the unfinished crawl
// to its end; --new cancels it and starts a new one; without either (and
// no terminal to ask on) it resumes it, saying so and how to start a new
// one instead. No second crawl runs beside the first.
func TestCrawlAgainAfterInterrupt(t *testing.T) {
	for _, tt := range []struct {
		name, flag string
		resumed    bool
		say        string
	}{
		{"resume", "--resume", true, "of the same start URLs is unfinished in %s (running, "},
		{"new", "--new", false, "grid crawl: cancelled the unfinished crawl %s of the same start URLs\n"},
		{"no terminal", "", true, ": resuming it.\ngrid crawl: to start a new crawl instead (cancelling it), run grid crawl --new"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			site := resumeSite(t)
			dir, id := interruptedCrawl(t, site)
			args := []string{"crawl", "--data", dir, "--min-delay-ms", "0", site.url("/")}
			if tt.flag != "" {
				args = append(args, tt.flag)
			}
			code, stdout, stderr := runCLI(t.Context(), args...)
			if code != 0 {
				t.Fatalf("grid crawl %s again = %d, want 0\nstdout:\n%s\nstderr:\n%s", tt.flag, code, stdout, stderr)
			}
			say := tt.say
			if strings.Contains(say, "%s") {
				say = fmt.Sprintf(say, map[bool]string{true: dir, false: id}[tt.resumed])
			}
			if !strings.Contains(stderr, say) {
				t.Errorf("stderr = %q, want %q in it", stderr, say)
			}
			states := crawlStates(t, dir)
			followed := strings.Fields(stdout)[1]
			if tt.resumed {
				if followed != id || len(states) != 1 || states[id] != contracts.CrawlFinished || !strings.Contains(stderr, "grid crawl: crawl "+id+" resumed; dashboard ") {
					t.Errorf("grid crawl %s followed %s; crawls %v; want %s resumed and finished, and no other", tt.flag, followed, states, id)
				}
				return
			}
			if followed == id || len(states) != 2 || states[id] != contracts.CrawlCancelled || states[followed] != contracts.CrawlFinished {
				t.Errorf("grid crawl --new followed %s; crawls %v; want %s cancelled and a new one finished", followed, states, id)
			}
		})
	}
	code, _, stderr := runCLI(t.Context(), "crawl", "--resume", "--new", "http://127.0.0.1:1/")
	if code != 2 || !strings.Contains(stderr, "--resume, --update and --new exclude each other") {
		t.Errorf("grid crawl --resume --new = %d %q, want 2", code, stderr)
	}
}

// TestCrawlAgainAsks: on a terminal, grid crawl of the same start URLs
// after an interrupted one asks whether to resume it or start a new one;
// the answer "n" starts a new one, cancelling the old.
func TestCrawlAgainAsks(t *testing.T) {
	site := resumeSite(t)
	dir, id := interruptedCrawl(t, site)
	ptm, tty := openPTY(t, 200)
	read := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		chunk := make([]byte, 4096)
		answered := false
		for {
			n, err := ptm.Read(chunk)
			buf.Write(chunk[:n])
			if !answered && bytes.Contains(buf.Bytes(), []byte("[R]esume / [n]ew: ")) {
				answered = true
				if _, err := io.WriteString(ptm, "n\n"); err != nil {
					fmt.Fprintf(&buf, "\n(write error: %v)", err)
				}
			}
			if err != nil {
				if !errors.Is(err, syscall.EIO) {
					fmt.Fprintf(&buf, "\n(read error: %v)", err)
				}
				read <- buf.Bytes()
				return
			}
		}
	}()
	var stdout bytes.Buffer
	code := MainIO(t.Context(), []string{"crawl", "--data", dir, "--min-delay-ms", "0", site.url("/")}, tty, &stdout, tty)
	tty.Close()
	screenText := strings.Join(screen(<-read), "\n")
	if code != 0 {
		t.Fatalf("grid crawl on a terminal = %d, want 0\nstdout:\n%s\nscreen:\n%s", code, stdout.String(), screenText)
	}
	question := "grid crawl: crawl " + id + " of the same start URLs is unfinished in " + dir
	if !strings.Contains(screenText, question) || !strings.Contains(screenText, "resume it, or start a new crawl (which cancels it)? [R]esume / [n]ew: n") ||
		!strings.Contains(screenText, "grid crawl: cancelled the unfinished crawl "+id) {
		t.Errorf("screen:\n%s\nwant the question about %s, the answer n and the old crawl cancelled", screenText, id)
	}
	states := crawlStates(t, dir)
	followed := strings.Fields(stdout.String())[1]
	if followed == id || len(states) != 2 || states[id] != contracts.CrawlCancelled || states[followed] != contracts.CrawlFinished {
		t.Errorf("after the answer n: followed %s; crawls %v; want %s cancelled and a new one finished", followed, states, id)
	}
}
