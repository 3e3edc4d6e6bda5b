package grid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// cliPage is one page of a cliSite.
type cliPage struct {
	status   int
	body     string // HTML
	location string // for redirects
}

// cliSite is a loopback site of fixed pages for the command-line tests. A
// request for /block waits until release is closed (or the client gives
// up); arrived is closed at the first one.
type cliSite struct {
	srv     *httptest.Server
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func newCLISite(t *testing.T, pages map[string]cliPage) *cliSite {
	t.Helper()
	s := &cliSite{arrived: make(chan struct{}), release: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			s.once.Do(func() { close(s.arrived) })
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		}
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if p.location != "" {
			w.Header().Set("Location", p.location)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(p.status)
		fmt.Fprint(w, p.body)
	}))
	t.Cleanup(s.srv.Close)
	t.Cleanup(func() { s.unblock() }) // runs before Close
	return s
}

func (s *cliSite) unblock() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *cliSite) url(path string) string { return s.srv.URL + path }

func html(links ...string) string {
	var b strings.Builder
	b.WriteString("<html><head><title>t</title></head><body><p>some words to index</p>")
	for _, l := range links {
		fmt.Fprintf(&b, `<a href="%s">%s</a> `, l, l)
	}
	b.WriteString("</body></html>")
	return b.String()
}

// runCLI runs the grid command with args in this process and returns its
// exit code, stdout and stderr.
func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// cliEnv sets the environment of an embedded grid that may crawl loopback
// sites, with its data in a new directory, which it returns. The host name
// other.test is 127.0.0.1 too: another host on the same test site.
func cliEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testConfig(t, dir, "other.test=127.0.0.1")
	return dir
}

// TestCrawlProgress: grid crawl's progress, when stderr is not a terminal,
// is plain lines with the elapsed time, each outcome's count (redirected
// and retired too), the pending URLs and pages/s; the last line has the
// final counts, which are the site's (a page, two linked pages, a redirect
// to one of them, a missing page). The dashboard URL is printed first and
// grid.addr is removed at the end. Flags may follow the URLs, and
// --urls-file skips blank and comment lines.
func TestCrawlProgress(t *testing.T) {
	pages := map[string]cliPage{}
	site := newCLISite(t, pages)
	pages["/"] = cliPage{200, html("/a", "/b", "/r", "/missing"), ""}
	pages["/a"] = cliPage{200, html("/"), ""}
	pages["/b"] = cliPage{200, html(), ""}
	pages["/r"] = cliPage{301, "", site.url("/a")}
	dir := cliEnv(t)
	urls := filepath.Join(t.TempDir(), "urls.txt")
	if err := os.WriteFile(urls, []byte("# the start page\n\n"+site.url("/b")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, site.url("/"), "--min-delay-ms", "0", "--urls-file", urls)
	if code != 0 {
		t.Fatalf("grid crawl = %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// The oracle: /, /a, /b indexed; /r redirected (to /a, found anyway);
	// /missing failed; and the start host's /sitemap.xml (missing, so
	// status sitemap, not failed) among the URLs.
	const indexed, redirected, failed, sitemaps = 3, 1, 1, 1
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if !regexp.MustCompile(`^grid crawl: crawl \S+ started; dashboard http://127\.0\.0\.1:\d+/#/crawl/\S+$`).MatchString(lines[0]) {
		t.Errorf("first line of stderr = %q, want the crawl and its dashboard URL", lines[0])
	}
	want := regexp.MustCompile(fmt.Sprintf(`^finished  \d+s  %d/%d urls  %d indexed  %d redirected  %d failed  %d sitemap  0 retired  0 pending  \d+\.\d pages/s$`,
		indexed+redirected+failed+sitemaps, indexed+redirected+failed+sitemaps, indexed, redirected, failed, sitemaps))
	if last := lines[len(lines)-1]; !want.MatchString(last) {
		t.Errorf("last progress line = %q, want it to match %s", last, want)
	}
	progress := regexp.MustCompile(`^(paused  )?\d+s  \d+/\d+ urls  \d+ indexed  \d+ redirected  \d+ failed  \d+ sitemap  \d+ retired  \d+ pending  \d+\.\d pages/s$`)
	for _, l := range lines[1 : len(lines)-1] {
		if !progress.MatchString(l) {
			t.Errorf("progress line %q does not match %s", l, progress)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("stderr is not a terminal but has carriage returns:\n%q", stderr)
	}
	summary := regexp.MustCompile(fmt.Sprintf(`^crawl \S+ finished in \d+s: %d indexed, %d redirected, %d failed, 0 retired, %d documents, \d+\.\d pages/s\n$`,
		indexed, redirected, failed, indexed))
	if !summary.MatchString(stdout) {
		t.Errorf("stdout = %q, want it to match %s", stdout, summary)
	}
	if _, err := os.Stat(filepath.Join(dir, addrFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("grid.addr after the crawl: %v, want it removed", err)
	}
}

// TestCrawlWatchedAndSubmitted: while a grid crawl runs, grid status finds
// it through grid.addr; a second grid crawl on the same data directory runs
// its crawl on the first one's grid (instead of refusing: the directory is
// locked); with the directory locked by a process without an API, grid
// crawl says so.
func TestCrawlWatchedAndSubmitted(t *testing.T) {
	site := newCLISite(t, map[string]cliPage{
		"/":      {200, html("/block"), ""},
		"/block": {200, html(), ""},
		"/other": {200, html("/"), ""},
	})
	dir := cliEnv(t)
	type result struct {
		code           int
		stdout, stderr string
	}
	first := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", site.url("/"))
		first <- result{code, stdout, stderr}
	}()
	<-site.arrived // the first crawl runs, held at /block

	code, stdout, stderr := runCLI(t.Context(), "status", "--data", dir, "--json")
	var list contracts.CrawlList
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list.Crawls) != 1 || list.Crawls[0].State != contracts.CrawlRunning {
		t.Fatalf("grid status during the crawl = %d %q (%v), stderr %q; want the one crawl, running", code, stdout, err, stderr)
	}
	// On another host: the first crawl's fetch in flight holds its host.
	other := strings.Replace(site.url("/other"), "127.0.0.1", "other.test", 1)
	code, stdout, stderr = runCLI(t.Context(), "crawl", "--data", dir, "--min-delay-ms", "0", "--depth", "0", other)
	if code != 0 || !strings.Contains(stderr, "a grid is running on "+dir) {
		t.Fatalf("second grid crawl = %d\nstdout:\n%s\nstderr:\n%s\nwant 0, run on the running grid", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "finished in") || !strings.Contains(stdout, ": 1 indexed,") {
		t.Errorf("second grid crawl stdout = %q, want its crawl finished with 1 indexed", stdout)
	}

	// A third, given the grid's address, is interrupted while its page
	// waits behind /block: it keeps running in that grid.
	b, err := os.ReadFile(filepath.Join(dir, addrFile))
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(string(b))
	ctx, cancel := context.WithCancel(t.Context())
	third := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCLI(ctx, "crawl", "--api", base, "--min-delay-ms", "0", "--depth", "0", site.url("/third"))
		third <- result{code, stdout, stderr}
	}()
	for len(list.Crawls) < 3 {
		time.Sleep(20 * time.Millisecond)
		if _, stdout, _ := runCLI(t.Context(), "status", "--api", base, "--json"); json.Unmarshal([]byte(stdout), &list) != nil {
			t.Fatalf("grid status --api %s: %q", base, stdout)
		}
	}
	cancel()
	var thirdID string
	for _, c := range list.Crawls {
		if slices.Equal(c.Profile.StartURLs, []string{site.url("/third")}) {
			thirdID = c.CrawlID
		}
	}
	r := <-third
	if r.code != 130 || thirdID == "" || !strings.Contains(r.stderr, "interrupted; crawl "+thirdID+" keeps running in the grid at "+base) {
		t.Errorf("interrupted grid crawl --api = %d, stderr %q; want 130, saying the crawl keeps running", r.code, r.stderr)
	}

	site.unblock()
	r = <-first
	if r.code != 0 || !strings.Contains(r.stdout, ": 2 indexed,") {
		t.Errorf("first grid crawl = %d, stdout %q, stderr %q; want 0 with 2 indexed", r.code, r.stdout, r.stderr)
	}
	code, stdout, _ = runCLI(t.Context(), "status", "--data", dir, "--json")
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list.Crawls) != 3 {
		t.Fatalf("grid status after = %d %q (%v), want the three crawls", code, stdout, err)
	}

	// A process holds the directory and serves no API.
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backends.DataDir = dir
	g, err := Open(cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Backends.Close()
	code, _, stderr = runCLI(t.Context(), "crawl", "--data", dir, site.url("/"))
	if code != 1 || !strings.Contains(stderr, "in use by another gridcrawl process") || !strings.Contains(stderr, "no grid answers") {
		t.Errorf("grid crawl on a locked directory without a grid = %d, stderr %q; want 1, saying the directory is in use and no grid answers", code, stderr)
	}
}

// TestCrawlNothingIndexed: a crawl that indexes nothing exits 1 and names
// its failure reasons, most frequent first, with their counts (still
// printing the JSON status with --json); one that indexes a page exits 0.
func TestCrawlNothingIndexed(t *testing.T) {
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String() + "/"
	refused.Close() // connections to it are refused
	tests := []struct {
		name    string
		pages   map[string]cliPage
		starts  []string // paths on the site, or absolute URLs
		code    int
		reasons []string // lines of the reasons, in order; nil: none printed
	}{
		{"missing and refused", map[string]cliPage{"/gone": {410, "", ""}}, []string{"/a", "/b", "/gone", refusedURL}, 1,
			[]string{"        2  http 404", "        1  http 410", "        1  robots.txt unreachable: connection refused"}},
		{"robots disallowed", map[string]cliPage{"/robots.txt": {200, "User-agent: *\nDisallow: /\n", ""}, "/": {200, html(), ""}},
			[]string{"/"}, 1, []string{"        1  robots.txt disallowed"}},
		{"one page indexed", map[string]cliPage{"/": {200, html("/missing"), ""}}, []string{"/"}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site := newCLISite(t, tt.pages)
			args := []string{"crawl", "--json", "--data", cliEnv(t), "--min-delay-ms", "0"}
			for _, s := range tt.starts {
				if strings.HasPrefix(s, "/") {
					s = site.url(s)
				}
				args = append(args, s)
			}
			code, stdout, stderr := runCLI(t.Context(), args...)
			if code != tt.code {
				t.Fatalf("grid crawl = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			var st contracts.CrawlStatus
			if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.State != contracts.CrawlFinished {
				t.Errorf("stdout = %q (%v), want the finished crawl's status as JSON", stdout, err)
			}
			_, after, found := strings.Cut(stderr, "top failure reasons:\n")
			if tt.reasons == nil {
				if found || strings.Contains(stderr, "nothing indexed") {
					t.Errorf("stderr = %q, want no failure report", stderr)
				}
				return
			}
			if !strings.Contains(stderr, fmt.Sprintf("grid crawl: crawl %s finished with nothing indexed", st.CrawlID)) || !found {
				t.Fatalf("stderr = %q, want the crawl finished with nothing indexed and its failure reasons", stderr)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimRight(after, "\n"), "\n") {
				reason, _, _ := strings.Cut(l, "  (e.g. ")
				got = append(got, reason)
			}
			if strings.Join(got, "\n") != strings.Join(tt.reasons, "\n") {
				t.Errorf("failure reasons:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.reasons, "\n"))
			}
		})
	}
}

// TestCrawlInterrupt: SIGINT to a running `grid crawl` process stops it
// with exit status 130 and says that the crawl is stored, still running,
// and how to finish it; grid status shows it running, and the command it
// names, grid up, finishes it.
func TestCrawlInterrupt(t *testing.T) {
	bin := buildGrid(t)
	site := newCLISite(t, map[string]cliPage{
		"/":      {200, html("/block", "/a"), ""},
		"/a":     {200, html(), ""},
		"/block": {200, html(), ""},
	})
	dir := cliEnv(t)
	// The fetch of /block does not end: the loader gives up on it at once.
	t.Setenv("GRIDCRAWL_LOADER_SHUTDOWN_TIMEOUT", "100ms")
	cmd := exec.Command(bin, "crawl", "--data", dir, "--min-delay-ms", "0", site.url("/"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-site.arrived
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("grid crawl after SIGINT: %v, want exit status 130\nstderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"is stored in " + dir + " and still running", "it is not finished", "finish it with: grid up --data " + dir} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr after SIGINT = %q, want %q in it", stderr.String(), want)
		}
	}
	code, out, errOut := runCLI(t.Context(), "status", "--data", dir, "--json")
	var list contracts.CrawlList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Crawls) != 1 ||
		list.Crawls[0].State != contracts.CrawlRunning || list.Crawls[0].Pending == 0 {
		t.Fatalf("grid status after SIGINT = %d %q (%v) %q, want one crawl running with URLs pending", code, out, err, errOut)
	}
	id := list.Crawls[0].CrawlID

	// grid up finishes it.
	site.unblock()
	ctx, cancel := context.WithCancel(t.Context())
	up := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(ctx, "up", "--data", dir, "--listen", "127.0.0.1:0")
		up <- code
	}()
	// Until grid up holds the directory, grid status would open it itself.
	wait := func() {
		select {
		case code := <-up:
			t.Fatalf("grid up = %d while the crawl runs", code)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, err := os.Stat(filepath.Join(dir, addrFile)); err != nil; _, err = os.Stat(filepath.Join(dir, addrFile)) {
		wait()
	}
	for {
		code, out, _ := runCLI(t.Context(), "status", "--data", dir, "--json", id)
		var st contracts.CrawlStatus
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.State == contracts.CrawlFinished {
			if st.Counts[contracts.Indexed] != 3 {
				t.Errorf("crawl finished by grid up: %d indexed, want 3", st.Counts[contracts.Indexed])
			}
			break
		}
		wait()
	}
	cancel()
	if code := <-up; code != 0 {
		t.Errorf("grid up = %d, want 0", code)
	}
}

// TestCLIErrors: mistakes on the command line and in the configuration are
// reported once, naming what is wrong (the flag, the file and line, the
// variable and its value, the directory), with the exit status of the
// usage text, and nothing is created.
func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badScheme := file("scheme.txt", "http://a.test/\n\n# comment\nhttp://b.test/ ftp://c.test/\n")
	notURL := file("noturl.txt", "# start\nnot a url\n")
	empty := file("empty.txt", "# nothing\n\n")
	missing := filepath.Join(dir, "nonexistent")
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string // each in stderr once
	}{
		{"unknown flag", nil, []string{"crawl", "--nope", "http://a.test/"}, 2,
			[]string{"grid crawl: flag provided but not defined: -nope\nRun 'grid crawl -h' for usage.\n"}},
		{"unknown flag after a URL", nil, []string{"crawl", "http://a.test/", "--nope"}, 2,
			[]string{"grid crawl: flag provided but not defined: -nope\n"}},
		{"mistyped flag", nil, []string{"crawl", "--dept", "2", "http://a.test/"}, 2,
			[]string{"grid crawl: flag provided but not defined: -dept (did you mean --depth?)\nRun 'grid crawl -h' for usage.\n"}},
		{"mistyped flag with a value", nil, []string{"crawl", "--max-page=5", "http://a.test/"}, 2,
			[]string{"grid crawl: flag provided but not defined: -max-page (did you mean --max-pages?)\n"}},
		{"unknown flag of grid urls", nil, []string{"urls", "c1", "--nope"}, 2,
			[]string{"grid urls: flag provided but not defined: -nope\nRun 'grid urls -h' for usage.\n"}},
		{"mistyped flag of grid urls", nil, []string{"urls", "c1", "--faild"}, 2,
			[]string{"grid urls: flag provided but not defined: -faild (did you mean --failed?)\n"}},
		{"mistyped flag of grid export", nil, []string{"export", "--wazc", "c1"}, 2,
			[]string{"grid export: flag provided but not defined: -wazc (did you mean --wacz?)\nRun 'grid export -h' for usage.\n"}},
		{"unknown flag of grid up", nil, []string{"up", "--lisen", "127.0.0.1:0"}, 2,
			[]string{"grid up: flag provided but not defined: -lisen (did you mean --listen?)\nRun 'grid up -h' for usage.\n"}},
		{"bad flag value", nil, []string{"status", "--json=maybe"}, 2,
			[]string{"grid status: invalid boolean value \"maybe\" for -json: parse error\nRun 'grid status -h' for usage.\n"}},
		{"unknown command", nil, []string{"crwal", "http://a.test/"}, 2,
			[]string{"grid: unknown command \"crwal\"\nRun 'grid help' for usage.\n"}},
		{"urls-file bad scheme", nil, []string{"crawl", "--urls-file", badScheme}, 2,
			[]string{"grid crawl: " + badScheme + `:4: invalid start URL "ftp://c.test/": not an http or https URL`}},
		{"urls-file not a URL", nil, []string{"crawl", "--urls-file", notURL}, 2,
			[]string{"grid crawl: " + notURL + `:2: invalid start URL "not": not a valid URL`}},
		{"urls-file empty", nil, []string{"crawl", "--urls-file", empty}, 2,
			[]string{"grid crawl: " + empty + ": no start URLs in the file"}},
		{"urls-file missing", nil, []string{"crawl", "--urls-file", missing}, 2,
			[]string{"grid crawl: read start URLs: open " + missing + ": no such file or directory"}},
		{"recrawl not a duration", nil, []string{"crawl", "--data", missing, "--recrawl", "daily", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --recrawl "daily": "daily" is not a duration such as "24h" or "30d"`}},
		{"recrawl too short", nil, []string{"crawl", "--data", missing, "--recrawl", "500ms", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --recrawl "500ms": must be between 1s and 366d`}},
		{"recrawl adaptive without a maximum", nil, []string{"crawl", "--data", missing, "--recrawl", "adaptive:1h", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --recrawl "adaptive:1h": want an interval such as 24h or 30d, or adaptive:MIN-MAX such as adaptive:1h-30d`}},
		{"recrawl adaptive minimum", nil, []string{"crawl", "--data", missing, "--recrawl", "adaptive:0s-1h", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --recrawl "adaptive:0s-1h": MIN must be between 1s and 366d`}},
		{"recrawl adaptive maximum below minimum", nil, []string{"crawl", "--data", missing, "--recrawl", "adaptive:2d-1h", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --recrawl "adaptive:2d-1h": MAX must not be shorter than MIN`}},
		{"recrawl empty", nil, []string{"crawl", "--data", missing, "--recrawl=", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --recrawl "": want an interval such as 24h or 30d`}},
		{"bad scope", nil, []string{"crawl", "--data", missing, "--scope", "site", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --scope "site": must be "host", "domain" or "any"`}},
		{"sitemap depth beyond depth", nil, []string{"crawl", "--data", missing, "--depth", "1", "--sitemap-depth", "2", "http://a.test/"}, 2,
			[]string{`grid crawl: invalid --sitemap-depth "2": must be between 0 and --depth`}},
		{"bad start URL", nil, []string{"crawl", "http://a.test/", "mailto:x@a.test"}, 2,
			[]string{`grid crawl: start URL 2 "mailto:x@a.test": not an http or https URL`}},
		{"unknown log level", map[string]string{"GRIDCRAWL_LOG_LEVEL": "verbose"}, []string{"status", "--data", dir}, 2,
			[]string{`grid status: GRIDCRAWL_LOG_LEVEL="verbose": unknown level (one of debug, info, warn, error)`}},
		{"log level of a crawl", map[string]string{"GRIDCRAWL_LOG_LEVEL": "trace"}, []string{"crawl", "--data", dir, "http://a.test/"}, 2,
			[]string{`GRIDCRAWL_LOG_LEVEL="trace": unknown level`}},
		{"bad numbers", map[string]string{"GRIDCRAWL_CRAWLER_WORKERS": "lots", "GRIDCRAWL_HANDOFF_BYTES": "99999999999999999999"}, []string{"status", "--data", dir}, 2,
			[]string{`GRIDCRAWL_CRAWLER_WORKERS="lots": not a whole number`, `GRIDCRAWL_HANDOFF_BYTES="99999999999999999999": out of range (a int64)`}},
		{"bad duration and boolean", map[string]string{"GRIDCRAWL_FETCH_TIMEOUT": "3", "GRIDCRAWL_S3_SECURE": "maybe"}, []string{"search", "--data", dir, "q"}, 2,
			[]string{`GRIDCRAWL_FETCH_TIMEOUT="3": not a duration (such as 500ms, 30s, 10m, 1h)`, `GRIDCRAWL_S3_SECURE="maybe": not a boolean (true or false, 1 or 0)`}},
		{"status of a missing data directory", nil, []string{"status", "--data", missing}, 1,
			[]string{"grid status: data directory " + missing + " does not exist"}},
		{"search of a missing data directory", nil, []string{"search", "--data", missing, "q"}, 1,
			[]string{"grid search: data directory " + missing + " does not exist"}},
		{"up with an argument", nil, []string{"up", "--data", missing, "http://a.test/"}, 2,
			[]string{`grid up: unexpected argument "http://a.test/"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cliEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCLI(t.Context(), tt.args...)
			if code != tt.code {
				t.Errorf("grid %v = %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, code, tt.code, stdout, stderr)
			}
			for _, w := range tt.want {
				if n := strings.Count(stderr, w); n != 1 {
					t.Errorf("grid %v: stderr has %q %d times, want once:\n%s", tt.args, w, n, stderr)
				}
			}
			// An error is not buried under the usage text.
			if strings.Contains(stderr, "usage:") || strings.Count(stderr, "\n") > 3 {
				t.Errorf("grid %v: stderr has the usage or more than 3 lines:\n%s", tt.args, stderr)
			}
			for _, field := range []string{"Workers", "HandoffBytes", "FetchTimeout", "S3Secure", "parse error on field"} {
				if strings.Contains(stderr, field) {
					t.Errorf("grid %v: stderr names the Go field %q:\n%s", tt.args, field, stderr)
				}
			}
			if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("grid %v created %s", tt.args, missing)
			}
		})
	}
}

// TestVersion: grid --version and grid version print the module, its
// version (a test binary has neither stamp nor revision, and says so) and
// the Go version of the build; never Go's bare "(devel)".
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		code, stdout, stderr := runCLI(t.Context(), args...)
		want := regexp.MustCompile(`^grid github\.com/gridcrawl/gridcrawl (unversioned \([^)]*make build stamps one\)|[^ (]\S*)( revision [0-9a-f]+)?( \(\S+\))?( modified)? ` +
			regexp.QuoteMeta(runtime.Version()) + ` ` + runtime.GOOS + `/` + runtime.GOARCH + `\n$`)
		if code != 0 || !want.MatchString(stdout) || stderr != "" {
			t.Errorf("grid %v = %d, stdout %q, stderr %q; want 0 and stdout matching %s", args, code, stdout, stderr, want)
		}
	}
}

// TestProgressLines: the progress report's text, and its cadence where
// stderr is not a terminal: the first status, then one every interval,
// then the last, whose rate is the crawl's average.
func TestProgressLines(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	status := func(indexed, redirected, failed, retired, pending int64) contracts.CrawlStatus {
		st := contracts.CrawlStatus{State: contracts.CrawlRunning, CreatedAt: t0, Retired: retired, Pending: pending,
			Counts: map[contracts.Status]int64{contracts.Indexed: indexed, contracts.Redirected: redirected,
				contracts.Failed: failed, contracts.Retired: retired, contracts.ToBeLoaded: pending}}
		st.Total = indexed + redirected + failed + retired + pending
		return st
	}
	var buf bytes.Buffer
	p := &progress{w: &buf, every: 5 * time.Second}
	p.show(status(0, 0, 0, 0, 10), t0)
	p.show(status(10, 0, 0, 0, 10), t0.Add(time.Second))     // within the interval: not written
	p.show(status(40, 2, 3, 0, 20), t0.Add(5*time.Second))   // 45 in the first 5 s
	p.show(status(90, 4, 6, 1, 9), t0.Add(9*time.Second))    // within the interval
	p.show(status(150, 5, 10, 1, 4), t0.Add(10*time.Second)) // 120 more in the last 5 s
	p.end()                                                  // all written: writes nothing
	end := status(200, 5, 15, 1, 0)
	end.State, end.FinishedAt = contracts.CrawlFinished, new(t0.Add(100*time.Second))
	p.done(end, t0.Add(101*time.Second))
	want := strings.Join([]string{
		"0s  0/10 urls  0 indexed  0 redirected  0 failed  0 sitemap  0 retired  10 pending  0.0 pages/s",
		"5s  45/65 urls  40 indexed  2 redirected  3 failed  0 sitemap  0 retired  20 pending  9.0 pages/s",
		"10s  166/170 urls  150 indexed  5 redirected  10 failed  0 sitemap  1 retired  4 pending  24.0 pages/s",
		"finished  1m40s  221/221 urls  200 indexed  5 redirected  15 failed  0 sitemap  1 retired  0 pending  2.2 pages/s",
	}, "\n") + "\n"
	if buf.String() != want {
		t.Errorf("progress lines:\n%s\nwant:\n%s", buf.String(), want)
	}
	// A crawl followed no longer (interrupted) ends with its last status.
	buf.Reset()
	p = &progress{w: &buf, every: 5 * time.Second}
	p.show(status(0, 0, 0, 0, 10), t0)
	p.show(status(10, 0, 0, 0, 10), t0.Add(2*time.Second))
	p.end()
	if want := "0s  0/10 urls  0 indexed  0 redirected  0 failed  0 sitemap  0 retired  10 pending  0.0 pages/s\n" +
		"2s  10/20 urls  10 indexed  0 redirected  0 failed  0 sitemap  0 retired  10 pending  5.0 pages/s\n"; buf.String() != want {
		t.Errorf("progress lines of an interrupted crawl:\n%s\nwant:\n%s", buf.String(), want)
	}
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{{0, "0s"}, {59*time.Second + 400*time.Millisecond, "59s"}, {61 * time.Second, "1m01s"}, {time.Hour + 2*time.Minute + 3*time.Second, "1h02m03s"}} {
		if got := fmtElapsed(tt.d); got != tt.want {
			t.Errorf("fmtElapsed(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestParseFlags: flags may come before, between and after the arguments;
// "--" ends them.
func TestParseFlags(t *testing.T) {
	tests := []struct {
		args      []string
		wantRest  []string
		wantDepth int
	}{
		{[]string{"--depth", "2", "a", "b"}, []string{"a", "b"}, 2},
		{[]string{"a", "--depth", "2", "b"}, []string{"a", "b"}, 2},
		{[]string{"a", "b", "-depth=4"}, []string{"a", "b"}, 4},
		{[]string{"a", "--", "--depth", "5"}, []string{"a", "--depth", "5"}, 3},
	}
	for _, tt := range tests {
		fs, o := newCrawlFlags(&bytes.Buffer{})
		rest, err := parseFlags(fs, tt.args)
		if err != nil || strings.Join(rest, " ") != strings.Join(tt.wantRest, " ") || *o.depth != tt.wantDepth {
			t.Errorf("parseFlags(%q) = %q, depth %d, %v; want %q, depth %d", tt.args, rest, *o.depth, err, tt.wantRest, tt.wantDepth)
		}
	}
}

// TestFitLine: on a terminal the progress line is the longest form that
// fits the width without wrapping: with a bar, without, abbreviated, cut.
func TestFitLine(t *testing.T) {
	st := contracts.CrawlStatus{State: contracts.CrawlRunning, Total: 50, Pending: 10, Retired: 1,
		Counts: map[contracts.Status]int64{contracts.Indexed: 30, contracts.Redirected: 4, contracts.Failed: 5, contracts.Retired: 1}}
	const (
		full  = "1m05s  40/50 urls  30 indexed  4 redirected  5 failed  0 sitemap  1 retired  10 pending  12.5 pages/s"
		short = "1m05s 40/50 urls 30 idx 4 redir 5 fail 0 smap 1 ret 10 pend 12.5 p/s"
		bar   = "[################....] " + full
	)
	tests := []struct {
		width int
		want  string
	}{
		{0, bar},
		{len(bar) + 1, bar},
		{len(bar), full},
		{len(full) + 1, full},
		{len(full), short},
		{len(short) + 1, short},
		{40, short[:39]},
		{1, ""},
	}
	for _, tt := range tests {
		if got := fitLine(st, 65*time.Second, 12.5, tt.width); got != tt.want {
			t.Errorf("fitLine(width %d) = %q, want %q", tt.width, got, tt.want)
		}
	}
}
