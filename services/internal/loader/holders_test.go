package loader

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestSlowGroupLeavesOtherGroupsASlot: a shard with two prefetch slots
// holds a contract of a group that allows one fetch a second. A second
// small contract of that group would drain within holdWait, but holding it
// would give the group both slots: it is parked, and a contract of another
// group, published after it, is fetched at once instead of waiting for the
// first contract's last URL. (On the code before the bound on holders, the
// other group's page came after the slow group's last page of the first
// contract, every run.)
func TestSlowGroupLeavesOtherGroupsASlot(t *testing.T) {
	b := newBackends(t)
	b.shards = 1
	slow := newSite(t, "User-agent: *\nCrawl-delay: 1\n")
	fast := newSite(t, "")
	// Two host names, two crawl host groups, one shard.
	host := func(s *site, name string) string { return strings.Replace(s.URL, "127.0.0.1", name, 1) }
	slowURL, fastURL := host(slow, "slow.holders.test"), host(fast, "fast.holders.test")
	cfg := config(t, map[string]string{"GRIDCRAWL_LOADER_PREFETCH": "2", "GRIDCRAWL_RESOLVE": "*.holders.test=127.0.0.1"})
	l, _ := b.runLoader(t, cfg)

	// Four URLs left after the first: a second contract waits 4 s behind
	// them, within holdWait, and the other group's page has 4 s to come
	// before the first contract's last.
	first := []string{slowURL + "/a0", slowURL + "/a1", slowURL + "/a2", slowURL + "/a3", slowURL + "/a4"}
	b.submit(t, "first", contracts.CrawlRunning, profile(first...), first...)
	waitFor(t, "the first page of the slow group", func() bool { return len(slow.pageHits()) >= 1 })

	second := []string{slowURL + "/b0"}
	b.submit(t, "second", contracts.CrawlRunning, profile(second...), second...)
	waitFor(t, "the second contract taken", func() bool { return l.Parked() >= 1 || b.queued(t) == 0 })

	other := []string{fastURL + "/c0"}
	b.submit(t, "other", contracts.CrawlRunning, profile(other...), other...)
	b.waitLoaded(t, "other", other...)
	b.waitLoaded(t, "first", first...)
	b.waitLoaded(t, "second", second...)

	fastAt := fast.pageHits()[0].at
	slowHits := slow.pageHits()
	var lastOfFirst hit
	for _, h := range slowHits {
		if strings.HasPrefix(h.path, "/a") {
			lastOfFirst = h
		}
	}
	if !fastAt.Before(lastOfFirst.at) {
		t.Errorf("the other group's page came %v after the slow group's last page of the first contract: the slow group held both slots",
			fastAt.Sub(lastOfFirst.at))
	}
	if l.Parked() < 1 {
		t.Errorf("parked %d urls, want the second contract's", l.Parked())
	}
	if n := len(slowHits); n != len(first)+len(second) {
		t.Errorf("slow group fetched %d pages, want %d", n, len(first)+len(second))
	}
	checkGaps(t, slowHits, 900*time.Millisecond)
}

// TestSecondContractTakenWholeWhenQueueIsShort: a contract of a group whose
// queue drains within holdWait is held whole (up to the group's limit), not
// cut at holdWait with its rest parked for a few seconds: a group fed by
// contracts larger than holdWait's worth would otherwise send most of its
// backlog back to the broker every few seconds. (On the code before, 17 of
// the 40 URLs were parked, every run.)
func TestSecondContractTakenWholeWhenQueueIsShort(t *testing.T) {
	b := newBackends(t)
	b.shards = 1
	s := newSite(t, "")
	p := func(urls []string) contracts.Profile {
		p := profile(urls...)
		p.Politeness.MinDelayMS, p.Politeness.MaxDelayMS = 200, 200
		return p
	}
	l, _ := b.runLoader(t, config(t, nil))

	first := s.pages(3)
	b.submit(t, "first", contracts.CrawlRunning, p(first), first...)
	waitFor(t, "the first page", func() bool { return len(s.pageHits()) >= 1 })

	var second []string
	for i := range 40 {
		second = append(second, fmt.Sprintf("%s/b%d.html", s.URL, i))
	}
	b.submit(t, "second", contracts.CrawlRunning, p(second), second...)
	waitFor(t, "the second contract taken", func() bool { return l.Parked() >= 1 || b.queued(t) == 0 })
	if n := l.Parked(); n != 0 {
		t.Errorf("parked %d of the second contract's %d urls, want none: the group's queue drained within holdWait", n, len(second))
	}
	b.waitLoaded(t, "first", first...)
	b.waitLoaded(t, "second", second...)
	checkGaps(t, s.pageHits(), 180*time.Millisecond)
	if n := len(s.pageHits()); n != len(first)+len(second) {
		t.Errorf("site got %d page requests, want %d", n, len(first)+len(second))
	}
}
