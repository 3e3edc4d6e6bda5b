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
		Priority: 7,
	}
}

func fullAsset() contracts.AssetRef {
	return contracts.AssetRef{Key: "crawls/c/warc/1.warc.gz", Offset: 1 << 33, Length: 4096}
}

func fullDocument() contracts.Document {
	return contracts.Document{
		ID:          "d41d8cd98f00b204",
		CrawlID:     "c-1",
		URL:         "https://example.com/docs/",
		Host:        "example.com",
		Title:       "Docs",
		Description: "All the docs",
		Language:    "en",
		Headings:    []string{"Docs", "Install"},
		Text:        "Install it.",
		Links: []contracts.Link{
			{URL: "https://example.com/docs/install", Text: "Install"},
			{URL: "https://ads.example.net/", Text: "Ad", Nofollow: true},
		},
		ContentType: "text/html; charset=utf-8",
		StatusCode:  200,
		Depth:       1,
		FetchTime:   time.Date(2025, 11, 21, 8, 39, 0, 123456789, time.UTC),
		Asset:       fullAsset(),
		NoIndex:     true,
	}
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
		Documents:  4,
		CreatedAt:  time.Date(2025, 11, 21, 8, 0, 0, 0, time.UTC),
		FinishedAt: &finished,
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
		{"document minimal", "document", contracts.Document{ID: "x", CrawlID: "c", URL: "http://a/", Asset: contracts.AssetRef{Key: "k"}, FetchTime: fetched}},
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
				Language: "en", FetchTime: fetched, Score: 0.75,
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
