package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
)

// maxTimelinePoints bounds a crawl's timeline: past it, every other point
// is dropped, so a crawl of any length keeps between half and all of it.
const maxTimelinePoints = 1000

// timelinePrefix is where a crawl's timeline is kept in the assets store,
// beside its WARC segments: timelines/<crawl id>.json.
const timelinePrefix = "timelines/"

// Timeline is the body of GET /api/v1/crawls/{id}/timeline: the crawl's
// counts per status sampled by MCP every IntervalMS while it was not
// finished or cancelled (older stretches thinned to bound the points).
type Timeline struct {
	CrawlID    string          `json:"crawl_id"`
	IntervalMS int64           `json:"interval_ms"`
	Points     []TimelinePoint `json:"points"`
}

// TimelinePoint is one sample. PagesPerSecond is the rate at which URLs
// left to-be-loaded (were fetched or settled by a loader) since the point
// before; null for the first point.
type TimelinePoint struct {
	Time           time.Time        `json:"time"`
	Counts         map[string]int64 `json:"counts"`
	PagesPerSecond *float64         `json:"pages_per_second"`
	// Refetched counts a continuous crawl's URLs that the due check took
	// back to to-be-loaded since the crawl started: they left
	// to-be-loaded once more than the counts show.
	Refetched int64 `json:"refetched,omitempty"`
}

// timelines holds the timelines of the crawls MCP sampled or read.
type timelines struct {
	mu    sync.Mutex
	byID  map[string]*Timeline
	alive map[string]bool // crawls sampled in the last round
}

// loaded returns the settled count of a sample: every record not waiting
// to be loaded.
func loaded(counts map[string]int64) int64 {
	var n int64
	for s, c := range counts {
		if s != string(contracts.ToBeLoaded) {
			n += c
		}
	}
	return n
}

// add appends a sample to tl and thins it past maxTimelinePoints.
// refetched is the crawl's count of URLs taken back by the due check.
func (tl *Timeline) add(at time.Time, counts map[string]int64, refetched int64) {
	p := TimelinePoint{Time: at.UTC().Truncate(time.Millisecond), Counts: counts, Refetched: refetched}
	if n := len(tl.Points); n > 0 {
		prev := tl.Points[n-1]
		if dt := at.Sub(prev.Time).Seconds(); dt > 0 {
			v := max(float64(loaded(counts)+refetched-loaded(prev.Counts)-prev.Refetched)/dt, 0)
			p.PagesPerSecond = &v
		}
	}
	tl.Points = append(tl.Points, p)
	if len(tl.Points) > maxTimelinePoints {
		kept := tl.Points[:0]
		for i, q := range tl.Points {
			if i%2 == 0 || i == len(tl.Points)-1 {
				kept = append(kept, q)
			}
		}
		tl.Points = kept
	}
}

// timelineInterval is the configured interval, or its default for a
// Config not read from the environment.
func (m *MCP) timelineInterval() time.Duration {
	if m.cfg.TimelineInterval <= 0 {
		return 5 * time.Second
	}
	return m.cfg.TimelineInterval
}

// runTimeline samples the counts of every crawl that is not finished or
// cancelled each TimelineInterval, and once more when it has just become
// so, until ctx ends.
func (m *MCP) runTimeline(ctx context.Context) {
	t := time.NewTicker(m.timelineInterval())
	defer t.Stop()
	for {
		if err := m.sampleTimelines(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("sample timelines", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *MCP) sampleTimelines(ctx context.Context) error {
	crawls, err := m.deps.Profiles.List(ctx)
	if err != nil {
		return fmt.Errorf("list crawls: %w", err)
	}
	m.tl.mu.Lock()
	was := m.tl.alive
	m.tl.mu.Unlock()
	alive := map[string]bool{}
	for _, c := range crawls {
		live := c.State != contracts.CrawlFinished && c.State != contracts.CrawlCancelled
		if !live && !was[c.ID] {
			continue
		}
		if live {
			alive[c.ID] = true
		}
		counts, err := m.deps.Tx.Counts(ctx, c.ID)
		if err != nil {
			return fmt.Errorf("count records of crawl %q: %w", c.ID, err)
		}
		sample := make(map[string]int64, len(counts))
		for s, n := range counts {
			sample[string(s)] = n
		}
		tl, err := m.timelineOf(ctx, c.ID)
		if err != nil {
			return err
		}
		m.tl.mu.Lock()
		tl.add(time.Now(), sample, m.refetchedOf(c.ID).Load())
		body, err := json.Marshal(tl)
		m.tl.mu.Unlock()
		if err != nil {
			return fmt.Errorf("encode timeline of crawl %q: %w", c.ID, err)
		}
		if m.deps.Assets != nil {
			if err := m.deps.Assets.Put(ctx, timelinePrefix+c.ID+".json", bytes.NewReader(body), int64(len(body)), "application/json"); err != nil {
				return fmt.Errorf("store timeline of crawl %q: %w", c.ID, err)
			}
		}
	}
	m.tl.mu.Lock()
	m.tl.alive = alive
	m.tl.mu.Unlock()
	return nil
}

// refetchedOf returns the count of crawl id's URLs the due check took back
// into the pipeline.
func (m *MCP) refetchedOf(id string) *atomic.Int64 {
	c, _ := m.refetched.LoadOrStore(id, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// timelineOf returns the timeline of crawl id, read from the assets store
// when this MCP has not sampled it yet (a restart), or a new one.
func (m *MCP) timelineOf(ctx context.Context, id string) (*Timeline, error) {
	m.tl.mu.Lock()
	tl, ok := m.tl.byID[id]
	m.tl.mu.Unlock()
	if ok {
		return tl, nil
	}
	tl = &Timeline{CrawlID: id, IntervalMS: m.timelineInterval().Milliseconds(), Points: []TimelinePoint{}}
	if m.deps.Assets != nil {
		rc, err := m.deps.Assets.Get(ctx, timelinePrefix+id+".json", 0, -1)
		switch {
		case errors.Is(err, assets.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("read timeline of crawl %q: %w", id, err)
		default:
			b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("read timeline of crawl %q: %w", id, err)
			}
			var stored Timeline
			if err := json.Unmarshal(b, &stored); err == nil && stored.Points != nil {
				tl.Points = stored.Points
				// The count goes on from the last sample of the MCP before.
				if n := len(tl.Points); n > 0 {
					c := m.refetchedOf(id)
					c.Store(max(c.Load(), tl.Points[n-1].Refetched))
				}
			}
		}
	}
	m.tl.mu.Lock()
	defer m.tl.mu.Unlock()
	if have, ok := m.tl.byID[id]; ok {
		return have, nil
	}
	m.tl.byID[id] = tl
	return tl, nil
}

// timeline serves GET /api/v1/crawls/{id}/timeline.
func (m *MCP) timeline(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	tl, err := m.timelineOf(r.Context(), id)
	if err != nil {
		m.log.Error("timeline", "crawl_id", id, "err", err)
		writeError(w, http.StatusInternalServerError, "could not read the timeline", "")
		return
	}
	m.tl.mu.Lock()
	out := Timeline{CrawlID: id, IntervalMS: m.timelineInterval().Milliseconds(), Points: append([]TimelinePoint{}, tl.Points...)}
	m.tl.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}
