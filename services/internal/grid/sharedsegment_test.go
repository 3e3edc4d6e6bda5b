package grid

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// loggedSite serves h on host and logs the URL of every request it serves.
type loggedSite struct {
	mu   sync.Mutex
	urls map[string]bool
	base string // http://host:port
}

func newLoggedSite(t *testing.T, host string, h http.Handler) *loggedSite {
	t.Helper()
	s := &loggedSite{urls: map[string]bool{}}
	start := serveSite(t, host, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.urls[s.base+r.URL.RequestURI()] = true
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	s.base = strings.TrimSuffix(start, "/")
	return s
}

// fetched returns the URLs the site served, sorted.
func (s *loggedSite) fetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.urls))
}

// neighbourHandler is a small site of its own (neighbour.test), whose
// crawl shares the loader's open segment with a test's own crawl.
func neighbourHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<html><head><title>Neighbour</title></head><body><p>the other crawl</p><a href="/n1.html">n1</a> <a href="/n2.html">n2</a></body></html>`)
		case "/n1.html", "/n2.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<html><head><title>Neighbour %s</title></head><body><p>not this crawl's</p></body></html>`, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	})
}

// neighbourResolve sends neighbour.test to loopback (GRIDCRAWL_RESOLVE).
const neighbourResolve = "neighbour.test=127.0.0.1"

// crawlNeighbour crawls the neighbour site on the grid at api to its end:
// run just before a test's own crawl, its records are in the segment the
// loader has open, which the test's crawl appends to (the embedded store
// keeps a segment open for GRIDCRAWL_WARC_SEGMENT_AGE). The test's exports
// must leave them out.
func crawlNeighbour(t *testing.T, api string) string {
	t.Helper()
	start := serveSite(t, "neighbour.test", neighbourHandler())
	return crawlToEnd(t, api, contracts.Profile{StartURLs: []string{start}, MaxDepth: 1,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
}

// warcRecords reads every record of a WARC file's bytes.
func warcRecords(t *testing.T, name string, b []byte) []warc.Record {
	t.Helper()
	var out []warc.Record
	r := warc.NewReader(bytes.NewReader(b))
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, rec)
	}
}

// recordURLs returns the target URIs of the records of types in recs,
// sorted and distinct, and the target URIs of all of them (warcinfo
// records aside).
func recordURLs(recs []warc.Record, types ...string) (of, all []string) {
	ofSet, allSet := map[string]bool{}, map[string]bool{}
	for _, r := range recs {
		typ := r.Header.Get(warc.FieldType)
		if typ == warc.TypeWarcinfo {
			continue
		}
		u := r.Header.Get(warc.FieldTargetURI)
		allSet[u] = true
		if slices.Contains(types, typ) {
			ofSet[u] = true
		}
	}
	return slices.Sorted(maps.Keys(ofSet)), slices.Sorted(maps.Keys(allSet))
}

// TestExportsHoldOnlyTheirCrawlsRecords runs two crawls of two sites in
// turn on the embedded grid, within one open segment's age, so that the
// loader writes both into one segment, and checks every export of each
// crawl against the URLs its site served (the sites' request logs, the
// oracle): the WACZ's segments (the crawl's and its collection's), the
// downloaded segments, the CDXJ and the
// WET and WAT files hold records of those URLs only, and a response and a
// request record of each; py-wacz validates both WACZ files, pywb's indexer
// finds exactly the crawl's CDXJ lines in its downloaded segments, pywb
// replays the second crawl's pages from its WACZ as the site served them,
// and a byte range of a shared segment's download is that range of the
// whole download.
func TestExportsHoldOnlyTheirCrawlsRecords(t *testing.T) {
	venv := pywbVenv(t)
	bin := func(tool string) string { return filepath.Join(venv, "bin", tool) }
	tool := waczTool(t)
	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	archive := newLoggedSite(t, "archive.test", archiveHandler())
	data := t.TempDir()
	_, api := startGrid(t, testConfig(t, data, site.Resolve()+",archive.test=127.0.0.1"))

	const depth = 2
	idA := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{site.StartURL()}, MaxDepth: depth, Scope: contracts.ScopeDomain, Collection: []string{"coll-A"},
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 5, DelayFactor: 1, Robots: contracts.RobotsObey}}, time.Minute)
	fetchedA := distinct(urlsOf(site.Requests()))
	idB := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{archive.base + "/"}, MaxDepth: 3, Collection: []string{"coll-B"},
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
	if got := distinct(urlsOf(site.Requests())); !slices.Equal(got, fetchedA) {
		t.Fatalf("the test site served other URLs after crawl A ended: %v", got)
	}
	crawls := []struct {
		id, name string
		fetched  []string
	}{{idA, "A", fetchedA}, {idB, "B", archive.fetched()}}

	// The precondition: the two crawls share a segment.
	lists := map[string]contracts.SegmentList{}
	for _, c := range crawls {
		var list contracts.SegmentList
		if err := json.Unmarshal([]byte(cliExport(t, "--api", api, "--json", "segments", c.id)), &list); err != nil {
			t.Fatal(err)
		}
		lists[c.id] = list
	}
	var shared []contracts.Segment
	for _, s := range lists[idB].Segments {
		if slices.ContainsFunc(lists[idA].Segments, func(o contracts.Segment) bool { return o.Key == s.Key }) {
			shared = append(shared, s)
		}
	}
	if len(shared) == 0 {
		t.Fatalf("the crawls share no segment (A %v, B %v): the test proves nothing", lists[idA].Segments, lists[idB].Segments)
	}
	stored, err := os.ReadFile(filepath.Join(data, "assets", filepath.FromSlash(shared[0].Key)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("crawl A fetched %d URLs, crawl B %d; they share %s (%d bytes stored)", len(fetchedA), len(crawls[1].fetched), shared[0].Name, len(stored))

	for _, c := range crawls {
		check := func(what string, recs []warc.Record) {
			t.Helper()
			responses, all := recordURLs(recs, warc.TypeResponse, warc.TypeRevisit)
			requests, _ := recordURLs(recs, warc.TypeRequest)
			if diff := cmp.Diff(c.fetched, all); diff != "" {
				t.Errorf("crawl %s: %s: the records' URLs differ from those its site served (-served +records):\n%s", c.name, what, diff)
			}
			if !slices.Equal(responses, c.fetched) || !slices.Equal(requests, c.fetched) {
				t.Errorf("crawl %s: %s: %d URLs with a response, %d with a request; the site served %d", c.name, what, len(responses), len(requests), len(c.fetched))
			}
		}

		// The crawl's WACZ, and its collection's (the crawl alone in it).
		for _, args := range [][]string{{"--wacz", c.id}, {"--wacz", "--collection", "coll-" + c.name}} {
			what := strings.Join(args, " ")
			file := filepath.Join(t.TempDir(), c.name+".wacz")
			cliExport(t, append([]string{"--api", api, "--out", file}, args...)...)
			if out := runTool(t, filepath.Dir(file), tool, "validate", "-f", file); !strings.Contains(out, "Validation succeeded") {
				t.Errorf("crawl %s: %s: wacz validate: %s", c.name, what, out)
			}
			zr, err := zip.OpenReader(file)
			if err != nil {
				t.Fatal(err)
			}
			var recs []warc.Record
			segs := map[string][]byte{}
			var index []byte
			for _, f := range zr.File {
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case strings.HasPrefix(f.Name, "archive/"):
					segs[strings.TrimPrefix(f.Name, "archive/")] = b
					recs = append(recs, warcRecords(t, f.Name, b)...)
				case f.Name == "indexes/index.cdx":
					index = b
				}
			}
			zr.Close()
			check(what+": WACZ segments", recs)
			checkIndex(t, "crawl "+c.name+" "+what+": WACZ index", index, c.id, c.fetched, segs)
		}

		// The CDXJ and the downloaded segments: pywb's indexer finds
		// exactly the crawl's lines in them.
		dir := t.TempDir()
		cliExport(t, "--api", api, "--out", dir, "segments", c.id)
		cdxj, err := os.ReadFile(filepath.Join(dir, "index.cdxj"))
		if err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
		var recs []warc.Record
		segs := map[string][]byte{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			segs[filepath.Base(f)] = b
			recs = append(recs, warcRecords(t, f, b)...)
			runTool(t, dir, bin("warcio"), "check", "-v", f)
		}
		check("downloaded segments", recs)
		checkIndex(t, "crawl "+c.name+" CDXJ", cdxj, c.id, c.fetched, segs)
		pywbIndex := runTool(t, dir, bin("cdx-indexer"), append([]string{"-j", "-s"}, relNames(files)...)...)
		if diff := cmp.Diff(strings.Split(pywbIndex, "\n"), strings.Split(crawlField.ReplaceAllString(string(cdxj), ""), "\n")); diff != "" {
			t.Errorf("crawl %s: the CDXJ differs from pywb cdx-indexer -j's of the downloaded segments (-pywb +ours):\n%s", c.name, diff)
		}

		// WET and WAT.
		cliExport(t, "--api", api, "--wet", "--wat", "--out", dir, c.id)
		for _, kind := range []string{"wet", "wat"} {
			derived, _ := filepath.Glob(filepath.Join(dir, "*.warc."+kind+".gz"))
			if len(derived) != len(files) {
				t.Errorf("crawl %s: %d %s files for %d segments", c.name, len(derived), kind, len(files))
			}
			recs = nil
			for _, f := range derived {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, warcRecords(t, f, b)...)
			}
			_, all := recordURLs(recs)
			// A WAT's envelope of a segment's warcinfo record names the
			// segment.
			all = slices.DeleteFunc(all, func(u string) bool { return strings.HasSuffix(u, ".warc.gz") })
			if kind == "wat" {
				if diff := cmp.Diff(c.fetched, all); diff != "" {
					t.Errorf("crawl %s: the WAT records' URLs differ from those its site served (-served +wat):\n%s", c.name, diff)
				}
			} else if extra, _ := diffSets(all, c.fetched); len(all) == 0 || len(extra) > 0 {
				t.Errorf("crawl %s: WET of %d URLs, of which %v its site did not serve", c.name, len(all), extra)
			}
		}
	}

	// A byte range of the shared segment's download, for each crawl, is
	// that range of its whole download.
	for _, c := range crawls {
		i := slices.IndexFunc(lists[c.id].Segments, func(s contracts.Segment) bool { return s.Key == shared[0].Key })
		seg := lists[c.id].Segments[i]
		if seg.Name == path.Base(seg.Key) {
			t.Errorf("crawl %s: its part of the shared segment is named as the segment, %s", c.name, seg.Name)
		}
		u := api + seg.URL
		whole := httpGet(t, u, "", http.StatusOK)
		if seg.Size == nil || *seg.Size != int64(len(whole)) {
			t.Errorf("crawl %s: the shared segment is listed with size %v, downloads %d bytes", c.name, seg.Size, len(whole))
		}
		if len(whole) >= len(stored) {
			t.Errorf("crawl %s: the shared segment downloads whole (%d bytes of %d)", c.name, len(whole), len(stored))
		}
		n := len(whole)
		for _, tc := range []struct {
			rng  string
			want []byte
		}{
			{"bytes=0-99", whole[:100]},
			{fmt.Sprintf("bytes=%d-%d", n/3, 2*n/3), whole[n/3 : 2*n/3+1]},
			{"bytes=-7", whole[n-7:]},
		} {
			if got := httpGet(t, u, tc.rng, http.StatusPartialContent); !bytes.Equal(got, tc.want) {
				t.Errorf("crawl %s: GET %s Range %s = %d bytes, not that range of the download", c.name, seg.Name, tc.rng, len(got))
			}
		}
	}

	// pywb replays crawl B's pages from its WACZ as the site served them.
	file := filepath.Join(t.TempDir(), "B.wacz")
	cliExport(t, "--api", api, "--wacz", "--out", file, idB)
	root := t.TempDir()
	runTool(t, root, bin("wb-manager"), "init", "crawl")
	runTool(t, root, bin("wb-manager"), "add", "--unpack-wacz", "crawl", file)
	wayback := startWayback(t, root, bin("wayback"))
	for path, page := range archiveSite {
		body, _ := replay(t, wayback, time.Now(), archive.base+path)
		if body != page.body {
			t.Errorf("pywb replay of %s from crawl B's WACZ = %q, want %q", path, body, page.body)
		}
	}
}

// checkIndex checks CDXJ lines: each names the crawl and points at a
// record of its URL in the segment it names (segs, by name), and their
// URLs are those the crawl fetched.
func checkIndex(t *testing.T, what string, index []byte, id string, fetched []string, segs map[string][]byte) {
	t.Helper()
	urls := map[string]bool{}
	for l := range bytes.Lines(index) {
		c, err := warc.ParseCDXJ(l)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		urls[c.URL] = true
		seg, ok := segs[c.Filename]
		if c.Crawl != id || !ok || c.Offset+c.Length > int64(len(seg)) {
			t.Errorf("%s: line %s is not crawl %s's or points outside its segments", what, l, id)
			continue
		}
		rec, err := warc.ReadRecord(bytes.NewReader(seg[c.Offset:c.Offset+c.Length]), 64<<20)
		if err != nil || rec.Header.Get(warc.FieldTargetURI) != c.URL {
			t.Errorf("%s: line %s points at %q (%v)", what, l, rec.Header.Get(warc.FieldTargetURI), err)
		}
	}
	if diff := cmp.Diff(fetched, slices.Sorted(maps.Keys(urls))); diff != "" {
		t.Errorf("%s: the lines' URLs differ from those the site served (-served +index):\n%s", what, diff)
	}
}

// diffSets returns the elements of a not in b and of b not in a.
func diffSets(a, b []string) (onlyA, onlyB []string) {
	for _, x := range a {
		if !slices.Contains(b, x) {
			onlyA = append(onlyA, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			onlyB = append(onlyB, x)
		}
	}
	return onlyA, onlyB
}

// distinct returns the distinct strings of s, sorted.
func distinct(s []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(s)))
}

func urlsOf(reqs []websim.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.URL
	}
	return out
}

// httpGet GETs u (with a Range header when rng is not "") and returns the
// body, failing the test on another status than code.
func httpGet(t *testing.T, u, rng string, code int) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != code {
		t.Fatalf("GET %s Range %q = %d, want %d: %.200s", u, rng, res.StatusCode, code, body)
	}
	return body
}
