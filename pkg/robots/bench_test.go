package robots

import (
	"fmt"
	"strings"
	"testing"
)

// largeRobots returns a robots.txt shaped like those of big sites (about
// 30 KB): dozens of named crawlers shut out one by one, then a long "*"
// group of folder, wildcard and anchored rules, Crawl-delay and Sitemaps.
func largeRobots() []byte {
	var b strings.Builder
	b.WriteString("# robots.txt for a large site\n\n")
	for i := range 40 {
		fmt.Fprintf(&b, "User-agent: badbot-%c%c\nDisallow: /\n\n", 'a'+i%26, 'a'+i/26)
	}
	b.WriteString("User-agent: *\nCrawl-delay: 1\n")
	for i := range 300 {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "Disallow: /wiki/Special:Page%d\n", i)
		case 1:
			fmt.Fprintf(&b, "Disallow: /w/index.php?title=Topic_%d*&action=\n", i)
		case 2:
			fmt.Fprintf(&b, "Allow: /w/api.php?action=query&list=item%d\n", i)
		case 3:
			fmt.Fprintf(&b, "Disallow: /*/section%d/*.json$\n", i)
		case 4:
			fmt.Fprintf(&b, "Disallow: /%%E3%%83%%84/topic%d/\n", i)
		}
	}
	b.WriteString("Disallow: /*?sessionid=\nDisallow: /*.pdf$\nAllow: /\n\n")
	for i := range 10 {
		fmt.Fprintf(&b, "Sitemap: https://www.example.test/sitemap-%d.xml\n", i)
	}
	return []byte(b.String())
}

// BenchmarkAllowedLargeFile measures the loader's per-URL robots cost on a
// big file: one Allowed call on a parsed file.
func BenchmarkAllowedLargeFile(b *testing.B) {
	body := largeRobots()
	r := Parse(body)
	paths := []string{
		"/wiki/Gardens_and_grids",
		"/w/index.php?title=Topic_41_x&action=edit",
		"/a/section3/data.json",
		"/%E3%83%84/topic4/page",
		"/blog/2024/03/some-article?ref=home",
	}
	b.ReportMetric(float64(len(body)), "file-bytes")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Allowed("gridcrawl/1.0 (+https://gridcrawl.test/bot)", paths[i%len(paths)])
	}
}

// TestLargeRobots pins the answers the large benchmark file gives, so the
// benchmark measures the intended matching work.
func TestLargeRobots(t *testing.T) {
	r := Parse(largeRobots())
	const ua = "gridcrawl/1.0"
	for _, c := range []check{
		{ua, "/wiki/Gardens_and_grids", true},
		{ua, "/wiki/Special:Page5", false},
		{ua, "/w/index.php?title=Topic_41_x&action=edit", false},
		{ua, "/w/api.php?action=query&list=item2", true},
		{ua, "/a/section3/data.json", false},
		{ua, "/a/section3/data.json?x", true},
		{ua, "/%E3%83%84/topic4/page", false},
		{ua, "/ツ/topic4/page", false},
		{ua, "/x.pdf", false},
		{"badbot-ab", "/wiki/Gardens_and_grids", false},
	} {
		if got := r.Allowed(c.agent, c.path); got != c.allowed {
			t.Errorf("Allowed(%q, %q) = %v, want %v", c.agent, c.path, got, c.allowed)
		}
	}
	if d, ok := r.CrawlDelay(ua); !ok || d.Seconds() != 1 {
		t.Errorf("CrawlDelay(%q) = %v, %v, want 1s, true", ua, d, ok)
	}
	if n := len(r.Sitemaps()); n != 10 {
		t.Errorf("len(Sitemaps()) = %d, want 10", n)
	}
}
