package contracts_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// fullProfile sets every field of a Profile to a valid, non-zero value.
func fullProfile() contracts.Profile {
	return contracts.Profile{
		Name:              "every field",
		StartURLs:         []string{"https://example.com/", "http://example.org:8080/a?b=c#d"},
		MaxDepth:          5,
		Scope:             contracts.ScopeDomain,
		CrawlMustMatch:    `^https?://example\.(com|org)/`,
		CrawlMustNotMatch: `(?i)\.pdf$`,
		IndexMustMatch:    `/docs/`,
		IndexMustNotMatch: `/drafts/`,
		MaxPages:          1000,
		MaxPagesPerHost:   100,
		UserAgent:         "testbot/1.0",
		Politeness: contracts.Politeness{
			MinDelayMS:  250,
			MaxDelayMS:  5000,
			DelayFactor: 1.5,
			Robots:      contracts.RobotsIgnore,
		},
		Priority:        7,
		Render:          contracts.RenderAuto,
		RenderOverrides: []contracts.RenderOverride{{Domain: "static.example.com", Render: contracts.RenderNever}},
		RenderRobots:    contracts.RenderRobotsAll,
		Dedupe:          contracts.DedupeCrawl,
	}
}

func fullAsset() contracts.AssetRef {
	return contracts.AssetRef{Key: "crawls/c/warc/1.warc.gz", Offset: 1 << 33, Length: 4096}
}

func fullDocument() contracts.Document {
	fetched := time.Date(2025, 11, 21, 8, 39, 0, 123456789, time.UTC)
	return contracts.Document{
		ID: "d41d8cd98f00b204", CrawlID: "c-1", URL: "https://example.com/docs/install.html",
		LastModified: fetched.Add(-time.Hour), LoadDate: fetched,
		ContentType: []string{"text/html"}, Title: []string{"Install"}, Host: "example.com", SSLD: "example.com",
		Size: 20480, HTTPStatus: 200, FileExt: "html", HostOrganization: "example",
		InboundLinks: []string{"https://example.com/docs/"}, OutboundLinks: []string{"https://ads.example.net/"},
		Images: []string{"https://example.com/logo.png"}, Text: "Install it.", Description: []string{"How to install"},
		H1: []string{"Install"}, H2: []string{"Linux", "Windows"}, H3: []string{"a"}, H4: []string{"b"}, H5: []string{"c"}, H6: []string{"d"},
		Language: "en", CrawlDepth: 1, ReferrerURL: "https://example.com/docs/", Canonical: "https://example.com/docs/install.html",
		Robots: contracts.RobotsMetaIndex | contracts.RobotsHeaderNoArchive, Keywords: "install setup", Author: "Docs Team",
		Charset: "utf-8", WordCount: 2, LinksCount: 2, LinksNofollowCount: 1, InboundLinksCount: 1, OutboundLinksCount: 1,
		OutboundLinksNofollowCount: 1, ImagesCount: 1, ResponseTime: 12,
		InboundAnchorText: []string{"Docs"}, OutboundAnchorText: []string{"Ad"}, IP: "127.0.0.1",
		URLProtocol: "https", URLFileName: "install", URLPaths: []string{"docs"}, Collection: []string{"user", "docs"},
		WARCKey: fullAsset().Key, WARCOffset: fullAsset().Offset, WARCLength: fullAsset().Length, NoIndex: true,
	}
}

func minimalDocument() contracts.Document {
	fetched := time.Date(2025, 11, 21, 8, 39, 0, 0, time.UTC)
	return contracts.Document{ID: "x", CrawlID: "c", URL: "http://a/", LastModified: fetched, LoadDate: fetched,
		ContentType: []string{}, Title: []string{"a"}, Host: "a", SSLD: "a", HTTPStatus: 200, HostOrganization: "a",
		InboundLinks: []string{}, OutboundLinks: []string{}, Images: []string{},
		InboundAnchorText: []string{}, OutboundAnchorText: []string{}, URLProtocol: "http", WARCKey: "k"}
}

func fullCrawlStatus() contracts.CrawlStatus {
	counts := map[contracts.Status]int64{}
	for i, s := range contracts.Statuses {
		counts[s] = int64(i + 1)
	}
	finished := time.Date(2025, 11, 21, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	return contracts.CrawlStatus{
		V:          contracts.Version,
		CrawlID:    "c-1",
		State:      contracts.CrawlFinished,
		Profile:    fullProfile(),
		Counts:     counts,
		Total:      21,
		Pending:    6,
		Excluded:   2,
		Documents:  4,
		CreatedAt:  time.Date(2025, 11, 21, 8, 0, 0, 0, time.UTC),
		FinishedAt: &finished,
		Outcome:    &contracts.CrawlOutcome{Kind: contracts.OutcomeNothingIndexed, Summary: "nothing indexed"},
	}
}

// TestGoValuesValidate marshals Go values of every type, with every field
// set and in their minimal forms, and checks that their schema accepts
// them: a field added to a Go type and not to its schema fails here.
func TestGoValuesValidate(t *testing.T) {
	fetched := time.Date(2025, 11, 21, 8, 39, 0, 0, time.UTC)
	minimal := contracts.Profile{StartURLs: []string{"http://a"}}
	tests := []struct {
		name   string
		schema string
		value  any
	}{
		{"profile full", "profile", fullProfile()},
		{"profile minimal as Go writes it", "profile", minimal},
		{"profile minimal with defaults", "profile", minimal.WithDefaults()},
		{"profile full with defaults", "profile", fullProfile().WithDefaults()},
		{"profile zero delays", "profile", contracts.Profile{StartURLs: []string{"http://a"}, Politeness: contracts.Politeness{Robots: contracts.RobotsObey}}},
		{"profile zero delays with defaults", "profile", contracts.Profile{StartURLs: []string{"http://a"}, Politeness: contracts.Politeness{Robots: contracts.RobotsObey}}.WithDefaults()},
		{"profile with every budget field", "profile", contracts.Profile{StartURLs: []string{"http://a"}, Budget: &contracts.Budget{
			BalanceReplenish: 10, TotalBudget: 100, CostPolicy: contracts.CostWag, PauseAtFinish: true, HoldQueues: true,
			Overrides: []contracts.BudgetOverride{{Domain: "example.org", BalanceReplenish: 5, TotalBudget: 50}},
		}}},
		{"loader contract", "loader_contract", contracts.LoaderContract{
			V: contracts.Version, CrawlID: "c-1", Profile: ptr(fullProfile()), Group: "example.com",
			URLs: []contracts.LoaderURL{{URL: "https://example.com/", Depth: 0}, {URL: "https://example.com/r", Depth: 3, Hops: 2}},
		}},
		{"loader contract without profile", "loader_contract", contracts.LoaderContract{
			V: contracts.Version, CrawlID: "c-1", Group: "example.com", URLs: []contracts.LoaderURL{{URL: "https://example.com/"}},
		}},
		{"crawler contract", "crawler_contract", contracts.CrawlerContract{
			V: contracts.Version, CrawlID: "c-1", Profile: ptr(fullProfile()), Reindex: true,
			Pages: []contracts.CrawlerPage{
				{URL: "https://example.com/", Depth: 2, Hops: 1, Asset: fullAsset(), StatusCode: 200, ContentType: "text/html", FetchedAt: fetched},
				{URL: "https://example.com/gone", Asset: fullAsset(), StatusCode: 410, FetchedAt: fetched.In(time.FixedZone("X", -5*3600))},
			},
		}},
		{"crawler contract relink", "crawler_contract", contracts.CrawlerContract{
			V: contracts.Version, CrawlID: "c-1", Relink: true,
			Pages: []contracts.CrawlerPage{{URL: "https://example.com/r", Depth: 1, Hops: 1, Asset: fullAsset(), StatusCode: 301, FetchedAt: fetched}},
		}},
		{"document full", "document", fullDocument()},
		{"document minimal", "document", minimalDocument()},
		{"index contract", "index_contract", contracts.IndexContract{
			V: contracts.Version, CrawlID: "c-1", Docs: []contracts.Document{fullDocument(), fullDocument()},
		}},
		{"create crawl response", "create_crawl_response", contracts.CreateCrawlResponse{V: contracts.Version, CrawlID: "c-1", State: contracts.CrawlRunning}},
		{"crawl status every status", "crawl_status", fullCrawlStatus()},
		{"crawl status running no counts", "crawl_status", contracts.CrawlStatus{
			V: contracts.Version, CrawlID: "c-2", State: contracts.CrawlRunning, Profile: minimal.WithDefaults(),
			Counts: map[contracts.Status]int64{}, CreatedAt: fetched,
		}},
		{"crawl list", "crawl_list", contracts.CrawlList{V: contracts.Version, Crawls: []contracts.CrawlStatus{fullCrawlStatus(), fullCrawlStatus()}}},
		{"crawl list empty", "crawl_list", contracts.CrawlList{V: contracts.Version, Crawls: []contracts.CrawlStatus{}}},
		{"search response", "search_response", contracts.SearchResponse{
			V: contracts.Version, Query: "install", Total: 3, Offset: 1,
			Hits: []contracts.SearchHit{{
				ID: "d41d8cd98f00b204", CrawlID: "c-1", URL: "https://example.com/docs/", Title: "Docs",
				Description: "All the docs", Snippet: "<b>Install</b> it", ContentType: "text/html",
				Language: "en", FetchTime: fetched, Host: "example.com", Size: 2048, LastModified: fetched, Score: 0.75,
			}},
		}},
		{"search response empty", "search_response", contracts.SearchResponse{V: contracts.Version, Query: "nothing", Hits: []contracts.SearchHit{}}},
		{"error response", "error_response", contracts.ErrorResponse{Error: "invalid max_depth: must be between 0 and 100", Field: "max_depth"}},
		{"error response no field", "error_response", contracts.ErrorResponse{Error: "crawl not found"}},
	}
	compiled := compileAll(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validateValue(compiled[tt.schema], tt.value); err != nil {
				t.Errorf("schema %s rejects %+v: %v", tt.schema, tt.value, err)
			}
		})
	}
	// Every state and status of the Go code is in the schema's enums.
	for _, state := range []contracts.CrawlState{contracts.CrawlRunning, contracts.CrawlFinished, contracts.CrawlCancelled} {
		r := contracts.CreateCrawlResponse{V: contracts.Version, CrawlID: "c", State: state}
		if err := validateValue(compiled["create_crawl_response"], r); err != nil {
			t.Errorf("schema rejects crawl state %q: %v", state, err)
		}
	}
	for _, s := range contracts.Statuses {
		cs := fullCrawlStatus()
		cs.Counts = map[contracts.Status]int64{s: 1}
		if err := validateValue(compiled["crawl_status"], cs); err != nil {
			t.Errorf("schema rejects status %q in counts: %v", s, err)
		}
	}
	for _, scope := range []contracts.Scope{contracts.ScopeHost, contracts.ScopeDomain, contracts.ScopeAny} {
		p := minimal
		p.Scope = scope
		if err := validateValue(compiled["profile"], p); err != nil {
			t.Errorf("schema rejects scope %q: %v", scope, err)
		}
	}
}

// TestGoValuesRoundTrip checks that fixtures survive decode, marshal and
// decode again unchanged, so no field is lost between Go and JSON.
func TestGoValuesRoundTrip(t *testing.T) {
	for schema, newValue := range goTypes {
		for name, data := range fixtures(t, "valid", schema) {
			t.Run(schema+"/"+name, func(t *testing.T) {
				first := newValue()
				if err := decodeStrict(data, first); err != nil {
					t.Fatalf("decode fixture: %v", err)
				}
				again, err := json.Marshal(first)
				if err != nil {
					t.Fatalf("marshal: %v", err)
				}
				second := newValue()
				if err := decodeStrict(again, second); err != nil {
					t.Fatalf("decode marshalled %s: %v", again, err)
				}
				if diff := cmp.Diff(first, second); diff != "" {
					t.Errorf("round trip changed the value (-first +second):\n%s", diff)
				}
			})
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestDocumentFieldsFollowYaCy checks every Document field's JSON name
// against the suffix convention of YaCy's web schema, independently of
// DocumentFields' own table.
func TestDocumentFieldsFollowYaCy(t *testing.T) {
	want := map[string]contracts.FieldType{
		"id": contracts.FieldKeyword, "url_s": contracts.FieldKeyword, "last_modified": contracts.FieldDate, "load_date_dt": contracts.FieldDate,
		"content_type": contracts.FieldKeyword, "title": contracts.FieldText, "host_s": contracts.FieldKeyword, "size_i": contracts.FieldInteger,
		"failreason_s": contracts.FieldKeyword, "failtype_s": contracts.FieldKeyword, "httpstatus_i": contracts.FieldInteger,
		"url_file_ext_s": contracts.FieldKeyword, "host_organization_s": contracts.FieldKeyword, "inboundlinks_sxt": contracts.FieldKeyword,
		"outboundlinks_sxt": contracts.FieldKeyword, "images_sxt": contracts.FieldKeyword, "text_t": contracts.FieldText,
		"description_txt": contracts.FieldText, "h1_txt": contracts.FieldText, "h6_txt": contracts.FieldText, "language_s": contracts.FieldKeyword,
		"crawldepth_i": contracts.FieldInteger, "referrer_url_s": contracts.FieldKeyword, "canonical_s": contracts.FieldKeyword,
		"robots_i": contracts.FieldInteger, "keywords": contracts.FieldText, "author": contracts.FieldText, "charset_s": contracts.FieldKeyword,
		"wordcount_i": contracts.FieldInteger, "linkscount_i": contracts.FieldInteger, "inboundlinkscount_i": contracts.FieldInteger,
		"outboundlinkscount_i": contracts.FieldInteger, "imagescount_i": contracts.FieldInteger, "responsetime_i": contracts.FieldInteger,
		"collection_sxt": contracts.FieldKeyword, "inboundlinks_anchortext_txt": contracts.FieldText,
		"outboundlinks_anchortext_txt": contracts.FieldText, "warc_offset_l": contracts.FieldLong, "noindex_b": contracts.FieldBoolean,
	}
	multi := map[string]bool{"content_type": true, "title": true, "inboundlinks_sxt": true, "outboundlinks_sxt": true,
		"images_sxt": true, "description_txt": true, "h1_txt": true, "collection_sxt": true,
		"inboundlinks_anchortext_txt": true, "outboundlinks_anchortext_txt": true, "url_s": false, "text_t": false}
	got := map[string]contracts.DocumentField{}
	for _, f := range contracts.DocumentFields() {
		got[f.Name] = f
	}
	for name, typ := range want {
		f, ok := got[name]
		if !ok {
			t.Errorf("Document has no field %q", name)
			continue
		}
		if f.Type != typ {
			t.Errorf("field %q has type %s, want %s", name, f.Type, typ)
		}
		if m, ok := multi[name]; ok && f.Multi != m {
			t.Errorf("field %q multi-valued %v, want %v", name, f.Multi, m)
		}
	}
}
