package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/browser"
	"github.com/gridcrawl/gridcrawl/pkg/httpbody"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// Rendering (part of fetch): a page the profile renders (render "always",
// or "auto" and browser.NeedsRender) is loaded in the headless browser
// after its HTTP fetch, from that answer: the browser asks the server for
// nothing the loader did not fetch itself. Every other request of the page
// (scripts, styles, images, XHR) comes back to the loader (embeds.fetch),
// which makes it through the network guard and archives it like robots.txt;
// the page's own response record stays the HTTP answer, and the DOM after
// the scripts ran is recorded as a conversion record tied to it, with a
// metadata record saying why and what was cut. The crawler parses that DOM.
//
// The page's group stays leased for the whole load, and the delay after it
// follows the profile's rule on the HTTP fetch plus the time in the tab.

// rendering is what rendering a page gave.
type rendering struct {
	Reason string
	Res    *browser.Result
	// status and header are the page's HTTP answer, with which the DOM is
	// handed to a crawler in the process.
	Status int
	Header http.Header
}

// cut is the per-page limits' cuts on one line.
func (r *rendering) cut() string { return strings.Join(r.Res.Cut, "; ") }

// browserFor returns the loader's browser, started with the first page to
// render; the error of a loader that has none stays its answer.
func (l *Loader) browserFor() (*browser.Browser, error) {
	l.browserMu.Lock()
	defer l.browserMu.Unlock()
	if l.browser == nil && l.browserErr == nil {
		var noSandbox *bool
		if l.cfg.BrowserNoSandbox {
			noSandbox = &l.cfg.BrowserNoSandbox
		}
		l.browser, l.browserErr = browser.New(browser.Config{NoSandbox: noSandbox,
			Path: l.cfg.Chromium, Tabs: l.cfg.RenderTabs, RestartPages: l.cfg.BrowserRestartPages,
			MaxMemory: l.cfg.BrowserMaxMemory, JSHeapMB: l.cfg.BrowserJSHeapMB, Log: l.log,
		})
		if l.browserErr != nil {
			l.log.Error("no browser: pages to render fail", "err", l.browserErr)
		}
	}
	return l.browser, l.browserErr
}

// renderCounts counts the loader's renderings, for its frontier report.
type renderCounts struct {
	rendered, cut, failed, nanos atomic.Int64
}

// frontierBrowser is the browser's part of the frontier report; nil until
// a page was to be rendered.
func (l *Loader) frontierBrowser() *contracts.FrontierBrowser {
	c := &l.renders
	n, failed := c.rendered.Load(), c.failed.Load()
	if n == 0 && failed == 0 {
		return nil
	}
	s := l.browserStats()
	fb := &contracts.FrontierBrowser{Rendered: n, Cut: c.cut.Load(), Failed: failed, TabsInUse: s.TabsInUse,
		Restarts: s.Restarts, Memory: s.Memory}
	if fb.Restarts == nil {
		fb.Restarts = map[string]int64{}
	}
	if n > 0 {
		fb.RenderMS = float64(c.nanos.Load()) / float64(n) / 1e6
	}
	return fb
}

// browserStats is the browser's snapshot for the metrics.
func (l *Loader) browserStats() metrics.BrowserStats {
	l.browserMu.Lock()
	b := l.browser
	l.browserMu.Unlock()
	if b == nil {
		return metrics.BrowserStats{}
	}
	s := b.Stats()
	return metrics.BrowserStats{TabsInUse: s.TabsInUse, Restarts: s.Restarts, Memory: s.Memory, Escaped: s.Escaped}
}

// closeBrowser stops the browser, if one was started.
func (l *Loader) closeBrowser() {
	l.browserMu.Lock()
	defer l.browserMu.Unlock()
	if l.browser != nil {
		l.browser.Close()
	}
}

// renderReason says why the page of ex is to be rendered ("" when it is
// not) and returns its decoded answer for the browser.
func (l *Loader) renderReason(t *task, ex *exchange) (string, *browser.Response) {
	if t.Sitemap != "" || ex.Status != http.StatusOK || ex.Truncated {
		return "", nil
	}
	if mt := mediaType(ex.ContentType); mt != "text/html" && mt != "application/xhtml+xml" {
		return "", nil
	}
	mode := t.Profile.RenderFor(t.Host)
	if mode == contracts.RenderNever {
		return "", nil
	}
	status, header, body, err := warc.ParseHTTPResponse(ex.Response)
	if err != nil {
		return "", nil
	}
	if body, err = httpbody.Decode(header, body, l.cfg.MaxBodyBytes); err != nil {
		return "", nil // the crawler fails it as it would any page that does not decode
	}
	main := &browser.Response{Status: status, Header: header, Body: body}
	if mode == contracts.RenderAlways {
		return "always", main
	}
	return browser.NeedsRender(body), main
}

// render renders the page of o.Ex when the profile says so, and sets o
// from the result: its rendering, or a failure with the reason.
func (l *Loader) render(ctx context.Context, t *task, o *outcome) {
	reason, main := l.renderReason(t, o.Ex)
	if reason == "" {
		return
	}
	fail := func(why string) {
		o.Reason, o.RenderFailed = why, true
		l.met.Rendered(metrics.RenderFailed, 0)
		l.renders.failed.Add(1)
	}
	b, err := l.browserFor()
	if err != nil {
		fail("render: no browser: " + err.Error())
		return
	}
	e := &embeds{l: l, t: t, perGroup: map[string]int{}}
	res, err := b.Render(ctx, browser.Page{
		URL: t.URL, UserAgent: t.Profile.UserAgent, Main: main, Fetch: e.fetch,
		Timeout: l.cfg.RenderTimeout, IdleWait: l.cfg.RenderIdle,
		MaxRequests: l.cfg.RenderMaxRequests, MaxBytes: l.cfg.RenderMaxBytes, TabWait: l.tabWait(),
	})
	switch {
	case err != nil && ctx.Err() != nil:
		o.Verdict, o.Err, o.Ex, o.Pol = vAbandon, ctx.Err(), nil, nothing
	case errors.Is(err, browser.ErrNoTab) && t.Attempt+1 < l.cfg.FetchAttempts:
		// Every tab busy for longer than a page may take: fetched again
		// later, so that the lease never outlasts the group's busy timeout.
		o.Verdict, o.Ex = vRetry, nil
	case errors.Is(err, browser.ErrNoTab):
		fail(fmt.Sprintf("render: no tab free within %s", l.tabWait()))
	case err != nil:
		why := err.Error()
		if !strings.HasPrefix(why, "render: ") {
			why = "render: " + why
		}
		fail(why)
	default:
		o.Render = &rendering{Reason: reason, Res: res, Status: main.Status, Header: main.Header}
		o.Pol.Duration += res.Duration
		r := metrics.RenderOK
		if len(res.Cut) > 0 {
			r = metrics.RenderCut
			l.renders.cut.Add(1)
		}
		l.met.Rendered(r, res.Duration)
		l.renders.rendered.Add(1)
		l.renders.nanos.Add(int64(res.Duration))
	}
}

// sharedType reports the resource types that the pages of a site share
// (scripts, styles, images, fonts...), whose answers the embed cache keeps;
// the answers to a page's own XHR and fetch() calls and frames' documents
// are the page's, and are not kept.
func sharedType(t string) bool {
	switch t {
	case "Script", "Stylesheet", "Image", "Font", "Media", "Manifest", "TextTrack", "Other":
		return true
	}
	return false
}

// tabWait bounds a page's wait for a tab: two pages' time, so that the HTTP
// fetch, the wait and the rendering stay within the group's busy timeout
// (see New).
func (l *Loader) tabWait() time.Duration { return 2 * l.cfg.RenderTimeout }

// embeds makes the requests of one rendered page.
type embeds struct {
	l *Loader
	t *task

	mu       sync.Mutex
	perGroup map[string]int // requests to other groups, by group
}

// fetch makes one request of the page's browser tab: through the network
// guard, archived, counted in its host's group, refused beyond the
// page's share of another group and, with render_robots "all", where
// robots.txt disallows it.
func (e *embeds) fetch(ctx context.Context, r *browser.Request) (*browser.Response, error) {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &browser.Refusal{Reason: "not an http(s) URL"}
	}
	host := urlnorm.HostPort(u)
	group := e.l.group(urlnorm.Host(u)) // as tasks group their hosts
	if group != e.t.Group {
		e.mu.Lock()
		e.perGroup[group]++
		n := e.perGroup[group]
		e.mu.Unlock()
		if n > e.l.cfg.RenderGroupRequests {
			return nil, &browser.Refusal{Reason: fmt.Sprintf("the page's limit of %d requests to another group", e.l.cfg.RenderGroupRequests)}
		}
	}
	prof := e.t.Profile
	if prof.RenderRobots == contracts.RenderRobotsAll && prof.Politeness.Robots != contracts.RobotsIgnore {
		res, err := e.l.robots.Lookup(ctx, u.Scheme, host)
		if err != nil || res.Unreachable != nil || !res.Rules.Allowed(prof.UserAgent, u.RequestURI()) {
			return nil, &browser.Refusal{Reason: "robots.txt disallowed"}
		}
	}
	cacheable := r.Method == http.MethodGet && sharedType(r.Type)
	if cacheable {
		if resp, ok := e.l.embedCache.get(e.t.CrawlID, r.URL); ok {
			return resp, nil // requested and archived for an earlier page
		}
	}
	ex, header, body, err := e.l.embedGet(ctx, e.t, u, r)
	if errors.Is(err, netguard.ErrForbidden) {
		return nil, &browser.Refusal{Reason: netguard.Reason}
	}
	if err != nil {
		return nil, err
	}
	e.l.rec.archive(ex, e.t.CrawlID)
	e.l.sched.Embedded(group, ex.BodyBytes)
	body, err = httpbody.Decode(header, body, e.l.cfg.MaxBodyBytes)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.URL, err)
	}
	resp := &browser.Response{Status: ex.Status, Header: header, Body: body}
	if cacheable && !ex.Truncated {
		e.l.embedCache.put(e.t.CrawlID, r.URL, resp)
	}
	return resp, nil
}

// embedGet makes one request of a rendered page, with the browser's
// headers but the profile's User-Agent and the loader's Accept-Encoding,
// and keeps its exchange for the WARC segment; it returns the exchange, the
// response's headers and its body as received (still content-encoded).
func (l *Loader) embedGet(ctx context.Context, t *task, u *url.URL, r *browser.Request) (*exchange, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.FetchTimeout)
	defer cancel()
	ex := &exchange{URL: r.URL}
	req, err := http.NewRequestWithContext(withPeerIP(ctx, ex), r.Method, u.String(), nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Connection", "Accept-Encoding", "Content-Length", "Transfer-Encoding", "Upgrade":
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	req.Header.Set("User-Agent", t.Profile.UserAgent)
	req.Header.Set("Accept-Encoding", httpbody.AcceptEncoding)
	ex.Date = time.Now().UTC()
	resp, err := l.embedClient.Do(req)
	if err != nil {
		return nil, nil, nil, err
	}
	defer resp.Body.Close()
	limit := min(l.cfg.MaxBodyBytes, l.cfg.RenderMaxBytes)
	room := headRoom(resp, limit)
	buf, err := readBody(io.LimitReader(resp.Body, limit+1), room, resp.ContentLength, limit)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read body: %w", err)
	}
	ex.Elapsed = time.Since(ex.Date)
	body := buf[room:]
	if int64(len(body)) > limit {
		body, ex.Truncated = body[:limit], true
	}
	l.met.Response(metrics.KindEmbed, ex.Elapsed, len(body))
	ex.fill(req, resp, placeHead(resp, buf[:room+len(body)], room), len(body))
	return ex, resp.Header, body, nil
}

// renderedRecords returns the records of a rendered page: its DOM as a
// conversion record of the response respID, and a metadata record of how
// it was rendered.
func renderedRecords(url string, date time.Time, respID string, r *rendering) (dom, meta warc.Record) {
	dom = warc.NewConversionRecord(url, date, respID, "text/html; charset=utf-8", r.Res.DOM)
	fields := []string{"render-reason", r.Reason, "render-duration-ms", fmt.Sprint(r.Res.Duration.Milliseconds()),
		"render-requests", fmt.Sprint(r.Res.Requests), "render-refused", fmt.Sprint(r.Res.Refused),
		"render-bytes", fmt.Sprint(r.Res.Bytes), "render-final-url", r.Res.URL}
	for _, c := range r.Res.Cut {
		fields = append(fields, "render-cut", c)
	}
	for _, n := range r.Res.Navigations {
		fields = append(fields, "render-navigation-refused", n)
	}
	meta = warc.NewMetadataRecord(url, date, warc.RecordID(dom), fields...)
	return dom, meta
}

// renderedResponse is what the crawler parses of a rendered page handed
// over in the process: the response's status line and headers, with the
// DOM as its body.
func renderedResponse(status int, header http.Header, dom []byte) []byte {
	h := header.Clone()
	h.Del("Content-Encoding")
	h.Del("Transfer-Encoding")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", fmt.Sprint(len(dom)))
	w := &sliceWriter{b: make([]byte, 0, 512+len(dom))}
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(w)
	w.b = append(w.b, "\r\n"...)
	return append(w.b, dom...)
}
