package extract

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// maxHeapGrowth is the sanity bound on heap growth while extracting huge or
// deeply nested pages.
const maxHeapGrowth = 64 << 20

// heapWatch samples the live heap while a generated page is read.
type heapWatch struct {
	base, peak uint64
}

func newHeapWatch() *heapWatch {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &heapWatch{base: m.HeapAlloc, peak: m.HeapAlloc}
}

func (w *heapWatch) sample() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.peak = max(w.peak, m.HeapAlloc)
}

func (w *heapWatch) check(t *testing.T, what string) {
	t.Helper()
	w.sample()
	growth := int64(w.peak) - int64(w.base)
	t.Logf("%s: peak heap growth %.1f MiB", what, float64(growth)/(1<<20))
	if growth > maxHeapGrowth {
		t.Errorf("%s: heap grew by %d bytes, want at most %d", what, growth, maxHeapGrowth)
	}
}

// pageReader generates a page of about size bytes without holding it: head,
// then body(i) for i = 0, 1, ... while they fit and are not empty, then tail. It samples the
// heap every MiB it hands out.
type pageReader struct {
	head, tail string
	body       func(i int) string
	size       int64
	watch      *heapWatch

	sent, lastSample int64
	i                int
	pending          string
	done             bool
}

func (p *pageReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if p.pending == "" {
			switch {
			case p.done:
				if n == 0 {
					return 0, io.EOF
				}
				return n, nil
			case p.sent == 0 && p.i == 0 && p.head != "":
				p.pending = p.head
				p.head = ""
			default:
				s := p.body(p.i)
				p.i++
				if s == "" || p.sent+int64(len(s)+len(p.tail)) > p.size {
					s, p.done = p.tail, true
				}
				p.pending = s
			}
		}
		c := copy(b[n:], p.pending)
		p.pending = p.pending[c:]
		n += c
		p.sent += int64(c)
	}
	if p.watch != nil && p.sent-p.lastSample >= 1<<20 {
		p.lastSample = p.sent
		p.watch.sample()
	}
	return n, nil
}

func TestDeeplyNested(t *testing.T) {
	const depth = 100_000
	tests := []struct {
		name, open, close string
	}{
		{"div", "<div>", "</div>"},
		{"inline", "<span><b>", "</b></span>"},
		{"anchors", `<a href="/x">`, "</a>"},
		{"headings", "<h1>", "</h1>"},
		{"templates", "<template>", "</template>"},
		{"unclosed", "<div><p><ul><li><table><tr><td>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newHeapWatch()
			r := &pageReader{
				head: "<html><body>",
				body: func(i int) string {
					switch {
					case i < depth:
						return tt.open
					case i == depth:
						return "deep text"
					default:
						return tt.close
					}
				},
				tail:  "<p>after</p></body></html>",
				size:  int64(depth*(len(tt.open)+len(tt.close)) + 100),
				watch: w,
			}
			res, err := HTML(r, mustURL(t, pageURL), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			w.check(t, tt.name)
			if r.i <= depth {
				t.Fatalf("generator stopped at %d, want past depth %d", r.i, depth)
			}
			switch tt.name {
			case "templates":
				if res.Text != "after" {
					t.Errorf("HTML(nested templates).Text = %q, want %q", clip(res.Text), "after")
				}
			default:
				if !strings.Contains(res.Text, "deep text") {
					t.Errorf("HTML(nested %s).Text = %q, want it to hold %q", tt.name, clip(res.Text), "deep text")
				}
			}
			if tt.name == "anchors" && (len(res.Links) != 1 || res.Links[0].URL != "http://www.example.test/x") {
				t.Errorf("HTML(nested anchors).Links = %v, want one link", res.Links)
			}
		})
	}
}

func TestHugePage(t *testing.T) {
	size := int64(100 << 20)
	if testing.Short() || raceEnabled {
		size = 10 << 20
	}
	tests := []struct {
		name      string
		body      func(i int) string
		lim       Limits
		wantLinks int
	}{
		{"paragraphs and links", func(i int) string {
			return fmt.Sprintf(`<div class="c"><p>lorem ipsum %d dolor <a href="/p/%d">link %d</a> sit amet</p></div>`+"\n", i, i, i)
		}, Limits{}, DefaultMaxLinks},
		{"small limits", func(i int) string {
			return fmt.Sprintf(`<h2>h%d</h2><p>text <a href="?page=%d">p</a></p>`, i, i)
		}, Limits{MaxTextBytes: 1000, MaxLinks: 10, MaxHeadings: 3}, 10},
		{"one huge text token", func(i int) string {
			return "word word word word word word word word word word word word word word\n"
		}, Limits{}, 0},
		{"one huge script", func(i int) string {
			if i == 0 {
				return "<p>before</p><script>"
			}
			return "var x = '<a href=/no>';\n"
		}, Limits{}, 0},
		{"one huge attribute", func(i int) string {
			if i == 0 {
				return `<p>before</p><a title="`
			}
			return "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		}, Limits{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newHeapWatch()
			r := &pageReader{head: "<html><head><title>big</title></head><body>", body: tt.body, tail: "</body></html>", size: size, watch: w}
			res, err := HTML(r, mustURL(t, pageURL), tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			w.check(t, tt.name)
			lim := tt.lim.withDefaults()
			if len(res.Text) > lim.MaxTextBytes || len(res.Links) > lim.MaxLinks || len(res.Headings) > lim.MaxHeadings {
				t.Errorf("HTML(%s) kept %d text bytes, %d links, %d headings, over %+v", tt.name, len(res.Text), len(res.Links), len(res.Headings), lim)
			}
			if !res.Truncated {
				t.Errorf("HTML(%s).Truncated = false, want true", tt.name)
			}
			if len(res.Links) != tt.wantLinks {
				t.Errorf("HTML(%s) kept %d links, want %d", tt.name, len(res.Links), tt.wantLinks)
			}
			if res.Title != "big" {
				t.Errorf("HTML(%s).Title = %q, want %q", tt.name, res.Title, "big")
			}
			t.Logf("%s: read %d MiB, text %d bytes, %d links", tt.name, r.sent>>20, len(res.Text), len(res.Links))
		})
	}
}

func TestHugeText(t *testing.T) {
	size := int64(100 << 20)
	if testing.Short() || raceEnabled {
		size = 10 << 20
	}
	w := newHeapWatch()
	r := &pageReader{body: func(int) string { return "plain text line\n" }, size: size, watch: w}
	res, err := Text(r, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	w.check(t, "text")
	if len(res.Text) > DefaultMaxTextBytes || len(res.Text) < DefaultMaxTextBytes-20 || !res.Truncated {
		t.Errorf("Text(huge) = %d bytes, truncated %v, want about %d and true", len(res.Text), res.Truncated, DefaultMaxTextBytes)
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// benchPage is a typical article page: about 15 KB with 50 links.
func benchPage() string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>A typical article &ndash; Example News</title>
<meta name="description" content="An article of typical size, used to benchmark extraction.">
<link rel="stylesheet" href="/static/site.css"><link rel="canonical" href="https://news.example.test/2024/article">
<script src="/static/app.js"></script><script>window.dataLayer = window.dataLayer || []; function gtag(){dataLayer.push(arguments);}</script>
<style>body{font-family:sans-serif}.nav a{margin:0 1em}</style></head><body>
<header><nav class="nav">`)
	for i := range 15 {
		fmt.Fprintf(&b, `<a href="/section/%d/">Section %d</a> `, i, i)
	}
	b.WriteString(`</nav></header><main><article><h1>The headline of a typical article</h1>`)
	for i := range 25 {
		fmt.Fprintf(&b, `<p>Paragraph %d of the article. Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua, with a <a href="related-%d.html">related story</a> and <em>some emphasis</em> &amp; entities. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur, excepteur sint occaecat.</p>`+"\n", i, i)
		if i%5 == 4 {
			fmt.Fprintf(&b, "<h2>Subheading %d</h2>\n", i)
		}
	}
	b.WriteString(`</article></main><footer><ul>`)
	for i := range 10 {
		fmt.Fprintf(&b, `<li><a href="https://partner%d.example.test/?ref=news" rel="nofollow">Partner %d</a></li>`, i, i)
	}
	b.WriteString(`</ul><p>&copy; Example News</p></footer></body></html>`)
	return b.String()
}

func BenchmarkHTML(b *testing.B) {
	page := benchPage()
	if len(page) < 14000 || len(page) > 16000 {
		b.Fatalf("bench page is %d bytes, want about 15 KB", len(page))
	}
	u := mustURL(b, "https://news.example.test/2024/article")
	res, err := HTML(strings.NewReader(page), u, Limits{})
	if err != nil || len(res.Links) != 51 {
		b.Fatalf("HTML(bench page) = %d links, %v, want 51 (50 + canonical)", len(res.Links), err)
	}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HTML(strings.NewReader(page), u, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTMLOverLongBase parses a 60 KB page whose 5,000 one-letter links
// sit under an 8 KB <base href>: every link is over the URL cap, and dropping
// them should cost no more than parsing the page.
func BenchmarkHTMLOverLongBase(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`<html><head><title>amplify</title><base href="/` + strings.Repeat("p", 8<<10) + `/"></head><body>`)
	for i := range 5000 {
		fmt.Fprintf(&sb, `<a href=%c%d>x</a>`, 'a'+i%26, i)
	}
	sb.WriteString("</body></html>")
	page := sb.String()
	u := mustURL(b, "https://amplify.example.test/p/1.html")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := HTML(strings.NewReader(page), u, Limits{})
		if err != nil || len(res.Links) != 0 {
			b.Fatalf("HTML(page under an over-long base) = %d links, %v, want none", len(res.Links), err)
		}
	}
}
