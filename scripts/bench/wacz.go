package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// waczConfig is the -wacz bench: a crawl of pages pages of a generated web
// (pkg/websim, pages of about bytes bytes), written straight into the
// embedded backends of a grid data directory as the loader and indexer
// leave them (WARC segments of perSegment responses with their CDXJ
// indexes in arrival order in the file store, a transaction record with
// its asset reference and a search document per page), then exported by
// a `grid up` on that directory through MCP's route over loopback HTTP:
// GET /api/v1/crawls/{id}/wacz, or /cdxj with cdxj.
//
// With share K > 0, K other crawls of as many pages (the same URLs of
// other versions of the web) are written into the same segments, exchange
// by exchange in turn with the bench crawl's, as a loader writes the
// exchanges of the crawls it fetches for: every segment starts with a
// warcinfo record, each response follows its request record, and its
// index, sorted, names each line's crawl. A segment then holds perSegment
// responses of each crawl; the export, of the bench crawl only, reads
// each segment once more to copy its part (pkg/segview).
type waczConfig struct {
	pages, perSegment, bytes, share int
	dir, out, gridBin               string
	text, cdxj                      bool
}

// waczCrawlID is the bench crawl's id.
const waczCrawlID = "benchwacz"

// waczShareID is the id of the k-th crawl (from 1) sharing the bench
// crawl's segments.
func waczShareID(k int) string { return fmt.Sprintf("%sshare%d", waczCrawlID, k) }

// waczShareNote says, in the marker and the output, with how many other
// crawls the bench crawl shares its segments ("" for none).
func waczShareNote(k int) string {
	switch k {
	case 0:
		return ""
	case 1:
		return "segments shared with 1 other crawl"
	}
	return fmt.Sprintf("segments shared with %d other crawls", k)
}

// waczMarker, in the bench directory, says that its grid data directory
// holds a built crawl (and of how many pages), which a later run with the
// same -wacz-dir exports again without building it.
const waczMarker = "bench-crawl.txt"

// waczSample is the grid process's memory at a point of the export.
type waczSample struct {
	at              time.Duration
	bytes           int64
	rss, anon, heap int64
}

// waczBench builds the crawl (or reuses the one in -wacz-dir), starts the
// grid on it, exports it and prints the export's speed and the grid
// process's memory: its RSS (/proc) and Go heap in use (its /metrics,
// go_memstats_heap_inuse_bytes) sampled every 100 ms, printed at 25, 50,
// 75 and 100% of the bytes received, with their peaks and the process's
// peak RSS (VmHWM, start-up included).
func waczBench(c waczConfig) error {
	ctx := context.Background()
	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "gridcrawl-wacz-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	data := filepath.Join(dir, "grid")
	if b, err := os.ReadFile(filepath.Join(dir, waczMarker)); err == nil {
		if note := waczShareNote(c.share); (note == "" && strings.Contains(string(b), "shared with")) || !strings.Contains(string(b), note) {
			return fmt.Errorf("-wacz-dir %s holds a crawl built with another -wacz-share (%s); use another -wacz-dir", dir, strings.TrimSpace(string(b)))
		}
		fmt.Printf("crawl: reusing %s: %s", data, b)
	} else {
		began := time.Now()
		summary, err := waczBuild(ctx, data, c)
		if err != nil {
			return err
		}
		summary += fmt.Sprintf(", built in %s\n", time.Since(began).Round(time.Millisecond))
		fmt.Print("crawl: " + summary)
		if err := os.WriteFile(filepath.Join(dir, waczMarker), []byte(summary), 0o644); err != nil {
			return err
		}
	}

	cmd := exec.Command(c.gridBin, "up", "--data", data, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT=", "TMPDIR="+dir) // the embedded grid; index runs beside the data
	logf, err := os.Create(filepath.Join(dir, "grid.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	_ = os.Remove(filepath.Join(data, addrFileName))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s up: %w", c.gridBin, err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	base, err := waitGridAPI(data, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("%w (log: %s)", err, logf.Name())
	}
	pid := cmd.Process.Pid
	token := os.Getenv("GRIDCRAWL_API_TOKEN")
	sample := func(at time.Duration, n int64) waczSample {
		return waczSample{at: at, bytes: n, rss: procStatusBytes(pid, "VmRSS"), anon: procStatusBytes(pid, "RssAnon"),
			heap: metricValue(base, token, "go_memstats_heap_inuse_bytes")}
	}
	idle := sample(0, 0)

	route := "/api/v1/crawls/" + waczCrawlID + "/wacz"
	if c.cdxj {
		route = "/api/v1/crawls/" + waczCrawlID + "/cdxj"
	} else if c.text {
		route += "?text=1"
	}
	var out io.Writer = io.Discard
	if c.out != "" {
		f, err := os.Create(c.out)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	cw := &atomicCountWriter{w: out}
	var samples []waczSample
	var mu sync.Mutex
	stop, sampled := make(chan struct{}), make(chan struct{})
	began := time.Now()
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			s := sample(time.Since(began), cw.n.Load())
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+route, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	var firstByte time.Duration
	if err == nil {
		firstByte = time.Since(began)
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			err = fmt.Errorf("GET %s: %s: %s", route, res.Status, b)
		} else {
			_, err = io.Copy(cw, res.Body)
		}
		res.Body.Close()
	}
	took := time.Since(began)
	close(stop)
	<-sampled
	if err != nil {
		return err
	}
	total := cw.n.Load()
	samples = append(samples, sample(took, total))
	what := "wacz"
	if c.cdxj {
		what = "cdxj"
	}
	scope := ""
	if c.share > 0 {
		scope = fmt.Sprintf(" (crawl %s only, its %s: 1 response in %d its own, filtered)", waczCrawlID, waczShareNote(c.share), c.share+1)
	}
	fmt.Printf("%s: %.1f MB in %s (status after %s): %.1f MB/s, through GET %s over loopback%s\n",
		what, float64(total)/1e6, took.Round(time.Millisecond), firstByte.Round(time.Millisecond), float64(total)/1e6/took.Seconds(), route, scope)
	fmt.Printf("grid process idle before: RSS %.1f MB (anonymous %.1f MB), Go heap in use %.1f MB\n", float64(idle.rss)/1e6, float64(idle.anon)/1e6, float64(idle.heap)/1e6)
	fmt.Printf("%8s %10s %10s %10s %10s %12s\n", "of bytes", "MB", "at", "RSS MB", "anon MB", "heap MB")
	for _, q := range []int64{25, 50, 75, 100} {
		for _, s := range samples {
			if s.bytes*100 >= total*q {
				fmt.Printf("%7d%% %10.1f %10s %10.1f %10.1f %12.1f\n", q, float64(s.bytes)/1e6, s.at.Round(time.Millisecond), float64(s.rss)/1e6,
					float64(s.anon)/1e6, float64(s.heap)/1e6)
				break
			}
		}
	}
	var peak waczSample
	for _, s := range samples {
		peak.rss, peak.anon, peak.heap = max(peak.rss, s.rss), max(peak.anon, s.anon), max(peak.heap, s.heap)
		if os.Getenv("GRIDCRAWL_BENCH_SAMPLES") != "" {
			fmt.Printf("sample %s %d bytes rss %d anon %d heap %d\n", s.at.Round(time.Millisecond), s.bytes, s.rss, s.anon, s.heap)
		}
	}
	fmt.Printf("peak while exporting (%d samples): RSS %.1f MB (anonymous %.1f MB), Go heap in use %.1f MB; process peak RSS (VmHWM) %.1f MB\n",
		len(samples), float64(peak.rss)/1e6, float64(peak.anon)/1e6, float64(peak.heap)/1e6, float64(procStatusBytes(pid, "VmHWM"))/1e6)
	return nil
}

// addrFileName is where `grid up` writes its API address in its data
// directory.
const addrFileName = "grid.addr"

// waitGridAPI waits until the grid on data answers /readyz and returns
// its API's base URL.
func waitGridAPI(data string, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		b, err := os.ReadFile(filepath.Join(data, addrFileName))
		if err != nil {
			continue
		}
		base := strings.TrimSpace(string(b))
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		res, err := http.Get(base + "/readyz")
		if err != nil {
			continue
		}
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			return base, nil
		}
	}
	return "", fmt.Errorf("the grid on %s did not become ready in %s", data, limit)
}

// procStatusBytes reads a "kB" field of /proc/PID/status in bytes (0 when
// it cannot).
func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(l, []byte(field+":")); ok {
			f := strings.Fields(string(rest))
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// metricValue reads one unlabelled metric of a service's /metrics (0 when
// it cannot).
func metricValue(base, token, name string) int64 {
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return int64(v)
		}
	}
	return 0
}

// waczBuild writes the crawl into the embedded backends of the data
// directory data, as the grid opens them, and returns a line saying what
// it wrote.
func waczBuild(ctx context.Context, data string, c waczConfig) (string, error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", err
	}
	tx, err := sqlitestore.OpenTxIndex(filepath.Join(data, "transactions.db"))
	if err != nil {
		return "", err
	}
	defer tx.Close()
	ps, err := sqlitestore.OpenProfiles(filepath.Join(data, "profiles.db"))
	if err != nil {
		return "", err
	}
	defer ps.Close()
	si, err := sqlitestore.OpenSearch(filepath.Join(data, "search.db"))
	if err != nil {
		return "", err
	}
	defer si.Close()
	st, err := fsassets.Open(filepath.Join(data, "assets"))
	if err != nil {
		return "", err
	}
	defer st.Close()

	hosts := min(c.pages, 100)
	web := websim.NewWeb(websim.WebConfig{Hosts: hosts, PagesPerHost: (c.pages + hosts - 1) / hosts, PageBytes: c.bytes,
		LinksPerPage: 20, CrossHostLinks: 4, Seed: 1})
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	done := at.Add(time.Duration(c.pages) * time.Millisecond)
	// The crawls: the bench crawl, then those sharing its segments, each
	// of its own version of the web (the same URLs).
	ids, webs := []string{waczCrawlID}, []*websim.Web{web}
	for k := 1; k <= c.share; k++ {
		ids = append(ids, waczShareID(k))
		webs = append(webs, websim.NewWeb(websim.WebConfig{Hosts: hosts, PagesPerHost: (c.pages + hosts - 1) / hosts, PageBytes: c.bytes,
			LinksPerPage: 20, CrossHostLinks: 4, Seed: int64(1 + k)}))
	}
	for _, id := range ids {
		p := contracts.Profile{Name: "wacz bench " + id, StartURLs: []string{web.URL(0, 0)}}.WithDefaults()
		if err := ps.Put(ctx, profiles.Crawl{ID: id, Profile: p, State: contracts.CrawlFinished, CreatedAt: at, FinishedAt: &done}); err != nil {
			return "", fmt.Errorf("store the crawl %s: %w", id, err)
		}
	}

	seg := warc.NewSegment(true)
	var index []byte
	var recs []txindex.Record
	var docs []contracts.Document
	segments, lines, own := 0, 0, 0 // own: the bench crawl's responses in seg
	var stored, bodies int64
	segName := func() string { return fmt.Sprintf("gridcrawl-20261128000000000-%05d-bench.warc.gz", segments) }
	flush := func() error {
		if seg.Count() > 0 {
			key := "warc/2026/11/28/" + segName()
			if c.share > 0 { // the loader stores a segment's index sorted
				index = sortedCDXJ(index)
			}
			if err := st.Put(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len(), "application/warc"); err != nil {
				return err
			}
			if err := st.Put(ctx, assets.CDXJKey(key), bytes.NewReader(index), int64(len(index)), "application/x-cdxj"); err != nil {
				return err
			}
			stored += seg.Len()
			segments++
			seg.Reset()
			index = index[:0]
			own = 0
		}
		if len(recs) > 0 {
			if _, err := tx.Create(ctx, recs); err != nil {
				return fmt.Errorf("store records: %w", err)
			}
			recs = recs[:0]
		}
		if len(docs) > 0 {
			if err := si.Upsert(ctx, docs); err != nil {
				return fmt.Errorf("store documents: %w", err)
			}
			docs = docs[:0]
		}
		return nil
	}
	for i := range c.pages {
		h, pg := i%hosts, i/hosts
		date := at.Add(time.Duration(i) * time.Millisecond)
		for k, id := range ids {
			u := webs[k].URL(h, pg)
			rw := httptest.NewRecorder()
			webs[k].ServeHTTP(rw, httptest.NewRequest(http.MethodGet, u, nil))
			body := rw.Body.Bytes()
			var resp bytes.Buffer
			fmt.Fprintf(&resp, "HTTP/1.1 %d %s\r\n", rw.Code, http.StatusText(rw.Code))
			_ = rw.Result().Header.Write(&resp)
			resp.WriteString("\r\n")
			resp.Write(body)
			key := "warc/2026/11/28/" + segName()
			var rec warc.Record
			if c.share == 0 {
				rec = warc.NewResponseRecord(u, date, "127.0.0.1", resp.Bytes(), false, "")
			} else { // as a loader writes its exchanges (services/internal/loader/segment.go)
				if seg.Count() == 0 {
					_, _, _ = seg.Append(warc.NewWarcinfoRecord(date, map[string]string{
						"software": "gridcrawl", "format": "WARC File Format 1.1", "operator-loader": "bench", "filename": path.Base(key)}))
				}
				req := warc.NewRequestRecord(u, date, fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gridcrawl-bench\r\nAccept-Encoding: gzip\r\n\r\n",
					strings.TrimPrefix(u, "http://"+webs[k].Host(h)), webs[k].Host(h)))
				if _, _, err := seg.Append(req); err != nil {
					return "", err
				}
				rec = warc.NewResponseRecord(u, date, "127.0.0.1", resp.Bytes(), false, warc.RecordID(req))
			}
			off, n, err := seg.Append(rec)
			if err != nil {
				return "", err
			}
			if cx, ok := seg.CDXJOf(rec, 0, off, n, path.Base(key)); ok {
				cx.Crawl = id
				index = cx.AppendLine(index)
				lines++
			}
			if k == 0 {
				own++
			}
			tid := txindex.Key(id, u)
			recs = append(recs, txindex.Record{Key: tid, CrawlID: id, URL: u, Host: web.Host(h), Status: contracts.Indexed,
				StatusTime: date, HTTPStatus: rw.Code, MIMEType: "text/html", Asset: contracts.AssetRef{Key: key, Offset: off, Length: n}})
			title, text := htmlText(body)
			docs = append(docs, contracts.Document{ID: tid, CrawlID: id, URL: u, LastModified: date, LoadDate: date,
				ContentType: []string{"text/html"}, Title: []string{title}, Host: web.Host(h), Size: len(body), Text: text})
			bodies += int64(len(body))
		}
		if own >= c.perSegment || len(docs) >= 500 {
			if own < c.perSegment { // records and documents only
				if err := flushIndexes(ctx, tx, si, &recs, &docs); err != nil {
					return "", err
				}
				continue
			}
			if err := flush(); err != nil {
				return "", err
			}
		}
	}
	if err := flush(); err != nil {
		return "", err
	}
	written := c.pages * len(ids)
	if c.share == 0 {
		return fmt.Sprintf("%d pages (%.1f KB a body), %d segments, %d index lines, %.1f MB of WARC in %s",
			c.pages, float64(bodies)/float64(written)/1e3, segments, lines, float64(stored)/1e6, data), nil
	}
	return fmt.Sprintf("%d pages of crawl %s (%.1f KB a body), its %s (%s, as many pages, exchanges in turn, as a loader writes them), %d segments, %d index lines, %.1f MB of WARC in %s",
		c.pages, waczCrawlID, float64(bodies)/float64(written)/1e3, waczShareNote(c.share), strings.Join(ids[1:], ", "),
		segments, lines, float64(stored)/1e6, data), nil
}

// sortedCDXJ returns the lines of index sorted (warc.SortCDXJ), as a
// loader stores a segment's index.
func sortedCDXJ(index []byte) []byte {
	var lines [][]byte
	for l := range bytes.Lines(index) {
		lines = append(lines, l)
	}
	out := make([]byte, 0, len(index))
	for _, l := range warc.SortCDXJ(lines) {
		out = append(out, l...)
	}
	return out
}

// flushIndexes stores the records and documents gathered so far.
func flushIndexes(ctx context.Context, tx *sqlitestore.TxIndex, si *sqlitestore.Search, recs *[]txindex.Record, docs *[]contracts.Document) error {
	if _, err := tx.Create(ctx, *recs); err != nil {
		return fmt.Errorf("store records: %w", err)
	}
	if err := si.Upsert(ctx, *docs); err != nil {
		return fmt.Errorf("store documents: %w", err)
	}
	*recs, *docs = (*recs)[:0], (*docs)[:0]
	return nil
}

// htmlText returns a page's title and its text: the words outside tags
// (a search document's text, roughly, without the crawler's extraction).
func htmlText(b []byte) (string, string) {
	var title string
	if _, rest, ok := bytes.Cut(b, []byte("<title>")); ok {
		if t, _, ok := bytes.Cut(rest, []byte("</title>")); ok {
			title = string(t)
		}
	}
	var out strings.Builder
	in, space := false, true
	for _, c := range b {
		switch {
		case c == '<':
			in = true
		case c == '>':
			in = false
		case in:
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			if !space {
				out.WriteByte(' ')
				space = true
			}
		default:
			out.WriteByte(c)
			space = false
		}
	}
	return title, strings.TrimSpace(out.String())
}

// atomicCountWriter counts what it writes, readable while writing.
type atomicCountWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *atomicCountWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
