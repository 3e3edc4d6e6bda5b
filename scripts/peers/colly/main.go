// Command colly crawls start URLs with Colly under the same politeness as
// gridcrawl's benchmark: robots.txt obeyed, one request at a time per host
// with a fixed delay after each, no jitter, links without their fragment,
// the same depth. It stores every page's body in one append-only file and a
// parsed title and links per HTML page as JSON lines, and prints a summary
// line of JSON when the crawl ends.
//
// It is its own Go module so that gridcrawl's go.mod does not grow:
//
//	cd scripts/peers/colly && go build -o ../../../bin/peer-colly .
//	peer-colly -urls start-urls.txt -connect 127.0.0.1:8080 -delay-ms 10 -depth 4 -out /tmp/colly
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gocolly/colly/v2"
)

// page is one line of pages.jsonl.
type page struct {
	URL    string   `json:"url"`
	Status int      `json:"status"`
	Title  string   `json:"title"`
	Links  []string `json:"links"`
}

// store writes bodies and page records; Colly calls back from many
// goroutines.
type store struct {
	mu     sync.Mutex
	bodies *bufio.Writer
	pages  *json.Encoder
	pw     *bufio.Writer
	n      int
	bytes  int64
}

func (s *store) body(u string, status int, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.bytes += int64(len(b))
	if _, err := fmt.Fprintf(s.bodies, "%s %d %d\n", u, status, len(b)); err != nil {
		return err
	}
	_, err := s.bodies.Write(b)
	return err
}

func (s *store) page(p page) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages.Encode(p)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peer-colly:", err)
		os.Exit(1)
	}
}

func run() error {
	urlsFile := flag.String("urls", "", "file of start URLs, one a line")
	connect := flag.String("connect", "", "host:port to dial for every host (the simulated web); empty dials the real address")
	delayMS := flag.Int("delay-ms", 100, "milliseconds to wait after each request before the next to the same host")
	depth := flag.Int("depth", 4, "link depth from the start URLs (0: the start URLs only)")
	out := flag.String("out", "colly-out", "output directory")
	flag.Parse()
	starts, err := readLines(*urlsFile)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	bf, err := os.Create(filepath.Join(*out, "bodies.dat"))
	if err != nil {
		return fmt.Errorf("create bodies file: %w", err)
	}
	defer bf.Close()
	pf, err := os.Create(filepath.Join(*out, "pages.jsonl"))
	if err != nil {
		return fmt.Errorf("create pages file: %w", err)
	}
	defer pf.Close()
	st := &store{bodies: bufio.NewWriterSize(bf, 1<<20), pw: bufio.NewWriterSize(pf, 1<<20)}
	st.pages = json.NewEncoder(st.pw)

	var hosts, hostPorts []string
	seenHost := map[string]bool{}
	for _, s := range starts {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("parse start URL %q: %w", s, err)
		}
		if !seenHost[u.Host] {
			seenHost[u.Host] = true
			hosts = append(hosts, u.Hostname())
			hostPorts = append(hostPorts, u.Host)
		}
	}
	c := colly.NewCollector(
		colly.Async(true),
		colly.MaxDepth(*depth+1), // Colly's start URLs are at depth 1
		colly.AllowedDomains(hosts...),
		colly.UserAgent("colly-peer"),
	)
	c.IgnoreRobotsTxt = false
	c.SetRequestTimeout(60 * time.Second)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // one idle connection per host, however many hosts
	if *connect != "" {
		d := &net.Dialer{Timeout: 10 * time.Second}
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, *connect)
		}
	}
	c.WithTransport(tr)
	// Colly's limit rules hold one slot set per rule, so one request per
	// host needs a rule per host (a "*" rule would allow one request in
	// all). The delay is slept after each response, slot held.
	for _, h := range hostPorts {
		if err := c.Limit(&colly.LimitRule{DomainGlob: h, Parallelism: 1, Delay: time.Duration(*delayMS) * time.Millisecond}); err != nil {
			return fmt.Errorf("limit rule for %s: %w", h, err)
		}
	}
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	c.OnResponse(func(r *colly.Response) {
		if err := st.body(r.Request.URL.String(), r.StatusCode, r.Body); err != nil {
			fail(fmt.Errorf("store body: %w", err))
		}
	})
	c.OnHTML("html", func(e *colly.HTMLElement) {
		p := page{URL: e.Request.URL.String(), Status: e.Response.StatusCode, Title: strings.TrimSpace(e.DOM.Find("title").First().Text())}
		e.DOM.Find("a[href], frame[src], iframe[src]").Each(func(_ int, s *goquery.Selection) {
			ref, ok := s.Attr("href")
			if !ok {
				ref, _ = s.Attr("src")
			}
			abs := e.Request.AbsoluteURL(ref)
			if abs == "" {
				return
			}
			u, err := url.Parse(abs)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				return
			}
			u.Fragment, u.RawFragment = "", ""
			p.Links = append(p.Links, u.String())
		})
		if err := st.page(p); err != nil {
			fail(fmt.Errorf("store page: %w", err))
		}
		for _, l := range p.Links {
			_ = e.Request.Visit(l) // refusals (visited, robots, depth, domain) are the point
		}
	})
	var fetchErrs int
	c.OnError(func(r *colly.Response, err error) {
		errMu.Lock()
		fetchErrs++
		errMu.Unlock()
	})
	start := time.Now()
	for _, s := range starts {
		// A start URL may have been found through another host already.
		var visited *colly.AlreadyVisitedError
		if err := c.Visit(s); err != nil && !errors.Is(err, colly.ErrRobotsTxtBlocked) && !errors.As(err, &visited) {
			return fmt.Errorf("visit %s: %w", s, err)
		}
	}
	c.Wait()
	if err := st.bodies.Flush(); err != nil {
		return fmt.Errorf("flush bodies: %w", err)
	}
	if err := st.pw.Flush(); err != nil {
		return fmt.Errorf("flush pages: %w", err)
	}
	if firstErr != nil {
		return firstErr
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"crawler": "colly", "responses": st.n, "bytes": st.bytes, "errors": fetchErrs, "wall_s": time.Since(start).Seconds(),
	})
}

func readLines(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read start URLs: %w", err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}
