package loader

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// filedConfig is a loader configuration with the frontier store in dir and
// a group window of 5 URLs, so that a group of more URLs would park most of
// them in the broker.
func filedConfig(t *testing.T, dir string) Config {
	return config(t, map[string]string{"GRIDCRAWL_LOADER_FRONTIER_DIR": dir, "GRIDCRAWL_LOADER_GROUP_QUEUE": "5",
		"GRIDCRAWL_WARC_FLUSH_INTERVAL": "20ms"})
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
			if l.filedURLs.Load() == 0 {
				continue // l.fronts is set before the first URL is filed
			}
			for _, st := range l.fronts.stores {
				for _, q := range st.Queues() {
					queued, _ := l.sched.Backlog(q.Group)
					m = max(m, queued)
				}
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
	if n := l.filedURLs.Load(); n != int64(len(urls)) {
		t.Errorf("filed %d URLs, want %d", n, len(urls))
	}
	if n := b.queued(t); n != 0 {
		t.Errorf("%d loader contracts waiting, want 0", n)
	}
	waitFor(t, "the store emptied", func() bool {
		for _, st := range l.fronts.stores {
			if len(st.Queues()) > 0 {
				return false
			}
		}
		return true
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
	_, stop := b.runLoader(t, filedConfig(t, dir))
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
	b.submit(t, "c", contracts.CrawlPaused, p, urls...)
	waitFor(t, "the URLs filed", func() bool { return l.filedURLs.Load() == int64(len(urls)) })
	time.Sleep(3 * feedInterval)
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
	filed, total := l.filedReport(t.Context())
	if total != len(urls) || len(filed) != 1 || filed[0].CrawlID != "c" || filed[0].Filed != len(urls) || filed[0].Taken != 0 {
		t.Errorf("filed report = %+v, %d URLs; want one queue of crawl c with %d URLs, none taken", filed, total, len(urls))
	} else if age := time.Since(filed[0].OldestDue); age < 3*feedInterval || age > time.Minute {
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
