package loader

import (
	"container/heap"
	"context"
	"time"
)

// hostSched hands out at most one task per crawl host group at a time and
// keeps each group idle for its politeness delay after a fetch. One goroutine
// (run) owns all state; workers talk to it over channels.
type hostSched struct {
	add     chan *task
	release chan release
	work    chan *task
	now     func() time.Time
}

type release struct {
	group string
	delay time.Duration
}

type group struct {
	id    string
	tasks []*task
	busy  bool
	next  time.Time
	index int // in the waiting heap, -1 when absent
}

func newHostSched(now func() time.Time) *hostSched {
	return &hostSched{
		add:     make(chan *task),
		release: make(chan release),
		work:    make(chan *task),
		now:     now,
	}
}

// run owns the scheduler state until ctx is done.
func (s *hostSched) run(ctx context.Context) {
	groups := map[string]*group{}
	var ready []*group
	var waiting waitHeap
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	arm := func() {
		if len(waiting) == 0 {
			timer.Reset(time.Hour)
			return
		}
		timer.Reset(max(0, waiting[0].next.Sub(s.now())))
	}
	enqueue := func(g *group) {
		if g.busy || len(g.tasks) == 0 || g.index != -1 {
			return
		}
		if g.next.After(s.now()) {
			heap.Push(&waiting, g)
			arm()
			return
		}
		ready = append(ready, g)
		g.index = -2 // in ready
	}
	for {
		var out chan *task
		var head *task
		if len(ready) > 0 {
			out, head = s.work, ready[0].tasks[0]
		}
		select {
		case <-ctx.Done():
			return
		case t := <-s.add:
			g := groups[t.group]
			if g == nil {
				g = &group{id: t.group, index: -1}
				groups[t.group] = g
			}
			g.tasks = append(g.tasks, t)
			if !t.notBefore.IsZero() && t.notBefore.After(g.next) && len(g.tasks) == 1 {
				g.next = t.notBefore
			}
			enqueue(g)
		case out <- head:
			g := ready[0]
			ready[0] = nil
			ready = ready[1:]
			g.index = -1
			g.tasks[0] = nil
			g.tasks = g.tasks[1:]
			g.busy = true
		case r := <-s.release:
			g := groups[r.group]
			if g == nil {
				continue
			}
			g.busy = false
			g.next = s.now().Add(r.delay)
			if len(g.tasks) > 0 && !g.tasks[0].notBefore.IsZero() && g.tasks[0].notBefore.After(g.next) {
				g.next = g.tasks[0].notBefore
			}
			if len(g.tasks) == 0 && !g.next.After(s.now()) {
				delete(groups, g.id)
				continue
			}
			if len(g.tasks) == 0 {
				// Keep the idle group so its delay still holds for new tasks;
				// a waiting group with no tasks is dropped when it fires.
				heap.Push(&waiting, g)
				arm()
				continue
			}
			enqueue(g)
		case <-timer.C:
			now := s.now()
			for len(waiting) > 0 && !waiting[0].next.After(now) {
				g := heap.Pop(&waiting).(*group)
				g.index = -1
				if len(g.tasks) == 0 {
					delete(groups, g.id)
					continue
				}
				enqueue(g)
			}
			arm()
		}
	}
}

type waitHeap []*group

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	g := x.(*group)
	g.index = len(*h)
	*h = append(*h, g)
}
func (h *waitHeap) Pop() any {
	old := *h
	g := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return g
}
