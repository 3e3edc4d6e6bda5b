package queueing

import (
	"context"
	"errors"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// watchInterval is how often the loader reads the crawls it holds URLs of:
// a PATCH reaches every group of the crawl within it.
const watchInterval = time.Second

// watchLoop reads, every watchInterval, the stored crawl of every crawl
// whose URLs the scheduler holds or held. A newer profile (a PATCH) takes
// effect at once: every group the crawl fetched last decides its delay
// again under the new politeness settings, the crawl's budget in each of
// its groups is set again, and the tasks already held run under it from
// their lease (policies.current). The URLs the loader holds would
// otherwise keep the old settings until they drain, for minutes on a
// large crawl. A crawl that has ended (finished, cancelled, gone) has its
// budgets and spend dropped, so that they do not outlive it.
//
// It costs one profile read per crawl and interval, whatever the crawl's
// size.
func (fr *Frontier) watchLoop(ctx context.Context) {
	if fr.deps.Profiles == nil {
		return
	}
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range fr.sched.Crawls() {
			fr.watch(ctx, id)
		}
	}
}

// watch applies what changed of crawl id since the last look.
func (fr *Frontier) watch(ctx context.Context, id string) {
	c, err := fr.deps.Profiles.Get(ctx, id)
	switch {
	case errors.Is(err, profiles.ErrNotFound):
		fr.endCrawl(id)
		return
	case err != nil:
		return // a backend is down: look again next time
	case c.State == contracts.CrawlFinished || c.State == contracts.CrawlCancelled:
		fr.endCrawl(id)
		return
	}
	p := fr.pol.current(id, &c.Profile)
	if !fr.pol.apply(id, p.Version) {
		return
	}
	fr.sched.SetCrawlDelay(id, *fr.pol.delayPolicy(p))
	fr.sched.SetCrawlBudgets(id, func(group, host string) *politeness.Budget {
		fr.pol.budgetChange(id, p.Version, group)
		return budgetOf(p.Budget, group, host)
	})
	fr.log.Info("crawl settings taken", "crawl_id", id, "version", p.Version)
}

// endCrawl drops the loader's state of a crawl that has ended.
func (fr *Frontier) endCrawl(id string) {
	fr.sched.ForgetCrawl(id)
	fr.pol.forget(id)
}
