package contracts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// validProfile returns a profile with defaults applied that passes Validate.
func validProfile() contracts.Profile {
	return contracts.Profile{StartURLs: []string{"https://example.com/"}}.WithDefaults()
}

func manyURLs(n int) []string {
	urls := make([]string, n)
	for i := range urls {
		urls[i] = "https://example.com/"
	}
	return urls
}

func TestProfileValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(p *contracts.Profile)
		want   string // field of the *FieldError, "" for valid
	}{
		{"defaults", func(p *contracts.Profile) {}, ""},
		{"every field set", func(p *contracts.Profile) { *p = fullProfile() }, ""},

		{"start_urls nil", func(p *contracts.Profile) { p.StartURLs = nil }, "start_urls"},
		{"start_urls empty", func(p *contracts.Profile) { p.StartURLs = []string{} }, "start_urls"},
		{"start_urls 10000", func(p *contracts.Profile) { p.StartURLs = manyURLs(10000) }, ""},
		{"start_urls 10001", func(p *contracts.Profile) { p.StartURLs = manyURLs(10001) }, "start_urls"},
		{"start url ftp", func(p *contracts.Profile) { p.StartURLs = []string{"ftp://example.com/"} }, "start_urls[0]"},
		{"second start url mailto", func(p *contracts.Profile) { p.StartURLs = []string{"http://a/", "mailto:x@example.com"} }, "start_urls[1]"},
		{"third start url relative", func(p *contracts.Profile) { p.StartURLs = []string{"http://a/", "http://b/", "/c"} }, "start_urls[2]"},
		{"start url empty string", func(p *contracts.Profile) { p.StartURLs = []string{""} }, "start_urls[0]"},
		{"start url without host", func(p *contracts.Profile) { p.StartURLs = []string{"http:///x"} }, "start_urls[0]"},
		{"start url port without host", func(p *contracts.Profile) { p.StartURLs = []string{"http://:80/"} }, "start_urls[0]"},
		{"start url space in host", func(p *contracts.Profile) { p.StartURLs = []string{"http://exa mple.com/"} }, "start_urls[0]"},
		{"start url upper case scheme", func(p *contracts.Profile) { p.StartURLs = []string{"HTTPS://EXAMPLE.COM/"} }, ""},
		{"start url ipv6", func(p *contracts.Profile) { p.StartURLs = []string{"http://[::1]:8080/"} }, ""},
		{"start url 2048 bytes", func(p *contracts.Profile) { p.StartURLs = []string{"http://a/" + strings.Repeat("x", 2048-9)} }, ""},
		{"start url 2049 bytes", func(p *contracts.Profile) { p.StartURLs = []string{"http://a/" + strings.Repeat("x", 2049-9)} }, "start_urls[0]"},

		{"max_depth 0", func(p *contracts.Profile) { p.MaxDepth = 0 }, ""},
		{"max_depth 100", func(p *contracts.Profile) { p.MaxDepth = 100 }, ""},
		{"max_depth -1", func(p *contracts.Profile) { p.MaxDepth = -1 }, "max_depth"},
		{"max_depth 101", func(p *contracts.Profile) { p.MaxDepth = 101 }, "max_depth"},

		{"scope domain", func(p *contracts.Profile) { p.Scope = contracts.ScopeDomain }, ""},
		{"scope any", func(p *contracts.Profile) { p.Scope = contracts.ScopeAny }, ""},
		{"scope site", func(p *contracts.Profile) { p.Scope = "site" }, "scope"},
		{"scope empty before defaults", func(p *contracts.Profile) { p.Scope = "" }, "scope"},
		{"scope upper case", func(p *contracts.Profile) { p.Scope = "HOST" }, "scope"},

		{"crawl_must_match bad", func(p *contracts.Profile) { p.CrawlMustMatch = "(" }, "crawl_must_match"},
		{"crawl_must_not_match bad", func(p *contracts.Profile) { p.CrawlMustNotMatch = "[z-a]" }, "crawl_must_not_match"},
		{"index_must_match bad", func(p *contracts.Profile) { p.IndexMustMatch = "a{2,1}" }, "index_must_match"},
		{"index_must_not_match bad", func(p *contracts.Profile) { p.IndexMustNotMatch = `\8` }, "index_must_not_match"},
		{"regex perl lookahead", func(p *contracts.Profile) { p.CrawlMustMatch = "a(?=b)" }, "crawl_must_match"},
		{"regex 4096 bytes", func(p *contracts.Profile) { p.CrawlMustMatch = strings.Repeat("a", 4096) }, ""},
		{"regex 4097 bytes", func(p *contracts.Profile) { p.IndexMustMatch = strings.Repeat("a", 4097) }, "index_must_match"},

		{"max_pages 0", func(p *contracts.Profile) { p.MaxPages = 0 }, ""},
		{"max_pages -1", func(p *contracts.Profile) { p.MaxPages = -1 }, "max_pages"},
		{"max_pages_per_host -1", func(p *contracts.Profile) { p.MaxPagesPerHost = -1 }, "max_pages_per_host"},

		{"regex repeat 100", func(p *contracts.Profile) { p.CrawlMustMatch = `/[a-f0-9]{100}$` }, ""},
		{"regex repeat 1000", func(p *contracts.Profile) { p.CrawlMustMatch = `(?:\pL{1000})x` }, "crawl_must_match"},
		{"regex nested repeats multiply", func(p *contracts.Profile) { p.IndexMustNotMatch = `(?:(?:.{11}){10})x` }, "index_must_not_match"},
		{"regex nested repeats within bound", func(p *contracts.Profile) { p.IndexMustMatch = `(?:\d{4}/){2}\d{2}` }, ""},
		{"regex unbounded star is cheap", func(p *contracts.Profile) { p.CrawlMustNotMatch = `.*\.(jpg|png|gif|css|js)$` }, ""},
		{"regex long site list", func(p *contracts.Profile) {
			sites := make([]string, 150)
			for i := range sites {
				sites[i] = fmt.Sprintf("site%d\\.example\\.org", i)
			}
			p.CrawlMustMatch = `^https?://(www\.)?(` + strings.Join(sites, "|") + `)/`
		}, ""},
		{"user_agent 512 bytes", func(p *contracts.Profile) { p.UserAgent = strings.Repeat("b", 512) }, ""},
		{"user_agent 513 bytes", func(p *contracts.Profile) { p.UserAgent = strings.Repeat("b", 513) }, "user_agent"},
		{"user_agent newline", func(p *contracts.Profile) { p.UserAgent = "bot\nX: y" }, "user_agent"},
		{"user_agent carriage return", func(p *contracts.Profile) { p.UserAgent = "bot\r" }, "user_agent"},
		{"user_agent NUL", func(p *contracts.Profile) { p.UserAgent = "bot\x00" }, "user_agent"},
		{"user_agent tab", func(p *contracts.Profile) { p.UserAgent = "bot\t1.0" }, "user_agent"},
		{"user_agent escape", func(p *contracts.Profile) { p.UserAgent = "bot\x1b[31m" }, "user_agent"},
		{"user_agent DEL", func(p *contracts.Profile) { p.UserAgent = "bot\x7f" }, "user_agent"},
		{"user_agent non-ASCII letters", func(p *contracts.Profile) { p.UserAgent = "bötli/1.0" }, ""},

		{"min_delay_ms 0", func(p *contracts.Profile) { p.Politeness.MinDelayMS = 0 }, ""},
		{"min_delay_ms -1", func(p *contracts.Profile) { p.Politeness.MinDelayMS = -1 }, "politeness.min_delay_ms"},
		{"min_delay_ms over one hour", func(p *contracts.Profile) {
			p.Politeness.MinDelayMS, p.Politeness.MaxDelayMS = 3600_001, 3600_001
		}, "politeness.min_delay_ms"},
		{"min equals max", func(p *contracts.Profile) { p.Politeness.MinDelayMS, p.Politeness.MaxDelayMS = 700, 700 }, ""},
		{"min above max", func(p *contracts.Profile) { p.Politeness.MinDelayMS, p.Politeness.MaxDelayMS = 701, 700 }, "politeness.max_delay_ms"},
		{"max_delay_ms one hour", func(p *contracts.Profile) { p.Politeness.MaxDelayMS = 3600_000 }, ""},
		{"max_delay_ms over one hour", func(p *contracts.Profile) { p.Politeness.MaxDelayMS = 3600_001 }, "politeness.max_delay_ms"},
		{"delay_factor 0", func(p *contracts.Profile) { p.Politeness.DelayFactor = 0 }, ""},
		{"delay_factor 1000", func(p *contracts.Profile) { p.Politeness.DelayFactor = 1000 }, ""},
		{"delay_factor negative", func(p *contracts.Profile) { p.Politeness.DelayFactor = -0.001 }, "politeness.delay_factor"},
		{"delay_factor over 1000", func(p *contracts.Profile) { p.Politeness.DelayFactor = 1000.001 }, "politeness.delay_factor"},
		{"robots ignore", func(p *contracts.Profile) { p.Politeness.Robots = contracts.RobotsIgnore }, ""},
		{"robots unknown", func(p *contracts.Profile) { p.Politeness.Robots = "respect" }, "politeness.robots"},
		{"robots empty before defaults", func(p *contracts.Profile) { p.Politeness.Robots = "" }, "politeness.robots"},

		{"priority 9", func(p *contracts.Profile) { p.Priority = 9 }, ""},
		{"priority 10", func(p *contracts.Profile) { p.Priority = 10 }, "priority"},
		{"priority -1", func(p *contracts.Profile) { p.Priority = -1 }, "priority"},
		{"sitemap depth max depth", func(p *contracts.Profile) { p.MaxDepth, p.SitemapDepth = 2, 2 }, ""},
		{"sitemap depth over max depth", func(p *contracts.Profile) { p.MaxDepth, p.SitemapDepth = 2, 3 }, "sitemap_depth"},
		{"sitemap depth -1", func(p *contracts.Profile) { p.SitemapDepth = -1 }, "sitemap_depth"},

		{"render never", func(p *contracts.Profile) { p.Render = contracts.RenderNever }, ""},
		{"render always", func(p *contracts.Profile) { p.Render = contracts.RenderAlways }, ""},
		{"render auto", func(p *contracts.Profile) { p.Render = contracts.RenderAuto }, ""},
		{"render unknown", func(p *contracts.Profile) { p.Render = "headless" }, "render"},
		{"render upper case", func(p *contracts.Profile) { p.Render = "AUTO" }, "render"},
		{"render overrides 1000", func(p *contracts.Profile) { p.RenderOverrides = renderOverrides(1000) }, ""},
		{"render overrides 1001", func(p *contracts.Profile) { p.RenderOverrides = renderOverrides(1001) }, "render_overrides"},
		{"render override fourth domain empty", func(p *contracts.Profile) {
			p.RenderOverrides = renderOverrides(4)
			p.RenderOverrides[3].Domain = ""
		}, "render_overrides[3].domain"},
		{"render override domain with port", func(p *contracts.Profile) {
			p.RenderOverrides = []contracts.RenderOverride{{Domain: "example.org:443", Render: contracts.RenderAuto}}
		}, "render_overrides[0].domain"},
		{"render override domain a URL", func(p *contracts.Profile) {
			p.RenderOverrides = []contracts.RenderOverride{{Domain: "https://example.org/", Render: contracts.RenderAuto}}
		}, "render_overrides[0].domain"},
		{"render override domain only a dot", func(p *contracts.Profile) {
			p.RenderOverrides = []contracts.RenderOverride{{Domain: ".", Render: contracts.RenderAuto}}
		}, "render_overrides[0].domain"},
		{"render override domain with a tab", func(p *contracts.Profile) {
			p.RenderOverrides = []contracts.RenderOverride{{Domain: "example\t.org", Render: contracts.RenderAuto}}
		}, "render_overrides[0].domain"},
		{"render override domain 254 bytes", func(p *contracts.Profile) {
			p.RenderOverrides = []contracts.RenderOverride{{Domain: strings.Repeat("a", 254), Render: contracts.RenderAuto}}
		}, "render_overrides[0].domain"},
		{"render override domain twice", func(p *contracts.Profile) {
			p.RenderOverrides = []contracts.RenderOverride{{Domain: "example.org", Render: contracts.RenderAuto}, {Domain: "Example.org.", Render: contracts.RenderNever}}
		}, "render_overrides[1].domain"},
		{"render override fourth render unknown", func(p *contracts.Profile) {
			p.RenderOverrides = renderOverrides(4)
			p.RenderOverrides[3].Render = "sometimes"
		}, "render_overrides[3].render"},
		{"render override render empty", func(p *contracts.Profile) {
			p.RenderOverrides = []contracts.RenderOverride{{Domain: "example.org"}}
		}, "render_overrides[0].render"},
		{"render robots pages", func(p *contracts.Profile) { p.RenderRobots = contracts.RenderRobotsPages }, ""},
		{"render robots all", func(p *contracts.Profile) { p.RenderRobots = contracts.RenderRobotsAll }, ""},
		{"render robots unknown", func(p *contracts.Profile) { p.RenderRobots = "obey" }, "render_robots"},

		{"first error wins", func(p *contracts.Profile) { p.MaxDepth, p.Priority = -1, -1 }, "max_depth"},
	}
	// schemaAccepts names the invalid cases the schema still accepts: values
	// that mean "default" before WithDefaults, and a rule the schema is
	// looser on (TestKnownDifferences).
	schemaAccepts := map[string]bool{
		"scope empty before defaults":  true,
		"robots empty before defaults": true,
		"start url port without host":  true,
		// The cost of a regular expression is not a schema keyword.
		"regex repeat 1000":             true,
		"regex nested repeats multiply": true,
		// Uniqueness under case folding is not a schema keyword.
		"render override domain twice": true,
	}
	sch := compileAll(t)["profile"]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validProfile()
			tt.modify(&p)
			err := p.Validate()
			got := ""
			if err != nil {
				var fe *contracts.FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("Validate(%+v) = %v (%T), want a *FieldError", p, err, err)
				}
				got = fe.Field
				if fe.Reason == "" {
					t.Errorf("Validate(%+v) gave field %q without a reason", p, fe.Field)
				}
				if !strings.Contains(err.Error(), fe.Field) {
					t.Errorf("Validate(%+v).Error() = %q, want it to name %q", p, err, fe.Field)
				}
			}
			if got != tt.want {
				t.Errorf("Validate(%+v) field = %q, want %q", p, got, tt.want)
			}
			// The schema agrees with Validate, but for the marked cases.
			schemaErr := validateValue(sch, p)
			if wantOK := tt.want == "" || schemaAccepts[tt.name]; (schemaErr == nil) != wantOK {
				t.Errorf("schema on %+v: err = %v, want accepted = %v", p, schemaErr, wantOK)
			}
		})
	}
}

// renderOverrides returns n valid render overrides of distinct domains.
func renderOverrides(n int) []contracts.RenderOverride {
	out := make([]contracts.RenderOverride, n)
	for i := range out {
		out[i] = contracts.RenderOverride{Domain: fmt.Sprintf("site%d.example.org", i), Render: contracts.RenderAlways}
	}
	return out
}

func TestRenderFor(t *testing.T) {
	overrides := []contracts.RenderOverride{
		{Domain: "example.org", Render: contracts.RenderAuto},
		{Domain: "app.example.org", Render: contracts.RenderAlways},
		{Domain: "Static.App.Example.ORG.", Render: contracts.RenderNever},
		{Domain: ".spa.test", Render: contracts.RenderAlways},
		{Domain: "10.0.0.1", Render: contracts.RenderAuto},
	}
	tests := []struct {
		render    string
		overrides []contracts.RenderOverride
		host      string
		want      string
	}{
		{"", nil, "example.org", contracts.RenderNever},
		{contracts.RenderAuto, nil, "example.org", contracts.RenderAuto},
		{contracts.RenderAlways, nil, "", contracts.RenderAlways},
		{"", overrides, "example.org", contracts.RenderAuto},
		{"", overrides, "www.example.org", contracts.RenderAuto},
		{"", overrides, "notexample.org", contracts.RenderNever},
		{contracts.RenderAlways, overrides, "notexample.org", contracts.RenderAlways},
		{"", overrides, "example.org.uk", contracts.RenderNever},
		{"", overrides, "org", contracts.RenderNever},
		{"", overrides, "app.example.org", contracts.RenderAlways},
		{"", overrides, "a.b.app.example.org", contracts.RenderAlways},
		{"", overrides, "static.app.example.org", contracts.RenderNever},
		{"", overrides, "cdn.static.app.example.org", contracts.RenderNever},
		{"", overrides, "xapp.example.org", contracts.RenderAuto},
		{"", overrides, "WWW.Example.ORG", contracts.RenderAuto},
		{"", overrides, "www.example.org:8080", contracts.RenderAuto},
		{"", overrides, "app.example.org.", contracts.RenderAlways},
		{"", overrides, "APP.example.org.:443", contracts.RenderAlways},
		{"", overrides, "spa.test", contracts.RenderAlways},
		{contracts.RenderAuto, overrides, "10.0.0.1:8000", contracts.RenderAuto},
		{contracts.RenderAlways, overrides, "[::1]:8080", contracts.RenderAlways},
	}
	for _, tt := range tests {
		p := validProfile()
		p.Render, p.RenderOverrides = tt.render, tt.overrides
		if got := p.RenderFor(tt.host); got != tt.want {
			t.Errorf("Profile{Render: %q, %d overrides}.RenderFor(%q) = %q, want %q", tt.render, len(tt.overrides), tt.host, got, tt.want)
		}
	}
}

// TestProfilePatchRender: a patch's render fields are absent (nil) unless
// given, and an empty list of overrides is given.
func TestProfilePatchRender(t *testing.T) {
	tests := []struct {
		body           string
		render, robots *string
		overrides      *[]contracts.RenderOverride
	}{
		{`{}`, nil, nil, nil},
		{`{"render":null,"render_overrides":null,"render_robots":null}`, nil, nil, nil},
		{`{"render":"auto","render_robots":"all"}`, ptr("auto"), ptr("all"), nil},
		{`{"render":""}`, ptr(""), nil, nil},
		{`{"render_overrides":[]}`, nil, nil, &[]contracts.RenderOverride{}},
		{`{"render_overrides":[{"domain":"example.org","render":"always"}]}`, nil, nil, &[]contracts.RenderOverride{{Domain: "example.org", Render: "always"}}},
	}
	for _, tt := range tests {
		var got contracts.ProfilePatch
		if err := decodeStrict([]byte(tt.body), &got); err != nil {
			t.Fatalf("decode %s: %v", tt.body, err)
		}
		want := contracts.ProfilePatch{Render: tt.render, RenderOverrides: tt.overrides, RenderRobots: tt.robots}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decode %s (-want +got):\n%s", tt.body, diff)
		}
	}
}

func TestProfileWithDefaults(t *testing.T) {
	urls := []string{"https://example.com/"}
	defaults := contracts.Politeness{
		MinDelayMS:  contracts.DefaultMinDelayMS,
		MaxDelayMS:  contracts.DefaultMaxDelayMS,
		DelayFactor: contracts.DefaultFactor,
		Robots:      contracts.RobotsObey,
	}
	tests := []struct {
		name string
		in   contracts.Profile
		want contracts.Profile
	}{
		{"zero", contracts.Profile{StartURLs: urls}, contracts.Profile{
			StartURLs: urls, Scope: contracts.ScopeHost, UserAgent: contracts.DefaultUserAgent, Politeness: defaults,
		}},
		{"full profile unchanged", fullProfile(), fullProfile()},
		// A Go Politeness is taken as it is: only the zero value means
		// "not given" (JSON decoding defaults absent fields one by one,
		// TestProfileDecodeDefaults).
		{"go politeness kept, empty robots obeys", contracts.Profile{StartURLs: urls, Politeness: contracts.Politeness{MinDelayMS: 100}}, contracts.Profile{
			StartURLs: urls, Scope: contracts.ScopeHost, UserAgent: contracts.DefaultUserAgent,
			Politeness: contracts.Politeness{MinDelayMS: 100, Robots: contracts.RobotsObey},
		}},
		{"max depth 0 kept", contracts.Profile{StartURLs: urls, MaxDepth: 0, Politeness: defaults}, contracts.Profile{
			StartURLs: urls, Scope: contracts.ScopeHost, UserAgent: contracts.DefaultUserAgent, Politeness: defaults,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.WithDefaults()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithDefaults(%+v) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(got, got.WithDefaults()); diff != "" {
				t.Errorf("WithDefaults is not idempotent on %+v (-once +twice):\n%s", got, diff)
			}
		})
	}
}

// decodeProfile decodes body as MCP does: strictly, then WithDefaults.
func decodeProfile(t *testing.T, body string) contracts.Profile {
	t.Helper()
	var p contracts.Profile
	if err := decodeStrict([]byte(body), &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p.WithDefaults()
}

// TestProfileDecodeDefaults: defaults apply field by field; an absent field
// takes its default and an explicit value, 0 included, is kept (defect 9:
// {"min_delay_ms":300} used to turn the adaptive delay off).
func TestProfileDecodeDefaults(t *testing.T) {
	pol := func(minMS, maxMS int, factor float64) contracts.Politeness {
		return contracts.Politeness{MinDelayMS: minMS, MaxDelayMS: maxMS, DelayFactor: factor, Robots: contracts.RobotsObey}
	}
	tests := []struct {
		name      string
		body      string // members after start_urls
		wantDepth int
		wantPol   contracts.Politeness
	}{
		{"absent", ``, 3, pol(500, 10000, 2)},
		{"null", `,"politeness":null,"max_depth":null`, 3, pol(500, 10000, 2)},
		{"empty politeness", `,"politeness":{}`, 3, pol(500, 10000, 2)},
		{"min delay only keeps factor and max", `,"politeness":{"min_delay_ms":300}`, 3, pol(300, 10000, 2)},
		{"min delay above default max raises max", `,"politeness":{"min_delay_ms":20000}`, 3, pol(20000, 20000, 2)},
		{"max delay below default min lowers min", `,"politeness":{"max_delay_ms":100}`, 3, pol(100, 100, 2)},
		{"factor 0 kept", `,"politeness":{"delay_factor":0}`, 3, pol(500, 10000, 0)},
		{"factor only", `,"politeness":{"delay_factor":3}`, 3, pol(500, 10000, 3)},
		{"explicit zeros kept", `,"politeness":{"min_delay_ms":0,"max_delay_ms":0,"delay_factor":0}`, 3, pol(0, 0, 0)},
		{"explicit zeros and empty robots kept", `,"politeness":{"min_delay_ms":0,"max_delay_ms":0,"delay_factor":0,"robots":""}`, 3, pol(0, 0, 0)},
		{"robots ignore", `,"politeness":{"robots":"ignore"}`, 3, contracts.Politeness{MinDelayMS: 500, MaxDelayMS: 10000, DelayFactor: 2, Robots: contracts.RobotsIgnore}},
		{"depth 0 kept", `,"max_depth":0`, 0, pol(500, 10000, 2)},
		{"depth 7", `,"max_depth":7`, 7, pol(500, 10000, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"start_urls":["https://example.com/"]` + tt.body + `}`
			got := decodeProfile(t, body)
			want := contracts.Profile{
				StartURLs: []string{"https://example.com/"}, MaxDepth: tt.wantDepth, Scope: contracts.DefaultScope,
				UserAgent: contracts.DefaultUserAgent, Politeness: tt.wantPol,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decode %s mismatch (-want +got):\n%s", body, diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate(decode %s) = %v", body, err)
			}
			// What MCP stores and sends on decodes to itself.
			data, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if again := decodeProfile(t, string(data)); !cmp.Equal(again, got) {
				t.Errorf("decode(marshal(%+v)) = %+v", got, again)
			}
		})
	}
	// Only two given delays can contradict each other, explicit 0 included.
	for _, body := range []string{
		`{"start_urls":["https://example.com/"],"politeness":{"min_delay_ms":300,"max_delay_ms":0}}`,
		`{"start_urls":["https://example.com/"],"politeness":{"min_delay_ms":300,"max_delay_ms":299}}`,
	} {
		var fe *contracts.FieldError
		if err := decodeProfile(t, body).Validate(); !errors.As(err, &fe) || fe.Field != "politeness.max_delay_ms" {
			t.Errorf("Validate(decode %s) = %v, want a FieldError for politeness.max_delay_ms", body, err)
		}
	}
	if p := decodeProfile(t, `{"start_urls":["https://example.com/"]}`); p.Scope != contracts.ScopeHost || p.MaxDepth != contracts.DefaultMaxDepth ||
		p.Politeness != contracts.DefaultPoliteness() {
		t.Errorf("absent fields = scope %q depth %d politeness %+v, want the documented defaults", p.Scope, p.MaxDepth, p.Politeness)
	}
}

// TestProfilePatchPoliteness: in a PATCH, absent politeness fields keep the
// crawl's current values, field by field.
func TestProfilePatchPoliteness(t *testing.T) {
	cur := contracts.Politeness{MinDelayMS: 250, MaxDelayMS: 5000, DelayFactor: 1.5, Robots: contracts.RobotsIgnore}
	tests := []struct {
		name string
		body string
		want contracts.Politeness
	}{
		{"no politeness", `{}`, cur},
		{"null politeness", `{"politeness":null}`, cur},
		{"empty politeness", `{"politeness":{}}`, cur},
		{"min delay only", `{"politeness":{"min_delay_ms":300}}`, contracts.Politeness{MinDelayMS: 300, MaxDelayMS: 5000, DelayFactor: 1.5, Robots: contracts.RobotsIgnore}},
		{"factor 0", `{"politeness":{"delay_factor":0}}`, contracts.Politeness{MinDelayMS: 250, MaxDelayMS: 5000, DelayFactor: 0, Robots: contracts.RobotsIgnore}},
		{"robots obey", `{"politeness":{"robots":"obey"}}`, contracts.Politeness{MinDelayMS: 250, MaxDelayMS: 5000, DelayFactor: 1.5, Robots: contracts.RobotsObey}},
		{"every field", `{"politeness":{"min_delay_ms":1,"max_delay_ms":2,"delay_factor":3,"robots":"obey"}}`, contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 2, DelayFactor: 3, Robots: contracts.RobotsObey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var patch contracts.ProfilePatch
			if err := decodeStrict([]byte(tt.body), &patch); err != nil {
				t.Fatalf("decode %s: %v", tt.body, err)
			}
			if got := patch.Politeness.Apply(cur); got != tt.want {
				t.Errorf("decode %s then Apply(%+v) = %+v, want %+v", tt.body, cur, got, tt.want)
			}
		})
	}
	var patch contracts.ProfilePatch
	if err := decodeStrict([]byte(`{"politeness":{"min_delay":1}}`), &patch); err == nil {
		t.Error("decode of an unknown politeness field in a patch succeeded, want an error")
	}
	// Raising the minimum above the current maximum is an error, not a
	// silent raise of the maximum.
	p := validProfile()
	p.Politeness = (&contracts.PolitenessPatch{MinDelayMS: ptr(20000)}).Apply(p.Politeness)
	var fe *contracts.FieldError
	if err := p.WithDefaults().Validate(); !errors.As(err, &fe) || fe.Field != "politeness.max_delay_ms" {
		t.Errorf("Validate(min raised above max) = %v, want a FieldError for politeness.max_delay_ms", err)
	}
}

// TestKnownDifferences pins down where encoding/json plus Validate and the
// schema disagree, so a change on either side is noticed. goAccepts
// differences are leniencies of the Go path that the schema, as the
// published contract, does not grant; schemaAccepts differences are rules
// the schema cannot express.
func TestKnownDifferences(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		body   string
		// goOK is whether strict decoding (plus WithDefaults().Validate()
		// for profiles) accepts body; the schema decides the other way.
		goOK bool
	}{
		{"null for a field", "profile", `{"start_urls": ["http://a"], "max_depth": null, "name": null, "politeness": null}`, true},
		{"field name in another case", "profile", `{"Start_URLs": ["http://a"], "MAX_DEPTH": 2}`, true},
		{"ipv6 zone in start url", "profile", `{"start_urls": ["http://[fe80::1%25eth0]/"]}`, true},
		{"delay factor below zero that rounds to zero", "profile", `{"start_urls": ["http://a"], "politeness": {"delay_factor": -1e-400}}`, true},
		{"nil hits marshal as null", "search_response", `{"v": 1, "query": "q", "total": 0, "offset": 0, "hits": null}`, true},
		{"nil crawls marshal as null", "crawl_list", `{"v": 1, "crawls": null}`, true},
		{"empty docs", "index_contract", `{"v": 1, "crawl_id": "c", "docs": []}`, true},
		{"version 2", "create_crawl_response", `{"v": 2, "crawl_id": "c", "state": "running"}`, true},
		{"failure reason null", "report", `{"crawl_id": "c", "report": "failure-reasons", "rows": [{"reason": null, "count": 1, "sample_urls": []}]}`, true},

		{"start url with port and no host", "profile", `{"start_urls": ["http://:80/"]}`, false},
		{"user agent of 300 two-byte characters", "profile", `{"start_urls": ["http://a"], "user_agent": "` + strings.Repeat("é", 300) + `"}`, false},
	}
	compiled := compileAll(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := goTypes[tt.schema]()
			goErr := decodeStrict([]byte(tt.body), v)
			if p, ok := v.(*contracts.Profile); ok && goErr == nil {
				goErr = p.WithDefaults().Validate()
			}
			if gotOK := goErr == nil; gotOK != tt.goOK {
				t.Errorf("Go path on %s: err = %v, want accepted = %v", tt.body, goErr, tt.goOK)
			}
			schemaErr := validateJSON(compiled[tt.schema], []byte(tt.body))
			if gotOK := schemaErr == nil; gotOK != !tt.goOK {
				t.Errorf("schema on %s: err = %v, want accepted = %v", tt.body, schemaErr, !tt.goOK)
			}
		})
	}
}

// hasIPv6Zone reports whether a start URL names an IPv6 zone, which
// net/url accepts and the "uri" format rejects (TestKnownDifferences).
func hasIPv6Zone(p contracts.Profile) bool {
	for _, s := range p.StartURLs {
		if u, err := url.Parse(s); err == nil && strings.Contains(u.Hostname(), "%") {
			return true
		}
	}
	return false
}

// sameValues reports whether every value in the raw JSON body is the value
// Go decoded into p: same member names, no nulls, no numbers Go rounded.
// Only such bodies are free of the Go leniencies of TestKnownDifferences.
func sameValues(tb testing.TB, raw []byte, p contracts.Profile) bool {
	tb.Helper()
	a, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return false
	}
	data, err := json.Marshal(p)
	if err != nil {
		tb.Fatalf("marshal %+v: %v", p, err)
	}
	b, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("parse marshalled profile %s: %v", data, err)
	}
	return subset(a, b)
}

// subset reports whether JSON value a equals b, except that objects in a
// may lack members of b.
func subset(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !subset(av, bv) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !subset(a[i], bs[i]) {
				return false
			}
		}
		return true
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		ar, okA := new(big.Rat).SetString(string(a))
		br, okB := new(big.Rat).SetString(string(bn))
		return okA && okB && ar.Cmp(br) == 0
	default: // string, bool, nil
		return a == b
	}
}

// FuzzProfileDecode feeds arbitrary bodies through MCP's path (strict
// decode, WithDefaults, Validate): it must never panic, and whenever
// Validate passes the schema must accept the profile too.
func FuzzProfileDecode(f *testing.F) {
	for _, kind := range []string{"valid", "invalid"} {
		paths, err := filepath.Glob(filepath.Join("testdata", kind, "profile", "*.json"))
		if err != nil {
			f.Fatalf("glob seeds: %v", err)
		}
		for _, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatalf("read seed: %v", err)
			}
			f.Add(data)
		}
	}
	for _, s := range []string{
		`{"start_urls":["http://a"],"politeness":{"min_delay_ms":20000}}`,
		`{"start_urls":["http://a"],"politeness":{"min_delay_ms":20000,"max_delay_ms":19999}}`,
		`{"start_urls":["http://a"],"politeness":{"delay_factor":3}}`,
		`{"start_urls":["http://a"],"politeness":{"delay_factor":1e-400}}`,
		`{"start_urls":["http://a"],"priority":9.0}`,
		`{"start_urls":["http://a"],"user_agent":"\u00e9\u00e9"}`,
		`{"start_urls":["http://a"]} {"x":1}`,
		`{"start_urls":["http://a"],"start_urls":["ftp://b"]}`,
		`{"politeness":{"min_delay_ms":1},"politeness":{"max_delay_ms":2},"start_urls":["http://a"]}`,
		`{"start_urls":["http://[fe80::1%25en0]/"]}`,
		`{"START_URLS":["http://a"],"max_depth":null}`,
		`{"start_urls":["http://a\u0000"]}`,
		`{"start_urls":["http://a"],"crawl_must_match":"(?i)\\d+\\z"}`,
		``, `null`, `[]`, `{`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	sch := compileAll(f)["profile"]
	f.Fuzz(func(t *testing.T, data []byte) {
		var p contracts.Profile
		if err := decodeStrict(data, &p); err != nil {
			return
		}
		d := p.WithDefaults()
		if diff := cmp.Diff(d, d.WithDefaults()); diff != "" {
			t.Fatalf("WithDefaults is not idempotent on %+v (-once +twice):\n%s", d, diff)
		}
		if err := d.Validate(); err != nil {
			var fe *contracts.FieldError
			if !errors.As(err, &fe) || fe.Field == "" || fe.Reason == "" {
				t.Fatalf("Validate(%+v) = %v, want a *FieldError with field and reason", d, err)
			}
			return
		}
		if hasIPv6Zone(d) {
			return
		}
		if err := validateValue(sch, p); err != nil {
			t.Fatalf("schema rejects %+v (decoded from %q), which Validate accepts: %v", p, data, err)
		}
		if err := validateValue(sch, d); err != nil {
			t.Fatalf("schema rejects defaulted %+v, which Validate accepts: %v", d, err)
		}
		if sameValues(t, data, p) {
			if err := validateJSON(sch, data); err != nil {
				t.Fatalf("schema rejects body %q, which Validate accepts: %v", data, err)
			}
		}
	})
}

func TestDedupeScope(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    contracts.Profile
		want string
	}{
		{"default with a collection", contracts.Profile{Collection: []string{"monthly", "other"}}, "collection:monthly"},
		{"collection", contracts.Profile{Dedupe: contracts.DedupeCollection, Collection: []string{"monthly"}}, "collection:monthly"},
		{"default without a collection is the crawl", contracts.Profile{}, "crawl:c1"},
		{"crawl with a collection", contracts.Profile{Dedupe: contracts.DedupeCrawl, Collection: []string{"monthly"}}, "crawl:c1"},
		{"off", contracts.Profile{Dedupe: contracts.DedupeOff, Collection: []string{"monthly"}}, ""},
	} {
		if got := tc.p.DedupeScope("c1"); got != tc.want {
			t.Errorf("%s: DedupeScope(%q) = %q, want %q", tc.name, "c1", got, tc.want)
		}
	}
}

// TestPolitenessPatchEmptyRobotsKeeps: an empty robots in a PATCH keeps the
// current policy (profile_patch.schema.json), rather than resetting an
// "ignore" to the default "obey".
func TestPolitenessPatchEmptyRobotsKeeps(t *testing.T) {
	empty, obey := "", contracts.RobotsObey
	cur := contracts.Politeness{MinDelayMS: 100, MaxDelayMS: 1000, DelayFactor: 1, Robots: contracts.RobotsIgnore}
	if got := (&contracts.PolitenessPatch{Robots: &empty}).Apply(cur); got.Robots != contracts.RobotsIgnore {
		t.Errorf("patch robots \"\" on %q gave %q, want it kept", contracts.RobotsIgnore, got.Robots)
	}
	if got := (&contracts.PolitenessPatch{Robots: &obey}).Apply(cur); got.Robots != contracts.RobotsObey {
		t.Errorf("patch robots %q gave %q", obey, got.Robots)
	}
}
