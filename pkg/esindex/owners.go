package esindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// The txindex.Owners methods of TxIndex. The leases are kept in the index
// "<prefix>-owners", one document per loader shard with the shard as
// document id, read realtime (mget) and written with create operations and
// index operations conditioned on the sequence number and primary term of
// the version read: of concurrent writers of one lease, one wins and the
// others fail with a conflict (409), without scripts. Waiting is a listing
// of the transactions index on loader_shard.

// maxLeaseRounds bounds how often Renew and Release read a lease again
// after a concurrent write of it. Each round but the last has a winner:
// only the claimants and the owner of one shard write its lease.
const maxLeaseRounds = 16

// ownersMapping is the mapping of the leases index. It is a few hundred
// documents at most, so its fields but the write id are indexed, for
// whoever inspects it.
var ownersMapping = map[string]any{
	"shard":    keyword, // Leases' sort
	"owner":    keyword,
	"epoch":    map[string]any{"type": "long"},
	"expires":  date,
	"released": map[string]any{"type": "boolean"},
	"write":    sourceOnly("keyword"), // the write id (leaseDoc)
}

// leaseDoc is a lease as a document: the lease and the write id of the
// write that stored this version, which tells a conflict caused by a
// write's own first application from one caused by another writer (see
// txDoc).
type leaseDoc struct {
	txindex.Lease
	Write string `json:"write,omitempty"`
}

// storedLease is a lease as read, with the sequence number and primary
// term of its version: the condition of a write that changes it.
type storedLease struct {
	leaseDoc
	seqNo, primaryTerm int64
}

// Claim makes owner the owner of shard until now+ttl when the lease is
// absent, released, expired by this process's clock, or owner's already.
// The write is a create for a shard never claimed and otherwise conditioned
// on the version read, so that of concurrent claims one wins; a claim that
// loses the race (a conflict) reports false, as does a claim of a shard
// that another owner holds, with the zero Lease.
func (x *TxIndex) Claim(ctx context.Context, shard, owner string, ttl time.Duration) (txindex.Lease, bool, error) {
	if err := checkLease(shard, owner, ttl); err != nil {
		return txindex.Lease{}, false, fmt.Errorf("claim shard %q: %w", shard, err)
	}
	cur, found, err := x.readLease(ctx, shard)
	if err != nil {
		return txindex.Lease{}, false, fmt.Errorf("claim shard %q: %w", shard, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	l := txindex.Lease{Shard: shard, Owner: owner, Epoch: 1, Expires: leaseEnd(now, ttl)}
	var prev *storedLease
	if found {
		if cur.Owner != owner && cur.Live(now) {
			return txindex.Lease{}, false, nil
		}
		l.Epoch = cur.Epoch
		if cur.Owner != owner {
			l.Epoch++
		}
		prev = &cur
	}
	won, err := x.putLease(ctx, l, prev)
	if err != nil {
		return txindex.Lease{}, false, fmt.Errorf("claim shard %q: %w", shard, err)
	}
	if !won {
		return txindex.Lease{}, false, nil
	}
	return l, true, nil
}

// Renew extends l until now+ttl when the shard is still l.Owner's at
// l.Epoch and not released; a lease that expired and was not taken over
// is renewed too. A write of the lease between the read and the
// conditioned write (a conflict) makes it read and judge the lease again.
func (x *TxIndex) Renew(ctx context.Context, l txindex.Lease, ttl time.Duration) (txindex.Lease, bool, error) {
	if err := checkLease(l.Shard, l.Owner, ttl); err != nil {
		return txindex.Lease{}, false, fmt.Errorf("renew lease of shard %q: %w", l.Shard, err)
	}
	for range maxLeaseRounds {
		cur, found, err := x.readLease(ctx, l.Shard)
		if err != nil {
			return txindex.Lease{}, false, fmt.Errorf("renew lease of shard %q: %w", l.Shard, err)
		}
		if !found || !cur.heldBy(l) {
			return txindex.Lease{}, false, nil
		}
		next := cur.Lease
		next.Expires = leaseEnd(time.Now().UTC().Truncate(time.Millisecond), ttl)
		won, err := x.putLease(ctx, next, &cur)
		if err != nil {
			return txindex.Lease{}, false, fmt.Errorf("renew lease of shard %q: %w", l.Shard, err)
		}
		if won {
			return next, true, nil
		}
	}
	return txindex.Lease{}, false, fmt.Errorf("renew lease of shard %q: still changing concurrently after %d rounds", l.Shard, maxLeaseRounds)
}

// Release marks l's lease released when the shard is still l.Owner's at
// l.Epoch, keeping its owner, epoch and expiry; otherwise there is nothing
// to release and it returns nil. A conflict makes it read the lease again,
// as Renew does.
func (x *TxIndex) Release(ctx context.Context, l txindex.Lease) error {
	if l.Shard == "" || len(l.Shard) > maxIDBytes {
		return fmt.Errorf("release lease of shard %q: invalid shard", l.Shard)
	}
	for range maxLeaseRounds {
		cur, found, err := x.readLease(ctx, l.Shard)
		if err != nil {
			return fmt.Errorf("release lease of shard %q: %w", l.Shard, err)
		}
		if !found || !cur.heldBy(l) {
			return nil
		}
		next := cur.Lease
		next.Released = true
		won, err := x.putLease(ctx, next, &cur)
		if err != nil {
			return fmt.Errorf("release lease of shard %q: %w", l.Shard, err)
		}
		if won {
			return nil
		}
	}
	return fmt.Errorf("release lease of shard %q: still changing concurrently after %d rounds", l.Shard, maxLeaseRounds)
}

// Leases returns every lease of the leases index, by shard: one search of
// up to maxPage documents, after a refresh (see Refresh). There is a lease
// per loader shard ever claimed, a few hundred at most.
func (x *TxIndex) Leases(ctx context.Context) ([]txindex.Lease, error) {
	if err := x.c.readRefresh(ctx, x.c.ownersIndex); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	body, err := json.Marshal(map[string]any{
		"size":             maxPage,
		"track_total_hits": false,
		"query":            map[string]any{"match_all": map[string]any{}},
		"sort":             []any{map[string]any{"shard": "asc"}},
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	var res struct {
		Hits struct {
			Hits []struct {
				Source leaseDoc `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	req := esapi.SearchRequest{Index: []string{x.c.ownersIndex}, Body: bytes.NewReader(body), FilterPath: []string{"hits.hits._source"}}
	if err := x.c.do(ctx, req, &res); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	out := make([]txindex.Lease, 0, len(res.Hits.Hits))
	for _, h := range res.Hits.Hits {
		out = append(out, h.Source.Lease)
	}
	return out, nil
}

// Waiting returns up to limit to-be-loaded records of shard after the key
// after, in key order: a search_after listing on key, after a refresh, as
// List.
func (x *TxIndex) Waiting(ctx context.Context, shard, after string, limit int) ([]txindex.Record, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := x.c.readRefresh(ctx, x.c.txIndex); err != nil {
		return nil, fmt.Errorf("list waiting records of shard %q: %w", shard, err)
	}
	var searchAfter []any
	if after != "" {
		searchAfter = []any{after}
	}
	query := map[string]any{"bool": map[string]any{"filter": []any{
		term("status", string(contracts.ToBeLoaded)),
		term("loader_shard", shard),
	}}}
	recs, err := x.search(ctx, query, []any{map[string]any{"key": "asc"}}, searchAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("list waiting records of shard %q: %w", shard, err)
	}
	return recs, nil
}

// heldBy reports whether the lease read is still l's: the same owner and
// epoch, not released.
func (s *storedLease) heldBy(l txindex.Lease) bool {
	return s.Owner == l.Owner && s.Epoch == l.Epoch && !s.Released
}

// checkLease checks the arguments of a claim or renewal.
func checkLease(shard, owner string, ttl time.Duration) error {
	switch {
	case shard == "" || len(shard) > maxIDBytes:
		return errors.New("invalid shard")
	case owner == "":
		return errors.New("empty owner")
	case ttl <= 0:
		return fmt.Errorf("time to live %v is not positive", ttl)
	}
	return nil
}

// leaseEnd is now+ttl at the millisecond precision Elasticsearch keeps.
func leaseEnd(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Truncate(time.Millisecond)
}

// readLease returns the lease of shard as it is now (realtime), and
// whether the shard was ever claimed.
func (x *TxIndex) readLease(ctx context.Context, shard string) (storedLease, bool, error) {
	docs, err := x.c.mget(ctx, x.c.ownersIndex, []string{shard})
	if err != nil {
		return storedLease{}, false, err
	}
	d, ok := docs[shard]
	if !ok {
		return storedLease{}, false, nil
	}
	s := storedLease{seqNo: d.SeqNo, primaryTerm: d.PrimaryTerm}
	if err := json.Unmarshal(d.Source, &s.leaseDoc); err != nil {
		return storedLease{}, false, fmt.Errorf("decode lease: %w", err)
	}
	return s, true, nil
}

// putLease writes l, with a create operation when prev is nil (the shard
// was never claimed) and otherwise with an index operation conditioned on
// prev's version, and reports whether it won. A conflict (409) is a write
// of another writer that came first, and not won, unless the request was
// sent again after an attempt that may have applied and the lease holds
// this write's id.
func (x *TxIndex) putLease(ctx context.Context, l txindex.Lease, prev *storedLease) (bool, error) {
	wid := newWriteID()
	src, err := json.Marshal(leaseDoc{Lease: l, Write: wid})
	if err != nil {
		return false, err
	}
	op := bulkOp{op: "create", action: bulkAction{Index: x.c.ownersIndex, ID: l.Shard}, source: src}
	if prev != nil {
		seq, term := prev.seqNo, prev.primaryTerm
		op.op, op.action.IfSeqNo, op.action.IfPrimaryTerm = "index", &seq, &term
	}
	items, maybeApplied, err := x.c.bulkTracked(ctx, []bulkOp{op})
	if err != nil {
		return false, err
	}
	switch it := items[0]; {
	case it.Status == http.StatusConflict:
		if !maybeApplied {
			return false, nil
		}
		cur, found, err := x.readLease(ctx, l.Shard)
		if err != nil {
			return false, fmt.Errorf("read the lease after a conflict: %w", err)
		}
		return found && cur.Write == wid, nil
	case it.err() != nil:
		return false, it.err()
	}
	return true, nil
}
