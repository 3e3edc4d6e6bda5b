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
	// hcfBatchPage is in requests: the batches of a page may straddle it.
	hcfBatchPage = 1000
	hcfFPPage    = 1000
	hcfNamePage  = 1000
	// hcfDeleteIDs bounds the batch ids of one search of DeleteBatches.
	hcfDeleteIDs = 1000
	// hcfRollbackTimeout bounds the undoing of a failed Add.
	hcfRollbackTimeout = 30 * time.Second
)

// HCF is the Hub Crawl Frontier (hcf.Store) in one index,
// "<prefix>-hcf-fingerprints", created on first use with a strict mapping
// and auto-expanded replicas (0-1).
//
// A fingerprint is a document whose id is a SHA-256 of project, frontier,
// slot and fingerprint, and the fingerprint's document is also its
// request's place in the queue: it holds the batch id, the request's
// position in the batch, its qdata (kept as the JSON text the API serves,
// not indexed) and whether it is still queued. Add cuts the requests into
// batches first and then writes all their documents with bulk create
// operations, which Elasticsearch applies to each document atomically and
// refuses for an id that exists. So marking a fingerprint seen and queueing
// its request are one write: whenever the process dies, before, during or
// after the bulk request, each request of the call is either seen and
// queued or neither, and a client that replays a failed call queues the
// rest, each once. Batches reads the queued documents in batch order;
// DeleteBatches marks them dequeued and keeps them as fingerprints.
//
// Requests seen before, among the requests of one call, leave their share
// of a batch empty: a call of 150 requests of one priority, whose first 100
// were seen, makes one batch of 50 whose id is the second the call drew.
// Batches never hold more than hcf.MaxBatch requests, but two stores (two
// processes) that draw the same batch id for one slot in the same
// millisecond make one batch of both calls' requests.
//
// A failed Add deletes what it wrote before returning the error, unless
// the process dies first or Elasticsearch cannot be reached; then the
// requests it wrote stay seen and queued, and a replay of the call queues
// the others. Reads refresh the index as the Client's Refresh policy says.
// Batch ids increase per slot across restarts: a store reads a slot's
// latest batch id before it first adds to the slot.
//
// Indices of earlier versions kept batches in a second index,
// "<prefix>-hcf-batches": the first call of a store moves its batches into
// their fingerprints' documents and deletes it.
type HCF struct {
	c               *Client
	fpIndex, bIndex string // bIndex is the batches index of earlier versions
	fpRef           *refresher
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
		fpRef:    newRefresher(),
		gen:      hcf.NewIDGen(now),
		observed: map[string]bool{},
	}
}

// IndexName returns the name of the index.
func (h *HCF) IndexName() string { return h.fpIndex }

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
		// The request's batch: bid and ms_seq stay when the batch is
		// deleted, so that a slot's latest batch id is known; queued and
		// qdata go.
		"bid":    keyword,
		"ms_seq": keyword,
		"i":      integer,
		"queued": map[string]any{"type": "boolean"},
		"qdata":  storedJSON,
	}
	// hcfBatchMapping is the mapping of the batches index of earlier
	// versions, which init migrates.
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
	if err := h.ensureIndex(ctx, h.fpIndex, hcfFPMapping); err != nil {
		return err
	}
	if err := h.migrate(ctx); err != nil {
		return err
	}
	h.ready = true
	return nil
}

// migrate moves the batches of the index of earlier versions, if there is
// one, into their fingerprints' documents, a page at a time, and deletes
// that index. A migration cut short does the rest the next time: moving a
// batch again rewrites the same values.
func (h *HCF) migrate(ctx context.Context) error {
	res, err := esapi.IndicesExistsRequest{Index: []string{h.bIndex}}.Do(ctx, h.c.es)
	if err != nil {
		return fmt.Errorf("check index %q: %w", h.bIndex, err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return nil
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("check index %q: status %d", h.bIndex, res.StatusCode)
	}
	moved := 0
	for {
		if err := h.c.do(ctx, esapi.IndicesRefreshRequest{Index: []string{h.bIndex}}, nil); err != nil {
			return fmt.Errorf("migrate index %q: refresh: %w", h.bIndex, err)
		}
		var ops, dels []bulkOp
		err := h.search(ctx, h.bIndex, map[string]any{"match_all": map[string]any{}}, []any{map[string]any{"bid": "asc"}}, nil,
			hcfFPPage/hcf.MaxBatch, []string{"project", "frontier", "slot", "bid", "requests"},
			func(src json.RawMessage, _ []any) (bool, error) {
				var d hcfBatchDoc
				if err := json.Unmarshal(src, &d); err != nil {
					return false, fmt.Errorf("decode batch: %w", err)
				}
				qs, err := hcf.DecodeRequests([]byte(d.Requests))
				if err != nil {
					return false, fmt.Errorf("batch %q: %w", d.BID, err)
				}
				slot := hcf.Slot{Project: d.Project, Frontier: d.Frontier, Name: d.Slot}
				for i, q := range qs {
					doc := newFPDoc(slot, q.FP, nil)
					doc.setBatch(d.BID, i, q.QData)
					src, err := json.Marshal(map[string]any{"doc": doc, "doc_as_upsert": true})
					if err != nil {
						return false, err
					}
					ops = append(ops, bulkOp{op: "update", action: bulkAction{Index: h.fpIndex, ID: fpDocID(slot, q.FP)}, source: src})
				}
				dels = append(dels, bulkOp{op: "delete", action: bulkAction{Index: h.bIndex, ID: batchDocID(slot, d.BID)}})
				return len(dels) < hcfFPPage/hcf.MaxBatch, nil
			})
		if err != nil {
			return fmt.Errorf("migrate index %q: %w", h.bIndex, err)
		}
		if len(dels) == 0 {
			break
		}
		items, err := h.c.bulk(ctx, ops)
		if err != nil {
			return fmt.Errorf("migrate index %q: %w", h.bIndex, err)
		}
		for i, it := range items {
			if err := it.err(); err != nil {
				return fmt.Errorf("migrate index %q: move request to %q: %w", h.bIndex, ops[i].action.ID, err)
			}
		}
		if err := h.deleteDocs(ctx, dels); err != nil {
			return fmt.Errorf("migrate index %q: %w", h.bIndex, err)
		}
		moved += len(dels)
	}
	ignore := true
	if err := h.c.do(ctx, esapi.IndicesDeleteRequest{Index: []string{h.bIndex}, IgnoreUnavailable: &ignore}, nil); err != nil {
		return fmt.Errorf("delete index %q: %w", h.bIndex, err)
	}
	h.c.log.Info("moved hcf batches into the fingerprints index", "index", h.bIndex, "batches", moved)
	return nil
}

func (h *HCF) ensureIndex(ctx context.Context, name string, props map[string]any) error {
	mapping := map[string]any{"dynamic": "strict", "properties": props}
	settings := map[string]any{"number_of_shards": 1, "auto_expand_replicas": "0-1"}
	if h.c.replicas > 0 || h.c.updateReplicas {
		// Configured replicas (Options.Replicas) replace the former
		// default.
		settings = map[string]any{"number_of_shards": 1, "number_of_replicas": h.c.replicas}
	}
	body, err := json.Marshal(map[string]any{
		"settings": map[string]any{"index": settings},
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
	if err := h.c.checkSettings(ctx, name, 1); err != nil {
		return err
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

// DeleteIndices deletes the index, and that of earlier versions, with
// everything in them. Absent indices are not an error. It is meant for
// tests.
func (h *HCF) DeleteIndices(ctx context.Context) error {
	ignore := true
	req := esapi.IndicesDeleteRequest{Index: []string{h.fpIndex, h.bIndex}, IgnoreUnavailable: &ignore}
	if err := h.c.do(ctx, req, nil); err != nil {
		return fmt.Errorf("delete indices %s, %s: %w", h.fpIndex, h.bIndex, err)
	}
	return nil
}

// refresh makes acknowledged writes to the index visible to searches, when
// the Client's policy leaves that to readers.
func (h *HCF) refresh(ctx context.Context) error {
	index := h.fpIndex
	if h.c.refresh != RefreshOnRead {
		return nil
	}
	err := h.fpRef.refresh(ctx, func(ctx context.Context) error {
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

// batchDocID is the id of the batch document of id in slot, in the
// batches index of earlier versions.
func batchDocID(s hcf.Slot, id string) string { return slotKey(s) + "-" + id }

// slotFilter is the query of the documents of one slot.
func slotFilter(s hcf.Slot) map[string]any {
	return map[string]any{"bool": map[string]any{"filter": []any{
		term("project", s.Project), term("frontier", s.Frontier), term("slot", s.Name),
	}}}
}

// queuedFilter is the query of the queued requests of one slot.
func queuedFilter(s hcf.Slot, more ...any) map[string]any {
	f := []any{term("project", s.Project), term("frontier", s.Frontier), term("slot", s.Name),
		map[string]any{"term": map[string]any{"queued": true}}}
	return map[string]any{"bool": map[string]any{"filter": append(f, more...)}}
}

// hcfFPDoc is a fingerprint and, while Queued, its request in the queue.
type hcfFPDoc struct {
	Project  string  `json:"project"`
	Frontier string  `json:"frontier"`
	Slot     string  `json:"slot"`
	FP       string  `json:"fp"`
	FData    *string `json:"fdata,omitempty"`
	BID      string  `json:"bid,omitempty"`
	MsSeq    string  `json:"ms_seq,omitempty"`
	I        int     `json:"i"`
	Queued   bool    `json:"queued,omitempty"`
	QData    *string `json:"qdata,omitempty"`
}

// newFPDoc returns the document of fingerprint fp with fdata.
func newFPDoc(slot hcf.Slot, fp string, fdata json.RawMessage) hcfFPDoc {
	doc := hcfFPDoc{Project: slot.Project, Frontier: slot.Frontier, Slot: slot.Name, FP: fp}
	if d := hcf.Data(fdata); d != nil {
		s := string(d)
		doc.FData = &s
	}
	return doc
}

// setBatch queues the document's request at position i of batch bid.
func (d *hcfFPDoc) setBatch(bid string, i int, qdata json.RawMessage) {
	d.BID, d.MsSeq, d.I, d.Queued = bid, bid[2:], i, true
	if q := hcf.Data(qdata); q != nil {
		s := string(q)
		d.QData = &s
	}
}

// hcfDequeued is the update that takes a request out of the queue.
var hcfDequeued = []byte(`{"doc":{"queued":false,"qdata":null}}`)

// hcfBatchDoc is a batch in the batches index of earlier versions.
type hcfBatchDoc struct {
	Project  string `json:"project"`
	Frontier string `json:"frontier"`
	Slot     string `json:"slot"`
	BID      string `json:"bid"`
	MsSeq    string `json:"ms_seq"`
	N        int    `json:"n"`
	Requests string `json:"requests"`
}

// Add enqueues the requests whose fingerprints the slot has not seen with
// one bulk request (more for over 8 MiB); see HCF for what happens on
// failure.
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
	var fdata map[string]json.RawMessage // of the requests that have some
	for _, r := range uniq {
		if d := hcf.Data(r.FData); d != nil {
			if fdata == nil {
				fdata = map[string]json.RawMessage{}
			}
			fdata[r.FP] = d
		}
	}
	ops := make([]bulkOp, 0, len(uniq))
	for _, b := range hcf.NewBatches(h.gen, uniq) {
		for i, q := range b.Requests {
			doc := newFPDoc(slot, q.FP, fdata[q.FP])
			doc.setBatch(b.ID, i, q.QData)
			src, err := json.Marshal(doc)
			if err != nil {
				return 0, fmt.Errorf("add to hcf slot %q: %w", slot, err)
			}
			ops = append(ops, bulkOp{op: "create", action: bulkAction{Index: h.fpIndex, ID: fpDocID(slot, q.FP)}, source: src})
		}
	}
	items, err := h.c.bulk(ctx, ops)
	if err != nil {
		// Some requests may have been written, each seen and queued.
		return 0, fmt.Errorf("add to hcf slot %q: write requests (outcome unknown): %w", slot, err)
	}
	n := 0
	var written []string // documents this call created
	var itemErr error
	for i, it := range items {
		switch {
		case it.Status == http.StatusConflict:
		case it.err() != nil:
			itemErr = cmpErr(itemErr, fmt.Errorf("write request %q: %w", ops[i].action.ID, it.err()))
		default:
			n++
			written = append(written, ops[i].action.ID)
		}
	}
	if itemErr != nil {
		return 0, fmt.Errorf("add to hcf slot %q: %w", slot, h.rollback(ctx, itemErr, written))
	}
	return n, nil
}

// cmpErr keeps the first error.
func cmpErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// rollback deletes the documents a failed Add wrote and returns cause,
// joined with the rollback's own error.
func (h *HCF) rollback(ctx context.Context, cause error, ids []string) error {
	if len(ids) == 0 {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hcfRollbackTimeout)
	defer cancel()
	ops := make([]bulkOp, len(ids))
	for i, id := range ids {
		ops[i] = bulkOp{op: "delete", action: bulkAction{Index: h.fpIndex, ID: id}}
	}
	if err := h.deleteDocs(ctx, ops); err != nil {
		h.c.log.Error("hcf add rollback failed: some requests of a failed add stay queued", "err", err)
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
	if err := h.refresh(ctx); err != nil {
		return err
	}
	var last string
	err := h.search(ctx, h.fpIndex, slotFilter(slot), []any{map[string]any{"ms_seq": "desc"}}, nil, 1, []string{"bid"},
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

// Batches reads the slot's queued requests in batch order, a page at a
// time, and calls fn with each batch once its last request is read.
func (h *HCF) Batches(ctx context.Context, slot hcf.Slot, mincount int, fn func(hcf.Batch) error) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	if err := h.init(ctx); err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	if err := h.refresh(ctx); err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	total := 0
	var cur hcf.Batch
	// emit passes on cur and tells whether to read on.
	emit := func() (bool, error) {
		if len(cur.Requests) == 0 {
			return true, nil
		}
		if err := fn(cur); err != nil {
			return false, errStop{err}
		}
		total += len(cur.Requests)
		cur = hcf.Batch{}
		return mincount <= 0 || total < mincount, nil
	}
	more := true
	sort := []any{map[string]any{"bid": "asc"}, map[string]any{"i": "asc"}, map[string]any{"fp": "asc"}}
	err := h.search(ctx, h.fpIndex, queuedFilter(slot), sort, nil, hcfBatchPage,
		[]string{"bid", "fp", "qdata"}, func(src json.RawMessage, _ []any) (bool, error) {
			var d hcfFPDoc
			if err := json.Unmarshal(src, &d); err != nil {
				return false, fmt.Errorf("decode request: %w", err)
			}
			if d.BID != cur.ID {
				var err error
				if more, err = emit(); !more || err != nil {
					return false, err
				}
				cur.ID = d.BID
			}
			q := hcf.Queued{FP: d.FP}
			if d.QData != nil {
				q.QData = json.RawMessage(*d.QData)
			}
			cur.Requests = append(cur.Requests, q)
			return true, nil
		})
	if err == nil && more {
		_, err = emit()
	}
	if es := (errStop{}); errors.As(err, &es) {
		return es.err
	}
	if err != nil {
		return fmt.Errorf("read hcf slot %q: %w", slot, err)
	}
	return nil
}

// DeleteBatches takes the requests of the batches with the given ids out
// of the queue: it finds them with searches and updates them with bulk
// requests. Their documents stay, as fingerprints.
func (h *HCF) DeleteBatches(ctx context.Context, slot hcf.Slot, ids []string) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
	}
	seen := map[string]bool{}
	var valid []string
	for _, id := range ids {
		if _, _, _, ok := hcf.ParseBatchID(id); !ok || seen[id] {
			continue
		}
		seen[id] = true
		valid = append(valid, id)
	}
	if len(valid) == 0 {
		return nil
	}
	if err := h.init(ctx); err != nil {
		return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
	}
	// No refresh: a batch id is known only from a search that found its
	// requests, so they are visible already. A request dequeued by an
	// earlier call but not refreshed yet is found again, and its update
	// is a no-op.
	var ops []bulkOp
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		items, err := h.c.bulk(ctx, ops)
		if err != nil {
			return err
		}
		for i, it := range items {
			// A document deleted since (DeleteSlot) is not an error.
			if it.Status != http.StatusNotFound && it.err() != nil {
				return fmt.Errorf("dequeue %q: %w", ops[i].action.ID, it.err())
			}
		}
		ops = ops[:0]
		return nil
	}
	for start := 0; start < len(valid); start += hcfDeleteIDs {
		chunk := valid[start:min(start+hcfDeleteIDs, len(valid))]
		in := map[string]any{"terms": map[string]any{"bid": chunk}}
		err := h.search(ctx, h.fpIndex, queuedFilter(slot, in), []any{map[string]any{"fp": "asc"}}, nil, hcfFPPage,
			[]string{"fp"}, func(src json.RawMessage, _ []any) (bool, error) {
				var d hcfFPDoc
				if err := json.Unmarshal(src, &d); err != nil {
					return false, fmt.Errorf("decode request: %w", err)
				}
				ops = append(ops, bulkOp{op: "update", action: bulkAction{Index: h.fpIndex, ID: fpDocID(slot, d.FP)}, source: hcfDequeued})
				if len(ops) == hcfFPPage {
					return true, flush()
				}
				return true, nil
			})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return fmt.Errorf("delete hcf batches of %q: %w", slot, err)
		}
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
	if err := h.refresh(ctx); err != nil {
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
// searches and deletes them with bulk requests, so that a failure half way
// leaves part of the slot (which stays listed, and a retry finishes the
// job).
func (h *HCF) DeleteSlot(ctx context.Context, slot hcf.Slot) error {
	if err := slot.Validate(); err != nil {
		return fmt.Errorf("delete hcf slot %q: %w", slot, err)
	}
	if err := h.init(ctx); err != nil {
		return fmt.Errorf("delete hcf slot %q: %w", slot, err)
	}
	if err := h.refresh(ctx); err != nil {
		return fmt.Errorf("delete hcf slot %q: %w", slot, err)
	}
	var ops []bulkOp
	flush := func() error {
		err := h.deleteDocs(ctx, ops)
		ops = ops[:0]
		return err
	}
	err := h.search(ctx, h.fpIndex, slotFilter(slot), []any{map[string]any{"fp": "asc"}}, nil, hcfFPPage,
		[]string{"fp"}, func(src json.RawMessage, _ []any) (bool, error) {
			var d hcfFPDoc
			if err := json.Unmarshal(src, &d); err != nil {
				return false, err
			}
			ops = append(ops, bulkOp{op: "delete", action: bulkAction{Index: h.fpIndex, ID: fpDocID(slot, d.FP)}})
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
	if err := h.refresh(ctx); err != nil {
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
