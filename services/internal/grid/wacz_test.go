package grid

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// waczTool returns py-wacz's wacz command from the venv of
// scripts/services/pywb.sh, or skips (fails when backends are required).
func waczTool(t *testing.T) string {
	t.Helper()
	venv := os.Getenv("GRIDCRAWL_PYWB_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "gridcrawl-services", "pywb-venv")
	}
	bin := filepath.Join(venv, "bin", "wacz")
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "no wacz in %s: install py-wacz with scripts/services/pywb.sh install (or set GRIDCRAWL_PYWB_VENV)", venv)
	}
	return bin
}

// checkWACZ checks the WACZ file of crawl id against the site's oracle:
// py-wacz's validator accepts it; every entry is listed in datapackage.json
// with its true sha256 and size; the segments are stored; every index line
// is the crawl's, sorted, and points at a record of the archived segment it
// names whose target is the line's URL; pages.jsonl holds exactly the
// indexed pages with their titles (and, with text, their paragraphs); and
// every indexed page has a capture.
func checkWACZ(t *testing.T, tool, file, id, start string, exp websim.Expect, text bool) {
	t.Helper()
	out := runTool(t, filepath.Dir(file), tool, "validate", "-f", file)
	if !strings.Contains(out, "Validation succeeded") {
		t.Errorf("wacz validate: %s", out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read %s: %v", f.Name, err)
		}
		files[f.Name] = b
		if strings.HasPrefix(f.Name, "archive/") && f.Method != zip.Store {
			t.Errorf("%s is compressed (method %d)", f.Name, f.Method)
		}
	}
	var pkg struct {
		Resources []struct {
			Path, Hash string
			Bytes      int
		}
		MainPageURL string `json:"mainPageUrl"`
	}
	if err := json.Unmarshal(files["datapackage.json"], &pkg); err != nil {
		t.Fatalf("datapackage.json: %v", err)
	}
	var paths []string
	for _, r := range pkg.Resources {
		paths = append(paths, r.Path)
		sum := sha256.Sum256(files[r.Path])
		if want := "sha256:" + hex.EncodeToString(sum[:]); r.Hash != want || r.Bytes != len(files[r.Path]) {
			t.Errorf("%s listed as %s, %d bytes; is %s, %d bytes", r.Path, r.Hash, r.Bytes, want, len(files[r.Path]))
		}
	}
	for name := range files {
		if name != "datapackage.json" && name != "datapackage-digest.json" && !slices.Contains(paths, name) {
			t.Errorf("%s is not listed in datapackage.json", name)
		}
	}
	if pkg.MainPageURL != start {
		t.Errorf("mainPageUrl %q, want the start URL %s", pkg.MainPageURL, start)
	}

	// The index.
	index := files["indexes/index.cdx"]
	if len(index) == 0 {
		t.Fatalf("no indexes/index.cdx in %v", paths)
	}
	lines := slices.Collect(bytes.Lines(index))
	if !slices.IsSortedFunc(lines, bytes.Compare) {
		t.Errorf("index.cdx is not sorted")
	}
	captured := map[string]bool{}
	for _, l := range lines {
		c, err := warc.ParseCDXJ(l)
		if err != nil {
			t.Fatalf("index line %s: %v", l, err)
		}
		if c.Crawl != id {
			t.Errorf("index line of crawl %q, want %q", c.Crawl, id)
		}
		seg, ok := files["archive/"+c.Filename]
		if !ok || c.Offset+c.Length > int64(len(seg)) {
			t.Errorf("line %s points outside the archive's segments", l)
			continue
		}
		rec, err := warc.NewReader(bytes.NewReader(seg[c.Offset : c.Offset+c.Length])).Next()
		if err != nil {
			t.Errorf("line %s: no record there: %v", l, err)
			continue
		}
		if got := rec.Header.Get(warc.FieldTargetURI); got != c.URL {
			t.Errorf("line for %s points at a record of %s", c.URL, got)
		}
		captured[c.URL] = true
	}

	// The pages.
	pl := slices.Collect(strings.Lines(string(files["pages/pages.jsonl"])))
	if len(pl) == 0 || !strings.Contains(pl[0], `"format": "json-pages-1.0"`) {
		t.Fatalf("pages.jsonl starts %q", pl)
	}
	var got []string
	withText := 0
	for _, l := range pl[1:] {
		var p struct{ URL, TS, Title, Text string }
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("page line %s: %v", l, err)
		}
		if _, err := time.Parse(time.RFC3339, p.TS); err != nil {
			t.Errorf("page %s: ts %q: %v", p.URL, p.TS, err)
		}
		got = append(got, p.URL)
		doc := exp.Docs[p.URL]
		if doc.Title != "" && p.Title != doc.Title {
			t.Errorf("page %s: title %q, want %q", p.URL, p.Title, doc.Title)
		}
		if p.Text != "" {
			withText++
		}
		if text {
			for _, para := range doc.Text {
				if !strings.Contains(p.Text, strings.Join(strings.Fields(para), " ")) {
					t.Errorf("page %s: text %q lacks %q", p.URL, p.Text, para)
				}
			}
		}
		if !captured[p.URL] {
			t.Errorf("page %s has no capture in the index", p.URL)
		}
	}
	if text != (withText > 0) {
		t.Errorf("text %v, but %d pages have text", text, withText)
	}
	want := slices.Clone(exp.Indexed)
	slices.Sort(want)
	slices.Sort(got)
	t.Logf("%s: %d index lines, %d pages, %d with text", filepath.Base(file), len(lines), len(got), withText)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages.jsonl URLs (-want +got):\n%s", diff)
	}
}

// TestWACZEmbedded crawls a websim site on the embedded grid, downloads
// its WACZ from the API (grid export --wacz --out, and with --text to
// standard output), again from the data directory once the grid stopped,
// and checks each with py-wacz's validator and the site's oracle; pywb's
// wb-manager add --unpack-wacz takes its segments and index.
func TestWACZEmbedded(t *testing.T) {
	tool := waczTool(t)
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	const depth = 2
	exp := site.Expect(depth)
	data := t.TempDir()
	cfg := testConfig(t, data, site.Resolve()+","+neighbourResolve)
	_, api, stop := startStoppableGrid(t, cfg)
	crawlNeighbour(t, api) // its records in the segment this crawl's go to: the WACZ leaves them out
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1, Robots: contracts.RobotsObey}}, time.Minute)
	dir := t.TempDir()

	file := filepath.Join(dir, "crawl.wacz")
	cliExport(t, "--api", api, "--wacz", "--out", file, id)
	checkWACZ(t, tool, file, id, site.StartURL(), exp, false)

	// pywb takes it too: wb-manager add --unpack-wacz copies the segments
	// and merges the index, pointing at the copies.
	pywb := t.TempDir()
	wbManager := filepath.Join(pywbVenv(t), "bin", "wb-manager")
	runTool(t, pywb, wbManager, "init", "c")
	runTool(t, pywb, wbManager, "add", "--unpack-wacz", "c", file)
	copies, _ := filepath.Glob(filepath.Join(pywb, "collections", "c", "archive", "*.warc.gz"))
	pywbIndex, err := os.ReadFile(filepath.Join(pywb, "collections", "c", "indexes", "index.cdxj"))
	if err != nil {
		t.Fatalf("wb-manager add --unpack-wacz left no index: %v", err)
	}
	zr, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	var segs, lines int
	for _, f := range zr.File {
		switch {
		case strings.HasPrefix(f.Name, "archive/"):
			segs++
		case f.Name == "indexes/index.cdx":
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			lines = bytes.Count(b, []byte("\n"))
		}
	}
	zr.Close()
	if len(copies) != segs || bytes.Count(pywbIndex, []byte("\n")) != lines || lines == 0 {
		t.Errorf("wb-manager add --unpack-wacz: %d segments, %d index lines; the WACZ has %d, %d", len(copies), bytes.Count(pywbIndex, []byte("\n")), segs, lines)
	}
	for l := range bytes.Lines(pywbIndex) {
		c, err := warc.ParseCDXJ(l)
		if err != nil || !slices.ContainsFunc(copies, func(p string) bool { return filepath.Base(p) == c.Filename }) {
			t.Errorf("pywb's index line %s names no copied segment (%v)", l, err)
		}
	}

	withText := filepath.Join(dir, "text.wacz")
	if err := os.WriteFile(withText, []byte(cliExport(t, "--api", api, "--wacz", "--text", id)), 0o644); err != nil {
		t.Fatal(err)
	}
	checkWACZ(t, tool, withText, id, site.StartURL(), exp, true)

	// The route itself: headers, and 404 for an unknown crawl.
	res, err := http.Get(api + "/api/v1/crawls/" + id + "/wacz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/wacz+zip" ||
		res.Header.Get("Content-Disposition") != `attachment; filename="`+id+`.wacz"` {
		t.Errorf("GET wacz = %d, %q, %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"))
	}
	res, err = http.Get(api + "/api/v1/crawls/no-such-crawl/wacz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET wacz of an unknown crawl = %d, want 404", res.StatusCode)
	}

	// Offline, from the data directory.
	stop()
	offline := filepath.Join(dir, "offline.wacz")
	cliExport(t, "--data", data, "--wacz", "--out", offline, id)
	checkWACZ(t, tool, offline, id, site.StartURL(), exp, false)
}

// TestGridModeWACZ: the same export on the real backends (segments in
// MinIO, records and documents in Elasticsearch), MCP a process of its own.
func TestGridModeWACZ(t *testing.T) {
	tool := waczTool(t)
	env, _ := ownVhost(t, realBackends(t))
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	const depth = 2
	exp := site.Expect(depth)
	c := newCluster(t, env, site.Resolve())
	c.startAll()
	id := c.startCrawl(contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1, Robots: contracts.RobotsObey}})
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var st contracts.CrawlStatus
		c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
		if st.State == contracts.CrawlFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished: %v", st.Counts)
		}
	}
	file := filepath.Join(t.TempDir(), path.Base(id)+".wacz")
	t.Setenv("GRIDCRAWL_API_TOKEN", c.token)
	cliExport(t, "--api", c.api, "--wacz", "--out", file, id)
	checkWACZ(t, tool, file, id, site.StartURL(), exp, false)
}
