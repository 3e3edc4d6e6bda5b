package loader

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"slices"
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
	rep, err := json.Marshal(l.sched.Snapshot(reportGroups))
	if err != nil {
		return err
	}
	filed, filedURLs := l.filedReport(ctx)
	body, err := json.Marshal(contracts.FrontierLoader{LoaderID: l.cfg.ID, Time: time.Now().UTC(),
		IntervalMS: l.cfg.ReportInterval.Milliseconds(), Report: rep, Browser: l.frontierBrowser(), Dedup: l.rec.dedup.report(),
		Filed: filed, FiledURLs: filedURLs})
	if err != nil {
		return err
	}
	return l.deps.Assets.Put(ctx, contracts.FrontierReportPrefix+l.cfg.ID+".json", bytes.NewReader(body), int64(len(body)), "application/json")
}

// filedReport returns the queues of the loader's frontier stores, the
// earliest due first, at most reportGroups of them, and the URLs filed in
// all; nil and 0 without stores.
func (l *Loader) filedReport(ctx context.Context) ([]contracts.FrontierFiled, int) {
	if l.fronts == nil {
		return nil, 0
	}
	var out []contracts.FrontierFiled
	total := 0
	for _, s := range l.fronts.stores {
		for _, q := range s.Queues() {
			total += q.Filed
			due, ok, err := s.Oldest(ctx, q.QueueID)
			if err != nil || !ok {
				continue // emptied meanwhile, or the store is closing
			}
			out = append(out, contracts.FrontierFiled{Group: q.Group, CrawlID: q.Crawl, Filed: q.Filed, Taken: q.Taken, OldestDue: due.UTC()})
		}
	}
	slices.SortFunc(out, func(a, b contracts.FrontierFiled) int {
		return cmp.Or(a.OldestDue.Compare(b.OldestDue), cmp.Compare(a.Group, b.Group), cmp.Compare(a.CrawlID, b.CrawlID))
	})
	if len(out) > reportGroups {
		out = out[:reportGroups]
	}
	return out, total
}
