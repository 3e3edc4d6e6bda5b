package crawler

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/sitemap"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
	"github.com/gridcrawl/gridcrawl/services/internal/enqueue"
	"github.com/gridcrawl/gridcrawl/services/internal/scope"
)

// readSitemap settles a sitemap record (w.sitemap: txindex.SitemapProbe
// or txindex.SitemapFile) instead of parsing it as a page. Its entries become
// candidates at the sitemap's depth: the sitemaps of an index and of the
// robots.txt Sitemap: lines (carried by a probe) when their host is in
// scope, the URLs of a urlset when scope, filters and depth let a link
// through, with their lastmod. It ends in contracts.Sitemap with a summary
// (and what cut it) as its reason, or failed when a sitemap named by
// robots.txt or an index is missing or no sitemap. A probe that finds
// nothing (4xx, or a page that is no sitemap) is no failure. A redirect
// ends its chain as a page's does (chainEnd). Only backend failures are
// errors.
func (c *Crawler) readSitemap(ctx context.Context, crawlID string, sc *scope.Rules, w pageWork,
	handed map[contracts.AssetRef]handedResponse, spans spanSet) (*parsed, error) {
	p, kind := w.page, w.sitemap
	out := &parsed{page: p, key: w.key, final: contracts.Sitemap}
	base, err := url.Parse(p.URL)
	if err != nil {
		out.final, out.reason = contracts.Failed, "invalid url"
		return out, nil
	}
	// The robots.txt Sitemap: lines count whatever the probe finds.
	for _, s := range p.Sitemaps {
		out.addSitemap(sc, base, s, p.Depth)
	}
	ref := readRef(p, handed)
	status, header, _, body, release, err := c.load(ctx, ref, handed, spans, sitemap.MaxBytes+1)
	defer release()
	if rv := (*revisitError)(nil); errors.As(err, &rv) {
		// Loaders store sitemaps in full: a revisit here is no sitemap.
		err = &badRecordError{"read warc record: " + rv.Error()}
	}
	if err != nil {
		return loadFailed(out, ref, err)
	}
	out.loaded = int64(cap(body))
	switch {
	case status >= 300 && status < 400:
		loc := header.Get("Location")
		target, err := urlnorm.Resolve(base, loc)
		if loc == "" || err != nil {
			out.final, out.reason = contracts.Failed, "redirect without valid location"
			return out, nil
		}
		out.final, out.reason = contracts.Redirected, redirectedTo+target
		why, err := c.chainEnd(ctx, crawlID, p, w.referrer, target)
		if err != nil {
			return nil, err
		}
		if why != "" {
			out.final, out.reason = contracts.Failed, why
			return out, nil
		}
		if tu, err := url.Parse(target); err == nil && sc.InScope(tu) {
			out.links = append(out.links, enqueue.Candidate{URL: target, Depth: p.Depth, Hops: p.Hops + 1,
				Referrer: p.URL, Sitemap: txindex.SitemapFile})
		}
		return out, nil
	case status >= 500:
		// Only a probe's errors get here: the loader fails the others.
		out.final, out.reason = contracts.Failed, fmt.Sprintf("http %d", status)
		return out, nil
	case status < 200 || status >= 300:
		out.reason = fmt.Sprintf("no sitemap at this address (http %d)", status)
		return out, nil
	}
	res, err := sitemap.Parse(body, p.Truncated)
	if err != nil {
		out.reason = "not a sitemap: " + err.Error()
		if kind != txindex.SitemapProbe {
			out.final = contracts.Failed
		}
		return out, nil
	}
	what := "sitemap"
	resolver, err := urlnorm.NewResolver(base)
	if err != nil {
		out.final, out.reason = contracts.Failed, "invalid url"
		return out, nil
	}
	for _, e := range res.Entries {
		if res.Index {
			out.addSitemap(sc, base, e.Loc, p.Depth)
			continue
		}
		u, err := resolver.Resolve(e.Loc)
		if err != nil {
			continue
		}
		lu, err := url.Parse(u)
		if err != nil {
			continue
		}
		if ok, _ := sc.Follow(lu, u, p.Depth, 0); ok {
			out.links = append(out.links, enqueue.Candidate{URL: u, Depth: p.Depth, Referrer: p.URL, Lastmod: e.Lastmod})
		}
	}
	if res.Index {
		what = "sitemap index"
	}
	out.reason = fmt.Sprintf("%s: %d entries, %d followed", what, len(res.Entries), len(out.links))
	if res.Cut != "" {
		out.reason += "; cut: " + res.Cut
	}
	return out, nil
}

// addSitemap adds the sitemap at raw (resolved against base) as a
// candidate when its host is in scope.
func (out *parsed) addSitemap(sc *scope.Rules, base *url.URL, raw string, depth int) {
	u, err := urlnorm.Resolve(base, raw)
	if err != nil {
		return
	}
	su, err := url.Parse(u)
	if err != nil || !sc.InScope(su) {
		return
	}
	out.links = append(out.links, enqueue.Candidate{URL: u, Depth: depth, Referrer: out.page.URL, Sitemap: txindex.SitemapFile})
}
