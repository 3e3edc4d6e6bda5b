// Command grid runs gridcrawl's MCP, loader, crawler and indexer in one
// process on embedded backends, and is the command-line client: crawl a site
// to the end, show crawl status, search. Run "grid help" for its commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gridcrawl/gridcrawl/services/internal/grid"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := grid.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
