// Package gcnudge collects garbage as soon as a large transient buffer (a
// response body near the size cap) is dropped, instead of when the heap
// has doubled.
//
// Go's collector lets the heap grow to twice what was live at the end of
// the last cycle (GOGC=100). A service whose live heap is ten megabytes
// and that briefly holds an 8 MiB body sees its next collection set for
// twice the sum, and the body, the buffers it grew through and whatever is
// allocated meanwhile pile up to that goal: a few large bodies multiply its
// peak memory by two or three. Collecting once the body is garbage brings
// the goal back to twice the resting heap. Only large buffers do this, and
// at most one collection runs at a time, so ordinary pages cost nothing and
// a web of many large bodies costs one collection per body at most (about
// a millisecond per ten megabytes of live heap, less than reading the body
// took).
package gcnudge

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Threshold is the size of a dropped buffer from which Dropped collects.
const Threshold = 1 << 20

// running is set while a collection started by Dropped runs.
var running atomic.Bool

// Dropped tells that a buffer of n bytes is garbage now. When n is at
// least Threshold and no collection of Dropped's is running, it runs one
// and returns when it is done; otherwise it returns at once.
func Dropped(n int64) {
	if n < Threshold || !running.CompareAndSwap(false, true) {
		return
	}
	defer running.Store(false)
	runtime.GC()
}

// HeldPercent is the GOGC in force while large buffers are held.
const HeldPercent = 25

// held counts the large buffers held; percent is the GOGC to restore.
var (
	heldMu  sync.Mutex
	held    int
	percent int
)

// Hold tells that a large buffer is being filled and kept: until as many
// Unhold calls, the collector runs at HeldPercent (unless GOGC is lower or
// off).
func Hold() {
	heldMu.Lock()
	defer heldMu.Unlock()
	held++
	if held == 1 {
		percent = debug.SetGCPercent(HeldPercent)
		if percent < 0 || percent <= HeldPercent {
			debug.SetGCPercent(percent) // off or lower already: keep it
		}
	}
}

// Unhold ends one Hold.
func Unhold() {
	heldMu.Lock()
	defer heldMu.Unlock()
	held--
	if held == 0 && percent > HeldPercent {
		debug.SetGCPercent(percent)
	}
}
