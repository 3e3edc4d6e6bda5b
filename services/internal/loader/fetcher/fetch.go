package fetcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/growbuf"
	"github.com/gridcrawl/gridcrawl/pkg/httpbody"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
	"github.com/gridcrawl/gridcrawl/pkg/robots"
	"github.com/gridcrawl/gridcrawl/pkg/sitemap"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// One leased task becomes exactly one outcome. A lease makes at most one
// request, a page or its origin's robots.txt, so that the group's delay
// follows every request.

// Verdict says what became of a task.
type Verdict uint8

const (
	// Fetched: the page was fetched (ex); recorded as to-be-parsed, or
	// failed for an HTTP error status.
	Fetched Verdict = iota
	// Failed: the URL fails for reason, without an exchange.
	Failed
	// Retired: the group's budget is spent; the URL is parked as retired.
	Retired
	// Skip: the record is no longer to-be-loaded; only settle.
	Skip
	// Republish: fetched before; publish its crawler contract (repub) again.
	Republish
	// Retry: a retryable failure; fetch again later, one attempt more.
	Retry
	// Again: the lease went to fetching robots.txt; schedule the task again.
	Again
	// Paused: the crawl is paused; park the URL.
	Paused
	// Abandon: no outcome could be had (index error, shutdown); the
	// contract is retried.
	Abandon
	// Lost: the task's contract went back to the queue (the broker
	// connection was lost) and may be with another loader, which now owns
	// the group: drop the task without a request and without settling.
	Lost
)

// Outcome is what the fetcher made of one task.
type Outcome struct {
	Verdict Verdict
	Reason  string                 // Failed, Retired; Fetched with an HTTP error
	Err     error                  // Abandon
	Ex      *Exchange              // Fetched
	Revisit *Revisit               // Fetched: the page is unchanged since its last fetch
	Robots  *Exchange              // a robots.txt exchange to archive, any verdict
	Repub   *contracts.CrawlerPage // Republish
	// render is the page's rendering in the browser (Fetched, render.go);
	// renderFailed marks a reason that is the rendering's failure.
	Render       *Rendering
	RenderFailed bool
	// pol is the outcome for the politeness scheduler.
	Pol politeness.Outcome
}

// nothing is a politeness outcome for a lease that made no request: no
// cost, no delay.
var nothing = politeness.Outcome{Unfetched: true}

// Fetch turns a leased task into its outcome.
func (f *Fetcher) Fetch(ctx context.Context, t *queueing.Task) Outcome {
	u, o, decided := f.admit(ctx, t)
	if decided {
		return o
	}
	crawlDelay, o, decided := f.checkRobots(ctx, t, u)
	if decided {
		return o
	}
	return f.get(ctx, t, u, crawlDelay)
}

// admit decides the tasks that need no request: those of cancelled or
// paused crawls, those whose record is no longer to-be-loaded, and invalid
// URLs. It returns the parsed URL of the others.
func (f *Fetcher) admit(ctx context.Context, t *queueing.Task) (*url.URL, Outcome, bool) {
	o := Outcome{Pol: nothing}
	if f.deps.Tasks.Lost(t) {
		// Its contract went back to the queue, or its shard to another
		// loader, which fetches it.
		o.Verdict = Lost
		return nil, o, true
	}
	var rec txindex.Record
	var err error
	state := f.cancels.State(ctx, t.CrawlID)
	switch {
	case state == contracts.CrawlCancelled || state == contracts.CrawlPaused:
	case t.Known != nil && time.Since(t.Known.StatusTime) < f.cfg.RecoveryLease/2:
		// The enqueuer's snapshot: the record as created, too young for
		// the recovery sweep to have published it again (see
		// Config.RecoveryLease), or the later version this loader wrote
		// itself since (its store knows that one: a copy of the URL it
		// fetched already, such as one the crawler published again, is
		// skipped as after a read). A later version written elsewhere
		// fails the transition, which then reads the record.
		rec = f.latest(*t.Known)
	default:
		rec, err = f.deps.Tx.Get(ctx, txindex.Key(t.CrawlID, t.URL))
	}
	var u *url.URL
	switch {
	case state == contracts.CrawlCancelled:
		o.Verdict, o.Reason = Failed, "cancelled"
	case state == contracts.CrawlPaused:
		o.Verdict = Paused
	case err != nil:
		o.Verdict, o.Err = Abandon, fmt.Errorf("get record: %w", err)
	case rec.Status == contracts.ToBeParsed && rec.Asset.Key != "":
		// Fetched before but the crawler contract may be lost: publish again.
		o.Verdict = Republish
		o.Repub = &contracts.CrawlerPage{URL: t.URL, Depth: rec.Depth, Hops: rec.Hops, Asset: rec.Asset, StatusCode: rec.HTTPStatus, FetchedAt: rec.StatusTime}
	case rec.Status != contracts.ToBeLoaded:
		o.Verdict = Skip
	case !f.deps.Tasks.Claim(t):
		// Another task fetches this URL and its outcome is not recorded
		// yet: this one only settles, like a record no longer to-be-loaded.
		o.Verdict = Skip
	default:
		t.Sitemap = rec.Sitemap
		if t.Profile.Recrawl != nil {
			t.Prev = &rec
		}
		if u, err = url.Parse(t.URL); err != nil {
			o.Verdict, o.Reason = Failed, "invalid url"
		}
	}
	return u, o, u == nil
}

// latest returns the version of r's record the loader's store knows, r
// when it knows none.
func (f *Fetcher) latest(r txindex.Record) txindex.Record {
	if rv, ok := f.deps.Tx.(txindex.Revisions); ok {
		if k, _, ok := rv.Known(r.Key); ok {
			return k
		}
	}
	return r
}

// checkRobots applies the origin's robots.txt. When the lease had to fetch
// it, that was the lease's request: the outcome is Again with the
// robots.txt exchange. Otherwise it decides a disallowed or unreachable
// URL, or returns the Crawl-delay for the page's request.
func (f *Fetcher) checkRobots(ctx context.Context, t *queueing.Task, u *url.URL) (time.Duration, Outcome, bool) {
	if t.Profile.Politeness.Robots == contracts.RobotsIgnore {
		return 0, Outcome{}, false
	}
	rc := &robotsCapture{}
	res, err := f.robots.Lookup(context.WithValue(ctx, robotsCaptureKey{}, rc), u.Scheme, urlnorm.HostPort(u))
	var cd time.Duration
	if err == nil {
		cd, _ = res.Rules.CrawlDelay(t.Profile.UserAgent) // a long Crawl-delay slows the group; it never fails URLs
		if t.Sitemap == txindex.SitemapProbe {
			t.RobotsSitemaps = res.Rules.Sitemaps()
		}
	}
	o := Outcome{Pol: nothing}
	switch {
	case err != nil:
		o.Verdict, o.Err = Abandon, err
	case res.Fetched && rc.sent:
		o = Outcome{Verdict: Again, Robots: rc.Ex, Pol: rc.outcome(cd)}
	case res.Unreachable != nil:
		o.Verdict, o.Reason = Failed, robotsUnreachable(res.Unreachable)
	case !res.Rules.Allowed(t.Profile.UserAgent, u.RequestURI()):
		o.Verdict, o.Reason = Failed, "robots.txt disallowed"
	default:
		return cd, Outcome{}, false
	}
	return 0, o, true
}

// robotsUnreachable is the reason of a URL whose robots.txt could not be
// had: the SSRF guard's refusal, or the network error or status, briefly.
func robotsUnreachable(err error) string {
	var errno syscall.Errno
	var dns *net.DNSError
	switch {
	case errors.Is(err, netguard.ErrForbidden):
		return netguard.Reason
	case errors.As(err, &dns):
		return "robots.txt unreachable: dns: " + dns.Err
	case errors.As(err, &errno):
		return "robots.txt unreachable: " + errno.Error()
	case errors.Is(err, context.DeadlineExceeded) || politeness.ClassifyError(err) == politeness.ErrorTimeout:
		return "robots.txt unreachable: timeout"
	}
	return err.Error()
}

// get requests the page and decides its outcome.
func (f *Fetcher) get(ctx context.Context, t *queueing.Task, u *url.URL, crawlDelay time.Duration) Outcome {
	start := time.Now()
	ex, err := f.httpGet(ctx, t, u)
	f.fetched.Add(1)
	if f.log.Enabled(ctx, slog.LevelDebug) {
		f.logFetch(ctx, t.CrawlID, t.URL, ex, time.Since(start), err)
	}
	o := Outcome{Pol: politeness.Outcome{Duration: time.Since(start), CrawlDelay: crawlDelay}}
	if err != nil {
		o.Pol.Err, o.Pol.ErrKind = err, politeness.ClassifyError(err)
	} else {
		o.Pol.Status, o.Pol.RetryAfter = ex.Status, ex.retryAfter
	}
	lastAttempt := t.Attempt+1 >= f.cfg.FetchAttempts
	switch {
	case err != nil && ctx.Err() != nil:
		o.Verdict, o.Err, o.Pol = Abandon, ctx.Err(), nothing
	case errors.Is(err, netguard.ErrForbidden):
		o.Verdict, o.Reason = Failed, netguard.Reason
	case err != nil && !lastAttempt:
		o.Verdict = Retry
	case err != nil:
		o.Verdict, o.Reason = Failed, "fetch: "+err.Error()
	case (ex.Status == http.StatusTooManyRequests || ex.Status == http.StatusServiceUnavailable) && !lastAttempt:
		o.Verdict = Retry
	default:
		o.Verdict, o.Ex = Fetched, ex
		o.Revisit = f.unchanged(ctx, t, ex)
		// A start host's /sitemap.xml that answers an error goes to the
		// crawler all the same: it reads the robots.txt Sitemap: lines the
		// probe carries and settles it (a 4xx is no failure).
		probeError := t.Sitemap == txindex.SitemapProbe && ex.Status >= 400
		if (ex.Status < 200 || ex.Status >= 400) && !probeError && o.Revisit == nil {
			o.Reason = fmt.Sprintf("http %d", ex.Status)
		}
		if o.Revisit == nil && o.Reason == "" {
			f.render(ctx, t, &o)
		}
	}
	return o
}

// Exchange is one HTTP request and its raw response, as it goes into WARC.
type Exchange struct {
	URL         string
	Date        time.Time
	IP          string
	Request     []byte // request line and headers as sent
	Response    []byte // status line, headers and raw (still encoded) body
	Truncated   bool
	BodyBytes   int64 // the body as kept, still content-encoded
	Status      int
	ContentType string
	retryAfter  string // the Retry-After header, for the politeness scheduler
	// etag and lastModified are the response's validators, which a
	// continuous crawl's next fetch sends back.
	ETag, LastModified string
	Elapsed            time.Duration // from sending the request to the end of the body
}

// httpGet GETs u once, without following redirects, and keeps at most
// MaxBodyBytes of the body exactly as the server sent it (a sitemap: at
// least sitemap.MaxBytes, the protocol's limit).
func (f *Fetcher) httpGet(ctx context.Context, t *queueing.Task, u *url.URL) (*Exchange, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.FetchTimeout)
	defer cancel()
	ex := &Exchange{URL: t.URL}
	req, err := http.NewRequestWithContext(withPeerIP(ctx, ex), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	limit := f.cfg.MaxBodyBytes
	if t.Sitemap != "" {
		limit = max(limit, sitemap.MaxBytes)
	}
	req.Header.Set("User-Agent", t.Profile.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8")
	req.Header.Set("Accept-Encoding", httpbody.AcceptEncoding)
	setConditional(req, t)
	ex.Date = time.Now().UTC()
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	budget := f.bodies
	if t.Sitemap != "" {
		budget = nil // up to 50 MiB, one per sitemap: not counted
	}
	// The body's share of the budget is the task's until the worker has
	// written the body into the segment (Loader.work): bodies waiting for
	// the segment are held in memory too.
	br := budget.Reader(ctx, io.LimitReader(resp.Body, limit+1))
	kept := false
	defer func() {
		if !kept {
			br.Release()
		}
	}()
	// The body is read once, into the slice that becomes the response
	// record's block, behind room for the head (written once the body's
	// length is known): no pooled buffer and no copy of the body.
	room := headRoom(resp, limit)
	buf, err := readBody(br, room, resp.ContentLength, limit)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	ex.Elapsed = time.Since(ex.Date)
	body := buf[room:]
	if int64(len(body)) > limit {
		body, ex.Truncated = body[:limit], true
	}
	f.met.Response(metrics.KindPage, ex.Elapsed, len(body))
	ex.fill(req, resp, placeHead(resp, buf[:room+len(body)], room), len(body))
	kept, t.BodyShare = true, br
	return ex, nil
}

// freeBodyBytes of each body are read without taking any of the body
// budget: most pages are smaller, and never wait.
const freeBodyBytes = 256 << 10

// firstBodyBytes is the room a body of unknown length starts with.
const firstBodyBytes = 32 << 10

// readBody reads at most limit+1 bytes of r into one slice, after room
// bytes left free for the response head, and returns the slice (its length
// is room plus the bytes read). size is the announced length of the body
// (-1 if unknown).
//
// The slice grows as bytes arrive (growbuf), so that a body is not
// allocated before it is read, nor before the body budget lets it be: a
// body at the limit costs one allocation of its size when its length is
// announced, and less than twice its size otherwise, where a growing
// buffer and a copy into an exact slice took two and five times.
func readBody(r io.Reader, room int, size, limit int64) ([]byte, error) {
	// Unknown length: head and first room in one 32 KiB size class.
	most, first, announced := limit+1, int64(max(firstBodyBytes-room, firstBodyBytes/2)), size >= 0
	if announced {
		most = min(size+1, most) // +1: the read that sees the end has room
		first = freeBodyBytes
	}
	first = min(first, most)
	buf, err := growbuf.ReadAll(make([]byte, room, room+int(first)), r, first, most, announced)
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// withPeerIP makes the requests of ctx note the address they connect to.
func withPeerIP(ctx context.Context, ex *Exchange) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		if a, ok := ci.Conn.RemoteAddr().(*net.TCPAddr); ok {
			ex.IP = a.IP.String()
		}
	}})
}

// fill sets ex from a response, its status line, headers and (possibly
// truncated) body as one slice (response), and the body's length.
func (ex *Exchange) fill(req *http.Request, resp *http.Response, response []byte, bodyLen int) {
	ex.Status = resp.StatusCode
	ex.BodyBytes = int64(bodyLen)
	ex.ContentType = resp.Header.Get("Content-Type")
	ex.retryAfter = resp.Header.Get("Retry-After")
	ex.ETag, ex.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	ex.Request = dumpRequest(req)
	ex.Response = response
}

func dumpRequest(req *http.Request) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", req.URL.RequestURI(), req.URL.Host)
	_ = req.Header.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// dumpResponse returns the response's status line, headers and body in
// one slice of exactly its size (body may be a reused buffer: it is copied).
func dumpResponse(resp *http.Response, body []byte) []byte {
	head := appendHead(make([]byte, 0, 512), resp, len(body))
	out := make([]byte, 0, len(head)+len(body))
	out = append(out, head...)
	return append(out, body...)
}

// appendHead appends the response's status line and headers, as stored
// with a body of bodyLen bytes, to dst.
func appendHead(dst []byte, resp *http.Response, bodyLen int) []byte {
	w := &sliceWriter{b: dst}
	fmt.Fprintf(w, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
	h := resp.Header.Clone()
	// The body is stored as received, so the framing headers must describe it.
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", strconv.Itoa(bodyLen))
	_ = h.Write(w)
	return append(w.b, "\r\n"...)
}

// headRoom returns at least the length of the head appendHead writes for
// resp with a body of at most limit bytes, without writing it: the room a
// body is read behind.
func headRoom(resp *http.Response, limit int64) int {
	n := len("HTTP/. \r\n") + 2*20 + len(resp.Status)
	for k, vs := range resp.Header {
		for _, v := range vs { // Header.Write writes at most this per value
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n + len("Content-Length: \r\n") + len(strconv.FormatInt(limit, 10)) + len("\r\n")
}

// placeHead writes resp's head into the room before the body in buf
// (buf[room:] is the body) and returns head and body as one slice, without
// copying the body.
func placeHead(resp *http.Response, buf []byte, room int) []byte {
	body := buf[room:]
	head := appendHead(buf[:0:room], resp, len(body))
	if len(head) > room { // headRoom is an upper bound: never, but stay correct
		out := make([]byte, 0, len(head)+len(body))
		return append(append(out, head...), body...)
	}
	start := room - len(head)
	copy(buf[start:room], head)
	return buf[start:]
}

// sliceWriter is an io.Writer appending to a slice.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// WriteString spares http.Header.Write a conversion per string.
func (w *sliceWriter) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

// robotsCapture receives what the robots.txt fetch of one lease did: the
// cache calls the fetcher with the context of the Lookup that fetches.
type robotsCapture struct {
	sent     bool // a request went out (the address was allowed)
	Ex       *Exchange
	duration time.Duration
	err      error
}

type robotsCaptureKey struct{}

// outcome is the politeness outcome of the robots.txt request.
func (rc *robotsCapture) outcome(crawlDelay time.Duration) politeness.Outcome {
	o := politeness.Outcome{Duration: rc.duration, CrawlDelay: crawlDelay, Err: rc.err, ErrKind: politeness.ClassifyError(rc.err)}
	if rc.Ex != nil {
		o.Status, o.RetryAfter = rc.Ex.Status, rc.Ex.retryAfter
	}
	return o
}

const maxRobotsBytes = robots.MaxSize

// fetchRobots is the robots.Cache's fetcher: it GETs robotsURL (following
// up to five redirects), and notes the request and the final exchange in
// the lease's robotsCapture for politeness and the WARC segment.
func (f *Fetcher) fetchRobots(ctx context.Context, c *http.Client, robotsURL string) (int, []byte, error) {
	rc, _ := ctx.Value(robotsCaptureKey{}).(*robotsCapture)
	if rc == nil {
		rc = &robotsCapture{}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ex := &Exchange{URL: robotsURL}
	req, err := http.NewRequestWithContext(withPeerIP(ctx, ex), http.MethodGet, robotsURL, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("build robots request: %w", err)
	}
	req.Header.Set("User-Agent", contracts.DefaultUserAgent)
	start := time.Now()
	ex.Date = start.UTC()
	resp, err := c.Do(req)
	rc.sent = !errors.Is(err, netguard.ErrForbidden)
	if rc.sent {
		f.fetched.Add(1)
	}
	if err != nil {
		rc.duration, rc.err = time.Since(start), err
		f.met.Robots(metrics.RobotsError)
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRobotsBytes))
	rc.duration = time.Since(start)
	if err != nil {
		rc.err = err
		f.met.Robots(metrics.RobotsError)
		return 0, nil, fmt.Errorf("read robots.txt: %w", err)
	}
	f.met.Response(metrics.KindRobots, rc.duration, len(body))
	f.met.Robots(metrics.RobotsResultOf(resp.StatusCode))
	ex.URL = resp.Request.URL.String()
	ex.fill(resp.Request, resp, dumpResponse(resp, body), len(body))
	rc.Ex = ex
	if f.log.Enabled(ctx, slog.LevelDebug) {
		f.logFetch(ctx, "", ex.URL, ex, rc.duration, nil)
	}
	return resp.StatusCode, body, nil
}

// Metric is the outcome's label in gridcrawl_loader_urls_total.
func (o Outcome) Metric() metrics.Outcome {
	switch o.Verdict {
	case Fetched:
		switch s := o.Ex.Status; {
		case o.Revisit != nil:
			return metrics.OutcomeUnchanged
		case o.RenderFailed:
			return metrics.OutcomeRenderFailed
		case o.Reason != "":
			return metrics.OutcomeHTTPError
		case s >= 300 && s < 400:
			return metrics.OutcomeRedirected
		}
		return metrics.OutcomeFetched
	case Failed:
		switch {
		case o.Reason == "robots.txt disallowed":
			return metrics.OutcomeRobotsDisallowed
		case o.Reason == netguard.Reason:
			return metrics.OutcomeAddressNotAllowed
		case o.Reason == "cancelled":
			return metrics.OutcomeCancelled
		case o.Reason == "invalid url":
			return metrics.OutcomeInvalidURL
		case strings.HasPrefix(o.Reason, "fetch: "):
			return metrics.OutcomeFetchError
		case strings.HasPrefix(o.Reason, "robots.txt"):
			return metrics.OutcomeRobotsUnreachable
		}
		return metrics.OutcomeOtherFailure
	case Retired:
		return metrics.OutcomeRetired
	case Skip:
		return metrics.OutcomeSkipped
	case Republish:
		return metrics.OutcomeRepublished
	case Retry:
		return metrics.OutcomeRetry
	case Again:
		return metrics.OutcomeRobotsFetch
	case Paused:
		return metrics.OutcomePaused
	case Lost:
		return metrics.OutcomeLost
	}
	return metrics.OutcomeAbandoned
}

// logFetch writes the debug line of one request: one per page or
// robots.txt fetched (crawl_id is empty for robots.txt, which serves every
// crawl of its origin).
func (f *Fetcher) logFetch(ctx context.Context, crawlID, url string, ex *Exchange, d time.Duration, err error) {
	if err != nil {
		f.log.LogAttrs(ctx, slog.LevelDebug, "fetch", slog.String("crawl_id", crawlID), slog.String("url", url),
			slog.Int64("duration_ms", d.Milliseconds()), slog.String("err", err.Error()))
		return
	}
	f.log.LogAttrs(ctx, slog.LevelDebug, "fetch", slog.String("crawl_id", crawlID), slog.String("url", url),
		slog.Int("status", ex.Status), slog.Int64("bytes", ex.BodyBytes), slog.Int64("duration_ms", d.Milliseconds()),
		slog.String("ip", ex.IP), slog.Bool("truncated", ex.Truncated))
}

// MediaType returns the media type of a Content-Type value, lower case and
// without parameters.
func MediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
