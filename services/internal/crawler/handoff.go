package crawler

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// Handoff carries the responses a loader has just stored to a crawler in the
// same process, so that the crawler parses them without reading the WARC
// record back from the asset store and decompressing it. It is an
// optimisation only: the WARC record stays the truth, and a response that is
// not (or no longer) in the handoff is read from its record.
//
// A Handoff holds at most its byte bound of responses. When it is full a new
// response is not kept, unless the oldest have waited longer than
// handoffStale (their contract was lost, or they belong to a crawl that
// ended): they make room. The crawler takes responses roughly in the order
// they were put, so when it falls behind, keeping the oldest serves it,
// where evicting them would evict every response just before its turn. Each
// response is taken at most once. It is safe for concurrent use.
//
// A Handoff is also the bound between the loader and the crawler of one
// process: the loader waits for room (WaitRoom) before it hands over the
// responses of a recorded batch, so a crawler that falls behind holds its
// loader back to the handoff's bound instead of letting it fetch pages whose
// responses the handoff would not keep (and the crawler would read back from
// their WARC records).
type Handoff struct {
	max int64

	mu      sync.Mutex
	size    int64
	order   *list.List // front: newest
	items   map[handoffKey]*list.Element
	taken   int64
	evicted int64
	now     func() time.Time
	// takers counts the attached crawlers (Attach): only they make room.
	takers int
	// room, when not nil, is closed (and cleared) when room is made or a
	// taker leaves: WaitRoom's callers wait on it.
	room chan struct{}
}

// handoffKey is where a response record lies: its asset and offset.
type handoffKey struct {
	key    string
	offset int64
}

type handoffEntry struct {
	k        handoffKey
	length   int64
	ip       string
	response []byte
	at       time.Time
}

// handoffStale is how long a response waits before it may give way to a
// newer one in a full handoff.
const handoffStale = 30 * time.Second

// NewHandoff returns a handoff holding at most maxBytes of responses; a
// maxBytes below 1 returns nil, which holds nothing.
func NewHandoff(maxBytes int64) *Handoff {
	if maxBytes < 1 {
		return nil
	}
	return &Handoff{max: maxBytes, order: list.New(), items: map[handoffKey]*list.Element{}, now: time.Now}
}

// Put offers the HTTP response (status line, headers and body, exactly the
// block of the response record at ref) and the server's address ip. The
// handoff keeps response without copying it: the caller must not modify it
// afterwards. A response larger than the whole bound is not kept. Put on a
// nil Handoff does nothing.
func (h *Handoff) Put(ref contracts.AssetRef, ip string, response []byte) {
	// The memory a response holds is its capacity: a body of unknown
	// length is read into a slice with room to spare.
	size := int64(cap(response))
	if h == nil || size > h.max || ref.Key == "" || ref.Length <= 0 {
		return
	}
	k := handoffKey{ref.Key, ref.Offset}
	h.mu.Lock()
	defer h.mu.Unlock()
	if el, ok := h.items[k]; ok {
		h.removeLocked(el)
	}
	now := h.now()
	for h.size+size > h.max {
		oldest := h.order.Back()
		if now.Sub(oldest.Value.(*handoffEntry).at) < handoffStale {
			h.evicted++ // the new one gives way
			return
		}
		h.removeLocked(oldest)
		h.evicted++
	}
	h.items[k] = h.order.PushFront(&handoffEntry{k: k, length: ref.Length, ip: ip, response: response, at: now})
	h.size += size
}

// Attach notes a crawler that takes the handoff's responses, until the
// function it returns is called: WaitRoom waits for room only while a
// crawler is attached, since only a crawler makes room. Attach on a nil
// Handoff does nothing.
func (h *Handoff) Attach() (detach func()) {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	h.takers++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			h.takers--
			h.wakeLocked()
			h.mu.Unlock()
		})
	}
}

// WaitRoom waits until the handoff can keep size more bytes of responses:
// until they fit its bound with the responses it holds, it holds none, no
// crawler is attached, or ctx is done (its error is returned). Responses
// that have waited longer than handoffStale (their contract was lost, or
// their crawl ended) leave to make room. It reserves nothing: the caller
// Puts afterwards, and concurrent callers may pass the bound together.
// WaitRoom on a nil Handoff returns at once.
func (h *Handoff) WaitRoom(ctx context.Context, size int64) error {
	if h == nil {
		return nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		if h.takers == 0 || h.size == 0 || h.size+size <= h.max {
			return nil
		}
		now := h.now()
		oldest := h.order.Back().Value.(*handoffEntry)
		if stale := now.Sub(oldest.at); stale >= handoffStale {
			h.removeLocked(h.order.Back())
			h.evicted++
			continue
		}
		if h.room == nil {
			h.room = make(chan struct{})
		}
		wait := h.room
		if timer == nil {
			timer = time.NewTimer(handoffStale - now.Sub(oldest.at))
		} else {
			timer.Reset(handoffStale - now.Sub(oldest.at))
		}
		h.mu.Unlock()
		var err error
		select {
		case <-wait:
		case <-timer.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
		h.mu.Lock()
		if err != nil {
			return err
		}
	}
}

// wakeLocked wakes the callers of WaitRoom. Callers hold h.mu.
func (h *Handoff) wakeLocked() {
	if h.room != nil {
		close(h.room)
		h.room = nil
	}
}

// Take returns and removes the response at ref, if the handoff holds it.
func (h *Handoff) Take(ref contracts.AssetRef) (ip string, response []byte, ok bool) {
	if h == nil {
		return "", nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	el, ok := h.items[handoffKey{ref.Key, ref.Offset}]
	if !ok {
		return "", nil, false
	}
	h.removeLocked(el)
	e := el.Value.(*handoffEntry)
	if e.length != ref.Length {
		return "", nil, false
	}
	h.taken++
	return e.ip, e.response, true
}

// Counts returns how many responses were taken, and how many were not kept
// or given up for room before being taken.
func (h *Handoff) Counts() (taken, evicted int64) {
	if h == nil {
		return 0, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.taken, h.evicted
}

// Bytes returns the size of the responses held.
func (h *Handoff) Bytes() int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.size
}

func (h *Handoff) removeLocked(el *list.Element) {
	e := el.Value.(*handoffEntry)
	h.order.Remove(el)
	delete(h.items, e.k)
	h.size -= int64(cap(e.response))
	h.wakeLocked()
}
