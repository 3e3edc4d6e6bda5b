package websim

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// CorpusZone is the domain under which a corpus's hosts live.
const CorpusZone = "corpus.test"

// CorpusConfig describes a corpus of real HTML served as virtual hosts.
type CorpusConfig struct {
	// Dir is the root of the tree. Each subdirectory chosen by Hosts is
	// one host, named after the directory (lowercased, characters other
	// than letters, digits and "-" made "-") under CorpusZone.
	Dir string
	// Hosts lists the subdirectories of Dir to serve. Empty serves every
	// subdirectory that holds an index.html.
	Hosts []string
	// Disallow, when not empty, is a path prefix (such as "/print.html")
	// every host's robots.txt disallows for every user agent.
	Disallow string
	// Latency delays every response (default 0).
	Latency time.Duration
	// RecordRequests keeps a log of every request served, read with
	// RequestLog.
	RecordRequests bool
}

// Corpus serves a directory tree of real, third-party HTML (documentation
// installed on the machine, for example) as virtual hosts, so that
// benchmarks see the pages users crawl rather than generated ones. Files are
// served as they are: relative links work, and links that leave a host's
// directory or name other sites lead out of the corpus (a 404 or an
// out-of-scope URL). A directory path serves its index.html; there are no
// directory listings. Every host's robots.txt allows everything unless
// Disallow names a prefix.
//
// A Corpus is safe for concurrent use; create it with NewCorpus.
type Corpus struct {
	zone
	cfg   CorpusConfig
	dirs  map[string]string // host name to directory
	names []string          // host names, sorted
}

// NewCorpus returns a corpus for cfg, not yet serving. It fails if Dir
// holds no host.
func NewCorpus(cfg CorpusConfig) (*Corpus, error) {
	cfg.Latency = max(cfg.Latency, 0)
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		ents, err := os.ReadDir(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("read corpus directory: %w", err)
		}
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(cfg.Dir, e.Name(), "index.html")); e.IsDir() && err == nil {
				hosts = append(hosts, e.Name())
			}
		}
	}
	c := &Corpus{cfg: cfg, dirs: map[string]string{}}
	c.zone.init(CorpusZone, cfg.Disallow)
	for _, h := range hosts {
		dir := filepath.Join(cfg.Dir, h)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("corpus host %q is not a directory of %s", h, cfg.Dir)
		}
		name := corpusHostName(h)
		if _, dup := c.dirs[name]; dup {
			return nil, fmt.Errorf("corpus directories %q and another share host name %q", h, name)
		}
		c.dirs[name] = dir
		c.names = append(c.names, name)
	}
	if len(c.names) == 0 {
		return nil, fmt.Errorf("corpus directory %s has no subdirectory with an index.html", cfg.Dir)
	}
	sort.Strings(c.names)
	return c, nil
}

// corpusHostName makes a directory name a host name under CorpusZone.
func corpusHostName(dir string) string {
	b := []byte(strings.ToLower(dir))
	for i, ch := range b {
		if (ch < 'a' || ch > 'z') && (ch < '0' || ch > '9') && ch != '-' {
			b[i] = '-'
		}
	}
	return string(b) + "." + CorpusZone
}

// RustDocDir returns the HTML documentation that rustup installs with the
// stable toolchain (its books, the standard library's API), the default
// corpus of the benchmarks.
func RustDocDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find rust documentation: %w", err)
	}
	root := filepath.Join(home, ".rustup", "toolchains")
	if d := os.Getenv("RUSTUP_HOME"); d != "" {
		root = filepath.Join(d, "toolchains")
	}
	matches, _ := filepath.Glob(filepath.Join(root, "stable-*", "share", "doc", "rust", "html"))
	if len(matches) == 0 {
		return "", errors.New("find rust documentation: no stable toolchain with docs under " + root + " (rustup component add rust-docs)")
	}
	return matches[0], nil
}

// MdBooks returns the subdirectories of dir that are mdBook books (an
// index.html next to a toc.html): the narrative documentation, without the
// tens of thousands of API pages.
func MdBooks(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list books: %w", err)
	}
	var out []string
	for _, e := range ents {
		_, errIndex := os.Stat(filepath.Join(dir, e.Name(), "index.html"))
		_, errTOC := os.Stat(filepath.Join(dir, e.Name(), "toc.html"))
		if e.IsDir() && errIndex == nil && errTOC == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Start serves the corpus on a free port of 127.0.0.1.
func (c *Corpus) Start() error {
	err := c.srv.start(0, c, func(port int) { c.portSfx = fmt.Sprintf(":%d", port) })
	if err != nil {
		return fmt.Errorf("start corpus: %w", err)
	}
	return nil
}

// Hosts returns the host names, sorted.
func (c *Corpus) Hosts() []string { return slices.Clone(c.names) }

// StartURLs returns the root URL of every host, in host order.
func (c *Corpus) StartURLs() []string {
	out := make([]string, len(c.names))
	for i, h := range c.names {
		out[i] = "http://" + h + c.portSfx + "/"
	}
	return out
}

// ServeHTTP serves one request of the corpus.
func (c *Corpus) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	c.requests.Add(1)
	if c.cfg.RecordRequests {
		sw := &statusWriter{ResponseWriter: rw}
		defer c.log.record(r, c.srv.port, time.Now(), sw)
		rw = sw
	}
	if d := c.cfg.Latency; d > 0 {
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
	dir, ok := c.dirs[requestHost(r)]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	if r.URL.Path == "/robots.txt" {
		rw.Header().Set("Content-Type", ctText)
		_, _ = rw.Write(c.robots)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	if strings.HasSuffix(r.URL.Path, "/") {
		p = path.Join(p, "index.html")
	}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		http.NotFound(rw, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		http.NotFound(rw, r)
		return
	}
	// ServeContent sets the type from the extension, answers HEAD and
	// ranges, and never lists a directory.
	http.ServeContent(rw, r, st.Name(), st.ModTime(), f)
}
