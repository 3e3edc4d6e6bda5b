package crawler

import (
	"context"
	"fmt"
	"strings"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// redirectedTo starts the reason of a redirected record; the target
// follows.
const redirectedTo = "to "

// chainEnd returns why the redirect of page p (whose record names referrer)
// to target ends its redirect chain, or "" when the target is followed
// like any other. A chain ends on the hop whose redirect is not followed:
// that record, still to-be-parsed, ends failed with the reason instead of
// redirected, so that every chain ends in a terminal record that says why,
// and no record is made for a URL that was never requested (it may be
// linked from elsewhere and crawled then). The reasons:
//
//   - "redirect loop: back to URL after N hops" ("1 hop"): target's redirects lead
//     back to p, or target is p itself or a URL whose redirects led to p;
//     N is the number of redirects of the loop;
//   - "too many redirects (M)": following target would make the chain
//     longer than Config.MaxRedirects (M) redirects.
//
// Only a failed read of the transaction index is an error.
func (c *Crawler) chainEnd(ctx context.Context, crawlID string, p contracts.CrawlerPage, referrer, target string) (string, error) {
	n, err := c.loopBack(ctx, crawlID, p, referrer, target)
	if err != nil {
		return "", err
	}
	switch {
	case n > 0:
		hops := "hops"
		if n == 1 {
			hops = "hop"
		}
		return fmt.Sprintf("redirect loop: back to %s after %d %s", target, n, hops), nil
	case p.Hops+1 > c.cfg.MaxRedirects:
		return fmt.Sprintf("too many redirects (%d)", c.cfg.MaxRedirects), nil
	}
	return "", nil
}

// loopBack returns the number of redirects of the loop that the redirect
// of p to target closes, or 0 when it closes none. A target with no record
// closes none (every URL of a chain has one). Otherwise the loop is looked
// for both ways through the records, at most MaxRedirects+1 reads each:
// forward along the redirected records' targets from target (a chain that
// entered the loop at another URL created its records), and back along the
// referrers from p, each record at Hops > 0 having been created by its
// referrer's redirect (a redirected record's target is written only once
// it is parsed, while a referrer is written with the record).
func (c *Crawler) loopBack(ctx context.Context, crawlID string, p contracts.CrawlerPage, referrer, target string) (int, error) {
	if target == p.URL {
		return 1, nil
	}
	get := func(u string) (txindex.Record, bool, error) {
		key := txindex.Key(crawlID, u)
		got, err := c.deps.Tx.GetMany(ctx, []string{key})
		if err != nil {
			return txindex.Record{}, false, fmt.Errorf("read the redirect chain: %w", err)
		}
		r, ok := got[key]
		return r, ok, nil
	}
	t, ok, err := get(target)
	if err != nil || !ok {
		return 0, err
	}
	limit := c.cfg.MaxRedirects + 1
	// Forward: each redirected record names its target in its reason.
	for n, at := 2, t; n <= limit+1 && at.Status == contracts.Redirected; n++ {
		next, ok := strings.CutPrefix(at.Error, redirectedTo)
		if !ok {
			break
		}
		if next == p.URL {
			return n, nil
		}
		if at, ok, err = get(next); err != nil {
			return 0, err
		} else if !ok {
			break
		}
	}
	// Back: the referrer of a record at Hops > 0 redirected to it.
	hops := p.Hops
	for n := 2; n <= limit+1 && hops > 0 && referrer != ""; n++ {
		if referrer == target {
			return n, nil
		}
		r, ok, err := get(referrer)
		if err != nil || !ok {
			return 0, err
		}
		hops, referrer = r.Hops, r.Referrer
	}
	return 0, nil
}
