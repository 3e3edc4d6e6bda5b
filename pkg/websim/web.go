package websim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WebZone is the domain under which a generated web's hosts live.
const WebZone = "sim.test"

// WebConfig describes a generated web. Zero or negative fields take the
// defaults given; CrossHostLinks is clamped to [0, LinksPerPage].
type WebConfig struct {
	// Hosts is the number of hosts, named h0000.sim.test, h0001.sim.test...
	// (default 10).
	Hosts int
	// PagesPerHost is the number of pages on every host (default 100). Page 0
	// is "/", page n is "/p/n.html".
	PagesPerHost int
	// LinksPerPage is the number of links on every page (default 10).
	LinksPerPage int
	// CrossHostLinks is how many of LinksPerPage point to other hosts
	// (default 0).
	CrossHostLinks int
	// PageBytes is the approximate size of every page body (default 4096,
	// at most 8 MiB).
	PageBytes int
	// Latency delays every response (default 0).
	Latency time.Duration
	// Seed selects the web: the same seed gives the same pages.
	Seed int64
	// Disallow, when not empty, is a path prefix (such as "/p/3") that
	// every host's robots.txt disallows for every user agent, so a
	// benchmark can count the disallowed pages a crawler fetched. Empty
	// (the default) allows everything.
	Disallow string
	// RecordRequests keeps a log of every request served, read with
	// RequestLog. It costs memory per request, so it is off by default.
	RecordRequests bool
	// CountFetches counts the GET requests of every page (4 bytes a page),
	// read with FetchCounts: how a benchmark tells pages lost from pages
	// fetched twice.
	CountFetches bool
	// HostileEvery, when positive, makes one page in HostileEvery of every
	// host (pages HostileEvery, 2*HostileEvery... ; never the root) a
	// hostile page instead of an ordinary one, each of the kinds of
	// HostileKinds in turn; see Hostile. Zero (the default) serves ordinary
	// pages only.
	HostileEvery int
}

// withDefaults returns c with defaults applied and fields clamped.
func (c WebConfig) withDefaults() WebConfig {
	if c.Hosts <= 0 {
		c.Hosts = 10
	}
	if c.PagesPerHost <= 0 {
		c.PagesPerHost = 100
	}
	if c.LinksPerPage <= 0 {
		c.LinksPerPage = 10
	}
	c.CrossHostLinks = min(max(c.CrossHostLinks, 0), c.LinksPerPage)
	if c.PageBytes <= 0 {
		c.PageBytes = 4096
	}
	c.PageBytes = min(c.PageBytes, 8<<20)
	c.Latency = max(c.Latency, 0)
	return c
}

// Web is a large generated web. Every page is computed on request from
// (Seed, host, page), so memory does not grow with the number of pages.
//
// Every host's robots.txt allows everything unless WebConfig.Disallow names
// a prefix. Links of a page: the first
// LinksPerPage-CrossHostLinks stay on the host, the rest go to random pages
// of other hosts. The first two same-host links of page n go to pages 2n+1
// and 2n+2 when those exist (one link: to n+1), so every page of a host is
// reachable from its root within about log2(PagesPerHost) links whenever
// LinksPerPage exceeds CrossHostLinks; the other links go to random pages.
//
// A Web is safe for concurrent use; create it with NewWeb.
type Web struct {
	zone
	cfg WebConfig

	// Fixed by NewWeb and Start, read-only while serving.
	width  int // digits in a host name
	vocab  []string
	corpus []byte // words separated by single spaces
	ctHTML []string
	ctText []string
	pool   sync.Pool
	bombs  bombs // made on first request of a compression bomb
	revs   revisions
	counts []atomic.Uint32 // GETs per page (host*PagesPerHost+page), with CountFetches
}

// NewWeb returns a generated web for cfg, not yet serving.
func NewWeb(cfg WebConfig) *Web {
	cfg = cfg.withDefaults()
	w := &Web{
		cfg:    cfg,
		width:  max(4, len(strconv.Itoa(cfg.Hosts-1))),
		ctHTML: []string{ctHTML},
		ctText: []string{ctText},
	}
	w.zone.init(WebZone, cfg.Disallow)
	if cfg.CountFetches {
		w.counts = make([]atomic.Uint32, cfg.Hosts*cfg.PagesPerHost)
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x9e3779b97f4a7c15))
	w.vocab = vocabulary(rng, 1024)
	size := max(64<<10, 2*cfg.PageBytes)
	corpus := make([]byte, 0, size+32)
	for len(corpus) < size {
		corpus = append(corpus, w.vocab[rng.IntN(len(w.vocab))]...)
		corpus = append(corpus, ' ')
	}
	w.corpus = corpus
	bufSize := cfg.PageBytes + 256 + cfg.LinksPerPage*96
	w.pool.New = func() any {
		b := make([]byte, 0, bufSize)
		return &b
	}
	return w
}

// vocabulary makes n distinct pronounceable words.
func vocabulary(rng *rand.Rand, n int) []string {
	syl := []string{"ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "da", "go", "zu",
		"ban", "tor", "lin", "mar", "ses", "qui", "fen", "dro", "pla", "ost", "rim", "cha"}
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		k := 2 + rng.IntN(3)
		var b strings.Builder
		for range k {
			b.WriteString(syl[rng.IntN(len(syl))])
		}
		if s := b.String(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Start serves the web on a free port of 127.0.0.1.
func (w *Web) Start() error { return w.StartPort(0) }

// StartPort serves the web on 127.0.0.1:port; port 0 picks a free port.
func (w *Web) StartPort(port int) error {
	err := w.srv.start(port, w, func(port int) { w.portSfx = ":" + strconv.Itoa(port) })
	if err != nil {
		return fmt.Errorf("start generated web: %w", err)
	}
	return nil
}

// FetchCounts tells, with CountFetches, how many pages were never fetched
// (GET), how many more than once, and the most GETs of one page.
func (w *Web) FetchCounts() (never, twice int, most uint32) {
	for i := range w.counts {
		n := w.counts[i].Load()
		switch {
		case n == 0:
			never++
		case n > 1:
			twice++
		}
		most = max(most, n)
	}
	return never, twice, most
}

// Served returns the GETs of pages counted so far (CountFetches).
func (w *Web) Served() int64 {
	var n int64
	for i := range w.counts {
		n += int64(w.counts[i].Load())
	}
	return n
}

// Twice lists up to n URLs fetched more than once (CountFetches).
func (w *Web) Twice(n int) []string {
	var out []string
	for i := range w.counts {
		if w.counts[i].Load() > 1 && len(out) < n {
			out = append(out, w.URL(i/w.cfg.PagesPerHost, i%w.cfg.PagesPerHost))
		}
	}
	return out
}

// Config returns the configuration with defaults applied.
func (w *Web) Config() WebConfig { return w.cfg }

// Pages returns the number of pages of the whole web.
func (w *Web) Pages() int { return w.cfg.Hosts * w.cfg.PagesPerHost }

// Host returns the name of host i, such as "h0007.sim.test".
func (w *Web) Host(i int) string { return string(w.appendHost(nil, i)) }

// URL returns the URL of page n of host i.
func (w *Web) URL(host, page int) string {
	b := append([]byte("http://"), w.appendHost(nil, host)...)
	b = append(b, w.portSfx...)
	return string(appendPagePath(b, page))
}

// StartURLs returns the root URL of every host, in host order; slice it to
// start from fewer hosts.
func (w *Web) StartURLs() []string {
	out := make([]string, w.cfg.Hosts)
	for i := range out {
		out[i] = w.URL(i, 0)
	}
	return out
}

// Vocabulary returns the words page texts are made of.
func (w *Web) Vocabulary() []string { return append([]string(nil), w.vocab...) }

// Links returns the absolute URLs page links to, in document order. A
// hostile page (see Hostile) serves other links or none.
func (w *Web) Links(host, page int) []string {
	var out []string
	w.eachLink(host, page, func(h, p int, _ uint64) { out = append(out, w.URL(h, p)) })
	return out
}

// mix hashes the seed and up to three coordinates into 64 well-mixed bits
// (splitmix64 finalizer).
func mix(seed int64, a, b, c int) uint64 {
	x := uint64(seed) ^ uint64(a)*0x9e3779b97f4a7c15 ^ uint64(b)*0xc2b2ae3d27d4eb4f ^ uint64(c)*0x165667b19e3779f9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// eachLink calls fn with the target host, target page and a random value for
// every link of page on host, in order.
func (w *Web) eachLink(host, page int, fn func(h, p int, r uint64)) {
	c := w.cfg
	same := c.LinksPerPage - c.CrossHostLinks
	nPages := uint64(c.PagesPerHost)
	for k := range c.LinksPerPage {
		r := mix(c.Seed, host, page, k+1)
		if k >= same {
			th := host
			if c.Hosts > 1 {
				th = (host + 1 + int(r%uint64(c.Hosts-1))) % c.Hosts
			}
			fn(th, int((r>>20)%nPages), r)
			continue
		}
		t := -1
		switch {
		case same >= 2 && k < 2:
			t = 2*page + 1 + k
		case same == 1:
			t = page + 1
		}
		if t < 0 || t >= c.PagesPerHost {
			t = int(r % nPages)
		}
		fn(host, t, r)
	}
}

// appendHost appends the name of host i.
func (w *Web) appendHost(b []byte, i int) []byte {
	b = append(b, 'h')
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], int64(i), 10)
	for range w.width - len(d) {
		b = append(b, '0')
	}
	b = append(b, d...)
	return append(b, "."+WebZone...)
}

// appendPagePath appends the path of page n.
func appendPagePath(b []byte, n int) []byte {
	if n == 0 {
		return append(b, '/')
	}
	b = append(b, "/p/"...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, ".html"...)
}

// parseHost returns the index of a host name, which must be in canonical
// form.
func (w *Web) parseHost(host string) (int, bool) {
	name, ok := strings.CutSuffix(host, "."+WebZone)
	if !ok || len(name) != w.width+1 || name[0] != 'h' {
		return 0, false
	}
	n := 0
	for _, ch := range []byte(name[1:]) {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int(ch-'0')
	}
	return n, n < w.cfg.Hosts
}

// parsePage returns the page number of a path, which must be canonical.
func (w *Web) parsePage(path string) (int, bool) {
	if path == "/" {
		return 0, true
	}
	digits, ok := strings.CutPrefix(path, "/p/")
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, ".html")
	if !ok || digits == "" || len(digits) > 10 || digits[0] == '0' {
		return 0, false
	}
	n := 0
	for _, ch := range []byte(digits) {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int(ch-'0')
	}
	return n, n < w.cfg.PagesPerHost
}

// ServeHTTP serves one request of the web.
func (w *Web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.requests.Add(1)
	if w.cfg.RecordRequests {
		sw := &statusWriter{ResponseWriter: rw}
		defer w.log.record(r, w.srv.port, time.Now(), sw)
		rw = sw
	}
	if d := w.cfg.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		rw.Header().Set("Allow", "GET, HEAD")
		http.Error(rw, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	host, ok := w.parseHost(requestHost(r))
	if !ok || r.URL.RawQuery != "" {
		http.NotFound(rw, r)
		return
	}
	if r.URL.Path == "/robots.txt" {
		w.write(rw, w.ctText, w.robots)
		return
	}
	page, ok := w.parsePage(r.URL.Path)
	if !ok {
		if w.cfg.HostileEvery > 0 && strings.HasPrefix(r.URL.Path, hostilePrefix) {
			w.serveHostileExtra(rw, r)
			return
		}
		http.NotFound(rw, r)
		return
	}
	if w.counts != nil && r.Method == http.MethodGet {
		w.counts[host*w.cfg.PagesPerHost+page].Add(1)
	}
	if kind := w.Hostile(host, page); kind != "" {
		w.serveHostile(rw, r, host, page, kind)
		return
	}
	bp := w.pool.Get().(*[]byte)
	*bp = w.render((*bp)[:0], host, page)
	w.write(rw, w.ctHTML, *bp)
	w.pool.Put(bp)
}

func (w *Web) write(rw http.ResponseWriter, ct []string, body []byte) {
	h := rw.Header()
	h["Content-Type"] = ct
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	rw.WriteHeader(http.StatusOK)
	_, _ = rw.Write(body)
}

// render appends the HTML of page on host to b.
func (w *Web) render(b []byte, host, page int) []byte {
	r := mix(w.cfg.Seed, host, page, 0)
	nv := uint64(len(w.vocab))
	b = append(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"...)
	b = w.appendHost(b, host)
	b = append(b, " page "...)
	b = strconv.AppendInt(b, int64(page), 10)
	for i := range 3 {
		b = append(b, ' ')
		b = append(b, w.vocab[(r>>(i*10))%nv]...)
	}
	b = append(b, "</title>\n<meta name=\"description\" content=\"A generated page about "...)
	b = append(b, w.vocab[(r>>30)%nv]...)
	b = append(b, ".\">\n</head>\n<body>\n<h1>"...)
	b = append(b, w.vocab[(r>>40)%nv]...)
	b = append(b, "</h1>\n<nav>\n"...)
	w.eachLink(host, page, func(th, tp int, lr uint64) {
		b = append(b, "<a href=\""...)
		if th != host {
			b = append(b, "http://"...)
			b = w.appendHost(b, th)
			b = append(b, w.portSfx...)
		}
		b = appendPagePath(b, tp)
		b = append(b, "\">"...)
		b = append(b, w.vocab[(lr>>44)%nv]...)
		b = append(b, "</a>\n"...)
	})
	b = append(b, "</nav>\n"...)
	seed := w.cfg.Seed
	if rev := w.Revision(host, page); rev > 0 {
		// A changed page: a sentence naming the revision, and other text.
		b = append(b, "<p class=\"revision\">Revised: "...)
		b = append(b, RevisionToken(host, page, rev)...)
		b = append(b, "</p>\n"...)
		seed += int64(rev) * 7919
	}
	b = append(b, "<p>"...)
	const footer = "</p>\n</body>\n</html>\n"
	need := w.cfg.PageBytes - len(b) - len(footer)
	for i := 0; need > 0; i++ {
		chunk := min(need, len(w.corpus)/2)
		off := int(mix(seed, host, page, -1-i) % uint64(len(w.corpus)-chunk))
		// Start at a word and stop at a word break, so no word is cut.
		if j := bytes.IndexByte(w.corpus[off:], ' '); j >= 0 {
			off += j + 1
		}
		end := min(off+chunk, len(w.corpus))
		if j := bytes.IndexByte(w.corpus[end:], ' '); j >= 0 {
			end += j
		}
		text := bytes.TrimSuffix(w.corpus[off:end], []byte{' '})
		if len(text) == 0 {
			break
		}
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, text...)
		need -= len(text) + 1
	}
	return append(b, footer...)
}
