package crawler

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestHandoff(t *testing.T) {
	ref := func(off int64) contracts.AssetRef { return contracts.AssetRef{Key: "seg", Offset: off, Length: 10} }
	resp := func(n int) []byte { return make([]byte, n) }
	type put struct {
		ref  contracts.AssetRef
		size int
		late bool // put after the earlier ones went stale
	}
	tests := []struct {
		name  string
		max   int64
		puts  []put
		take  contracts.AssetRef
		want  bool
		bytes int64 // held after the take
	}{
		{"taken", 100, []put{{ref(0), 40, false}}, ref(0), true, 0},
		{"other offset", 100, []put{{ref(0), 40, false}}, ref(10), false, 40},
		{"other length", 100, []put{{ref(0), 40, false}}, contracts.AssetRef{Key: "seg", Length: 11}, false, 0},
		{"other key", 100, []put{{ref(0), 40, false}}, contracts.AssetRef{Key: "seg2", Length: 10}, false, 40},
		{"full: oldest kept", 100, []put{{ref(0), 40, false}, {ref(10), 40, false}, {ref(20), 40, false}}, ref(0), true, 40},
		{"full: newest not kept", 100, []put{{ref(0), 40, false}, {ref(10), 40, false}, {ref(20), 40, false}}, ref(20), false, 80},
		{"full: stale one gives way", 100, []put{{ref(0), 40, false}, {ref(10), 40, false}, {ref(20), 40, true}}, ref(0), false, 80},
		{"full: newest kept in its room", 100, []put{{ref(0), 40, false}, {ref(10), 40, false}, {ref(20), 40, true}}, ref(20), true, 40},
		{"full: the rest stays", 100, []put{{ref(0), 40, false}, {ref(10), 40, false}, {ref(20), 40, true}}, ref(10), true, 40},
		{"larger than the bound", 100, []put{{ref(0), 101, false}}, ref(0), false, 0},
		{"put again replaces", 100, []put{{ref(0), 40, false}, {ref(0), 50, false}}, ref(0), true, 0},
		{"no key", 100, []put{{contracts.AssetRef{Length: 10}, 40, false}}, contracts.AssetRef{Length: 10}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandoff(tt.max)
			now := time.Unix(1000, 0)
			h.now = func() time.Time { return now }
			for _, p := range tt.puts {
				if p.late {
					now = now.Add(handoffStale)
				}
				h.Put(p.ref, "192.0.2.1", resp(p.size))
			}
			ip, got, ok := h.Take(tt.take)
			if ok != tt.want {
				t.Fatalf("Take(%+v) ok = %v, want %v", tt.take, ok, tt.want)
			}
			if ok && (ip != "192.0.2.1" || got == nil) {
				t.Errorf("Take(%+v) = %q, %d bytes", tt.take, ip, len(got))
			}
			if ok {
				if _, _, again := h.Take(tt.take); again {
					t.Errorf("Take(%+v) twice succeeded, want once", tt.take)
				}
			}
			if b := h.Bytes(); b != tt.bytes {
				t.Errorf("Bytes() = %d, want %d", b, tt.bytes)
			}
		})
	}
}

func TestNilHandoffHoldsNothing(t *testing.T) {
	h := NewHandoff(0)
	if h != nil {
		t.Fatalf("NewHandoff(0) = %v, want nil", h)
	}
	ref := contracts.AssetRef{Key: "seg", Length: 10}
	h.Put(ref, "", make([]byte, 10))
	if _, _, ok := h.Take(ref); ok {
		t.Error("nil handoff gave a response")
	}
}

// TestHandoffWaitRoom: WaitRoom returns at once while the responses fit, the
// handoff is empty or no crawler is attached, and otherwise waits until a
// Take makes room, the crawler detaches, the oldest response goes stale or
// ctx ends.
func TestHandoffWaitRoom(t *testing.T) {
	ref := func(off int64) contracts.AssetRef { return contracts.AssetRef{Key: "seg", Offset: off, Length: 10} }
	tests := []struct {
		name     string
		attached bool
		held     []int // sizes put before the wait, at offsets 0, 10, ...
		size     int64
		// release ends the wait (nil: it must not wait); it returns the
		// error WaitRoom must return.
		release func(h *Handoff, detach func(), cancel func()) error
	}{
		{name: "fits", attached: true, held: []int{40}, size: 60},
		{name: "empty", attached: true, size: 1000},
		{name: "no crawler attached", held: []int{40, 40}, size: 40},
		{name: "full: a take makes room", attached: true, held: []int{40, 40}, size: 40,
			release: func(h *Handoff, _, _ func()) error { h.Take(ref(0)); return nil }},
		{name: "full: the crawler detaches", attached: true, held: []int{40, 40}, size: 40,
			release: func(_ *Handoff, detach, _ func()) error { detach(); return nil }},
		{name: "full: the oldest goes stale", attached: true, held: []int{40, 40}, size: 40,
			release: func(*Handoff, func(), func()) error { time.Sleep(handoffStale); return nil }},
		{name: "full: ctx ends", attached: true, held: []int{40, 40}, size: 40,
			release: func(_ *Handoff, _, cancel func()) error { cancel(); return context.Canceled }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHandoff(100)
				detach := func() {}
				if tt.attached {
					detach = h.Attach()
				}
				for i, n := range tt.held {
					h.Put(ref(int64(10*i)), "192.0.2.1", make([]byte, n))
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- h.WaitRoom(ctx, tt.size) }()
				synctest.Wait()
				if tt.release == nil {
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("WaitRoom(%d) = %v, want nil", tt.size, err)
						}
					default:
						t.Fatalf("WaitRoom(%d) with %v held waits, want it to return at once", tt.size, tt.held)
					}
					return
				}
				select {
				case err := <-done:
					t.Fatalf("WaitRoom(%d) with %v held returned %v at once, want it to wait", tt.size, tt.held, err)
				default:
				}
				want := tt.release(h, detach, cancel)
				if err := <-done; !errors.Is(err, want) {
					t.Fatalf("WaitRoom(%d) = %v, want %v", tt.size, err, want)
				}
			})
		})
	}
}
