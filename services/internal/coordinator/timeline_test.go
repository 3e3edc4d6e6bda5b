package coordinator

import (
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestTimelineBounded adds many samples to a timeline: it never holds more
// than maxTimelinePoints, keeps the first and the last sample, and its
// pages per second are the rate between neighbouring points.
func TestTimelineBounded(t *testing.T) {
	for _, n := range []int{1, 2, maxTimelinePoints, maxTimelinePoints + 1, 5 * maxTimelinePoints} {
		tl := &contracts.Timeline{}
		start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		for i := range n {
			addPoint(tl, start.Add(time.Duration(i)*time.Second), map[string]int64{"to-be-loaded": 10, "indexed": int64(2 * i)}, 0)
		}
		if len(tl.Points) > maxTimelinePoints {
			t.Errorf("%d samples: %d points, want at most %d", n, len(tl.Points), maxTimelinePoints)
		}
		if n <= maxTimelinePoints && len(tl.Points) != n {
			t.Errorf("%d samples: %d points, want all", n, len(tl.Points))
		}
		if !tl.Points[0].Time.Equal(start) || tl.Points[0].PagesPerSecond != nil {
			t.Errorf("%d samples: first point %v, %v; want the first sample, no rate", n, tl.Points[0].Time, tl.Points[0].PagesPerSecond)
		}
		last := tl.Points[len(tl.Points)-1]
		if want := start.Add(time.Duration(n-1) * time.Second); !last.Time.Equal(want) {
			t.Errorf("%d samples: last point at %v, want %v", n, last.Time, want)
		}
		if n > 1 && (last.PagesPerSecond == nil || *last.PagesPerSecond != 2) {
			t.Errorf("%d samples: last rate %v, want 2 pages/s", n, last.PagesPerSecond)
		}
	}
}

// TestTimelineRefetches: a continuous crawl's round takes settled URLs back
// to to-be-loaded; the rate counts them as fetched once more instead of
// going negative.
func TestTimelineRefetches(t *testing.T) {
	tl := &contracts.Timeline{}
	start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	samples := []struct {
		counts    map[string]int64
		refetched int64
		want      float64
	}{
		{map[string]int64{"indexed": 10}, 0, 0},
		// 10 taken back; 4 of them fetched again within the second.
		{map[string]int64{"to-be-loaded": 6, "indexed": 4}, 10, 4},
		{map[string]int64{"indexed": 10}, 10, 6},
		{map[string]int64{"indexed": 10}, 10, 0},
	}
	for i, s := range samples {
		addPoint(tl, start.Add(time.Duration(i)*time.Second), s.counts, s.refetched)
		p := tl.Points[len(tl.Points)-1]
		if i > 0 && (p.PagesPerSecond == nil || *p.PagesPerSecond != s.want) {
			t.Errorf("sample %d: rate %v, want %v", i, p.PagesPerSecond, s.want)
		}
	}
}
