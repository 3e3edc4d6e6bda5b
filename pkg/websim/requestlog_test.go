package websim

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logAt builds a synthetic request: host, path, and start and end in
// milliseconds from a fixed origin.
func logAt(host, path string, startMS, endMS int) Request {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return Request{Host: host, Path: path, URL: "http://" + host + path,
		Start: t0.Add(time.Duration(startMS) * time.Millisecond), End: t0.Add(time.Duration(endMS) * time.Millisecond)}
}

func TestStats(t *testing.T) {
	noPrivate := func(_, path string) bool { return !strings.HasPrefix(path, "/private/") }
	tests := []struct {
		name    string
		log     []Request
		delay   time.Duration
		allowed func(host, path string) bool
		want    RequestStats
	}{
		{name: "empty", want: RequestStats{}},
		{
			name:  "polite crawl of two hosts",
			delay: 100 * time.Millisecond,
			log: []Request{
				logAt("a", "/robots.txt", 0, 10), logAt("a", "/", 110, 120), logAt("a", "/x", 220, 230),
				logAt("b", "/robots.txt", 0, 10), logAt("b", "/", 115, 130),
			},
			want: RequestStats{Requests: 5, Pages: 3, MedianGap: 100 * time.Millisecond},
		},
		{
			name:  "the same URL twice and three times, robots.txt twice",
			delay: 0,
			log: []Request{
				logAt("a", "/robots.txt", 0, 1), logAt("a", "/robots.txt", 2, 3),
				logAt("a", "/", 4, 5), logAt("a", "/", 6, 7), logAt("a", "/x", 8, 9), logAt("a", "/x", 10, 11), logAt("a", "/x", 12, 13),
				logAt("b", "/", 14, 15),
			},
			want: RequestStats{Requests: 8, Pages: 3, FetchedTwice: 2, MedianGap: time.Millisecond},
		},
		{
			name:    "disallowed pages are counted once each",
			delay:   0,
			allowed: noPrivate,
			log: []Request{
				logAt("a", "/private/1", 0, 1), logAt("a", "/private/1", 2, 3), logAt("a", "/private/2", 4, 5), logAt("a", "/public", 6, 7),
			},
			want: RequestStats{Requests: 4, Pages: 3, FetchedTwice: 1, Disallowed: 2, MedianGap: time.Millisecond},
		},
		{
			name:  "overlap with the previous request and with a long earlier one",
			delay: 10 * time.Millisecond,
			log: []Request{
				// /long is busy until 100: /b starts inside it although /a
				// ended before /b started.
				logAt("a", "/long", 0, 100), logAt("a", "/a", 5, 10), logAt("a", "/b", 50, 60),
				// Logged out of start order: sorted by start first.
				logAt("a", "/d", 150, 160), logAt("a", "/c", 110, 120),
			},
			// Gaps 0, 0, 10, 30.
			want: RequestStats{Requests: 5, Pages: 5, Overlaps: 2, MedianGap: 10 * time.Millisecond},
		},
		{
			name:  "short gaps: below delay minus tolerance, at the tolerance edge, at the delay",
			delay: 100 * time.Millisecond,
			log: []Request{
				logAt("a", "/", 0, 10),
				logAt("a", "/1", 60, 70),   // gap 50: short
				logAt("a", "/2", 169, 180), // gap 99 = delay - tolerance: not short
				logAt("a", "/3", 280, 290), // gap 100: not short
				logAt("a", "/4", 290, 300), // gap 0 (starts as the previous ends): short, not an overlap
			},
			// Gaps 50, 99, 100, 0.
			want: RequestStats{Requests: 5, Pages: 5, ShortGaps: 2, MedianGap: 99 * time.Millisecond},
		},
		{
			name:  "hosts are independent",
			delay: 100 * time.Millisecond,
			log: []Request{
				logAt("a", "/", 0, 10), logAt("b", "/", 5, 15), logAt("c", "/", 10, 20), logAt("a", "/x", 110, 120),
			},
			want: RequestStats{Requests: 4, Pages: 4, MedianGap: 100 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Stats(tt.log, tt.delay, tt.allowed); got != tt.want {
				t.Errorf("Stats() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWebRequestLogAndDisallow(t *testing.T) {
	w := startWeb(t, WebConfig{Hosts: 2, PagesPerHost: 40, Disallow: "/p/3", RecordRequests: true})
	cl := w.Client()
	t.Cleanup(cl.CloseIdleConnections)
	p := ":" + strconv.Itoa(w.Port())
	_, robots := webGet(t, cl, "http://h0001.sim.test"+p+"/robots.txt")
	rb := parseTestRobots(200, robots, "gridcrawl")
	tests := []struct {
		path    string
		allowed bool
	}{
		{"/", true}, {"/p/2.html", true}, {"/p/3.html", false}, {"/p/31.html", false}, {"/p/13.html", true},
	}
	for _, tt := range tests {
		if got := rb.allowed(tt.path); got != tt.allowed {
			t.Errorf("robots.txt allows %q = %v, want %v:\n%s", tt.path, got, tt.allowed, robots)
		}
		if got := w.Allowed("h0001.sim.test", tt.path); got != tt.allowed {
			t.Errorf("Allowed(%q) = %v, want %v", tt.path, got, tt.allowed)
		}
		webGet(t, cl, "http://h0000.sim.test"+p+tt.path)
	}
	log := w.RequestLog()
	if len(log) != 1+len(tests) {
		t.Fatalf("RequestLog() has %d requests, want %d", len(log), 1+len(tests))
	}
	if r := log[0]; r.Host != "h0001.sim.test" || r.Path != "/robots.txt" || r.Status != 200 || r.End.Before(r.Start) {
		t.Errorf("RequestLog()[0] = %+v, want a 200 for h0001.sim.test/robots.txt", r)
	}
	if r := log[3]; r.URL != "http://h0000.sim.test"+p+"/p/3.html" {
		t.Errorf("RequestLog()[3].URL = %q, want http://h0000.sim.test%s/p/3.html", r.URL, p)
	}
	if got := Stats(log, 0, w.Allowed); got.Disallowed != 2 || got.Pages != len(tests) {
		t.Errorf("Stats(log).Disallowed, Pages = %d, %d, want 2, %d", got.Disallowed, got.Pages, len(tests))
	}
}

func TestWebDefaultKeepsNoLog(t *testing.T) {
	w := startWeb(t, WebConfig{Hosts: 1, PagesPerHost: 2})
	cl := w.Client()
	t.Cleanup(cl.CloseIdleConnections)
	webGet(t, cl, "http://h0000.sim.test:"+strconv.Itoa(w.Port())+"/")
	if n := len(w.RequestLog()); n != 0 {
		t.Errorf("RequestLog() has %d requests without RecordRequests, want 0", n)
	}
}

// TestLoggedEndBeforeLastWrite checks that a request's logged end is taken
// before its last write, not when the handler returns: a server goroutine
// that waits for a core after writing (a loaded machine) must not make the
// logged gap to the next request shorter than the crawler's.
func TestLoggedEndBeforeLastWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := &statusWriter{ResponseWriter: rec}
	if _, err := sw.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	beforeLast := time.Now()
	if _, err := sw.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	afterLast := time.Now()
	time.Sleep(20 * time.Millisecond) // the goroutine waits for a core
	if end := sw.end(); end.Before(beforeLast) || end.After(afterLast) {
		t.Errorf("end() = %v, want between %v and %v (when the last write began)", end, beforeLast, afterLast)
	}
	if sw.status != http.StatusOK {
		t.Errorf("status = %d, want 200", sw.status)
	}
}
