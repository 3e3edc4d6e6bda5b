package grid

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/apiclient"
	"github.com/gridcrawl/gridcrawl/services/internal/svc"
)

const usage = `usage: grid <command> [flags]

commands:
  up      [--data DIR] [--listen ADDR]          run MCP, loader, crawler and indexer on embedded backends
  crawl   [--depth N] [--data DIR] [--json] [--scope host|domain|any] [--max-pages N] [--min-delay-ms N]
          [--recrawl 24h|adaptive:1h-30d] [--urls-file FILE] [--listen ADDR] [--api URL]
          [--allow-net loopback|private|CIDR] [--resume|--update|--new] URL...
                                                run one crawl to the end on the embedded grid (or on the
                                                grid already running on DIR, or on the MCP at --api); a
                                                continuous crawl (--recrawl) to the end of its first round.
                                                Loopback and private addresses are refused unless
                                                allowed (--allow-net, GRIDCRAWL_ALLOW_NETS)
  status  [--data DIR] [--api URL] [--json] [CRAWL_ID]
                                                show crawls (or one crawl)
  search  [--data DIR] [--api URL] [--crawl ID] [--limit N] [--all-crawls] [--json] QUERY...
                                                search the indexed documents: one hit per URL
                                                (the newest copy), every crawl's with --all-crawls
` + logUsage + exportUsage + `  version                                       print the version (also: grid --version)

The API address of a running 'grid up' or 'grid crawl' is found in DIR/grid.addr;
--api (or GRIDCRAWL_API_URL) names another MCP. GRIDCRAWL_API_TOKEN is sent as
bearer token. "grid <command> -h" lists a command's flags.

Exit status: 0 done; 1 failed (grid crawl: also a crawl that was cancelled or
indexed nothing); 2 invalid command line or configuration; 130 interrupted.
`

// addrFile is where a running grid writes its API URL inside the data directory.
const addrFile = "grid.addr"

// Main runs the grid command with args (without the program name) on the
// process's standard input and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return MainIO(ctx, args, os.Stdin, stdout, stderr)
}

// MainIO is Main reading from stdin: grid crawl's start URLs from
// --urls-file -, and its answer to a question when stdin is a terminal.
func MainIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "up":
		err = cmdUp(ctx, args[1:], stderr)
	case "crawl":
		err = cmdCrawl(ctx, args[1:], stdin, stdout, stderr)
	case "status":
		err = cmdStatus(ctx, args[1:], stdout, stderr)
	case "search":
		err = cmdSearch(ctx, args[1:], stdout, stderr)
	case "urls":
		err = cmdURLs(ctx, args[1:], stdout, stderr)
	case "report":
		err = cmdReport(ctx, args[1:], stdout, stderr)
	case "export":
		err = cmdExport(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "grid", svc.Version())
		return 0
	default:
		fmt.Fprintf(stderr, "grid: unknown command %q\nRun 'grid help' for usage.\n", args[0])
		return 2
	}
	var ue usageError
	var fe flagError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &fe):
		// One line and a pointer to the usage, which would scroll the
		// error out of sight.
		fmt.Fprintf(stderr, "grid %s: %v\nRun 'grid %s -h' for usage.\n", args[0], err, args[0])
		return 2
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "grid %s: %v\n", args[0], err)
		return 2
	case errors.Is(err, errInterrupted):
		// The command has said what became of its work.
		return 130
	default:
		fmt.Fprintf(stderr, "grid %s: %v\n", args[0], err)
		return 1
	}
}

// usageError is an invalid command line or input: exit status 2.
type usageError struct{ error }

// flagError is an error of the flag package (an unknown flag, a bad
// value): exit status 2, reported on one line with a pointer to the
// command's -h.
type flagError struct{ error }

// newFlags returns the flag set of grid command name, whose usage line is
// "grid name synopsis".
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("grid "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: grid %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args with fs and returns the arguments that are not
// flags. Flags may follow arguments ("grid crawl URL --depth 2"); after
// "--" everything is an argument. -h prints the usage; any other error is
// a flagError, with the flag meant when one is close to an unknown flag.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	// The flag package would print the error and the whole usage; the
	// caller prints the error alone.
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				usage()
				return nil, err
			}
			if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
				if near := nearFlag(fs, name); near != "" {
					err = fmt.Errorf("%w (did you mean --%s?)", err, near)
				}
			}
			return nil, flagError{err}
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(rest, left...), nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// nearFlag returns the flag of fs whose name is closest to name, the name
// of an unknown flag, when it is near enough to be a typo of it (one edit,
// two for a name of five letters or more, or a prefix of it: "dept",
// "max-page"); "" otherwise.
func nearFlag(fs *flag.FlagSet, name string) string {
	name, _, _ = strings.Cut(name, "=")
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(name, f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = min(d, 1)
		}
		if d < bestDist { // VisitAll goes in name order: the first of a tie wins
			best, bestDist = f.Name, d
		}
	})
	// Two edits make another word of a short name: "nope" is not "scope".
	far := 1
	if len(name) >= 5 {
		far = 2
	}
	if bestDist > far || bestDist >= len(name) {
		return ""
	}
	return best
}

// editDistance returns the edits (insertions, deletions, substitutions and
// swaps of neighbours) that turn a into b, in bytes: the optimal string
// alignment distance.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// newLogger returns a text logger to w at level, which LoadConfig has
// checked.
func newLogger(level string, w io.Writer) *slog.Logger {
	l, err := svc.ParseLogLevel(level)
	if err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// loadConfig reads the configuration from the environment, with the data
// directory of the --data flag when given. An invalid configuration is a
// usageError.
func loadConfig(dataFlag string) (Config, error) {
	cfg, err := LoadConfig()
	if err == nil {
		_, err = svc.ParseLogLevel(cfg.LogLevel)
	}
	if err != nil {
		return cfg, usageError{err}
	}
	if dataFlag != "" {
		cfg.Backends.DataDir = dataFlag
	}
	return cfg, nil
}

func cmdUp(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("up", "[flags]", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	listen := fs.String("listen", "", "API listen address (default $GRIDCRAWL_LISTEN or 127.0.0.1:8080)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (grid up takes only flags)", rest[0])}
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
	defer publishGrid(cfg.Backends.DataDir, api, cfg.Loader.AllowNets, log)()
	log.Info("grid up", "api", api, "data", cfg.Backends.DataDir)
	return g.Run(ctx)
}

// apiFor finds the MCP to talk to: --api, GRIDCRAWL_API_URL, or the address
// a running grid wrote into the data directory, if that grid answers (a
// grid that was killed leaves its address behind). It returns "" when none.
func apiFor(api, dataDir string) string {
	if api != "" {
		return strings.TrimRight(api, "/")
	}
	if v := os.Getenv("GRIDCRAWL_API_URL"); v != "" {
		return strings.TrimRight(v, "/")
	}
	return runningGrid(context.Background(), dataDir, os.Getenv("GRIDCRAWL_API_TOKEN"))
}

// offline opens the grid of the data directory without running it, for the
// read commands when no grid runs there (openAPI serves its MCP in
// process). A data directory that does not exist is an error: reading must
// not create one.
func offline(dataDir string) (*Grid, error) {
	cfg, err := loadConfig(dataDir)
	if err != nil {
		return nil, err
	}
	if b := cfg.Backends; b.AMQPURL == "" || b.ESURL == "" || b.S3Endpoint == "" {
		if err := dataDirExists(b.DataDir); err != nil {
			return nil, err
		}
	}
	return Open(cfg, slog.New(slog.DiscardHandler), nil)
}

// dataDirExists explains a data directory that cannot be read, in the same
// words for every command that reads one.
func dataDirExists(dir string) error {
	_, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("data directory %s does not exist (no grid has run there; start one with grid up --data %s or grid crawl --data %s URL)",
			dir, dir, dir)
	case err != nil:
		return fmt.Errorf("data directory %s cannot be read: %w", dir, err)
	}
	return nil
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "[flags] [CRAWL_ID]", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	asJSON := fs.Bool("json", false, "print JSON")
	ids, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	one := len(ids) == 1
	c, err := openAPI(*api, *data)
	if err != nil {
		return err
	}
	defer c.close()
	var list contracts.CrawlList
	if len(ids) == 0 {
		if list, err = c.Crawls(ctx); err != nil {
			return err
		}
	}
	for _, id := range ids {
		st, err := c.Crawl(ctx, id)
		if err != nil {
			return err
		}
		list.Crawls = append(list.Crawls, st)
	}
	if rd, err := c.Readiness(ctx); err == nil {
		for _, line := range c.readinessLines(rd) {
			fmt.Fprintf(stderr, "grid status: %s\n", line)
		}
	}
	if *asJSON {
		list.V = contracts.Version
		if one {
			return json.NewEncoder(stdout).Encode(list.Crawls[0])
		}
		return json.NewEncoder(stdout).Encode(list)
	}
	if len(list.Crawls) == 0 {
		fmt.Fprintln(stdout, "no crawls")
	}
	now := time.Now()
	for _, st := range list.Crawls {
		recrawl := ""
		if st.Profile.Recrawl != nil {
			recrawl = fmt.Sprintf("  recrawl %s: %s", fmtSchedule(st.Profile.Recrawl), fmtNextDue(st.Recrawl, now))
		}
		// Every status, so that the counts add up to the total.
		fmt.Fprintf(stdout, "%s  %-10s  total %d  pending %d  indexed %d  redirected %d  failed %d  sitemap %d  retired %d  documents %d%s  %s\n",
			st.CrawlID, st.State, st.Total, st.Pending, st.Counts[contracts.Indexed], st.Counts[contracts.Redirected],
			st.Counts[contracts.Failed], st.Counts[contracts.Sitemap], st.Retired, st.Documents, recrawl, strings.Join(st.Profile.StartURLs, " "))
		// A crawl that ran out of work without indexing anything says why
		// under its line, as the dashboard's warning card does.
		if st.Outcome != nil {
			fmt.Fprintf(stdout, "  %s: %s\n", st.Outcome.Kind, st.Outcome.Summary)
		}
	}
	return nil
}

func cmdSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("search", "[flags] QUERY...", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	crawl := fs.String("crawl", "", "only this crawl")
	limit := fs.Int("limit", 10, "number of hits")
	all := fs.Bool("all-crawls", false, "one hit per crawl's copy of a URL, each with its crawl and fetch time\n(default: one hit per URL, the newest copy; / and /index.html are two URLs)")
	asJSON := fs.Bool("json", false, "print JSON")
	words, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	q := strings.Join(words, " ")
	if strings.TrimSpace(q) == "" {
		return usageError{errors.New("a query is required")}
	}
	c, err := openAPI(*api, *data)
	if err != nil {
		return err
	}
	defer c.close()
	if *crawl != "" {
		// The search API answers no hits for a crawl it does not know,
		// which would read as a crawl without a match.
		if _, err := c.Crawl(ctx, *crawl); apiclient.IsNotFound(err) {
			return fmt.Errorf("no crawl %q (grid status lists the crawls)", *crawl)
		} else if err != nil {
			return err
		}
	}
	res, err := c.Search(ctx, apiclient.SearchQuery{Q: q, Crawl: *crawl, Limit: *limit, AllCrawls: *all})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "%s for %q\n", plural(res.Total, "result"), q)
	for i, h := range res.Hits {
		fmt.Fprintf(stdout, "%2d. %s\n    %s\n", i+1, h.Title, h.URL)
		if *all {
			fmt.Fprintf(stdout, "    crawl %s, fetched %s\n", h.CrawlID, h.FetchTime.Format(time.RFC3339))
		}
		if h.Snippet != "" {
			fmt.Fprintf(stdout, "    %s\n", h.Snippet)
		}
	}
	return nil
}

// plural returns n and noun, with an s unless n is 1.
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
