// Package browser renders pages in a headless Chromium driven over the
// DevTools protocol, with every request of the browser made by its caller.
//
// The browser never touches the network itself: each tab intercepts all of
// its requests at the request stage (the Fetch domain) and hands them to
// the page's Fetch function, which makes the request (through the caller's
// network guard, recording it as it likes) and returns the answer the
// browser gets. What escapes interception (WebSockets, workers' requests,
// popups) goes to a proxy that answers nothing: the browser is started with
// a local trap as its proxy for every host, loopback included, and the trap
// counts the connections it refuses (Escaped).
//
// One Browser is one Chromium process at a time with at most Config.Tabs
// pages loading at once. It is restarted after Config.RestartPages pages,
// when its processes together grow past Config.MaxMemory, and when it
// crashes; a page's tab is closed after each load. This follows what
// Browsertrix and Brozzler do with their browsers
// (https://github.com/webrecorder/browsertrix-crawler,
// https://github.com/internetarchive/brozzler), and warcprox's way of
// archiving every exchange the browser makes, without a proxy in between.
package browser

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/pkg/proctree"
)

// Config sets up a Browser.
type Config struct {
	// Path is the Chromium binary ("" looks up chromium, then
	// chromium-browser and google-chrome on PATH).
	Path string
	// Tabs bounds the pages loading at once (default 2).
	Tabs int
	// RestartPages restarts the browser after this many pages (default 500).
	RestartPages int
	// MaxMemory restarts the browser, between pages, once the resident
	// memory of all its processes exceeds it (default 1 GiB).
	MaxMemory int64
	// JSHeapMB bounds each renderer's JavaScript heap, so that a page that
	// allocates without end kills its tab, not the machine (default 512).
	JSHeapMB int
	// NoSandbox turns Chromium's sandbox off, which it needs when run as
	// root; true by default for root only.
	NoSandbox *bool
	Log       *slog.Logger
}

func (c *Config) withDefaults() {
	if c.Tabs <= 0 {
		c.Tabs = 2
	}
	if c.RestartPages <= 0 {
		c.RestartPages = 500
	}
	if c.MaxMemory <= 0 {
		c.MaxMemory = 1 << 30
	}
	if c.JSHeapMB <= 0 {
		c.JSHeapMB = 512
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// ErrNoBrowser is returned by New when no Chromium can be found.
var ErrNoBrowser = errors.New("no chromium binary found")

// Restart reasons, as Stats counts them.
const (
	RestartPages  = "pages"
	RestartMemory = "memory"
	RestartCrash  = "crash"
	// RestartUnresponsive: a tab did not give its DOM in time.
	RestartUnresponsive = "unresponsive"
)

// Browser renders pages; it is safe for concurrent use.
type Browser struct {
	cfg  Config
	tabs chan struct{}
	trap net.Listener

	mu     sync.Mutex
	cur    *instance
	closed bool

	escaped  atomic.Int64
	rendered atomic.Int64
	inUse    atomic.Int64
	restarts sync.Map // reason -> *atomic.Int64
	memory   atomic.Int64
}

// instance is one browser process.
type instance struct {
	ctx      context.Context // the browser's; done when it is gone
	cancel   context.CancelFunc
	pages    int // pages started in it
	active   int // pages loading in it
	retiring bool
	checked  time.Time // last memory check
}

// New returns a Browser; Chromium starts with the first page.
func New(cfg Config) (*Browser, error) {
	cfg.withDefaults()
	if cfg.Path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				cfg.Path = p
				break
			}
		}
	}
	if cfg.Path == "" {
		return nil, ErrNoBrowser
	}
	if _, err := os.Stat(cfg.Path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoBrowser, err)
	}
	if cfg.NoSandbox == nil {
		root := os.Geteuid() == 0
		cfg.NoSandbox = &root
	}
	trap, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("browser: trap proxy: %w", err)
	}
	b := &Browser{cfg: cfg, tabs: make(chan struct{}, cfg.Tabs), trap: trap}
	go b.serveTrap()
	return b, nil
}

// serveTrap refuses every connection that reaches the trap proxy: a
// request that escaped interception, or one of the browser's own
// (updates, sign-in, time), which flags do not all turn off.
func (b *Browser) serveTrap() {
	for {
		c, err := b.trap.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(io.LimitReader(c, 1024)).ReadString('\n')
			line = strings.TrimSpace(line)
			switch host := trapHost(line); {
			case host == "": // a connection opened ahead of need, and closed
			case browserService(host) || isFavicon(line):
				// The browser asks for a tab's favicon itself, sometimes
				// once the page's interception is over (a tab closing).
				b.cfg.Log.Debug("browser: its own request refused", "request", line)
			default:
				b.escaped.Add(1)
				b.cfg.Log.Warn("browser: a request escaped interception; refused", "request", line)
			}
		}()
	}
}

// trapHost returns the host a proxy request line asks for: "CONNECT
// host:443 HTTP/1.1" or "GET http://host/path HTTP/1.1".
func trapHost(line string) string {
	f := strings.Fields(line)
	if len(f) < 2 {
		return ""
	}
	target := f[1]
	if f[0] != "CONNECT" {
		if u, err := url.Parse(target); err == nil {
			return u.Hostname()
		}
		return target
	}
	if h, _, err := net.SplitHostPort(target); err == nil {
		return h
	}
	return target
}

// isFavicon reports a proxy request line for a site's /favicon.ico.
func isFavicon(line string) bool {
	f := strings.Fields(line)
	return len(f) >= 2 && f[0] == "GET" && strings.HasSuffix(f[1], "/favicon.ico")
}

// browserService reports the hosts of Chromium's own services.
func browserService(host string) bool {
	switch host {
	case "update.googleapis.com", "accounts.google.com", "clients2.google.com", "clientservices.googleapis.com",
		"content-autofill.googleapis.com", "optimizationguide-pa.googleapis.com", "safebrowsingohttpgateway.googleapis.com":
		return true
	}
	return strings.HasSuffix(host, ".gvt1.com")
}

// Stats is what a Browser has done.
type Stats struct {
	Rendered  int64            // pages rendered (tried)
	TabsInUse int64            // pages loading now
	Restarts  map[string]int64 // by reason: RestartPages, RestartMemory, RestartCrash, RestartUnresponsive
	Escaped   int64            // connections refused by the trap proxy
	Memory    int64            // resident bytes of the browser's processes at the last check
}

// Stats returns the browser's counters.
func (b *Browser) Stats() Stats {
	s := Stats{Rendered: b.rendered.Load(), TabsInUse: b.inUse.Load(), Escaped: b.escaped.Load(),
		Memory: b.memory.Load(), Restarts: map[string]int64{}}
	b.restarts.Range(func(k, v any) bool {
		s.Restarts[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return s
}

func (b *Browser) restarted(reason string) {
	v, _ := b.restarts.LoadOrStore(reason, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	b.cfg.Log.Info("browser: restart", "reason", reason)
}

// Close stops the browser; pages loading fail.
func (b *Browser) Close() {
	b.mu.Lock()
	b.closed = true
	cur := b.cur
	b.cur = nil
	b.mu.Unlock()
	if cur != nil {
		cur.cancel()
	}
	b.trap.Close()
}

// acquire returns the instance a page loads in, starting one if needed.
func (b *Browser) acquire() (*instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("browser closed")
	}
	if b.cur != nil && b.cur.ctx.Err() != nil { // it died
		b.restarted(RestartCrash)
		b.cur = nil
	}
	if b.cur == nil {
		inst, err := b.start()
		if err != nil {
			return nil, err
		}
		b.cur = inst
	}
	inst := b.cur
	inst.pages++
	inst.active++
	if inst.pages >= b.cfg.RestartPages {
		b.retireLocked(inst, RestartPages)
	}
	return inst, nil
}

// retire is retireLocked with b.mu taken.
func (b *Browser) retire(inst *instance, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retireLocked(inst, reason)
}

// retireLocked makes new pages start another instance; inst stops when
// its last page is done.
func (b *Browser) retireLocked(inst *instance, reason string) {
	if inst.retiring {
		return
	}
	inst.retiring = true
	if b.cur == inst {
		b.cur = nil
	}
	b.restarted(reason)
	if inst.active == 0 {
		inst.cancel()
	}
}

// release ends a page of inst, and checks the browser's memory now and
// then.
func (b *Browser) release(inst *instance) {
	b.mu.Lock()
	inst.active--
	check := !inst.retiring && time.Since(inst.checked) > 2*time.Second
	if check {
		inst.checked = time.Now()
	}
	if inst.retiring && inst.active == 0 {
		inst.cancel()
	}
	b.mu.Unlock()
	if !check {
		return
	}
	c := chromedp.FromContext(inst.ctx)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		return
	}
	rss := proctree.TreeMemory(c.Browser.Process().Pid)
	b.memory.Store(rss)
	if rss > b.cfg.MaxMemory {
		b.mu.Lock()
		b.retireLocked(inst, RestartMemory)
		b.mu.Unlock()
	}
}

// start launches a browser process.
func (b *Browser) start() (*instance, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(b.cfg.Path),
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1024),
		// Every request the interception misses goes to the trap.
		chromedp.ProxyServer("http://"+b.trap.Addr().String()),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("dns-prefetch-disable", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("block-new-web-contents", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("mute-audio", true),
		// The browser's own services (time, updates, sign-in) would only
		// knock at the trap.
		chromedp.Flag("disable-features", "site-per-process,Translate,BlinkGenPropertyTrees,NetworkTimeServiceQuerying,"+
			"OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("no-service-autorun", true),
		chromedp.Flag("allow-browser-signin", "false"),
		chromedp.Flag("js-flags", fmt.Sprintf("--max-old-space-size=%d", b.cfg.JSHeapMB)),
	)
	if *b.cfg.NoSandbox {
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	// The first Run starts the process, for the life of ctx (a timeout on
	// it would end the browser): the allocator bounds the start itself.
	if err := chromedp.Run(ctx); err != nil {
		cancelCtx()
		cancelAlloc()
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	return &instance{ctx: ctx, checked: time.Now(), cancel: func() { cancelCtx(); cancelAlloc() }}, nil
}
