package mcp

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestCreateCompletesScheme posts profiles whose start URLs lack a scheme,
// as the dashboard form sends them, and checks that the crawl starts from
// the URLs contracts.WithScheme makes of them, as grid crawl would.
func TestCreateCompletesScheme(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"host and path", []string{"example.org/path"}, []string{"https://example.org/path"}},
		{"address and port", []string{" 127.0.0.1:8000 "}, []string{"http://127.0.0.1:8000/"}},
		{"mixed", []string{"https://a.test/x", "b.test"}, []string{"https://a.test/x", "https://b.test/"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var created contracts.CreateCrawlResponse
			if code := l.do(t, "POST", "", map[string]any{"start_urls": tc.in}, &created); code != 201 {
				t.Fatalf("POST start_urls %q = %d, want 201", tc.in, code)
			}
			var st contracts.CrawlStatus
			if code := l.do(t, "GET", "/"+created.CrawlID, nil, &st); code != 200 {
				t.Fatalf("GET crawl = %d, want 200", code)
			}
			if diff := cmp.Diff(tc.want, st.Profile.StartURLs); diff != "" {
				t.Errorf("start URLs of POST %q (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
