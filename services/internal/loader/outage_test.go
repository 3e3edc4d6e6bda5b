package loader

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
	"github.com/gridcrawl/gridcrawl/services/internal/outage"
)

// downStore is an asset store that refuses every write while down, and
// the next failNext writes.
type downStore struct {
	assets.Store
	down     atomic.Bool
	failNext atomic.Int32
}

var errStoreDown = errors.New("connection refused")

func (s *downStore) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if s.down.Load() || s.failNext.Add(-1) >= 0 {
		return errStoreDown
	}
	return s.Store.Put(ctx, key, r, size, contentType)
}

// TestAssetsOutageRenewsLeases fetches pages while the asset store is down:
// the loader keeps them until the store answers again, and meanwhile renews
// their records' lease every half lease, so that the recovery sweep, which
// republishes (and after RecoveryAttempts fails) URLs whose lease ran out,
// does not take the URLs the loader holds for lost. Once the store is back
// the pages are stored and loaded, each fetched once.
func TestAssetsOutageRenewsLeases(t *testing.T) {
	b := newBackends(t)
	store := &downStore{Store: b.assets}
	store.down.Store(true)
	gate := outage.New([]metrics.Check{{Backend: "assets", Probe: func(context.Context) error {
		if store.down.Load() {
			return errStoreDown
		}
		return nil
	}}}, nil)
	const lease = 2 * time.Second
	cfg := config(t, map[string]string{"GRIDCRAWL_RECOVERY_LEASE": lease.String(), "GRIDCRAWL_WARC_FLUSH_INTERVAL": "50ms"})
	b.runLoaderWith(t, cfg, func(d *Deps) { d.Assets, d.Gate = store, gate })

	s := newSite(t, "")
	urls := s.pages(3)
	b.submit(t, "outage", contracts.CrawlRunning, profile(urls...), urls...)
	created := b.record(t, "outage", urls[0]).StatusTime
	waitFor(t, "the pages fetched", func() bool { return len(s.hits()) >= len(urls)+1 }) // and robots.txt
	// Two leases into the outage every record was renewed within the last
	// lease: the sweep finds none of them stale.
	time.Sleep(2 * lease)
	for _, u := range urls {
		r := b.record(t, "outage", u)
		if r.Status != contracts.ToBeLoaded {
			t.Fatalf("%s is %s during the outage, want to-be-loaded", u, r.Status)
		}
		if age := time.Since(r.StatusTime); age >= lease {
			t.Errorf("%s: lease last renewed %v ago (created %v ago), want less than the lease %v",
				u, age.Round(time.Millisecond), time.Since(created).Round(time.Millisecond), lease)
		}
	}
	store.down.Store(false)
	b.waitLoaded(t, "outage", urls...)
	for _, u := range urls {
		if r := b.record(t, "outage", u); r.Status != contracts.ToBeParsed || r.Attempts != 0 {
			t.Errorf("%s: %s after %d attempts, want to-be-parsed after none", u, r.Status, r.Attempts)
		}
	}
	fetchedOnce(t, s)
}

// TestTransientStoreFailureKeepsBatch: a WARC segment whose store fails
// while every backend answers (the readiness probe finds the asset store
// up: a backend on its way back, whose probe answered while the next
// request did not) is kept and stored at a later flush. Settling its
// contracts with the error instead would have the pages fetched again.
func TestTransientStoreFailureKeepsBatch(t *testing.T) {
	b := newBackends(t)
	store := &downStore{Store: b.assets}
	store.failNext.Store(3)
	gate := outage.New([]metrics.Check{{Backend: "assets", Probe: func(context.Context) error { return nil }}}, nil)
	cfg := config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "50ms"})
	b.runLoaderWith(t, cfg, func(d *Deps) { d.Assets, d.Gate = store, gate })

	s := newSite(t, "")
	urls := s.pages(3)
	b.submit(t, "transient", contracts.CrawlRunning, profile(urls...), urls...)
	b.waitLoaded(t, "transient", urls...)
	if n := store.failNext.Load(); n > 0 {
		t.Fatalf("%d injected failures left: the store was not tried", n)
	}
	for _, u := range urls {
		if r := b.record(t, "transient", u); r.Status != contracts.ToBeParsed {
			t.Errorf("%s: %s (%s), want to-be-parsed", u, r.Status, r.Error)
		}
	}
	fetchedOnce(t, s)
}

// fetchedOnce fails t for every path s served more than once.
func fetchedOnce(t *testing.T, s *site) {
	t.Helper()
	fetched := map[string]int{}
	for _, h := range s.hits() {
		fetched[h.path]++
	}
	for p, n := range fetched {
		if n != 1 {
			t.Errorf("%s fetched %d times, want once", p, n)
		}
	}
}
