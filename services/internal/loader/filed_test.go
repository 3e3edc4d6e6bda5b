package loader

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/loader/queueing"
)

// filedConfig is a loader configuration with the frontier store in dir and
// a group window of 5 URLs, so that a group of more URLs would park most of
// them in the broker.
func filedConfig(t *testing.T, dir string) Config {
	return config(t, map[string]string{"GRIDCRAWL_LOADER_FRONTIER_DIR": dir, "GRIDCRAWL_LOADER_GROUP_QUEUE": "5",
		"GRIDCRAWL_WARC_FLUSH_INTERVAL": "20ms"})
}

// waitOwner waits until l owns every shard (a loader with a frontier
// store claims them as it starts), so that the contracts submitted next
// are filed from the queue, not found by the first owner's rebuild.
func waitOwner(t *testing.T, l *Loader) {
	t.Helper()
	waitFor(t, "the loader to own its shards", func() bool {
		for i := range l.front.Shards() {
			if !l.front.Owns(i) {
				return false
			}
		}
		return true
	})
}

// fixedDelay returns p with a fixed delay of ms between a group's fetches.
func fixedDelay(p contracts.Profile, ms int) contracts.Profile {
	p.Politeness.MinDelayMS, p.Politeness.DelayFactor = ms, 0
	return p
}

// distinct counts the distinct paths of hits and the most any was hit.
func distinct(hits []hit) (n, most int) {
	seen := map[string]int{}
	for _, h := range hits {
		seen[h.path]++
		most = max(most, seen[h.path])
	}
	return len(seen), most
}

// TestFiledURLsFetchedOnceWithoutParking: with a frontier store, a group of
// 60 URLs (twelve times its window) is fetched whole, each URL once, with
// nothing parked; the contracts are acknowledged as soon as their URLs are
// filed, and the store is empty once every outcome is recorded.
func TestFiledURLsFetchedOnceWithoutParking(t *testing.T) {
	s := newSite(t, "")
	urls := s.pages(60)
	b := newBackends(t)
	p := fixedDelay(profile(urls...), 5)
	l, _ := b.runLoader(t, filedConfig(t, t.TempDir()))
	waitOwner(t, l)
	// The group's window, sampled as the crawl runs.
	most := make(chan int)
	stop := make(chan struct{})
	go func() {
		m := 0
		defer func() { most <- m }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if l.front.Filed() == 0 {
				continue // the stores are open before the first URL is filed
			}
			for _, q := range l.front.FiledQueues() {
				queued, _ := l.front.Backlog(q.Group)
				m = max(m, queued)
			}
		}
	}()
	b.submit(t, "c", contracts.CrawlRunning, p, urls...)
	b.waitLoaded(t, "c", urls...)
	close(stop)
	if m := <-most; m > 5 || m == 0 {
		t.Errorf("the group's window held up to %d URLs, want 1 to 5 (GRIDCRAWL_LOADER_GROUP_QUEUE)", m)
	}
	if n, most := distinct(s.pageHits()); n != len(urls) || most != 1 {
		t.Errorf("%d pages fetched, one of them %d times; want %d, each once", n, most, len(urls))
	}
	if n := l.Parked(); n != 0 {
		t.Errorf("parked %d URLs, want none: the store holds them", n)
	}
	if n := l.front.Filed(); n != int64(len(urls)) {
		t.Errorf("filed %d URLs, want %d", n, len(urls))
	}
	if n := b.queued(t); n != 0 {
		t.Errorf("%d loader contracts waiting, want 0", n)
	}
	waitFor(t, "the store emptied", func() bool {
		return len(l.front.FiledQueues()) == 0
	})
}

// TestFiledURLsSurviveRestart: a loader stopped half-way leaves the URLs it
// has not fetched in its store, and their contracts acknowledged; the next
// loader on the same store fetches them, each page once in all.
func TestFiledURLsSurviveRestart(t *testing.T) {
	s := newSite(t, "")
	urls := s.pages(40)
	b := newBackends(t)
	p := fixedDelay(profile(urls...), 30)
	dir := filepath.Join(t.TempDir(), "frontier")
	l, stop := b.runLoader(t, filedConfig(t, dir))
	waitOwner(t, l)
	b.submit(t, "c", contracts.CrawlRunning, p, urls...)
	waitFor(t, "10 pages fetched", func() bool { return len(s.pageHits()) >= 10 })
	stop()
	if n := len(s.pageHits()); n >= len(urls) {
		t.Fatalf("%d pages fetched before the stop, want fewer than %d", n, len(urls))
	}
	if n := b.queued(t); n != 0 {
		t.Fatalf("%d loader contracts waiting after the stop, want 0: the store holds their URLs", n)
	}
	b.runLoader(t, filedConfig(t, dir))
	b.waitLoaded(t, "c", urls...)
	if n, most := distinct(s.pageHits()); n != len(urls) || most != 1 {
		t.Errorf("%d pages fetched, one of them %d times; want %d, each once", n, most, len(urls))
	}
}

// TestPausedCrawlStaysFiled: a paused crawl's URLs are filed and wait in
// the store, with nothing parked and no contract held; once the crawl runs
// they are fetched.
func TestPausedCrawlStaysFiled(t *testing.T) {
	s := newSite(t, "")
	urls := s.pages(20)
	b := newBackends(t)
	p := fixedDelay(profile(urls...), 5)
	l, _ := b.runLoader(t, filedConfig(t, t.TempDir()))
	waitOwner(t, l)
	b.submit(t, "c", contracts.CrawlPaused, p, urls...)
	waitFor(t, "the URLs filed", func() bool { return l.front.Filed() == int64(len(urls)) })
	time.Sleep(3 * queueing.FeedInterval)
	if n := len(s.pageHits()); n != 0 {
		t.Fatalf("%d pages of the paused crawl fetched, want 0", n)
	}
	if n := l.Parked(); n != 0 {
		t.Errorf("parked %d URLs of the paused crawl, want none", n)
	}
	if n := b.queued(t); n != 0 {
		t.Errorf("%d loader contracts waiting, want 0", n)
	}
	// The frontier report counts them from the store.
	filed, total := l.front.FiledReport(t.Context(), reportGroups)
	if total != len(urls) || len(filed) != 1 || filed[0].CrawlID != "c" || filed[0].Filed != len(urls) || filed[0].Taken != 0 {
		t.Errorf("filed report = %+v, %d URLs; want one queue of crawl c with %d URLs, none taken", filed, total, len(urls))
	} else if age := time.Since(filed[0].OldestDue); age < 3*queueing.FeedInterval || age > time.Minute {
		t.Errorf("oldest due %v ago, want the time the URLs were filed", age)
	}
	if err := b.prof.Transition(t.Context(), "c", contracts.CrawlPaused, contracts.CrawlRunning, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.waitLoaded(t, "c", urls...)
	if n, most := distinct(s.pageHits()); n != len(urls) || most != 1 {
		t.Errorf("%d pages fetched, one of them %d times; want %d, each once", n, most, len(urls))
	}
}

// cutOff is the lease store of a loader that lost its connection to it:
// once cut, every call fails.
type cutOff struct {
	txindex.Owners
	cut atomic.Bool
}

var errCut = errors.New("cut off from the index")

func (c *cutOff) Claim(ctx context.Context, shard, owner string, ttl time.Duration) (txindex.Lease, bool, error) {
	if c.cut.Load() {
		return txindex.Lease{}, false, errCut
	}
	return c.Owners.Claim(ctx, shard, owner, ttl)
}

func (c *cutOff) Renew(ctx context.Context, l txindex.Lease, ttl time.Duration) (txindex.Lease, bool, error) {
	if c.cut.Load() {
		return txindex.Lease{}, false, errCut
	}
	return c.Owners.Renew(ctx, l, ttl)
}

func (c *cutOff) Release(ctx context.Context, l txindex.Lease) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Owners.Release(ctx, l)
}

func (c *cutOff) Leases(ctx context.Context) ([]txindex.Lease, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.Owners.Leases(ctx)
}

// TestShardFailsOverWithItsFrontier: a loader that can no longer renew its
// shard's lease stops fetching by its deadline; another loader, on a store
// of its own, claims the shard once the lease has expired, rebuilds the
// shard's frontier from the transaction index, and fetches the rest. Every
// page is fetched, each once: none is lost with the first loader's store,
// and none is fetched by both.
func TestShardFailsOverWithItsFrontier(t *testing.T) {
	s := newSite(t, "")
	urls := s.pages(60)
	b := newBackends(t)
	p := fixedDelay(profile(urls...), 25)
	cfg := func(dir string) Config {
		c := filedConfig(t, dir)
		c.ShardLease = time.Second
		return c
	}
	cut := &cutOff{Owners: b.tx}
	b.runLoaderWith(t, cfg(t.TempDir()), func(d *Deps) { d.Owners = cut })
	b.submit(t, "c", contracts.CrawlRunning, p, urls...)
	waitFor(t, "15 pages fetched", func() bool { return len(s.pageHits()) >= 15 })
	cut.cut.Store(true)
	waitFor(t, "the first loader to stop", func() bool {
		n := len(s.pageHits())
		time.Sleep(200 * time.Millisecond)
		return len(s.pageHits()) == n
	})
	fetched := len(s.pageHits())
	if fetched >= len(urls) {
		t.Fatalf("the first loader fetched all %d pages before it was cut off", fetched)
	}
	second, _ := b.runLoader(t, cfg(t.TempDir()))
	b.waitLoaded(t, "c", urls...)
	if n, most := distinct(s.pageHits()); n != len(urls) || most != 1 {
		t.Errorf("%d pages fetched, one of them %d times; want %d, each once", n, most, len(urls))
	}
	if n := second.front.Rebuilt(); n < int64(len(urls)-fetched) {
		t.Errorf("the second loader rebuilt %d URLs, want the %d the first left", n, len(urls)-fetched)
	}
}
