package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// timelines holds the timelines of the crawls MCP sampled or read.
type timelines struct {
	mu    sync.Mutex
	byID  map[string]*contracts.Timeline
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

// addPoint appends a sample to tl and thins it past maxTimelinePoints.
// refetched is the crawl's count of URLs taken back by the due check.
func addPoint(tl *contracts.Timeline, at time.Time, counts map[string]int64, refetched int64) {
	p := contracts.TimelinePoint{Time: at.UTC().Truncate(time.Millisecond), Counts: counts, Refetched: refetched}
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
func (co *Coordinator) timelineInterval() time.Duration {
	if co.cfg.TimelineInterval <= 0 {
		return 5 * time.Second
	}
	return co.cfg.TimelineInterval
}

// runTimeline samples the counts of every crawl that is not finished or
// cancelled each TimelineInterval, and once more when it has just become
// so, until ctx ends.
func (co *Coordinator) runTimeline(ctx context.Context) {
	t := time.NewTicker(co.timelineInterval())
	defer t.Stop()
	for {
		if err := co.sampleTimelines(ctx); err != nil && ctx.Err() == nil {
			co.log.Warn("sample timelines", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (co *Coordinator) sampleTimelines(ctx context.Context) error {
	crawls, err := co.deps.Profiles.List(ctx)
	if err != nil {
		return fmt.Errorf("list crawls: %w", err)
	}
	co.tl.mu.Lock()
	was := co.tl.alive
	co.tl.mu.Unlock()
	alive := map[string]bool{}
	for _, c := range crawls {
		live := c.State != contracts.CrawlFinished && c.State != contracts.CrawlCancelled
		if !live && !was[c.ID] {
			continue
		}
		if live {
			alive[c.ID] = true
		}
		counts, err := co.deps.Tx.Counts(ctx, c.ID)
		if err != nil {
			return fmt.Errorf("count records of crawl %q: %w", c.ID, err)
		}
		sample := make(map[string]int64, len(counts))
		for s, n := range counts {
			sample[string(s)] = n
		}
		tl, err := co.timelineOf(ctx, c.ID)
		if err != nil {
			return err
		}
		co.tl.mu.Lock()
		addPoint(tl, time.Now(), sample, co.refetchedOf(c.ID).Load())
		body, err := json.Marshal(tl)
		co.tl.mu.Unlock()
		if err != nil {
			return fmt.Errorf("encode timeline of crawl %q: %w", c.ID, err)
		}
		if co.deps.Assets != nil {
			if err := co.deps.Assets.Put(ctx, timelinePrefix+c.ID+".json", bytes.NewReader(body), int64(len(body)), "application/json"); err != nil {
				return fmt.Errorf("store timeline of crawl %q: %w", c.ID, err)
			}
		}
	}
	co.tl.mu.Lock()
	co.tl.alive = alive
	co.tl.mu.Unlock()
	return nil
}

// refetchedOf returns the count of crawl id's URLs the due check took back
// into the pipeline.
func (co *Coordinator) refetchedOf(id string) *atomic.Int64 {
	c, _ := co.refetched.LoadOrStore(id, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// timelineOf returns the timeline of crawl id, read from the assets store
// when this MCP has not sampled it yet (a restart), or a new one.
func (co *Coordinator) timelineOf(ctx context.Context, id string) (*contracts.Timeline, error) {
	co.tl.mu.Lock()
	tl, ok := co.tl.byID[id]
	co.tl.mu.Unlock()
	if ok {
		return tl, nil
	}
	tl = &contracts.Timeline{CrawlID: id, IntervalMS: co.timelineInterval().Milliseconds(), Points: []contracts.TimelinePoint{}}
	if co.deps.Assets != nil {
		rc, err := co.deps.Assets.Get(ctx, timelinePrefix+id+".json", 0, -1)
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
			var stored contracts.Timeline
			if err := json.Unmarshal(b, &stored); err == nil && stored.Points != nil {
				tl.Points = stored.Points
				// The count goes on from the last sample of the MCP before.
				if n := len(tl.Points); n > 0 {
					c := co.refetchedOf(id)
					c.Store(max(c.Load(), tl.Points[n-1].Refetched))
				}
			}
		}
	}
	co.tl.mu.Lock()
	defer co.tl.mu.Unlock()
	if have, ok := co.tl.byID[id]; ok {
		return have, nil
	}
	co.tl.byID[id] = tl
	return tl, nil
}

// Timeline returns a copy of crawl id's timeline.
func (co *Coordinator) Timeline(ctx context.Context, id string) (contracts.Timeline, error) {
	tl, err := co.timelineOf(ctx, id)
	if err != nil {
		return contracts.Timeline{}, err
	}
	co.tl.mu.Lock()
	defer co.tl.mu.Unlock()
	return contracts.Timeline{CrawlID: id, IntervalMS: co.timelineInterval().Milliseconds(), Points: append([]contracts.TimelinePoint{}, tl.Points...)}, nil
}
