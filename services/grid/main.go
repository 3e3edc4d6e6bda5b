// Command grid runs gridcrawl's MCP, loader, crawler and indexer in one
// process on embedded backends, and is the command-line client: crawl a site
// to the end, show crawl status, search. Run "grid help" for its commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/grid"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first interrupt stops the command gracefully; a second one, while
	// it is stopping, ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	// GRIDCRAWL_CPU_PROFILE names a file to write a CPU profile of the whole
	// run to, GRIDCRAWL_MEM_PROFILE one for a heap profile at the end (go
	// tool pprof reads them). With GRIDCRAWL_PROFILE_INTERVAL (such as 30s)
	// they are written once per interval instead, to NAME.1, NAME.2..., so
	// that the start and the end of a long crawl can be compared.
	var every time.Duration
	if s := os.Getenv("GRIDCRAWL_PROFILE_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "grid: GRIDCRAWL_PROFILE_INTERVAL:", err)
			os.Exit(2)
		}
		every = d
	}
	p, err := startProfiles(os.Getenv("GRIDCRAWL_CPU_PROFILE"), os.Getenv("GRIDCRAWL_MEM_PROFILE"), every)
	if err != nil {
		fmt.Fprintln(os.Stderr, "grid:", err)
		os.Exit(2)
	}
	code := grid.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err := p.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "grid:", err)
	}
	if code != 0 {
		os.Exit(code)
	}
}
