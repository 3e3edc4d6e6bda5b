package loader

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// reportGroups bounds the groups of one report.
const reportGroups = 200

// reportLoop stores the scheduler's report every ReportInterval.
func (l *Loader) reportLoop(ctx context.Context) {
	t := time.NewTicker(l.cfg.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := l.writeReport(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("write frontier report", "err", err)
		}
	}
}

func (l *Loader) writeReport(ctx context.Context) error {
	rep, err := json.Marshal(l.front.Snapshot(reportGroups))
	if err != nil {
		return err
	}
	filed, filedURLs := l.front.FiledReport(ctx, reportGroups)
	body, err := json.Marshal(contracts.FrontierLoader{LoaderID: l.cfg.ID, Time: time.Now().UTC(),
		IntervalMS: l.cfg.ReportInterval.Milliseconds(), Report: rep, Browser: l.fetch.FrontierBrowser(), Dedup: l.rec.DedupReport(),
		Filed: filed, FiledURLs: filedURLs})
	if err != nil {
		return err
	}
	return l.deps.Assets.Put(ctx, contracts.FrontierReportPrefix+l.cfg.ID+".json", bytes.NewReader(body), int64(len(body)), "application/json")
}
