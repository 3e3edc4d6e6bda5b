package loader

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
func (l *Loader) watchLoop(ctx context.Context) {
	if l.deps.Profiles == nil {
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
		for _, id := range l.sched.Crawls() {
			l.watch(ctx, id)
		}
	}
}

// watch applies what changed of crawl id since the last look.
func (l *Loader) watch(ctx context.Context, id string) {
	c, err := l.deps.Profiles.Get(ctx, id)
	switch {
	case errors.Is(err, profiles.ErrNotFound):
		l.endCrawl(id)
		return
	case err != nil:
		return // a backend is down: look again next time
	case c.State == contracts.CrawlFinished || c.State == contracts.CrawlCancelled:
		l.endCrawl(id)
		return
	}
	p := l.pol.current(id, &c.Profile)
	if !l.pol.apply(id, p.Version) {
		return
	}
	l.sched.SetCrawlDelay(id, *l.pol.delayPolicy(p))
	l.sched.SetCrawlBudgets(id, func(group, host string) *politeness.Budget {
		l.pol.budgetChange(id, p.Version, group)
		return budgetOf(p.Budget, group, host)
	})
	l.log.Info("crawl settings taken", "crawl_id", id, "version", p.Version)
}

// endCrawl drops the loader's state of a crawl that has ended.
func (l *Loader) endCrawl(id string) {
	l.sched.ForgetCrawl(id)
	l.pol.forget(id)
}
