package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/diskspace"
	"github.com/gridcrawl/gridcrawl/services/internal/enqueue"
)

// CheckProfile applies a submitted profile's defaults, validates it and
// normalizes its start URLs: every way of creating a crawl goes through it.
func CheckProfile(p contracts.Profile) (contracts.Profile, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return p, err
	}
	for i, s := range p.StartURLs {
		n, err := urlnorm.Normalize(s)
		if err != nil {
			return p, &contracts.FieldError{Field: fmt.Sprintf("start_urls[%d]", i), Reason: err.Error()}
		}
		p.StartURLs[i] = n
	}
	return p, nil
}

func newCrawlID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
}

// CreateCrawl stores a validated profile, writes its start URLs and publishes
// their loader contracts.
func (co *Coordinator) CreateCrawl(ctx context.Context, p contracts.Profile) (string, error) {
	if err := co.deps.Disk.Full(); err != nil {
		return "", fmt.Errorf("refuse new crawl: %w", err)
	}
	id := newCrawlID()
	if err := co.deps.Profiles.Put(ctx, profiles.Crawl{ID: id, Profile: p, State: contracts.CrawlRunning, CreatedAt: time.Now().UTC()}); err != nil {
		co.deps.Gate.Note(err)
		return "", fmt.Errorf("store crawl: %w", err)
	}
	var cands []enqueue.Candidate
	if p.SitemapsEnabled() {
		cands = sitemapProbes(p)
	}
	for _, u := range p.StartURLs {
		cands = append(cands, enqueue.Candidate{URL: u})
	}
	// A failure after the profile is stored leaves records for the recovery
	// sweep, never a crawl without records: start URLs are created first.
	if _, err := co.enq.Enqueue(ctx, id, p, cands); err != nil {
		return id, fmt.Errorf("enqueue start urls: %w", err)
	}
	co.log.Info("crawl created", "crawl_id", id, "start_urls", len(p.StartURLs))
	return id, nil
}

// sitemapProbes returns the /sitemap.xml of each start URL's origin, once
// each, as sitemap probes at the profile's sitemap depth. They go before
// the start URLs, so that a loader fetches a host's probe before its first
// page: the start URLs' contract is then settled with the first page and
// does not hold its shard's prefetch slot for another politeness delay
// while the page's links arrive. A start URL that is itself a probe is read
// as a sitemap. The loader hands each probe the Sitemap: lines of its
// origin's robots.txt.
func sitemapProbes(p contracts.Profile) []enqueue.Candidate {
	var out []enqueue.Candidate
	seen := map[string]bool{}
	for _, s := range p.StartURLs {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		probe, err := urlnorm.Normalize((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/sitemap.xml"}).String())
		if err != nil || seen[probe] {
			continue
		}
		seen[probe] = true
		out = append(out, enqueue.Candidate{URL: probe, Depth: p.SitemapDepth, Sitemap: txindex.SitemapProbe})
	}
	return out
}

// Status reads a crawl's state and counts its records and documents. It only
// reads: whether a crawl finished is decided by the work (CheckFinished).
func (co *Coordinator) Status(ctx context.Context, id string) (contracts.CrawlStatus, error) {
	c, err := co.deps.Profiles.Get(ctx, id)
	if err != nil {
		return contracts.CrawlStatus{}, err
	}
	return co.status(ctx, c)
}

func (co *Coordinator) status(ctx context.Context, c profiles.Crawl) (contracts.CrawlStatus, error) {
	// While a crawl runs its counts move anyway: they are read as of the
	// index's last refresh, so that a dashboard polling a large crawl costs
	// the transaction index no refreshes. Any other state is counted
	// exactly. The documents are counted exactly, after the records: a
	// document is stored before its page counts as indexed, so the status
	// never shows more pages indexed than documents.
	count := co.deps.Tx.Counts
	if c.State == contracts.CrawlRunning {
		count = co.deps.Tx.PeekCounts
	}
	counts, err := count(ctx, c.ID)
	if err != nil {
		return contracts.CrawlStatus{}, fmt.Errorf("count records: %w", err)
	}
	docs, err := co.deps.Search.Count(ctx, c.ID)
	if err != nil {
		return contracts.CrawlStatus{}, fmt.Errorf("count documents: %w", err)
	}
	st := contracts.CrawlStatus{V: contracts.Version, CrawlID: c.ID, State: c.State, Profile: c.Profile,
		Counts: map[contracts.Status]int64{}, Documents: docs, CreatedAt: c.CreatedAt, FinishedAt: c.FinishedAt}
	for _, s := range contracts.Statuses {
		n := counts[s]
		st.Counts[s] = n
		st.Total += n
		if s.Pending() {
			st.Pending += n
		}
	}
	st.Retired = counts[contracts.Retired]
	if c.State == contracts.CrawlCancelled && counts[contracts.Failed] > 0 {
		// Only a cancelled crawl has records failed for its cancellation:
		// no other state pays for the count.
		n, err := co.deps.Tx.CountMatching(ctx, c.ID, txindex.Filter{Status: contracts.Failed, Reason: contracts.ReasonCancelled})
		if err != nil {
			return contracts.CrawlStatus{}, fmt.Errorf("count cancelled records: %w", err)
		}
		st.Cancelled = n
	}
	if counts[contracts.Failed] > 0 || st.Pending == 0 {
		if err := co.outcome(ctx, c, &st); err != nil {
			return contracts.CrawlStatus{}, err
		}
	}
	if c.Profile.Recrawl != nil {
		if st.Recrawl, err = co.recrawlStatus(ctx, c); err != nil {
			return contracts.CrawlStatus{}, err
		}
	}
	return st, nil
}

// Cancel cancels a running or paused crawl and fails its pending records;
// cancelling a cancelled crawl fails what is still pending again. It fails
// with ErrConflict for a finished crawl, and with profiles.ErrNotFound.
func (co *Coordinator) Cancel(ctx context.Context, id string) error {
	if _, _, err := co.apply(ctx, id, verbCancel, "cancelled through the api"); err != nil {
		return err
	}
	return co.failPending(ctx, id)
}

// failPending fails the pending records of a cancelled crawl with reason
// contracts.ReasonCancelled: failed is terminal, so the crawl is out of
// work for every rule that reads statuses (OutOfWork, HCF, YaCy), and its
// status counts them apart (Cancelled).
func (co *Coordinator) failPending(ctx context.Context, id string) error {
	for _, s := range []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed, contracts.ToBeIndexed} {
		after := ""
		for {
			recs, err := co.deps.Tx.List(ctx, id, s, after, 1000)
			if err != nil {
				return fmt.Errorf("list %s records: %w", s, err)
			}
			if len(recs) == 0 {
				break
			}
			ts := make([]txindex.Transition, len(recs))
			for i, r := range recs {
				ts[i] = txindex.Transition{Key: r.Key, From: s, To: contracts.Failed, Error: contracts.ReasonCancelled}
			}
			if _, err := co.deps.Tx.Transition(ctx, ts); err != nil {
				return fmt.Errorf("fail cancelled records: %w", err)
			}
			after = recs[len(recs)-1].Key
		}
	}
	return nil
}

// Patch changes a crawl's politeness, budget, recrawl, render and dedupe
// settings mid-crawl. The new
// profile version reaches the loaders with the next contracts (and their
// profile caches within seconds); URLs parked as retired are put back to
// to-be-loaded and republished, so that the loaders re-evaluate their groups
// under the new budgets: those still over budget are retired again. An empty
// patch fails with ErrNothingToChange, a finished or cancelled crawl with
// ErrConflict; a patch that leaves the settings as they are changes nothing
// (no new version).
func (co *Coordinator) Patch(ctx context.Context, id string, patch contracts.ProfilePatch) (contracts.Profile, int, error) {
	if reflect.ValueOf(patch).IsZero() {
		return contracts.Profile{}, 0, ErrNothingToChange
	}
	// No finish check of this crawl between the new settings and the URLs
	// they put back to work.
	mu := co.crawlLock(id)
	mu.Lock()
	defer mu.Unlock()
	c, err := co.deps.Profiles.Get(ctx, id)
	if err != nil {
		return contracts.Profile{}, 0, err
	}
	if !slices.Contains(verbRules[verbPatch].accept, c.State) {
		return c.Profile, 0, fmt.Errorf("patch crawl %s: it is %s: %w", id, c.State, ErrConflict)
	}
	p := c.Profile
	if patch.Politeness != nil {
		p.Politeness = patch.Politeness.Apply(p.Politeness) // absent fields keep their value
	}
	if patch.Budget != nil {
		p.Budget = patch.Budget
	}
	if patch.Recrawl != nil {
		if p.Recrawl == nil {
			return c.Profile, 0, &contracts.FieldError{Field: "recrawl", Reason: "a one-shot crawl cannot become continuous: start a crawl with a recrawl schedule"}
		}
		p.Recrawl = patch.Recrawl
	}
	if patch.Render != nil {
		p.Render = sameOrNew(p.Render, *patch.Render, contracts.RenderNever)
	}
	if patch.RenderOverrides != nil {
		p.RenderOverrides = *patch.RenderOverrides
		if len(p.RenderOverrides) == 0 {
			p.RenderOverrides = nil // as a profile without them, so that clearing none is no change
		}
	}
	if patch.RenderRobots != nil {
		p.RenderRobots = sameOrNew(p.RenderRobots, *patch.RenderRobots, contracts.RenderRobotsPages)
	}
	if patch.Dedupe != nil {
		p.Dedupe = sameOrNew(p.Dedupe, *patch.Dedupe, contracts.DedupeCollection)
	}
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return c.Profile, 0, err
	}
	if reflect.DeepEqual(p, c.Profile) {
		return c.Profile, 0, nil // the settings are already these: no new version
	}
	p.Version++
	if err := co.deps.Profiles.SetProfile(ctx, id, p); err != nil {
		return c.Profile, 0, fmt.Errorf("store profile: %w", err)
	}
	n, err := co.unretire(ctx, id, p)
	if err != nil {
		return p, n, err
	}
	co.log.Info("crawl settings changed", "crawl_id", id, "version", p.Version, "changed", profileChanges(c.Profile, p), "unretired", n)
	return p, n, nil
}

// unretire moves the crawl's retired records back to to-be-loaded and
// publishes them.
func (co *Coordinator) unretire(ctx context.Context, id string, p contracts.Profile) (int, error) {
	n := 0
	for {
		recs, err := co.deps.Tx.List(ctx, id, contracts.Retired, "", 1000)
		if err != nil {
			return n, fmt.Errorf("list retired records: %w", err)
		}
		if len(recs) == 0 {
			return n, nil
		}
		ts := make([]txindex.Transition, len(recs))
		for i, r := range recs {
			ts[i] = txindex.Transition{Key: r.Key, From: contracts.Retired, To: contracts.ToBeLoaded}
		}
		applied, err := co.deps.Tx.Transition(ctx, ts)
		if err != nil {
			return n, fmt.Errorf("unretire records: %w", err)
		}
		var back []txindex.Record
		for i, r := range recs {
			if applied[i] {
				back = append(back, r)
			}
		}
		if err := co.enq.Publish(ctx, id, p, back); err != nil {
			return n, err
		}
		n += len(back)
	}
}

// sameOrNew returns the value a patch sets a setting to: cur when v means
// the same ("" and def both mean def), so that a patch which changes no
// setting makes no new version; else v.
func sameOrNew(cur, v, def string) string {
	if v == cur || (v == "" && cur == def) || (v == def && cur == "") {
		return cur
	}
	return v
}

// ErrNothingToChange is the error of an empty PATCH.
var ErrNothingToChange = errors.New("nothing to change: the patch sets none of " + patchFields())

// patchFields lists the JSON names of the fields of a profile patch.
func patchFields() string {
	t := reflect.TypeFor[contracts.ProfilePatch]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// SetPaused pauses a running crawl or resumes a paused one. Pausing a
// paused crawl and resuming a running one succeed without a change; a
// finished or cancelled crawl fails with ErrConflict. Resuming a crawl that
// was paused when the in-memory queues were rebuilt rebuilds its work now
// (RebuildQueues).
func (co *Coordinator) SetPaused(ctx context.Context, id string, paused bool) error {
	v := verbResume
	if paused {
		v = verbPause
	}
	now := time.Now()
	c, _, err := co.apply(ctx, id, v, string(v)+"d through the api")
	if err == nil && !paused {
		co.rebuildResumed(ctx, id, now)
		if c.State == contracts.CrawlPaused {
			co.resumeRepublish(id) // its parked URLs come due only after the loaders' paused delay
		}
	}
	return err
}

// profileChanges lists the settings that differ between two versions of a
// profile, as "json.path: old -> new", for the PATCH log line.
func profileChanges(old, new contracts.Profile) []string {
	a, b := flatten(old), flatten(new)
	delete(a, "version") // changes with every PATCH, logged apart
	delete(b, "version")
	var out []string
	for k := range b {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("%s: %s -> %s", k, orNull(a[k]), b[k]))
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, fmt.Sprintf("%s: %s -> null", k, a[k]))
		}
	}
	slices.Sort(out)
	return out
}

func orNull(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

// flatten maps each leaf of v's JSON form to its JSON text, by dotted path.
func flatten(v any) map[string]string {
	out := map[string]string{}
	b, err := json.Marshal(v)
	if err != nil {
		return out
	}
	var tree any
	if json.Unmarshal(b, &tree) != nil {
		return out
	}
	var walk func(prefix string, x any)
	walk = func(prefix string, x any) {
		if obj, ok := x.(map[string]any); ok && len(obj) > 0 {
			for k, v := range obj {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, v)
			}
			return
		}
		leaf, _ := json.Marshal(x)
		out[prefix] = string(leaf)
	}
	walk("", tree)
	return out
}

// Statuses returns the status of every crawl, as Status does.
func (co *Coordinator) Statuses(ctx context.Context) ([]contracts.CrawlStatus, error) {
	cs, err := co.deps.Profiles.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list crawls: %w", err)
	}
	out := make([]contracts.CrawlStatus, 0, len(cs))
	for _, c := range cs {
		st, err := co.status(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("status of crawl %s: %w", c.ID, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// DiskFull tells whether err, of creating a crawl, is the data directory's
// lack of space, and returns the message that says so.
func DiskFull(err error) (string, bool) {
	switch {
	case errors.Is(err, diskspace.ErrFull):
		return err.Error(), true
	case diskspace.IsFull(err):
		return "disk full: " + err.Error(), true
	}
	return "", false
}
