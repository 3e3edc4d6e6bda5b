package websim

import (
	"net/http"
	"strconv"
)

// buildSite returns the static pages of the test site, keyed by host plus
// request URI, and the robots.txt of every host. Absolute links carry port.
// The calendar trap is not here: its pages are made on request.
//
// Graph rule that keeps Expect exact whatever order a concurrent crawler
// works in: every page is linked (with a followable link) only from pages of
// one depth, or from descendants of the page that links to it first, so its
// depth does not depend on which parent is parsed first. The tests check this
// by crawling the site in many orders.
func buildSite(port int) (map[string]*page, map[string]robotsFile) {
	ps := ":" + strconv.Itoa(port)
	abs := func(host, path string) string { return "http://" + host + ps + path }
	pages := map[string]*page{}
	add := func(host, uri string, p *page) {
		if p.lang == "" && p.plain == "" {
			p.lang = "en"
		}
		pages[host+uri] = p
	}

	// www.example.test: the start host.
	add(HostWWW, "/", &page{
		title:       "Example Test home",
		description: "Home page of the example test site.",
		headings:    []string{"Welcome to Example Test", "Sections"},
		text: []string{
			"This small simulated site exists to test the gridcrawl crawler. A periwinkle grows by the door.",
			"Every corner of the site is linked from here, traps included.",
		},
		links: []link{
			{href: "/about.html", text: "About us"},
			{href: "about.html#team", text: "About us, team section"},
			{href: "http://WWW.Example.TEST" + ps + "/about.html", text: "About us, shouted"},
			{href: "HTTP://www.example.test" + ps + "/about.html#", text: "About us, again"},
			{href: "http://www.example.test" + ps, text: "Home, without a slash"},
			{href: "#top", text: "Top of this page"},
			{href: "//" + HostBlog + ps + "/", text: "Our blog"},
			{href: abs(HostDocs, "/"), text: "Documentation"},
			{href: abs(HostOther, "/"), text: "A friendly site elsewhere"},
			{href: "/private/secret.html", text: "Staff only"},
			{href: "/private/public.html", text: "Public notice"},
			{href: "/old/start", text: "Old page that moved twice"},
			{href: "/loop/a", text: "Round and round"},
			{href: "/out", text: "Leave the site"},
			{href: "/missing.html", text: "A page that is gone"},
			{href: "/error.html", text: "A page that breaks"},
			{href: "/files/readme.txt", text: "Plain text readme"},
			{href: "/links.html", text: "Link collection"},
			{href: "/noindex.html", text: "Hidden page"},
			{href: "/meta-nofollow.html", text: "Dead end page"},
			{href: "/deep/1.html", text: "Go deeper"},
			{href: calendarURI(1), text: "Event calendar"},
			{href: "mailto:info@example.test", text: "Write to us"},
			{href: "javascript:void(0)", text: "Do nothing"},
			{href: "tel:+15550100", text: "Call us"},
		},
		words: []word{{"periwinkle", "text"}},
	})
	add(HostWWW, "/about.html", &page{
		title:       "About Example Test",
		description: "Who runs the example test site.",
		headings:    []string{"About us", "Team"},
		text: []string{
			"Example Test is run by a small crew that flies a zeppelin on weekends.",
			"Meet the people behind the site.",
		},
		links: []link{
			{href: "/", text: "Home"},
			{href: "team.html", text: "Our team"},
		},
		words: []word{{"zeppelin", "text"}},
	})
	add(HostWWW, "/team.html", &page{
		title:       "The team",
		description: "People of Example Test.",
		headings:    []string{"The team"},
		text:        []string{"Our team shares a kumquat every morning."},
		links:       []link{{href: "about.html", text: "Back to about"}},
		words:       []word{{"kumquat", "text"}},
	})
	add(HostWWW, "/private/public.html", &page{
		title:       "Public notice",
		description: "The one public page under private.",
		headings:    []string{"Public notice"},
		text:        []string{"Robots may read this notice about the lighthouse, although its folder is private."},
		links: []link{
			{href: "secret.html", text: "The secret next door"},
			{href: "inner/deeper.html", text: "Deeper secrets"},
		},
		words: []word{{"lighthouse", "text"}},
	})
	add(HostWWW, "/private/secret.html", &page{
		title:    "Secret",
		headings: []string{"Secret"},
		text:     []string{"Only staff know about the nightjar."},
		words:    []word{{"nightjar", "text"}},
	})
	add(HostWWW, "/private/inner/deeper.html", &page{
		title:    "Deeper secret",
		headings: []string{"Deeper secret"},
		text:     []string{"Below the office lies a catacomb."},
		words:    []word{{"catacomb", "text"}},
	})
	// Redirect chain: 301, then 302 with a relative Location holding dot
	// segments, then the page.
	add(HostWWW, "/old/start", &page{status: http.StatusMovedPermanently, location: abs(HostWWW, "/old/middle")})
	add(HostWWW, "/old/middle", &page{status: http.StatusFound, location: "../new/end.html"})
	add(HostWWW, "/new/end.html", &page{
		title:       "Where the old page went",
		description: "Target of a redirect chain.",
		headings:    []string{"Moved here"},
		text:        []string{"You followed two redirects, like a boomerang coming home."},
		links:       []link{{href: "after.html", text: "What came after"}},
		words:       []word{{"boomerang", "text"}},
	})
	add(HostWWW, "/new/after.html", &page{
		title:    "After the move",
		headings: []string{"After the move"},
		text:     []string{"A ricochet off the redirect chain."},
		words:    []word{{"ricochet", "text"}},
	})
	// Redirect loop.
	add(HostWWW, "/loop/a", &page{status: http.StatusMovedPermanently, location: "/loop/b"})
	add(HostWWW, "/loop/b", &page{status: http.StatusFound, location: abs(HostWWW, "/loop/a")})
	// Redirect out of scope.
	add(HostWWW, "/out", &page{status: http.StatusPermanentRedirect, location: abs(HostOther, "/landing.html")})
	// Error pages, with links that must not be followed.
	add(HostWWW, "/missing.html", &page{
		status:   http.StatusNotFound,
		title:    "Not found",
		headings: []string{"Not found"},
		text:     []string{"Nothing here but vacuum."},
		links:    []link{{href: "/from-404.html", text: "Try this instead"}},
		words:    []word{{"vacuum", "text"}},
	})
	add(HostWWW, "/error.html", &page{
		status:   http.StatusInternalServerError,
		title:    "Server error",
		headings: []string{"Server error"},
		text:     []string{"The server had a meltdown."},
		links:    []link{{href: "/from-500.html", text: "Try this instead"}},
		words:    []word{{"meltdown", "text"}},
	})
	add(HostWWW, "/from-404.html", &page{title: "Linked from a 404", text: []string{"Found via a quicksand page."}, words: []word{{"quicksand", "text"}}})
	add(HostWWW, "/from-500.html", &page{title: "Linked from a 500", text: []string{"Found via a wildfire page."}, words: []word{{"wildfire", "text"}}})
	add(HostWWW, "/files/readme.txt", &page{
		plain: "README\n\nThis plain text file is a document too. Keep the tarragon fresh.\n",
		words: []word{{"tarragon", "text"}},
	})
	add(HostWWW, "/links.html", &page{
		title:       "Link collection",
		description: "Links of every kind, some of which must not be followed.",
		headings:    []string{"Link collection"},
		text:        []string{"A labyrinth of links follows."},
		links: []link{
			{href: "/nofollow-only.html", rel: "nofollow", text: "Not for robots"},
			{href: "/nofollow-too.html", rel: "noopener NoFollow", text: "Not for robots either"},
			{href: "/about.html", rel: "nofollow", text: "About us, nofollow"},
			{href: "/glossary.html", text: "The xylophonist glossary"},
			{href: "./sub/../glossary.html#g", text: "Glossary again"},
			{href: "  /spaced.html\n", text: "Spaced out"},
			{href: "/search.html?page=2&q=alpha", text: "Search results"},
			{href: "", text: "This page"},
			{raw: "<A HREF='/links.html#Bottom' REL=bookmark>Bottom of this page</A>", href: "/links.html#Bottom", rel: "bookmark"},
			{raw: "<a name=\"bottom\">No href here</a>"},
		},
		raw: "<!-- <a href=\"/commented.html\">commented out</a> -->\n" +
			"<script>document.write('<a href=\"/scripted.html\">scripted</a>');</script>\n",
		words: []word{{"labyrinth", "text"}, {"xylophonist", "anchor"}},
	})
	add(HostWWW, "/glossary.html", &page{
		title:       "Glossary",
		description: "Words we use.",
		headings:    []string{"Glossary"},
		text:        []string{"Onomastics is the study of names."},
		words:       []word{{"onomastics", "text"}},
	})
	add(HostWWW, "/spaced.html", &page{title: "Spaced", text: []string{"A hammock between two links."}, words: []word{{"hammock", "text"}}})
	add(HostWWW, "/search.html?page=2&q=alpha", &page{
		title: "Search results, page 2",
		text:  []string{"Results found by sonar."},
		words: []word{{"sonar", "text"}},
	})
	add(HostWWW, "/nofollow-only.html", &page{title: "Nofollow target", text: []string{"A hermitage no robot visits."}, words: []word{{"hermitage", "text"}}})
	add(HostWWW, "/nofollow-too.html", &page{title: "Nofollow target too", text: []string{"A recluse no robot visits."}, words: []word{{"recluse", "text"}}})
	add(HostWWW, "/commented.html", &page{title: "Commented out", text: []string{"A phantom link leads here."}, words: []word{{"phantom", "text"}}})
	add(HostWWW, "/scripted.html", &page{title: "Scripted", text: []string{"Only a marionette script links here."}, words: []word{{"marionette", "text"}}})
	add(HostWWW, "/noindex.html", &page{
		title:       "Hidden page",
		description: "Fetched and followed, never indexed.",
		metaRobots:  "noindex",
		headings:    []string{"Hidden page"},
		text:        []string{"This page wears a cloak of invisibility."},
		links:       []link{{href: "/noindex-child.html", text: "Child of the hidden page"}},
		words:       []word{{"invisibility", "text"}},
	})
	add(HostWWW, "/noindex-child.html", &page{
		title:    "Child of a hidden page",
		headings: []string{"Foundling"},
		text:     []string{"Found through a hidden page, this foundling is indexed."},
		words:    []word{{"foundling", "text"}},
	})
	add(HostWWW, "/meta-nofollow.html", &page{
		title:       "Dead end",
		description: "Indexed, but its links are not followed.",
		metaRobots:  "NOFOLLOW",
		headings:    []string{"Dead end"},
		text:        []string{"Quiet as a cloister."},
		links:       []link{{href: "/meta-nofollow-target.html", text: "Beyond the dead end"}},
		words:       []word{{"cloister", "text"}},
	})
	add(HostWWW, "/meta-nofollow-target.html", &page{title: "Beyond the dead end", text: []string{"An oubliette."}, words: []word{{"oubliette", "text"}}})
	deep := []string{"shallows", "lagoon", "reef", "kelp", "twilight", "abyss", "hadal", "trench"}
	for i, w := range deep {
		n := i + 1
		p := &page{
			title:    "Deep page " + strconv.Itoa(n),
			headings: []string{"Level " + strconv.Itoa(n)},
			text:     []string{"At this level you reach the " + w + "."},
			links:    []link{{href: "/deep/1.html", text: "Back to the first level"}},
			words:    []word{{w, "text"}},
		}
		if n < len(deep) {
			p.links = append(p.links, link{href: strconv.Itoa(n+1) + ".html", text: "One level down"})
		}
		add(HostWWW, "/deep/"+strconv.Itoa(n)+".html", p)
	}

	// blog.example.test: robots.txt is missing.
	add(HostBlog, "/", &page{
		title:       "Example blog",
		description: "Posts from the example team.",
		headings:    []string{"Example blog"},
		text:        []string{"News from the gazebo."},
		links: []link{
			{href: "/2024/first-post.html", text: "First post"},
			{href: "2024/second-post.html", text: "Second post"},
			{href: "/2024/koeln.html", text: "Greetings from Cologne"},
			{href: abs(HostWWW, "/about.html"), text: "About the authors"},
		},
		words: []word{{"gazebo", "text"}},
	})
	add(HostBlog, "/2024/first-post.html", &page{
		lang:        "de",
		title:       "Erster Beitrag",
		description: "Unser erster Beitrag.",
		headings:    []string{"Erster Beitrag"},
		text:        []string{"Heute schreiben wir über Fernweh und Reisen."},
		links:       []link{{href: "second-post.html", text: "Zweiter Beitrag"}},
		words:       []word{{"fernweh", "text"}},
	})
	add(HostBlog, "/2024/second-post.html", &page{
		lang:        "fr",
		title:       "Deuxième article",
		description: "Notre deuxième article.",
		headings:    []string{"Deuxième article"},
		text:        []string{"Nous parlons de la boulangerie du coin."},
		links:       []link{{href: "../widgets.html", text: "Gadgets"}},
		words:       []word{{"boulangerie", "text"}},
	})
	add(HostBlog, "/2024/koeln.html", &page{
		lang:        "de",
		latin1:      true,
		title:       "Grüße aus Köln",
		description: "Ein Beitrag in ISO-8859-1.",
		headings:    []string{"Grüße aus Köln"},
		text:        []string{"Auf der Domplatte ist es schön."},
		words:       []word{{"domplatte", "text"}},
	})
	add(HostBlog, "/widgets.html", &page{
		title:       "Widgets",
		description: "An iframe and an image map.",
		headings:    []string{"Widgets"},
		text:        []string{"Pure gadgetry."},
		links: []link{
			{tag: "iframe", href: "/embedded.html", text: "Embedded widget"},
			{tag: "area", href: "/area-target.html", text: "Map region"},
		},
		words: []word{{"gadgetry", "text"}},
	})
	add(HostBlog, "/embedded.html", &page{title: "Embedded", text: []string{"A matryoshka inside a page."}, words: []word{{"matryoshka", "text"}}})
	add(HostBlog, "/area-target.html", &page{title: "Map region", text: []string{"The cartography of an image map."}, words: []word{{"cartography", "text"}}})

	// docs.example.test.
	add(HostDocs, "/", &page{
		title:       "Example documentation",
		description: "Manuals of Example Test.",
		headings:    []string{"Documentation"},
		text:        []string{"A compendium of manuals."},
		images:      []image{{src: "/img/logo.png", alt: "Example logo"}, {src: abs(HostWWW, "/banner.gif")}, {src: "/img/logo.png", alt: "again"}},
		keywords:    "manuals, documentation,guide",
		author:      "The  Docs Team",
		links: []link{
			{href: "/guide/", text: "Guide"},
			{href: "/drafts/next.html", text: "Next release notes"},
			{href: "/frames.html", text: "Framed manual"},
			{href: "/base/page.html", text: "Page with a base"},
			{href: "/notes.tmp", text: "Scratch notes"},
			{href: "/notes.tmp.html", text: "Meeting notes"},
			{href: abs(HostWWW, "/"), text: "Back to the home page"},
		},
		words: []word{{"compendium", "text"}},
	})
	add(HostDocs, "/guide/", &page{
		title:       "Guide",
		description: "How to use Example Test.",
		headings:    []string{"Guide"},
		text:        []string{"Wayfinding for beginners."},
		links: []link{
			{href: "intro.html", text: "Introduction"},
			{href: "../drafts/old.html", text: "Old draft"},
		},
		words: []word{{"wayfinding", "text"}},
	})
	add(HostDocs, "/guide/intro.html", &page{title: "Introduction", headings: []string{"Introduction"}, text: []string{"A short prologue."}, words: []word{{"prologue", "text"}}})
	add(HostDocs, "/guide/setup.html", &page{title: "Setup", headings: []string{"Setup"}, text: []string{"Put up the scaffolding first."}, words: []word{{"scaffolding", "text"}}})
	add(HostDocs, "/drafts/next.html", &page{title: "Draft", text: []string{"Still embryonic."}, words: []word{{"embryonic", "text"}}})
	add(HostDocs, "/drafts/old.html", &page{title: "Old draft", text: []string{"An old fossil."}, words: []word{{"fossil", "text"}}})
	add(HostDocs, "/frames.html", &page{
		title:       "Framed diptych manual",
		description: "A manual in two frames.",
		frameset:    true,
		links: []link{
			{tag: "frame", href: "frame-a.html"},
			{tag: "frame", href: "/frame-b.html"},
		},
		words: []word{{"diptych", "title"}},
	})
	add(HostDocs, "/frame-a.html", &page{title: "Left frame", text: []string{"A portico on the left."}, words: []word{{"portico", "text"}}})
	add(HostDocs, "/frame-b.html", &page{title: "Right frame", text: []string{"A pergola on the right."}, words: []word{{"pergola", "text"}}})
	add(HostDocs, "/base/page.html", &page{
		title:       "Page with a base",
		description: "Relative links resolve against the base element.",
		base:        abs(HostDocs, "/guide/"),
		headings:    []string{"Base"},
		text:        []string{"The cornerstone of relative links."},
		links: []link{
			{href: "setup.html", text: "Setup"},
			{href: "intro.html", text: "Introduction"},
		},
		words: []word{{"cornerstone", "text"}},
	})
	add(HostDocs, "/notes.tmp", &page{plain: "scratchpad notes\n", words: []word{{"scratchpad", "text"}}})
	add(HostDocs, "/notes.tmp.html", &page{title: "Meeting notes", text: []string{"Minutes in a memorandum."}, words: []word{{"memorandum", "text"}}})

	// other.test: outside the crawl's domain.
	add(HostOther, "/", &page{title: "Elsewhere", text: []string{"An outlander site."}, links: []link{{href: "/landing.html", text: "Landing"}}, words: []word{{"outlander", "text"}}})
	add(HostOther, "/landing.html", &page{title: "Landing", text: []string{"You reached a faraway landing."}, words: []word{{"faraway", "text"}}})

	robots := map[string]robotsFile{
		HostWWW: {
			header: "# robots.txt of www.example.test",
			groups: []robotsGroup{
				{comment: "a group for another robot, which gridcrawl must ignore", agents: []string{"examplebot"}, rules: []robotsRule{{false, "/"}}},
				{agents: []string{"*"}, rules: []robotsRule{{false, "/private/"}, {true, "/private/public.html"}}},
			},
			footer: "Sitemap: " + abs(HostWWW, "/sitemap.xml"),
		},
		HostBlog: {missing: true},
		HostDocs: {
			header: "# robots.txt of docs.example.test",
			groups: []robotsGroup{
				{agents: []string{"otherbot", "*"}, rules: []robotsRule{{false, "/drafts/"}, {false, "/*.tmp$"}, {false, ""}}},
			},
		},
		HostOther: {groups: []robotsGroup{{agents: []string{"*"}, rules: []robotsRule{{true, "/"}}}}},
	}
	return pages, robots
}
