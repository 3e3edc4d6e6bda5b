// Command demosite serves one of gridcrawl's simulated webs on 127.0.0.1
// until interrupted, and prints its start URLs and the GRIDCRAWL_RESOLVE host
// override a crawler needs to reach its virtual hosts.
//
// By default it serves the awkward test site of package websim; with -web it
// serves a large generated web instead. With -print-env it prints only
// KEY='VALUE' lines, ready to be sourced by a shell:
//
//	go run ./scripts/demosite -print-env >demo.env &
//	until [ -s demo.env ]; do sleep 0.1; done
//	set -a; . ./demo.env; set +a
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// served is what both kinds of web offer the command.
type served interface {
	Close()
	Port() int
	Resolve() string
}

// run serves until ctx ends and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demosite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 0, "port on 127.0.0.1 (0 picks a free one)")
	printEnv := fs.Bool("print-env", false, "print only KEY='VALUE' lines for a shell to source")
	web := fs.Bool("web", false, "serve a large generated web instead of the test site")
	starts := fs.Int("starts", 0, "with -web: number of start URLs to print (0 prints one per host)")
	var cfg websim.WebConfig
	fs.IntVar(&cfg.Hosts, "hosts", 10, "with -web: number of hosts")
	fs.IntVar(&cfg.PagesPerHost, "pages", 100, "with -web: pages per host")
	fs.IntVar(&cfg.LinksPerPage, "links", 10, "with -web: links per page")
	fs.IntVar(&cfg.CrossHostLinks, "cross", 2, "with -web: links per page to other hosts")
	fs.IntVar(&cfg.PageBytes, "bytes", 4096, "with -web: approximate page size in bytes")
	fs.DurationVar(&cfg.Latency, "latency", 0, "with -web: delay added to every response")
	fs.Int64Var(&cfg.Seed, "seed", 1, "with -web: seed of the generated web")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demosite: unexpected arguments %q\n", fs.Args())
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	var (
		site served
		urls []string
	)
	if *web {
		w := websim.NewWeb(cfg)
		site = w
		if err := w.StartPort(*port); err != nil {
			log.Error("start web", "err", err)
			return 1
		}
		urls = w.StartURLs()
		if *starts > 0 && *starts < len(urls) {
			urls = urls[:*starts]
		}
	} else {
		s := websim.NewTestSite()
		site = s
		if err := s.StartPort(*port); err != nil {
			log.Error("start test site", "err", err)
			return 1
		}
		urls = []string{s.StartURL()}
	}
	defer site.Close()

	if *printEnv {
		fmt.Fprintf(stdout, "GRIDCRAWL_RESOLVE=%s\n", shellQuote(site.Resolve()))
		fmt.Fprintf(stdout, "GRIDCRAWL_DEMO_PORT=%d\n", site.Port())
		fmt.Fprintf(stdout, "GRIDCRAWL_DEMO_START_URL=%s\n", shellQuote(urls[0]))
		fmt.Fprintf(stdout, "GRIDCRAWL_DEMO_START_URLS=%s\n", shellQuote(strings.Join(urls, " ")))
	} else {
		fmt.Fprintf(stdout, "serving on 127.0.0.1:%d\n", site.Port())
		for _, u := range urls {
			fmt.Fprintf(stdout, "start URL: %s\n", u)
		}
		fmt.Fprintf(stdout, "host override: GRIDCRAWL_RESOLVE=%s\n", shellQuote(site.Resolve()))
		fmt.Fprintln(stdout, "stop with Ctrl-C")
	}
	if f, ok := stdout.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
	log.Info("serving", "port", site.Port(), "web", *web)
	<-ctx.Done()
	log.Info("stopping")
	return 0
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
