package robots

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeOrigin is one scripted robots.txt answer.
type fakeOrigin struct {
	status int
	body   string
	err    error
}

// fakeFetcher serves scripted answers per robots URL and counts fetches.
type fakeFetcher struct {
	mu      sync.Mutex
	origins map[string]fakeOrigin
	calls   map[string]int
	gate    chan struct{} // if set, fetches wait for it to close
	started chan struct{} // if set, receives one value per fetch started
}

func newFakeFetcher() *fakeFetcher {
	return &fakeFetcher{origins: map[string]fakeOrigin{}, calls: map[string]int{}}
}

func (f *fakeFetcher) set(url string, o fakeOrigin) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.origins[url] = o
}

func (f *fakeFetcher) count(url string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[url]
}

func (f *fakeFetcher) fetch(ctx context.Context, url string) (int, []byte, error) {
	f.mu.Lock()
	f.calls[url]++
	o, ok := f.origins[url]
	f.mu.Unlock()
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	if !ok {
		return 0, nil, errors.New("connection refused")
	}
	return o.status, []byte(o.body), o.err
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const ua = "gridcrawl/1.0"

func TestCacheStatuses(t *testing.T) {
	tests := []struct {
		name        string
		origin      fakeOrigin
		wantAllowed bool // for /private
		wantTTL     time.Duration
	}{
		{"200 parsed", fakeOrigin{status: 200, body: "User-agent: *\nDisallow: /private\n"}, false, 24 * time.Hour},
		{"200 empty", fakeOrigin{status: 200}, true, 24 * time.Hour},
		{"404 allows", fakeOrigin{status: 404, body: "User-agent: *\nDisallow: /"}, true, 24 * time.Hour},
		{"401 allows", fakeOrigin{status: 401}, true, 24 * time.Hour},
		{"403 allows", fakeOrigin{status: 403}, true, 24 * time.Hour},
		{"too many redirects allows", fakeOrigin{status: 301}, true, 24 * time.Hour},
		{"429 disallows", fakeOrigin{status: 429}, false, 10 * time.Minute},
		{"500 disallows", fakeOrigin{status: 500}, false, 10 * time.Minute},
		{"503 disallows", fakeOrigin{status: 503, body: "User-agent: *\nAllow: /"}, false, 10 * time.Minute},
		{"network error disallows", fakeOrigin{err: errors.New("connection reset")}, false, 10 * time.Minute},
		{"odd status disallows", fakeOrigin{status: 999}, false, 10 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFetcher()
			f.set("https://a.test/robots.txt", tc.origin)
			clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
			c := NewCache(f.fetch, CacheConfig{Now: clock.Now})

			r, err := c.Get(t.Context(), "https", "a.test")
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got := r.Allowed(ua, "/private"); got != tc.wantAllowed {
				t.Errorf("Allowed(/private) = %v, want %v", got, tc.wantAllowed)
			}
			if !r.Allowed(ua, "/robots.txt") {
				t.Errorf("Allowed(/robots.txt) = false")
			}
			clock.advance(tc.wantTTL - time.Second)
			if _, err := c.Get(t.Context(), "HTTPS", "A.test"); err != nil {
				t.Fatal(err)
			}
			if got := f.count("https://a.test/robots.txt"); got != 1 {
				t.Errorf("fetches before the TTL = %d, want 1", got)
			}
			clock.advance(2 * time.Second)
			if _, err := c.Get(t.Context(), "https", "a.test"); err != nil {
				t.Fatal(err)
			}
			if got := f.count("https://a.test/robots.txt"); got != 2 {
				t.Errorf("fetches after the TTL = %d, want 2", got)
			}
		})
	}
}

func TestCacheKeepsGoodCopyWhenUnreachable(t *testing.T) {
	const url = "http://a.test:8080/robots.txt"
	f := newFakeFetcher()
	f.set(url, fakeOrigin{status: 200, body: "User-agent: *\nDisallow: /private\n"})
	clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := NewCache(f.fetch, CacheConfig{Now: clock.Now, TTL: time.Hour, ErrorTTL: time.Minute})

	steps := []struct {
		name      string
		origin    *fakeOrigin // nil keeps the previous answer
		advance   time.Duration
		wantPub   bool // Allowed(/public)
		wantPriv  bool // Allowed(/private)
		wantCalls int
	}{
		{name: "good copy", wantPub: true, wantPriv: false, wantCalls: 1},
		{name: "server fails after expiry", origin: &fakeOrigin{status: 503}, advance: time.Hour, wantPub: true, wantPriv: false, wantCalls: 2},
		{name: "still failing after error ttl", advance: time.Minute, wantPub: true, wantPriv: false, wantCalls: 3},
		{name: "network error", origin: &fakeOrigin{err: errors.New("timeout")}, advance: time.Minute, wantPub: true, wantPriv: false, wantCalls: 4},
		{name: "404 replaces the copy", origin: &fakeOrigin{status: 404}, advance: time.Minute, wantPub: true, wantPriv: true, wantCalls: 5},
		{name: "503 keeps the allow-all copy", origin: &fakeOrigin{status: 503}, advance: time.Hour, wantPub: true, wantPriv: true, wantCalls: 6},
	}
	for _, s := range steps {
		if s.origin != nil {
			f.set(url, *s.origin)
		}
		clock.advance(s.advance)
		r, err := c.Get(t.Context(), "http", "a.test:8080")
		if err != nil {
			t.Fatalf("%s: Get: %v", s.name, err)
		}
		if got := r.Allowed(ua, "/public"); got != s.wantPub {
			t.Errorf("%s: Allowed(/public) = %v, want %v", s.name, got, s.wantPub)
		}
		if got := r.Allowed(ua, "/private"); got != s.wantPriv {
			t.Errorf("%s: Allowed(/private) = %v, want %v", s.name, got, s.wantPriv)
		}
		if got := f.count(url); got != s.wantCalls {
			t.Errorf("%s: fetches = %d, want %d", s.name, got, s.wantCalls)
		}
	}
}

func TestCacheUnreachableWithoutCopy(t *testing.T) {
	f := newFakeFetcher()
	f.set("http://b.test/robots.txt", fakeOrigin{status: 503})
	c := NewCache(f.fetch, CacheConfig{})
	r, err := c.Get(t.Context(), "http", "b.test")
	if err != nil {
		t.Fatal(err)
	}
	if r != DisallowAll {
		t.Errorf("Get after 503 with no copy = %p, want DisallowAll", r)
	}
}

// waitForWaiters waits until n callers wait on the fetch of key, or until a
// second fetch shows that callers do not wait at all.
func waitForWaiters(t *testing.T, c *Cache, f *fakeFetcher, key string, n int) {
	t.Helper()
	for {
		c.mu.Lock()
		cl := c.inflight[key]
		done := cl != nil && cl.waiters >= n
		c.mu.Unlock()
		if done || f.count(key+"/robots.txt") > 1 {
			return
		}
		runtime.Gosched()
	}
}

func TestCacheSingleflight(t *testing.T) {
	const url = "http://a.test/robots.txt"
	f := newFakeFetcher()
	f.set(url, fakeOrigin{status: 200, body: "User-agent: *\nDisallow: /x\n"})
	f.gate = make(chan struct{})
	f.started = make(chan struct{}, 100)
	c := NewCache(f.fetch, CacheConfig{})

	const n = 50
	var wg sync.WaitGroup
	results := make([]*Rules, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = c.Get(t.Context(), "http", "a.test") })
	}
	<-f.started // one fetch is under way; let every caller queue behind it
	waitForWaiters(t, c, f, "http://a.test", n-1)
	close(f.gate)
	wg.Wait()
	if got := f.count(url); got != 1 {
		t.Errorf("fetches for %d concurrent Gets = %d, want 1", n, got)
	}
	for i := range n {
		if errs[i] != nil || results[i] != results[0] || results[i].Allowed(ua, "/x") {
			t.Fatalf("Get #%d = %p, %v; want the shared parsed rules", i, results[i], errs[i])
		}
	}
}

func TestCacheCancelled(t *testing.T) {
	const url = "http://a.test/robots.txt"
	f := newFakeFetcher()
	f.set(url, fakeOrigin{status: 200, body: "User-agent: *\nDisallow: /x\n"})
	f.gate = make(chan struct{})
	f.started = make(chan struct{}, 10)
	c := NewCache(f.fetch, CacheConfig{})

	ctx, cancel := context.WithCancel(t.Context())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "http", "a.test")
		leaderErr <- err
	}()
	<-f.started

	// A second caller waits on the leader's fetch; when the leader gives up,
	// it must fetch by itself rather than inherit the cancellation.
	follower := make(chan *Rules, 1)
	go func() {
		r, err := c.Get(t.Context(), "http", "a.test")
		if err != nil {
			t.Errorf("follower Get: %v", err)
		}
		follower <- r
	}()
	waitForWaiters(t, c, f, "http://a.test", 1)
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Get = %v, want context.Canceled", err)
	}
	<-f.started // the follower's own fetch
	close(f.gate)
	if r := <-follower; r == nil || r.Allowed(ua, "/x") {
		t.Fatalf("follower got %p, want parsed rules", r)
	}
	if got := f.count(url); got != 2 {
		t.Errorf("fetches = %d, want 2 (the cancelled one is not cached)", got)
	}

	// A waiter whose own context ends gets its context's error.
	f.gate = make(chan struct{})
	defer close(f.gate)
	c2 := NewCache(f.fetch, CacheConfig{})
	go c2.Get(t.Context(), "http", "a.test")
	<-f.started
	wctx, wcancel := context.WithCancel(t.Context())
	wcancel()
	if _, err := c2.Get(wctx, "http", "a.test"); !errors.Is(err, context.Canceled) {
		t.Errorf("waiter with cancelled context: Get = %v, want context.Canceled", err)
	}
}

func TestOriginKey(t *testing.T) {
	tests := []struct{ scheme, hostport, want string }{
		{"http", "a.test", "http://a.test"},
		{"HTTP", "A.Test:80", "http://a.test"},
		{"https", "a.test:443", "https://a.test"},
		{"https", "a.test:80", "https://a.test:80"},
		{"http", "a.test:8080", "http://a.test:8080"},
		{"http", "[::1]:80", "http://[::1]"},
		{"", "a.test", "http://a.test"},
	}
	for _, tc := range tests {
		if got := originKey(tc.scheme, tc.hostport); got != tc.want {
			t.Errorf("originKey(%q, %q) = %q, want %q", tc.scheme, tc.hostport, got, tc.want)
		}
	}
}

func TestCacheLRU(t *testing.T) {
	f := newFakeFetcher()
	for _, h := range []string{"a", "b", "c", "d"} {
		f.set("http://"+h+".test/robots.txt", fakeOrigin{status: 200})
	}
	c := NewCache(f.fetch, CacheConfig{MaxEntries: 3})
	get := func(h string) {
		t.Helper()
		if _, err := c.Get(t.Context(), "http", h+".test"); err != nil {
			t.Fatal(err)
		}
	}
	get("a")
	get("b")
	get("c")
	get("a") // a is now the most recently used, b the least
	get("d") // evicts b
	if got := c.lru.Len(); got != 3 {
		t.Errorf("entries = %d, want 3", got)
	}
	get("a")
	get("c")
	get("d")
	get("b") // fetched again, evicts a
	want := map[string]int{"a": 1, "b": 2, "c": 1, "d": 1}
	got := map[string]int{}
	for h := range want {
		got[h] = f.count("http://" + h + ".test/robots.txt")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fetch counts mismatch (-want +got):\n%s", diff)
	}
	if _, ok := c.entries["http://a.test"]; ok {
		t.Errorf("a.test still cached, want it evicted")
	}
}

func TestCacheConcurrentHosts(t *testing.T) {
	f := newFakeFetcher()
	for i := range 20 {
		f.set(fmt.Sprintf("http://h%d.test/robots.txt", i), fakeOrigin{status: 200, body: fmt.Sprintf("User-agent: *\nDisallow: /%d\n", i)})
	}
	c := NewCache(f.fetch, CacheConfig{MaxEntries: 10})
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				h := (i*7 + g) % 20
				r, err := c.Get(t.Context(), "http", fmt.Sprintf("h%d.test", h))
				if err != nil || r.Allowed(ua, fmt.Sprintf("/%d", h)) || !r.Allowed(ua, "/x") {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d Gets returned another host's rules or an error", n)
	}
	if got := c.lru.Len(); got > 10 {
		t.Errorf("entries = %d, want at most 10", got)
	}
}

// TestCacheLookupTellsWhy checks that an unreachable robots.txt is reported
// with its cause (not as rules that disallow), that a good copy standing in
// is not, and that only the call that fetched reports Fetched.
func TestCacheLookupTellsWhy(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	tests := []struct {
		name      string
		origin    fakeOrigin
		wantWhy   string // "" means Unreachable is nil
		wantRules *Rules // nil means parsed rules
	}{
		{"network error", fakeOrigin{err: refused}, "robots.txt unreachable: dial tcp 127.0.0.1:1: connect: connection refused", DisallowAll},
		{"503", fakeOrigin{status: 503}, "robots.txt unreachable: http 503", DisallowAll},
		{"429", fakeOrigin{status: 429}, "robots.txt unreachable: http 429", DisallowAll},
		{"404", fakeOrigin{status: 404}, "", AllowAll},
		{"200", fakeOrigin{status: 200, body: "User-agent: *\nDisallow: /\n"}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFetcher()
			f.set("http://a.test/robots.txt", tc.origin)
			c := NewCache(f.fetch, CacheConfig{})
			for i, wantFetched := range []bool{true, false} {
				res, err := c.Lookup(t.Context(), "http", "a.test")
				if err != nil {
					t.Fatalf("Lookup #%d: %v", i, err)
				}
				why := ""
				if res.Unreachable != nil {
					why = res.Unreachable.Error()
					if !errors.Is(res.Unreachable, ErrUnreachable) {
						t.Errorf("Lookup #%d: Unreachable %v does not wrap ErrUnreachable", i, res.Unreachable)
					}
				}
				if why != tc.wantWhy {
					t.Errorf("Lookup #%d: Unreachable = %q, want %q", i, why, tc.wantWhy)
				}
				if tc.origin.err != nil && !errors.Is(res.Unreachable, refused) {
					t.Errorf("Lookup #%d: Unreachable %v does not wrap the fetch error", i, res.Unreachable)
				}
				if tc.wantRules != nil && res.Rules != tc.wantRules {
					t.Errorf("Lookup #%d: Rules = %p, want %p", i, res.Rules, tc.wantRules)
				}
				if res.Fetched != wantFetched {
					t.Errorf("Lookup #%d: Fetched = %v, want %v", i, res.Fetched, wantFetched)
				}
			}
		})
	}
}

// TestCacheLookupGoodCopyIsNotUnreachable checks that rules standing in from
// the last good copy carry no unreachable reason: what they disallow is
// truly disallowed.
func TestCacheLookupGoodCopyIsNotUnreachable(t *testing.T) {
	const url = "http://a.test/robots.txt"
	f := newFakeFetcher()
	f.set(url, fakeOrigin{status: 200, body: "User-agent: *\nDisallow: /private\n"})
	clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := NewCache(f.fetch, CacheConfig{Now: clock.Now, TTL: time.Hour})
	if _, err := c.Lookup(t.Context(), "http", "a.test"); err != nil {
		t.Fatal(err)
	}
	f.set(url, fakeOrigin{status: 503})
	clock.advance(2 * time.Hour)
	res, err := c.Lookup(t.Context(), "http", "a.test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Unreachable != nil || !res.Fetched || res.Rules.Allowed(ua, "/private") || !res.Rules.Allowed(ua, "/public") {
		t.Errorf("Lookup with a good copy while 503 = {Unreachable: %v, Fetched: %v}, /private allowed %v, /public allowed %v; want nil, true, false, true",
			res.Unreachable, res.Fetched, res.Rules.Allowed(ua, "/private"), res.Rules.Allowed(ua, "/public"))
	}
}
