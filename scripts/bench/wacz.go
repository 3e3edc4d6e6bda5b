package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/wacz"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// waczConfig is the -wacz bench: a crawl of pages pages written as WARC
// segments of perSegment responses (each with its CDXJ index beside it, in
// the loader's arrival order) into a file store under dir, then exported as
// one WACZ with pkg/wacz.
type waczConfig struct {
	pages, perSegment, bytes int
	dir, out                 string
	text                     bool
}

// waczBench builds the crawl, exports it and prints the export's speed
// and peak memory: the Go heap sampled every 10 ms while exporting, and
// the process's peak RSS (getrusage; it includes building the crawl, which
// holds one segment at a time). What it measures is the writer (index
// sort and merge, segment copy, hashing, ZIP), not the MCP's listing of
// the crawl's records or the search store's paging.
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
	st, err := fsassets.Open(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	began := time.Now()
	segs, lines, stored, err := waczCrawl(ctx, st, c)
	if err != nil {
		return err
	}
	fmt.Printf("crawl: %d pages, %d segments, %d index lines, %.1f MB of WARC, built in %s\n",
		c.pages, len(segs), lines, float64(stored)/1e6, time.Since(began).Round(time.Millisecond))
	crawl := wacz.Crawl{Title: "bench", Software: "gridcrawl bench", Store: st, Segments: segs, Text: c.text,
		TempDir: dir,
		Index: func(ctx context.Context, s wacz.Segment, yield func([]byte) error) error {
			rc, err := st.Get(ctx, s.Key+".cdxj", 0, -1)
			if err != nil {
				return err
			}
			defer rc.Close()
			b, err := io.ReadAll(rc) // one segment's index
			if err != nil {
				return err
			}
			for l := range bytes.Lines(b) {
				if err := yield(l); err != nil {
					return err
				}
			}
			return nil
		},
		Pages: func(_ context.Context, yield func(wacz.Page) error) error {
			at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			for i := range c.pages {
				p := wacz.Page{ID: fmt.Sprint(i), URL: waczPageURL(i), TS: at.Add(time.Duration(i) * time.Millisecond),
					Title: fmt.Sprintf("Page %d", i), Text: "the text of a page, as the search store keeps it"}
				if err := yield(p); err != nil {
					return err
				}
			}
			return nil
		},
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
	cw := &countWriter{w: out}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	began = time.Now()
	e, err := wacz.Prepare(ctx, crawl)
	if err == nil {
		prepared := time.Since(began)
		err = e.WriteTo(ctx, cw)
		e.Close()
		fmt.Printf("index sorted into runs in %s\n", prepared.Round(time.Millisecond))
	}
	took := time.Since(began)
	close(stop)
	<-sampled
	if err != nil {
		return err
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("wacz: %.1f MB in %s: %.1f MB/s; heap in use %.1f MB before, peak %.1f MB while exporting; peak RSS %.1f MB\n",
		float64(cw.n)/1e6, took.Round(time.Millisecond), float64(cw.n)/1e6/took.Seconds(),
		float64(base.HeapInuse)/1e6, float64(peak.Load())/1e6, float64(ru.Maxrss)/1e3)
	return nil
}

func waczPageURL(i int) string {
	return fmt.Sprintf("http://h%d.bench.test/p/%d.html", i%97, i)
}

// waczCrawl writes the crawl's segments and their indexes, in the order a
// loader appends them (so each index needs sorting).
func waczCrawl(ctx context.Context, st *fsassets.Store, c waczConfig) ([]wacz.Segment, int, int64, error) {
	var segs []wacz.Segment
	var stored int64
	body := bytes.Repeat([]byte("x"), c.bytes)
	resp := append([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n", len(body))), body...)
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	seg := warc.NewSegment(true)
	var index []byte
	flush := func() error {
		if seg.Count() == 0 {
			return nil
		}
		name := fmt.Sprintf("gridcrawl-20261128000000-%06d.warc.gz", len(segs))
		key := "warc/2026/11/28/" + name
		if err := st.Put(ctx, key, bytes.NewReader(seg.Bytes()), seg.Len(), "application/warc"); err != nil {
			return err
		}
		if err := st.Put(ctx, key+".cdxj", bytes.NewReader(index), int64(len(index)), "application/x-cdxj"); err != nil {
			return err
		}
		stored += seg.Len()
		segs = append(segs, wacz.Segment{Name: path.Base(key), Key: key})
		seg.Reset()
		index = index[:0]
		return nil
	}
	lines := 0
	for i := range c.pages {
		name := fmt.Sprintf("gridcrawl-20261128000000-%06d.warc.gz", len(segs))
		rec := warc.NewResponseRecord(waczPageURL(i), at.Add(time.Duration(i)*time.Millisecond), "127.0.0.1", resp, false, "")
		off, n, err := seg.Append(rec)
		if err != nil {
			return nil, 0, 0, err
		}
		if cx, ok := seg.CDXJOf(rec, 0, off, n, name); ok {
			cx.Crawl = "bench"
			index = cx.AppendLine(index)
			lines++
		}
		if seg.Count() >= c.perSegment {
			if err := flush(); err != nil {
				return nil, 0, 0, err
			}
		}
	}
	return segs, lines, stored, flush()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
