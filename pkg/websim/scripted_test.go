package websim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// hiddenLiteral is the path no served body may hold: only a script reaches
// it.
const hiddenLiteral = "/app/hidden"

// scriptGet fetches path from srv and counts the request in seen.
func scriptGet(t *testing.T, srv *httptest.Server, seen map[string]int, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatalf("NewRequest(%q): %v", path, err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %q: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %q: %v", path, err)
	}
	seen[path]++
	return resp, body
}

// scriptDocument is what a non-rendering client reads from an HTML body.
type scriptDocument struct {
	title, text string   // text: visible text, whitespace collapsed
	links       []string // href of every <a>
	styles      []string // href of every <link rel=stylesheet>
	images      []string // src of every <img>
	scripts     []string // src of every <script src>
}

// readScriptDocument parses body as a client that runs no scripts does,
// except that the text leaves out <noscript>, which a browser with scripts
// does not show either.
func readScriptDocument(t *testing.T, body []byte) scriptDocument {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("html.Parse: %v", err)
	}
	var d scriptDocument
	var text strings.Builder
	attr := func(n *html.Node, k string) string {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val
			}
		}
		return ""
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			text.WriteString(n.Data + " ")
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Title:
				d.title = textOf(n)
				return
			case atom.Script:
				if src := attr(n, "src"); src != "" {
					d.scripts = append(d.scripts, src)
				}
				return
			case atom.Style, atom.Noscript:
				return
			case atom.A:
				d.links = append(d.links, attr(n, "href"))
			case atom.Link:
				if attr(n, "rel") == "stylesheet" {
					d.styles = append(d.styles, attr(n, "href"))
				}
			case atom.Img:
				d.images = append(d.images, attr(n, "src"))
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	d.text = strings.Join(strings.Fields(text.String()), " ")
	return d
}

// words splits text into its runs of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	})
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func TestScriptSiteTokens(t *testing.T) {
	s := NewScriptSite(12)
	var pages []string
	pages = append(pages, s.StaticPages()...)
	pages = append(pages, s.ScriptPages()...)
	pages = append(pages, s.HostilePages()...)
	seen := map[string]string{}
	for _, p := range pages {
		tok := s.Token(p)
		if tok == "" || len(words(tok)) != 1 || words(tok)[0] != tok {
			t.Errorf("Token(%q) = %q, want one word of letters and digits", p, tok)
		}
		if s.Title(p) == "" {
			t.Errorf("Title(%q) is empty", p)
		}
		for q, other := range seen {
			if strings.Contains(tok, other) || strings.Contains(other, tok) {
				t.Errorf("Token(%q) = %q and Token(%q) = %q: one holds the other", p, tok, q, other)
			}
		}
		seen[p] = tok
	}
	for _, p := range []string{"/nope", "/app/item/0", "/app/item/13", "/app/item/01", "/static/site.css"} {
		if got := s.Token(p); got != "" {
			t.Errorf("Token(%q) = %q, want \"\" for no page", p, got)
		}
		if got := s.Links(p); got != nil {
			t.Errorf("Links(%q) = %q, want nil for no page", p, got)
		}
	}
	if got, want := len(s.ScriptPages()), 12+2; got != want {
		t.Errorf("len(ScriptPages()) = %d, want %d", got, want)
	}
	if got := s.ScriptPages(); got[0] != "/app/" || got[len(got)-1] != hiddenLiteral {
		t.Errorf("ScriptPages() = %q, want /app/ first and %s last", got, hiddenLiteral)
	}
	for _, p := range s.ShellPages() {
		if !slices.Contains(s.ScriptPages(), p) {
			t.Errorf("ShellPages() holds %q, which is not a script page", p)
		}
	}
}

// TestScriptSitePlainHTTP reads the site as a client that runs no scripts:
// static pages hold their text, tokens and links; script pages are bare
// shells; nothing served names the hidden page; the hostile pages are
// linked from nowhere.
func TestScriptSitePlainHTTP(t *testing.T) {
	const items = 7
	s := NewScriptSite(items)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	seen := map[string]int{}
	bodies := map[string][]byte{} // every 200 body, by path

	get := func(path string, wantStatus int, wantType string) []byte {
		t.Helper()
		resp, body := scriptGet(t, srv, seen, path)
		if resp.StatusCode != wantStatus {
			t.Errorf("GET %q = %d, want %d", path, resp.StatusCode, wantStatus)
		}
		if ct := resp.Header.Get("Content-Type"); wantType != "" && ct != wantType {
			t.Errorf("GET %q: Content-Type %q, want %q", path, ct, wantType)
		}
		if resp.StatusCode == http.StatusOK {
			bodies[path] = body
		}
		return body
	}

	scriptTokens := map[string]bool{}
	for _, p := range s.ScriptPages() {
		scriptTokens[s.Token(p)] = true
	}

	t.Run("static", func(t *testing.T) {
		for _, p := range s.StaticPages() {
			body := get(p, 200, "text/html; charset=utf-8")
			d := readScriptDocument(t, body)
			if len(body) <= 2048 {
				t.Errorf("GET %q: %d bytes, want over 2 KB", p, len(body))
			}
			if len(d.text) <= 500 {
				t.Errorf("GET %q: %d characters of visible text, want over 500", p, len(d.text))
			}
			if !slices.Contains(words(d.text), s.Token(p)) {
				t.Errorf("GET %q: text lacks Token = %q", p, s.Token(p))
			}
			if d.title != s.Title(p) {
				t.Errorf("GET %q: title %q, want Title = %q", p, d.title, s.Title(p))
			}
			if diff := cmp.Diff(s.Links(p), sortedSet(d.links)); diff != "" {
				t.Errorf("GET %q: links differ from Links (-want +got):\n%s", p, diff)
			}
			if !slices.Equal(d.styles, []string{"/static/site.css"}) || !slices.Equal(d.images, []string{"/static/logo.png"}) || len(d.scripts) != 0 {
				t.Errorf("GET %q: styles %q, images %q, scripts %q, want the site's stylesheet and logo and no script", p, d.styles, d.images, d.scripts)
			}
		}
		if got := s.Links("/"); !slices.Contains(got, "/app/") || !slices.Contains(got, "/static/a.html") || !slices.Contains(got, "/static/b.html") {
			t.Errorf("Links(\"/\") = %q, want /app/, /static/a.html and /static/b.html", got)
		}
	})

	t.Run("shells", func(t *testing.T) {
		var first []byte
		for _, p := range s.ScriptPages() {
			body := get(p, 200, "text/html; charset=utf-8")
			if first == nil {
				first = body
			} else if !bytes.Equal(body, first) {
				t.Errorf("GET %q: the body differs from /app/'s shell", p)
			}
			d := readScriptDocument(t, body)
			for _, w := range words(string(body)) {
				if scriptTokens[w] {
					t.Errorf("GET %q: the shell holds the token %q", p, w)
				}
			}
			if d.text != "" || len(d.links) != 0 || d.title != "Loading" {
				t.Errorf("GET %q: text %q, links %q, title %q; want a bare shell titled Loading", p, d.text, d.links, d.title)
			}
			if !slices.Equal(d.scripts, []string{"/app/app.js"}) || !slices.Equal(d.styles, []string{"/app/app.css"}) {
				t.Errorf("GET %q: scripts %q, styles %q, want app.js and app.css", p, d.scripts, d.styles)
			}
			for _, want := range []string{`<div id="root"></div>`, `<noscript>You need to enable JavaScript to run this app.</noscript>`, `<script src="/app/app.js"></script>`} {
				if !bytes.Contains(body, []byte(want)) {
					t.Errorf("GET %q: no %s", p, want)
				}
			}
		}
	})

	t.Run("hostile", func(t *testing.T) {
		for _, p := range s.HostilePages() {
			body := get(p, 200, "text/html; charset=utf-8")
			d := readScriptDocument(t, body)
			if !slices.Contains(words(d.text), s.Token(p)) || d.title != s.Title(p) || len(d.scripts) != 0 || !bytes.Contains(body, []byte("<script>")) {
				t.Errorf("GET %q: text %q, title %q; want Token, Title and an inline script", p, d.text, d.title)
			}
		}
		for _, want := range []string{"while(true){}", "fetch('/hostile/flood/r/' + i)", "hog.push(", "location.href = 'http://10.255.255.1/secret'", "fetch('http://169.254.169.254/latest/meta-data/')", `<img src="http://10.255.255.1/x.png"`} {
			found := false
			for _, p := range s.HostilePages() {
				found = found || bytes.Contains(bodies[p], []byte(want))
			}
			if !found {
				t.Errorf("no hostile page holds %q", want)
			}
		}
		for _, i := range []int{0, ScriptFloodRequests - 1} {
			get(fmt.Sprintf("/hostile/flood/r/%d", i), 200, "text/plain; charset=utf-8")
		}
	})

	t.Run("assets", func(t *testing.T) {
		get("/robots.txt", 200, "text/plain; charset=utf-8")
		rb := parseTestRobots(200, bodies["/robots.txt"], "gridcrawl")
		for _, p := range append(s.StaticPages(), s.ScriptPages()...) {
			if !rb.allowed(p) {
				t.Errorf("robots.txt disallows %q:\n%s", p, bodies["/robots.txt"])
			}
		}
		get("/static/site.css", 200, "text/css; charset=utf-8")
		get("/app/app.css", 200, "text/css; charset=utf-8")
		get("/app/app.js", 200, "text/javascript; charset=utf-8")
		if _, err := png.Decode(bytes.NewReader(get("/static/logo.png", 200, "image/png"))); err != nil {
			t.Errorf("decode /static/logo.png: %v", err)
		}
		var index scriptDoc
		if err := json.Unmarshal(get("/api/items.json", 200, "application/json"), &index); err != nil {
			t.Fatalf("decode /api/items.json: %v", err)
		}
		if len(index.Items) != items || index.Token != s.Token("/app/") || index.Title != s.Title("/app/") {
			t.Errorf("/api/items.json: %d items, token %q, title %q; want %d, %q, %q", len(index.Items), index.Token, index.Title, items, s.Token("/app/"), s.Title("/app/"))
		}
		for i := 1; i <= items; i++ {
			p := fmt.Sprintf("/api/item/%d.json", i)
			var d scriptDoc
			if err := json.Unmarshal(get(p, 200, "application/json"), &d); err != nil {
				t.Fatalf("decode %s: %v", p, err)
			}
			page := fmt.Sprintf("/app/item/%d", i)
			if d.ID != i || d.Token != s.Token(page) || d.Title != s.Title(page) || len(strings.Join(d.Paragraphs, " ")) <= 500 {
				t.Errorf("%s = %+v, want item %d with Token and Title of %s and over 500 characters of text", p, d, i, page)
			}
		}
		var hidden scriptDoc
		if err := json.Unmarshal(get("/api/hidden.json", 200, "application/json"), &hidden); err != nil {
			t.Fatalf("decode /api/hidden.json: %v", err)
		}
		if hidden.Token != s.Token(hiddenLiteral) || hidden.Title != s.Title(hiddenLiteral) {
			t.Errorf("/api/hidden.json = %+v, want Token and Title of %s", hidden, hiddenLiteral)
		}
	})

	t.Run("not found", func(t *testing.T) {
		for _, p := range []string{"/nope", "/app", "/app/item/0", "/app/item/8", "/app/item/01", "/app/item/+1", "/app/hidden/x", "/api/item/8.json", "/api/item/x.json", "/static/", "/favicon.ico"} {
			get(p, 404, "")
		}
		resp, err := srv.Client().Post(srv.URL+"/", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		seen["/"]++
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST / = %d, want 405", resp.StatusCode)
		}
	})

	// Nothing a plain fetch gets names the hidden page or links a hostile
	// page from an ordinary one.
	for p, body := range bodies {
		if bytes.Contains(body, []byte(hiddenLiteral)) {
			t.Errorf("GET %q: the body holds %q", p, hiddenLiteral)
		}
		if !strings.HasPrefix(p, "/hostile/") && bytes.Contains(body, []byte("/hostile/")) {
			t.Errorf("GET %q: an ordinary body names /hostile/", p)
		}
	}

	get("/?from=test", 200, "")
	if diff := cmp.Diff(seen, s.Requests()); diff != "" {
		t.Errorf("Requests() differs from the requests made (-made +Requests):\n%s", diff)
	}
	total := 0
	for _, n := range seen {
		total += n
	}
	for prefix, want := range map[string]int{"/api/item/": items + 2, "/app/item/": items + 4, "/": total, "/?": 1, "/hostile/flood/r/": 2, "/zzz": 0} {
		if got := s.Seen(prefix); got != want {
			t.Errorf("Seen(%q) = %d, want %d", prefix, got, want)
		}
	}

	// The same site built again serves the same bytes.
	again := NewScriptSite(items)
	for p, body := range bodies {
		rec := httptest.NewRecorder()
		again.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if !bytes.Equal(rec.Body.Bytes(), body) {
			t.Errorf("GET %q differs between two sites", p)
		}
	}
}

func FuzzScriptSiteHandler(f *testing.F) {
	s := NewScriptSite(5)
	for _, p := range []string{"/", "/app/item/5", "/app/item/6", "/api/item/3.json", "/api/item/-1.json", "/hostile/flood/r/7", "/app/hidden"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.Path = path
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		switch rec.Code {
		case http.StatusOK:
			if rec.Header().Get("Content-Type") == "" {
				t.Errorf("GET %q: 200 without a Content-Type", path)
			}
		case http.StatusNotFound:
		default:
			t.Errorf("GET %q = %d", path, rec.Code)
		}
	})
}

// scriptBrowser starts a headless Chromium with a new empty profile and
// returns its context and the script errors its pages threw so far. Without
// a browser the test skips, or fails where one is required
// (GRIDCRAWL_REQUIRE_BROWSER=1 or GRIDCRAWL_REQUIRE_BACKENDS=1).
func scriptBrowser(t *testing.T, ctx context.Context) (context.Context, func() []string) {
	t.Helper()
	required := os.Getenv("GRIDCRAWL_REQUIRE_BROWSER") == "1" || os.Getenv("GRIDCRAWL_REQUIRE_BACKENDS") == "1"
	bin := os.Getenv("GRIDCRAWL_CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(bin); err != nil {
		msg := fmt.Sprintf("no browser at %s: install it with scripts/services/chromium.sh install (or set GRIDCRAWL_CHROMIUM)", bin)
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// Not t.TempDir: Chromium's helpers may write to their profile for a
	// moment after the browser is gone, which would fail the cleanup.
	profile, err := os.MkdirTemp("", "gridcrawl-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if err := os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("chromium profile %s left behind", profile)
	})
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
	)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	var mu sync.Mutex
	var errs []string
	chromedp.ListenTarget(bctx, func(ev any) {
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			errs = append(errs, ev.ExceptionDetails.Error())
			mu.Unlock()
		}
	})
	if err := chromedp.Run(bctx); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

// TestScriptSiteRendersInChromium renders pages in a real browser: the
// script pages gain their text, token, title and links, item 1 links the
// hidden page, and the hidden page renders.
func TestScriptSiteRendersInChromium(t *testing.T) {
	const items = 6
	s := NewScriptSite(items)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	bctx, scriptErrors := scriptBrowser(t, ctx)

	allTokens := map[string]string{}
	for _, p := range append(s.StaticPages(), s.ScriptPages()...) {
		allTokens[s.Token(p)] = p
	}
	for _, p := range []string{"/app/", "/app/item/1", "/app/item/2", "/app/item/6", hiddenLiteral, "/"} {
		var ready, text, title string
		var links []string
		actions := []chromedp.Action{chromedp.Navigate(srv.URL + p)}
		if p != "/" {
			actions = append(actions, chromedp.WaitReady(`#root[data-ready]`, chromedp.ByQuery),
				chromedp.AttributeValue(`#root`, "data-ready", &ready, nil, chromedp.ByQuery))
		}
		actions = append(actions,
			chromedp.Evaluate(`document.body.innerText`, &text),
			chromedp.Evaluate(`Array.from(document.querySelectorAll('a'), a => a.getAttribute('href'))`, &links),
			chromedp.Title(&title))
		pctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		err := chromedp.Run(pctx, actions...)
		cancel()
		if err != nil {
			t.Fatalf("render %q: %v (script errors: %q)", p, err, scriptErrors())
		}
		if p != "/" && ready != "1" {
			t.Errorf("render %q: #root data-ready=%q, want 1; text %q", p, ready, text)
		}
		ws := words(text)
		if !slices.Contains(ws, s.Token(p)) {
			t.Errorf("render %q: text lacks Token = %q:\n%s", p, s.Token(p), text)
		}
		for _, w := range ws {
			if q, ok := allTokens[w]; ok && q != p {
				t.Errorf("render %q: text holds %q, the token of %q", p, w, q)
			}
		}
		if title != s.Title(p) {
			t.Errorf("render %q: title %q, want Title = %q", p, title, s.Title(p))
		}
		if diff := cmp.Diff(s.Links(p), sortedSet(links)); diff != "" {
			t.Errorf("render %q: links differ from Links (-want +got):\n%s", p, diff)
		}
		if p == "/app/item/1" && !slices.Contains(links, hiddenLiteral) {
			t.Errorf("render %q: links %q lack %s", p, links, hiddenLiteral)
		}
		if p == "/app/" && len(links) != items {
			t.Errorf("render %q: %d links, want one per item (%d)", p, len(links), items)
		}
	}
	if errs := scriptErrors(); len(errs) != 0 {
		t.Errorf("script errors: %q", errs)
	}
	for _, p := range []string{"/app/app.js", "/app/app.css", "/api/items.json", "/api/item/1.json", "/api/hidden.json", "/static/site.css", "/static/logo.png"} {
		if s.Seen(p) == 0 {
			t.Errorf("the browser never requested %s; requests: %v", p, s.Requests())
		}
	}
}
