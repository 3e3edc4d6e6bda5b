package grid

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics/metricstest"
)

// dedupTarget is a grid the deduplication tests crawl: embedded or grid
// mode.
type dedupTarget struct {
	// crawl runs p to its end and returns the crawl's id.
	crawl func(p contracts.Profile) string
	// api is the MCP's base URL (GRIDCRAWL_API_TOKEN set when it needs one).
	api   string
	store assets.Store
	tx    txindex.Index
}

// dedupWeb starts a generated web for the deduplication tests, of pages
// of 48 KiB of HTML, about 15 KiB gzipped: near the median page of the
// web as the HTTP Archive measures it (some 18 KB transferred, most of it
// compressed). An unchanged page's second capture costs about 1,300 bytes
// whatever the page's size (request and revisit records, gzipped, and a
// CDXJ line; in grid mode a share of each flush's segment object and
// warcinfo record too): 12% of a 24 KiB page's first capture, 6% of this
// one's.
func dedupWeb(t *testing.T, hosts, pages int) *websim.Web {
	t.Helper()
	web := websim.NewWeb(websim.WebConfig{Hosts: hosts, PagesPerHost: pages, LinksPerPage: 4, PageBytes: 48 << 10, Seed: 25})
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	return web
}

// webPages returns the URL of every page of web.
func webPages(web *websim.Web) []string {
	cfg := web.Config()
	var out []string
	for h := range cfg.Hosts {
		for p := range cfg.PagesPerHost {
			out = append(out, web.URL(h, p))
		}
	}
	return out
}

// webBodies fetches every page of web as the site serves it now.
func webBodies(t *testing.T, web *websim.Web) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, u := range webPages(web) {
		res, err := web.Client().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d, %v", u, res.StatusCode, err)
		}
		out[u] = string(b)
	}
	return out
}

func dedupProfile(web *websim.Web, collection, dedupe string) contracts.Profile {
	p := contracts.Profile{StartURLs: web.StartURLs(), MaxDepth: 10, Sitemaps: new(bool), Dedupe: dedupe,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}
	if collection != "" {
		p.Collection = []string{collection}
	}
	return p
}

// warcBytes returns the bytes of the WARC segments and their CDXJ indexes
// in store.
func warcBytes(t *testing.T, store assets.Store) int64 {
	t.Helper()
	keys, err := store.List(t.Context(), "warc/")
	if err != nil {
		t.Fatal(err)
	}
	st := store.(assets.Stater)
	var n int64
	for _, k := range keys {
		info, err := st.Stat(t.Context(), k)
		if err != nil {
			t.Fatalf("stat %s: %v", k, err)
		}
		n += info.Size
	}
	return n
}

// crawlCaptures returns the lines of crawl id's CDXJ (grid export cdxj) by
// URL.
func crawlCaptures(t *testing.T, api, id string) map[string]warc.CDXJ {
	t.Helper()
	out := map[string]warc.CDXJ{}
	for line := range bytes.Lines([]byte(cliExport(t, "--api", api, "cdxj", id))) {
		c, err := warc.ParseCDXJ(line)
		if err != nil {
			t.Fatalf("crawl %s: CDXJ line %q: %v", id, line, err)
		}
		if c.Crawl != id {
			t.Errorf("crawl %s: CDXJ line of crawl %q", id, c.Crawl)
		}
		if _, dup := out[c.URL]; dup && !strings.HasSuffix(c.URL, "/robots.txt") {
			t.Errorf("crawl %s: two CDXJ lines of %s", id, c.URL)
		}
		out[c.URL] = c
	}
	return out
}

// countRevisits returns how many of pages crawl id stored as revisits and
// as responses, and fails for a page with neither.
func countRevisits(t *testing.T, caps map[string]warc.CDXJ, id string, pages []string) (revisits, responses []string) {
	t.Helper()
	for _, u := range pages {
		c, ok := caps[u]
		switch {
		case !ok:
			t.Errorf("crawl %s: no CDXJ line for %s", id, u)
		case c.MIME == warc.MIMERevisit:
			if c.Digest == "" {
				t.Errorf("crawl %s: revisit line of %s without a digest", id, u)
			}
			revisits = append(revisits, u)
		default:
			responses = append(responses, u)
		}
	}
	return revisits, responses
}

// allPagesIndexed checks that every page of pages is indexed in crawl id:
// a page stored as a revisit is parsed (its links followed) and indexed
// like any other.
func allPagesIndexed(t *testing.T, tx txindex.Index, id string, pages []string) {
	t.Helper()
	indexed := map[string]bool{}
	for _, r := range crawlRecords(t, tx, id, contracts.Indexed) {
		indexed[r.URL] = true
	}
	for _, u := range pages {
		if !indexed[u] {
			t.Errorf("crawl %s: %s not indexed", id, u)
		}
	}
}

// checkWARCReadRevisit checks that the WARC read API serves the record of
// page u of crawl id, which it stored as a revisit: a revisit record of u
// that names its original.
func checkWARCReadRevisit(t *testing.T, api, id, u string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, api+"/api/v1/crawls/"+id+"/warc?key="+txindex.Key(id, u), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok := os.Getenv("GRIDCRAWL_API_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rec, err := warc.ReadRecord(res.Body, 1<<20)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET the WARC record of %s = %d, %v", u, res.StatusCode, err)
	}
	if typ, target, refers := rec.Header.Get(warc.FieldType), rec.Header.Get(warc.FieldTargetURI), rec.Header.Get(warc.FieldRefersToTargetURI); typ != warc.TypeRevisit || target != u || refers == "" {
		t.Errorf("WARC record of %s = a %s record of %s referring to %q, want a revisit of it naming its original", u, typ, target, refers)
	}
}

// checkDedupAcrossCrawls crawls web three times into one collection: A,
// then B of the unchanged site, then C after a quarter of its pages
// changed. It checks, against the site's own record of its changes, that B
// stores a revisit for every page and C one for every unchanged page and a
// response for every changed one; that B grows the asset store by less
// than a tenth of A; that every crawl indexes every page. It returns the
// crawls' ids and the site's bodies before and after the change, for the
// replay check.
func checkDedupAcrossCrawls(t *testing.T, g dedupTarget, web *websim.Web) (ids [3]string, before, after map[string]string) {
	t.Helper()
	pages := webPages(web)
	before = webBodies(t, web)
	p := dedupProfile(web, "monthly", "")

	b0 := warcBytes(t, g.store)
	ids[0] = g.crawl(p)
	b1 := warcBytes(t, g.store)
	capsA := crawlCaptures(t, g.api, ids[0])
	if rv, _ := countRevisits(t, capsA, ids[0], pages); len(rv) != 0 {
		t.Errorf("first crawl stored %d revisits (%v), want none: every page differs", len(rv), rv)
	}
	allPagesIndexed(t, g.tx, ids[0], pages)

	time.Sleep(1100 * time.Millisecond) // the crawls' captures in other seconds
	ids[1] = g.crawl(p)
	b2 := warcBytes(t, g.store)
	capsB := crawlCaptures(t, g.api, ids[1])
	if rv, resp := countRevisits(t, capsB, ids[1], pages); len(rv) != len(pages) {
		t.Errorf("crawl of the unchanged site stored %d revisits and %d responses (%v), want %d revisits", len(rv), len(resp), resp, len(pages))
	}
	allPagesIndexed(t, g.tx, ids[1], pages)
	checkWARCReadRevisit(t, g.api, ids[1], pages[len(pages)-1])
	first, second := b1-b0, b2-b1
	t.Logf("asset store growth: first crawl %d bytes (%d per page), unchanged recrawl %d bytes (%d per page, %.1f%%)",
		first, first/int64(len(pages)), second, second/int64(len(pages)), 100*float64(second)/float64(first))
	if second*10 >= first {
		t.Errorf("recrawl of the unchanged site stored %d bytes, want under a tenth of the first crawl's %d", second, first)
	}

	changed := web.ChangeEvery(4)
	record := web.Changed()
	if len(record) != len(changed) || len(changed) == 0 {
		t.Fatalf("the site changed %d pages, its record says %d", len(changed), len(record))
	}
	after = webBodies(t, web)
	time.Sleep(1100 * time.Millisecond)
	ids[2] = g.crawl(p)
	capsC := crawlCaptures(t, g.api, ids[2])
	rv, resp := countRevisits(t, capsC, ids[2], pages)
	for _, u := range rv {
		if record[u] != 0 {
			t.Errorf("crawl after the change stored changed page %s as a revisit", u)
		}
	}
	for _, u := range resp {
		if record[u] == 0 {
			t.Errorf("crawl after the change stored unchanged page %s as a response", u)
		}
	}
	if len(resp) != len(record) || len(rv) != len(pages)-len(record) {
		t.Errorf("crawl after the change: %d responses and %d revisits, want %d and %d (the site's record)", len(resp), len(rv), len(record), len(pages)-len(record))
	}
	allPagesIndexed(t, g.tx, ids[2], pages)
	return ids, before, after
}

// checkReplayAcrossCrawls exports the segments and CDXJ of every crawl of
// ids into one pywb collection and checks that pywb replays each crawl as
// the site served it then: a changed page's old text at the first crawl's
// time and its new text at the last's, an unchanged page's text at the
// time of its revisits.
func checkReplayAcrossCrawls(t *testing.T, api string, web *websim.Web, ids [3]string, before, after map[string]string) {
	t.Helper()
	venv := pywbVenv(t)
	bin := func(tool string) string { return filepath.Join(venv, "bin", tool) }
	root := t.TempDir()
	runTool(t, root, bin("wb-manager"), "init", "crawl")
	archive := filepath.Join(root, "collections", "crawl", "archive")
	var lines [][]byte
	caps := make([]map[string]warc.CDXJ, len(ids))
	for i, id := range ids {
		out := filepath.Join(t.TempDir(), "export")
		cliExport(t, "--api", api, "--out", out, "segments", id)
		segs, _ := filepath.Glob(filepath.Join(out, "*.warc*"))
		for _, seg := range segs {
			if strings.HasSuffix(seg, assets.CDXJSuffix) {
				continue
			}
			runTool(t, out, bin("warcio"), "check", seg)
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			// A segment shared by crawls: the later export holds more.
			dst := filepath.Join(archive, filepath.Base(seg))
			if fi, err := os.Stat(dst); err == nil && fi.Size() >= int64(len(b)) {
				continue
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		idx, err := os.ReadFile(filepath.Join(out, "index.cdxj"))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, slices.Collect(bytes.Lines(idx))...)
		caps[i] = crawlCaptures(t, api, id)
	}
	index := bytes.Join(warc.SortCDXJ(lines), nil)
	if err := os.WriteFile(filepath.Join(root, "collections", "crawl", "indexes", "index.cdxj"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	wayback := startWayback(t, root, bin("wayback"))
	record := web.Changed()
	for _, u := range webPages(web) {
		want := []string{before[u], before[u], after[u]}
		for i := range ids {
			c := caps[i][u]
			body, memento := replay(t, wayback, c.Time, u)
			if body != want[i] {
				t.Errorf("pywb replay of %s at crawl %d's time (%s, changed: %v) is not what the site served then (%d bytes, want %d)",
					u, i+1, c.MIME, record[u] != 0, len(body), len(want[i]))
			}
			if !memento.Equal(c.Time) {
				t.Errorf("pywb replay of %s at crawl %d's time: Memento-Datetime %v, want %v", u, i+1, memento, c.Time)
			}
		}
	}
}

// TestDedupAcrossCrawls: three crawls of one collection on the embedded
// grid (the second of the unchanged site, the third after some pages
// changed) store revisits for unchanged payloads, responses for changed
// ones, under a tenth of the bytes for the unchanged site, and replay in
// pywb from all three crawls' files.
func TestDedupAcrossCrawls(t *testing.T) {
	web := dedupWeb(t, 2, 16)
	cfg := testConfig(t, t.TempDir(), web.Resolve())
	g, api := startGrid(t, cfg)
	target := dedupTarget{api: api, store: g.Backends.Assets, tx: g.Backends.Tx,
		crawl: func(p contracts.Profile) string { return crawlToEnd(t, api, p, 2*time.Minute) }}
	ids, before, after := checkDedupAcrossCrawls(t, target, web)
	if t.Failed() {
		return
	}
	checkReplayAcrossCrawls(t, api, web, ids, before, after)
	checkWACZHoldsOriginals(t, api, ids[1], before)
	checkCollectionWACZ(t, api, "monthly", web, ids, before, after)
}

// TestGridModeDedupAcrossCrawls is TestDedupAcrossCrawls on the real
// backends (RabbitMQ, Elasticsearch, MinIO) with MCP, two loaders and two
// crawlers as processes: the digest index is in Elasticsearch, every flush
// is a segment object of its own, and the crawlers read every page back
// from MinIO, a revisit's payload from its original's record.
func TestGridModeDedupAcrossCrawls(t *testing.T) {
	env, _ := ownVhost(t, realBackends(t))
	web := dedupWeb(t, 4, 16)
	c := newCluster(t, env, web.Resolve())
	// The default flush interval (the cluster's 50 ms makes a segment
	// object, with its warcinfo record and index, of every few pages).
	c.env = append(c.env, "GRIDCRAWL_WARC_FLUSH_INTERVAL=250ms")
	c.startAll()
	set := c.openBackends(t)
	t.Setenv("GRIDCRAWL_API_TOKEN", c.token) // for grid export
	target := dedupTarget{api: c.api, store: set.Assets, tx: set.Tx, crawl: func(p contracts.Profile) string {
		id := c.startCrawl(p)
		var st contracts.CrawlStatus
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
			if st.State == contracts.CrawlFinished {
				return id
			}
			if st.State != contracts.CrawlRunning && st.State != "" || time.Now().After(deadline) {
				t.Fatalf("crawl %s: %s, %v", id, st.State, st.Counts)
			}
		}
	}}
	ids, before, after := checkDedupAcrossCrawls(t, target, web)
	if t.Failed() {
		return
	}
	checkReplayAcrossCrawls(t, c.api, web, ids, before, after)
}

// dedupSite is a small site with one payload at two URLs (/a.html and
// /copy/a.html) and a few others.
var dedupSite = map[string]string{
	"/":            `<html><head><title>Dedupe home</title></head><body><a href="/a.html">a</a> <a href="/copy/a.html">copy</a> <a href="/b.html">b</a> <a href="/c.html">c</a> <a href="/d.html">d</a></body></html>`,
	"/a.html":      `<html><head><title>A</title></head><body><p>the same payload at two urls</p></body></html>`,
	"/copy/a.html": `<html><head><title>A</title></head><body><p>the same payload at two urls</p></body></html>`,
	"/b.html":      `<html><head><title>B</title></head><body><p>bravo</p></body></html>`,
	"/c.html":      `<html><head><title>C</title></head><body><p>charlie</p></body></html>`,
	"/d.html":      `<html><head><title>D</title></head><body><p>delta</p></body></html>`,
}

// startDedupSite serves dedupSite and returns its start URL and pages.
func startDedupSite(t *testing.T) (string, []string) {
	t.Helper()
	start := serveSite(t, "dedup.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := dedupSite[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, body)
	}))
	base := strings.TrimSuffix(start, "/")
	var pages []string
	for p := range dedupSite {
		pages = append(pages, base+p)
	}
	return start, pages
}

func siteProfile(start, collection, dedupe string) contracts.Profile {
	p := contracts.Profile{StartURLs: []string{start}, MaxDepth: 2, Sitemaps: new(bool), Dedupe: dedupe,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}
	if collection != "" {
		p.Collection = []string{collection}
	}
	return p
}

// TestDedupModes: dedupe crawl stores the payload at two URLs of one crawl
// once (one response, one revisit) and does not deduplicate across crawls;
// dedupe off stores every response, also of a payload its collection
// holds; a profile without a collection deduplicates within its crawl.
func TestDedupModes(t *testing.T) {
	start, pages := startDedupSite(t)
	cfg := testConfig(t, t.TempDir(), "dedup.test=127.0.0.1")
	g, api := startGrid(t, cfg)
	crawl := func(p contracts.Profile) (revisits, responses []string) {
		t.Helper()
		id := crawlToEnd(t, api, p, time.Minute)
		allPagesIndexed(t, g.Backends.Tx, id, pages)
		return countRevisits(t, crawlCaptures(t, api, id), id, pages)
	}
	copyOfA := strings.TrimSuffix(start, "/") + "/copy/a.html"
	isA := func(u string) bool { return strings.HasSuffix(u, "/a.html") }
	for _, tc := range []struct {
		name                   string
		collection, dedupe     string
		wantRevisits           int
		revisitsAreOnlyTheCopy bool
	}{
		{"crawl: one payload at two urls is stored once", "modes", contracts.DedupeCrawl, 1, true},
		{"crawl: not across crawls", "modes", contracts.DedupeCrawl, 1, true},
		{"collection: fills the collection", "modes", contracts.DedupeCollection, 1, true},
		{"collection: across crawls", "modes", "", len(pages), false},
		{"off: nothing, though the collection holds every payload", "modes", contracts.DedupeOff, 0, false},
		{"no collection: within the crawl", "", "", 1, true},
	} {
		rv, resp := crawl(siteProfile(start, tc.collection, tc.dedupe))
		if len(rv) != tc.wantRevisits || len(rv)+len(resp) != len(pages) {
			t.Errorf("%s: %d revisits (%v) and %d responses, want %d revisits of %d pages", tc.name, len(rv), rv, len(resp), tc.wantRevisits, len(pages))
		}
		if tc.revisitsAreOnlyTheCopy && len(rv) == 1 && !isA(rv[0]) {
			t.Errorf("%s: the revisit is of %s, want one of /a.html and %s", tc.name, rv[0], copyOfA)
		}
		time.Sleep(1100 * time.Millisecond) // each crawl's captures in seconds of their own
	}
}

// TestDedupOriginalGone: when the segments holding a collection's
// originals are deleted (the grid stopped, as an operator would delete old
// segments), the next crawl stores responses, not revisits that would
// point at nothing, and its responses become the originals of the crawl
// after it.
func TestDedupOriginalGone(t *testing.T) {
	start, pages := startDedupSite(t)
	data := t.TempDir()
	// A segment found readable is trusted for this long: 0, it is checked
	// at every flush.
	t.Setenv("GRIDCRAWL_DEDUP_CHECK_TTL", "0")
	cfg := testConfig(t, data, "dedup.test=127.0.0.1")
	p := siteProfile(start, "gone", contracts.DedupeCollection)
	counts := func(g *Grid, api string) (revisits, responses []string) {
		t.Helper()
		id := crawlToEnd(t, api, p, time.Minute)
		allPagesIndexed(t, g.Backends.Tx, id, pages)
		return countRevisits(t, crawlCaptures(t, api, id), id, pages)
	}
	g, api, stop := startStoppableGrid(t, cfg)
	if rv, _ := counts(g, api); len(rv) != 1 {
		t.Fatalf("first crawl: %d revisits, want 1 (the payload at two urls)", len(rv))
	}
	stop()
	if err := os.RemoveAll(filepath.Join(data, "assets", "warc")); err != nil {
		t.Fatal(err)
	}
	g, api, _ = startStoppableGrid(t, cfg)
	time.Sleep(1100 * time.Millisecond)
	if rv, _ := counts(g, api); len(rv) != 1 {
		t.Errorf("crawl after the originals were deleted: %d revisits (%v), want 1 (only the payload at two urls, within the crawl)", len(rv), rv)
	}
	time.Sleep(1100 * time.Millisecond)
	if rv, resp := counts(g, api); len(rv) != len(pages) {
		t.Errorf("crawl after that: %d revisits and %d responses (%v), want %d revisits of the last crawl's responses", len(rv), len(resp), resp, len(pages))
	}
}

// startStoppableGrid is startGrid with a stop function, which stops the
// grid and waits for it (also called when the test ends).
func startStoppableGrid(t *testing.T, cfg Config) (*Grid, string, func()) {
	t.Helper()
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
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("grid run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return g, "http://" + ln.Addr().String(), stop
}

// TestDedupBound: a digest index bounded at 3 entries takes the first 3
// payloads and refuses the others (counted); the next crawl finds those 3
// only; the index's size is a gauge.
func TestDedupBound(t *testing.T) {
	start, pages := startDedupSite(t)
	t.Setenv("GRIDCRAWL_DEDUP_MAX_ENTRIES", "3")
	cfg := testConfig(t, t.TempDir(), "dedup.test=127.0.0.1")
	g, api := startGrid(t, cfg)
	p := siteProfile(start, "bound", contracts.DedupeCollection)
	var ids []string
	for i := range 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond)
		}
		ids = append(ids, crawlToEnd(t, api, p, time.Minute))
		allPagesIndexed(t, g.Backends.Tx, ids[i], pages)
	}
	n, err := g.Backends.Digests.Count(t.Context())
	if err != nil || n != 3 {
		t.Fatalf("digest index holds %d entries (%v), want the bound, 3", n, err)
	}
	rv1, _ := countRevisits(t, crawlCaptures(t, api, ids[0]), ids[0], pages)
	rv, _ := countRevisits(t, crawlCaptures(t, api, ids[1]), ids[1], pages)
	// The second crawl: a revisit for each of the 3 payloads indexed (and
	// for the copy of /a.html, if /a.html's is one of them, or within the
	// crawl when /a.html's did not fit: its copy's revisit comes from the
	// flush, not the index).
	if len(rv) < 3 || len(rv) > 4 {
		t.Errorf("second crawl: %d revisits (%v), want the 3 payloads the bounded index holds (4 with the copy of /a.html)", len(rv), rv)
	}
	s := metricstest.Get(t, api+"/metrics", "")
	if v, ok := s.Sum("gridcrawl_loader_dedup_entries", nil); !ok || v != 3 {
		t.Errorf("gridcrawl_loader_dedup_entries = %v (%v), want 3", v, ok)
	}
	// The loader's frontier report (written every 200 ms) shows the
	// index's size and bound, and the revisits it wrote.
	want := contracts.FrontierDedup{Entries: 3, MaxEntries: 3, Revisits: int64(len(rv1) + len(rv))}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var rep contracts.FrontierReport
		apiDo(t, http.MethodGet, api+"/api/v1/frontier", nil, &rep)
		if len(rep.Loaders) == 1 && rep.Loaders[0].Dedup != nil && *rep.Loaders[0].Dedup == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("frontier report's loaders = %+v, want one whose dedup is %+v", rep.Loaders, want)
		}
	}
	// First crawl: 6 pages, 5 payloads, 3 added; second: the responses
	// of the payloads not indexed are refused again.
	if v, ok := s.Sum("gridcrawl_loader_dedup_refused_total", nil); !ok || v < 2 {
		t.Errorf("gridcrawl_loader_dedup_refused_total = %v (%v), want at least 2", v, ok)
	}
}

// TestCrawlFlagsDedupe: grid crawl's --collection and --dedupe set the
// profile's fields, and a bad value is an error naming the flag.
func TestCrawlFlagsDedupe(t *testing.T) {
	profile := func(args ...string) (contracts.Profile, error) {
		fs, o := newCrawlFlags(&bytes.Buffer{})
		rest, err := parseFlags(fs, append(args, "http://a.test/"))
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", args, err)
		}
		return o.profile(fs, rest)
	}
	p, err := profile("--collection", "monthly", "--dedupe", "crawl")
	if err != nil || !slices.Equal(p.Collection, []string{"monthly"}) || p.Dedupe != contracts.DedupeCrawl {
		t.Errorf("profile of --collection monthly --dedupe crawl = collection %q, dedupe %q, %v", p.Collection, p.Dedupe, err)
	}
	if p, err := profile(); err != nil || p.Collection != nil || p.Dedupe != "" {
		t.Errorf("profile without the flags = collection %q, dedupe %q, %v; want the defaults (unset)", p.Collection, p.Dedupe, err)
	}
	for flag, v := range map[string]string{"--dedupe": "url", "--collection": "no spaces"} {
		if _, err := profile(flag, v); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("profile of %s %q: error %v, want one naming %s", flag, v, err, flag)
		}
	}
}

// checkWACZHoldsOriginals exports the WACZ of crawl id, whose pages are all
// revisits of payloads an earlier crawl of the collection stored, and
// checks that it stands alone: py-wacz validates it, every revisit line of
// its index has a response line of the same payload in a segment the WACZ
// holds, and pywb, given the WACZ alone, replays every page as the site
// served it (want, by URL) at the crawl's time.
func checkWACZHoldsOriginals(t *testing.T, api, id string, want map[string]string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "recrawl.wacz")
	cliExport(t, "--api", api, "--wacz", "--out", file, id)
	runTool(t, filepath.Dir(file), waczTool(t), "validate", "-f", file)
	zr, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	entries := map[string]bool{}
	var index []byte
	for _, f := range zr.File {
		entries[f.Name] = true
		if f.Name == "indexes/index.cdx" {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			index, err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	stored := map[string]bool{} // payload digests of response lines in held segments
	var revisits []warc.CDXJ
	for line := range bytes.Lines(index) {
		c, err := warc.ParseCDXJ(line)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.MIME == warc.MIMERevisit && c.Crawl == id:
			revisits = append(revisits, c)
		case c.MIME != warc.MIMERevisit && entries["archive/"+c.Filename]:
			stored[c.Digest] = true
		}
	}
	if len(revisits) == 0 {
		t.Fatalf("the WACZ of crawl %s has no revisit lines", id)
	}
	for _, c := range revisits {
		if !stored[c.Digest] {
			t.Errorf("revisit of %s (%s): no response of its payload in the WACZ", c.URL, c.Digest)
		}
	}
	root := t.TempDir()
	wbManager := filepath.Join(pywbVenv(t), "bin", "wb-manager")
	runTool(t, root, wbManager, "init", "crawl")
	runTool(t, root, wbManager, "add", "--unpack-wacz", "crawl", file)
	wayback := startWayback(t, root, filepath.Join(pywbVenv(t), "bin", "wayback"))
	for _, c := range revisits {
		if body, _ := replay(t, wayback, c.Time, c.URL); body != want[c.URL] {
			t.Errorf("pywb replay of %s from the recrawl's WACZ alone: %d bytes, want the site's %d", c.URL, len(body), len(want[c.URL]))
		}
	}
}

// checkCollectionWACZ exports every crawl of the collection as one WACZ
// file and checks that py-wacz validates it, that it lists every crawl's
// pages, and that pywb, given only that file, replays each crawl of ids as
// the site served it then (as checkReplayAcrossCrawls does from the
// segments).
func checkCollectionWACZ(t *testing.T, api, collection string, web *websim.Web, ids [3]string, before, after map[string]string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), collection+".wacz")
	cliExport(t, "--api", api, "--wacz", "--collection", "--out", file, collection)
	runTool(t, filepath.Dir(file), waczTool(t), "validate", "-f", file)
	if res, err := http.Get(api + "/api/v1/collections/no-such-collection/wacz"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("WACZ of a collection no crawl names: %v, %v; want 404", res, err)
	} else {
		res.Body.Close()
	}
	zr, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	pages := webPages(web)
	for _, f := range zr.File {
		if f.Name != "pages/pages.jsonl" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")) - 1; n != len(ids)*len(pages) {
			t.Errorf("the collection's pages.jsonl lists %d pages, want %d (%d crawls of %d)", n, len(ids)*len(pages), len(ids), len(pages))
		}
	}
	zr.Close()
	root := t.TempDir()
	venv := pywbVenv(t)
	runTool(t, root, filepath.Join(venv, "bin", "wb-manager"), "init", "crawl")
	runTool(t, root, filepath.Join(venv, "bin", "wb-manager"), "add", "--unpack-wacz", "crawl", file)
	wayback := startWayback(t, root, filepath.Join(venv, "bin", "wayback"))
	for i, id := range ids {
		caps := crawlCaptures(t, api, id)
		for _, u := range pages {
			want := after[u]
			if i < 2 {
				want = before[u]
			}
			if body, _ := replay(t, wayback, caps[u].Time, u); body != want {
				t.Errorf("pywb replay of %s at crawl %d's time from the collection's WACZ: %d bytes, want the site's %d then", u, i+1, len(body), len(want))
			}
		}
	}
}
