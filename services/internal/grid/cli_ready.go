package grid

import (
	"context"
	"strings"

	"github.com/gridcrawl/gridcrawl/services/internal/apiclient"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// waitingLine says which backends the grid waits for and why, or "" when
// rd is ready.
func waitingLine(rd metrics.Readiness) string {
	if len(rd.Failing) == 0 {
		return ""
	}
	why := make([]string, 0, len(rd.Failing))
	for _, b := range rd.Failing {
		why = append(why, b+": "+rd.Backends[b])
	}
	return "the grid waits for its backends (no work is lost; it resumes once they are back): " + strings.Join(why, "; ")
}

// readyWatch reports, once per outage, that the followed grid waits for a
// backend, and once when it is back.
type readyWatch struct {
	c       *apiclient.Client
	reads   int
	waiting string
}

// readyEvery is how many status reads of grid crawl pass between two
// readiness reads.
const readyEvery = 10

// poll reads the readiness every readyEvery calls and returns the line to
// report when it changed from ready to waiting or back, or "".
func (w *readyWatch) poll(ctx context.Context) string {
	w.reads++
	if w.reads%readyEvery != 1 {
		return ""
	}
	rd, err := w.c.Readiness(ctx)
	if err != nil {
		return ""
	}
	now := waitingLine(rd)
	was := w.waiting
	w.waiting = now
	switch {
	case now != "" && was == "":
		return now
	case now == "" && was != "":
		return "the grid's backends are back: the crawl resumes"
	}
	return ""
}
