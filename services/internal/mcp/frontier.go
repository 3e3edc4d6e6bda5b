package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// reportMaxAge drops the reports of loaders that stopped reporting, when
// a report does not say how often its loader writes one.
const reportMaxAge = time.Minute

// staleIntervals is how many of its report intervals a loader may miss
// before MCP takes it for gone: a loader that restarts has a new id, and
// the report of the old one stays in the asset store.
const staleIntervals = 3

// minStaleAge is the least age at which a report is stale, whatever its
// interval: a loader with a short interval that stalls for a moment (a
// busy machine, a slow asset store) is not taken for gone.
const minStaleAge = 2 * time.Second

// reportLive reports whether l, read at now, is the report of a live
// loader: no older than staleIntervals of its intervals, or than
// minStaleAge when that is longer.
func reportLive(l contracts.FrontierLoader, now time.Time) bool {
	maxAge := reportMaxAge
	if l.IntervalMS > 0 {
		maxAge = max(staleIntervals*time.Duration(l.IntervalMS)*time.Millisecond, minStaleAge)
	}
	return now.Sub(l.Time) <= maxAge
}

// Frontier merges the frontier reports of the live loaders, each in
// human units (see humanize).
func (m *MCP) Frontier(ctx context.Context) (contracts.FrontierReport, error) {
	out := contracts.FrontierReport{V: contracts.Version, Time: time.Now().UTC(), Loaders: []contracts.FrontierLoader{}}
	if m.deps.Assets == nil {
		return out, nil
	}
	keys, err := m.deps.Assets.List(ctx, contracts.FrontierReportPrefix)
	if err != nil {
		return out, fmt.Errorf("list frontier reports: %w", err)
	}
	for _, k := range keys {
		rc, err := m.deps.Assets.Get(ctx, k, 0, -1)
		if err != nil {
			continue // replaced or removed meanwhile
		}
		b, err := io.ReadAll(io.LimitReader(rc, 16<<20))
		rc.Close()
		if err != nil {
			return out, fmt.Errorf("read frontier report %q: %w", k, err)
		}
		var l contracts.FrontierLoader
		if err := json.Unmarshal(b, &l); err != nil || !reportLive(l, out.Time) {
			continue
		}
		var r struct {
			Counts contracts.FrontierTotals `json:"counts"`
		}
		if err := json.Unmarshal(l.Report, &r); err != nil {
			continue
		}
		t := &out.Totals
		t.Groups += r.Counts.Groups
		t.Ready += r.Counts.Ready
		t.Waiting += r.Counts.Waiting
		t.Busy += r.Counts.Busy
		t.Inactive += r.Counts.Inactive
		t.Retired += r.Counts.Retired
		t.Idle += r.Counts.Idle
		t.Queued += r.Counts.Queued
		t.RetiredItems += r.Counts.RetiredItems
		t.Filed += l.FiledURLs
		l.Report = humanize(l.Report)
		out.Loaders = append(out.Loaders, l)
	}
	return out, nil
}

func (m *MCP) frontierReport(w http.ResponseWriter, r *http.Request) {
	rep, err := m.Frontier(r.Context())
	if err != nil {
		m.log.Error("frontier report", "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the frontier reports", "")
		return
	}
	jsonapi.Write(w, http.StatusOK, rep)
}
