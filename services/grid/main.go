// Command grid runs gridcrawl's MCP, loader, crawler and indexer in one
// process on embedded backends, and is the command-line client: crawl a site
// to the end, show crawl status, search. Run "grid help" for its commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"

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
	// GRIDCRAWL_MEM_PROFILE names a file to write a heap profile to, taken
	// when the heap was at its largest during the run.
	if path := os.Getenv("GRIDCRAWL_MEM_PROFILE"); path != "" {
		done := make(chan struct{})
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			peakHeapProfile(path, done)
		}()
		defer func() { close(done); <-finished }()
	}
	code := grid.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}

// peakHeapProfile writes a heap profile to path whenever the live heap is
// larger than at the last profile, until done is closed, and reports the
// largest heap seen on stderr.
func peakHeapProfile(path string, done <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	var peak, peakTotal uint64
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			fmt.Fprintf(os.Stderr, "grid: peak heap objects %d MiB, runtime total %d MiB; heap profile in %s\n", peak>>20, peakTotal>>20, path)
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		peakTotal = max(peakTotal, sample[1].Value.Uint64())
		if heap := sample[0].Value.Uint64(); heap > peak+peak/20 {
			peak = heap
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}
}
