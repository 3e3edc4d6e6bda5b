package websim

import (
	"net/http"
	"sync/atomic"
)

// zone is what the generated web and the corpus share: the hosts under one
// DNS zone served by one listener, with one robots.txt for every host, and
// the requests served.
type zone struct {
	name     string // every host is under it
	srv      server
	requests atomic.Int64
	log      requestLog
	portSfx  string // ":PORT"
	robots   []byte
	rules    robotsFile
}

// init names the zone and sets its robots.txt: every robot is welcome, or
// the path prefix disallow is disallowed when it is not empty.
func (z *zone) init(name, disallow string) {
	z.name, z.portSfx = name, ":0"
	z.robots = []byte("# every robot is welcome\nUser-agent: *\nDisallow:\n")
	if disallow != "" {
		z.rules = robotsFile{groups: []robotsGroup{{agents: []string{"*"}, rules: []robotsRule{{pattern: disallow}}}}}
		z.robots = []byte(z.rules.text())
	}
}

// Close stops serving and waits for the server to exit.
func (z *zone) Close() { z.srv.close() }

// Port returns the listening port, 0 before Start.
func (z *zone) Port() int { return z.srv.port }

// Resolve returns the host override that sends every host of the zone to
// the listener, in GRIDCRAWL_RESOLVE's "pattern=ip" comma-list form.
func (z *zone) Resolve() string { return "*." + z.name + "=127.0.0.1" }

// Client returns an HTTP client that dials every host at the listener and
// does not follow redirects.
func (z *zone) Client() *http.Client { return z.srv.client() }

// Requests returns the number of requests served so far, robots.txt and
// 404s included.
func (z *zone) Requests() int64 { return z.requests.Load() }

// RequestLog returns every request served so far, in the order they
// finished; it is empty unless the config's RecordRequests is set.
func (z *zone) RequestLog() []Request { return z.log.snapshot() }

// Allowed reports whether robots.txt allows fetching pathQuery (path plus
// "?query" if any) on host; every host has the same rules.
func (z *zone) Allowed(host, pathQuery string) bool { return z.rules.allowed(pathQuery) }
