package websim

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Host names of the test site.
const (
	HostWWW   = "www.example.test"  // start host; robots.txt disallows /private/
	HostBlog  = "blog.example.test" // robots.txt answers 404
	HostDocs  = "docs.example.test" // robots.txt disallows /drafts/ and /*.tmp$
	HostOther = "other.test"        // outside the start URL's domain; never crawled
)

const (
	siteZone = ".example.test" // suffix shared by the in-scope hosts
	ctHTML   = "text/html; charset=utf-8"
	ctText   = "text/plain; charset=utf-8"
	ctLatin1 = "text/html; charset=ISO-8859-1"
	calPath  = "/calendar"
	calParam = "month="
	calLimit = 1_000_000_000 // months above this answer 404, so month+1 never overflows
)

// Request is one request the test site served.
type Request struct {
	// Host is the Host header without its port, lowercased.
	Host string
	// Path is the request URI: path and, if any, "?query".
	Path string
	// URL is the normalized absolute URL requested, comparable with the
	// URLs of Expect.
	URL string
	// Method and UserAgent are those of the request.
	Method    string
	UserAgent string
	// Start and End bracket the handling of the request.
	Start time.Time
	End   time.Time
	// Status is the HTTP status answered.
	Status int
}

// Site is the awkward test site: a handful of virtual hosts under
// example.test plus other.test, served from one loopback listener. It is
// safe for concurrent use; create it with NewTestSite.
type Site struct {
	srv server

	// Fixed at Start, read-only afterwards.
	pages  map[string]*page // by host + request URI
	robots map[string]robotsFile
	bodies map[string][]byte // rendered static pages, by the same key

	mu   sync.Mutex
	reqs []Request
}

// NewTestSite returns the test site, not yet serving.
func NewTestSite() *Site { return &Site{} }

// Start serves the site on a free port of 127.0.0.1.
func (s *Site) Start() error { return s.StartPort(0) }

// StartPort serves the site on 127.0.0.1:port; port 0 picks a free port.
// The pages embed the port in their absolute links, so they are built here.
func (s *Site) StartPort(port int) error {
	err := s.srv.start(port, s, func(port int) {
		s.pages, s.robots = buildSite(port)
		s.bodies = make(map[string][]byte, len(s.pages))
		for k, p := range s.pages {
			s.bodies[k] = p.render()
		}
	})
	if err != nil {
		return fmt.Errorf("start test site: %w", err)
	}
	return nil
}

// Close stops serving and waits for the server to exit.
func (s *Site) Close() { s.srv.close() }

// Port returns the listening port, 0 before Start.
func (s *Site) Port() int { return s.srv.port }

// URL returns "http://host:port/path" for the listening port.
func (s *Site) URL(host, path string) string {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "http://" + host + ":" + strconv.Itoa(s.srv.port) + path
}

// StartURL returns the crawl's start URL, http://www.example.test:PORT/.
func (s *Site) StartURL() string { return s.URL(HostWWW, "/") }

// Hosts returns every virtual host the site serves.
func (s *Site) Hosts() []string { return []string{HostWWW, HostBlog, HostDocs, HostOther} }

// Resolve returns the host override that sends every host of the site to
// the listener, in GRIDCRAWL_RESOLVE's "pattern=ip" comma-list form.
func (s *Site) Resolve() string { return "*" + siteZone + "=127.0.0.1," + HostOther + "=127.0.0.1" }

// Client returns an HTTP client that dials every host at the site's
// listener and does not follow redirects.
func (s *Site) Client() *http.Client { return s.srv.client() }

// Requests returns every request served so far, in the order they finished.
func (s *Site) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// statusWriter records the status code a handler wrote, and when it began
// its last write.
type statusWriter struct {
	http.ResponseWriter
	status    int
	lastWrite time.Time
}

// end returns the end of the request as the log records it: the moment its
// last write began, or now when the handler wrote no body. A large write
// goes to the connection at once, and the server goroutine may then wait
// for a core before it reads the clock again (tens of milliseconds on a
// loaded machine), while the client has the whole response already: taking
// the time before the write keeps the logged end before the client read
// the last byte.
func (w *statusWriter) end() time.Time {
	if !w.lastWrite.IsZero() {
		return w.lastWrite
	}
	return time.Now()
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.lastWrite = time.Now()
	return w.ResponseWriter.Write(b)
}

// ServeHTTP serves one request of the site and logs it.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	host := requestHost(r)
	s.serve(sw, r, host)
	u := &url.URL{Scheme: "http", Host: host + ":" + strconv.Itoa(s.srv.port), Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	req := Request{
		Host: host, Path: r.URL.RequestURI(), URL: normalize(u), Method: r.Method,
		UserAgent: r.UserAgent(), Start: start, End: sw.end(), Status: sw.status,
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
}

func (s *Site) serve(w http.ResponseWriter, r *http.Request, host string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/robots.txt" && r.URL.RawQuery == "" {
		rf, ok := s.robots[host]
		if !ok || rf.missing {
			http.Error(w, "no robots.txt here", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", ctText)
		_, _ = w.Write([]byte(rf.text()))
		return
	}
	key := host + r.URL.RequestURI()
	p, body := s.pages[key], s.bodies[key]
	if p == nil && host == HostWWW {
		if month, ok := parseCalendar(r.URL); ok {
			p = calendarPage(month)
			body = p.render()
		}
	}
	if p == nil {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	if p.location != "" {
		w.Header().Set("Location", p.location)
		w.Header().Set("Content-Type", ctText)
		w.WriteHeader(p.status)
		_, _ = w.Write([]byte("moved\n"))
		return
	}
	w.Header().Set("Content-Type", p.mediaType())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.code())
	_, _ = w.Write(body)
}

// parseCalendar accepts exactly "/calendar?month=N" with N a canonical
// decimal in [1, calLimit].
func parseCalendar(u *url.URL) (int, bool) {
	if u.Path != calPath || !strings.HasPrefix(u.RawQuery, calParam) {
		return 0, false
	}
	digits := u.RawQuery[len(calParam):]
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > calLimit || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}

// calendarURI is the request URI of calendar month n.
func calendarURI(n int) string { return calPath + "?" + calParam + strconv.Itoa(n) }

// calendarPage is the endless calendar trap: every month links to the next
// one with a query-only relative link, and back to the previous one.
func calendarPage(n int) *page {
	p := &page{
		lang:        "en",
		title:       "Event calendar, month " + strconv.Itoa(n),
		description: "Events of month " + strconv.Itoa(n) + ".",
		headings:    []string{"Month " + strconv.Itoa(n)},
		text:        []string{"No events are planned this month. The calendar goes on forever, one month per page."},
		links:       []link{{href: "?" + calParam + strconv.Itoa(n+1), text: "Next month"}},
	}
	if n > 1 {
		p.links = append(p.links, link{href: "?" + calParam + strconv.Itoa(n-1), text: "Previous month"})
	}
	return p
}

// link is one outgoing link of a page as written in its HTML.
type link struct {
	tag  string // "a" (default), "area", "frame" or "iframe"
	href string // the attribute value before HTML escaping
	rel  string
	text string
	// raw, when set, is written verbatim instead of the generated element;
	// tag, href and rel must still describe it, and the tests check they do.
	raw string
}

// nofollow reports whether the rel attribute holds the nofollow token.
func (l link) nofollow() bool {
	for _, tok := range strings.Fields(l.rel) {
		if strings.EqualFold(tok, "nofollow") {
			return true
		}
	}
	return false
}

// word is a word that occurs on exactly one page of the site.
type word struct {
	word  string
	field string // see Word.Field
}

// page is one resource of the site. The zero status means 200.
type page struct {
	status   int
	location string // Location of a 3xx answer, possibly relative

	plain  string // body of a text/plain resource; HTML fields unused
	latin1 bool   // HTML sent as ISO-8859-1

	lang        string
	title       string
	description string
	metaRobots  string
	base        string
	headings    []string // the first is the h1; each heading i has text[i] below it
	text        []string
	links       []link
	frameset    bool   // frame links go into a frameset instead of a body
	raw         string // extra body HTML (comments, scripts) holding no followable link
	words       []word
	images      []image // written after the first heading's text
	keywords    string  // <meta name=keywords>
	author      string  // <meta name=author>
}

// image is an <img> of a page.
type image struct{ src, alt string }

func (p *page) code() int {
	if p.status == 0 {
		return http.StatusOK
	}
	return p.status
}

func (p *page) mediaType() string {
	switch {
	case p.plain != "":
		return ctText
	case p.latin1:
		return ctLatin1
	}
	return ctHTML
}

// noindex and nofollow read the page's meta robots directives.
func (p *page) noindex() bool  { return metaHas(p.metaRobots, "noindex") }
func (p *page) nofollow() bool { return metaHas(p.metaRobots, "nofollow") }

func metaHas(content, directive string) bool {
	for _, tok := range strings.FieldsFunc(content, func(r rune) bool { return r == ',' || r == ' ' }) {
		if strings.EqualFold(tok, directive) || strings.EqualFold(tok, "none") {
			return true
		}
	}
	return false
}

// render returns the body of p, deterministically.
func (p *page) render() []byte {
	if p.plain != "" {
		return []byte(p.plain)
	}
	var b strings.Builder
	esc := html.EscapeString
	charset := "utf-8"
	if p.latin1 {
		charset = "iso-8859-1"
	}
	b.WriteString("<!DOCTYPE html>\n<html lang=\"" + esc(p.lang) + "\">\n<head>\n")
	b.WriteString("<meta charset=\"" + charset + "\">\n")
	b.WriteString("<title>" + esc(p.title) + "</title>\n")
	if p.description != "" {
		b.WriteString("<meta name=\"description\" content=\"" + esc(p.description) + "\">\n")
	}
	if p.metaRobots != "" {
		b.WriteString("<meta name=\"robots\" content=\"" + esc(p.metaRobots) + "\">\n")
	}
	if p.keywords != "" {
		b.WriteString("<meta name=\"keywords\" content=\"" + esc(p.keywords) + "\">\n")
	}
	if p.author != "" {
		b.WriteString("<meta name=\"author\" content=\"" + esc(p.author) + "\">\n")
	}
	if p.base != "" {
		b.WriteString("<base href=\"" + esc(p.base) + "\">\n")
	}
	b.WriteString("</head>\n")
	if p.frameset {
		b.WriteString("<frameset cols=\"50%,50%\">\n")
		for _, l := range p.links {
			writeLink(&b, l)
		}
		b.WriteString("<noframes>This page needs frames.</noframes>\n</frameset>\n</html>\n")
		return p.encode(b.String())
	}
	b.WriteString("<body>\n")
	for i, h := range p.headings {
		tag := "h2"
		if i == 0 {
			tag = "h1"
		}
		b.WriteString("<" + tag + ">" + esc(h) + "</" + tag + ">\n")
		if i < len(p.text) {
			b.WriteString("<p>" + esc(p.text[i]) + "</p>\n")
		}
		if i == 0 {
			for _, im := range p.images {
				b.WriteString("<img src=\"" + esc(im.src) + "\" alt=\"" + esc(im.alt) + "\">\n")
			}
		}
	}
	for i := len(p.headings); i < len(p.text); i++ {
		b.WriteString("<p>" + esc(p.text[i]) + "</p>\n")
	}
	if len(p.links) > 0 {
		b.WriteString("<nav>\n")
		for _, l := range p.links {
			writeLink(&b, l)
		}
		b.WriteString("</nav>\n")
	}
	b.WriteString(p.raw)
	b.WriteString("</body>\n</html>\n")
	return p.encode(b.String())
}

func (p *page) encode(s string) []byte {
	if !p.latin1 {
		return []byte(s)
	}
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			r = '?'
		}
		out = append(out, byte(r))
	}
	return out
}

func writeLink(b *strings.Builder, l link) {
	esc := html.EscapeString
	if l.raw != "" {
		b.WriteString(l.raw + "\n")
		return
	}
	rel := ""
	if l.rel != "" {
		rel = " rel=\"" + esc(l.rel) + "\""
	}
	switch l.tag {
	case "frame":
		b.WriteString("<frame src=\"" + esc(l.href) + "\">\n")
	case "iframe":
		b.WriteString("<iframe src=\"" + esc(l.href) + "\" title=\"" + esc(l.text) + "\"></iframe>\n")
	case "area":
		b.WriteString("<map name=\"m\"><area shape=\"rect\" coords=\"0,0,100,100\" href=\"" + esc(l.href) + "\"" + rel + " alt=\"" + esc(l.text) + "\"></map>\n")
	default:
		b.WriteString("<a href=\"" + esc(l.href) + "\"" + rel + ">" + esc(l.text) + "</a>\n")
	}
}
