package grid

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestCrawlDefaultsMatchAPI: `grid crawl` and the API have one set of
// defaults (defect 9: the CLI used to crawl scope domain to depth 3, the API
// scope host to depth 0). The profile built from grid crawl's flags and the
// JSON a user would post for the same settings become the same crawl
// profile in MCP.
func TestCrawlDefaultsMatchAPI(t *testing.T) {
	const start = "http://127.0.0.1:1/"
	tests := []struct {
		name string
		args []string
		body string
	}{
		{"defaults", nil, `{"start_urls":["` + start + `"]}`},
		{"min delay", []string{"--min-delay-ms", "300"}, `{"start_urls":["` + start + `"],"politeness":{"min_delay_ms":300}}`},
		{"min delay above default max", []string{"--min-delay-ms", "20000"}, `{"start_urls":["` + start + `"],"politeness":{"min_delay_ms":20000}}`},
		{"depth 0", []string{"--depth", "0"}, `{"start_urls":["` + start + `"],"max_depth":0}`},
		{"scope and pages", []string{"--scope", "domain", "--max-pages", "7"}, `{"start_urls":["` + start + `"],"scope":"domain","max_pages":7}`},
		{"sitemaps off", []string{"--sitemaps=false"}, `{"start_urls":["` + start + `"],"sitemaps":false}`},
		{"sitemap depth", []string{"--depth", "2", "--sitemap-depth", "1"}, `{"start_urls":["` + start + `"],"max_depth":2,"sitemap_depth":1}`},
		{"recrawl interval", []string{"--recrawl", "1d12h"}, `{"start_urls":["` + start + `"],"recrawl":{"interval":"1d12h"}}`},
		{"recrawl adaptive", []string{"--recrawl", "adaptive:1h-30d"}, `{"start_urls":["` + start + `"],"recrawl":{"adaptive":{"min":"1h","max":"30d"}}}`},
	}
	_, api := startGrid(t, testConfig(t, t.TempDir(), ""))
	create := func(t *testing.T, body []byte) contracts.Profile {
		t.Helper()
		var created contracts.CreateCrawlResponse
		if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", json.RawMessage(body), &created); code != http.StatusCreated {
			t.Fatalf("POST %s = %d", body, code)
		}
		var st contracts.CrawlStatus
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID, nil, &st); code != http.StatusOK {
			t.Fatalf("GET crawl = %d", code)
		}
		return st.Profile
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, o := newCrawlFlags(io.Discard)
			if err := fs.Parse(append(tt.args, start)); err != nil {
				t.Fatal(err)
			}
			p, err := o.profile(fs, fs.Args())
			if err != nil {
				t.Fatal(err)
			}
			cliBody := mustJSON(t, p)
			cli, fromAPI := create(t, cliBody), create(t, []byte(tt.body))
			if diff := cmp.Diff(fromAPI, cli); diff != "" {
				t.Errorf("grid crawl %v (body %s) and the API (body %s) differ (-api +cli):\n%s", tt.args, cliBody, tt.body, diff)
			}
		})
	}
	// The defaults themselves, as documented.
	fs, o := newCrawlFlags(io.Discard)
	if err := fs.Parse([]string{start}); err != nil {
		t.Fatal(err)
	}
	p, err := o.profile(fs, fs.Args())
	if err != nil {
		t.Fatal(err)
	}
	if p := create(t, mustJSON(t, p)); p.Scope != contracts.ScopeHost || p.MaxDepth != 3 || p.Politeness != contracts.DefaultPoliteness() {
		t.Errorf("default crawl = scope %q depth %d politeness %+v, want host, 3 and %+v", p.Scope, p.MaxDepth, p.Politeness, contracts.DefaultPoliteness())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
