package websim

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestCorpusServesFilesAsTheyAre(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"guide/index.html":       "<title>Guide</title><a href=\"ch1.html\">one</a>",
		"guide/ch1.html":         "<title>One</title><a href=\"../Other_Book/index.html\">out</a>",
		"guide/sub/index.html":   "<title>Sub</title>",
		"guide/style.css":        "body{}",
		"Other_Book/index.html":  "<title>Other</title>",
		"no-index/page.html":     "<title>not a host</title>",
		"guide/sub/notes/a.html": "<title>A</title>",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewCorpus(CorpusConfig{Dir: dir, Disallow: "/ch1", RecordRequests: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if got, want := c.Hosts(), []string{"guide.corpus.test", "other-book.corpus.test"}; !slices.Equal(got, want) {
		t.Errorf("Hosts() = %q, want %q", got, want)
	}
	p := ":" + strconv.Itoa(c.Port())
	if got, want := c.StartURLs(), []string{"http://guide.corpus.test" + p + "/", "http://other-book.corpus.test" + p + "/"}; !slices.Equal(got, want) {
		t.Errorf("StartURLs() = %q, want %q", got, want)
	}
	cl := c.Client()
	t.Cleanup(cl.CloseIdleConnections)
	tests := []struct {
		name, url string
		status    int
		body      string
	}{
		{"root is index.html", "http://guide.corpus.test" + p + "/", 200, files["guide/index.html"]},
		{"page", "http://guide.corpus.test" + p + "/ch1.html", 200, files["guide/ch1.html"]},
		{"subdirectory index", "http://guide.corpus.test" + p + "/sub/", 200, files["guide/sub/index.html"]},
		{"nested page", "http://guide.corpus.test" + p + "/sub/notes/a.html", 200, files["guide/sub/notes/a.html"]},
		{"other host", "http://other-book.corpus.test" + p + "/", 200, files["Other_Book/index.html"]},
		{"no listing of a directory without index", "http://guide.corpus.test" + p + "/sub/notes/", 404, ""},
		{"directory without slash", "http://guide.corpus.test" + p + "/sub", 404, ""},
		{"escape stays inside the host", "http://guide.corpus.test" + p + "/../Other_Book/index.html", 404, ""},
		{"directory without index.html is no host", "http://no-index.corpus.test" + p + "/page.html", 404, ""},
		{"missing", "http://guide.corpus.test" + p + "/nope.html", 404, ""},
	}
	for _, tt := range tests {
		status, body := webGet(t, cl, tt.url)
		if status != tt.status || (tt.status == 200 && string(body) != tt.body) {
			t.Errorf("%s: GET %q = %d %.60q, want %d %.60q", tt.name, tt.url, status, body, tt.status, tt.body)
		}
	}
	_, robots := webGet(t, cl, "http://guide.corpus.test"+p+"/robots.txt")
	rb := parseTestRobots(200, robots, "gridcrawl")
	for path, want := range map[string]bool{"/": true, "/ch1.html": false, "/sub/": true} {
		if got := rb.allowed(path); got != want {
			t.Errorf("robots.txt allows %q = %v, want %v:\n%s", path, got, want, robots)
		}
		if got := c.Allowed("guide.corpus.test", path); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", path, got, want)
		}
	}
	if got, want := len(c.RequestLog()), len(tests)+1; got != want {
		t.Errorf("RequestLog() has %d requests, want %d", got, want)
	}
}

func TestCorpusWithoutHosts(t *testing.T) {
	if _, err := NewCorpus(CorpusConfig{Dir: t.TempDir()}); err == nil {
		t.Error("NewCorpus(empty directory) succeeded, want an error")
	}
}
