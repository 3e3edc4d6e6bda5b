package websim

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hosts of the sitemap site.
const (
	HostMaps    = "maps.example.test" // start host: robots.txt, sitemaps, pages
	HostMapsOut = "other.test"        // another host, out of a host-scoped crawl
)

// SitemapBigEntries is the number of entries of the sitemap site's
// oversized sitemap, /big.xml: one more than the protocol's 50,000.
const SitemapBigEntries = 50001

// SitemapSite serves a site whose pages are mostly reachable only through
// sitemaps, for a host-scoped crawl from http://maps.example.test:PORT/ at
// max_depth 1 with sitemaps at depth 0:
//
//   - / links only to /linked.
//   - robots.txt disallows /secret/ and names two sitemaps:
//     /index.xml.gz (a gzipped sitemap index, served as application/gzip)
//     and http://other.test:PORT/foreign.xml (another host).
//   - /sitemap.xml (the start host's own) lists /only-sitemap (with a
//     lastmod), /secret/hidden (robots-disallowed), a page of other.test
//     and / (already a start URL).
//   - /index.xml.gz lists /sub.xml.gz (gzipped urlset listing /only-index
//     with a lastmod) and /big.xml, and a sitemap of other.test.
//   - /big.xml lists SitemapBigEntries URLs: 50,000 of other.test, then
//     /after-cut, which the protocol's limit cuts off.
//   - /only-sitemap links to /from-sitemap (depth 1), which links to
//     /too-deep (depth 2).
//
// Every other path answers 404.
type SitemapSite struct {
	srv  server
	mu   sync.Mutex
	reqs []Request
	big  []byte
}

// NewSitemapSite returns the sitemap site, not yet serving.
func NewSitemapSite() *SitemapSite { return &SitemapSite{} }

// Start serves the site on a free port of 127.0.0.1.
func (s *SitemapSite) Start() error {
	err := s.srv.start(0, s, func(int) {})
	if err != nil {
		return fmt.Errorf("start sitemap site: %w", err)
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
	for i := range SitemapBigEntries - 1 {
		fmt.Fprintf(&b, "<url><loc>%s</loc></url>\n", s.URL(HostMapsOut, "/big/"+strconv.Itoa(i)))
	}
	fmt.Fprintf(&b, "<url><loc>%s</loc></url>\n</urlset>\n", s.URL(HostMaps, "/after-cut"))
	s.big = []byte(b.String())
	return nil
}

// Close stops serving.
func (s *SitemapSite) Close() { s.srv.close() }

// URL returns "http://host:port/path".
func (s *SitemapSite) URL(host, path string) string {
	return "http://" + host + ":" + strconv.Itoa(s.srv.port) + path
}

// StartURL returns http://maps.example.test:PORT/.
func (s *SitemapSite) StartURL() string { return s.URL(HostMaps, "/") }

// Resolve returns the GRIDCRAWL_RESOLVE value that sends both hosts to the
// listener.
func (s *SitemapSite) Resolve() string { return HostMaps + "=127.0.0.1," + HostMapsOut + "=127.0.0.1" }

// Requests returns every request served so far.
func (s *SitemapSite) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Lastmods of the sitemap site's entries, as an RFC 3339 UTC instant.
const (
	LastmodOnlySitemap = "2024-03-01T08:20:30Z" // written 2024-03-01T10:20:30+02:00
	LastmodOnlyIndex   = "2023-12-31T00:00:00Z" // written 2023-12-31
)

// SitemapExpect is what a correct crawl of the sitemap site does.
type SitemapExpect struct {
	// Indexed are the pages that end indexed.
	Indexed []string
	// Sitemaps are the sitemaps that end read (status sitemap), the start
	// host's /sitemap.xml included.
	Sitemaps []string
	// RobotsDenied are recorded and end failed without a request.
	RobotsDenied []string
	// Fetched are requested exactly once each (robots.txt apart).
	Fetched []string
	// NeverFetched must never be requested: out of scope, cut off by the
	// 50,000-entry limit, too deep, robots-denied.
	NeverFetched []string
	// Lastmod gives the lastmod each listed page's record must carry.
	Lastmod map[string]time.Time
	// Cut is the sitemap that the entry limit cuts.
	Cut string
}

// Expect returns the outcome of the crawl described on SitemapSite.
func (s *SitemapSite) Expect() SitemapExpect {
	u := func(p string) string { return s.URL(HostMaps, p) }
	lm := func(v string) time.Time {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			panic(err)
		}
		return t
	}
	e := SitemapExpect{
		Indexed:      []string{u("/"), u("/linked"), u("/only-sitemap"), u("/only-index"), u("/from-sitemap")},
		Sitemaps:     []string{u("/sitemap.xml"), u("/index.xml.gz"), u("/sub.xml.gz"), u("/big.xml")},
		RobotsDenied: []string{u("/secret/hidden")},
		NeverFetched: []string{u("/secret/hidden"), u("/after-cut"), u("/too-deep"),
			s.URL(HostMapsOut, "/foreign.xml"), s.URL(HostMapsOut, "/page"), s.URL(HostMapsOut, "/other-sitemap.xml"),
			s.URL(HostMapsOut, "/big/0"), s.URL(HostMapsOut, "/big/49999")},
		Lastmod: map[string]time.Time{u("/only-sitemap"): lm(LastmodOnlySitemap), u("/only-index"): lm(LastmodOnlyIndex)},
		Cut:     u("/big.xml"),
	}
	e.Fetched = append(slices.Clone(e.Indexed), e.Sitemaps...)
	return e
}

// ServeHTTP serves one request of the site and records it.
func (s *SitemapSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	s.serve(sw, r)
	req := Request{Host: requestHost(r), Path: r.URL.RequestURI(), Method: r.Method, UserAgent: r.UserAgent(),
		Start: start, End: sw.end(), Status: sw.status}
	req.URL = s.URL(req.Host, req.Path)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
}

func (s *SitemapSite) serve(w http.ResponseWriter, r *http.Request) {
	host := requestHost(r)
	page := func(title string, links ...string) {
		w.Header().Set("Content-Type", ctHTML)
		var b strings.Builder
		fmt.Fprintf(&b, "<!doctype html><html><head><title>%s</title></head><body><p>%s page</p>", title, title)
		for _, l := range links {
			fmt.Fprintf(&b, `<a href="%s">%s</a>`, l, l)
		}
		b.WriteString("</body></html>")
		_, _ = w.Write([]byte(b.String()))
	}
	xml := func(ctype, body string, gz bool) {
		w.Header().Set("Content-Type", ctype)
		b := []byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + body)
		if gz {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(b)
			_ = zw.Close()
			b = buf.Bytes()
		}
		_, _ = w.Write(b)
	}
	loc := func(tag, u, lastmod string) string {
		if lastmod != "" {
			lastmod = "<lastmod>" + lastmod + "</lastmod>"
		}
		return fmt.Sprintf("<%s><loc>%s</loc>%s</%s>", tag, u, lastmod, tag)
	}
	if host != HostMaps {
		http.NotFound(w, r) // other.test must never be asked anything
		return
	}
	switch r.URL.Path {
	case "/robots.txt":
		w.Header().Set("Content-Type", ctText)
		fmt.Fprintf(w, "User-agent: *\nDisallow: /secret/\n\nSitemap: %s\nSitemap: %s\n",
			s.URL(HostMaps, "/index.xml.gz"), s.URL(HostMapsOut, "/foreign.xml"))
	case "/":
		page("Home", "/linked")
	case "/linked":
		page("Linked")
	case "/only-sitemap":
		page("Only in the sitemap", "/from-sitemap")
	case "/from-sitemap":
		page("Linked from a sitemap page", "/too-deep")
	case "/only-index":
		page("Only in the index")
	case "/sitemap.xml":
		xml("application/xml", `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`+
			loc("url", s.URL(HostMaps, "/only-sitemap"), "2024-03-01T10:20:30+02:00")+
			loc("url", s.URL(HostMaps, "/secret/hidden"), "")+
			loc("url", s.URL(HostMapsOut, "/page"), "")+
			loc("url", s.URL(HostMaps, "/"), "")+`</urlset>`, false)
	case "/index.xml.gz":
		xml("application/gzip", `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`+
			loc("sitemap", s.URL(HostMaps, "/sub.xml.gz"), "2024-01-01")+
			loc("sitemap", s.URL(HostMaps, "/big.xml"), "")+
			loc("sitemap", s.URL(HostMapsOut, "/other-sitemap.xml"), "")+`</sitemapindex>`, true)
	case "/sub.xml.gz":
		xml("application/x-gzip", `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`+
			loc("url", s.URL(HostMaps, "/only-index"), "2023-12-31")+`</urlset>`, true)
	case "/big.xml":
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write(s.big)
	default:
		http.NotFound(w, r)
	}
}
