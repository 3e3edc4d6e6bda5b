package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"golang.org/x/net/html/charset"
)

// Request is one request of the browser, for the caller to make.
type Request struct {
	URL    string
	Method string
	// Header holds the headers the browser would send (its User-Agent
	// replaced by the page's).
	Header http.Header
	// Type is the DevTools resource type: Document (a frame's), Script,
	// Stylesheet, Image, XHR, Fetch, Font, Media, Other...
	Type string
}

// Response is the caller's answer to a Request: what the browser gets.
type Response struct {
	Status int
	Header http.Header
	// Body is the body as the browser reads it: without content coding.
	Body []byte
}

// Refusal is an error of a Fetch function that refuses a request (a
// guard, robots.txt): the browser sees an access denied.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// Page is one page to render.
type Page struct {
	URL       string
	UserAgent string
	// Main answers the page's own navigation: the loader's HTTP answer,
	// which the browser renders without a second request.
	Main *Response
	// Fetch makes every other request of the page. It is called from
	// several goroutines, never after Render returns.
	Fetch func(ctx context.Context, r *Request) (*Response, error)
	// Timeout bounds the whole load (default 20 s); IdleWait is how long
	// the network must be quiet after the load event (default 500 ms).
	Timeout, IdleWait time.Duration
	// MaxRequests and MaxBytes bound the requests made for the page and
	// their body bytes (defaults 300 and 20 MiB); MaxDOMBytes the
	// rendered DOM kept (default 8 MiB).
	MaxRequests int
	MaxBytes    int64
	MaxDOMBytes int
	// Fetchers is how many of the page's requests are made at once
	// (default 6, a browser's connections per host).
	Fetchers int
	// TabWait bounds the wait for a free tab (0: no bound): then Render
	// returns ErrNoTab.
	TabWait time.Duration
}

func (p *Page) withDefaults() {
	if p.Timeout <= 0 {
		p.Timeout = 20 * time.Second
	}
	if p.IdleWait <= 0 {
		p.IdleWait = 500 * time.Millisecond
	}
	if p.MaxRequests <= 0 {
		p.MaxRequests = 300
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = 20 << 20
	}
	if p.MaxDOMBytes <= 0 {
		p.MaxDOMBytes = 8 << 20
	}
	if p.Fetchers <= 0 {
		p.Fetchers = 6
	}
}

// Result is a rendered page.
type Result struct {
	// DOM is the document serialized after scripts ran.
	DOM   []byte
	Title string
	// URL is the tab's URL at the end (scripts may change it with the
	// history API; navigations away are not followed).
	URL string
	// Requests counts the page's requests the caller answered, Refused
	// those it refused, and Bytes the body bytes of the answers.
	Requests, Refused int
	Bytes             int64
	// Cut says what a limit cut, one line each ("" when nothing was).
	Cut []string
	// Navigations are the URLs scripts tried to take the tab to.
	Navigations []string
	Duration    time.Duration
}

// snapshotWait bounds taking the DOM of a page once it is done.
const snapshotWait = 15 * time.Second

// Render failures.
var (
	ErrCrashed      = errors.New("render: the tab crashed")
	ErrUnresponsive = errors.New("render: the tab did not answer")
	ErrNoTab        = errors.New("render: no tab free")
)

// Render loads p in a new tab and returns its DOM after scripts ran and
// the network went quiet, or after p.Timeout with what the scripts made so
// far (the cut says so).
func (b *Browser) Render(ctx context.Context, p Page) (*Result, error) {
	p.withDefaults()
	if p.Main == nil {
		return nil, errors.New("render: no answer for the page")
	}
	var waited <-chan time.Time
	if p.TabWait > 0 {
		tw := time.NewTimer(p.TabWait)
		defer tw.Stop()
		waited = tw.C
	}
	select {
	case b.tabs <- struct{}{}:
	case <-waited:
		return nil, ErrNoTab
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.tabs }()
	inst, err := b.acquire()
	if err != nil {
		return nil, err
	}
	defer b.release(inst)
	b.rendered.Add(1)
	b.inUse.Add(1)
	defer b.inUse.Add(-1)
	start := time.Now()
	res, err := b.load(ctx, inst, &p)
	if res != nil {
		res.Duration = time.Since(start)
	}
	if errors.Is(err, ErrCrashed) && inst.ctx.Err() != nil {
		err = fmt.Errorf("%w (the browser exited)", err)
	}
	return res, err
}

// tab is one page's load.
type tab struct {
	p       *Page
	ctx     context.Context // the tab's; cancelled when Render returns
	mainFrm cdp.FrameID
	// fetchCtx is the context of the caller's Fetch calls and of the
	// answers given to the tab: cancelled when the page is done, so that a
	// request still being made (a server that never answers), or a tab
	// that takes no answer, does not hold Render past its time.
	fetchCtx context.Context

	mu         sync.Mutex
	cond       *sync.Cond
	queue      []*fetch.EventRequestPaused
	stopped    bool
	mainServed bool
	blocked    bool // the tab blocks every request (a limit was reached)
	pending    int  // requests within the limits, not yet answered
	asked      int  // requests that count against MaxRequests, asked for so far
	last       time.Time
	loaded     bool
	left       bool // a script navigated the tab away
	crashed    bool
	gone       chan struct{} // closed when the tab crashed
	res        Result
	cuts       map[string]int
}

func (b *Browser) load(ctx context.Context, inst *instance, p *Page) (*Result, error) {
	tctx, cancel := chromedp.NewContext(inst.ctx)
	defer cancel() // closes the tab
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if err := chromedp.Run(tctx); err != nil { // opens the tab
		if inst.ctx.Err() != nil {
			return nil, ErrCrashed
		}
		return nil, fmt.Errorf("render: open tab: %w", err)
	}
	t := &tab{p: p, ctx: tctx, last: time.Now(), cuts: map[string]int{}, gone: make(chan struct{})}
	t.cond = sync.NewCond(&t.mu)
	t.mainFrm = cdp.FrameID(chromedp.FromContext(tctx).Target.TargetID)
	var stopFetches context.CancelFunc
	t.fetchCtx, stopFetches = context.WithCancel(tctx)
	var workers sync.WaitGroup
	for range p.Fetchers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			t.work()
		}()
	}
	defer func() {
		stopFetches()
		t.mu.Lock()
		t.stopped = true
		t.cond.Broadcast()
		t.mu.Unlock()
		workers.Wait() // no Fetch after Render returns
	}()
	chromedp.ListenTarget(tctx, t.event)
	setup := chromedp.Tasks{
		// chromedp enables these for its own node tracking and logs; their
		// events (every style sheet, DOM change and console line) cost the
		// browser work for nothing here.
		css.Disable(),
		dom.Disable(),
		log.Disable(),
		fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}}),
		network.Enable(),
		network.SetCacheDisabled(true),
		inspector.Enable(),
		page.Enable(),
		browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorDeny),
	}
	if p.UserAgent != "" {
		setup = append(setup, emulation.SetUserAgentOverride(p.UserAgent))
	}
	deadline := time.Now().Add(p.Timeout)
	runCtx, runCancel := context.WithDeadline(tctx, deadline)
	defer runCancel()
	err := chromedp.Run(runCtx, setup, chromedp.ActionFunc(func(ctx context.Context) error {
		_, _, errText, _, err := page.Navigate(p.URL).Do(ctx)
		if err == nil && errText != "" {
			err = fmt.Errorf("navigate: %s", errText)
		}
		return err
	}))
	if err != nil && !t.isCrashed() {
		if runCtx.Err() != nil && ctx.Err() == nil {
			t.cut("time", "the page's first answer took longer than "+p.Timeout.String())
		} else {
			return nil, fmt.Errorf("render: %w", err)
		}
	}
	t.wait(deadline)
	if t.isCrashed() {
		return nil, ErrCrashed
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if time.Now().After(deadline) {
		t.cut("time", fmt.Sprintf("still loading after %s: scripts stopped, the DOM taken as it was", p.Timeout))
		// A script that never returns holds the renderer: stop it.
		stopCtx, c := t.bounded(2 * time.Second)
		_ = chromedp.Run(stopCtx, runtime.TerminateExecution())
		c()
	}
	if err := t.snapshot(); err != nil {
		if t.isCrashed() {
			return nil, ErrCrashed
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The tab had the page's time and then did not give its DOM (a
		// flood of requests keeps the browser busy, scripts hold the
		// renderer between their tasks, or the machine is that slow): the
		// page keeps what its server answered, cut, instead of being lost,
		// and the browser is replaced once its other pages are done, in
		// case the tab outlives its closing.
		t.keepServed()
		b.retire(inst, RestartUnresponsive)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	res := t.res
	for _, k := range sortedKeys(t.cuts) {
		res.Cut = append(res.Cut, fmt.Sprintf("%s (%d)", k, t.cuts[k]))
	}
	return &res, nil
}

// wait returns once the page has loaded and its network has been quiet
// for IdleWait, at the deadline, or when the tab crashed.
func (t *tab) wait(deadline time.Time) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case now := <-tick.C:
			t.mu.Lock()
			// A page whose script navigates away is done once its
			// requests are answered: it was leaving.
			done := t.crashed || (t.loaded || t.left) && t.pending == 0 && now.Sub(t.last) >= t.p.IdleWait
			t.mu.Unlock()
			if done || now.After(deadline) {
				return
			}
		}
	}
}

// snapshot takes the DOM, title and URL without running the page's
// scripts (which may have replaced any function they would call).
func (t *tab) snapshot() error {
	ctx, cancel := t.bounded(snapshotWait)
	defer cancel()
	var html, title, url string
	err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		root, err := dom.GetDocument().WithDepth(0).Do(ctx)
		if err != nil {
			return err
		}
		// By backend id: node ids change whenever the document is asked for again.
		html, err = dom.GetOuterHTML().WithBackendNodeID(root.BackendNodeID).Do(ctx)
		if err != nil {
			return err
		}
		info, err := target.GetTargetInfo().Do(ctx)
		if err != nil {
			return err
		}
		title, url = info.Title, info.URL
		return nil
	}))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnresponsive, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(html) > t.p.MaxDOMBytes {
		t.cuts[fmt.Sprintf("dom: larger than %d bytes, cut", t.p.MaxDOMBytes)]++
		html = html[:t.p.MaxDOMBytes]
	}
	t.res.DOM, t.res.Title, t.res.URL = []byte(html), title, url
	return nil
}

// keepServed makes the page's own answer, in UTF-8, its DOM, with a cut
// that says so: what the tab's snapshot would have given, without what
// scripts made.
func (t *tab) keepServed() {
	body := t.p.Main.Body
	if r, err := charset.NewReader(bytes.NewReader(body), t.p.Main.Header.Get("Content-Type")); err == nil {
		if b, err := io.ReadAll(io.LimitReader(r, int64(t.p.MaxDOMBytes)+1)); err == nil {
			body = b
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cuts[fmt.Sprintf("dom: the tab did not answer within %s, the page as served kept, without what scripts made", snapshotWait)]++
	if len(body) > t.p.MaxDOMBytes {
		t.cuts[fmt.Sprintf("dom: larger than %d bytes, cut", t.p.MaxDOMBytes)]++
		body = body[:t.p.MaxDOMBytes]
	}
	t.res.DOM, t.res.Title, t.res.URL = body, "", t.p.URL
}

// bounded returns a context of the tab that ends after d or when the tab
// crashes, whichever comes first.
func (t *tab) bounded(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.ctx, d)
	go func() {
		select {
		case <-t.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (t *tab) isCrashed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.crashed
}

func (t *tab) cut(kind, why string) {
	t.mu.Lock()
	t.cuts[kind+": "+why]++
	t.mu.Unlock()
}

// event receives the tab's events; it must not block.
func (t *tab) event(ev any) {
	switch ev := ev.(type) {
	case *fetch.EventRequestPaused:
		t.mu.Lock()
		// Requests are counted against the page's limit as they are asked
		// for, in order: a script that asks for thousands at once is cut at
		// the first one over, however slowly the ones before it are made.
		if t.counts(ev) {
			t.asked++
			if t.asked > t.p.MaxRequests {
				// Left unanswered, like every one the tab blocks itself.
				t.cuts[fmt.Sprintf("requests: the page's limit of %d reached, refused", t.p.MaxRequests)]++
				first := !t.blocked
				t.blocked = true
				t.mu.Unlock()
				if first {
					go func() { _ = chromedp.Run(t.ctx, network.SetBlockedURLs([]string{"*"})) }()
				}
				return
			}
		}
		t.queue = append(t.queue, ev)
		t.cond.Signal()
		t.mu.Unlock()
	case *page.EventLoadEventFired:
		t.mu.Lock()
		t.loaded, t.last = true, time.Now()
		t.mu.Unlock()
	case *inspector.EventTargetCrashed:
		t.mu.Lock()
		if !t.crashed {
			t.crashed = true
			close(t.gone)
		}
		t.mu.Unlock()
	case *page.EventJavascriptDialogOpening:
		// An alert() would hold the page until answered.
		go func() { _ = chromedp.Run(t.ctx, page.HandleJavaScriptDialog(false)) }()
	}
}

// counts reports whether a paused request counts against the page's
// request limit: not the page itself, nor a script's navigation of the tab
// or a method that is refused anyway.
func (t *tab) counts(ev *fetch.EventRequestPaused) bool {
	if ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == t.mainFrm {
		return false
	}
	return ev.Request.Method == http.MethodGet || ev.Request.Method == http.MethodHead
}

// work answers paused requests until the tab stops.
func (t *tab) work() {
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && !t.stopped {
			t.cond.Wait()
		}
		if t.stopped {
			t.mu.Unlock()
			return
		}
		ev := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		t.mu.Unlock()
		t.answer(ev)
	}
}

// answer decides one paused request: the page's own answer, a refusal, or
// the caller's answer.
func (t *tab) answer(ev *fetch.EventRequestPaused) {
	do := func(a chromedp.Action) { _ = chromedp.Run(t.fetchCtx, a) }
	main := ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == t.mainFrm
	t.mu.Lock()
	switch {
	case main && !t.mainServed:
		t.mainServed = true
		t.mu.Unlock()
		do(fulfill(ev.RequestID, t.p.Main))
		return
	case main:
		// A script takes the tab elsewhere: not followed, not requested.
		t.res.Navigations = append(t.res.Navigations, ev.Request.URL)
		t.left = true
		t.cuts["navigation: scripts tried to leave the page, not followed"]++
		t.mu.Unlock()
		do(fetch.FailRequest(ev.RequestID, network.ErrorReasonAborted))
		return
	case ev.Request.Method != http.MethodGet && ev.Request.Method != http.MethodHead:
		t.cuts["method: only GET and HEAD are made, refused "+ev.Request.Method]++
		t.res.Refused++
		t.mu.Unlock()
		do(fetch.FailRequest(ev.RequestID, network.ErrorReasonBlockedByClient))
		return
	case t.res.Requests >= t.p.MaxRequests:
		t.overLimit(fmt.Sprintf("requests: the page's limit of %d reached, refused", t.p.MaxRequests))
		return
	case t.res.Bytes >= t.p.MaxBytes:
		t.overLimit(fmt.Sprintf("bytes: the page's limit of %d reached, refused", t.p.MaxBytes))
		return
	}
	t.res.Requests++
	t.pending++
	t.last = time.Now()
	t.mu.Unlock()

	req := &Request{URL: ev.Request.URL, Method: ev.Request.Method, Type: string(ev.ResourceType), Header: http.Header{}}
	for k, v := range ev.Request.Headers {
		if s, ok := v.(string); ok {
			req.Header.Set(k, s)
		}
	}
	if t.p.UserAgent != "" {
		req.Header.Set("User-Agent", t.p.UserAgent)
	}
	resp, err := t.p.Fetch(t.fetchCtx, req)

	t.mu.Lock()
	t.pending--
	t.last = time.Now()
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		t.res.Refused++
		t.cuts["refused: "+refusal.Reason]++
	case err != nil:
	default:
		t.res.Bytes += int64(len(resp.Body))
	}
	t.mu.Unlock()
	switch {
	case refusal != nil:
		do(fetch.FailRequest(ev.RequestID, network.ErrorReasonAccessDenied))
	case err != nil:
		do(fetch.FailRequest(ev.RequestID, network.ErrorReasonFailed))
	default:
		do(fulfill(ev.RequestID, resp))
	}
}

// overLimit refuses a request beyond the page's limits (t.mu held; it
// unlocks). The first one makes the tab block every later request itself,
// so that a page that asks for thousands costs no exchange with the
// browser each; those already asked for stay unanswered until the tab
// closes (answering each would flood the page with failures to run).
func (t *tab) overLimit(why string) {
	t.cuts[why]++
	first := !t.blocked
	t.blocked = true
	t.mu.Unlock()
	if first {
		_ = chromedp.Run(t.fetchCtx, network.SetBlockedURLs([]string{"*"}))
	}
}

// fulfill answers a paused request with r.
func fulfill(id fetch.RequestID, r *Response) chromedp.Action {
	var hs []*fetch.HeaderEntry
	for k, vs := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Encoding", "Content-Length", "Transfer-Encoding", "Connection":
			continue // the body is given whole and decoded
		}
		for _, v := range vs {
			hs = append(hs, &fetch.HeaderEntry{Name: k, Value: v})
		}
	}
	hs = append(hs, &fetch.HeaderEntry{Name: "Content-Length", Value: strconv.Itoa(len(r.Body))})
	return fetch.FulfillRequest(id, int64(r.Status)).WithResponseHeaders(hs).
		WithResponsePhrase(http.StatusText(r.Status)).WithBody(base64.StdEncoding.EncodeToString(r.Body))
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
