package fetcher

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
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
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

// Rendering is what rendering a page gave.
type Rendering struct {
	Reason string
	Res    *browser.Result
	// status and header are the page's HTTP answer, with which the DOM is
	// handed to a crawler in the process.
	Status int
	Header http.Header
}

// Cut is the per-page limits' cuts on one line.
func (r *Rendering) Cut() string { return strings.Join(r.Res.Cut, "; ") }

// browserFor returns the loader's browser, started with the first page to
// render; the error of a loader that has none stays its answer.
func (f *Fetcher) browserFor() (*browser.Browser, error) {
	f.browserMu.Lock()
	defer f.browserMu.Unlock()
	if f.browser == nil && f.browserErr == nil {
		var noSandbox *bool
		if f.cfg.BrowserNoSandbox {
			noSandbox = &f.cfg.BrowserNoSandbox
		}
		f.browser, f.browserErr = browser.New(browser.Config{NoSandbox: noSandbox,
			Path: f.cfg.Chromium, Tabs: f.cfg.RenderTabs, RestartPages: f.cfg.BrowserRestartPages,
			MaxMemory: f.cfg.BrowserMaxMemory, JSHeapMB: f.cfg.BrowserJSHeapMB, Log: f.log,
		})
		if f.browserErr != nil {
			f.log.Error("no browser: pages to render fail", "err", f.browserErr)
		}
	}
	return f.browser, f.browserErr
}

// renderCounts counts the loader's renderings, for its frontier report.
type renderCounts struct {
	rendered, cut, failed, nanos atomic.Int64
}

// FrontierBrowser is the browser's part of the frontier report; nil until
// a page was to be rendered.
func (f *Fetcher) FrontierBrowser() *contracts.FrontierBrowser {
	c := &f.renders
	n, failed := c.rendered.Load(), c.failed.Load()
	if n == 0 && failed == 0 {
		return nil
	}
	s := f.BrowserStats()
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

// BrowserStats is the browser's snapshot for the metrics.
func (f *Fetcher) BrowserStats() metrics.BrowserStats {
	f.browserMu.Lock()
	b := f.browser
	f.browserMu.Unlock()
	if b == nil {
		return metrics.BrowserStats{}
	}
	s := b.Stats()
	return metrics.BrowserStats{TabsInUse: s.TabsInUse, Restarts: s.Restarts, Memory: s.Memory, Escaped: s.Escaped}
}

// Close stops the browser, if one was started.
func (f *Fetcher) Close() {
	f.browserMu.Lock()
	defer f.browserMu.Unlock()
	if f.browser != nil {
		f.browser.Close()
	}
}

// renderReason says why the page of ex is to be rendered ("" when it is
// not) and returns its decoded answer for the browser.
func (f *Fetcher) renderReason(t *queueing.Task, ex *Exchange) (string, *browser.Response) {
	if t.Sitemap != "" || ex.Status != http.StatusOK || ex.Truncated {
		return "", nil
	}
	if mt := MediaType(ex.ContentType); mt != "text/html" && mt != "application/xhtml+xml" {
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
	if body, err = httpbody.Decode(header, body, f.cfg.MaxBodyBytes); err != nil {
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
func (f *Fetcher) render(ctx context.Context, t *queueing.Task, o *Outcome) {
	reason, main := f.renderReason(t, o.Ex)
	if reason == "" {
		return
	}
	fail := func(why string) {
		o.Reason, o.RenderFailed = why, true
		f.met.Rendered(metrics.RenderFailed, 0)
		f.renders.failed.Add(1)
	}
	b, err := f.browserFor()
	if err != nil {
		fail("render: no browser: " + err.Error())
		return
	}
	e := &embeds{f: f, t: t, perGroup: map[string]int{}}
	res, err := b.Render(ctx, browser.Page{
		URL: t.URL, UserAgent: t.Profile.UserAgent, Main: main, Fetch: e.fetch,
		Timeout: f.cfg.RenderTimeout, IdleWait: f.cfg.RenderIdle,
		MaxRequests: f.cfg.RenderMaxRequests, MaxBytes: f.cfg.RenderMaxBytes, TabWait: f.tabWait(),
	})
	switch {
	case err != nil && ctx.Err() != nil:
		o.Verdict, o.Err, o.Ex, o.Pol = Abandon, ctx.Err(), nil, nothing
	case errors.Is(err, browser.ErrNoTab) && t.Attempt+1 < f.cfg.FetchAttempts:
		// Every tab busy for longer than a page may take: fetched again
		// later, so that the lease never outlasts the group's busy timeout.
		o.Verdict, o.Ex = Retry, nil
	case errors.Is(err, browser.ErrNoTab):
		fail(fmt.Sprintf("render: no tab free within %s", f.tabWait()))
	case err != nil:
		why := err.Error()
		if !strings.HasPrefix(why, "render: ") {
			why = "render: " + why
		}
		fail(why)
	default:
		o.Render = &Rendering{Reason: reason, Res: res, Status: main.Status, Header: main.Header}
		o.Pol.Duration += res.Duration
		r := metrics.RenderOK
		if len(res.Cut) > 0 {
			r = metrics.RenderCut
			f.renders.cut.Add(1)
		}
		f.met.Rendered(r, res.Duration)
		f.renders.rendered.Add(1)
		f.renders.nanos.Add(int64(res.Duration))
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
func (f *Fetcher) tabWait() time.Duration { return 2 * f.cfg.RenderTimeout }

// embeds makes the requests of one rendered page.
type embeds struct {
	f *Fetcher
	t *queueing.Task

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
	group := e.f.deps.Tasks.Group(urlnorm.Host(u)) // as tasks group their hosts
	if group != e.t.Group {
		e.mu.Lock()
		e.perGroup[group]++
		n := e.perGroup[group]
		e.mu.Unlock()
		if n > e.f.cfg.RenderGroupRequests {
			return nil, &browser.Refusal{Reason: fmt.Sprintf("the page's limit of %d requests to another group", e.f.cfg.RenderGroupRequests)}
		}
	}
	prof := e.t.Profile
	if prof.RenderRobots == contracts.RenderRobotsAll && prof.Politeness.Robots != contracts.RobotsIgnore {
		res, err := e.f.robots.Lookup(ctx, u.Scheme, host)
		if err != nil || res.Unreachable != nil || !res.Rules.Allowed(prof.UserAgent, u.RequestURI()) {
			return nil, &browser.Refusal{Reason: "robots.txt disallowed"}
		}
	}
	cacheable := r.Method == http.MethodGet && sharedType(r.Type)
	if cacheable {
		if resp, ok := e.f.embedCache.get(e.t.CrawlID, r.URL); ok {
			return resp, nil // requested and archived for an earlier page
		}
	}
	ex, header, body, err := e.f.embedGet(ctx, e.t, u, r)
	if errors.Is(err, netguard.ErrForbidden) {
		return nil, &browser.Refusal{Reason: netguard.Reason}
	}
	if err != nil {
		return nil, err
	}
	e.f.deps.Archive(ex, e.t.CrawlID)
	e.f.deps.Tasks.Embedded(group, ex.BodyBytes)
	body, err = httpbody.Decode(header, body, e.f.cfg.MaxBodyBytes)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.URL, err)
	}
	resp := &browser.Response{Status: ex.Status, Header: header, Body: body}
	if cacheable && !ex.Truncated {
		e.f.embedCache.put(e.t.CrawlID, r.URL, resp)
	}
	return resp, nil
}

// embedGet makes one request of a rendered page, with the browser's
// headers but the profile's User-Agent and the loader's Accept-Encoding,
// and keeps its exchange for the WARC segment; it returns the exchange, the
// response's headers and its body as received (still content-encoded).
func (f *Fetcher) embedGet(ctx context.Context, t *queueing.Task, u *url.URL, r *browser.Request) (*Exchange, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.FetchTimeout)
	defer cancel()
	ex := &Exchange{URL: r.URL}
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
	resp, err := f.embedClient.Do(req)
	if err != nil {
		return nil, nil, nil, err
	}
	defer resp.Body.Close()
	limit := min(f.cfg.MaxBodyBytes, f.cfg.RenderMaxBytes)
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
	f.met.Response(metrics.KindEmbed, ex.Elapsed, len(body))
	ex.fill(req, resp, placeHead(resp, buf[:room+len(body)], room), len(body))
	return ex, resp.Header, body, nil
}

// Response is what the crawler parses of a rendered page handed over in
// the process: the page's HTTP answer's status line and headers, with the
// DOM as its body.
func (r *Rendering) Response() []byte {
	status, dom := r.Status, r.Res.DOM
	h := r.Header.Clone()
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
