package yacydoc

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/extract"
)

func TestPathParts(t *testing.T) {
	for _, tc := range []struct {
		path, name, ext string
		dirs            []string
	}{
		{"/", "", "", nil},
		{"", "", "", nil},
		{"/docs/", "", "", []string{"docs"}},
		{"/docs/Guide.HTML", "Guide", "html", []string{"docs"}},
		{"/a/b/c.tar.gz", "c.tar", "gz", []string{"a", "b"}},
		{"/.profile", ".profile", "", nil},
		{"/notes.tmp.html", "notes.tmp", "html", nil},
		{"/x.not-an-ext", "x.not-an-ext", "", nil},
		{"/x.abcdefghijklmnopq", "x.abcdefghijklmnopq", "", nil}, // 17 letters: not a file type
		{"/caf%C3%A9/men%C3%BC.php", "menü", "php", []string{"café"}},
		{"/bad%ff/x", "x", "", []string{"bad\uFFFD"}},
	} {
		dirs, name, ext := pathParts(tc.path)
		if !cmp.Equal(dirs, tc.dirs, cmpopts.EquateEmpty()) || name != tc.name || ext != tc.ext {
			t.Errorf("pathParts(%q) = %q, %q, %q, want %q, %q, %q", tc.path, dirs, name, ext, tc.dirs, tc.name, tc.ext)
		}
	}
}

func TestLinkHost(t *testing.T) {
	for u, want := range map[string]string{
		"http://example.com/":                    "example.com",
		"https://user:pw@Example.com:8443/x?y#z": "Example.com",
		"http://[::1]:8080/":                     "::1",
		"http://example.com.":                    "example.com",
		"http://a.example?q":                     "a.example",
		"mailto:x@y":                             "",
	} {
		if got := linkHost(u); got != want {
			t.Errorf("linkHost(%q) = %q, want %q", u, got, want)
		}
	}
}

func TestOrganization(t *testing.T) {
	for ssld, want := range map[string]string{"example.co.uk": "example", "example.test": "example", "127.0.0.1": "127.0.0.1", "::1": "::1", "localhost": "localhost"} {
		if got := organization(ssld); got != want {
			t.Errorf("organization(%q) = %q, want %q", ssld, got, want)
		}
	}
}

func TestHeaderRobots(t *testing.T) {
	for _, tc := range []struct {
		values   []string
		all, own int
	}{
		{nil, 0, 0},
		{[]string{"noindex"}, contracts.RobotsHeaderNoIndex, contracts.RobotsHeaderNoIndex},
		{[]string{"NoIndex, NOFOLLOW"}, contracts.RobotsHeaderNoIndex | contracts.RobotsHeaderNoFollow, contracts.RobotsHeaderNoIndex | contracts.RobotsHeaderNoFollow},
		{[]string{"none"}, contracts.RobotsHeaderNoIndex | contracts.RobotsHeaderNoFollow, contracts.RobotsHeaderNoIndex | contracts.RobotsHeaderNoFollow},
		{[]string{"otherbot: noindex", "noarchive"}, contracts.RobotsHeaderNoIndex | contracts.RobotsHeaderNoArchive, contracts.RobotsHeaderNoArchive},
		{[]string{"unavailable_after: 25 Jun 2010 15:00:00 PST", "all, nosnippet, noodp, notranslate, noimageindex"},
			contracts.RobotsHeaderUnavailableAfter | contracts.RobotsHeaderAll | contracts.RobotsHeaderNoSnippet | contracts.RobotsHeaderNoODP | contracts.RobotsHeaderNoTranslate | contracts.RobotsHeaderNoImageIndex,
			contracts.RobotsHeaderUnavailableAfter | contracts.RobotsHeaderAll | contracts.RobotsHeaderNoSnippet | contracts.RobotsHeaderNoODP | contracts.RobotsHeaderNoTranslate | contracts.RobotsHeaderNoImageIndex},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add("X-Robots-Tag", v)
		}
		all, own := HeaderRobots(h)
		if all != tc.all || own != tc.own {
			t.Errorf("HeaderRobots(%q) = %#x, %#x, want %#x, %#x", tc.values, all, own, tc.all, tc.own)
		}
	}
}

func TestLastModified(t *testing.T) {
	loaded := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Time{
		"":                              loaded,
		"Sun, 22 Nov 2026 08:00:00 GMT": time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC),
		"Tue, 24 Nov 2026 08:00:00 GMT": loaded, // in the future
		"yesterday":                     loaded,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Last-Modified", v)
		}
		if got := lastModified(h, loaded); !got.Equal(want) {
			t.Errorf("lastModified(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestDocumentSides checks inbound and outbound links, their anchor texts
// and nofollow counts on a hand-made extraction.
func TestDocumentSides(t *testing.T) {
	u, _ := url.Parse("https://www.example.co.uk/a/b.html")
	res := extract.Result{
		Title: "", Text: "one two three",
		Headings: []string{"H", "S", "T"}, HeadingLevels: []int{1, 3, 3},
		Links: []contracts.Link{
			{URL: "https://www.example.co.uk/", Text: "Home"},
			{URL: "https://example.co.uk/", Text: "Apex"}, // another host: outbound, as YaCy counts
			{URL: "https://ads.test/", Nofollow: true},
			{URL: "http://www.example.co.uk:8080/x", Nofollow: true},
		},
		Images: []extract.Image{{URL: "https://www.example.co.uk/i.png", Alt: "i"}},
	}
	d := Build(Page{Key: "k", CrawlID: "c", URL: u, Fetched: contracts.CrawlerPage{URL: u.String(), StatusCode: 200}, Header: http.Header{}}, &res)
	want := struct {
		Title                                   []string
		In, Out, InText, OutText, H1, H3, Paths []string
		Counts                                  [7]int
		Org, SSLD, Ext, Name                    string
		Words                                   int
	}{
		Title: []string{"b.html"}, In: []string{"https://www.example.co.uk/", "http://www.example.co.uk:8080/x"},
		Out: []string{"https://example.co.uk/", "https://ads.test/"}, InText: []string{"Home", ""}, OutText: []string{"Apex", ""},
		H1: []string{"H"}, H3: []string{"S", "T"}, Paths: []string{"a"},
		Counts: [7]int{4, 2, 2, 1, 2, 1, 1}, Org: "example", SSLD: "example.co.uk", Ext: "html", Name: "b", Words: 3,
	}
	got := want
	got.Title, got.In, got.Out, got.InText, got.OutText, got.H1, got.H3, got.Paths = d.Title, d.InboundLinks, d.OutboundLinks,
		d.InboundAnchorText, d.OutboundAnchorText, d.H1, d.H3, d.URLPaths
	got.Counts = [7]int{d.LinksCount, d.LinksNofollowCount, d.InboundLinksCount, d.InboundLinksNofollowCount,
		d.OutboundLinksCount, d.OutboundLinksNofollowCount, d.ImagesCount}
	got.Org, got.SSLD, got.Ext, got.Name, got.Words = d.HostOrganization, d.SSLD, d.FileExt, d.URLFileName, d.WordCount
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
}
