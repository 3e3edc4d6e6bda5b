package grid

import (
	"mime"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// yacyMandatory are the fields of YaCy Grid's web schema that issue 9 names:
// each must be present in every stored document's JSON.
var yacyMandatory = []string{"url_s", "last_modified", "load_date_dt", "content_type", "title", "host_s",
	"size_i", "failreason_s", "failtype_s", "httpstatus_i", "url_file_ext_s", "host_organization_s",
	"inboundlinks_sxt", "outboundlinks_sxt", "images_sxt", "text_t", "crawldepth_i", "robots_i",
	"wordcount_i", "linkscount_i", "inboundlinkscount_i", "outboundlinkscount_i", "imagescount_i",
	"responsetime_i", "inboundlinks_anchortext_txt", "outboundlinks_anchortext_txt"}

// e2eCollections are the collections of the end-to-end crawls.
var e2eCollections = []string{"e2e", "docs-site"}

// checkDocument compares the YaCy document d of the indexed page u with
// what the simulated site says about the page (exp), field by field, and
// with its transaction record r. The expectations come from the site's
// model and from u itself, never from the crawler's code.
func checkDocument(t *testing.T, u string, d contracts.Document, exp websim.Expect, r txindex.Record, crawlStart time.Time) {
	t.Helper()
	want := exp.Docs[u]
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	host := strings.ToLower(pu.Hostname())
	labels := strings.Split(host, ".")
	ssld := strings.Join(labels[max(0, len(labels)-2):], ".") // the site's hosts are under one two-label zone
	mediaType, _, _ := mime.ParseMediaType(want.ContentType)
	file := path.Base(pu.Path)
	if strings.HasSuffix(pu.Path, "/") {
		file = ""
	}
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(file), "."))
	var dirs []string
	for _, s := range strings.Split(strings.Trim(path.Dir(pu.Path+"x"), "/"), "/") {
		if s != "" {
			dirs = append(dirs, s)
		}
	}
	bad := func(field string, got, wantV any) {
		t.Helper()
		t.Errorf("document %s: %s = %#v, want %#v", u, field, got, wantV)
	}
	eq := func(field string, got, wantV any) {
		t.Helper()
		if !cmp.Equal(got, wantV, cmpopts.EquateEmpty()) {
			bad(field, got, wantV)
		}
	}
	eq("id", d.ID, r.Key)
	eq("crawl_id_s", d.CrawlID, r.CrawlID)
	eq("url_s", d.URL, u)
	eq("host_s", d.Host, host)
	eq("ssld_s", d.SSLD, ssld)
	eq("host_organization_s", d.HostOrganization, labels[max(0, len(labels)-2)])
	eq("content_type", d.ContentType, []string{mediaType})
	if want.Title != "" {
		eq("title", d.Title, []string{want.Title})
	} else if len(d.Title) != 1 || d.Title[0] == "" {
		bad("title", d.Title, "one non-empty title")
	}
	eq("httpstatus_i", d.HTTPStatus, 200)
	eq("failreason_s", d.FailReason, "")
	eq("failtype_s", d.FailType, "")
	eq("size_i", d.Size, want.Size)
	eq("url_file_ext_s", d.FileExt, ext)
	eq("url_file_name_s", d.URLFileName, strings.TrimSuffix(file, path.Ext(file)))
	eq("url_paths_sxt", d.URLPaths, dirs)
	eq("url_protocol_s", d.URLProtocol, pu.Scheme)
	eq("crawldepth_i", d.CrawlDepth, exp.Depth[u])
	if d.LoadDate.Before(crawlStart.Add(-time.Second)) || d.LoadDate.After(time.Now()) {
		bad("load_date_dt", d.LoadDate, "a time during the crawl")
	}
	// The site sends no Last-Modified: YaCy's last_modified is then the load date.
	if !d.LastModified.Equal(d.LoadDate) {
		bad("last_modified", d.LastModified, d.LoadDate)
	}
	if d.CrawlDepth == 0 {
		eq("referrer_url_s", d.ReferrerURL, "")
	} else if _, ok := exp.Depth[d.ReferrerURL]; !ok {
		bad("referrer_url_s", d.ReferrerURL, "a fetched page of the site")
	}
	var desc []string
	if want.Description != "" {
		desc = []string{want.Description}
	}
	eq("description_txt", d.Description, desc)
	eq("h1_txt", d.H1, want.H1)
	eq("h2_txt", d.H2, want.H2)
	for field, hs := range map[string][]string{"h3_txt": d.H3, "h4_txt": d.H4, "h5_txt": d.H5, "h6_txt": d.H6} {
		eq(field, hs, []string(nil))
	}
	eq("language_s", d.Language, strings.ToLower(want.Lang))
	for _, para := range want.Text {
		if p := strings.Join(strings.Fields(para), " "); !strings.Contains(d.Text, p) {
			bad("text_t", d.Text, "text containing "+p)
		}
	}
	eq("wordcount_i", d.WordCount, len(strings.Fields(d.Text)))
	eq("charset_s", d.Charset, want.Charset)
	eq("keywords", d.Keywords, want.Keywords)
	eq("author", d.Author, want.Author)
	const metaNoIndex, metaNoFollow = 1 << 3, 1 << 4 // YaCy's robots_i bits
	if want.RobotsNofollow != (d.Robots&metaNoFollow != 0) || d.Robots&metaNoIndex != 0 {
		bad("robots_i", d.Robots, "the nofollow bit as the page's meta robots says, no noindex bit")
	}
	// Links: every link the page writes as an element is in the list of its
	// side (inbound: the page's own host), at a position that holds its
	// anchor text. Links written in raw HTML may add others.
	for _, l := range want.Links {
		lu, _ := url.Parse(l.URL)
		links, texts, side := d.OutboundLinks, d.OutboundAnchorText, "outbound"
		if strings.EqualFold(lu.Hostname(), host) {
			links, texts, side = d.InboundLinks, d.InboundAnchorText, "inbound"
		}
		i := slices.Index(links, l.URL)
		if i < 0 {
			bad(side+"links_sxt", links, "a list holding "+l.URL)
			continue
		}
		if i >= len(texts) || texts[i] != l.Text {
			bad(side+"links_anchortext_txt of "+l.URL, texts, l.Text)
		}
	}
	eq("inboundlinkscount_i", d.InboundLinksCount, len(d.InboundLinks))
	eq("outboundlinkscount_i", d.OutboundLinksCount, len(d.OutboundLinks))
	eq("linkscount_i", d.LinksCount, len(d.InboundLinks)+len(d.OutboundLinks))
	eq("inboundlinks_anchortext_txt length", len(d.InboundAnchorText), len(d.InboundLinks))
	eq("outboundlinks_anchortext_txt length", len(d.OutboundAnchorText), len(d.OutboundLinks))
	nofollow := 0
	for _, l := range want.Links {
		if l.Nofollow {
			nofollow++
		}
	}
	if d.LinksNofollowCount < nofollow || d.LinksNofollowCount != d.InboundLinksNofollowCount+d.OutboundLinksNofollowCount {
		bad("linksnofollowcount_i", d.LinksNofollowCount, "at least the page's nofollow links, the sum of both sides")
	}
	var images []string
	for _, im := range want.Images {
		images = append(images, im.URL)
	}
	eq("images_sxt", d.Images, images)
	eq("imagescount_i", d.ImagesCount, len(images))
	eq("collection_sxt", d.Collection, e2eCollections)
	if d.ResponseTime < 0 || d.ResponseTime > 60_000 {
		bad("responsetime_i", d.ResponseTime, "milliseconds of one fetch")
	}
	if ip := net.ParseIP(d.IP); ip == nil || !ip.IsLoopback() {
		bad("ip_s", d.IP, "the loopback address the site listens on")
	}
	eq("warc", contracts.AssetRef{Key: d.WARCKey, Offset: d.WARCOffset, Length: d.WARCLength}, r.Asset)
}
