package crawler

import (
	"net/url"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/extract"
	"github.com/gridcrawl/gridcrawl/pkg/httpbody"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/yacydoc"
)

// PageText is what the index holds of a page as text: its document's
// title and text.
type PageText struct {
	Title, Text string
}

// TextOf returns the title and text the crawler indexes for the page
// fetched from pageURL whose response record block is response (status
// line, headers and body as received), or, for a rendered page, whose DOM
// after scripts is dom (nil: not rendered). It parses the page as parse
// does, with cfg's limits, and builds the document with yacydoc.Build, so
// that the text is the indexed document's. ok is false when the crawler
// indexes no text for the page: an unreadable record, not a 2xx response, no text-bearing media
// type, or a page that asks not to be indexed (meta robots or
// X-Robots-Tag noindex). A profile's index filter is not applied here.
func TextOf(cfg Config, pageURL string, response, dom []byte) (PageText, bool) {
	status, header, body, err := warc.ParseHTTPResponse(response)
	if err != nil || status < 200 || status >= 300 {
		return PageText{}, false // the crawler fails a page it cannot read
	}
	if dom != nil {
		body = dom
		header = header.Clone()
		header.Set("Content-Type", "text/html; charset=utf-8")
	} else if body, err = httpbody.Decode(header, body, cfg.MaxBodyBytes); err != nil {
		return PageText{}, false
	}
	u, err := url.Parse(pageURL)
	if err != nil {
		return PageText{}, false
	}
	ctype := header.Get("Content-Type")
	mt := extract.MediaType(ctype)
	res, text, err := extract.Page(mt, ctype, body, u, Limits(cfg, len(body)))
	if err != nil || !text {
		return PageText{}, false
	}
	robots, own := yacydoc.HeaderRobots(header)
	if res.NoIndex || own&contracts.RobotsHeaderNoIndex != 0 {
		return PageText{}, false
	}
	doc := yacydoc.Build(yacydoc.Page{URL: u, Fetched: contracts.CrawlerPage{URL: pageURL}, Header: header,
		BodyBytes: len(body), MediaType: mt, HeaderRobots: robots}, &res)
	return PageText{Title: doc.Title[0], Text: doc.Text}, true
}
