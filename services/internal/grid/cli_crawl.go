package grid

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/apiclient"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// crawlOpts are grid crawl's flags.
type crawlOpts struct {
	data, scope, urlsFile, api, listen *string
	depth, maxPages, minDelay          *int
	asJSON                             *bool
	sitemaps                           *bool
	sitemapDepth                       *int
	recrawl                            *string
	collection, dedupe                 *string
	allowNets                          *netList
	resume, update, startNew           *bool
}

// netList is the value of --allow-net: networks in the forms
// GRIDCRAWL_ALLOW_NETS takes, from repeated flags or comma lists.
type netList []string

// String returns the networks as GRIDCRAWL_ALLOW_NETS takes them.
func (l *netList) String() string { return strings.Join(*l, ",") }

// Set adds the networks of one --allow-net, checked as the loader will.
func (l *netList) Set(v string) error {
	if _, err := netguard.ParseNets(v); err != nil {
		return err
	}
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			*l = append(*l, n)
		}
	}
	return nil
}

// crawlHelp follows grid crawl's flags in its -h.
const crawlHelp = `
The loader refuses loopback, private and link-local addresses (a site served
on this machine, such as http://127.0.0.1:8000/, or on the local network)
unless they are allowed: by --allow-net (loopback, private, or a CIDR prefix
such as 192.168.1.0/24), or by the environment variable GRIDCRAWL_ALLOW_NETS,
which takes the same values separated by commas (GRIDCRAWL_ALLOW_NETS=loopback).
--allow-net adds to GRIDCRAWL_ALLOW_NETS for the grid this command starts. A
grid that already runs (grid up on the same --data, or the MCP at --api) keeps
the GRIDCRAWL_ALLOW_NETS it was started with: restart it with the variable set
(GRIDCRAWL_ALLOW_NETS=loopback make run). On such a grid, --allow-net is
refused, and no crawl created, unless that grid allows its networks already.

A start URL on the command line without a scheme gets one as in YaCy: http://
for an IP address or localhost (127.0.0.1:8000), https:// for a host name
(example.com). The URLs of --urls-file must have theirs.

When a crawl of the same start URLs is unfinished in the data directory (an
earlier grid crawl was interrupted), grid crawl asks whether to resume it or
start a new one (which cancels the unfinished one); --resume and --new answer
without asking. Without a terminal to ask on, it resumes. When this command's
settings differ from the unfinished crawl's, it lists them (--depth 3 -> 0)
and asks again, without a default: resume it as it was, resume it with the
new settings (--update: those a started crawl can change), or start a new
crawl; without a terminal it changes nothing and exits 2 unless --resume,
--update or --new says which.
`

// newCrawlFlags defines grid crawl's flags. The profile flags show the
// profile's defaults, which are defined once, in contracts, for the API
// and the command line alike.
func newCrawlFlags(stderr io.Writer) (*flag.FlagSet, *crawlOpts) {
	fs := newFlags("crawl", "[flags] URL...", stderr)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(stderr, crawlHelp)
	}
	o := &crawlOpts{
		allowNets: &netList{},
		resume:    fs.Bool("resume", false, "resume the unfinished crawl of the same start URLs in the data directory, without asking"),
		update: fs.Bool("update", false, "resume the unfinished crawl of the same start URLs with this command's settings, without asking\n"+
			"(only settings a started crawl can change: --min-delay-ms, --dedupe, a continuous crawl's --recrawl)"),
		startNew:     fs.Bool("new", false, "start a new crawl even if one of the same start URLs is unfinished in the data directory (it is cancelled), without asking"),
		data:         fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)"),
		depth:        fs.Int("depth", contracts.DefaultMaxDepth, "maximum link depth from the start URLs"),
		asJSON:       fs.Bool("json", false, "print the final crawl status as JSON on the last line"),
		scope:        fs.String("scope", string(contracts.DefaultScope), "host, domain or any"),
		maxPages:     fs.Int("max-pages", 0, "stop discovering URLs after this many (0: no limit)"),
		minDelay:     fs.Int("min-delay-ms", contracts.DefaultMinDelayMS, "politeness: least milliseconds between fetches from one host"),
		urlsFile:     fs.String("urls-file", "", "read more start URLs from this file (- for stdin), one per line; # starts a comment"),
		api:          fs.String("api", "", "submit the crawl to the MCP at this base URL (default $GRIDCRAWL_API_URL) instead of running a grid"),
		listen:       fs.String("listen", "127.0.0.1:0", "API and dashboard address of the grid this command runs"),
		sitemaps:     fs.Bool("sitemaps", true, "read the start hosts' sitemaps (robots.txt Sitemap: lines, /sitemap.xml)"),
		sitemapDepth: fs.Int("sitemap-depth", 0, "depth of sitemaps and the URLs they list (at most -depth)"),
		recrawl: fs.String("recrawl", "", "make the crawl continuous: fetch every page again after this interval (24h, 30d, 1d12h),\n"+
			"or adaptive:MIN-MAX (adaptive:1h-30d: shorter when a page changed, longer when not);\n"+
			"grid crawl returns when the first round is done"),
		collection: fs.String("collection", "", "the collection the crawl's documents belong to; with the default --dedupe, payloads\n"+
			"stored by earlier crawls of the collection are stored as revisit records"),
		dedupe: fs.String("dedupe", contracts.DedupeCollection, "what payloads are deduplicated across: collection, crawl or off"),
	}
	fs.Var(o.allowNets, "allow-net", "let the loader fetch from these networks, which it refuses by default: loopback, private or a CIDR prefix\n"+
		"(repeat the flag or separate them by commas; adds to $GRIDCRAWL_ALLOW_NETS; only for the grid this command starts)")
	return fs, o
}

// profile returns the crawl profile of the parsed flags fs and starts. Only
// the flags given on the command line are set; MCP defaults the rest, so
// that the crawl is the one the API starts for the same settings. The
// profile is checked as MCP will check it: an invalid flag value is a
// usageError naming the flag.
func (o *crawlOpts) profile(fs *flag.FlagSet, starts []string) (contracts.Profile, error) {
	p := contracts.Profile{StartURLs: starts, MaxDepth: contracts.DefaultMaxDepth}
	var err error
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
		case "sitemaps":
			p.Sitemaps = o.sitemaps
		case "sitemap-depth":
			p.SitemapDepth = *o.sitemapDepth
		case "recrawl":
			p.Recrawl, err = parseRecrawl(*o.recrawl)
		case "collection":
			p.Collection = []string{*o.collection}
		case "dedupe":
			p.Dedupe = *o.dedupe
		}
	})
	if err != nil {
		return p, err
	}
	if err := p.WithDefaults().Validate(); err != nil {
		return p, flagFieldError(fs, err)
	}
	return p, nil
}

// profileFlags names the grid crawl flag that sets each profile field
// (recrawl.* are all --recrawl).
var profileFlags = map[string]string{
	"max_depth": "depth", "scope": "scope", "max_pages": "max-pages", "sitemap_depth": "sitemap-depth",
	"politeness.min_delay_ms": "min-delay-ms", "politeness.max_delay_ms": "min-delay-ms",
	"collection": "collection", "dedupe": "dedupe",
}

// flagFieldError returns err, the validation error of a profile built
// from the flags fs, as a usageError that names the flag and its value
// instead of the profile field.
func flagFieldError(fs *flag.FlagSet, err error) error {
	var fe *contracts.FieldError
	if !errors.As(err, &fe) {
		return usageError{err}
	}
	name, ok := profileFlags[fe.Field]
	reason := strings.ReplaceAll(fe.Reason, "max_depth", "--depth")
	if fe.Field == "recrawl" || strings.HasPrefix(fe.Field, "recrawl.") {
		name, ok = "recrawl", true
		// The parts of adaptive:MIN-MAX, as the flag's help names them.
		switch fe.Field {
		case "recrawl.adaptive.min":
			reason = "MIN " + reason
		case "recrawl.adaptive.max":
			reason = "MAX " + strings.ReplaceAll(reason, "adaptive.min", "MIN")
		}
	}
	f := fs.Lookup(name)
	if !ok || f == nil {
		return usageError{err}
	}
	return usageError{fmt.Errorf("invalid --%s %q: %s", name, f.Value.String(), reason)}
}

// parseRecrawl parses the value of --recrawl: an interval ("24h", "30d",
// "1d12h") or adaptive:MIN-MAX ("adaptive:1h-30d"). The durations are
// checked with the rest of the profile.
func parseRecrawl(s string) (*contracts.Recrawl, error) {
	const want = "want an interval such as 24h or 30d, or adaptive:MIN-MAX such as adaptive:1h-30d"
	if rest, ok := strings.CutPrefix(s, "adaptive:"); ok {
		lo, hi, ok := strings.Cut(rest, "-")
		if !ok || lo == "" || hi == "" {
			return nil, usageError{fmt.Errorf("invalid --recrawl %q: %s", s, want)}
		}
		return &contracts.Recrawl{Adaptive: &contracts.AdaptiveRecrawl{Min: lo, Max: hi}}, nil
	}
	if s == "" || strings.Contains(s, ":") {
		return nil, usageError{fmt.Errorf("invalid --recrawl %q: %s", s, want)}
	}
	return &contracts.Recrawl{Interval: s}, nil
}

// errInterrupted is returned when the user interrupted a command: the
// process exits 130, as a shell reports a command ended by SIGINT. The
// command has said what became of its work.
var errInterrupted = errors.New("interrupted")

// errNothingIndexed is returned by grid crawl for a crawl that finished
// without indexing a single page.
var errNothingIndexed = errors.New("nothing indexed")

// progressEvery is how often grid crawl writes a progress line when stderr
// is not a terminal (a terminal's line is redrawn at every poll).
const progressEvery = 5 * time.Second

func cmdCrawl(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := newCrawlFlags(stderr)
	starts, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if n := countTrue(*o.resume, *o.update, *o.startNew); n > 1 {
		return usageError{errors.New("--resume, --update and --new exclude each other")}
	}
	for i, s := range starts {
		if full := contracts.WithScheme(s); full != s {
			fmt.Fprintf(stderr, "grid crawl: %s has no scheme: crawling %s\n", s, full)
			starts[i], s = full, full
		}
		if err := checkStartURL(s); err != nil {
			return usageError{fmt.Errorf("start URL %d %q: %w", i+1, s, err)}
		}
	}
	if *o.urlsFile != "" {
		more, err := readURLsFile(*o.urlsFile, stdin)
		if err != nil {
			return usageError{err}
		}
		starts = append(starts, more...)
	}
	if len(starts) == 0 {
		return usageError{errors.New("at least one start URL is required")}
	}
	p, err := o.profile(fs, starts)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(*o.data)
	if err != nil {
		return err
	}
	r := &crawlRun{dataDir: cfg.Backends.DataDir, asJSON: *o.asJSON, stdout: stdout, stderr: stderr,
		tty: isTerminal(stderr) && cfg.LogLevel != "debug", starts: p.StartURLs, allowFlag: *o.allowNets}
	switch {
	case *o.resume:
		r.unfinished = resumeIt
	case *o.update:
		r.unfinished = updateIt
	case *o.startNew:
		r.unfinished = startNew
	case *o.urlsFile != "-" && isTerminal(stdin) && isTerminal(stderr):
		r.unfinished, r.stdin = askUser, stdin
	}
	token := os.Getenv("GRIDCRAWL_API_TOKEN")
	if base := strings.TrimRight(firstOf(*o.api, os.Getenv("GRIDCRAWL_API_URL")), "/"); base != "" {
		r.c = apiclient.New(base, token, nil)
		if err := r.elsewhere(ctx); err != nil {
			return err
		}
		// Another grid's crawls are not this data directory's: none is
		// resumed or cancelled.
		r.unfinished = ignoreUnfinished
		return r.follow(ctx, p)
	}
	if len(*o.allowNets) > 0 {
		cfg.Loader.AllowNets = strings.Join(append([]string{cfg.Loader.AllowNets}, *o.allowNets...), ",")
	}
	log := newLogger(cfg.LogLevel, io.Discard)
	if cfg.LogLevel == "debug" {
		log = newLogger(cfg.LogLevel, stderr)
	}
	ln, err := net.Listen("tcp", *o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *o.listen, err)
	}
	g, err := Open(cfg, log, ln)
	if errors.Is(err, wire.ErrLocked) {
		ln.Close()
		// A grid up (or another grid crawl) holds the data directory:
		// the crawl runs there, if it answers.
		base := runningGrid(ctx, cfg.Backends.DataDir, token)
		if base == "" {
			return fmt.Errorf("%w, and no grid answers at the address in %s", err, filepath.Join(cfg.Backends.DataDir, addrFile))
		}
		fmt.Fprintf(stderr, "grid crawl: a grid is running on %s at %s: the crawl runs there\n", cfg.Backends.DataDir, base)
		r.c = apiclient.New(base, token, nil)
		if err := r.elsewhere(ctx); err != nil {
			return err
		}
		return r.follow(ctx, p)
	}
	if err != nil {
		ln.Close()
		return err
	}
	// Like grid up, publish the API address, so that grid status, grid urls,
	// a browser and scripts/bench can follow the crawl.
	base := "http://" + ln.Addr().String()
	defer publishGrid(cfg.Backends.DataDir, base, cfg.Loader.AllowNets, log)()
	gctx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- g.Run(gctx) }()
	r.c, r.local, r.runErr = apiclient.New(base, token, nil), true, runErr
	err = r.follow(ctx, p)
	cancel()
	if ctx.Err() != nil {
		// Stopping takes as long as the fetches in flight.
		fmt.Fprintf(stderr, "grid crawl: interrupted: stopping the grid; fetches in flight may take up to %s (GRIDCRAWL_LOADER_SHUTDOWN_TIMEOUT); interrupt again to exit at once\n",
			cfg.Loader.ShutdownTimeout)
	}
	if r.runErr != nil { // follow did not take the grid's result
		if e := <-runErr; e != nil && !errors.Is(e, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("grid: %w", e))
		}
	}
	if errors.Is(err, errInterrupted) {
		fmt.Fprintf(stderr, "grid crawl: crawl %s is stored in %s and still running (%d URLs were pending): it is not finished.\n"+
			"grid crawl: finish it with: grid up --data %s (or run this grid crawl again: it offers to resume it)\n",
			r.last.CrawlID, r.dataDir, r.last.Pending, r.dataDir)
	}
	return err
}

// countTrue returns how many of bs are true.
func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// firstOf returns the first of vs that is not empty.
func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// crawlRun is one grid crawl: its crawl, on the grid this command runs
// (local) or on another one.
type crawlRun struct {
	c       *apiclient.Client
	local   bool         // the crawl runs on the grid this command runs
	runErr  <-chan error // the local grid's Run result
	dataDir string
	asJSON  bool
	tty     bool // stderr is a terminal: redraw one progress line
	stdout  io.Writer
	stderr  io.Writer
	last    contracts.CrawlStatus // the last status read

	starts     []string      // the start URLs of the crawl to start
	unfinished unfinishedWay // what to do with an unfinished crawl of the same start URLs
	stdin      io.Reader     // the terminal to ask on, for askUser
	allowFlag  netList       // --allow-net, which applies only to a grid this command starts
}

// elsewhere checks, for a crawl to run on a grid this command did not
// start, that --allow-net asks nothing that grid does not do already: the
// flag cannot change what a running grid fetches, and a crawl there of the
// networks it names would fail every URL. It refuses (a usageError, before
// any crawl is created) unless that grid says it allows every network the
// flag names: the grid running on the data directory says so in
// netsFile; another one (--api) does not say.
func (r *crawlRun) elsewhere(ctx context.Context) error {
	if len(r.allowFlag) == 0 {
		return nil
	}
	flag := r.allowFlag.String()
	base := r.c.Base()
	nets, known := gridNets(ctx, r.dataDir, base)
	missing := r.allowFlag.notIn(nets)
	if known && len(missing) == 0 {
		fmt.Fprintf(r.stderr, "grid crawl: the grid at %s allows %s already (GRIDCRAWL_ALLOW_NETS=%s): --allow-net changes nothing there\n", base, flag, nets)
		return nil
	}
	allow := "GRIDCRAWL_ALLOW_NETS=" + strings.Trim(nets+","+flag, ",")
	var why, how string
	switch {
	case !known:
		why = fmt.Sprintf("the grid at %s does not tell which networks its loaders allow", base)
		how = fmt.Sprintf("start that grid (its loaders in grid mode) with %s; if it allows them already, run grid crawl without --allow-net", allow)
	default:
		has := "allows none (GRIDCRAWL_ALLOW_NETS is not set there)"
		if nets != "" {
			has = "allows only GRIDCRAWL_ALLOW_NETS=" + nets
		}
		why = fmt.Sprintf("the grid running on %s at %s %s, not %s: its loader refuses those addresses", r.dataDir, base, has, strings.Join(missing, ", "))
		how = fmt.Sprintf("restart it with the networks allowed: %s make run (if it is make run's), or %s grid up --data %s; then run grid crawl without --allow-net",
			allow, allow, r.dataDir)
		if nets != "" {
			how += fmt.Sprintf(" (as you may now, if GRIDCRAWL_ALLOW_NETS=%s covers the start URLs)", nets)
		}
	}
	return usageError{fmt.Errorf("--allow-net %s applies only to a grid this command starts, and %s; no crawl was created.\ngrid crawl: %s", flag, why, how)}
}

// netsFile is where a running grid writes, next to addrFile, the networks
// its loader is allowed beyond the public ones (its GRIDCRAWL_ALLOW_NETS,
// with grid crawl's --allow-net): grid crawl reads it to tell whether a
// crawl it submits there may fetch what its --allow-net names.
const netsFile = "grid.allow-nets"

// publishGrid writes the API address base and the allowed networks nets of
// the grid this process runs into the data directory dir, for the commands
// that find a running grid there, and returns the function that removes
// them when the grid stops.
func publishGrid(dir, base, nets string, log *slog.Logger) func() {
	addr, allowed := filepath.Join(dir, addrFile), filepath.Join(dir, netsFile)
	// The networks first: a reader that finds the address finds them.
	if err := writeWhole(allowed, nets+"\n"); err != nil {
		log.Warn("write allowed networks file", "err", err)
	}
	if err := writeWhole(addr, base+"\n"); err != nil {
		log.Warn("write api address file", "err", err)
	}
	return func() {
		os.Remove(addr)
		os.Remove(allowed)
	}
}

// writeWhole writes text to the file path by a rename, so that a reader
// finds the file whole or not at all, never empty.
func writeWhole(path, text string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// gridNets returns the networks the grid at base allows, as its
// GRIDCRAWL_ALLOW_NETS gives them, when it is the grid running on dataDir
// and it wrote them there (netsFile); known is false otherwise.
func gridNets(ctx context.Context, dataDir, base string) (nets string, known bool) {
	if runningGrid(ctx, dataDir, os.Getenv("GRIDCRAWL_API_TOKEN")) != base {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(dataDir, netsFile))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// notIn returns the networks of l (loopback stands for 127.0.0.0/8 and
// ::1/128) that nets, networks as GRIDCRAWL_ALLOW_NETS takes them, does
// not cover.
func (l *netList) notIn(nets string) []string {
	have, err := netguard.ParseNets(nets)
	if err != nil {
		have = nil
	}
	want, _ := netguard.ParseNets(l.String()) // Set has checked them
	var missing []string
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h netip.Prefix) bool { return h.Bits() <= w.Bits() && h.Contains(w.Addr()) }) {
			missing = append(missing, w.String())
		}
	}
	return missing
}

// follow creates the crawl of profile p, or resumes an unfinished
// one of the same start URLs, and follows it to its end.
func (r *crawlRun) follow(ctx context.Context, p contracts.Profile) error {
	id, err := r.resumable(ctx, p)
	if err != nil {
		return err
	}
	if id == "" {
		created, err := r.c.CreateCrawl(ctx, p)
		if err != nil {
			return err
		}
		id = created.CrawlID
		r.last = contracts.CrawlStatus{CrawlID: id, State: created.State}
		fmt.Fprintf(r.stderr, "grid crawl: crawl %s started; dashboard %s\n", id, dashboardURL(r.c.Base(), id))
	} else {
		r.last = contracts.CrawlStatus{CrawlID: id, State: contracts.CrawlRunning}
		fmt.Fprintf(r.stderr, "grid crawl: crawl %s resumed; dashboard %s\n", id, dashboardURL(r.c.Base(), id))
	}
	bar := &progress{w: r.stderr, tty: r.tty, every: progressEvery}
	ready := &readyWatch{c: r.c}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := r.c.Crawl(ctx, id)
		switch {
		case ctx.Err() != nil:
			bar.end()
			return r.interrupted()
		case err != nil && !r.local:
			bar.end()
			return fmt.Errorf("follow crawl %s: %w (the crawl is stored and resumes when its grid runs: grid up --data %s)", id, err, r.dataDir)
		case err != nil:
			bar.end()
			return fmt.Errorf("follow crawl %s: %w", id, err)
		}
		r.last = st
		// A continuous crawl never finishes: its first round is done when
		// it is first up to date.
		if st.State == contracts.CrawlFinished || st.State == contracts.CrawlCancelled || st.State == contracts.CrawlUpToDate {
			bar.done(st, time.Now())
			return r.end(ctx, st)
		}
		if line := ready.poll(ctx); line != "" {
			bar.end()
			fmt.Fprintf(r.stderr, "grid crawl: %s\n", line)
		}
		bar.show(st, time.Now())
		select {
		case <-ctx.Done():
			bar.end()
			return r.interrupted()
		case err := <-r.runErr:
			r.runErr = nil
			bar.end()
			return fmt.Errorf("grid stopped while crawl %s was running: %w", id, err)
		case <-tick.C:
		}
	}
}

// interrupted says what becomes of a crawl whose grid crawl was
// interrupted.
func (r *crawlRun) interrupted() error {
	if !r.local {
		fmt.Fprintf(r.stderr, "grid crawl: interrupted; crawl %s keeps running in the grid at %s.\n"+
			"grid crawl: follow it with: grid status --api %s %s\n", r.last.CrawlID, r.c.Base(), r.c.Base(), r.last.CrawlID)
	}
	// The local grid's crawl is reported once the grid has stopped.
	return errInterrupted
}

// end reports the crawl that ended with status st. A crawl that was
// cancelled, or finished without indexing a page, is an error; the
// latter's says why, by the most frequent failure reasons.
func (r *crawlRun) end(ctx context.Context, st contracts.CrawlStatus) error {
	if r.asJSON {
		if err := json.NewEncoder(r.stdout).Encode(st); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	} else {
		now := time.Now()
		next := ""
		if st.Profile.Recrawl != nil {
			next = "; " + fmtNextDue(st.Recrawl, now)
		}
		fmt.Fprintf(r.stdout, "crawl %s %s in %s: %d indexed, %d redirected, %d failed, %d retired, %d documents, %.1f pages/s%s\n",
			st.CrawlID, st.State, fmtElapsed(elapsed(st, now)), st.Counts[contracts.Indexed], st.Counts[contracts.Redirected],
			st.Counts[contracts.Failed], st.Retired, st.Documents, averageRate(st, now), next)
	}
	if st.State == contracts.CrawlUpToDate {
		r.continuing(st)
	} else if st.State != contracts.CrawlFinished {
		return fmt.Errorf("crawl %s ended %s", st.CrawlID, st.State)
	}
	// The failure reasons say whether the network guard refused URLs,
	// which a newcomer crawling a site on their own machine must be told
	// in plain words, whatever else the crawl did.
	var rs []contracts.ReasonReportRow
	var rsErr error
	if st.Counts[contracts.Failed] > 0 {
		rs, rsErr = r.reasons(ctx, st.CrawlID)
	}
	var refused int64
	for _, row := range rs {
		if row.Reason != nil && netguard.IsReason(*row.Reason) {
			refused += row.Count
		}
	}
	if st.Counts[contracts.Indexed] > 0 {
		if refused > 0 {
			fmt.Fprintf(r.stderr, "grid crawl: %d URLs were not fetched: %s\n", refused, r.allowHint())
		}
		return nil
	}
	if refused > 0 && refused == st.Counts[contracts.Failed] && st.Counts[contracts.Redirected] == 0 {
		return nothingIndexedError(fmt.Sprintf("nothing was fetched: crawl %s's addresses are not allowed (%s): %s",
			st.CrawlID, strings.Join(st.Profile.StartURLs, " "), r.allowHint()))
	}
	var b strings.Builder
	what := "finished"
	if st.State == contracts.CrawlUpToDate {
		what = "did its first round"
	}
	fmt.Fprintf(&b, "crawl %s %s with nothing indexed: %d failed, %d redirected, %d retired",
		st.CrawlID, what, st.Counts[contracts.Failed], st.Counts[contracts.Redirected], st.Retired)
	switch {
	case rsErr != nil:
		fmt.Fprintf(&b, "\n(failure reasons: %v)", rsErr)
	case len(rs) > 0:
		b.WriteString("\n" + formatReasons(st.CrawlID, rs))
	}
	if refused > 0 {
		fmt.Fprintf(&b, "\n%d URLs were not fetched: %s", refused, r.allowHint())
	}
	return nothingIndexedError(b.String())
}

// allowHint says why the network guard refused URLs and how to allow them,
// on the grid this command started or on the one that ran the crawl.
func (r *crawlRun) allowHint() string {
	const why = "their addresses are on loopback, private or link-local networks, which the loader refuses unless they are allowed"
	if r.local {
		return why + "; to crawl them, run grid crawl again with --allow-net loopback (or private, or a CIDR prefix such as 192.168.1.0/24), " +
			"or set GRIDCRAWL_ALLOW_NETS=loopback"
	}
	return fmt.Sprintf("%s; the grid at %s decides: restart it with GRIDCRAWL_ALLOW_NETS=loopback (or private, or a CIDR prefix such as 192.168.1.0/24)",
		why, r.c.Base())
}

// continuing tells about the continuous crawl of st whose first round is
// done (the summary line has its next due time): how to keep it going and
// follow it. The crawl on the grid this command runs recrawls only while
// a grid runs on its data directory again.
func (r *crawlRun) continuing(st contracts.CrawlStatus) {
	id := st.CrawlID
	fmt.Fprintf(r.stderr, "grid crawl: crawl %s is continuous (recrawl %s) and up to date: its first round is done\n",
		id, fmtSchedule(st.Profile.Recrawl))
	if r.local {
		fmt.Fprintf(r.stderr, "grid crawl: it is stored in %s and recrawls while a grid runs there: grid up --data %s\n"+
			"grid crawl: follow it with: grid status --data %s %s\n", r.dataDir, r.dataDir, r.dataDir, id)
		return
	}
	fmt.Fprintf(r.stderr, "grid crawl: it keeps recrawling in the grid at %s; follow it with: grid status --api %s %s\n", r.c.Base(), r.c.Base(), id)
}

// fmtSchedule formats a continuous crawl's schedule: "every 24h", or
// "adaptive 1h-30d".
func fmtSchedule(rc *contracts.Recrawl) string {
	switch {
	case rc == nil:
		return "none"
	case rc.Adaptive != nil:
		return "adaptive " + rc.Adaptive.Min + "-" + rc.Adaptive.Max
	}
	return "every " + rc.Interval
}

// fmtNextDue formats the due URLs and the next due time of rs at now:
// "0 due, next due in 2s (at 2026-11-23 23:59:01 UTC)".
func fmtNextDue(rs *contracts.RecrawlStatus, now time.Time) string {
	if rs == nil {
		return "nothing scheduled"
	}
	s := fmt.Sprintf("%d due", rs.Due)
	if rs.NextDue == nil {
		return s + ", no URL scheduled"
	}
	at := rs.NextDue.Local().Format("2006-01-02 15:04:05 MST")
	if d := rs.NextDue.Sub(now); d > 0 {
		return fmt.Sprintf("%s, next due in %s (at %s)", s, fmtDuration(d), at)
	}
	return fmt.Sprintf("%s, next due now (since %s)", s, at)
}

// fmtDuration formats a time to come, rounded up to the second: 2s,
// 4m05s, 2h04m05s, and from two days on in days and hours: 29d23h.
func fmtDuration(d time.Duration) string {
	d = (d + time.Second - 1).Truncate(time.Second)
	if d >= 48*time.Hour {
		return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	}
	return fmtElapsed(d)
}

// nothingIndexedError is errNothingIndexed with what the crawl did instead.
type nothingIndexedError string

func (e nothingIndexedError) Error() string { return string(e) }

// Is makes the error errNothingIndexed for errors.Is.
func (e nothingIndexedError) Is(target error) bool { return target == errNothingIndexed }

// maxReasons is how many failure reasons grid crawl prints.
const maxReasons = 10

// reasons returns the most frequent failure reasons of crawl id (up to
// maxReasons+1, to tell whether there are more), most frequent first, as
// the crawl's MCP computes them in its transaction index (the
// failure-reasons report).
func (r *crawlRun) reasons(ctx context.Context, id string) ([]contracts.ReasonReportRow, error) {
	rows, err := r.c.FailureReasons(ctx, id, maxReasons+1)
	if apiclient.IsNotFound(err) {
		return nil, fmt.Errorf("the grid at %s has no failure-reasons report; list the failures with grid urls --failed %s", r.c.Base(), id)
	}
	return rows, err
}

// formatReasons lays out the failure reasons rs of crawl id, one a line
// with its count and a sample URL.
func formatReasons(id string, rs []contracts.ReasonReportRow) string {
	var b strings.Builder
	b.WriteString("top failure reasons:")
	for i, r := range rs {
		if i == maxReasons {
			fmt.Fprintf(&b, "\n  ... more reasons: grid report failure-reasons %s", id)
			break
		}
		reason := "(no reason recorded)"
		if r.Reason != nil && *r.Reason != "" {
			reason = *r.Reason
		}
		fmt.Fprintf(&b, "\n  %7d  %s", r.Count, reason)
		if len(r.SampleURLs) > 0 {
			fmt.Fprintf(&b, "  (e.g. %s)", r.SampleURLs[0])
		}
	}
	return b.String()
}

// checkStartURL checks that s is a URL a crawl can start from, as MCP will.
func checkStartURL(s string) error {
	_, err := urlnorm.Normalize(s)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, urlnorm.ErrScheme):
		return errors.New("not an http or https URL")
	case errors.Is(err, urlnorm.ErrNoHost):
		return errors.New("no host")
	case errors.Is(err, urlnorm.ErrTooLong):
		return fmt.Errorf("longer than %d bytes", urlnorm.MaxLength)
	}
	return errors.New("not a valid URL")
}

// readURLsFile reads the start URLs of the file name ("-": stdin), one
// or more a line separated by white space; blank lines and lines starting
// with # are skipped. An invalid URL is reported with its file and line.
func readURLsFile(name string, stdin io.Reader) ([]string, error) {
	var rd io.Reader = stdin
	label := "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read start URLs: %w", err)
		}
		defer f.Close()
		rd, label = f, name
	}
	var urls []string
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		for _, u := range strings.Fields(text) {
			if err := checkStartURL(u); err != nil {
				return nil, fmt.Errorf("%s:%d: invalid start URL %q: %w", label, line, u, err)
			}
			urls = append(urls, u)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read start URLs from %s: %w", label, err)
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("%s: no start URLs in the file", label)
	}
	return urls, nil
}

// runningGrid returns the API address a grid running on dataDir wrote
// into it, if that grid answers; "" otherwise.
func runningGrid(ctx context.Context, dataDir, token string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, addrFile))
	if err != nil {
		return ""
	}
	base := strings.TrimRight(strings.TrimSpace(string(b)), "/")
	if u, err := url.Parse(base); err != nil || u.Host == "" {
		return ""
	}
	if !healthy(ctx, base, token) {
		return ""
	}
	return base
}

// healthy reports whether the MCP at base answers its /healthz.
func healthy(ctx context.Context, base, token string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return apiclient.New(base, token, nil).Healthy(ctx)
}
