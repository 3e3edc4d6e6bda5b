package esindex

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
)

// Page sizes of HCF reads and deletes.
const (
	hcfBatchPage = 200
	hcfFPPage    = 1000
	hcfNamePage  = 1000
	// hcfIDRetries bounds how often a batch whose id exists already (made
	// by another process in the same millisecond) gets a new id.
	hcfIDRetries = 5
	// hcfRollbackTimeout bounds the undoing of a failed Add.
	hcfRollbackTimeout = 30 * time.Second
)

// HCF is the Hub Crawl Frontier (hcf.Store) in two indices,
// "<prefix>-hcf-fingerprints" and "<prefix>-hcf-batches", created on first
// use with strict mappings and auto-expanded replicas (0-1).
//
// A fingerprint is a document whose id is a SHA-256 of project, frontier,
// slot and fingerprint; Add dedupes with bulk create operations, which
// Elasticsearch refuses atomically for an id that exists. A batch is a
// document whose id is a hash of the slot and the batch id; its requests are
// kept as the JSON text the API serves, not indexed.
//
// Add writes the fingerprints with one bulk request and the batches of those
// that were new with a second. If the second fails, Add deletes what it
// wrote before returning the error, so a failed Add leaves nothing behind;
// only if the process dies between the two requests do fingerprints stay
// marked seen without their requests queued. Reads refresh the indices as
// the Client's Refresh policy says. Batch ids increase per slot across
// restarts: a store reads a slot's latest batch id before it first adds to
// the slot.
type HCF struct {
	c               *Client
	fpIndex, bIndex string
	fpRef, bRef     *refresher
	gen             *hcf.IDGen

	initMu sync.Mutex
	ready  bool // the indices exist

	// observeMu serialises the first reads of slots' latest batch ids.
	observeMu sync.Mutex
	mu        sync.Mutex
	observed  map[string]bool // keys of the slots whose latest batch id gen has seen
}

var _ hcf.Store = (*HCF)(nil)

// HCF returns a Hub Crawl Frontier on c's indices. Use one per process:
// its batch ids come from one clock.
func (c *Client) HCF() *HCF { return c.HCFClock(time.Now) }

// HCFClock is HCF with the clock that dates new batch ids, for tests that
// want known ids.
func (c *Client) HCFClock(now func() time.Time) *HCF {
	return c.newHCF(strings.TrimSuffix(c.txIndex, "-transactions")+"-hcf", now)
}

// newHCF returns an HCF on the indices "<name>-fingerprints" and
// "<name>-batches".
func (c *Client) newHCF(name string, now func() time.Time) *HCF {
	return &HCF{
		c:       c,
		fpIndex: name + "-fingerprints", bIndex: name + "-batches",
		fpRef: newRefresher(), bRef: newRefresher(),
		gen:      hcf.NewIDGen(now),
		observed: map[string]bool{},
	}
}

// IndexNames returns the names of the fingerprints and batches indices.
func (h *HCF) IndexNames() (fingerprints, batches string) { return h.fpIndex, h.bIndex }

// Close does nothing: the Client owns the connection.
func (h *HCF) Close() error { return nil }

var (
	storedJSON = map[string]any{"type": "keyword", "index": false, "doc_values": false}

	hcfFPMapping = map[string]any{
		"project":  keyword,
		"frontier": keyword,
		"slot":     keyword,
		// hcf.MaxFPBytes keeps every fingerprint below Lucene's term limit.
		"fp":    keyword,
		"fdata": storedJSON,
	}
	hcfBatchMapping = map[string]any{
		"project":  keyword,
		"frontier": keyword,
		"slot":     keyword,
		"bid":      keyword,
		// ms_seq is the batch id without its priority: the latest batch of
		// a slot, whatever its priority, has the greatest.
		"ms_seq":   keyword,
		"n":        integer,
		"requests": storedJSON,
	}
)

// init creates the indices once; a failure is retried by the next call.
func (h *HCF) init(ctx context.Context) error {
	h.initMu.Lock()
	defer h.initMu.Unlock()
	if h.ready {
		return nil
	}
	for _, ix := range []struct {
		name  string
		props map[string]any
	}{{h.fpIndex, hcfFPMapping}, {h.bIndex, hcfBatchMapping}} {
		if err := h.ensureIndex(ctx, ix.name, ix.props); err != nil {
			return err
		}
	}
	h.ready = true
	return nil
}

func (h *HCF) ensureIndex(ctx context.Context, name string, props map[string]any) error {
	mapping := map[string]any{"dynamic": "strict", "properties": props}
	body, err := json.Marshal(map[string]any{
		"settings": map[string]any{"index": map[string]any{
			"number_of_shards":     1,
			"auto_expand_replicas": "0-1",
		}},
		"mappings": mapping,
	})
	if err != nil {
		return fmt.Errorf("create index %q: %w", name, err)
	}
	err = h.c.do(ctx, esapi.IndicesCreateRequest{Index: name, Body: bytes.NewReader(body)}, nil)
	if err == nil {
		h.c.log.Info("created elasticsearch index", "index", name)
		return nil
	}
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Type != "resource_already_exists_exception" {
		return fmt.Errorf("create index %q: %w", name, err)
	}
	body, err = json.Marshal(mapping)
	if err != nil {
		return fmt.Errorf("put mapping of index %q: %w", name, err)
	}
	if err := h.c.do(ctx, esapi.IndicesPutMappingRequest{Index: []string{name}, Body: bytes.NewReader(body)}, nil); err != nil {
		return fmt.Errorf("put mapping of index %q: %w", name, err)
	}
	return nil
}

// DeleteIndices deletes both indices with everything in them. Absent
// indices are not an error. It is meant for tests.
func (h *HCF) DeleteIndices(ctx context.Context) error {
	ignore := true
	req := esapi.IndicesDeleteRequest{Index: []string{h.fpIndex, h.bIndex}, IgnoreUnavailable: &ignore}
	if err := h.c.do(ctx, req, nil); err != nil {
		return fmt.Errorf("delete indices %s, %s: %w", h.fpIndex, h.bIndex, err)
	}
	return nil
}

// refresh makes acknowledged writes to index visible to searches, when the
// Client's policy leaves that to readers.
func (h *HCF) refresh(ctx context.Context, index string) error {
	if h.c.refresh != RefreshOnRead {
		return nil
	}
	r := h.fpRef
	if index == h.bIndex {
		r = h.bRef
	}
	err := r.refresh(ctx, func(ctx context.Context) error {
		return h.c.do(ctx, esapi.IndicesRefreshRequest{Index: []string{index}}, nil)
	})
	if err != nil {
		return fmt.Errorf("refresh index %q: %w", index, err)
	}
	return nil
}

// hashParts returns the hex SHA-256 of parts, each prefixed by its length
// so that no two lists of parts hash alike.
func hashParts(n int, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:n])
}

// slotKey identifies a slot in document ids.
func slotKey(s hcf.Slot) string { return hashParts(16, s.Project, s.Frontier, s.Name) }

// fpDocID is the id of the fingerprint document of fp in slot.
func fpDocID(s hcf.Slot, fp string) string { return hashParts(32, s.Project, s.Frontier, s.Name, fp) }

// batchDocID is the id of the batch document of id in slot.
func batchDocID(s hcf.Slot, id string) string { return slotKey(s) + "-" + id }

// slotFilter is the query of the documents of one slot.
func slotFilter(s hcf.Slot) map[string]any {
	return map[string]any{"bool": map[string]any{"filter": []any{
		term("project", s.Project), term("frontier", s.Frontier), term("slot", s.Name),
	}}}
}

type hcfFPDoc struct {
	Project  string  `json:"project"`
	Frontier string  `json:"frontier"`
	Slot     string  `json:"slot"`
	FP       string  `json:"fp"`
	FData    *string `json:"fdata,omitempty"`
}

type hcfBatchDoc struct {
	Project  string `json:"project"`
	Frontier string `json:"frontier"`
	Slot     string `json:"slot"`
	BID      string `json:"bid"`
	MsSeq    string `json:"ms_seq"`
	N        int    `json:"n"`
	Requests string `json:"requests"`
}

// Add enqueues the requests whose fingerprints the slot has not seen; see
// HCF for what happens on failure.
func (h *HCF) Add(ctx context.Context, slot hcf.Slot, reqs []hcf.Request) (int, error) {
	if err := hcf.ValidateAll(slot, reqs); err != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, err)
	}
	uniq := hcf.Dedupe(reqs)
	if len(uniq) == 0 {
		return 0, nil
	}
	if err := h.init(ctx); err != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, err)
	}
	if err := h.observeSlot(ctx, slot); err != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, err)
	}
	ops := make([]bulkOp, len(uniq))
	for i, r := range uniq {
		doc := hcfFPDoc{Project: slot.Project, Frontier: slot.Frontier, Slot: slot.Name, FP: r.FP}
		if d := hcf.Data(r.FData); d != nil {
			s := string(d)
			doc.FData = &s
		}
		src, err := json.Marshal(doc)
		if err != nil {
			return 0, fmt.Errorf("add to hcf slot %q: %w", slot, err)
		}
		ops[i] = bulkOp{op: "create", action: bulkAction{Index: h.fpIndex, ID: fpDocID(slot, r.FP)}, source: src}
	}
	items, err := h.c.bulk(ctx, ops)
	if err != nil {
		// Some fingerprints may have been written; which is unknown.
		return 0, fmt.Errorf("add to hcf slot %q: write fingerprints (outcome unknown): %w", slot, err)
	}
	var fresh []hcf.Request
	var written []string // fingerprint documents this call created
	var itemErr error
	for i, it := range items {
		switch {
		case it.Status == http.StatusConflict:
		case it.err() != nil:
			itemErr = cmpErr(itemErr, fmt.Errorf("write fingerprint %q: %w", uniq[i].FP, it.err()))
		default:
			fresh = append(fresh, uniq[i])
			written = append(written, ops[i].action.ID)
		}
	}
	if itemErr != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, h.rollback(ctx, itemErr, written, nil))
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	batchIDs, err := h.writeBatches(ctx, slot, hcf.NewBatches(h.gen, fresh))
	if err != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, h.rollback(ctx, err, written, batchIDs))
	}
	return len(fresh), nil
}

// cmpErr keeps the first error.
func cmpErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// writeBatches creates the batch documents and returns the ids of those it
// created, also when it fails. A batch whose id exists gets a new one.
func (h *HCF) writeBatches(ctx context.Context, slot hcf.Slot, batches []hcf.Batch) ([]string, error) {
	var created []string
	todo := batches
	for attempt := 0; len(todo) > 0; attempt++ {
		ops := make([]bulkOp, len(todo))
		for i, b := range todo {
			src, err := json.Marshal(hcfBatchDoc{
				Project: slot.Project, Frontier: slot.Frontier, Slot: slot.Name,
				BID: b.ID, MsSeq: b.ID[2:], N: len(b.Requests),
				Requests: string(hcf.AppendRequests(nil, b.Requests)),
			})
			if err != nil {
				return created, err
			}
			ops[i] = bulkOp{op: "create", action: bulkAction{Index: h.bIndex, ID: batchDocID(slot, b.ID)}, source: src}
		}
		items, err := h.c.bulk(ctx, ops)
		if err != nil {
			// Which batches were written is unknown: roll all back.
			for _, op := range ops {
				created = append(created, op.action.ID)
			}
			return created, fmt.Errorf("write batches: %w", err)
		}
		var again []hcf.Batch
		for i, it := range items {
			switch {
			case it.Status == http.StatusConflict && attempt < hcfIDRetries:
				b := todo[i]
				p, _, _, _ := hcf.ParseBatchID(b.ID)
				h.gen.Observe(b.ID)
				b.ID = h.gen.Next(p)
				again = append(again, b)
			case it.err() != nil:
				return created, fmt.Errorf("write batch %q: %w", todo[i].ID, it.err())
			default:
				created = append(created, ops[i].action.ID)
			}
		}
		todo = again
	}
	return created, nil
}

// rollback deletes the fingerprint and batch documents a failed Add wrote
// and returns cause, joined with the rollback's own error.
func (h *HCF) rollback(ctx context.Context, cause error, fpIDs, batchIDs []string) error {
	if len(fpIDs) == 0 && len(batchIDs) == 0 {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hcfRollbackTimeout)
	defer cancel()
	ops := make([]bulkOp, 0, len(fpIDs)+len(batchIDs))
	for _, id := range batchIDs {
		ops = append(ops, bulkOp{op: "delete", action: bulkAction{Index: h.bIndex, ID: id}})
	}
	for _, id := range fpIDs {
		ops = append(ops, bulkOp{op: "delete", action: bulkAction{Index: h.fpIndex, ID: id}})
	}
	if err := h.deleteDocs(ctx, ops); err != nil {
		h.c.log.Error("hcf add rollback failed: fingerprints stay seen without queued requests", "err", err)
		return errors.Join(cause, fmt.Errorf("roll back: %w", err))
	}
	return cause
}

// deleteDocs runs delete operations; absent documents are not an error.
func (h *HCF) deleteDocs(ctx context.Context, ops []bulkOp) error {
	if len(ops) == 0 {
		return nil
	}
	items, err := h.c.bulk(ctx, ops)
	if err != nil {
		return err
	}
	for i, it := range items {
		if it.Status != http.StatusNotFound && it.err() != nil {
			return fmt.Errorf("delete %q: %w", ops[i].action.ID, it.err())
		}
	}
	return nil
}

// observeSlot makes new batch ids later than the slot's latest, the first
// time this store adds to the slot.
func (h *HCF) observeSlot(ctx context.Context, slot hcf.Slot) error {
	key := slotKey(slot)
	h.mu.Lock()
	done := h.observed[key]
	h.mu.Unlock()
	if done {
		return nil
	}
	h.observeMu.Lock()
	defer h.observeMu.Unlock()
	if err := h.refresh(ctx, h.bIndex); err != nil {
		return err
	}
	var last string
	err := h.search(ctx, h.bIndex, slotFilter(slot), []any{map[string]any{"ms_seq": "desc"}}, nil, 1, []string{"bid"},
		func(src json.RawMessage, _ []any) (bool, error) {
			var d struct {
				BID string `json:"bid"`
			}
			if err := json.Unmarshal(src, &d); err != nil {
				return false, err
			}
			last = d.BID
			return false, nil
		})
	if err != nil {
		return fmt.Errorf("read latest batch id: %w", err)
	}
	h.gen.Observe(last)
	h.mu.Lock()
	h.observed[key] = true
	h.mu.Unlock()
	return nil
}

// search calls fn with the _source and sort values of each hit of query in
// sort order, from searchAfter on, in pages of size, until fn returns false
// or the hits end.
func (h *HCF) search(ctx context.Context, index string, query any, sort, searchAfter []any, size int, source []string,
	fn func(src json.RawMessage, sort []any) (bool, error)) error {
	for {
		req := map[string]any{
			"size":             size,
			"track_total_hits": false,
			"query":            query,
			"sort":             sort,
			"_source":          source,
		}
		if searchAfter != nil {
			req["search_after"] = searchAfter
		}
		body, err := json.Marshal(req)
		if err != nil {
			return err
		}
		var res struct {
			Hits struct {
				Hits []struct {
					Source json.RawMessage `json:"_source"`
					Sort   []any           `json:"sort"`
				} `json:"hits"`
			} `json:"hits"`
		}
		sreq := esapi.SearchRequest{
			Index:      []string{index},
			Body:       bytes.NewReader(body),
			FilterPath: []string{"hits.hits._source", "hits.hits.sort"},
		}
		if err := h.c.do(ctx, sreq, &res); err != nil {
			return err
		}
		for _, hit := range res.Hits.Hits {
			more, err := fn(hit.Source, hit.Sort)
			if err != nil || !more {
				return err
			}
		}
		if len(res.Hits.Hits) < size {
			return nil
		}
		searchAfter = res.Hits.Hits[len(res.Hits.Hits)-1].Sort
	}
}

// errStop is returned by search callbacks to carry an error of the
// caller's fn out unwrapped.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }

// Batches reads the slot's batches in id order, a page at a time.
func (h *HCF) Batches(ctx context.Context, slot hcf.Slot, mincount int, fn func(hcf.Batch) error) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	if err := h.init(ctx); err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	if err := h.refresh(ctx, h.bIndex); err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	total := 0
	err := h.search(ctx, h.bIndex, slotFilter(slot), []any{map[string]any{"bid": "asc"}}, nil, hcfBatchPage,
		[]string{"bid", "requests"}, func(src json.RawMessage, _ []any) (bool, error) {
			var d hcfBatchDoc
			if err := json.Unmarshal(src, &d); err != nil {
				return false, fmt.Errorf("decode batch: %w", err)
			}
			qs, err := hcf.DecodeRequests([]byte(d.Requests))
			if err != nil {
				return false, fmt.Errorf("batch %q: %w", d.BID, err)
			}
			if err := fn(hcf.Batch{ID: d.BID, Requests: qs}); err != nil {
				return false, errStop{err}
			}
			total += len(qs)
			return mincount <= 0 || total < mincount, nil
		})
	if es := (errStop{}); errors.As(err, &es) {
		return es.err
	}
	if err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	return nil
}

// DeleteBatches deletes the batches with the given ids with one bulk
// request.
func (h *HCF) DeleteBatches(ctx context.Context, slot hcf.Slot, ids []string) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
	}
	seen := map[string]bool{}
	var ops []bulkOp
	for _, id := range ids {
		if _, _, _, ok := hcf.ParseBatchID(id); !ok || seen[id] {
			continue
		}
		seen[id] = true
		ops = append(ops, bulkOp{op: "delete", action: bulkAction{Index: h.bIndex, ID: batchDocID(slot, id)}})
	}
	if len(ops) == 0 {
		return nil
	}
	if err := h.init(ctx); err != nil {
		return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
	}
	if err := h.deleteDocs(ctx, ops); err != nil {
		return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
	}
	return nil
}

// Fingerprints reads the slot's fingerprint set in byte order (Lucene
// sorts keywords by their UTF-8 bytes), a page at a time.
func (h *HCF) Fingerprints(ctx context.Context, slot hcf.Slot, fn func(hcf.Fingerprint) error) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("read hcf fingerprints of %q: %w", slot, err)
	}
	if err := h.init(ctx); err != nil {
		return fmt.Errorf("read hcf fingerprints of %q: %w", slot, err)
	}
	if err := h.refresh(ctx, h.fpIndex); err != nil {
		return fmt.Errorf("read hcf fingerprints of %q: %w", slot, err)
	}
	err := h.search(ctx, h.fpIndex, slotFilter(slot), []any{map[string]any{"fp": "asc"}}, nil, hcfFPPage,
		[]string{"fp", "fdata"}, func(src json.RawMessage, _ []any) (bool, error) {
			var d hcfFPDoc
			if err := json.Unmarshal(src, &d); err != nil {
				return false, fmt.Errorf("decode fingerprint: %w", err)
			}
			f := hcf.Fingerprint{FP: d.FP}
			if d.FData != nil {
				f.FData = json.RawMessage(*d.FData)
			}
			if err := fn(f); err != nil {
				return false, errStop{err}
			}
			return true, nil
		})
	if es := (errStop{}); errors.As(err, &es) {
		return es.err
	}
	if err != nil {
		return fmt.Errorf("read hcf fingerprints of %q: %w", slot, err)
	}
	return nil
}

// DeleteSlot deletes the slot's documents: it finds their ids with
// searches and deletes them with bulk requests, batches first, so that a
// failure half way leaves fingerprints (the slot stays listed, and a retry
// finishes the job).
func (h *HCF) DeleteSlot(ctx context.Context, slot hcf.Slot) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("delete hcf slot %q: %w", slot, err)
	}
	if err := h.init(ctx); err != nil {
		return fmt.Errorf("delete hcf slot %q: %w", slot, err)
	}
	for _, ix := range []struct {
		index, sortField string
		id               func(src json.RawMessage) (string, error)
	}{
		{h.bIndex, "bid", func(src json.RawMessage) (string, error) {
			var d hcfBatchDoc
			err := json.Unmarshal(src, &d)
			return batchDocID(slot, d.BID), err
		}},
		{h.fpIndex, "fp", func(src json.RawMessage) (string, error) {
			var d hcfFPDoc
			err := json.Unmarshal(src, &d)
			return fpDocID(slot, d.FP), err
		}},
	} {
		if err := h.refresh(ctx, ix.index); err != nil {
			return fmt.Errorf("delete hcf slot %q: %w", slot, err)
		}
		var ops []bulkOp
		flush := func() error {
			err := h.deleteDocs(ctx, ops)
			ops = ops[:0]
			return err
		}
		err := h.search(ctx, ix.index, slotFilter(slot), []any{map[string]any{ix.sortField: "asc"}}, nil, hcfFPPage,
			[]string{ix.sortField}, func(src json.RawMessage, _ []any) (bool, error) {
				id, err := ix.id(src)
				if err != nil {
					return false, err
				}
				ops = append(ops, bulkOp{op: "delete", action: bulkAction{Index: ix.index, ID: id}})
				if len(ops) == hcfFPPage {
					return true, flush()
				}
				return true, nil
			})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return fmt.Errorf("delete hcf slot %q: %w", slot, err)
		}
	}
	h.mu.Lock()
	delete(h.observed, slotKey(slot))
	h.mu.Unlock()
	return nil
}

// Frontiers returns the project's frontiers that have fingerprints.
func (h *HCF) Frontiers(ctx context.Context, project string) ([]string, error) {
	if err := hcf.ValidateName("project", project); err != nil {
		return nil, fmt.Errorf("list hcf frontiers of %q: %w", project, err)
	}
	out, err := h.names(ctx, "frontier", term("project", project))
	if err != nil {
		return nil, fmt.Errorf("list hcf frontiers of %q: %w", project, err)
	}
	return out, nil
}

// Slots returns the frontier's slots that have fingerprints.
func (h *HCF) Slots(ctx context.Context, project, frontier string) ([]string, error) {
	if err := (hcf.Slot{Project: project, Frontier: frontier, Name: "-"}).Validate(); err != nil {
		return nil, fmt.Errorf("list hcf slots of %q/%q: %w", project, frontier, err)
	}
	out, err := h.names(ctx, "slot", term("project", project), term("frontier", frontier))
	if err != nil {
		return nil, fmt.Errorf("list hcf slots of %q/%q: %w", project, frontier, err)
	}
	return out, nil
}

// names returns the distinct values of field among the fingerprints that
// match filters, sorted, with a paged composite aggregation.
func (h *HCF) names(ctx context.Context, field string, filters ...any) ([]string, error) {
	if err := h.init(ctx); err != nil {
		return nil, err
	}
	if err := h.refresh(ctx, h.fpIndex); err != nil {
		return nil, err
	}
	out := []string{}
	var after map[string]any
	for {
		comp := map[string]any{
			"size":    hcfNamePage,
			"sources": []any{map[string]any{"name": map[string]any{"terms": map[string]any{"field": field}}}},
		}
		if after != nil {
			comp["after"] = after
		}
		body, err := json.Marshal(map[string]any{
			"size":  0,
			"query": map[string]any{"bool": map[string]any{"filter": filters}},
			"aggs":  map[string]any{"names": map[string]any{"composite": comp}},
		})
		if err != nil {
			return nil, err
		}
		var res struct {
			Aggregations struct {
				Names struct {
					AfterKey map[string]any `json:"after_key"`
					Buckets  []struct {
						Key struct {
							Name string `json:"name"`
						} `json:"key"`
					} `json:"buckets"`
				} `json:"names"`
			} `json:"aggregations"`
		}
		req := esapi.SearchRequest{Index: []string{h.fpIndex}, Body: bytes.NewReader(body), FilterPath: []string{"aggregations"}}
		if err := h.c.do(ctx, req, &res); err != nil {
			return nil, err
		}
		for _, b := range res.Aggregations.Names.Buckets {
			out = append(out, b.Key.Name)
		}
		if len(res.Aggregations.Names.Buckets) < hcfNamePage || res.Aggregations.Names.AfterKey == nil {
			return out, nil
		}
		after = res.Aggregations.Names.AfterKey
	}
}
