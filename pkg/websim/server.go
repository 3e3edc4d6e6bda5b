// Package websim serves simulated webs for gridcrawl's end-to-end tests, its
// demo and its benchmarks.
//
// Every simulated web listens on one loopback port and serves all of its
// virtual hosts there, choosing the site by the Host header. The crawler
// reaches those hosts through a host override (GRIDCRAWL_RESOLVE, in the
// style of curl --resolve) that dials every simulated name at 127.0.0.1;
// Resolve on each web returns the override it needs.
//
// Two webs are provided. Site (NewTestSite) is a small site full of awkward
// pages (robots rules, redirects, traps, frames, odd links) together with
// Expect, the outcome a correct crawl must have, computed from the site's own
// link graph. Web (NewWeb) is a large generated web whose pages are computed
// from a seed on every request, for benchmarks and demos at scale; with
// WebConfig.HostileEvery it mixes hostile pages (compression bombs, endless
// bodies, link amplification, huge headers...) among the ordinary ones.
// ScriptSite (NewScriptSite) is one host, served through httptest, whose
// app pages have text and links only once their scripts run, with hostile
// pages for headless browsers (scripts that never end, flood the server,
// exhaust memory or reach for private addresses).
package websim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrStarted is returned when Start is called on a web that is already
// serving.
var ErrStarted = errors.New("websim: already started")

// server owns one loopback listener and the HTTP server on it.
type server struct {
	srv  *http.Server
	done chan struct{}
	port int
}

// start listens on 127.0.0.1:port (0 picks a free port), calls onListen
// with the port it got (before any request can be served), and serves h
// until close.
func (s *server) start(port int, h http.Handler, onListen func(port int)) error {
	if s.srv != nil {
		return ErrStarted
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %q: %w", addr, err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	onListen(s.port)
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		// Serve returns http.ErrServerClosed after close; nothing else is
		// worth reporting for a test server whose listener we own.
		_ = srv.Serve(ln)
	}(s.srv, s.done)
	return nil
}

// close stops the server, drops open connections and waits for the serving
// goroutine. It is a no-op on a server that was never started.
func (s *server) close() {
	if s.srv == nil {
		return
	}
	_ = s.srv.Close()
	<-s.done
}

// client returns an HTTP client that dials every host name at the listener,
// as the crawler does through its host override, and returns 3xx answers
// instead of following them.
func (s *server) client() *http.Client {
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, target)
			},
			MaxIdleConnsPerHost: 8,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}
}

// requestHost returns the Host header without its port, lowercased.
func requestHost(r *http.Request) string {
	h := r.Host
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(h)
}

// normalize returns u in the form a canonicalizer gives it: scheme and host
// lowercased, the scheme's default port dropped (other ports kept), an empty
// path made "/", the fragment dropped. Path and query are kept as they are.
func normalize(u *url.URL) string {
	v := *u
	v.Scheme = strings.ToLower(v.Scheme)
	host, port := strings.ToLower(v.Hostname()), v.Port()
	if (v.Scheme == "http" && port == "80") || (v.Scheme == "https" && port == "443") {
		port = ""
	}
	v.Host = host
	if port != "" {
		v.Host = net.JoinHostPort(host, port)
	}
	if v.Path == "" && v.Opaque == "" {
		v.Path, v.RawPath = "/", ""
	}
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}

// resolveHref resolves an href or src attribute value against base the way a
// browser does for http(s) links: surrounding ASCII whitespace is ignored and
// anything that is not an absolute http or https URL after resolution is not
// a link (mailto:, javascript:, tel:, unparsable values). The result is
// normalized.
func resolveHref(base *url.URL, href string) (string, bool) {
	href = strings.Trim(href, " \t\n\f\r")
	ref, err := url.Parse(href)
	if err != nil {
		return "", false
	}
	abs := base.ResolveReference(ref)
	if (abs.Scheme != "http" && abs.Scheme != "https") || abs.Hostname() == "" {
		return "", false
	}
	return normalize(abs), true
}
