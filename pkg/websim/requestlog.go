package websim

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// GapTolerance is how much shorter than the politeness delay a gap between
// two requests to one host may be before Stats counts it as too short. The
// server sees a gap at least as long as the crawler does (it stamps a
// request's start after the crawler sent it and its end before its last
// write, so before the crawler read the last byte), so the tolerance only
// absorbs timers that fire a little early and clock reads.
const GapTolerance = time.Millisecond

// requestLog is the opt-in log of a simulated web's requests.
type requestLog struct {
	mu   sync.Mutex
	reqs []Request
}

// record appends the request r, handled from start until now and answered
// through sw, to the log; port is the listener's port, for the URL.
func (l *requestLog) record(r *http.Request, port int, start time.Time, sw *statusWriter) {
	end := sw.end()
	host := requestHost(r)
	u := &url.URL{Scheme: "http", Host: host + ":" + strconv.Itoa(port), Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	req := Request{
		Host: host, Path: r.URL.RequestURI(), URL: normalize(u), Method: r.Method,
		UserAgent: r.UserAgent(), Start: start, End: end, Status: sw.status,
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, req)
	l.mu.Unlock()
}

// snapshot returns a copy of the log.
func (l *requestLog) snapshot() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// RequestStats is what a server can tell about a crawler's behaviour from
// the requests it served.
type RequestStats struct {
	// Requests counts every request, robots.txt included.
	Requests int
	// Pages counts the distinct URLs requested other than /robots.txt.
	Pages int
	// FetchedTwice counts the URLs other than /robots.txt requested more
	// than once.
	FetchedTwice int
	// Disallowed counts the distinct URLs requested that robots.txt
	// disallows.
	Disallowed int
	// Overlaps counts the requests that started while an earlier request
	// to the same host was still being answered.
	Overlaps int
	// ShortGaps counts the requests that started less than the politeness
	// delay (minus GapTolerance) after the previous request to the same
	// host ended. Overlapping requests are counted as Overlaps only.
	ShortGaps int
	// MedianGap is the median of the gaps between a request's end and the
	// start of the next request to the same host (overlaps count as 0), over
	// all hosts: how close to its delay a crawler keeps each host busy.
	MedianGap time.Duration
}

// Stats computes RequestStats from a request log. Requests to one host are
// taken in the order they started; robots.txt requests count towards
// Overlaps and ShortGaps like any other, since the host serves them too.
// allowed reports whether robots.txt allows a host's pathQuery; nil allows
// everything.
func Stats(log []Request, delay time.Duration, allowed func(host, pathQuery string) bool) RequestStats {
	st := RequestStats{Requests: len(log)}
	seen := make(map[string]int, len(log))
	byHost := map[string][]Request{}
	for _, r := range log {
		byHost[r.Host] = append(byHost[r.Host], r)
		if r.Path == "/robots.txt" {
			continue
		}
		seen[r.URL]++
		switch n := seen[r.URL]; {
		case n == 1:
			st.Pages++
			if allowed != nil && !allowed(r.Host, r.Path) {
				st.Disallowed++
			}
		case n == 2:
			st.FetchedTwice++
		}
	}
	var gaps []time.Duration
	for _, rs := range byHost {
		slices.SortStableFunc(rs, func(a, b Request) int { return a.Start.Compare(b.Start) })
		busyUntil := rs[0].End
		for _, r := range rs[1:] {
			gaps = append(gaps, max(r.Start.Sub(busyUntil), 0))
			switch {
			case r.Start.Before(busyUntil):
				st.Overlaps++
			case r.Start.Sub(busyUntil) < delay-GapTolerance:
				st.ShortGaps++
			}
			if r.End.After(busyUntil) {
				busyUntil = r.End
			}
		}
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		st.MedianGap = gaps[len(gaps)/2]
	}
	return st
}
