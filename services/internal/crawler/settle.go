package crawler

import (
	"context"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/enqueue"
)

// Found links whose records another process created a moment ago are not
// in the transaction index's lagging view yet, and reading them current
// costs a realtime get each (in Elasticsearch, most of the hot path's
// reads). Their depth lowering waits instead: the pages that found them
// are recorded to-be-indexed, and their documents, which would let the
// indexer settle them, are published only after Settle has lowered what
// it must, one refresh interval later, from the refreshed view. The crawl
// cannot finish meanwhile: its pages are not settled. Should the process
// die in between, the pages are to-be-indexed with no document on its way,
// which the recovery sweep parses again (a reindex contract), as after any
// crash between the transition and the publication.
const (
	// settleDelay is the wait before Settle: the transaction index
	// refreshes every second.
	settleDelay = 1500 * time.Millisecond
	// settleBacklog bounds the batches waiting; beyond it a batch settles
	// at once, with current reads.
	settleBacklog = 1024
	// settleTimeout bounds one batch's Settle and publication.
	settleTimeout = 30 * time.Second
)

// settleWork is a processed contract whose found links wait for Settle
// and whose documents wait for them.
type settleWork struct {
	due     time.Time
	k       contracts.CrawlerContract
	pages   []*parsed
	applied []bool
	unseen  *enqueue.Unseen
}

// settler runs the waiting batches in order, while the crawler runs.
type settler struct {
	c    *Crawler
	mu   sync.Mutex
	work chan settleWork // nil unless running
	done chan struct{}
}

// start runs the settler until stop; ctx ending makes it settle what
// waits at once.
func (s *settler) start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.work, s.done = make(chan settleWork, settleBacklog), make(chan struct{})
	go s.loop(ctx, s.work, s.done)
}

// stop settles every batch still waiting and returns when they are.
func (s *settler) stop() {
	s.mu.Lock()
	work, done := s.work, s.done
	s.work = nil
	s.mu.Unlock()
	if work != nil {
		close(work)
		<-done
	}
}

// later queues w, and reports false when the settler does not run or its
// backlog is full: the caller settles w itself.
func (s *settler) later(w settleWork) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.work == nil {
		return false
	}
	w.due = time.Now().Add(settleDelay)
	select {
	case s.work <- w:
		return true
	default:
		return false
	}
}

func (s *settler) loop(ctx context.Context, work <-chan settleWork, done chan<- struct{}) {
	defer close(done)
	for w := range work {
		if d := time.Until(w.due); d > 0 && ctx.Err() == nil {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		s.finish(w)
	}
}

// finish settles w's found links and publishes its documents. A failure
// leaves the pages to the recovery sweep.
func (s *settler) finish(w settleWork) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	err := s.c.enq.Settle(ctx, w.unseen)
	if err == nil {
		err = s.c.publishDocs(ctx, w.k, w.pages, w.applied)
	}
	if err != nil {
		s.c.log.Warn("settle found links and publish documents; the pages wait for the recovery sweep",
			"crawl_id", w.k.CrawlID, "pages", len(w.pages), "err", err)
	}
}

// canWait reports whether the found links of pages may settle after their
// transition: every page with links goes to to-be-indexed with a document
// to publish (a page going to a settled status would let the crawl finish
// before its links' depths are lowered).
func canWait(k contracts.CrawlerContract, pages []*parsed) bool {
	if k.Relink || k.Reindex {
		return false
	}
	for _, p := range pages {
		if len(p.links) > 0 && (p.final != contracts.ToBeIndexed || p.doc == nil) {
			return false
		}
	}
	return true
}
