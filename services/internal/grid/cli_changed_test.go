package grid

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// The tests of this file run grid crawl again, after an interrupted one,
// with other settings than the first: the difference is never dropped
// silently.

// crawlStatus returns the status of crawl id in dir.
func crawlStatus(t *testing.T, dir, id string) contracts.CrawlStatus {
	t.Helper()
	list := crawlList(t, dir)
	for _, c := range list.Crawls {
		if c.CrawlID == id {
			return c
		}
	}
	t.Fatalf("grid status: no crawl %s in %s", id, dir)
	return contracts.CrawlStatus{}
}

// crawlList returns every crawl in dir.
func crawlList(t *testing.T, dir string) contracts.CrawlList {
	t.Helper()
	code, out, errOut := runCLI(t.Context(), "status", "--data", dir, "--json")
	var list contracts.CrawlList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("grid status = %d %q (%v) %q", code, out, err, errOut)
	}
	return list
}

// TestCrawlAgainChangedSettings: grid crawl of the same start URLs as an
// interrupted one, without a terminal, with settings that differ from the
// unfinished crawl's (its depth was 3, its minimum delay 0): without
// --resume, --update or --new it lists the differences by flag, old ->
// new, changes nothing and exits 2, naming the flags to pass (--update
// only when a started crawl can take the new settings); --resume resumes
// it as it was and says what it keeps; --update gives it the new
// settings by a PATCH and resumes it, and refuses a setting a started
// crawl cannot change.
func TestCrawlAgainChangedSettings(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags []string
		code  int
		say   []string // each in stderr
		not   []string // none in stderr
		// What becomes of the unfinished crawl: still running (nothing
		// done), or finished, with its depth and minimum delay.
		state         contracts.CrawlState
		depth, delay  int
		version       int
		indexed       int64
		crawlsCreated int
	}{
		{"no terminal, a new depth", []string{"--depth", "0"}, 2,
			[]string{"its settings differ from this command's: --depth 3 -> 0\n", "a crawl cannot change --depth once started",
				"nothing was started or changed: run grid crawl again with --resume to resume it as it was, with --new to cancel it"},
			[]string{"--update to resume", "resuming it"}, contracts.CrawlRunning, 3, 0, 0, 0, 0},
		{"no terminal, a new delay and depth", []string{"--depth", "0", "--min-delay-ms", "5"}, 2,
			[]string{"its settings differ from this command's: --depth 3 -> 0, --min-delay-ms 0 -> 5\n"},
			[]string{"--update to resume"}, contracts.CrawlRunning, 3, 0, 0, 0, 0},
		{"no terminal, a new delay", []string{"--min-delay-ms", "5"}, 2,
			[]string{"--min-delay-ms 0 -> 5\n", "or --update to resume it with the new settings"},
			[]string{"cannot change"}, contracts.CrawlRunning, 3, 0, 0, 0, 0},
		{"resume as it was", []string{"--depth", "0", "--resume"}, 0,
			[]string{"--depth 3 -> 0\n", "resuming it as it was (--resume): --depth stays 3 (not 0)\n"},
			nil, contracts.CrawlFinished, 3, 0, 0, 3, 0},
		{"update", []string{"--min-delay-ms", "5", "--update"}, 0,
			[]string{"--min-delay-ms 0 -> 5\n", "now has --min-delay-ms 5\n"},
			nil, contracts.CrawlFinished, 3, 5, 1, 3, 0},
		{"update what cannot change", []string{"--depth", "0", "--min-delay-ms", "5", "--update"}, 2,
			[]string{"--depth 3 -> 0, --min-delay-ms 0 -> 5\n", "--update cannot give it the new settings"},
			[]string{"now has"}, contracts.CrawlRunning, 3, 0, 0, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			site := resumeSite(t)
			dir, id := interruptedCrawl(t, site)
			args := append([]string{"crawl", "--data", dir, site.url("/")}, tt.flags...)
			if !strings.Contains(strings.Join(tt.flags, " "), "--min-delay-ms") {
				args = append(args, "--min-delay-ms", "0")
			}
			code, stdout, stderr := runCLI(t.Context(), args...)
			if code != tt.code {
				t.Fatalf("grid crawl %v again = %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.flags, code, tt.code, stdout, stderr)
			}
			for _, w := range tt.say {
				if !strings.Contains(stderr, w) {
					t.Errorf("grid crawl %v: stderr = %q, want %q in it", tt.flags, stderr, w)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(stderr, w) {
					t.Errorf("grid crawl %v: stderr = %q, want no %q in it", tt.flags, stderr, w)
				}
			}
			if tt.code == 2 && strings.Count(stderr, "\n") > 6 {
				t.Errorf("grid crawl %v: stderr has %d lines, want the difference and what to pass in a few:\n%s", tt.flags, strings.Count(stderr, "\n"), stderr)
			}
			list := crawlList(t, dir)
			if got := len(list.Crawls) - 1; got != tt.crawlsCreated {
				t.Errorf("grid crawl %v created %d crawls, want %d", tt.flags, got, tt.crawlsCreated)
			}
			st := crawlStatus(t, dir, id)
			p := st.Profile.WithDefaults()
			if st.State != tt.state || p.MaxDepth != tt.depth || p.Politeness.MinDelayMS != tt.delay || p.Version != tt.version {
				t.Errorf("grid crawl %v: crawl %s %s, depth %d, min delay %d, version %d; want %s, %d, %d, %d",
					tt.flags, id, st.State, p.MaxDepth, p.Politeness.MinDelayMS, p.Version, tt.state, tt.depth, tt.delay, tt.version)
			}
			if tt.state == contracts.CrawlFinished && st.Counts[contracts.Indexed] != tt.indexed {
				t.Errorf("grid crawl %v: crawl %s indexed %d, want %d", tt.flags, id, st.Counts[contracts.Indexed], tt.indexed)
			}
		})
	}
}

// TestCrawlAgainChangedAsks: on a terminal, grid crawl again with another
// minimum delay shows the difference and asks without a default (an
// empty answer asks again); "u" gives the crawl the new setting and
// resumes it.
func TestCrawlAgainChangedAsks(t *testing.T) {
	site := resumeSite(t)
	dir, id := interruptedCrawl(t, site)
	ptm, tty := openPTY(t, 200)
	const prompt = "[r]esume as it was / [u]pdate and resume / [n]ew: "
	read := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		chunk := make([]byte, 4096)
		answers, answered := []string{"\n", "u\n"}, 0
		for {
			n, err := ptm.Read(chunk)
			buf.Write(chunk[:n])
			if answered < len(answers) && bytes.Count(buf.Bytes(), []byte(prompt)) > answered {
				if _, err := io.WriteString(ptm, answers[answered]); err != nil {
					fmt.Fprintf(&buf, "\n(write error: %v)", err)
				}
				answered++
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
	code := MainIO(t.Context(), []string{"crawl", "--data", dir, "--min-delay-ms", "5", site.url("/")}, tty, &stdout, tty)
	tty.Close()
	screenText := strings.Join(screen(<-read), "\n")
	if code != 0 {
		t.Fatalf("grid crawl on a terminal = %d, want 0\nstdout:\n%s\nscreen:\n%s", code, stdout.String(), screenText)
	}
	// The empty answer is asked again.
	question := "grid crawl: resume it as it was, resume it with the new settings, or start a new crawl (which cancels it)? " + prompt
	for _, want := range []string{"grid crawl: its settings differ from this command's: --min-delay-ms 0 -> 5",
		strings.TrimRight(question, " ") + "\n" + question + "u\n",
		"grid crawl: crawl " + id + " now has --min-delay-ms 5"} {
		if !strings.Contains(screenText, want) {
			t.Errorf("screen:\n%s\nwant %q in it", screenText, want)
		}
	}
	st := crawlStatus(t, dir, id)
	if len(crawlList(t, dir).Crawls) != 1 || st.State != contracts.CrawlFinished || st.Profile.Politeness.MinDelayMS != 5 {
		t.Errorf("after the answer u: crawl %s %s, min delay %d; want it alone, finished, with min delay 5", id, st.State, st.Profile.Politeness.MinDelayMS)
	}
}

// TestSettingDiffs: the settings of grid crawl's flags compare with their
// defaults applied (a flag left out is its default), name the flag, and
// can be patched only where a started crawl can change them.
func TestSettingDiffs(t *testing.T) {
	five, off := 5, false
	base := contracts.Profile{StartURLs: []string{"http://a.test/"}, MaxDepth: 3}
	tests := []struct {
		name     string
		old, new func(p *contracts.Profile)
		want     string
		fixed    []string
	}{
		{"same", func(*contracts.Profile) {}, func(*contracts.Profile) {}, "", nil},
		{"defaults spelled out", func(*contracts.Profile) {},
			func(p *contracts.Profile) {
				p.Scope, p.Politeness, p.Dedupe = contracts.DefaultScope, contracts.DefaultPoliteness(), contracts.DedupeCollection
			}, "", nil},
		{"depth", func(*contracts.Profile) {}, func(p *contracts.Profile) { p.MaxDepth = 0 }, "--depth 3 -> 0", []string{"--depth"}},
		{"a flag left out", func(p *contracts.Profile) { p.MaxPages = 60 }, func(*contracts.Profile) {}, "--max-pages 60 -> 0", []string{"--max-pages"}},
		{"delay and dedupe", func(*contracts.Profile) {},
			func(p *contracts.Profile) {
				p.Politeness = contracts.PolitenessPatch{MinDelayMS: &five}.WithDefaults()
				p.Dedupe = contracts.DedupeOff
			}, "--dedupe collection -> off, --min-delay-ms 500 -> 5", nil},
		{"schedule of a continuous crawl", func(p *contracts.Profile) { p.Recrawl = &contracts.Recrawl{Interval: "24h"} },
			func(p *contracts.Profile) {
				p.Recrawl = &contracts.Recrawl{Adaptive: &contracts.AdaptiveRecrawl{Min: "1h", Max: "30d"}}
			}, "--recrawl 24h -> adaptive:1h-30d", nil},
		{"one-shot to continuous", func(*contracts.Profile) {}, func(p *contracts.Profile) { p.Recrawl = &contracts.Recrawl{Interval: "24h"} },
			`--recrawl "" -> 24h`, []string{"--recrawl"}},
		{"scope, sitemaps, collection", func(*contracts.Profile) {},
			func(p *contracts.Profile) {
				p.Scope, p.Sitemaps, p.SitemapDepth, p.Collection = contracts.ScopeDomain, &off, 1, []string{"monthly"}
			}, `--collection "" -> monthly, --scope host -> domain, --sitemap-depth 0 -> 1, --sitemaps true -> false`,
			[]string{"--collection", "--scope", "--sitemap-depth", "--sitemaps"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, p := base, base
			tt.old(&old)
			tt.new(&p)
			ds := settingDiffs(old, p)
			if got := formatDiffs(ds); got != tt.want {
				t.Errorf("settingDiffs(%s) = %q, want %q", tt.name, got, tt.want)
			}
			if got := fixedSettings(ds); strings.Join(got, " ") != strings.Join(tt.fixed, " ") {
				t.Errorf("fixedSettings(%s) = %q, want %q", tt.name, got, tt.fixed)
			}
		})
	}
}
