package websim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ScriptFloodRequests is how many fetches the /hostile/flood page's script
// starts, each to /hostile/flood/r/<i>.
const ScriptFloodRequests = 10_000

// Paths and media types of ScriptSite.
const (
	scriptApp       = "/app/"
	scriptItem      = "/app/item/"
	scriptItemJSON  = "/api/item/" // + N + ".json"
	scriptFloodHits = "/hostile/flood/r/"
	ctJSON          = "application/json"
	ctJS            = "text/javascript; charset=utf-8"
	ctCSS           = "text/css; charset=utf-8"
)

// ScriptSite is one host's site whose pages partly exist only after
// scripts run: a few static pages, a single-page app whose shell holds no
// text or links until app.js fetches JSON and builds them, one app page
// that only a script-made link reaches, and hostile pages whose scripts
// never finish, flood the server, exhaust memory or reach for private
// addresses. It serves every request on any host name with paths relative
// to its root, so it runs under httptest on loopback.
//
// The expectation methods (StaticPages, ScriptPages, ShellPages, Token,
// Title, Links) describe what a browser that runs the scripts sees and what
// a plain HTTP fetch sees. They come from the site's page tables, not from
// parsing what the handler serves (app.js builds the rendered pages on its
// own), and the package tests check both against plain fetches and against
// Chromium, so loader tests can hold a loader to them.
//
// A script page is rendered when app.js has set data-ready="1" on #root
// (data-ready="error" when a JSON fetch failed).
//
// Every body is deterministic. A ScriptSite is safe for concurrent use;
// create it with NewScriptSite.
type ScriptSite struct {
	items    int
	statics  []scriptPage // home first
	hostiles []scriptPage
	files    map[string]scriptFile // fixed bodies by path: static, shells, assets, hostile, index JSON

	mu   sync.Mutex
	reqs map[string]int // request URI to count
}

// scriptFile is one fixed answer.
type scriptFile struct {
	ctype string
	body  []byte
}

// NewScriptSite returns a site whose app lists items item pages
// (/app/item/1 to /app/item/items); items below 1 count as 1.
func NewScriptSite(items int) *ScriptSite {
	s := &ScriptSite{
		items: max(items, 1), statics: scriptStatics(), hostiles: scriptHostiles(),
		files: map[string]scriptFile{}, reqs: map[string]int{},
	}
	for _, p := range s.statics {
		s.files[p.path] = scriptFile{ctHTML, p.render()}
	}
	shell := scriptShell()
	for _, p := range s.ScriptPages() {
		s.files[p] = scriptFile{ctHTML, shell}
	}
	for _, p := range s.hostiles {
		s.files[p.path] = scriptFile{ctHTML, p.render()}
	}
	s.files["/robots.txt"] = scriptFile{ctText, []byte("# every robot is welcome\nUser-agent: *\nAllow: /\n")}
	s.files["/static/site.css"] = scriptFile{ctCSS, []byte(scriptSiteCSS)}
	s.files["/static/logo.png"] = scriptFile{"image/png", []byte(scriptLogo)}
	s.files["/app/app.js"] = scriptFile{ctJS, []byte(scriptAppJS)}
	s.files["/app/app.css"] = scriptFile{ctCSS, []byte(scriptAppCSS)}
	s.files["/api/items.json"] = scriptFile{ctJSON, s.indexJSON()}
	s.files["/api/hidden.json"] = scriptFile{ctJSON, mustJSON(scriptHiddenDoc())}
	return s
}

// ServeHTTP answers one request and counts it. Unknown paths, item numbers
// outside 1..items included, answer 404; methods other than GET and HEAD
// answer 405.
func (s *ScriptSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs[r.URL.RequestURI()]++
	s.mu.Unlock()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	f, ok := s.files[p]
	switch {
	case ok:
	case strings.HasPrefix(p, scriptItemJSON) && strings.HasSuffix(p, ".json"):
		n, valid := s.itemNumber(strings.TrimSuffix(strings.TrimPrefix(p, scriptItemJSON), ".json"))
		if !valid {
			http.NotFound(w, r)
			return
		}
		f = scriptFile{ctJSON, mustJSON(s.itemDoc(n))}
	case strings.HasPrefix(p, scriptFloodHits):
		f = scriptFile{ctText, []byte("ok\n")}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(f.body)
}

// itemNumber parses an item number as the site spells it: decimal without
// sign or leading zeros, within 1..items.
func (s *ScriptSite) itemNumber(v string) (int, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > s.items || strconv.Itoa(n) != v {
		return 0, false
	}
	return n, true
}

// Requests returns every request seen so far, by request URI (path and
// "?query" if any), counted; 404s and robots.txt included.
func (s *ScriptSite) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.reqs))
	for k, v := range s.reqs {
		out[k] = v
	}
	return out
}

// Seen returns how many requests so far had a request URI starting with
// prefix.
func (s *ScriptSite) Seen(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.reqs {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// StaticPages returns the pages whose text and links are in their HTML:
// "/", "/static/a.html", "/static/b.html", "/static/c.html". Each is over 2
// KB with over 500 characters of visible text, and links its stylesheet
// /static/site.css and image /static/logo.png.
func (s *ScriptSite) StaticPages() []string {
	out := make([]string, len(s.statics))
	for i, p := range s.statics {
		out[i] = p.path
	}
	return out
}

// ScriptPages returns the pages that are shells without scripts: "/app/",
// "/app/item/1" to "/app/item/<items>", and "/app/hidden". Their HTML is
// one shell (an empty #root, a noscript notice, app.css and app.js) holding
// none of their text, tokens or links.
func (s *ScriptSite) ScriptPages() []string {
	out := make([]string, 0, s.items+2)
	out = append(out, scriptApp)
	for i := 1; i <= s.items; i++ {
		out = append(out, scriptItem+strconv.Itoa(i))
	}
	return append(out, scriptHiddenPath())
}

// ShellPages returns the script pages a crawl reaches without running
// scripts, because static HTML links them: "/app/".
func (s *ScriptSite) ShellPages() []string { return []string{scriptApp} }

// HostilePages returns the hostile pages, which no other page links:
// "/hostile/loop" (a script that never returns), "/hostile/flood" (a
// script that starts ScriptFloodRequests fetches of /hostile/flood/r/<i>),
// "/hostile/oom" (a script that allocates until the tab dies),
// "/hostile/private" (a script that navigates to a private address) and
// "/hostile/private2" (a fetch of a link-local metadata address and an
// image on a private address). Each has static text holding its token
// before its script.
func (s *ScriptSite) HostilePages() []string {
	out := make([]string, len(s.hostiles))
	for i, p := range s.hostiles {
		out[i] = p.path
	}
	return out
}

// ForbiddenURLs returns the URLs the hostile pages make a browser reach
// for. None is on this machine; a loader must never request them.
func (s *ScriptSite) ForbiddenURLs() []string {
	return []string{"http://10.255.255.1/secret", "http://10.255.255.1/x.png", "http://169.254.169.254/latest/meta-data/"}
}

// Token returns the word unique to the page at path: letters and digits
// only, in the page's HTML for static and hostile pages, in its text only
// after rendering for script pages. No token is a substring of another.
// It returns "" for a path that is not a page.
func (s *ScriptSite) Token(path string) string {
	if p := s.static(path); p != nil {
		return p.token
	}
	if p := s.hostile(path); p != nil {
		return p.token
	}
	switch {
	case path == scriptApp:
		return scriptAppToken
	case path == scriptHiddenPath():
		return scriptHiddenDoc().Token
	case strings.HasPrefix(path, scriptItem):
		if n, ok := s.itemNumber(strings.TrimPrefix(path, scriptItem)); ok {
			return itemToken(n)
		}
	}
	return ""
}

// Title returns the page's title: from its HTML for static and hostile
// pages, as the script sets it for script pages (whose shell's title is
// "Loading"). It returns "" for a path that is not a page.
func (s *ScriptSite) Title(path string) string {
	if p := s.static(path); p != nil {
		return p.title
	}
	if p := s.hostile(path); p != nil {
		return p.title
	}
	switch {
	case path == scriptApp:
		return scriptAppTitle
	case path == scriptHiddenPath():
		return scriptHiddenDoc().Title
	case strings.HasPrefix(path, scriptItem):
		if n, ok := s.itemNumber(strings.TrimPrefix(path, scriptItem)); ok {
			return itemTitle(n)
		}
	}
	return ""
}

// Links returns the distinct href values of the page's <a> elements, sorted
// (all root-relative): from its HTML for static pages, after rendering for
// script pages. Item 1 is the only page linking "/app/hidden". Hostile pages
// link nothing. It returns nil for a path that is not a page.
func (s *ScriptSite) Links(path string) []string {
	var out []string
	if p := s.static(path); p != nil {
		for _, l := range p.links {
			out = append(out, l.href)
		}
	} else if s.hostile(path) != nil {
		return []string{}
	} else {
		switch {
		case path == scriptApp:
			for i := 1; i <= s.items; i++ {
				out = append(out, scriptItem+strconv.Itoa(i))
			}
		case path == scriptHiddenPath():
			out = []string{scriptApp, "/"}
		case strings.HasPrefix(path, scriptItem):
			n, ok := s.itemNumber(strings.TrimPrefix(path, scriptItem))
			if !ok {
				return nil
			}
			out = []string{scriptApp}
			if n > 1 {
				out = append(out, scriptItem+strconv.Itoa(n-1))
			}
			if n < s.items {
				out = append(out, scriptItem+strconv.Itoa(n+1))
			}
			if n == 1 {
				out = append(out, scriptHiddenPath())
			}
		default:
			return nil
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// scriptHiddenPath is the page only a script-made link reaches. It is built
// here rather than written out so that the one place its literal appears
// stays out of every served body by construction too.
func scriptHiddenPath() string { return scriptApp + "hid" + "den" }

// scriptDoc is the JSON app.js renders: a page's title, paragraphs and
// token, and for the app's index the items, for an item its neighbours.
type scriptDoc struct {
	ID         int           `json:"id,omitempty"`
	Title      string        `json:"title"`
	Token      string        `json:"token"`
	Paragraphs []string      `json:"paragraphs"`
	Prev       int           `json:"prev,omitempty"`
	Next       int           `json:"next,omitempty"`
	Items      []scriptEntry `json:"items,omitempty"`
}

// scriptEntry is one item of the app's index.
type scriptEntry struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
}

const (
	scriptAppToken = "zqxappx"
	scriptAppTitle = "Harbour Museum catalogue"
)

func itemToken(n int) string { return "zqxitem" + strconv.Itoa(n) + "x" }

func itemTitle(n int) string {
	return fmt.Sprintf("Item %d: %s", n, scriptObjects[(n-1)%len(scriptObjects)])
}

func (s *ScriptSite) indexJSON() []byte {
	d := scriptDoc{
		Title: scriptAppTitle,
		Token: scriptAppToken,
		Paragraphs: []string{
			"The catalogue lists every object the Harbour Museum keeps in its stores and galleries, from ship's bells and charts to the everyday tools of the people who worked on the quays. Each entry gives the object's story as far as the museum knows it, how it reached the collection and what the conservators found when they examined it.",
			"Choose an object below to read its entry. The entries are numbered in the order the objects were registered, and each one links to the entries before and after it so that you can walk through the stores shelf by shelf.",
		},
	}
	for i := 1; i <= s.items; i++ {
		d.Items = append(d.Items, scriptEntry{ID: i, Title: itemTitle(i)})
	}
	return mustJSON(d)
}

func (s *ScriptSite) itemDoc(n int) scriptDoc {
	obj := scriptObjects[(n-1)%len(scriptObjects)]
	from := scriptPlaces[(n*7)%len(scriptPlaces)]
	year := 1840 + (n*13)%90
	d := scriptDoc{
		ID:    n,
		Title: itemTitle(n),
		Token: itemToken(n),
		Paragraphs: []string{
			fmt.Sprintf("Object number %d in the catalogue is a %s that came to the museum from %s. It was made around %d and carries the wear of long use at sea and on the quays, where salt, damp and hard work left their marks on every surface.", n, obj, from, year),
			fmt.Sprintf("The conservators cleaned the %s by hand in the museum workshop, recorded its condition in photographs and notes, and repaired only what was needed to stop further decay. %s", obj, scriptRemarks[n%len(scriptRemarks)]),
		},
	}
	if n > 1 {
		d.Prev = n - 1
	}
	if n < s.items {
		d.Next = n + 1
	}
	return d
}

func scriptHiddenDoc() scriptDoc {
	return scriptDoc{
		Title: "The store room below the galleries",
		Token: "zqxhiddenx",
		Paragraphs: []string{
			"Below the galleries lies the store room where the museum keeps the objects that are too large, too fragile or too numerous to show. Shelves of crates run the length of the old warehouse, each labelled by hand with the numbers of the objects inside.",
			"Visitors rarely see this room. It opens for guided tours on the first Saturday of each month, when one of the conservators explains how the collection is cared for and which objects are waiting for their turn in the workshop.",
		},
	}
}

// mustJSON encodes v, whose types cannot fail to encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("websim: encode script site JSON: %v", err))
	}
	return b
}

var (
	scriptObjects = []string{
		"brass ship's bell", "hand-drawn chart of the estuary", "cork life jacket", "whaler's logbook",
		"lighthouse lens prism", "rope-maker's spinning wheel", "fisherman's knitted jumper",
		"customs officer's ledger", "steam tug's pressure gauge", "model of a three-masted barque",
		"sailmaker's palm and needle", "tin of ship's biscuits", "pilot's brass telescope", "diver's copper helmet",
	}
	scriptPlaces = []string{
		"the north quay", "a coaster wrecked off the point", "the old customs house", "a Baltic timber ship",
		"the pilot station", "the ropewalk by the river", "a herring drifter", "the harbour master's office",
		"a family of lock keepers", "the lifeboat house",
	}
	scriptRemarks = []string{
		"It now stands in the first gallery, next to the window that looks out over the harbour mouth.",
		"Its label was rewritten after a visitor recognised the name of her grandfather on it.",
		"It travels each summer to the maritime festival, where children are allowed to handle a replica.",
		"The museum is still looking for photographs that show it in use; letters about it are welcome.",
		"It is kept in the store room and can be seen on request by appointment with the curator.",
	}
)

// scriptPage is a page whose HTML is fixed: a static page or a hostile one.
type scriptPage struct {
	path, title, token string
	paras              []string
	links              []scriptLink
	head, tail         string // raw HTML before </head> and before </body>
}

type scriptLink struct{ href, text string }

func (p *scriptPage) render() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n%s</head>\n<body>\n", html.EscapeString(p.title), p.head)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(p.title))
	for _, t := range p.paras {
		fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(t))
	}
	fmt.Fprintf(&b, "<p>Reference word for this page: %s.</p>\n", p.token)
	if len(p.links) > 0 {
		b.WriteString("<nav>\n<ul>\n")
		for _, l := range p.links {
			fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(l.href), html.EscapeString(l.text))
		}
		b.WriteString("</ul>\n</nav>\n")
	}
	b.WriteString(p.tail)
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// static returns the static page at path, or nil.
func (s *ScriptSite) static(path string) *scriptPage { return findPage(s.statics, path) }

// hostile returns the hostile page at path, or nil.
func (s *ScriptSite) hostile(path string) *scriptPage { return findPage(s.hostiles, path) }

func findPage(pages []scriptPage, path string) *scriptPage {
	for i := range pages {
		if pages[i].path == path {
			return &pages[i]
		}
	}
	return nil
}

const scriptStaticHead = "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<link rel=\"stylesheet\" href=\"/static/site.css\">\n"

const scriptStaticLogo = "<footer><img src=\"/static/logo.png\" alt=\"Harbour Museum logo\" width=\"16\" height=\"16\"> Harbour Museum, Quay Street.</footer>\n"

// scriptStatics returns the static pages, home first. Their text is written
// out so that every page carries several real paragraphs.
func scriptStatics() []scriptPage {
	pages := []scriptPage{
		{
			path: "/", title: "Harbour Museum", token: "zqxhomex",
			paras: []string{
				"The Harbour Museum tells the story of the port and the people who made their living from it: fishermen and pilots, rope makers and customs officers, the families who kept the locks and the crews who sailed the coasters up and down the coast for two hundred years.",
				"The museum occupies the old grain warehouse on Quay Street. Its three floors hold permanent galleries on fishing, trade and the lifeboat service, a workshop where conservators repair the collection in view of visitors, and a reading room with the harbour board's records.",
				"Entry is free. The galleries are open every day except Mondays, and the reading room opens on weekday mornings for anyone who wants to consult the records, trace a family member who worked in the port or study the charts and ship plans.",
				"Our online catalogue describes every object in the collection, including the many that are kept in the stores. It is a small web application and needs a browser with scripts enabled.",
				"This season the first gallery shows a new display on the lifeboat crews of the port, with the oars, oilskins and medals of the men and women who rowed out in all weathers. Their logbooks, lent by the lifeboat station, record every launch since 1871, and volunteers read extracts aloud on Sunday afternoons.",
				"The museum café on the ground floor serves soup, sandwiches and cakes baked in the town, and its tables by the hoist doors look straight onto the water. The shop sells charts, books about the coast and prints from the photograph archive.",
			},
			links: []scriptLink{{"/static/a.html", "Visiting the museum"}, {"/static/b.html", "The collection"}, {"/app/", "Online catalogue"}},
		},
		{
			path: "/static/a.html", title: "Visiting the museum", token: "zqxstaticax",
			paras: []string{
				"The museum opens from ten in the morning until five in the afternoon, Tuesday to Sunday, and until eight on Thursdays in summer. The last admission is half an hour before closing, and the workshop gallery closes at four so that the conservators can put their work away.",
				"The entrance is on Quay Street, opposite the swing bridge. Visitors with pushchairs or wheelchairs can use the ramp at the side door; lifts serve every floor, and the staff at the desk lend folding stools and large-print guides.",
				"Groups of more than ten people are asked to book a week ahead. School groups can take part in a morning of activities in the education room, where children tie knots, read a chart and try on a pilot's oilskins.",
				"Guided tours of the galleries leave from the desk at eleven and at two, last about an hour and are included in the free entry. Tours of the store room below the galleries run once a month and must be booked, as the room holds no more than twelve visitors at a time.",
				"The nearest car park is on Dock Road, five minutes' walk along the river; the railway station is ten minutes away, and the harbour ferry stops at the museum's own landing stage every half hour from Easter until the end of October.",
				"Dogs other than assistance dogs are welcome in the café and the courtyard but not in the galleries. Photography without flash is allowed everywhere except in the reading room, where the records are kept in low light to protect the ink and the paper.",
			},
			links: []scriptLink{{"/", "Home"}, {"/static/b.html", "The collection"}, {"/static/c.html", "The building"}},
		},
		{
			path: "/static/b.html", title: "The collection", token: "zqxstaticbx",
			paras: []string{
				"The collection holds some twelve thousand objects, from a fifteen-metre herring drifter that stands in the courtyard to buttons cut from the uniforms of harbour police. Most were given by families of the port; others were found during dredging or came from ships broken up in the yard.",
				"The galleries show only a small part of it at any time. The rest is kept in the store room below the galleries, where every object has a shelf, a number and an entry in the catalogue, and where the conservators decide which objects need care first.",
				"Researchers may ask to see objects in store. Write to the curator with the catalogue numbers you are interested in and the reason for your visit, and allow two weeks for the objects to be brought up and prepared.",
				"The museum collects actively. It is looking in particular for objects from the container era, when the old quays closed and the work moved downstream, and for photographs, letters and recorded memories of the people who lived through the change.",
				"Offers of objects are considered by the collections committee, which meets four times a year. It accepts what fills a gap in the story of the port and what the museum can look after properly, and it explains its decision to every donor.",
				"Much of the collection has been photographed and described by volunteers over the last ten years. Their work fills the online catalogue, and each new entry is checked by a curator against the register kept in the museum since it opened.",
			},
			links: []scriptLink{{"/", "Home"}, {"/static/a.html", "Visiting the museum"}, {"/static/c.html", "The building"}},
		},
		{
			path: "/static/c.html", title: "The building", token: "zqxstaticcx",
			paras: []string{
				"The grain warehouse was built in 1868 for a merchant who shipped barley to the breweries along the coast. Its brick walls are nearly a metre thick at the base, and the cast iron columns on each floor still carry the marks of the foundry that made them.",
				"After the grain trade moved to the new docks the building served as a store for nets, a garage for the harbour board's lorries and, during the war, a shelter. It stood empty for twenty years before the town bought it and the museum opened in its ground floor.",
				"The restoration kept the hoist doors on every floor and the wooden crane on the roof. On clear days visitors can climb to the top floor and see across the harbour to the lighthouse and the sandbanks beyond the bar.",
				"The roof was rebuilt in 2004 with slates from the same quarry as the original ones, and the timbers that could be saved were put back in their places. Bats roost under the eaves each summer, and the museum keeps the attic closed from May to September to leave them in peace.",
				"The warehouse is a listed building. Any change to its walls, windows or floors needs the consent of the planning office, which is why the lifts were built in a new tower at the back rather than cut through the old floors.",
				"Every spring the museum opens the warehouse's cellars for one weekend. They still hold the iron rings where barges were moored at high tide, before the river wall was raised and the water no longer reached the building's foundations.",
			},
			links: []scriptLink{{"/", "Home"}, {"/static/a.html", "Visiting the museum"}, {"/static/b.html", "The collection"}},
		},
	}
	for i := range pages {
		pages[i].head, pages[i].tail = scriptStaticHead, scriptStaticLogo
	}
	return pages
}

// scriptHostiles returns the hostile pages; each script comes after the
// text.
func scriptHostiles() []scriptPage {
	return []scriptPage{
		{
			path: "/hostile/loop", title: "A script that never ends", token: "zqxloopx",
			paras: []string{"This page's script loops forever, so the tab never becomes idle and its load never settles."},
			tail:  "<script>while(true){}</script>\n",
		},
		{
			path: "/hostile/flood", title: "A script that floods the server", token: "zqxfloodx",
			paras: []string{fmt.Sprintf("This page's script starts %d requests at once, each for a tiny answer.", ScriptFloodRequests)},
			tail:  fmt.Sprintf("<script>\nfor (var i = 0; i < %d; i++) {\n  fetch('/hostile/flood/r/' + i).catch(function () {});\n}\n</script>\n", ScriptFloodRequests),
		},
		{
			path: "/hostile/oom", title: "A script that eats memory", token: "zqxoomx",
			paras: []string{"This page's script keeps large arrays in a global list until the tab runs out of memory."},
			tail:  "<script>\nvar hog = [];\nfor (;;) {\n  hog.push(new Array(1 << 20).fill(hog.length + 0.5));\n}\n</script>\n",
		},
		{
			path: "/hostile/private", title: "A script that goes to a private address", token: "zqxprivatex",
			paras: []string{"This page's script sends the tab to an address on a private network."},
			tail:  "<script>location.href = 'http://10.255.255.1/secret';</script>\n",
		},
		{
			path: "/hostile/private2", title: "Requests for private addresses", token: "zqxprivatetwox",
			paras: []string{"This page loads an image from a private network and its script asks a cloud metadata address for credentials."},
			tail:  "<img src=\"http://10.255.255.1/x.png\" alt=\"\">\n<script>fetch('http://169.254.169.254/latest/meta-data/').catch(function () {});</script>\n",
		},
	}
}

// scriptShell is the HTML of every script page.
func scriptShell() []byte {
	return []byte(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Loading</title>
<link rel="stylesheet" href="/app/app.css">
</head>
<body>
<div id="root"></div>
<noscript>You need to enable JavaScript to run this app.</noscript>
<script src="/app/app.js"></script>
</body>
</html>
`)
}

// scriptAppJS renders every script page from the JSON of its path: /app/
// from /api/items.json, /app/item/N from /api/item/N.json, any other
// /app/NAME from /api/NAME.json. The link to the hidden page is put
// together from pieces, so that no served body holds its path.
const scriptAppJS = `(function () {
  'use strict';
  var root = document.getElementById('root');
  var parts = location.pathname.split('/');

  function el(tag, text) {
    var e = document.createElement(tag);
    if (text) e.textContent = text;
    return e;
  }
  function link(href, text) {
    var a = el('a', text);
    a.setAttribute('href', href);
    return a;
  }
  function load(url) {
    return fetch(url).then(function (r) {
      if (!r.ok) throw new Error(url + ': ' + r.status);
      return r.json();
    });
  }
  function page(d) {
    document.title = d.title;
    root.appendChild(el('h1', d.title));
    d.paragraphs.forEach(function (t) { root.appendChild(el('p', t)); });
    var ref = el('p', 'Catalogue reference ' + d.token + '.');
    ref.className = 'token';
    root.appendChild(ref);
  }
  function nav(links) {
    var n = el('nav');
    links.forEach(function (l) { n.appendChild(link(l[0], l[1])); n.appendChild(document.createTextNode(' ')); });
    root.appendChild(n);
  }

  var view;
  if (parts[2] === '') {
    view = load('/api/items.json').then(function (d) {
      page(d);
      var ul = el('ul'), frag = document.createDocumentFragment();
      d.items.forEach(function (it) {
        var li = el('li');
        li.appendChild(link('/app/item/' + it.id, it.title));
        frag.appendChild(li);
      });
      ul.appendChild(frag);
      root.appendChild(ul);
    });
  } else if (parts[2] === 'item') {
    view = load('/api/item/' + parts[3] + '.json').then(function (d) {
      page(d);
      var links = [['/app/', 'Catalogue']];
      if (d.prev) links.push(['/app/item/' + d.prev, 'Previous object']);
      if (d.next) links.push(['/app/item/' + d.next, 'Next object']);
      if (d.id === 1) links.push(['/app/' + ['hid', 'den'].join(''), 'Below the galleries']);
      nav(links);
    });
  } else {
    view = load('/api/' + parts[2] + '.json').then(function (d) {
      page(d);
      nav([['/app/', 'Catalogue'], ['/', 'Museum home']]);
    });
  }
  view.then(function () {
    root.setAttribute('data-ready', '1');
  }, function (err) {
    root.textContent = 'Could not load this page: ' + err.message;
    root.setAttribute('data-ready', 'error');
  });
})();
`

const scriptAppCSS = `body { font-family: Georgia, serif; margin: 2em auto; max-width: 42em; color: #1d2a33; }
h1 { color: #0b4f6c; }
.token { font-size: 0.8em; color: #55656f; }
nav a { margin-right: 1em; }
`

const scriptSiteCSS = `body { font-family: Georgia, serif; margin: 2em auto; max-width: 42em; line-height: 1.5; }
h1 { color: #0b4f6c; border-bottom: 2px solid #0b4f6c; }
nav ul { list-style: none; padding: 0; }
nav li { display: inline; margin-right: 1em; }
footer { margin-top: 3em; font-size: 0.85em; color: #55656f; }
`

// scriptLogo is a 16x16 two-colour PNG (a blue square with a white band),
// as image/png encodes it.
const scriptLogo = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x01\x03\x00\x00\x00%=m\"\x00\x00\x00\x06PLTE\vOl\xff\xff\xffdM\xe8=\x00\x00\x00\x14IDATx\xdab\xc0\x04\xff\xff#\x10\x06\x00\x04\x00\x00\xff\xff\xbfp\a\xf9\xb9\xc4\xc3:\x00\x00\x00\x00IEND\xaeB`\x82"
