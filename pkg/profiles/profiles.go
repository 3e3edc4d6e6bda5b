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
)

// Crawl is one stored crawl.
type Crawl struct {
	ID         string               `json:"crawl_id"`
	Profile    contracts.Profile    `json:"profile"`
	State      contracts.CrawlState `json:"state"`
	CreatedAt  time.Time            `json:"created_at"`
	FinishedAt *time.Time           `json:"finished_at,omitempty"`
}

// Store keeps crawls. Put of an existing id fails with ErrExists; updates go
// through SetState. Every returned write is durable.
type Store interface {
	Put(ctx context.Context, c Crawl) error
	Get(ctx context.Context, id string) (Crawl, error)
	// List returns all crawls, newest first.
	List(ctx context.Context) ([]Crawl, error)
	// SetState changes a crawl's state and finished time; ErrNotFound if absent.
	SetState(ctx context.Context, id string, state contracts.CrawlState, finishedAt *time.Time) error
	// SetProfile replaces a crawl's profile (settings changed mid-crawl);
	// ErrNotFound if absent.
	SetProfile(ctx context.Context, id string, p contracts.Profile) error
	Close() error
}
