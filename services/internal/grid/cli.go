package grid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/search"
)

const usage = `usage: grid <command> [flags]

commands:
  up      [--data DIR] [--listen ADDR]          run MCP, loader, crawler and indexer on embedded backends
  crawl   [--depth N] [--data DIR] [--json] [--scope host|domain|any] [--max-pages N] [--min-delay-ms N]
          [--urls-file FILE] URL...
                                                run one crawl to the end on the embedded grid
  status  [--data DIR] [--api URL] [--json] [CRAWL_ID]
                                                show crawls (or one crawl)
  search  [--data DIR] [--api URL] [--crawl ID] [--limit N] [--json] QUERY...
                                                search the indexed documents
` + logUsage + `
The API address of a running 'grid up' is found in DIR/grid.addr; --api (or
GRIDCRAWL_API_URL) names another MCP. GRIDCRAWL_API_TOKEN is sent as bearer token.
`

// addrFile is where a running grid writes its API URL inside the data directory.
const addrFile = "grid.addr"

// Main runs the grid command with args (without the program name) and
// returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "up":
		err = cmdUp(ctx, args[1:], stderr)
	case "crawl":
		err = cmdCrawl(ctx, args[1:], stdout, stderr)
	case "status":
		err = cmdStatus(ctx, args[1:], stdout, stderr)
	case "search":
		err = cmdSearch(ctx, args[1:], stdout, stderr)
	case "urls":
		err = cmdURLs(ctx, args[1:], stdout, stderr)
	case "report":
		err = cmdReport(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "grid: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "grid %s: %v\n", args[0], err)
		return 2
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(stderr, "grid %s: %v\n", args[0], err)
		return 1
	}
}

type usageError struct{ error }

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("grid "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func newLogger(level string, w io.Writer) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

func loadConfig(dataFlag string) (Config, error) {
	cfg, err := LoadConfig()
	if err != nil {
		return cfg, err
	}
	if dataFlag != "" {
		cfg.Backends.DataDir = dataFlag
	}
	return cfg, nil
}

func cmdUp(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("up", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	listen := fs.String("listen", "", "API listen address (default $GRIDCRAWL_LISTEN or 127.0.0.1:8080)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(*data)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.MCP.Listen = *listen
	}
	log := newLogger(cfg.LogLevel, stderr)
	ln, err := net.Listen("tcp", cfg.MCP.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.MCP.Listen, err)
	}
	g, err := Open(cfg, log, ln)
	if err != nil {
		ln.Close()
		return err
	}
	api := "http://" + ln.Addr().String()
	path := filepath.Join(cfg.Backends.DataDir, addrFile)
	if err := os.WriteFile(path, []byte(api+"\n"), 0o644); err != nil {
		log.Warn("write api address file", "err", err)
	}
	defer os.Remove(path)
	log.Info("grid up", "api", api, "data", cfg.Backends.DataDir)
	return g.Run(ctx)
}

// crawlOpts are grid crawl's flags.
type crawlOpts struct {
	data, scope, urlsFile     *string
	depth, maxPages, minDelay *int
	asJSON                    *bool
}

// newCrawlFlags defines grid crawl's flags. The profile flags show the
// profile's defaults, which are defined once, in contracts, for the API
// and the command line alike.
func newCrawlFlags(stderr io.Writer) (*flag.FlagSet, *crawlOpts) {
	fs := newFlags("crawl", stderr)
	o := &crawlOpts{
		data:     fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)"),
		depth:    fs.Int("depth", contracts.DefaultMaxDepth, "maximum link depth from the start URLs"),
		asJSON:   fs.Bool("json", false, "print the final crawl status as JSON on the last line"),
		scope:    fs.String("scope", string(contracts.DefaultScope), "host, domain or any"),
		maxPages: fs.Int("max-pages", 0, "stop discovering URLs after this many (0: no limit)"),
		minDelay: fs.Int("min-delay-ms", contracts.DefaultMinDelayMS, "politeness: least milliseconds between fetches from one host"),
		urlsFile: fs.String("urls-file", "", "read more start URLs from this file, one per line"),
	}
	return fs, o
}

// profile returns the crawl profile of the parsed flags fs and starts. Only
// the flags given on the command line are set; MCP defaults the rest, so
// that the crawl is the one the API starts for the same settings.
func (o *crawlOpts) profile(fs *flag.FlagSet, starts []string) contracts.Profile {
	p := contracts.Profile{StartURLs: starts, MaxDepth: contracts.DefaultMaxDepth}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "depth":
			p.MaxDepth = *o.depth
		case "scope":
			p.Scope = contracts.Scope(*o.scope)
		case "max-pages":
			p.MaxPages = *o.maxPages
		case "min-delay-ms":
			p.Politeness = contracts.PolitenessPatch{MinDelayMS: o.minDelay}.WithDefaults()
		}
	})
	return p
}

func cmdCrawl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, o := newCrawlFlags(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	starts := fs.Args()
	if *o.urlsFile != "" {
		b, err := os.ReadFile(*o.urlsFile)
		if err != nil {
			return fmt.Errorf("read start urls: %w", err)
		}
		starts = append(starts, strings.Fields(string(b))...)
	}
	if len(starts) == 0 {
		return usageError{errors.New("at least one start URL is required")}
	}
	cfg, err := loadConfig(*o.data)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogLevel, io.Discard)
	if cfg.LogLevel == "debug" {
		log = newLogger(cfg.LogLevel, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	g, err := Open(cfg, log, ln)
	if err != nil {
		ln.Close()
		return err
	}
	// Like grid run, publish the API address, so that grid status and
	// scripts/bench can follow the crawl.
	addr := filepath.Join(cfg.Backends.DataDir, addrFile)
	if err := os.WriteFile(addr, []byte("http://"+ln.Addr().String()+"\n"), 0o644); err != nil {
		log.Warn("write api address file", "err", err)
	}
	defer os.Remove(addr)
	body, _ := json.Marshal(o.profile(fs, starts))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- g.Run(ctx) }()
	stop := func(err error) error {
		cancel()
		return errors.Join(err, <-runErr)
	}
	c := &client{base: "http://" + ln.Addr().String(), token: os.Getenv("GRIDCRAWL_API_TOKEN")}
	var created contracts.CreateCrawlResponse
	if err := c.do(ctx, http.MethodPost, "/api/v1/crawls", body, &created); err != nil {
		return stop(err)
	}
	bar := newProgress(stderr)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var st contracts.CrawlStatus
		if err := c.do(ctx, http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st); err != nil {
			return stop(err)
		}
		bar.show(st)
		if st.State != contracts.CrawlRunning {
			bar.done(st)
			if err := stop(nil); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			if *o.asJSON {
				return json.NewEncoder(stdout).Encode(st)
			}
			fmt.Fprintf(stdout, "crawl %s %s: %d indexed, %d redirected, %d failed, %d documents\n", st.CrawlID, st.State,
				st.Counts[contracts.Indexed], st.Counts[contracts.Redirected], st.Counts[contracts.Failed], st.Documents)
			if st.State != contracts.CrawlFinished {
				return fmt.Errorf("crawl %s ended %s", st.CrawlID, st.State)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return stop(ctx.Err())
		case err := <-runErr:
			return fmt.Errorf("grid stopped: %w", err)
		case <-tick.C:
		}
	}
}

// progress draws a one-line progress bar on a terminal and nothing elsewhere.
type progress struct {
	w   io.Writer
	tty bool
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, tty: tty}
}

func (p *progress) show(st contracts.CrawlStatus) {
	if !p.tty || st.Total == 0 {
		return
	}
	done := st.Total - st.Pending
	const width = 30
	n := int(done * width / st.Total)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d urls  %d indexed  %d failed  %d pending ",
		strings.Repeat("#", n), strings.Repeat(".", width-n), done, st.Total,
		st.Counts[contracts.Indexed], st.Counts[contracts.Failed], st.Pending)
}

func (p *progress) done(st contracts.CrawlStatus) {
	if p.tty {
		p.show(st)
		fmt.Fprintln(p.w)
	}
}

// client talks to a running MCP.
type client struct {
	base, token string
	http        http.Client
}

func (c *client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		var e contracts.ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s (%d)", method, path, e.Error, resp.StatusCode)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// apiFor finds the MCP to talk to: --api, GRIDCRAWL_API_URL, or the address
// a running grid wrote into the data directory. It returns "" when none.
func apiFor(api, dataDir string) string {
	if api != "" {
		return strings.TrimRight(api, "/")
	}
	if v := os.Getenv("GRIDCRAWL_API_URL"); v != "" {
		return strings.TrimRight(v, "/")
	}
	b, err := os.ReadFile(filepath.Join(dataDir, addrFile))
	if err != nil {
		return ""
	}
	u := strings.TrimSpace(string(b))
	if _, err := url.Parse(u); err != nil {
		return ""
	}
	return u
}

// offline opens the data directory directly, for status and search when no
// grid runs.
func offline(dataDir string) (*Grid, error) {
	cfg, err := loadConfig(dataDir)
	if err != nil {
		return nil, err
	}
	return Open(cfg, slog.New(slog.DiscardHandler), nil)
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(*data)
	if err != nil {
		return err
	}
	var list contracts.CrawlList
	if base := apiFor(*api, cfg.Backends.DataDir); base != "" {
		c := &client{base: base, token: os.Getenv("GRIDCRAWL_API_TOKEN")}
		if fs.NArg() > 0 {
			var st contracts.CrawlStatus
			if err := c.do(ctx, http.MethodGet, "/api/v1/crawls/"+url.PathEscape(fs.Arg(0)), nil, &st); err != nil {
				return err
			}
			list.Crawls = []contracts.CrawlStatus{st}
		} else if err := c.do(ctx, http.MethodGet, "/api/v1/crawls", nil, &list); err != nil {
			return err
		}
	} else {
		g, err := offline(cfg.Backends.DataDir)
		if err != nil {
			return err
		}
		defer g.Backends.Close()
		ids := fs.Args()
		if len(ids) == 0 {
			cs, err := g.Backends.Profiles.List(ctx)
			if err != nil {
				return fmt.Errorf("list crawls: %w", err)
			}
			for _, c := range cs {
				ids = append(ids, c.ID)
			}
		}
		for _, id := range ids {
			st, err := g.MCP.Status(ctx, id)
			if err != nil {
				return fmt.Errorf("status of %s: %w", id, err)
			}
			list.Crawls = append(list.Crawls, st)
		}
	}
	if *asJSON {
		list.V = contracts.Version
		if fs.NArg() > 0 && len(list.Crawls) == 1 {
			return json.NewEncoder(stdout).Encode(list.Crawls[0])
		}
		return json.NewEncoder(stdout).Encode(list)
	}
	if len(list.Crawls) == 0 {
		fmt.Fprintln(stdout, "no crawls")
	}
	for _, st := range list.Crawls {
		fmt.Fprintf(stdout, "%s  %-9s  total %d  pending %d  indexed %d  redirected %d  failed %d  documents %d  %s\n",
			st.CrawlID, st.State, st.Total, st.Pending, st.Counts[contracts.Indexed], st.Counts[contracts.Redirected],
			st.Counts[contracts.Failed], st.Documents, strings.Join(st.Profile.StartURLs, " "))
	}
	return nil
}

func cmdSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("search", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	crawl := fs.String("crawl", "", "only this crawl")
	limit := fs.Int("limit", 10, "number of hits")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	q := strings.Join(fs.Args(), " ")
	if strings.TrimSpace(q) == "" {
		return usageError{errors.New("a query is required")}
	}
	cfg, err := loadConfig(*data)
	if err != nil {
		return err
	}
	var res contracts.SearchResponse
	if base := apiFor(*api, cfg.Backends.DataDir); base != "" {
		c := &client{base: base, token: os.Getenv("GRIDCRAWL_API_TOKEN")}
		v := url.Values{"q": {q}, "limit": {fmt.Sprint(*limit)}}
		if *crawl != "" {
			v.Set("crawl", *crawl)
		}
		if err := c.do(ctx, http.MethodGet, "/api/v1/search?"+v.Encode(), nil, &res); err != nil {
			return err
		}
	} else {
		g, err := offline(cfg.Backends.DataDir)
		if err != nil {
			return err
		}
		defer g.Backends.Close()
		r, err := g.Backends.Search.Search(ctx, search.Query{Q: q, CrawlID: *crawl, Limit: *limit})
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		res = contracts.SearchResponse{V: contracts.Version, Query: q, Total: r.Total, Hits: r.Hits}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "%d results for %q\n", res.Total, q)
	for i, h := range res.Hits {
		fmt.Fprintf(stdout, "%2d. %s\n    %s\n", i+1, h.Title, h.URL)
		if h.Snippet != "" {
			fmt.Fprintf(stdout, "    %s\n", h.Snippet)
		}
	}
	return nil
}
