// Command grid runs gridcrawl's MCP, loader, crawler and indexer in one
// process on embedded backends, and is the command-line client: crawl a site
// to the end, show crawl status, search. Run "grid help" for its commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/gridcrawl/gridcrawl/services/internal/grid"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// GRIDCRAWL_CPU_PROFILE names a file to write a CPU profile of the whole
	// run to (go tool pprof reads it).
	if path := os.Getenv("GRIDCRAWL_CPU_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "grid: GRIDCRAWL_CPU_PROFILE:", err)
			os.Exit(2)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	code := grid.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}
