package politeness

// This file holds the scheduler's data structures: rings (FIFOs) of items and
// groups, a group's item store, and the min-heap of groups by time.

// ring is a FIFO on a power-of-two circular buffer that grows by doubling
// and shrinks by halving when a quarter full, so its memory stays within a
// constant factor of its length.
type ring[T any] struct {
	buf     []T
	head, n int
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.resize(max(1, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero // let the garbage collector have what v points to
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > 16 && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return v
}

func (r *ring[T]) resize(c int) {
	nb := make([]T, c)
	if r.n > 0 {
		end := r.head + r.n
		if end <= len(r.buf) {
			copy(nb, r.buf[r.head:end])
		} else {
			k := copy(nb, r.buf[r.head:])
			copy(nb[k:], r.buf[:end-len(r.buf)])
		}
	}
	r.buf, r.head = nb, 0
}

// each calls f on the elements in FIFO order.
func (r *ring[T]) each(f func(*T)) {
	for i := 0; i < r.n; i++ {
		f(&r.buf[(r.head+i)&(len(r.buf)-1)])
	}
}

// entry is one queued item: 40 bytes plus the URL's text and the payload.
type entry struct {
	url     string
	payload any
	host    uint32 // index into the group's hosts
	use     uint32 // index of the item's crawl use in the group (see group.use); 0: none
}

// futureEntry is an item whose NotBefore has not come yet.
type futureEntry struct {
	e    entry
	at   int64 // unix nanoseconds
	seq  uint64
	cost int32
}

// lane holds a group's due items of one cost, in insertion order.
type lane struct {
	cost int32
	r    ring[entry]
}

// items is a group's queue: due items in lanes by ascending cost (each lane
// FIFO, never empty), and future items in a min-heap by (time, insertion).
type items struct {
	lanes    []lane
	future   []futureEntry
	dueSince int64 // when the lanes last became non-empty
	n        int
}

func (q *items) pushDue(e entry, cost int32, at int64) {
	if len(q.lanes) == 0 {
		q.dueSince = at
	}
	i := 0
	for i < len(q.lanes) && q.lanes[i].cost < cost {
		i++
	}
	if i == len(q.lanes) || q.lanes[i].cost != cost {
		q.lanes = append(q.lanes, lane{})
		copy(q.lanes[i+1:], q.lanes[i:])
		q.lanes[i] = lane{cost: cost}
	}
	q.lanes[i].r.push(e)
	q.n++
}

func (q *items) pushFuture(fe futureEntry) {
	q.future = append(q.future, fe)
	h := q.future
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !futureLess(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	q.n++
}

func futureLess(a, b *futureEntry) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

func (q *items) popFuture() futureEntry {
	h := q.future
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = futureEntry{}
	h = h[:last]
	q.future = h
	q.siftDown(0)
	if cap(h) > 16 && len(h) <= cap(h)/4 {
		h = append([]futureEntry(nil), h...)
	}
	q.future = h
	q.n--
	return top
}

// advance moves the future items whose time has come into the lanes.
func (q *items) advance(now int64) {
	for len(q.future) > 0 && q.future[0].at <= now {
		fe := q.popFuture()
		q.pushDue(fe.e, fe.cost, fe.at)
	}
}

// headAt returns when the next item to hand out becomes (or became) due.
// It is meaningful only when q.n > 0.
func (q *items) headAt() int64 {
	if len(q.lanes) > 0 {
		return q.dueSince
	}
	return q.future[0].at
}

// hasDue reports whether an item can be handed out now (after advance).
func (q *items) hasDue() bool { return len(q.lanes) > 0 }

// pop removes the cheapest, oldest due item. The lanes must not be empty.
func (q *items) pop() (entry, int32) {
	l := &q.lanes[0]
	e, cost := l.r.pop(), l.cost
	if l.r.len() == 0 {
		n := len(q.lanes)
		copy(q.lanes, q.lanes[1:])
		q.lanes[n-1] = lane{}
		q.lanes = q.lanes[:n-1]
	}
	q.n--
	return e, cost
}

// removeIf removes the items for which drop reports true and returns them,
// due ones first. The rest keep their order. It costs O(n).
func (q *items) removeIf(drop func(*entry) bool) []entry {
	var out []entry
	lanes := q.lanes[:0]
	for _, l := range q.lanes {
		var kept ring[entry]
		for l.r.len() > 0 {
			e := l.r.pop()
			if drop(&e) {
				out = append(out, e)
			} else {
				kept.push(e)
			}
		}
		if kept.len() > 0 {
			lanes = append(lanes, lane{cost: l.cost, r: kept})
		}
	}
	for i := len(lanes); i < len(q.lanes); i++ {
		q.lanes[i] = lane{}
	}
	q.lanes = lanes
	future := q.future
	q.future = nil
	for _, fe := range future {
		if drop(&fe.e) {
			out = append(out, fe.e)
			continue
		}
		q.future = append(q.future, fe)
	}
	// Filtering keeps heap order only by chance: rebuild it.
	for i := len(q.future)/2 - 1; i >= 0; i-- {
		q.siftDown(i)
	}
	q.n -= len(out)
	return out
}

// siftDown moves the future item at i down to its place.
func (q *items) siftDown(i int) {
	h := q.future
	for {
		l, m := 2*i+1, i
		if l < len(h) && futureLess(&h[l], &h[m]) {
			m = l
		}
		if r := l + 1; r < len(h) && futureLess(&h[r], &h[m]) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// timeHeap is a min-heap of groups by (key, keySeq). Keys are copied into
// the heap so that comparisons do not touch the groups; each group tracks
// its index so that it can be removed in O(log n).
type timeHeap struct{ es []heapEntry }

type heapEntry struct {
	key int64
	seq uint64
	g   *group
}

// peek returns the first group, or nil.
func (h *timeHeap) peek() *group {
	if len(h.es) == 0 {
		return nil
	}
	return h.es[0].g
}

// push adds g with its current key and keySeq.
func (h *timeHeap) push(g *group) {
	h.es = append(h.es, heapEntry{key: g.key, seq: g.keySeq, g: g})
	h.up(len(h.es) - 1)
}

func (h *timeHeap) remove(g *group) {
	i, last := g.heapIdx, len(h.es)-1
	g.heapIdx = -1
	if i != last {
		h.es[i] = h.es[last]
	}
	h.es[last] = heapEntry{}
	h.es = h.es[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	if cap(h.es) > 64 && len(h.es) <= cap(h.es)/4 {
		h.es = append([]heapEntry(nil), h.es...)
	}
}

func entryLess(a, b *heapEntry) bool { return a.key < b.key || a.key == b.key && a.seq < b.seq }

// up moves the entry at i up to its place, writing each moved group's index.
func (h *timeHeap) up(i int) {
	e := h.es[i]
	for i > 0 {
		p := (i - 1) / 2
		if !entryLess(&e, &h.es[p]) {
			break
		}
		h.es[i] = h.es[p]
		h.es[i].g.heapIdx = i
		i = p
	}
	h.es[i] = e
	e.g.heapIdx = i
}

// down moves the entry at i down to its place and reports whether it moved.
func (h *timeHeap) down(i int) bool {
	start, e, n := i, h.es[i], len(h.es)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && entryLess(&h.es[r], &h.es[l]) {
			m = r
		}
		if !entryLess(&h.es[m], &e) {
			break
		}
		h.es[i] = h.es[m]
		h.es[i].g.heapIdx = i
		i = m
	}
	h.es[i] = e
	e.g.heapIdx = i
	return i > start
}
