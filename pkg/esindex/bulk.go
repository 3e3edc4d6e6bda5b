package esindex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// maxBulkBytes bounds the body of one bulk request; larger batches are sent
// in several requests, well below Elasticsearch's default
// http.max_content_length of 100 MB.
const maxBulkBytes = 8 << 20

// maxMgetIDs bounds the ids of one mget request.
const maxMgetIDs = 1000

// bulkAction is the action line of one bulk operation.
type bulkAction struct {
	Index         string `json:"_index"`
	ID            string `json:"_id"`
	IfSeqNo       *int64 `json:"if_seq_no,omitempty"`
	IfPrimaryTerm *int64 `json:"if_primary_term,omitempty"`
	// RetryOnConflict is the retries of an update that met a concurrent
	// write of its document.
	RetryOnConflict int `json:"retry_on_conflict,omitempty"`
}

// bulkOp is one operation of a bulk request: op is "create", "index",
// "update" or "delete"; source is the document (the update's body for
// update), nil for delete.
type bulkOp struct {
	op     string
	action bulkAction
	source []byte
}

// bulkItem is the result of one bulk operation.
type bulkItem struct {
	Status int      `json:"status"`
	Error  *esError `json:"error"`
	// SeqNo and PrimaryTerm are set for successful writes.
	SeqNo       int64 `json:"_seq_no"`
	PrimaryTerm int64 `json:"_primary_term"`
}

// err returns the item's error, nil if it succeeded.
func (it bulkItem) err() error {
	if it.Status >= 200 && it.Status <= 299 {
		return nil
	}
	if it.Error == nil {
		return &StatusError{Status: it.Status}
	}
	return it.Error.statusError(it.Status)
}

// Retries of bulk operations that Elasticsearch rejected for load (429).
const (
	maxBulkRetries   = 6
	bulkRetryBackoff = 50 * time.Millisecond
)

// bulk sends ops and returns one item per op, in order. Elasticsearch runs
// the operations of one shard in the order of the request. Operations
// rejected for load (status 429, nothing written) are sent again with
// backoff, a few times; callers must not send two operations on one
// document, whose order a retry could swap.
func (c *Client) bulk(ctx context.Context, ops []bulkOp) ([]bulkItem, error) {
	items, _, err := c.bulkTracked(ctx, ops)
	return items, err
}

// bulkTracked is bulk, and also reports whether a request was sent more
// than once after an attempt that may have been applied (see retries.go):
// then an operation that cannot apply twice may fail with a conflict
// because its first application succeeded.
func (c *Client) bulkTracked(ctx context.Context, ops []bulkOp) ([]bulkItem, bool, error) {
	maybe := false
	items := make([]bulkItem, len(ops))
	todo := make([]int, len(ops))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; ; attempt++ {
		var retry []int
		for start := 0; start < len(todo); {
			body, n, err := bulkBody(ops, todo[start:])
			if err != nil {
				return nil, false, err
			}
			for _, i := range todo[start : start+n] {
				if ops[i].op == "update" {
					c.reads.add(ops[i].action.Index, ReadUpdate, 1)
				}
			}
			actx, a := withAttempts(ctx)
			res, err := c.sendBulk(actx, body, n)
			maybe = maybe || a.MaybeApplied()
			if err != nil {
				return nil, false, err
			}
			for j, it := range res {
				i := todo[start+j]
				items[i] = it
				if it.Status == http.StatusTooManyRequests && attempt < maxBulkRetries {
					retry = append(retry, i)
				}
			}
			start += n
		}
		if len(retry) == 0 {
			return items, maybe, nil
		}
		c.log.Warn("elasticsearch rejected bulk operations, retrying", "operations", len(retry), "attempt", attempt+1)
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(bulkRetryBackoff << attempt):
		}
		todo = retry
	}
}

// bulkBody returns the body of a bulk request with the first operations
// of ops that idx lists, as many as fit maxBulkBytes (at least one), and
// their number.
func bulkBody(ops []bulkOp, idx []int) ([]byte, int, error) {
	var body bytes.Buffer
	n := 0
	for _, i := range idx {
		op := ops[i]
		line, err := json.Marshal(map[string]bulkAction{op.op: op.action})
		if err != nil {
			return nil, 0, err
		}
		if n > 0 && body.Len()+len(line)+len(op.source)+2 > maxBulkBytes {
			break
		}
		body.Write(line)
		body.WriteByte('\n')
		if op.source != nil {
			body.Write(op.source)
			body.WriteByte('\n')
		}
		n++
	}
	return body.Bytes(), n, nil
}

// sendBulk sends one bulk request of n operations and returns their items.
func (c *Client) sendBulk(ctx context.Context, body []byte, n int) ([]bulkItem, error) {
	var res struct {
		Items []map[string]bulkItem `json:"items"`
	}
	req := esapi.BulkRequest{
		Body:                bytes.NewReader(body),
		Refresh:             c.writeRefresh(),
		WaitForActiveShards: c.waitShards,
		FilterPath:          []string{"items.*.status", "items.*.error", "items.*._seq_no", "items.*._primary_term"},
	}
	if err := c.do(ctx, req, &res); err != nil {
		return nil, err
	}
	if len(res.Items) != n {
		return nil, fmt.Errorf("bulk of %d operations answered %d items", n, len(res.Items))
	}
	items := make([]bulkItem, 0, n)
	for _, m := range res.Items {
		if len(m) != 1 {
			return nil, fmt.Errorf("bulk item with %d results", len(m))
		}
		for _, it := range m {
			items = append(items, it)
		}
	}
	return items, nil
}

// mgetDoc is one document of an mget answer.
type mgetDoc struct {
	ID          string          `json:"_id"`
	Found       bool            `json:"found"`
	SeqNo       int64           `json:"_seq_no"`
	PrimaryTerm int64           `json:"_primary_term"`
	Source      json.RawMessage `json:"_source"`
	Error       *esError        `json:"error"`
}

// idHit is a document an ids search found: its source and, when asked
// for, its sequence number and primary term.
type idHit struct {
	ID          string          `json:"_id"`
	SeqNo       int64           `json:"_seq_no"`
	PrimaryTerm int64           `json:"_primary_term"`
	Source      json.RawMessage `json:"_source"`
}

// searchIDs returns the documents of index with ids that the index's last
// refresh shows, with one ids search per maxMgetIDs ids: it loads only the
// documents that exist. With fields, the sources hold only those fields;
// with seqNo, the hits carry their sequence numbers and primary terms.
func (c *Client) searchIDs(ctx context.Context, index string, ids, fields []string, seqNo bool) ([]idHit, error) {
	var out []idHit
	ids = possibleIDs(ids)
	filter := []string{"hits.hits._id", "hits.hits._source"}
	if seqNo {
		filter = append(filter, "hits.hits._seq_no", "hits.hits._primary_term")
	}
	for start := 0; start < len(ids); start += maxMgetIDs {
		chunk := ids[start:min(start+maxMgetIDs, len(ids))]
		q := map[string]any{
			"size":             len(chunk),
			"track_total_hits": false,
			"query":            map[string]any{"ids": map[string]any{"values": chunk}},
		}
		if fields != nil {
			q["_source"] = fields
		}
		if seqNo {
			q["seq_no_primary_term"] = true
		}
		body, err := json.Marshal(q)
		if err != nil {
			return nil, err
		}
		var res struct {
			Hits struct {
				Hits []idHit `json:"hits"`
			} `json:"hits"`
		}
		req := esapi.SearchRequest{Index: []string{index}, Body: bytes.NewReader(body), FilterPath: filter}
		if err := c.do(ctx, req, &res); err != nil {
			return nil, err
		}
		out = append(out, res.Hits.Hits...)
	}
	return out, nil
}

// maxIDBytes is the longest document id Elasticsearch accepts.
const maxIDBytes = 512

// mget returns the documents of index with ids that exist, realtime, keyed
// by id.
func (c *Client) mget(ctx context.Context, index string, ids []string) (map[string]mgetDoc, error) {
	out := make(map[string]mgetDoc, len(ids))
	ids = possibleIDs(ids) // an id no document can have would fail the request
	for start := 0; start < len(ids); start += maxMgetIDs {
		chunk := ids[start:min(start+maxMgetIDs, len(ids))]
		body, err := json.Marshal(map[string][]string{"ids": chunk})
		if err != nil {
			return nil, err
		}
		var res struct {
			Docs []mgetDoc `json:"docs"`
		}
		c.reads.add(index, ReadRealtimeGet, len(chunk))
		if err := c.do(ctx, esapi.MgetRequest{Index: index, Body: bytes.NewReader(body)}, &res); err != nil {
			return nil, err
		}
		for _, d := range res.Docs {
			if d.Error != nil {
				return nil, fmt.Errorf("get %q: %w", d.ID, d.Error.statusError(500))
			}
			if d.Found {
				out[d.ID] = d
			}
		}
	}
	return out, nil
}
