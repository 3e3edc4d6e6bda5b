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
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// Profiles is the crawl store (profiles.Store) in the index
// "<prefix>-profiles", one document per crawl with the crawl id as document
// id. The profile itself is stored, not indexed.
type Profiles struct {
	c *Client
}

var _ profiles.Store = (*Profiles)(nil)

// Put stores a new crawl with op_type create, or fails with
// profiles.ErrExists. A conflict after the request was sent again (see
// retries.go) is this Put's own first application when the crawl stored
// is byte for byte the one sent.
func (p *Profiles) Put(ctx context.Context, c profiles.Crawl) error {
	if c.ID == "" {
		return errors.New("put crawl: empty id")
	}
	src, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("put crawl %q: %w", c.ID, err)
	}
	req := esapi.IndexRequest{
		Index:               p.c.profilesIndex,
		DocumentID:          c.ID,
		Body:                bytes.NewReader(src),
		OpType:              "create",
		Refresh:             p.c.writeRefresh(),
		WaitForActiveShards: p.c.waitShards,
	}
	actx, a := withAttempts(ctx)
	if err := p.c.do(actx, req, nil); err != nil {
		if isStatus(err, http.StatusConflict) {
			if a.MaybeApplied() && p.stored(ctx, c.ID, src) {
				return nil
			}
			return fmt.Errorf("put crawl %q: %w", c.ID, profiles.ErrExists)
		}
		return fmt.Errorf("put crawl %q: %w", c.ID, err)
	}
	return nil
}

// stored reports whether the crawl id is stored with exactly the source
// src: a write sent again found its own first application.
func (p *Profiles) stored(ctx context.Context, id string, src []byte) bool {
	_, d, err := p.get(ctx, id)
	return err == nil && bytes.Equal(d.Source, src)
}

// Get returns the crawl with id, or profiles.ErrNotFound. It is realtime.
func (p *Profiles) Get(ctx context.Context, id string) (profiles.Crawl, error) {
	c, _, err := p.get(ctx, id)
	if err != nil {
		return profiles.Crawl{}, fmt.Errorf("get crawl %q: %w", id, err)
	}
	return c, nil
}

// get returns the crawl with id and its mget document (for the sequence
// number), or profiles.ErrNotFound.
func (p *Profiles) get(ctx context.Context, id string) (profiles.Crawl, mgetDoc, error) {
	if id == "" {
		return profiles.Crawl{}, mgetDoc{}, profiles.ErrNotFound
	}
	docs, err := p.c.mget(ctx, p.c.profilesIndex, []string{id})
	if err != nil {
		return profiles.Crawl{}, mgetDoc{}, err
	}
	d, ok := docs[id]
	if !ok {
		return profiles.Crawl{}, mgetDoc{}, profiles.ErrNotFound
	}
	var c profiles.Crawl
	if err := json.Unmarshal(d.Source, &c); err != nil {
		return profiles.Crawl{}, mgetDoc{}, fmt.Errorf("decode: %w", err)
	}
	return c, d, nil
}

// listPage is the page size of List's searches.
const listPage = 1000

// List returns all crawls, newest first (by creation time, then id
// descending).
func (p *Profiles) List(ctx context.Context) ([]profiles.Crawl, error) {
	if err := p.c.readRefresh(ctx, p.c.profilesIndex); err != nil {
		return nil, fmt.Errorf("list crawls: %w", err)
	}
	var out []profiles.Crawl
	var searchAfter []any
	for {
		req := map[string]any{
			"size":             listPage,
			"track_total_hits": false,
			"query":            map[string]any{"match_all": map[string]any{}},
			"sort":             []any{map[string]any{"created_at": "desc"}, map[string]any{"crawl_id": "desc"}},
		}
		if searchAfter != nil {
			req["search_after"] = searchAfter
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("list crawls: %w", err)
		}
		var res struct {
			Hits struct {
				Hits []struct {
					Source profiles.Crawl `json:"_source"`
					Sort   []any          `json:"sort"`
				} `json:"hits"`
			} `json:"hits"`
		}
		sreq := esapi.SearchRequest{
			Index:      []string{p.c.profilesIndex},
			Body:       bytes.NewReader(body),
			FilterPath: []string{"hits.hits._source", "hits.hits.sort"},
		}
		if err := p.c.do(ctx, sreq, &res); err != nil {
			return nil, fmt.Errorf("list crawls: %w", err)
		}
		for _, h := range res.Hits.Hits {
			out = append(out, h.Source)
		}
		if len(res.Hits.Hits) < listPage {
			return out, nil
		}
		searchAfter = res.Hits.Hits[len(res.Hits.Hits)-1].Sort
	}
}

// Transition changes crawl id's state from from to to, or fails with
// profiles.ErrConflict (the crawl is in another state) or
// profiles.ErrNotFound. The check and the write are one compare-and-set: the
// crawl is written back conditioned on the sequence number and primary term
// it was read with, and read again when another writer came first.
func (p *Profiles) Transition(ctx context.Context, id string, from, to contracts.CrawlState, at time.Time) error {
	var finished *time.Time
	if to == contracts.CrawlFinished || to == contracts.CrawlCancelled {
		finished = &at
	}
	return p.update(ctx, "change state", id, func(c *profiles.Crawl) error {
		if c.State != from {
			return fmt.Errorf("from %s to %s: it is %s: %w", from, to, c.State, profiles.ErrConflict)
		}
		c.State, c.FinishedAt = to, finished
		return nil
	})
}

// SetProfile replaces the profile of crawl id, with the same optimistic
// concurrency as Transition.
func (p *Profiles) SetProfile(ctx context.Context, id string, prof contracts.Profile) error {
	return p.update(ctx, "set profile", id, func(c *profiles.Crawl) error { c.Profile = prof; return nil })
}

// update applies change to crawl id with get and a conditional index,
// retrying when the crawl changed concurrently. An error of change is
// returned without writing. A conflict after the request was sent again is
// the write's own first application when the crawl stored is byte for byte
// the one sent.
func (p *Profiles) update(ctx context.Context, action, id string, change func(*profiles.Crawl) error) error {
	for attempt := 0; ; attempt++ {
		if attempt == maxTransitionRounds {
			return fmt.Errorf("%s of crawl %q: still changing concurrently after %d attempts", action, id, attempt)
		}
		c, d, err := p.get(ctx, id)
		if err != nil {
			return fmt.Errorf("%s of crawl %q: %w", action, id, err)
		}
		if err := change(&c); err != nil {
			return fmt.Errorf("%s of crawl %q: %w", action, id, err)
		}
		src, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("%s of crawl %q: %w", action, id, err)
		}
		seq, term := int(d.SeqNo), int(d.PrimaryTerm)
		req := esapi.IndexRequest{
			Index:               p.c.profilesIndex,
			DocumentID:          id,
			Body:                bytes.NewReader(src),
			IfSeqNo:             &seq,
			IfPrimaryTerm:       &term,
			Refresh:             p.c.writeRefresh(),
			WaitForActiveShards: p.c.waitShards,
		}
		actx, a := withAttempts(ctx)
		err = p.c.do(actx, req, nil)
		if err == nil {
			return nil
		}
		if !isStatus(err, http.StatusConflict) {
			return fmt.Errorf("%s of crawl %q: %w", action, id, err)
		}
		if a.MaybeApplied() && p.stored(ctx, id, src) {
			return nil // the first attempt applied
		}
	}
}

// Close does nothing: the Client owns the connection.
func (p *Profiles) Close() error { return nil }
