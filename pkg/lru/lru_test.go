package lru

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2, 0)
	c.Put("a", 1)
	c.Put("b", 2)
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("Get(a) missing before eviction")
	}
	c.Put("c", 3)
	if _, ok := c.Get("b"); ok {
		t.Error("Get(b) present, want evicted as least recently used")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if got, ok := c.Get(k); !ok || got != want {
			t.Errorf("Get(%q) = %d, %v; want %d, true", k, got, ok, want)
		}
	}
	if c.Len() != 2 {
		t.Errorf("Len() = %d, want 2", c.Len())
	}
}

func TestTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New[string, string](10, time.Second)
	c.now = func() time.Time { return now }
	c.Put("k", "v")
	now = now.Add(999 * time.Millisecond)
	if _, ok := c.Get("k"); !ok {
		t.Fatal("Get before TTL: missing")
	}
	now = now.Add(time.Millisecond)
	if _, ok := c.Get("k"); ok {
		t.Fatal("Get at TTL: present, want expired")
	}
	if c.Len() != 0 {
		t.Errorf("Len() = %d after expiry, want 0", c.Len())
	}
}

func TestGetOrLoad(t *testing.T) {
	c := New[int, string](4, 0)
	calls := 0
	load := func() (string, error) { calls++; return "x", nil }
	for range 3 {
		if v, err := c.GetOrLoad(1, load); err != nil || v != "x" {
			t.Fatalf("GetOrLoad = %q, %v", v, err)
		}
	}
	if calls != 1 {
		t.Errorf("load called %d times, want 1", calls)
	}
	boom := errors.New("boom")
	if _, err := c.GetOrLoad(2, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Errorf("GetOrLoad error = %v, want %v", err, boom)
	}
	if _, ok := c.Get(2); ok {
		t.Error("a failed load was cached")
	}
}

func TestBoundedUnderConcurrency(t *testing.T) {
	c := New[string, int](100, 0)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := fmt.Sprint(w, "-", i)
				c.Put(k, i)
				c.Get(k)
				if i%3 == 0 {
					c.Delete(k)
				}
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 100 {
		t.Errorf("Len() = %d, want at most 100", n)
	}
}
