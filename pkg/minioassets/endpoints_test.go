package minioassets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
)

// proxiedOptions returns the options of the test server with the endpoint
// list of eps, each a proxy's address or a dead one.
func proxiedOptions(t *testing.T) (Options, string) {
	t.Helper()
	opts := serverOptions(t)
	host, _, err := parseEndpoint(opts.Endpoint, opts.Secure)
	if err != nil {
		t.Fatal(err)
	}
	return opts, host
}

// probe is the readiness probe of the assets (metrics.BackendChecks): a
// get of a key that does not exist, where "not found" is an answer.
func probe(ctx context.Context, s *Store) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := s.Get(ctx, "gridcrawl-readyz-probe", 0, 1)
	if err == nil {
		rc.Close()
	}
	if errors.Is(err, assets.ErrNotFound) {
		return nil
	}
	return err
}

// roundTrip puts an object of random content under key and reads it back
// whole and in part.
func roundTrip(ctx context.Context, s *Store, key string) error {
	b := make([]byte, 1+rand.IntN(64<<10))
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	if err := s.Put(ctx, key, bytes.NewReader(b), int64(len(b)), "application/octet-stream"); err != nil {
		return err
	}
	for _, r := range [][2]int64{{0, -1}, {int64(len(b) / 2), 1}} {
		rc, err := s.Get(ctx, key, r[0], r[1])
		if err != nil {
			return err
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("read %q: %w", key, err)
		}
		want := b[r[0]:]
		if r[1] >= 0 {
			want = want[:r[1]]
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("get %q at %d: %d bytes that differ from the %d put", key, r[0], len(got), len(want))
		}
	}
	return nil
}

// TestSeveralEndpoints opens the store on a list of three endpoints of the
// test server: one where nothing listens and two loopback proxies. Open
// works past the dead one; puts and gets from several goroutines, their
// content checked, go on when proxy A is closed in the middle (its
// connections cut); with every proxy closed the readiness probe fails, and
// once proxy A listens again work resumes.
func TestSeveralEndpoints(t *testing.T) {
	opts, host := proxiedOptions(t)
	a, b := testenv.StartProxy(t, host), testenv.StartProxy(t, host)
	opts.Endpoint = testenv.DeadAddr(t) + ", " + a.Addr() + ",http://" + b.Addr()
	s := openStore(t, opts)
	if s.Current() != a.Addr() {
		t.Errorf("current endpoint after Open = %s, want %s (the first that answers)", s.Current(), a.Addr())
	}
	ctx := t.Context()

	const n, workers = 60, 3
	var wg sync.WaitGroup
	var killA sync.Once
	errs := make(chan error, n)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if i >= n/2 {
					killA.Do(a.Close)
				}
				if err := roundTrip(ctx, s, fmt.Sprintf("several/%03d", i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s.Current() != b.Addr() {
		t.Errorf("current endpoint after A closed = %s, want %s", s.Current(), b.Addr())
	}
	keys, err := s.List(ctx, "several/")
	if err != nil || len(keys) != n {
		t.Errorf("List = %d keys, %v; want %d", len(keys), err, n)
	}

	// Both proxies carried requests: the client used the list.
	if a.Accepted() == 0 || b.Accepted() == 0 {
		t.Errorf("proxy A accepted %d connections, B %d: want both used", a.Accepted(), b.Accepted())
	}
	// Every endpoint down: the probe fails, and so do the operations.
	b.Close()
	if err := probe(ctx, s); err == nil {
		t.Fatal("the probe succeeded with every endpoint down")
	}
	if err := roundTrip(ctx, s, "several/down"); err == nil {
		t.Fatal("a put succeeded with every endpoint down")
	}
	// One comes back: work resumes.
	if err := a.Start(); err != nil {
		t.Fatalf("restart proxy A: %v", err)
	}
	if err := probe(ctx, s); err != nil {
		t.Fatalf("the probe fails with proxy A back: %v", err)
	}
	if err := roundTrip(ctx, s, "several/back"); err != nil {
		t.Fatalf("round trip with proxy A back: %v", err)
	}
	if s.Current() != a.Addr() {
		t.Errorf("current endpoint with A back = %s, want %s", s.Current(), a.Addr())
	}
}

// onlyReader hides every method of a reader but Read: it cannot be
// rewound.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestPutUnseekableNotRetried: a Put whose reader cannot be rewound fails
// when its endpoint is down instead of being sent to the next with what is
// left of the reader; the next operation starts on the next endpoint.
func TestPutUnseekableNotRetried(t *testing.T) {
	opts, host := proxiedOptions(t)
	a, b := testenv.StartProxy(t, host), testenv.StartProxy(t, host)
	opts.Endpoint = a.Addr() + "," + b.Addr()
	s := openStore(t, opts)
	ctx := t.Context()
	a.Close()
	body := []byte("not seekable")
	err := s.Put(ctx, "unseekable", onlyReader{bytes.NewReader(body)}, int64(len(body)), "text/plain")
	if err == nil {
		t.Fatal("Put of an unseekable reader succeeded through a closed endpoint")
	}
	if s.Current() != b.Addr() {
		t.Errorf("current endpoint after the failed Put = %s, want %s", s.Current(), b.Addr())
	}
	if err := s.Put(ctx, "unseekable", onlyReader{bytes.NewReader(body)}, int64(len(body)), "text/plain"); err != nil {
		t.Fatalf("Put again: %v", err)
	}
	got, err := get(t, s, "unseekable", 0, -1)
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("Get = %q, %v; want %q", got, err, body)
	}
}
