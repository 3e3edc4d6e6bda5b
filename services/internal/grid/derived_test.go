package grid

import (
	"bufio"

	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
)

// derivedSite is a site of pages the WET and WAT files must treat apart:
// HTML (one gzip-encoded), plain text, an image, a page that asks not to be
// indexed and a missing page.
var derivedSite = map[string]struct {
	ctype, body string
	gzip        bool
}{
	"/": {"text/html; charset=utf-8", `<html><head><title>Derived home</title><meta name="description" content="the start"></head><body>
<h1>Welcome</h1><p>Start &amp; go <a href="/a.html">to A</a>, <a href="/notes.txt">notes</a>, <a href="/z.html">zipped</a>,
<a href="/logo.png">logo</a>, <a href="/private.html">private</a> or <a href="/missing.html">nowhere</a>.</p><script>var hidden = 1;</script></body></html>`, false},
	"/a.html":       {"text/html", `<html><head><title>Page A</title></head><body><p>alpha   text</p><p>second paragraph</p><a href="/">home</a></body></html>`, false},
	"/z.html":       {"text/html; charset=utf-8", `<html><head><title>Zipped</title></head><body><p>compressed on the wire</p></body></html>`, true},
	"/notes.txt":    {"text/plain; charset=utf-8", "plain notes,\nin two lines\n", false},
	"/logo.png":     {"image/png", "\x89PNG\r\n\x1a\nnot really a png", false},
	"/private.html": {"text/html", `<html><head><title>Private</title><meta name="robots" content="noindex"></head><body><p>not for the index</p></body></html>`, false},
}

func derivedHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := derivedSite[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", page.ctype)
		if page.gzip {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, page.body)
			zw.Close()
			return
		}
		io.WriteString(w, page.body)
	})
}

//go:embed testdata/read_derived.py
var readDerivedPy string

// readRecord is one record as warcio and FastWARC read it.
type readRecord struct {
	Type     string `json:"type"`
	URI      string `json:"uri"`
	ID       string `json:"id"`
	Length   int64  `json:"length"`
	RefersTo string `json:"refers_to"`
	Block    string `json:"block"`
	DigestOK bool   `json:"digest_ok"`
	// warcio only: where the record (its gzip member) lies.
	Offset       int64 `json:"offset"`
	MemberLength int64 `json:"member_length"`
}

// readWithPython reads file with warcio and FastWARC, checks that they
// read the same records, with digests each verifies (when digests: the
// derived files; a segment's response records carry a payload digest that
// warcio, reading the block unparsed, checks against the whole block), and
// returns warcio's.
func readWithPython(t *testing.T, python, script, file string, digests bool) []readRecord {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), python, script, file).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("read %s with warcio and FastWARC: %v\n%s", filepath.Base(file), err, stderr)
	}
	var got struct{ Warcio, Fastwarc []readRecord }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Warcio) != len(got.Fastwarc) {
		t.Fatalf("%s: warcio reads %d records, FastWARC %d", filepath.Base(file), len(got.Warcio), len(got.Fastwarc))
	}
	for i, w := range got.Warcio {
		f := got.Fastwarc[i]
		if w.Type != f.Type || w.URI != f.URI || w.ID != f.ID || w.Length != f.Length || w.RefersTo != f.RefersTo || w.Block != f.Block {
			t.Errorf("%s record %d: warcio reads %+v, FastWARC %+v", filepath.Base(file), i, w, f)
		}
		if digests && (!w.DigestOK || !f.DigestOK) {
			t.Errorf("%s record %d (%s %s): block digest verified by warcio %v, FastWARC %v", filepath.Base(file), i, w.Type, w.URI, w.DigestOK, f.DigestOK)
		}
		if w.Length != int64(len(w.Block)) && utf8Valid(w.Block) {
			t.Errorf("%s record %d: Content-Length %d for a %d-byte block", filepath.Base(file), i, w.Length, len(w.Block))
		}
	}
	return got.Warcio
}

func utf8Valid(s string) bool { return !strings.ContainsRune(s, '\uFFFD') }

// TestWETAndWAT crawls a site on the embedded grid, downloads each
// segment's WET and WAT files with grid export --wet --wat, and reads them
// with warcio and FastWARC: both read the same records with verified
// digests; the WET file has a conversion record for exactly the pages the
// search index holds text for, each block the indexed document's title and
// text, referring to the page's response in the segment; the WAT file has
// one envelope per record of the segment, in order, whose Container
// locates the record where warcio finds it, and whose HTML metadata lists
// what the site's pages hold.
func TestWETAndWAT(t *testing.T) {
	venv, python, script := derivedTools(t)
	start := serveSite(t, "derived.test", derivedHandler())
	cfg := testConfig(t, t.TempDir(), "derived.test=127.0.0.1,"+neighbourResolve)
	_, api := startGrid(t, cfg)
	crawlNeighbour(t, api) // its records in the segment this crawl's go to: the files leave them out
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{start}, MaxDepth: 2,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
	base := strings.TrimSuffix(start, "/")

	// What the search index holds.
	docs := map[string]contracts.Document{}
	sc := bufio.NewScanner(strings.NewReader(cliExport(t, "--api", api, "docs", id)))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var d contracts.Document
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		docs[d.URL] = d
	}
	for _, p := range []string{"/", "/a.html", "/z.html", "/notes.txt", "/logo.png"} {
		if _, ok := docs[base+p]; !ok {
			t.Fatalf("no indexed document for %s: %v", p, slices.Collect(maps.Keys(docs)))
		}
	}

	// Derived files of a segment that is not there, or not the crawl's.
	for _, name := range []string{"gridcrawl-20000101000000000-00001-l-p.warc.wet.gz", "gridcrawl-20000101000000000-00001-l-p.warc.wat.gz"} {
		resp, err := http.Get(api + "/api/v1/crawls/" + id + "/segments/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", name, resp.StatusCode)
		}
	}

	dir := t.TempDir()
	cliExport(t, "--api", api, "--out", dir, "segments", id)
	printed := cliExport(t, "--api", api, "--wet", "--wat", "--out", dir, id)
	listed := cliExport(t, "--api", api, "--wet", id)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(segs) == 0 {
		t.Fatal("no segment exported")
	}
	wetSeen := map[string]bool{}
	for _, seg := range segs {
		name := strings.TrimSuffix(filepath.Base(seg), ".gz")
		wetFile, watFile := filepath.Join(dir, name+".wet.gz"), filepath.Join(dir, name+".wat.gz")
		for _, f := range []string{wetFile, watFile} {
			if !strings.Contains(printed, f) {
				t.Errorf("grid export --wet --wat --out printed %q, not %s", printed, f)
			}
			runTool(t, dir, filepath.Join(venv, "bin", "warcio"), "check", "-v", f)
		}
		if !strings.Contains(listed, name+".wet.gz") || strings.Contains(listed, name+".wat.gz") {
			t.Errorf("grid export --wet listed %q", listed)
		}
		warcRecs := readWithPython(t, python, script, seg, false)
		byID := map[string]readRecord{}
		for _, r := range warcRecs {
			byID[r.ID] = r
		}

		// WET: the indexed text of each text-bearing page, nothing else.
		wet := readWithPython(t, python, script, wetFile, true)
		if len(wet) == 0 || wet[0].Type != "warcinfo" {
			t.Fatalf("%s does not start with a warcinfo record: %+v", wetFile, wet)
		}
		for _, r := range wet[1:] {
			resp, ok := byID[r.RefersTo]
			if r.Type != "conversion" || !ok || resp.Type != "response" || resp.URI != r.URI {
				t.Errorf("WET record %+v does not refer to a response of %s in the segment (%+v)", r, r.URI, resp)
				continue
			}
			d, ok := docs[r.URI]
			if !ok {
				t.Errorf("WET record of %s, which the index does not hold", r.URI)
				continue
			}
			if want := d.FirstTitle() + "\n" + d.Text; r.Block != want {
				t.Errorf("WET text of %s = %q, want the indexed title and text %q", r.URI, r.Block, want)
			}
			if wetSeen[r.URI] {
				t.Errorf("two WET records of %s", r.URI)
			}
			wetSeen[r.URI] = true
		}

		// WAT: one envelope per record of the segment, in order.
		wat := readWithPython(t, python, script, watFile, true)
		if len(wat) != len(warcRecs)+1 || wat[0].Type != "warcinfo" {
			t.Fatalf("%s has %d records, want a warcinfo and one per record of the segment (%d)", watFile, len(wat), len(warcRecs))
		}
		for i, r := range wat[1:] {
			src := warcRecs[i]
			if r.Type != "metadata" || r.RefersTo != src.ID || src.URI != "" && r.URI != src.URI {
				t.Errorf("WAT record %d %+v, want the metadata of %s %s", i+1, r, src.Type, src.ID)
				continue
			}
			var env map[string]any
			if err := json.Unmarshal([]byte(r.Block), &env); err != nil {
				t.Fatalf("WAT record %d: %v", i+1, err)
			}
			for path, want := range map[string]string{
				"Container.Filename":                            filepath.Base(seg),
				"Container.Offset":                              strconv.FormatInt(src.Offset, 10),
				"Container.Gzip-Metadata.Deflate-Length":        strconv.FormatInt(src.MemberLength, 10),
				"Envelope.WARC-Header-Metadata.WARC-Type":       src.Type,
				"Envelope.WARC-Header-Metadata.WARC-Record-ID":  src.ID,
				"Envelope.Actual-Content-Length":                strconv.FormatInt(src.Length, 10),
				"Envelope.WARC-Header-Metadata.WARC-Target-URI": src.URI,
			} {
				if got, _ := jsonAt(env, strings.Split(path, ".")...).(string); got != want && !(want == "" && got == "") {
					t.Errorf("WAT record %d (%s %s) %s = %q, want %q", i+1, src.Type, src.URI, path, got, want)
				}
			}
			if src.Type != "response" {
				continue
			}
			resp := jsonAt(env, "Envelope", "Payload-Metadata", "HTTP-Response-Metadata")
			status, _ := jsonAt(resp, "Response-Message", "Status").(string)
			if !strings.HasPrefix(src.Block, "HTTP/1.1 "+status+" ") {
				t.Errorf("WAT of %s: status %q, the response starts %.20q", src.URI, status, src.Block)
			}
			switch strings.TrimPrefix(src.URI, base) {
			case "/":
				title, _ := jsonAt(resp, "HTML-Metadata", "Head", "Title").(string)
				links, _ := jsonAt(resp, "HTML-Metadata", "Links").([]any)
				var hrefs []string
				for _, l := range links {
					if jsonAt(l, "path") == "A@/href" {
						hrefs = append(hrefs, jsonAt(l, "url").(string))
					}
				}
				want := []string{"/a.html", "/notes.txt", "/z.html", "/logo.png", "/private.html", "/missing.html"}
				if title != "Derived home" || !slices.Equal(hrefs, want) {
					t.Errorf("WAT HTML metadata of the start page: title %q, links %q; want %q and %q", title, hrefs, "Derived home", want)
				}
			case "/z.html":
				if title := jsonAt(resp, "HTML-Metadata", "Head", "Title"); title != "Zipped" {
					t.Errorf("WAT of the gzip-encoded page: title %v, want Zipped", title)
				}
			case "/logo.png", "/notes.txt", "/missing.html":
				if m := jsonAt(resp, "HTML-Metadata"); m != nil {
					t.Errorf("WAT of %s has HTML metadata %v", src.URI, m)
				}
			}
		}
	}
	// Exactly the pages the index holds text for: the HTML and text
	// pages, not the image, the noindex page or the missing one.
	want := []string{base + "/", base + "/a.html", base + "/notes.txt", base + "/z.html"}
	if got := slices.Sorted(maps.Keys(wetSeen)); !slices.Equal(got, want) {
		t.Errorf("WET pages %q, want %q", got, want)
	}
}

// jsonAt walks parsed JSON by object keys.
func jsonAt(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// derivedTools returns the venv's python and the reading script, or skips.
func derivedTools(t *testing.T) (venv, python, script string) {
	t.Helper()
	venv = pywbVenv(t)
	python = filepath.Join(venv, "bin", "python")
	if err := exec.Command(python, "-c", "import fastwarc.warc").Run(); err != nil {
		testenv.Unavailable(t, "no FastWARC in %s: install it with scripts/services/pywb.sh install", venv)
	}
	script = filepath.Join(t.TempDir(), "read_derived.py")
	if err := os.WriteFile(script, []byte(readDerivedPy), 0o644); err != nil {
		t.Fatal(err)
	}
	return venv, python, script
}

// TestWETOfRenderedPages crawls a site whose pages get their text from
// scripts, rendering them: the WET text of each rendered page is its
// indexed text, which holds what only the scripts wrote (the page's
// token), and the WAT has the envelope of each record of the segment,
// the DOM's conversion record included, and gives the page's response the
// DOM's links.
func TestWETOfRenderedPages(t *testing.T) {
	t.Setenv("GRIDCRAWL_CHROMIUM", chromiumPath(t))
	_, python, script := derivedTools(t)
	cfg := testConfig(t, t.TempDir(), "")
	g, api := startGrid(t, cfg)
	site, base, id := renderCrawl(t, g, api, contracts.RenderAuto, 2)
	rendered := indexedPaths(t, g, id, base)

	docs := map[string]contracts.Document{}
	sc := bufio.NewScanner(strings.NewReader(cliExport(t, "--api", api, "docs", id)))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var d contracts.Document
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		docs[d.URL] = d
	}
	dir := t.TempDir()
	cliExport(t, "--api", api, "--out", dir, "segments", id)
	cliExport(t, "--api", api, "--wet", "--wat", "--out", dir, id)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	texts := map[string]string{}
	conversions := 0
	for _, seg := range segs {
		name := strings.TrimSuffix(filepath.Base(seg), ".gz")
		warcRecs := readWithPython(t, python, script, seg, false)
		for _, r := range readWithPython(t, python, script, filepath.Join(dir, name+".wet.gz"), true)[1:] {
			texts[r.URI] = r.Block
		}
		wat := readWithPython(t, python, script, filepath.Join(dir, name+".wat.gz"), true)
		if len(wat) != len(warcRecs)+1 {
			t.Fatalf("%s: %d WAT records for %d records", name, len(wat), len(warcRecs))
		}
		// One envelope per record (a rendered page's response envelope
		// waits for its DOM, so records written between them may come
		// first); a rendered page's response envelope has its DOM's links.
		envs := map[string]map[string]any{}
		for _, r := range wat[1:] {
			var env map[string]any
			if err := json.Unmarshal([]byte(r.Block), &env); err != nil {
				t.Fatal(err)
			}
			if envs[r.RefersTo] != nil {
				t.Errorf("two WAT records of %s", r.RefersTo)
			}
			envs[r.RefersTo] = env
		}
		byID := map[string]readRecord{}
		for _, rec := range warcRecs {
			byID[rec.ID] = rec
			if envs[rec.ID] == nil {
				t.Errorf("no WAT record of %s %s", rec.Type, rec.ID)
			}
		}
		for _, rec := range warcRecs {
			if rec.Type != "conversion" {
				continue
			}
			conversions++
			resp := byID[rec.RefersTo]
			domLinks := jsonAt(envs[rec.ID], "Envelope", "Payload-Metadata", "HTML-Metadata", "Links")
			respLinks := jsonAt(envs[resp.ID], "Envelope", "Payload-Metadata", "HTTP-Response-Metadata", "HTML-Metadata", "Links")
			if links, _ := domLinks.([]any); len(links) == 0 && strings.Contains(rec.Block, "href") {
				t.Errorf("WAT of the DOM of %s lists no link", rec.URI)
			}
			if fmt.Sprint(domLinks) != fmt.Sprint(respLinks) {
				t.Errorf("WAT of the rendered page %s: response links %v, want its DOM's %v", rec.URI, respLinks, domLinks)
			}
		}
	}
	scripted := 0
	for _, p := range site.ScriptPages() {
		r, ok := rendered[p]
		if !ok || r.Render == "" {
			continue
		}
		scripted++
		d := docs[base+p]
		got, ok := texts[base+p]
		if !ok || got != d.FirstTitle()+"\n"+d.Text || !strings.Contains(got, site.Token(p)) {
			t.Errorf("WET text of the rendered page %s = %q (%v), want the indexed %q with its token %s", p, got, ok, d.FirstTitle()+"\n"+d.Text, site.Token(p))
		}
	}
	if scripted == 0 || conversions < scripted {
		t.Errorf("%d rendered pages, %d conversion records: the crawl rendered nothing", scripted, conversions)
	}
	for u, d := range docs {
		if got, ok := texts[u]; !ok || got != d.FirstTitle()+"\n"+d.Text {
			t.Errorf("WET text of %s = %q (%v), want the indexed %q", u, got, ok, d.FirstTitle()+"\n"+d.Text)
		}
	}
}
