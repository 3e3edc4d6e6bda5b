package txindextest

// The tests of txindex.Owners: claims of free, held, expired and released
// shards, concurrent claimants, renewal, release, the listing of leases,
// and Waiting.

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// RunOwners runs the section of txindex.Owners against h: which claims
// win, concurrent claimants of one shard, epochs across owners, renewal
// and release, the listing of leases, and the to-be-loaded records of a
// shard that Waiting pages through.
func RunOwners[X interface {
	txindex.Pipeline
	txindex.Owners
}](t *testing.T, h Harness[X]) {
	run(t, view(h, func(x X) owners { return x }), []test[owners]{
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimHeld", testClaimHeld},
		{"ClaimExpired", testClaimExpired},
		{"Release", testRelease},
		{"Leases", testLeases},
		{"Waiting", testWaiting},
	})
}

// Times to live: of leases that must stay live during a test, and of those
// a test lets expire.
const (
	longTTL  = time.Hour
	shortTTL = 5 * time.Millisecond
)

// newShards returns n loader shard ids that no other test or run uses:
// shards 0 to n-1 of a random shard count far above any real one.
func newShards(n int) []string {
	count := 1_000_000 + mrand.IntN(1_000_000_000)
	out := make([]string, n)
	for i := range out {
		out[i] = txindex.ShardID(i, count)
	}
	return out
}

// cmpLease compares leases with their expiry times to the millisecond,
// which every store keeps.
var cmpLease = cmp.Comparer(func(a, b time.Time) bool {
	d := a.Sub(b)
	return -time.Millisecond < d && d < time.Millisecond
})

// claimed claims shard for owner, which must win at epoch, and returns the
// lease.
func claimed(t *testing.T, x txindex.Owners, shard, owner string, ttl time.Duration, epoch int64) txindex.Lease {
	t.Helper()
	start := time.Now()
	l, ok, err := x.Claim(t.Context(), shard, owner, ttl)
	end := time.Now()
	if err != nil || !ok {
		t.Fatalf("Claim(%q, %q) = %v, %v, want claimed", shard, owner, ok, err)
	}
	wantLease(t, fmt.Sprintf("Claim(%q, %q)", shard, owner), l, txindex.Lease{Shard: shard, Owner: owner, Epoch: epoch}, start.Add(ttl), end.Add(ttl))
	return l
}

// notClaimed checks that owner's claim of shard fails.
func notClaimed(t *testing.T, x txindex.Owners, shard, owner string) {
	t.Helper()
	l, ok, err := x.Claim(t.Context(), shard, owner, longTTL)
	if err != nil || ok {
		t.Errorf("Claim(%q, %q) = %+v, %v, %v; want not claimed, nil error", shard, owner, l, ok, err)
	}
}

// renewed renews l, which must succeed, and returns the new lease.
func renewed(t *testing.T, x txindex.Owners, l txindex.Lease, ttl time.Duration) txindex.Lease {
	t.Helper()
	start := time.Now()
	got, ok, err := x.Renew(t.Context(), l, ttl)
	end := time.Now()
	if err != nil || !ok {
		t.Fatalf("Renew(%+v) = %v, %v, want renewed", l, ok, err)
	}
	want := l
	want.Expires = time.Time{}
	wantLease(t, fmt.Sprintf("Renew(%+v)", l), got, want, start.Add(ttl), end.Add(ttl))
	return got
}

// notRenewed checks that renewing l fails.
func notRenewed(t *testing.T, x txindex.Owners, l txindex.Lease) {
	t.Helper()
	got, ok, err := x.Renew(t.Context(), l, longTTL)
	if err != nil || ok {
		t.Errorf("Renew(%+v) = %+v, %v, %v; want not renewed, nil error", l, got, ok, err)
	}
}

func mustRelease(t *testing.T, x txindex.Owners, l txindex.Lease) {
	t.Helper()
	if err := x.Release(t.Context(), l); err != nil {
		t.Fatalf("Release(%+v) error: %v", l, err)
	}
}

// wantLease checks got against want but for Expires, which must lie
// between from and to, to the millisecond.
func wantLease(t *testing.T, what string, got, want txindex.Lease, from, to time.Time) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(txindex.Lease{}, "Expires")); diff != "" {
		t.Errorf("%s lease (-want +got):\n%s", what, diff)
	}
	if got.Expires.Before(from.Add(-time.Millisecond)) || got.Expires.After(to.Add(time.Millisecond)) {
		t.Errorf("%s lease expires at %v, want between %v and %v", what, got.Expires, from, to)
	}
}

// waitExpiry returns once l expired by this process's clock.
func waitExpiry(l txindex.Lease) {
	time.Sleep(time.Until(l.Expires) + 2*time.Millisecond)
}

// leasesOf returns what Leases lists of shards, keyed by shard, and checks
// that the whole listing is in shard order.
func leasesOf(t *testing.T, x txindex.Owners, shards ...string) map[string]txindex.Lease {
	t.Helper()
	all, err := x.Leases(t.Context())
	if err != nil {
		t.Fatalf("Leases error: %v", err)
	}
	if !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].Shard < all[j].Shard }) {
		t.Errorf("Leases is not in shard order")
	}
	out := map[string]txindex.Lease{}
	for _, l := range all {
		if slices.Contains(shards, l.Shard) {
			if _, ok := out[l.Shard]; ok {
				t.Errorf("Leases lists shard %q twice", l.Shard)
			}
			out[l.Shard] = l
		}
	}
	return out
}

// checkLeases checks that Leases lists exactly want of their shards and of
// others.
func checkLeases(t *testing.T, x txindex.Owners, want []txindex.Lease, others ...string) {
	t.Helper()
	shards := slices.Clone(others)
	wantBy := map[string]txindex.Lease{}
	for _, l := range want {
		shards = append(shards, l.Shard)
		wantBy[l.Shard] = l
	}
	if diff := cmp.Diff(wantBy, leasesOf(t, x, shards...), cmpLease); diff != "" {
		t.Errorf("Leases (-want +got):\n%s", diff)
	}
}

// testClaimConcurrent has concurrent claimants of one free shard, never
// claimed, released or expired: exactly one wins, at the next epoch.
func testClaimConcurrent(t *testing.T, h Harness[owners]) {
	x := h.New(t)
	const n = 8
	for _, tc := range []struct {
		name      string
		prepare   func(t *testing.T, shard string)
		wantEpoch int64
	}{
		{"never claimed", func(*testing.T, string) {}, 1},
		{"released", func(t *testing.T, shard string) {
			mustRelease(t, x, claimed(t, x, shard, "before", longTTL, 1))
		}, 2},
		{"expired", func(t *testing.T, shard string) {
			waitExpiry(claimed(t, x, shard, "before", shortTTL, 1))
		}, 2},
	} {
		for round := range 3 {
			shard := newShards(1)[0]
			tc.prepare(t, shard)
			leases := make([]txindex.Lease, n)
			won := make([]bool, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					leases[i], won[i], errs[i] = x.Claim(t.Context(), shard, fmt.Sprintf("claimant-%d", i), longTTL)
				})
			}
			close(start)
			wg.Wait()
			var winners []txindex.Lease
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("%s, round %d: Claim by claimant-%d error: %v", tc.name, round, i, errs[i])
				}
				if won[i] {
					winners = append(winners, leases[i])
				}
			}
			if len(winners) != 1 {
				t.Fatalf("%s, round %d: %d concurrent Claims of a free shard won %d times, want once: %+v", tc.name, round, n, len(winners), winners)
			}
			w := winners[0]
			if w.Shard != shard || w.Epoch != tc.wantEpoch || w.Released || !w.Live(time.Now()) {
				t.Errorf("%s, round %d: winning lease %+v, want shard %q at epoch %d, live", tc.name, round, w, shard, tc.wantEpoch)
			}
			checkLeases(t, x, []txindex.Lease{w})
		}
	}
}

// testClaimHeld checks that a live lease is its owner's alone: others'
// claims fail, the owner's claims and renewals extend it at its epoch, and
// a renewal that names another owner or epoch fails.
func testClaimHeld(t *testing.T, h Harness[owners]) {
	x := h.New(t)
	shard := newShards(1)[0]
	a := claimed(t, x, shard, "a", longTTL, 1)
	notClaimed(t, x, shard, "b")
	again := claimed(t, x, shard, "a", longTTL, 1)
	if again.Expires.Before(a.Expires) {
		t.Errorf("Claim by the owner moved the expiry back, from %v to %v", a.Expires, again.Expires)
	}
	a = renewed(t, x, again, longTTL)
	for _, other := range []txindex.Lease{
		{Shard: shard, Owner: "b", Epoch: 1, Expires: a.Expires},
		{Shard: shard, Owner: "a", Epoch: 2, Expires: a.Expires},
		{Shard: shard, Owner: "a", Epoch: 0, Expires: a.Expires},
	} {
		notRenewed(t, x, other)
	}
	notClaimed(t, x, shard, "b")
	checkLeases(t, x, []txindex.Lease{a})
}

// testClaimExpired lets leases expire: the owner may still renew a lease
// that no one took over; another owner takes it over at the next epoch,
// after which the old owner can neither renew, release nor claim it; a
// claim by the owner of its own expired lease keeps the epoch.
func testClaimExpired(t *testing.T, h Harness[owners]) {
	x := h.New(t)
	shard := newShards(1)[0]
	a := claimed(t, x, shard, "a", shortTTL, 1)
	waitExpiry(a)
	a = renewed(t, x, a, shortTTL)
	waitExpiry(a)
	b := claimed(t, x, shard, "b", longTTL, 2)
	notRenewed(t, x, a)
	if err := x.Release(t.Context(), a); err != nil {
		t.Errorf("Release of a lease taken over = %v, want nil (nothing to release)", err)
	}
	notClaimed(t, x, shard, "a")
	notClaimed(t, x, shard, "c")
	checkLeases(t, x, []txindex.Lease{b})

	b = renewed(t, x, b, shortTTL)
	waitExpiry(b)
	b = claimed(t, x, shard, "b", longTTL, 2)
	checkLeases(t, x, []txindex.Lease{b})
}

// testRelease releases leases: Leases shows them released with their
// owner and epoch, they renew no more, and the next claim takes the next
// epoch when another owner makes it and keeps the epoch when the owner
// does.
func testRelease(t *testing.T, h Harness[owners]) {
	x := h.New(t)
	shards := newShards(2)
	toOther, toSame := shards[0], shards[1]

	a := claimed(t, x, toOther, "a", longTTL, 1)
	mustRelease(t, x, a)
	released := a
	released.Released = true
	checkLeases(t, x, []txindex.Lease{released})
	notRenewed(t, x, a)
	mustRelease(t, x, a) // nothing to release
	b := claimed(t, x, toOther, "b", longTTL, 2)
	mustRelease(t, x, a) // a's no more: must not release b's lease
	notClaimed(t, x, toOther, "c")
	checkLeases(t, x, []txindex.Lease{b})

	s := claimed(t, x, toSame, "a", longTTL, 1)
	mustRelease(t, x, s)
	s = claimed(t, x, toSame, "a", longTTL, 1)
	checkLeases(t, x, []txindex.Lease{b, s})
}

// testLeases checks that Leases lists every shard ever claimed, live,
// released or expired, and no shard never claimed.
func testLeases(t *testing.T, h Harness[owners]) {
	x := h.New(t)
	shards := newShards(4)
	// Claimed out of shard order, so that claim order cannot pass for it.
	expired := claimed(t, x, shards[2], "c", shortTTL, 1)
	live := claimed(t, x, shards[1], "b", longTTL, 1)
	released := claimed(t, x, shards[0], "a", longTTL, 1)
	mustRelease(t, x, released)
	released.Released = true
	waitExpiry(expired)
	checkLeases(t, x, []txindex.Lease{released, live, expired}, shards[3])
}

// testWaiting pages through the to-be-loaded records of one shard, of
// every crawl, in key order: not those of other shards, in other statuses,
// or without a shard.
func testWaiting(t *testing.T, h Harness[owners]) {
	x := h.New(t)
	crawl, other := newCrawlID(t), newCrawlID(t)
	shards := newShards(3)
	shard, otherShard, unused := shards[0], shards[1], shards[2]
	now := time.Now()
	var recs, want []txindex.Record
	add := func(crawl, path string, s contracts.Status, sh string) {
		r := rec(crawl, "http://w.example/"+path, s, now)
		r.Shard = sh
		recs = append(recs, r)
		if s == contracts.ToBeLoaded && sh == shard {
			want = append(want, r)
		}
	}
	for i := range 5 {
		add(crawl, fmt.Sprintf("load-%d", i), contracts.ToBeLoaded, shard)
	}
	add(other, "load-other-crawl", contracts.ToBeLoaded, shard)
	add(other, "load-other-crawl-2", contracts.ToBeLoaded, shard)
	add(crawl, "parse", contracts.ToBeParsed, shard)
	add(crawl, "index", contracts.ToBeIndexed, shard)
	add(crawl, "failed", contracts.Failed, shard)
	add(crawl, "retired", contracts.Retired, shard)
	add(crawl, "other-shard", contracts.ToBeLoaded, otherShard)
	add(crawl, "other-shard-2", contracts.ToBeLoaded, otherShard)
	add(crawl, "no-shard", contracts.ToBeLoaded, "")
	mrand.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	mustCreate(t, x, recs...)
	sort.Slice(want, func(i, j int) bool { return want[i].Key < want[j].Key })
	if got := mustGet(t, x, want[0].Key); got.Shard != shard {
		t.Errorf("Get(%q).Shard = %q, want %q", want[0].Key, got.Shard, shard)
	}

	// waitingAll follows Waiting's cursor from after to the end.
	waitingAll := func(sh, after string, limit int) []txindex.Record {
		t.Helper()
		var out []txindex.Record
		for page := 0; ; page++ {
			if page > len(recs) {
				t.Fatalf("Waiting(%q, limit %d) does not end", sh, limit)
			}
			rs, err := x.Waiting(t.Context(), sh, after, limit)
			if err != nil {
				t.Fatalf("Waiting(%q, %q, %d) error: %v", sh, after, limit, err)
			}
			if len(rs) > limit {
				t.Fatalf("Waiting(%q, %q, %d) returned %d records", sh, after, limit, len(rs))
			}
			for _, r := range rs {
				if r.Key <= after {
					t.Errorf("Waiting(%q, %q, %d) returned key %q, not after the cursor", sh, after, limit, r.Key)
				}
				after = r.Key
			}
			out = append(out, rs...)
			if len(rs) < limit {
				return out
			}
		}
	}
	for _, limit := range []int{1, 3, len(want), 100} {
		if diff := cmp.Diff(want, waitingAll(shard, "", limit), cmpTime); diff != "" {
			t.Errorf("Waiting(%q) in pages of %d (-want +got):\n%s", shard, limit, diff)
		}
	}
	if diff := cmp.Diff(want[3:], waitingAll(shard, want[2].Key, 2), cmpTime); diff != "" {
		t.Errorf("Waiting(%q) after %q (-want +got):\n%s", shard, want[2].Key, diff)
	}
	if got := waitingAll(unused, "", 10); len(got) != 0 {
		t.Errorf("Waiting of a shard without records = %d records, want none", len(got))
	}

	// A record that leaves to-be-loaded leaves the listing.
	gone := want[1]
	if applied, err := x.Transition(t.Context(), []txindex.Transition{{Key: gone.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed}}); err != nil || !applied[0] {
		t.Fatalf("Transition(%q) = %v, %v, want applied", gone.Key, applied, err)
	}
	rest := slices.Delete(slices.Clone(want), 1, 2)
	if diff := cmp.Diff(rest, waitingAll(shard, "", 2), cmpTime); diff != "" {
		t.Errorf("Waiting(%q) after a record left to-be-loaded (-want +got):\n%s", shard, diff)
	}
}
