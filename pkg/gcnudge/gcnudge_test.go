package gcnudge

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// sink keeps a buffer reachable until the test drops it.
var sink []byte

// TestDropped: a dropped buffer of Threshold bytes or more is collected
// before Dropped returns; a smaller one starts no collection.
func TestDropped(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		collect bool
	}{
		{"small", Threshold - 1, false},
		{"at the threshold", Threshold, true},
		{"a body at the cap", 8 << 20, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink = make([]byte, tc.size)
			runtime.GC() // a settled heap holding the buffer
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			n := int64(len(sink))
			sink = nil
			Dropped(n)
			runtime.ReadMemStats(&after)
			if got := after.NumGC > before.NumGC; got != tc.collect {
				t.Errorf("Dropped(%d) collected: %v, want %v", n, got, tc.collect)
			}
			if tc.collect && after.HeapAlloc+uint64(tc.size) > before.HeapAlloc+64<<10 { // other allocations aside
				t.Errorf("Dropped(%d): heap %d -> %d bytes, want the buffer freed", n, before.HeapAlloc, after.HeapAlloc)
			}
		})
	}
}

// TestDroppedWhileCollecting: a buffer dropped while Dropped's collection
// runs starts no second one.
func TestDroppedWhileCollecting(t *testing.T) {
	running.Store(true)
	defer running.Store(false)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Dropped(8 << 20)
	runtime.ReadMemStats(&after)
	if after.NumGC != before.NumGC {
		t.Errorf("Dropped during a collection ran %d more", after.NumGC-before.NumGC)
	}
}

// gcPercent returns the GOGC in force.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestHold: while any large buffer is held the collector runs at
// HeldPercent; GOGC is back once the last is let go; a GOGC that is off or
// lower already is kept.
func TestHold(t *testing.T) {
	for _, tc := range []struct {
		name        string
		gogc, while int
	}{
		{"default", 100, HeldPercent},
		{"higher", 400, HeldPercent},
		{"lower already", 10, 10},
		{"off", -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer debug.SetGCPercent(debug.SetGCPercent(tc.gogc))
			Hold()
			Hold()
			if got := gcPercent(); got != tc.while {
				t.Errorf("GOGC while held = %d, want %d", got, tc.while)
			}
			Unhold()
			if got := gcPercent(); got != tc.while {
				t.Errorf("GOGC while one is still held = %d, want %d", got, tc.while)
			}
			Unhold()
			if got := gcPercent(); got != tc.gogc {
				t.Errorf("GOGC once none is held = %d, want %d", got, tc.gogc)
			}
		})
	}
}
