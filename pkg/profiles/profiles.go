// Package profiles defines the store of crawls: each accepted profile with
// its crawl id and state.
package profiles

import (
	"context"
	"errors"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("crawl not found")
	ErrExists   = errors.New("crawl already exists")
	// ErrConflict is returned by Transition when the crawl is not in the
	// state the transition starts from (another writer came first).
	ErrConflict = errors.New("crawl state changed")
)

// Crawl is one stored crawl.
type Crawl struct {
	ID        string               `json:"crawl_id"`
	Profile   contracts.Profile    `json:"profile"`
	State     contracts.CrawlState `json:"state"`
	CreatedAt time.Time            `json:"created_at"`
	// FinishedAt is when the crawl became finished or cancelled; nil in the
	// other states.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Store keeps crawls. Put of an existing id fails with ErrExists; the state
// changes only through Transition, the profile through SetProfile. Every
// returned write is durable and seen by every following Get.
type Store interface {
	Put(ctx context.Context, c Crawl) error
	Get(ctx context.Context, id string) (Crawl, error)
	// List returns all crawls, newest first.
	List(ctx context.Context) ([]Crawl, error)
	// Transition changes the state of crawl id from from to to, atomically
	// with the check (compare-and-set): when the stored state is not from it
	// changes nothing and fails with ErrConflict, when the crawl is absent
	// with ErrNotFound. FinishedAt becomes at when to is finished or
	// cancelled, and nil otherwise. Concurrent Transitions of one crawl from
	// the same state: exactly one succeeds.
	Transition(ctx context.Context, id string, from, to contracts.CrawlState, at time.Time) error
	// SetProfile replaces a crawl's profile (settings changed mid-crawl);
	// ErrNotFound if absent.
	SetProfile(ctx context.Context, id string, p contracts.Profile) error
	Close() error
}
