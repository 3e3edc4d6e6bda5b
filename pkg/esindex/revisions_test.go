package esindex

import (
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// realtimeGets returns the number of gets the transaction index has served
// (the primaries' get.total: every realtime get and mget document).
func realtimeGets(t *testing.T, c *Client) int64 {
	t.Helper()
	var res struct {
		Indices map[string]struct {
			Primaries struct {
				Get struct {
					Total int64 `json:"total"`
				} `json:"get"`
			} `json:"primaries"`
		} `json:"indices"`
	}
	if err := c.do(t.Context(), esapi.IndicesStatsRequest{Index: []string{c.txIndex}, Metric: []string{"get"}}, &res); err != nil {
		t.Fatalf("index stats: %v", err)
	}
	return res.Indices[c.txIndex].Primaries.Get.Total
}

// twoProcesses returns two clients on one transaction index, as two
// services of a grid have, and a record created by the first.
func twoProcesses(t *testing.T) (a, b *Client, r txindex.Record) {
	a = open(t, RefreshOnRead)
	b = openPrefix(t, Options{URL: esURL(t), Prefix: strings.TrimSuffix(a.txIndex, "-transactions")}, false)
	now := time.Now().UTC().Truncate(time.Millisecond)
	crawl := "rev-" + rand.Text()
	r = txindex.Record{Key: txindex.Key(crawl, "http://a.example/"), CrawlID: crawl, URL: "http://a.example/",
		Host: "a.example", Group: "a.example", Depth: 2, Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now}
	if _, err := a.TxIndex().Create(t.Context(), []txindex.Record{r}); err != nil {
		t.Fatalf("Create error: %v", err)
	}
	return a, b, r
}

// carry hands the snapshot a's store has of key to b's store, through
// JSON as a contract carries it.
func carry(t *testing.T, from, to *Client, key string) {
	t.Helper()
	s := txindex.Snapshot(from.TxIndex(), key)
	if s == nil {
		t.Fatalf("Snapshot(%q) = nil after this process wrote it", key)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var got contracts.Snapshot
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := txindex.Learn(to.TxIndex(), key, &got); !ok {
		t.Fatalf("Learn(%q) = not learned", key)
	}
}

// TestSnapshotSparesRead: a transition of a record whose snapshot the
// process was handed applies without a single get (the read that makes a
// shard refresh), and writes the record as the rule says.
func TestSnapshotSparesRead(t *testing.T) {
	a, b, r := twoProcesses(t)
	carry(t, a, b, r.Key)
	before := realtimeGets(t, a)
	got, err := b.TxIndex().Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: contracts.ToBeLoaded, To: contracts.ToBeParsed, HTTPStatus: 200}})
	if err != nil || !got[0] {
		t.Fatalf("Transition with a snapshot = %v, %v, want applied", got, err)
	}
	if n := realtimeGets(t, a) - before; n != 0 {
		t.Errorf("gets served for a transition with a snapshot = %d, want 0", n)
	}
	rec, err := a.TxIndex().Get(t.Context(), r.Key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != contracts.ToBeParsed || rec.HTTPStatus != 200 || rec.Depth != 2 || len(rec.History) != 2 {
		t.Errorf("record after = status %q http %d depth %d history %v, want to-be-parsed, 200, 2, two events",
			rec.Status, rec.HTTPStatus, rec.Depth, rec.History)
	}
}

// TestSnapshotKeepsRender: the loader's store knows the render reason of a
// record it transitioned, its snapshot carries it to the next stage's
// store, and the next stage's transition, written from the snapshot,
// keeps it.
func TestSnapshotKeepsRender(t *testing.T) {
	a, b, r := twoProcesses(t)
	const why = "auto: scripts and 12 characters of text"
	n := int64(2048)
	if got, err := a.TxIndex().Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: contracts.ToBeLoaded,
		To: contracts.ToBeParsed, HTTPStatus: 200, Bytes: &n, Render: why}}); err != nil || !got[0] {
		t.Fatalf("Transition = %v, %v, want applied", got, err)
	}
	if k, _, ok := a.TxIndex().Known(r.Key); !ok || k.Render != why {
		t.Errorf("Known after the transition = %q, %v; want %q, known", k.Render, ok, why)
	}
	carry(t, a, b, r.Key)
	if k, _, ok := b.TxIndex().Known(r.Key); !ok || k.Render != why {
		t.Errorf("Known after Learn = %q, %v; want %q, known", k.Render, ok, why)
	}
	if got, err := b.TxIndex().Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: contracts.ToBeParsed, To: contracts.ToBeIndexed}}); err != nil || !got[0] {
		t.Fatalf("Transition with the snapshot = %v, %v, want applied", got, err)
	}
	rec, err := a.TxIndex().Get(t.Context(), r.Key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != contracts.ToBeIndexed || rec.Render != why {
		t.Errorf("record after = status %q render %q, want to-be-indexed, %q", rec.Status, rec.Render, why)
	}
}

// TestSnapshotStaleLoses: a snapshot of a version that has been changed
// since (the transition it would make was made, or another one) loses: the
// transition is judged on the record as it is, and a duplicate is not
// applied twice.
func TestSnapshotStaleLoses(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first is a's transition after b learned the snapshot; then is
		// b's, on the stale snapshot.
		first, then txindex.Transition
		wantApplied bool
		wantStatus  contracts.Status
		wantAttempt int
	}{
		{"duplicate", txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeParsed},
			txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeParsed, AddAttempt: true}, false, contracts.ToBeParsed, 0},
		{"cancelled meanwhile", txindex.Transition{From: contracts.ToBeLoaded, To: contracts.Failed, Error: "cancelled"},
			txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeParsed}, false, contracts.Failed, 0},
		{"lease renewed meanwhile", txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeLoaded, AddAttempt: true},
			txindex.Transition{From: contracts.ToBeLoaded, To: contracts.ToBeParsed}, true, contracts.ToBeParsed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, r := twoProcesses(t)
			carry(t, a, b, r.Key)
			first, then := tc.first, tc.then
			first.Key, then.Key = r.Key, r.Key
			if got, err := a.TxIndex().Transition(t.Context(), []txindex.Transition{first}); err != nil || !got[0] {
				t.Fatalf("first Transition = %v, %v, want applied", got, err)
			}
			want, err := a.TxIndex().Get(t.Context(), r.Key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.TxIndex().Transition(t.Context(), []txindex.Transition{then})
			if err != nil {
				t.Fatalf("Transition on a stale snapshot: %v", err)
			}
			if got[0] != tc.wantApplied {
				t.Errorf("Transition %s→%s on a stale snapshot applied = %v, want %v", then.From, then.To, got[0], tc.wantApplied)
			}
			rec, err := a.TxIndex().Get(t.Context(), r.Key)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != tc.wantStatus || rec.Attempts != tc.wantAttempt {
				t.Errorf("record after = status %q attempts %d, want %q %d", rec.Status, rec.Attempts, tc.wantStatus, tc.wantAttempt)
			}
			if !tc.wantApplied {
				if diff := cmp.Diff(want, rec); diff != "" {
					t.Errorf("record changed by a transition that lost (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestLearnRefusesMalformed: a snapshot whose revision is not one is not
// learned (the caller reads the record instead), and one of another record
// than the contract's is not used.
func TestLearnRefusesMalformed(t *testing.T) {
	a, b, r := twoProcesses(t)
	s := txindex.Snapshot(a.TxIndex(), r.Key)
	for _, bad := range []string{"", "1", "x:1", "1:0", "-1:1"} {
		if err := b.TxIndex().Learn(r, bad); err == nil {
			t.Errorf("Learn(rev %q) = nil, want an error", bad)
		}
	}
	if _, ok := txindex.Learn(b.TxIndex(), txindex.Key(r.CrawlID, "http://other.example/"), s); ok {
		t.Error("Learn of a snapshot under another key: learned")
	}
	if _, _, ok := b.TxIndex().Known(r.Key); ok {
		t.Error("Known after refused snapshots: known")
	}
}

// TestPeekServesNoGet: Peek reads from the refreshed view (a search), so
// it finds a record once a refresh has shown it, without a get, and does
// not find an absent one.
func TestPeekServesNoGet(t *testing.T) {
	a, _, r := twoProcesses(t)
	if err := a.readRefresh(t.Context(), a.txIndex); err != nil {
		t.Fatal(err)
	}
	before := realtimeGets(t, a)
	absent := txindex.Key(r.CrawlID, "http://absent.example/")
	got, err := a.TxIndex().Peek(t.Context(), []string{r.Key, absent})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[absent]; ok || len(got) != 1 || got[r.Key].Depth != 2 || got[r.Key].Status != contracts.ToBeLoaded {
		t.Errorf("Peek = %+v, want the record alone", got)
	}
	if n := realtimeGets(t, a) - before; n != 0 {
		t.Errorf("gets served for Peek = %d, want 0", n)
	}
}
