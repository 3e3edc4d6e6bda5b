package mcp

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestRenderSettings starts a crawl with render settings through the API
// and changes them with PATCH: each change is a new profile version with the
// render mode it asks for; a patch that changes nothing makes no version,
// and an invalid one answers 400 naming the field and changes nothing.
func TestRenderSettings(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	var created contracts.CreateCrawlResponse
	body := map[string]any{"start_urls": []string{"http://a.test/"}, "sitemaps": false, "render": "auto",
		"render_overrides": []map[string]string{{"domain": "app.a.test", "render": "always"}}}
	if code := l.do(t, http.MethodPost, "", body, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d, want 201", code)
	}
	id := created.CrawlID
	hosts := []string{"a.test", "www.a.test:8080", "app.a.test", "x.app.a.test", "notapp.a.test", "b.test"}
	modes := func(p contracts.Profile) []string {
		out := make([]string, len(hosts))
		for i, h := range hosts {
			out[i] = p.RenderFor(h)
		}
		return out
	}
	const never, always, auto = contracts.RenderNever, contracts.RenderAlways, contracts.RenderAuto
	if diff := cmp.Diff([]string{auto, auto, always, always, auto, auto}, modes(l.status(t, id).Profile)); diff != "" {
		t.Fatalf("render modes of the new crawl (-want +got):\n%s", diff)
	}

	steps := []struct {
		name        string
		patch       map[string]any
		wantVersion int
		wantModes   []string
		wantRobots  string
	}{
		{"render always", map[string]any{"render": "always"}, 1, []string{always, always, always, always, always, always}, ""},
		{"overrides replaced", map[string]any{"render_overrides": []map[string]string{{"domain": "A.test", "render": "never"}, {"domain": "x.app.a.test", "render": "auto"}}},
			2, []string{never, never, never, auto, never, always}, ""},
		{"same render", map[string]any{"render": "always"}, 2, []string{never, never, never, auto, never, always}, ""},
		{"overrides cleared", map[string]any{"render_overrides": []any{}}, 3, []string{always, always, always, always, always, always}, ""},
		{"no overrides cleared again", map[string]any{"render_overrides": []any{}}, 3, []string{always, always, always, always, always, always}, ""},
		{"render default", map[string]any{"render": ""}, 4, []string{never, never, never, never, never, never}, ""},
		{"render never is the default", map[string]any{"render": "never"}, 4, []string{never, never, never, never, never, never}, ""},
		{"render robots all", map[string]any{"render_robots": "all"}, 5, []string{never, never, never, never, never, never}, contracts.RenderRobotsAll},
	}
	for _, s := range steps {
		var st contracts.CrawlStatus
		if code := l.do(t, http.MethodPatch, "/"+id, s.patch, &st); code != http.StatusOK {
			t.Fatalf("%s: PATCH %v = %d, want 200", s.name, s.patch, code)
		}
		p := l.status(t, id).Profile
		if p.Version != s.wantVersion || p.RenderRobots != s.wantRobots {
			t.Errorf("%s: version %d, render_robots %q; want %d, %q", s.name, p.Version, p.RenderRobots, s.wantVersion, s.wantRobots)
		}
		if diff := cmp.Diff(s.wantModes, modes(p)); diff != "" {
			t.Errorf("%s: render modes of %v (-want +got):\n%s", s.name, hosts, diff)
		}
	}

	overrides := make([]contracts.RenderOverride, contracts.MaxRenderOverrides+1)
	for i := range overrides {
		overrides[i] = contracts.RenderOverride{Domain: fmt.Sprintf("h%d.a.test", i), Render: auto}
	}
	invalid := []struct {
		name      string
		patch     map[string]any
		wantField string
	}{
		{"render unknown", map[string]any{"render": "headless"}, "render"},
		{"too many overrides", map[string]any{"render_overrides": overrides}, "render_overrides"},
		{"fourth domain a URL", map[string]any{"render_overrides": append(overrides[:3:3], contracts.RenderOverride{Domain: "http://a.test/", Render: auto})}, "render_overrides[3].domain"},
		{"fourth render unknown", map[string]any{"render_overrides": append(overrides[:3:3], contracts.RenderOverride{Domain: "z.test", Render: "maybe"})}, "render_overrides[3].render"},
		{"render robots unknown", map[string]any{"render_robots": "obey"}, "render_robots"},
		{"valid render with an invalid robots", map[string]any{"render": "auto", "render_robots": "none"}, "render_robots"},
	}
	for _, tt := range invalid {
		var e contracts.ErrorResponse
		if code := l.do(t, http.MethodPatch, "/"+id, tt.patch, &e); code != http.StatusBadRequest || e.Field != tt.wantField {
			t.Errorf("%s: PATCH = %d %+v, want 400 naming %s", tt.name, code, e, tt.wantField)
		}
	}
	if p := l.status(t, id).Profile; p.Version != 5 || p.Render != "" || p.RenderOverrides != nil {
		t.Errorf("after invalid patches: version %d, render %q, overrides %v; want version 5 unchanged", p.Version, p.Render, p.RenderOverrides)
	}
}
