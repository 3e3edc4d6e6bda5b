package grid

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// archiveSite is a small site whose pages the oracle knows byte for byte.
var archiveSite = map[string]struct{ ctype, body string }{
	"/": {"text/html; charset=utf-8", `<html><head><title>Archive home</title></head><body>
<a href="/a.html">a</a> <a href="/Dir/B.html?x=1&amp;y=2">b</a> <a href="/notes.txt">notes</a> <a href="/missing.html">gone</a>
</body></html>`},
	"/a.html":             {"text/html; charset=utf-8", `<html><head><title>Page A</title></head><body><p>alpha text</p><a href="/">home</a></body></html>`},
	"/Dir/B.html?x=1&y=2": {"text/html", `<html><head><title>Page B</title></head><body><p>bravo text with a query</p></body></html>`},
	"/notes.txt":          {"text/plain; charset=utf-8", "plain notes, archived as they are\n"},
}

func archiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := archiveSite[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", page.ctype)
		io.WriteString(w, page.body)
	})
}

// pywbVenv returns the venv of scripts/services/pywb.sh, or skips (fails
// when backends are required) when it is not installed.
func pywbVenv(t *testing.T) string {
	t.Helper()
	venv := os.Getenv("GRIDCRAWL_PYWB_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "gridcrawl-services", "pywb-venv")
	}
	for _, tool := range []string{"warcio", "wb-manager", "wayback", "cdx-indexer"} {
		if _, err := os.Stat(filepath.Join(venv, "bin", tool)); err != nil {
			testenv.Unavailable(t, "no %s in %s: install warcio and pywb with scripts/services/pywb.sh install (or set GRIDCRAWL_PYWB_VENV)", tool, venv)
		}
	}
	return venv
}

func runTool(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// cliExport runs grid export with args and returns what it printed.
func cliExport(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), append([]string{"export"}, args...), &out, &errOut); code != 0 {
		t.Fatalf("grid export %s = %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

var crawlField = regexp.MustCompile(`, "crawl": "[^"]*"`)

// TestArchiveReplaysInPywb crawls a site on the embedded grid, exports its
// segments and CDXJ with grid export, and checks them with the real tools:
// warcio check passes every segment; pywb's own indexer finds exactly our
// CDXJ lines (our "crawl" field aside); pywb's wayback, given our CDXJ as
// its collection's index, replays every crawled page byte for byte as the
// site served it; and revisit records written with pkg/warc (one
// identical-payload-digest, one server-not-modified) replay as their
// originals.
func TestArchiveReplaysInPywb(t *testing.T) {
	venv := pywbVenv(t)
	bin := func(tool string) string { return filepath.Join(venv, "bin", tool) }
	start := serveSite(t, "archive.test", archiveHandler())
	data := t.TempDir()
	cfg := testConfig(t, data, "archive.test=127.0.0.1,"+neighbourResolve)
	_, api := startGrid(t, cfg)
	crawlNeighbour(t, api) // its records in the segment this crawl's go to: the exports leave them out
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{start}, MaxDepth: 3,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
	base := strings.TrimSuffix(start, "/")

	// Export through the running grid's API.
	out := filepath.Join(t.TempDir(), "export")
	cliExport(t, "--api", api, "--out", out, "segments", id)
	ourIndex, err := os.ReadFile(filepath.Join(out, "index.cdxj"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cliExport(t, "--api", api, "cdxj", id); got != string(ourIndex) {
		t.Errorf("grid export cdxj differs from the index.cdxj of grid export segments --out")
	}
	segs, _ := filepath.Glob(filepath.Join(out, "*.warc.gz"))
	if len(segs) == 0 {
		t.Fatalf("grid export segments --out wrote no segment: %v", segs)
	}
	var list contracts.SegmentList
	if err := json.Unmarshal([]byte(cliExport(t, "--api", api, "--json", "segments", id)), &list); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Segments {
		fi, err := os.Stat(filepath.Join(out, s.Name))
		if err != nil || s.Size == nil || fi.Size() != *s.Size {
			t.Errorf("segment %s listed with size %v, downloaded %v, %v", s.Name, s.Size, fi, err)
		}
	}

	// warcio check: every record's digests verify.
	for _, seg := range segs {
		runTool(t, out, bin("warcio"), "check", "-v", seg)
	}

	// pywb's own indexer finds our lines, byte for byte.
	pywbIndex := runTool(t, out, bin("cdx-indexer"), append([]string{"-j", "-s"}, relNames(segs)...)...)
	ours := crawlField.ReplaceAllString(string(ourIndex), "")
	if diff := cmp.Diff(strings.Split(pywbIndex, "\n"), strings.Split(ours, "\n")); diff != "" {
		t.Errorf("our CDXJ differs from pywb cdx-indexer -j's (-pywb +ours):\n%s", diff)
	}

	// The crawled pages, as our index knows them.
	captures := map[string]warc.CDXJ{}
	for line := range bytes.Lines(ourIndex) {
		c, err := warc.ParseCDXJ(line)
		if err != nil {
			t.Fatal(err)
		}
		if c.Crawl != id {
			t.Errorf("line %s: crawl %q, want %q", line, c.Crawl, id)
		}
		captures[c.URL] = c
	}
	for path := range archiveSite {
		if _, ok := captures[base+path]; !ok {
			t.Errorf("no CDXJ line for %s", base+path)
		}
	}

	// Revisits of two pages, a day later, in a segment of their own.
	later := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	revisitSeg := warc.NewSegment(true)
	revisits := map[string]time.Time{} // page path → the revisit's date
	var revisitLines [][]byte
	const revisitName = "gridcrawl-revisit-test.warc.gz"
	for i, tc := range []struct {
		path, profile, response string
	}{
		{"/a.html", warc.ProfileIdenticalPayloadDigest, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s"},
		{"/notes.txt", warc.ProfileServerNotModified, "HTTP/1.1 304 Not Modified\r\nETag: \"n1\"\r\n\r\n"},
	} {
		orig := captures[base+tc.path]
		resp := tc.response
		if strings.Contains(resp, "%d") {
			body := archiveSite[tc.path].body
			resp = fmt.Sprintf(resp, len(body), body)
		}
		date := later.Add(time.Duration(i) * time.Hour)
		v := warc.Revisit{TargetURI: orig.URL, Date: date, Profile: tc.profile,
			HTTPResponse: []byte(resp), PayloadDigest: orig.Digest, RefersToTargetURI: orig.URL, RefersToDate: orig.Time}
		if tc.profile == warc.ProfileServerNotModified {
			v.OriginalHeader = originalHeader(t, out, orig)
		}
		rec, err := warc.NewRevisitRecord(v)
		if err != nil {
			t.Fatal(err)
		}
		off, n, err := revisitSeg.Append(rec)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := revisitSeg.CDXJOf(rec, 0, off, n, revisitName)
		if !ok || c.MIME != warc.MIMERevisit {
			t.Fatalf("CDXJOf(revisit) = %+v, %v", c, ok)
		}
		revisitLines = append(revisitLines, c.AppendLine(nil))
		revisits[tc.path] = date
	}
	if err := os.WriteFile(filepath.Join(out, revisitName), revisitSeg.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, out, bin("warcio"), "check", "-v", revisitName)
	pywbRevisits := runTool(t, out, bin("cdx-indexer"), "-j", "-s", revisitName)
	if got := string(bytes.Join(warc.SortCDXJ(revisitLines), nil)); got != pywbRevisits {
		t.Errorf("revisit CDXJ lines:\n%s\npywb cdx-indexer -j:\n%s", got, pywbRevisits)
	}

	// A pywb collection with our segments and OUR index (no reindexing).
	root := t.TempDir()
	runTool(t, root, bin("wb-manager"), "init", "crawl")
	archive := filepath.Join(root, "collections", "crawl", "archive")
	for _, f := range append(relNames(segs), revisitName) {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(archive, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	all := slices.Collect(bytes.Lines(ourIndex))
	index := bytes.Join(warc.SortCDXJ(append(all, revisitLines...)), nil)
	if err := os.WriteFile(filepath.Join(root, "collections", "crawl", "indexes", "index.cdxj"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	wayback := startWayback(t, root, bin("wayback"))

	for path, page := range archiveSite {
		c := captures[base+path]
		body, memento := replay(t, wayback, c.Time, c.URL)
		if body != page.body {
			t.Errorf("pywb replay of %s = %q, want what the site served: %q", c.URL, body, page.body)
		}
		if !memento.Equal(c.Time) {
			t.Errorf("pywb replay of %s: Memento-Datetime %v, want the capture's %v", c.URL, memento, c.Time)
		}
	}
	for path, date := range revisits {
		u := base + path
		body, memento := replay(t, wayback, date, u)
		if body != archiveSite[path].body {
			t.Errorf("pywb replay of the revisit of %s = %q, want the original's %q", u, body, archiveSite[path].body)
		}
		if !memento.Equal(date) {
			t.Errorf("pywb replay of the revisit of %s: Memento-Datetime %v, want the revisit's %v", u, memento, date)
		}
	}

	// The documents export, one JSON document a line, every indexed page.
	var docURLs []string
	sc := bufio.NewScanner(strings.NewReader(cliExport(t, "--api", api, "docs", id)))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var d contracts.Document
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("docs line %q: %v", sc.Text(), err)
		}
		if d.CrawlID != id || d.Text == "" {
			t.Errorf("document %s: crawl %q, text %q", d.URL, d.CrawlID, d.Text)
		}
		docURLs = append(docURLs, d.URL)
	}
	var wantURLs []string
	for path := range archiveSite {
		wantURLs = append(wantURLs, base+path)
	}
	slices.Sort(wantURLs)
	slices.Sort(docURLs)
	if diff := cmp.Diff(wantURLs, docURLs); diff != "" {
		t.Errorf("grid export docs URLs (-site +export):\n%s", diff)
	}
}

// originalHeader reads the HTTP header of the response record c points to.
func originalHeader(t *testing.T, dir string, c warc.CDXJ) []byte {
	t.Helper()
	rec := recordAt(t, dir, c)
	end := bytes.Index(rec.Block, []byte("\r\n\r\n"))
	if end < 0 {
		t.Fatalf("response of %s has no header end", c.URL)
	}
	return rec.Block[:end+4]
}

func relNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// startWayback runs pywb's wayback on a loopback port in root until the
// test ends and returns its base URL.
func startWayback(t *testing.T, root, bin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-b", "127.0.0.1", "-p", fmt.Sprint(port), "-t", "2")
	cmd.Dir = root
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("wayback output:\n%s", logs.String())
		}
	})
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; ; i++ {
		res, err := http.Get(u + "/crawl/")
		if err == nil {
			res.Body.Close()
			break
		}
		if i > 600 {
			t.Fatalf("wayback did not answer on %s: %v\n%s", u, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return u
}

// replay asks pywb for the capture of target closest to at, unrewritten
// (id_), and returns the body and the capture's Memento-Datetime.
func replay(t *testing.T, wayback string, at time.Time, target string) (string, time.Time) {
	t.Helper()
	u := wayback + "/crawl/" + at.UTC().Format(warc.CDXJTimeLayout) + "id_/" + target
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %s = %d: %.300s", u, res.StatusCode, body)
	}
	memento, _ := http.ParseTime(res.Header.Get("Memento-Datetime"))
	return string(body), memento
}

// TestExportOffline: grid export answers the same from a running grid's API
// and, once the grid has stopped, from its data directory (MCP in process,
// streaming): the crawl's CDXJ, its documents and its segment list. The
// segments' own indexes are sorted once the loader has stopped.
func TestExportOffline(t *testing.T) {
	start := serveSite(t, "archive.test", archiveHandler())
	data := t.TempDir()
	cfg := testConfig(t, data, "archive.test=127.0.0.1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, err := Open(cfg, discardLogger(), ln)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("grid run: %v", err)
		}
		cancel = func() {}
	}
	defer func() { cancel() }()
	api := "http://" + ln.Addr().String()
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{start}, MaxDepth: 3, Sitemaps: new(bool), // counted lines below
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
	online := map[string]string{}
	for _, what := range []string{"cdxj", "docs", "segments"} {
		online[what] = cliExport(t, "--api", api, what, id)
	}
	// Downloads by byte range match the stored segment.
	var list contracts.SegmentList
	if err := json.Unmarshal([]byte(cliExport(t, "--api", api, "--json", "segments", id)), &list); err != nil || len(list.Segments) == 0 {
		t.Fatalf("segments: %v, %v", list, err)
	}
	seg := list.Segments[0]
	stored, err := os.ReadFile(filepath.Join(data, "assets", filepath.FromSlash(seg.Key)))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(stored))
	for _, tc := range []struct {
		rng  string
		code int
		want []byte
	}{
		{"", http.StatusOK, stored},
		{"bytes=0-9", http.StatusPartialContent, stored[:10]},
		{"bytes=-5", http.StatusPartialContent, stored[size-5:]},
		{fmt.Sprintf("bytes=%d-", size-3), http.StatusPartialContent, stored[size-3:]},
		{fmt.Sprintf("bytes=%d-", size), http.StatusRequestedRangeNotSatisfiable, nil},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, api+seg.URL, nil)
		if tc.rng != "" {
			req.Header.Set("Range", tc.rng)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.code || tc.want != nil && !bytes.Equal(body, tc.want) {
			t.Errorf("GET %s Range %q = %d, %d bytes; want %d, %d bytes", seg.URL, tc.rng, res.StatusCode, len(body), tc.code, len(tc.want))
		}
	}
	stop()
	for what, want := range online {
		if got := cliExport(t, "--data", data, what, id); got != want {
			t.Errorf("grid export %s offline =\n%s\nonline =\n%s", what, got, want)
		}
	}
	if n := strings.Count(online["docs"], "\n"); n != len(archiveSite) {
		t.Errorf("grid export docs printed %d lines, want the %d pages", n, len(archiveSite))
	}
	if n := strings.Count(online["cdxj"], "\n"); n != len(archiveSite)+2 { // robots.txt and the 404 too
		t.Errorf("grid export cdxj printed %d lines, want %d", n, len(archiveSite)+2)
	}
	idx, _ := filepath.Glob(filepath.Join(data, "assets", "warc", "*", "*", "*", "*.cdxj"))
	if len(idx) == 0 {
		t.Fatalf("no segment index under %s", data)
	}
	for _, f := range idx {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if lines := slices.Collect(bytes.Lines(b)); !slices.IsSortedFunc(lines, bytes.Compare) || len(lines) == 0 {
			t.Errorf("segment index %s after the grid stopped is not sorted (or empty):\n%s", f, b)
		}
	}
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"export", "--data", data, "cdxj", "no-such-crawl"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no such crawl") {
		t.Errorf("grid export cdxj of an unknown crawl = %d, %q", code, errOut.String())
	}
}
