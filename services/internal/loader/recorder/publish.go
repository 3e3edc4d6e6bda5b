package recorder

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/contractmsg"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

// publisher publishes the crawler contracts of the batches the recorder
// has recorded, and then settles their loader contracts. It runs apart from
// the recorder so that a broker that is away (a publish waits for its
// return) does not hold back the record of what was fetched meanwhile: once
// recorded, a URL whose contract went back to the queue is not fetched
// again by the loader that gets it next.
//
// What it guarantees:
//   - Batches are published one at a time, in the order put gave them.
//   - A batch's loader contracts are settled (through the settle function
//     given at construction) only once the broker has confirmed its crawler
//     contracts, with nil, or once publishing failed for good, with the
//     error: an acked loader contract always has its crawler contracts.
//   - While a backend is down (the outage gate says so) it waits for it and
//     publishes again, rather than fail the batch.
//   - A page moved to to-be-parsed goes to the handoff, when there is one,
//     once and before its crawler contract is first published.
//   - close returns once every batch put before it is published and
//     settled (or the context of run has ended).
type publisher struct {
	queue   crawlerQueue
	handoff Handoff // nil: none
	gate    *outage.Gate
	log     *slog.Logger
	settle  settleFunc
	// snapshot, when set, is the record of a key as the loader's store
	// knows it, carried to the crawler (txindex.Snapshot).
	snapshot func(key string) *contracts.Snapshot

	mu      sync.Mutex
	batches []*batch
	closed  bool
	wake    chan struct{}
	done    chan struct{} // closed when run has returned
}

// crawlerQueue is what the publisher needs of the queue.
type crawlerQueue interface {
	Publish(ctx context.Context, queue string, msgs ...queue.Message) error
}

func newPublisher(q crawlerQueue, handoff Handoff, gate *outage.Gate, log *slog.Logger, settle settleFunc) *publisher {
	return &publisher{queue: q, handoff: handoff, gate: gate, log: log, settle: settle,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// put hands a recorded batch (its segment stored, its transitions applied)
// to the publisher. The responses of its pages moved to to-be-parsed go to
// the handoff now, and the batch keeps none: a batch may wait long for its
// publish (the crawler queue full, the broker away), and batches that kept
// their pages' bodies held a loader's whole backlog of them (70,000 bodies,
// 330 MB, 100,000 pages into a crawl of 1,000,000 whose crawler fell behind
// its loader), where the handoff holds no more than its bound.
//
// With a handoff, put first waits for its room (until ctx is done: then
// the handoff keeps what fits), which holds back the recorder's flush and,
// through the recorder's bound, the workers.
func (p *publisher) put(ctx context.Context, b *batch) {
	if p.handoff != nil {
		// An error is ctx's: the responses go to the handoff regardless,
		// which keeps those that fit.
		_ = p.handoff.WaitRoom(ctx, b.handedBytes())
	}
	p.handOff(b)
	p.mu.Lock()
	p.batches = append(p.batches, b)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Take returns the oldest batch, waiting for one; false once closed and empty.
func (p *publisher) take() (*batch, bool) {
	for {
		p.mu.Lock()
		if len(p.batches) > 0 {
			b := p.batches[0]
			p.batches[0] = nil
			p.batches = p.batches[1:]
			p.mu.Unlock()
			return b, true
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return nil, false
		}
		<-p.wake
	}
}

// run publishes and settles the batches put, in order, until the publisher
// is closed and empty. While a backend is down it waits for it rather than
// give up.
func (p *publisher) run(ctx context.Context) {
	defer close(p.done)
	for {
		b, ok := p.take()
		if !ok {
			return
		}
		err := p.publish(ctx, b)
		p.gate.Note(err)
		for err != nil && ctx.Err() == nil && len(p.gate.Down(ctx)) > 0 {
			if !b.kept {
				b.kept = true
				p.log.Warn("publish crawler contracts waits for the backends", "urls", len(b.pending), "err", err)
			}
			if p.gate.Wait(ctx) != nil {
				break
			}
			err = p.publish(ctx, b)
			p.gate.Note(err)
		}
		b.settle(ctx, p.log, p.settle, err)
	}
}

// close lets run return once it has published what it holds, and waits for
// that.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
}

// publish publishes crawler contracts for the pages of b that moved to
// to-be-parsed (b.rs holds the transitions, applied) and those to publish
// again.
func (p *publisher) publish(ctx context.Context, b *batch) error {
	rs := &b.rs
	var pages crawlerPages
	for i, res := range rs.moved {
		if rs.applied[i] && res.Status == contracts.ToBeParsed {
			page := res.page
			if p.snapshot != nil {
				page.Snapshot = p.snapshot(txindex.Key(res.t.CrawlID, res.t.URL))
			}
			pages.add(res, page)
		}
	}
	for _, res := range b.pending {
		if res.Repub != nil {
			pages.add(res, *res.Repub)
		}
	}
	msgs, err := pages.messages()
	if err != nil || len(msgs) == 0 {
		return err
	}
	if err := p.queue.Publish(ctx, contracts.QueueCrawler, msgs...); err != nil {
		return fmt.Errorf("publish crawler contracts: %w", err)
	}
	return nil
}

// handOff gives the handoff the responses of b's pages moved to
// to-be-parsed and drops the batch's references to them, so that each goes
// to the handoff once.
func (p *publisher) handOff(b *batch) {
	rs := &b.rs
	for i, res := range rs.moved {
		if res.Response == nil {
			continue
		}
		if rs.applied[i] && res.Status == contracts.ToBeParsed {
			p.handoff.Put(res.page.Asset, res.IP, res.Response)
		}
		res.Response = nil
	}
}

// handedBytes is the memory of the responses b hands off (handOff).
func (b *batch) handedBytes() int64 {
	var n int64
	for i, res := range b.rs.moved {
		if res.Response != nil && b.rs.applied[i] && res.Status == contracts.ToBeParsed {
			n += int64(cap(res.Response))
		}
	}
	return n
}

// crawlerPages collects crawler pages by crawl, in order of first appearance.
type crawlerPages struct {
	order   []string
	byCrawl map[string]*crawlBatch
}

type crawlBatch struct {
	Inline *contracts.Profile
	pages  []contracts.CrawlerPage
}

func (c *crawlerPages) add(res *result, p contracts.CrawlerPage) {
	if c.byCrawl == nil {
		c.byCrawl = map[string]*crawlBatch{}
	}
	b := c.byCrawl[res.t.CrawlID]
	if b == nil {
		b = &crawlBatch{Inline: res.t.Inline}
		c.byCrawl[res.t.CrawlID] = b
		c.order = append(c.order, res.t.CrawlID)
	}
	b.pages = append(b.pages, p)
}

func (c *crawlerPages) messages() ([]queue.Message, error) {
	var msgs []queue.Message
	for _, id := range c.order {
		b := c.byCrawl[id]
		m, err := contractmsg.Crawler(id, b.Inline, b.pages, false)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m...)
	}
	return msgs, nil
}
