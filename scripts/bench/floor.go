package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/extract"
	"github.com/gridcrawl/gridcrawl/pkg/robots"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/yacydoc"
)

// The floor is the least CPU a page can cost with gridcrawl's design and
// components: it fetches the web as a crawler (robots.txt obeyed, links
// followed to the depth, no politeness wait) and then does, one stage after
// another over all pages and with no queue, pipeline or process between
// them, the work the design requires of every page: a WARC request and a
// compressed response record, a transaction record created and moved
// through its three stages (one batched write per stage), and the search
// document written to the full-text index. It runs as a process of its own
// (the bench binary with -floor-run), so that the peers table measures it as
// it measures every crawler, and prints each stage's CPU.

// floorFlags are the child's flags, registered in main's flag set.
type floorFlags struct {
	run     *bool
	urls    *string
	connect *string
	backend *string
}

func registerFloorFlags() floorFlags {
	return floorFlags{
		run:     flag.Bool("floor-run", false, "internal: run the floor crawler (see -peer-list floor)"),
		urls:    flag.String("floor-urls", "", "internal: the floor crawler's start URLs file"),
		connect: flag.String("floor-connect", "", "internal: the address every host of the floor crawl is served on"),
		backend: flag.String("floor-backend", "sqlite", "with -peer-list floor: the stores of the floor, sqlite (the embedded grid's) or es (Elasticsearch, grid mode's; GRIDCRAWL_ES_URL)"),
	}
}

type floorPage struct {
	u       *url.URL
	key     string
	depth   int
	status  int
	header  http.Header
	body    []byte
	fetched time.Time
	res     extract.Result
}

// floorStage is one stage's cost.
type floorStage struct {
	name string
	cpu  time.Duration
	es   float64 // Elasticsearch's CPU seconds (es backend)
}

func procCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// floorRun is the floor crawler's process. It prints one line per stage to
// stderr and, last, "floor-pages N" and "floor-extra-cpu-ms X" (the CPU of
// re-extracting, which the crawl stage already did and the row must not
// count twice) to stdout.
func floorRun(f floorFlags, depth int) error {
	starts, err := readLines(*f.urls)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gridcrawl-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := openFloorStores(ctx, *f.backend, dir)
	if err != nil {
		return err
	}
	defer st.close()
	var stages []floorStage
	stage := func(name string, run func() error) error {
		c0, e0 := procCPU(), st.esCPU()
		if err := run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		stages = append(stages, floorStage{name: name, cpu: procCPU() - c0, es: st.esCPU() - e0})
		return nil
	}
	var pages []*floorPage
	err = stage("fetch and extract links", func() (err error) {
		pages, err = floorCrawl(floorClient(*f.connect), starts, depth)
		return err
	})
	if err == nil {
		err = stage("extract (again, to show its part; not counted in the row)", func() error { return floorExtract(pages) })
	}
	extra := time.Duration(0)
	if err == nil {
		extra = stages[len(stages)-1].cpu
		err = stage("warc", func() error { return floorWARC(dir, pages) })
	}
	if err == nil {
		err = stage("transaction index: create + 3 stage writes", func() error { return floorTx(ctx, st.tx, pages) })
	}
	if err == nil {
		err = stage("search index", func() error { return floorSearch(ctx, st.idx, pages) })
	}
	if err != nil {
		return err
	}
	n := max(len(pages), 1)
	for _, s := range stages {
		line := fmt.Sprintf("floor: %-60s %6.3f cpu-ms/page", s.name, 1000*s.cpu.Seconds()/float64(n))
		if *f.backend == "es" {
			line += fmt.Sprintf("  elasticsearch %6.3f cpu-ms/page", 1000*s.es/float64(n))
		}
		fmt.Fprintln(os.Stderr, line)
	}
	fmt.Printf("floor-pages %d\nfloor-extra-cpu-ms %.3f\n", len(pages), 1000*extra.Seconds())
	return nil
}

// floorStores are the stores the floor writes, and Elasticsearch's CPU
// seconds so far (0 on SQLite).
type floorStores struct {
	tx    txindex.Pipeline
	idx   search.Index
	esCPU func() float64
	close func()
}

func openFloorStores(ctx context.Context, backend, dir string) (floorStores, error) {
	switch backend {
	case "sqlite":
		t, err := sqlitestore.OpenTxIndex(filepath.Join(dir, "tx.db"))
		if err != nil {
			return floorStores{}, err
		}
		s, err := sqlitestore.OpenSearch(filepath.Join(dir, "search.db"))
		if err != nil {
			t.Close()
			return floorStores{}, err
		}
		return floorStores{tx: t, idx: s, esCPU: func() float64 { return 0 }, close: func() { s.Close(); t.Close() }}, nil
	case "es":
		prefix := "gridfloor-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		c, err := esindex.Open(ctx, esindex.Options{URL: os.Getenv("GRIDCRAWL_ES_URL"), Prefix: prefix})
		if err != nil {
			return floorStores{}, err
		}
		return floorStores{tx: c.TxIndex(), idx: c.Search(), esCPU: func() float64 { return backendCPU()["elastic"] },
			close: func() { _ = c.DeleteIndices(context.Background()); c.Close() }}, nil
	}
	return floorStores{}, fmt.Errorf("unknown -floor-backend %q (sqlite, es)", backend)
}

// floorClient connects to every host at addr.
func floorClient(addr string) *http.Client {
	dial := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dial.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4, DisableCompression: true,
	}}
}

const floorAgent = "gridcrawl-floor"

// floorCrawl fetches the web from starts, breadth first, robots.txt obeyed,
// following links to depth; a page's extraction is kept for its document.
func floorCrawl(client *http.Client, starts []string, depth int) ([]*floorPage, error) {
	var pages []*floorPage
	rules := map[string]*robots.Rules{}
	seen := map[string]bool{}
	type item struct {
		u     string
		depth int
	}
	var queue []item
	for _, s := range starts {
		if n, err := urlnorm.Normalize(s); err == nil && !seen[n] {
			seen[n] = true
			queue = append(queue, item{n, 0})
		}
	}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		u, err := url.Parse(it.u)
		if err != nil {
			continue
		}
		origin := u.Scheme + "://" + u.Host
		r, ok := rules[origin]
		if !ok {
			body, _, _, _ := floorGet(client, origin+"/robots.txt")
			r = robots.Parse(body)
			rules[origin] = r
		}
		if !r.Allowed(floorAgent, u.RequestURI()) {
			continue
		}
		body, status, header, err := floorGet(client, it.u)
		if err != nil {
			continue
		}
		p := &floorPage{u: u, key: txindex.Key("floor", it.u), depth: it.depth, status: status, header: header,
			body: body, fetched: time.Now()}
		p.res, err = extract.HTMLWithContentType(bytes.NewReader(body), header.Get("Content-Type"), u, extract.Limits{})
		if err != nil {
			continue
		}
		pages = append(pages, p)
		if it.depth >= depth {
			continue
		}
		for _, l := range p.res.Links {
			if !l.Nofollow && !seen[l.URL] {
				seen[l.URL] = true
				queue = append(queue, item{l.URL, it.depth + 1})
			}
		}
	}
	return pages, nil
}

// floorExtract extracts every page again.
func floorExtract(pages []*floorPage) error {
	for _, p := range pages {
		if _, err := extract.HTMLWithContentType(bytes.NewReader(p.body), p.header.Get("Content-Type"), p.u, extract.Limits{}); err != nil {
			return err
		}
	}
	return nil
}

// floorWARC writes a request and a response record per page, gzipped one
// member each, to segment files of 64 MiB in dir.
func floorWARC(dir string, pages []*floorPage) error {
	seg := warc.NewSegment(true)
	files := 0
	flush := func() error {
		if seg.Len() == 0 {
			return nil
		}
		files++
		err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seg-%d.warc.gz", files)), seg.Bytes(), 0o600)
		seg.Reset()
		return err
	}
	var head bytes.Buffer
	for _, p := range pages {
		req := "GET " + p.u.RequestURI() + " HTTP/1.1\r\nHost: " + p.u.Host + "\r\nUser-Agent: " + floorAgent + "\r\n\r\n"
		rq := warc.NewRequestRecord(p.u.String(), p.fetched, []byte(req))
		if _, _, err := seg.Append(rq); err != nil {
			return err
		}
		head.Reset()
		fmt.Fprintf(&head, "HTTP/1.1 %d %s\r\n", p.status, http.StatusText(p.status))
		_ = p.header.Write(&head)
		head.WriteString("\r\n")
		head.Write(p.body)
		rs := warc.NewResponseRecord(p.u.String(), p.fetched, "127.0.0.1", head.Bytes(), false, warc.RecordID(rq))
		if _, _, err := seg.Append(rs); err != nil {
			return err
		}
		if seg.Len() > 64<<20 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// floorTx creates each URL's record and moves it through its three stages,
// one batched write per stage, in batches as the services write them.
func floorTx(ctx context.Context, tx txindex.Pipeline, pages []*floorPage) error {
	const batch = 256
	n, now := len(pages), time.Now()
	for i := 0; i < n; i += batch {
		var recs []txindex.Record
		for _, p := range pages[i:min(i+batch, n)] {
			recs = append(recs, txindex.Record{Key: p.key, CrawlID: "floor", URL: p.u.String(), Host: urlnorm.HostPort(p.u),
				Group: p.u.Hostname(), Depth: p.depth, Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now})
		}
		if _, err := tx.Create(ctx, recs); err != nil {
			return err
		}
	}
	for _, st := range [][2]contracts.Status{{contracts.ToBeLoaded, contracts.ToBeParsed},
		{contracts.ToBeParsed, contracts.ToBeIndexed}, {contracts.ToBeIndexed, contracts.Indexed}} {
		for i := 0; i < n; i += batch {
			var ts []txindex.Transition
			for _, p := range pages[i:min(i+batch, n)] {
				ts = append(ts, txindex.Transition{Key: p.key, From: st[0], To: st[1], HTTPStatus: p.status})
			}
			applied, err := tx.Transition(ctx, ts)
			if err != nil {
				return err
			}
			for j, ok := range applied {
				if !ok {
					return fmt.Errorf("transition of %s to %s not applied", ts[j].Key, st[1])
				}
			}
		}
	}
	return nil
}

// floorSearch writes each page's search document, in batches of 64.
func floorSearch(ctx context.Context, idx search.Index, pages []*floorPage) error {
	n := len(pages)
	var docs []contracts.Document
	for i, p := range pages {
		docs = append(docs, *yacydoc.Build(yacydoc.Page{Key: p.key, CrawlID: "floor", URL: p.u,
			Fetched: contracts.CrawlerPage{URL: p.u.String(), Depth: p.depth, StatusCode: p.status, FetchedAt: p.fetched},
			Header:  p.header, BodyBytes: len(p.body), MediaType: "text/html"}, &p.res))
		if len(docs) == 64 || i == n-1 {
			if err := idx.Upsert(ctx, docs); err != nil {
				return err
			}
			docs = docs[:0]
		}
	}
	return nil
}

func floorGet(c *http.Client, u string) ([]byte, int, http.Header, error) {
	resp, err := c.Get(u)
	if err != nil {
		return nil, 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
	return body, resp.StatusCode, resp.Header, err
}

func readLines(path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
