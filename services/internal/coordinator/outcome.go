package coordinator

import (
	"context"
	"fmt"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// allowNetsVar is the loader's setting that allows private, loopback and
// link-local networks, named in the outcome of a crawl that was refused.
const allowNetsVar = "GRIDCRAWL_ALLOW_NETS"

// outcome fills st's excluded count and, when the crawl ran out of work
// without indexing a page, the outcome that says why: a crawl of a site on
// the user's own machine "finishes" with every start URL refused by the
// network guard, and must not look like a success.
func (co *Coordinator) outcome(ctx context.Context, c profiles.Crawl, st *contracts.CrawlStatus) error {
	if st.Counts[contracts.Failed] > 0 {
		n, err := co.deps.Tx.CountMatching(ctx, c.ID, txindex.Filter{Status: contracts.Failed, Reason: contracts.ReasonExcluded})
		if err != nil {
			return fmt.Errorf("count excluded records: %w", err)
		}
		st.Excluded = n
	}
	if !outOfWorkState(c) || st.Counts[contracts.Indexed] > 0 || st.Documents > 0 || st.Pending > 0 {
		return nil
	}
	var reasons []txindex.ReasonRow
	if st.Counts[contracts.Failed] > 0 {
		var err error
		if reasons, err = co.deps.Tx.FailureReasonsReport(ctx, c.ID, 1); err != nil {
			return fmt.Errorf("read the top failure reason: %w", err)
		}
	}
	recs, err := co.deps.Tx.GetMany(ctx, startKeys(c))
	if err != nil {
		return fmt.Errorf("read start urls: %w", err)
	}
	// A start URL that failed without a response was not fetched; one that
	// failed with one (a 404, a noindex page) was.
	refused, failed := 0, 0
	for _, r := range recs {
		if r.Status != contracts.Failed || r.HTTPStatus != 0 {
			continue
		}
		failed++
		if strings.HasPrefix(r.Error, netguard.ErrForbidden.Error()) {
			refused++
		}
	}
	n := len(c.Profile.StartURLs)
	top := topReason(reasons)
	switch {
	case n > 0 && refused == n:
		st.Outcome = &contracts.CrawlOutcome{Kind: contracts.OutcomeRefused, Summary: fmt.Sprintf(
			"nothing fetched: every start URL was refused (%s: private, loopback and link-local networks are not crawled unless allowed; set %s, e.g. %s=127.0.0.0/8, where the loader runs)",
			netguard.ErrForbidden, allowNetsVar, allowNetsVar)}
	case n > 0 && failed == n:
		st.Outcome = &contracts.CrawlOutcome{Kind: contracts.OutcomeNothingFetched, Summary: "nothing fetched: every start URL failed" + top}
	case st.Total > 0:
		st.Outcome = &contracts.CrawlOutcome{Kind: contracts.OutcomeNothingIndexed, Summary: "nothing indexed" + top}
	}
	return nil
}

// outOfWorkState reports whether c's state is one a crawl reaches by
// running out of work (or may have: a paused crawl with nothing pending).
func outOfWorkState(c profiles.Crawl) bool {
	switch c.State {
	case contracts.CrawlFinished, contracts.CrawlUpToDate, contracts.CrawlPaused:
		return true
	}
	return false
}

// startKeys returns the record keys of c's start URLs.
func startKeys(c profiles.Crawl) []string {
	keys := make([]string, len(c.Profile.StartURLs))
	for i, u := range c.Profile.StartURLs {
		keys[i] = txindex.Key(c.ID, u)
	}
	return keys
}

// topReason is ", most often: REASON (N URLs)" of the most common failure
// reason, or "" when there is none.
func topReason(rows []txindex.ReasonRow) string {
	if len(rows) == 0 {
		return ""
	}
	r := rows[0] // the report is by count, descending
	reason := r.Reason
	if reason == "" {
		reason = "no reason recorded"
	}
	if r.Count == 1 {
		return fmt.Sprintf(" (%s)", reason)
	}
	return fmt.Sprintf(", most often: %s (%d URLs)", reason, r.Count)
}
