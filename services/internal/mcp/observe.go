package mcp

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/routing"
)

// readyz answers whether MCP's backends are reachable: 200, or 503 naming
// the failing ones. Like /healthz it needs no token, for orchestrators'
// probes; only an authorized client is told the backends' errors.
func (m *MCP) readyz(w http.ResponseWriter, r *http.Request) {
	rd := metrics.Ready(r.Context(), m.ready)
	code := http.StatusOK
	if rd.Status != "ready" {
		code = http.StatusServiceUnavailable
		m.log.Warn("not ready", "failing", rd.Failing)
	}
	if !m.authorized(r) {
		for b, v := range rd.Backends {
			if v != "ok" {
				rd.Backends[b] = "unreachable"
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	jsonapi.Write(w, code, rd)
}

// finalCountsFor is how long after its end a finished or cancelled crawl
// keeps its gridcrawl_crawl_urls series.
const finalCountsFor = time.Hour

// crawlCounts reads the crawls and their counts for the crawls collector,
// which calls read at most once per GRIDCRAWL_METRICS_CACHE and never
// concurrently. The counts of a final crawl do not change: they are read
// once.
type crawlCounts struct {
	m     *MCP
	final map[string]map[string]int64
}

func (c *crawlCounts) read(ctx context.Context) (metrics.Snapshot, error) {
	if c.m.deps.Profiles == nil || c.m.deps.Tx == nil || c.m.deps.Queue == nil {
		return metrics.Snapshot{}, nil // an MCP built for one API (HCF tests)
	}
	crawls, err := c.crawls(ctx)
	if err != nil {
		return metrics.Snapshot{}, err
	}
	queues, err := c.queues(ctx)
	if err != nil {
		return metrics.Snapshot{}, err
	}
	return metrics.Snapshot{Crawls: crawls, Queues: queues}, nil
}

// queues reads the depth of the work queues and of their dead-letter
// queues, the loader shards summed.
func (c *crawlCounts) queues(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	names := map[string][]string{
		contracts.QueueLoader:  routing.ShardQueues(max(c.m.deps.Shards, 1)),
		contracts.QueueCrawler: {contracts.QueueCrawler},
		contracts.QueueIndex:   {contracts.QueueIndex},
	}
	for label, qs := range names {
		for _, q := range qs {
			for l, name := range map[string]string{label: q, label + ".dead": queue.DeadLetterQueue(q)} {
				n, err := c.m.deps.Queue.Len(ctx, name)
				if err != nil {
					return nil, fmt.Errorf("length of %s: %w", name, err)
				}
				out[l] += int64(n)
			}
		}
	}
	return out, nil
}

func (c *crawlCounts) crawls(ctx context.Context) ([]metrics.CrawlCounts, error) {
	cs, err := c.m.deps.Profiles.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list crawls: %w", err)
	}
	out := make([]metrics.CrawlCounts, 0, len(cs))
	keep := map[string]bool{}
	for _, cr := range cs {
		cc := metrics.CrawlCounts{ID: cr.ID, State: string(cr.State)}
		final := cr.FinishedAt != nil
		switch {
		case final && time.Since(*cr.FinishedAt) > finalCountsFor:
		case final && c.final[cr.ID] != nil:
			cc.Counts = c.final[cr.ID]
		default:
			counts, err := c.m.deps.Tx.Counts(ctx, cr.ID)
			if err != nil {
				return nil, fmt.Errorf("count records of crawl %s: %w", cr.ID, err)
			}
			cc.Counts = make(map[string]int64, len(counts))
			for s, n := range counts {
				cc.Counts[string(s)] = n
			}
			if final {
				c.final[cr.ID] = cc.Counts
			}
		}
		if cc.Counts != nil && final {
			keep[cr.ID] = true
		}
		out = append(out, cc)
	}
	maps.DeleteFunc(c.final, func(id string, _ map[string]int64) bool { return !keep[id] })
	return out, nil
}
