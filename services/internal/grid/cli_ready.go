package grid

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// readiness reads the MCP's /readyz: which backends do not answer (a full
// disk of embedded backends is the backend "disk").
func (c *client) readiness(ctx context.Context) (metrics.Readiness, error) {
	var rd metrics.Readiness
	err := c.raw(ctx, http.MethodGet, "/readyz", func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("GET /readyz: %s", resp.Status)
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rd); err != nil {
			return fmt.Errorf("decode /readyz: %w", err)
		}
		return nil
	})
	return rd, err
}

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
	c       *client
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
	rd, err := w.c.readiness(ctx)
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
