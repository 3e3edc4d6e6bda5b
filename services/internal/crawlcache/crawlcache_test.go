package crawlcache

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

func TestProfilesResolve(t *testing.T) {
	c := NewProfiles(nil)
	p := &contracts.Profile{Name: "x"}
	if got, err := c.Resolve(context.Background(), "c", p); err != nil || got != p {
		t.Errorf("Resolve(inline) = %v, %v", got, err)
	}
	if _, err := c.Resolve(context.Background(), "c", nil); err == nil {
		t.Errorf("Resolve(unknown crawl) succeeded")
	}
}

// countingStore answers Get for one crawl after a while, counting the
// reads.
type countingStore struct {
	profiles.Store
	mu      sync.Mutex
	n       int
	release chan struct{}
}

func (s *countingStore) Get(ctx context.Context, id string) (profiles.Crawl, error) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	<-s.release
	return profiles.Crawl{ID: id, State: contracts.CrawlPaused, Profile: contracts.Profile{Version: 3}}, nil
}

// TestConcurrentMissesShareARead asks a state and a profile from many
// goroutines at once with nothing cached: each cache must send one store
// read, and every caller get its answer.
func TestConcurrentMissesShareARead(t *testing.T) {
	st := &countingStore{release: make(chan struct{})}
	states, profs := NewStates(st), NewProfiles(st)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 50 {
		wg.Go(func() {
			if states.State(t.Context(), "c") != contracts.CrawlPaused {
				bad.Add(1)
			}
		})
		wg.Go(func() {
			if p, err := profs.Resolve(t.Context(), "c", nil); err != nil || p.Version != 3 {
				bad.Add(1)
			}
		})
	}
	for { // let every goroutine reach the store or wait on the read
		st.mu.Lock()
		n := st.n
		st.mu.Unlock()
		if n >= 2 {
			break
		}
		runtime.Gosched()
	}
	time.Sleep(50 * time.Millisecond)
	close(st.release)
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d callers got a wrong answer", bad.Load())
	}
	// One per cache; a goroutine that arrives between the end of a read
	// and its caching may send one more.
	if st.n > 4 {
		t.Errorf("100 concurrent misses sent %d store reads, want 2 (one per cache)", st.n)
	}
	// Fresh reads the store itself.
	n := st.n
	if states.Fresh(t.Context(), "c") != contracts.CrawlPaused || st.n != n+1 {
		t.Errorf("Fresh did not read the store (%d reads before, %d after)", n, st.n)
	}
}
