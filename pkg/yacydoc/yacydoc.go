// Package yacydoc builds YaCy web documents (contracts.Document) from a
// fetched page and its extraction: the field values of YaCy Grid's web
// schema, computed the same way for the crawler and for migrating older
// indices.
package yacydoc

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/extract"
	"github.com/gridcrawl/gridcrawl/pkg/urlnorm"
)

// maxFileExtBytes bounds url_file_ext_s: a longer "extension" is a dot in
// a file name, not a file type.
const maxFileExtBytes = 16

// Page is what a document is made from besides the extraction.
type Page struct {
	// Key is the page's record key (the document id), CrawlID its crawl.
	Key, CrawlID string
	// URL is the parsed form of Fetched.URL.
	URL *url.URL
	// Fetched is the fetch: URL, depth, status, time, response time, WARC
	// record.
	Fetched contracts.CrawlerPage
	// Header is the response header.
	Header http.Header
	// IP is the address the page was fetched from, if known.
	IP string
	// BodyBytes is the length of the decoded body.
	BodyBytes int
	// MediaType is the response's media type without parameters.
	MediaType string
	// Referrer is the URL of the page that linked this one.
	Referrer string
	// Collection are the crawl's collections.
	Collection []string
	// HeaderRobots are the contracts.RobotsHeader* bits of the response
	// (HeaderRobots' first result).
	HeaderRobots int
}

// Build returns the YaCy web document of a parsed page (see
// contracts.Document for the meaning of each field).
func Build(pg Page, res *extract.Result) *contracts.Document {
	host := urlnorm.Host(pg.URL)
	ssld := urlnorm.RegistrableDomain(host)
	d := &contracts.Document{
		ID: pg.Key, CrawlID: pg.CrawlID, URL: pg.Fetched.URL,
		LoadDate: pg.Fetched.FetchedAt, LastModified: lastModified(pg.Header, pg.Fetched.FetchedAt),
		Title: []string{title(res.Title, pg.URL)}, Host: host, SSLD: ssld,
		HostOrganization: organization(ssld), Size: pg.BodyBytes,
		HTTPStatus: pg.Fetched.StatusCode, Text: res.Text, Language: res.Language,
		CrawlDepth: pg.Fetched.Depth, ReferrerURL: pg.Referrer, Canonical: res.Canonical,
		Robots: res.Robots | pg.HeaderRobots, Keywords: res.Keywords, Author: res.Author,
		Charset: res.Charset, ResponseTime: pg.Fetched.ResponseTimeMS, IP: pg.IP,
		URLProtocol: strings.ToLower(pg.URL.Scheme), Collection: pg.Collection,
		WARCKey: pg.Fetched.Asset.Key, WARCOffset: pg.Fetched.Asset.Offset, WARCLength: pg.Fetched.Asset.Length,
		InboundLinks: []string{}, OutboundLinks: []string{}, Images: []string{},
		InboundAnchorText: []string{}, OutboundAnchorText: []string{},
	}
	if pg.MediaType != "" {
		d.ContentType = []string{pg.MediaType}
	} else {
		d.ContentType = []string{}
	}
	d.URLPaths, d.URLFileName, d.FileExt = pathParts(pg.URL.EscapedPath())
	if res.Description != "" {
		d.Description = []string{res.Description}
	}
	for i, h := range res.Headings {
		switch res.HeadingLevels[i] {
		case 1:
			d.H1 = append(d.H1, h)
		case 2:
			d.H2 = append(d.H2, h)
		case 3:
			d.H3 = append(d.H3, h)
		case 4:
			d.H4 = append(d.H4, h)
		case 5:
			d.H5 = append(d.H5, h)
		case 6:
			d.H6 = append(d.H6, h)
		}
	}
	if res.Text != "" {
		d.WordCount = strings.Count(res.Text, " ") + 1 // Text's whitespace is collapsed
	}
	for _, l := range res.Links {
		d.LinksCount++
		if l.Nofollow {
			d.LinksNofollowCount++
		}
		if linkHost(l.URL) == host {
			d.InboundLinks = append(d.InboundLinks, l.URL)
			d.InboundAnchorText = append(d.InboundAnchorText, l.Text)
			d.InboundLinksCount++
			if l.Nofollow {
				d.InboundLinksNofollowCount++
			}
		} else {
			d.OutboundLinks = append(d.OutboundLinks, l.URL)
			d.OutboundAnchorText = append(d.OutboundAnchorText, l.Text)
			d.OutboundLinksCount++
			if l.Nofollow {
				d.OutboundLinksNofollowCount++
			}
		}
	}
	for _, im := range res.Images {
		d.Images = append(d.Images, im.URL)
	}
	d.ImagesCount = len(d.Images)
	return d
}

// title is the page's title, or its file name, or its host.
func title(t string, u *url.URL) string {
	if t != "" {
		return t
	}
	segs := strings.Split(u.Path, "/")
	if name := segs[len(segs)-1]; name != "" {
		return name
	}
	return u.Host
}

// lastModified is the response's valid Last-Modified, not after loaded, or
// loaded.
func lastModified(h http.Header, loaded time.Time) time.Time {
	if v := h.Get("Last-Modified"); v != "" {
		if t, err := http.ParseTime(v); err == nil && !t.After(loaded) {
			return t.UTC()
		}
	}
	return loaded
}

// organization is the first label of a registrable domain ("example" for
// "example.co.uk"), or the domain itself when it is an IP address.
func organization(ssld string) string {
	if strings.Contains(ssld, ":") || isIPv4(ssld) {
		return ssld
	}
	org, _, _ := strings.Cut(ssld, ".")
	return org
}

func isIPv4(h string) bool {
	return h != "" && strings.Trim(h, "0123456789.") == ""
}

// pathParts splits an escaped URL path into its directory segments, the
// file name without extension and the lowercase extension (YaCy's
// url_paths_sxt, url_file_name_s and url_file_ext_s).
func pathParts(p string) (dirs []string, name, ext string) {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	file := segs[len(segs)-1]
	for _, s := range segs[:len(segs)-1] {
		if s != "" {
			dirs = append(dirs, unescape(s))
		}
	}
	file = unescape(file)
	if i := strings.LastIndexByte(file, '.'); i > 0 {
		e := strings.ToLower(file[i+1:])
		if e != "" && len(e) <= maxFileExtBytes && strings.Trim(e, "abcdefghijklmnopqrstuvwxyz0123456789") == "" {
			return dirs, file[:i], e
		}
	}
	return dirs, file, ""
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return strings.ToValidUTF8(u, "\uFFFD")
	}
	return s
}

// linkHost is the host of a normalized absolute URL: lowercase, without
// user info, port or brackets. It spares parsing every link.
func linkHost(u string) string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if i := strings.IndexByte(rest, ']'); i >= 0 {
			return rest[1:i]
		}
		return rest
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSuffix(rest, ".")
}

// HeaderRobots returns the contracts.RobotsHeader* bits of the response's
// X-Robots-Tag headers (all), and those of its directives that apply to
// every crawler (own): a directive may be prefixed by a user agent name
// ("otherbot: noindex"), which YaCy's bits count but the crawler does not
// obey.
func HeaderRobots(h http.Header) (all, own int) {
	for _, v := range h.Values("X-Robots-Tag") {
		for _, f := range strings.Split(v, ",") {
			f = strings.ToLower(strings.TrimSpace(f))
			general := true
			if name, rest, ok := strings.Cut(f, ":"); ok && name != "unavailable_after" {
				f, general = strings.TrimSpace(rest), false
			}
			bits := 0
			switch {
			case f == "all":
				bits |= contracts.RobotsHeaderAll
			case f == "noindex":
				bits |= contracts.RobotsHeaderNoIndex
			case f == "nofollow":
				bits |= contracts.RobotsHeaderNoFollow
			case f == "none":
				bits |= contracts.RobotsHeaderNoIndex | contracts.RobotsHeaderNoFollow
			case f == "noarchive":
				bits |= contracts.RobotsHeaderNoArchive
			case f == "nosnippet":
				bits |= contracts.RobotsHeaderNoSnippet
			case f == "noodp":
				bits |= contracts.RobotsHeaderNoODP
			case f == "notranslate":
				bits |= contracts.RobotsHeaderNoTranslate
			case f == "noimageindex":
				bits |= contracts.RobotsHeaderNoImageIndex
			case strings.HasPrefix(f, "unavailable_after"):
				bits |= contracts.RobotsHeaderUnavailableAfter
			}
			all |= bits
			if general {
				own |= bits
			}
		}
	}
	return all, own
}
