package mcp

import (
	"context"
	"fmt"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/frontier"
)

// runSweep periodically republishes the work of records that have sat in a
// non-terminal status for longer than the recovery lease: the transaction
// index is the source of truth, so a contract lost with a killed process is
// found here. A record is republished at most RecoveryAttempts times, then
// it fails; either way it cannot be stranded.
func (m *MCP) runSweep(ctx context.Context) {
	t := time.NewTicker(m.cfg.RecoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := m.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Error("recovery sweep", "err", err)
		}
		if n > 0 {
			m.log.Info("recovery sweep republished work", "records", n)
		}
	}
}

// Sweep runs one recovery pass and returns the number of records it acted on.
func (m *MCP) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		recs, err := m.deps.Tx.Stale(ctx, time.Now().Add(-m.cfg.RecoveryLease), 500)
		if err != nil {
			return total, fmt.Errorf("find stale records: %w", err)
		}
		if len(recs) == 0 {
			return total, nil
		}
		if err := m.recover(ctx, recs); err != nil {
			return total, err
		}
		total += len(recs)
		if len(recs) < 500 {
			return total, nil
		}
	}
}

func (m *MCP) recover(ctx context.Context, recs []txindex.Record) error {
	ts := make([]txindex.Transition, len(recs))
	for i, r := range recs {
		ts[i] = txindex.Transition{Key: r.Key, From: r.Status, To: r.Status, AddAttempt: true}
		if r.Attempts >= m.cfg.RecoveryAttempts {
			ts[i].To, ts[i].Error = contracts.Failed, "stalled: recovery attempts exhausted"
		}
	}
	applied, err := m.deps.Tx.Transition(ctx, ts)
	if err != nil {
		return fmt.Errorf("renew stale records: %w", err)
	}
	byCrawl := map[string][]txindex.Record{}
	for i, r := range recs {
		if applied[i] && ts[i].To == r.Status {
			byCrawl[r.CrawlID] = append(byCrawl[r.CrawlID], r)
		}
	}
	for id, rs := range byCrawl {
		c, err := m.deps.Profiles.Get(ctx, id)
		if err != nil {
			m.log.Warn("recovery: crawl of stale records", "crawl_id", id, "err", err)
			continue
		}
		if c.State == contracts.CrawlCancelled {
			if err := m.Cancel(ctx, id); err != nil {
				return err
			}
			continue
		}
		if err := m.republish(ctx, id, c.Profile, rs); err != nil {
			return err
		}
	}
	return nil
}

func (m *MCP) republish(ctx context.Context, crawlID string, p contracts.Profile, rs []txindex.Record) error {
	var load []txindex.Record
	var parse, reindex []contracts.CrawlerPage
	for _, r := range rs {
		page := contracts.CrawlerPage{URL: r.URL, Depth: r.Depth, Hops: r.Hops, Asset: r.Asset, StatusCode: r.HTTPStatus, FetchedAt: r.StatusTime}
		switch r.Status {
		case contracts.ToBeLoaded:
			load = append(load, r)
		case contracts.ToBeParsed:
			parse = append(parse, page)
		case contracts.ToBeIndexed:
			reindex = append(reindex, page)
		}
	}
	if err := m.frontier.Publish(ctx, crawlID, p, load); err != nil {
		return err
	}
	inline := contracts.InlineProfile(p)
	msgs, err := frontier.CrawlerMessages(crawlID, inline, parse, false)
	if err != nil {
		return err
	}
	more, err := frontier.CrawlerMessages(crawlID, inline, reindex, true)
	if err != nil {
		return err
	}
	msgs = append(msgs, more...)
	if len(msgs) > 0 {
		if err := m.deps.Queue.Publish(ctx, contracts.QueueCrawler, msgs...); err != nil {
			return fmt.Errorf("republish crawler contracts: %w", err)
		}
	}
	return nil
}
