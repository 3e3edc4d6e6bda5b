package mcp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
)

// postKeyed sends body to POST /api/v1/crawls of base with the Idempotency-Key
// values keys and returns the status, the created crawl id and the error
// body's field.
func postKeyed(t *testing.T, base string, keys []string, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", base, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		CrawlID string `json:"crawl_id"`
		Field   string `json:"field"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("decode answer: %v", err)
	}
	if res.StatusCode == http.StatusCreated && res.Header.Get("Location") != "/api/v1/crawls/"+out.CrawlID {
		t.Errorf("Location = %q, want /api/v1/crawls/%s", res.Header.Get("Location"), out.CrawlID)
	}
	return res.StatusCode, out.CrawlID, out.Field
}

func TestIdempotencyKey(t *testing.T) {
	for _, b := range storeBackends() {
		t.Run(b.name, func(t *testing.T) { testIdempotencyKey(t, newLifecycleMCPOn(t, lifecycleConfig(), b.new(t))) })
	}
}

func testIdempotencyKey(t *testing.T, l *lifecycleMCP) {
	const body = `{"start_urls":["https://a.test/"],"max_depth":1}`
	code, first, _ := postKeyed(t, l.api, []string{`"k-1"`}, body)
	if code != http.StatusCreated || first == "" {
		t.Fatalf("first POST with a key = %d %q, want 201 and an id", code, first)
	}
	// A crawl whose key is older than the window does not answer for it.
	old := time.Now().Add(-idempotencyWindow - time.Hour)
	p, err := decodeProfile(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	p.Idempotency = &contracts.Idempotency{Key: "k-old", RequestSHA256: strings.Repeat("0", 64)}
	if err := l.set.Profiles.Put(t.Context(), profiles.Crawl{ID: "old-crawl", Profile: p, State: contracts.CrawlFinished, CreatedAt: old}); err != nil {
		t.Fatal(err)
	}
	// Another MCP on the same stores: as after a restart, or in a grid.
	other := httptest.NewServer(New(Config{}, Deps{Crawls: l.co, Queue: l.set.Queue, Tx: l.set.Tx, Profiles: l.set.Profiles,
		Search: l.set.Search, Assets: l.set.Assets, HCF: l.set.HCF, Embedded: true}).Handler())
	t.Cleanup(other.Close)
	otherAPI := other.URL + "/api/v1/crawls"

	tests := []struct {
		name      string
		base      string
		keys      []string
		body      string
		wantCode  int
		wantID    string // "" any; "new" an id other than first
		wantField string
	}{
		{"same key and body", l.api, []string{`"k-1"`}, body, http.StatusCreated, first, ""},
		{"same key bare", l.api, []string{"k-1"}, body, http.StatusCreated, first, ""},
		{"same key after a restart", otherAPI, []string{`"k-1"`}, body, http.StatusCreated, first, ""},
		{"same key, other body", l.api, []string{`"k-1"`}, `{"start_urls":["https://b.test/"]}`, http.StatusUnprocessableEntity, "", "Idempotency-Key"},
		{"same key, body with other spacing", l.api, []string{`"k-1"`}, body + " ", http.StatusUnprocessableEntity, "", "Idempotency-Key"},
		{"no key", l.api, nil, body, http.StatusCreated, "new", ""},
		{"other key", l.api, []string{`"k-2"`}, body, http.StatusCreated, "new", ""},
		{"key past the window", l.api, []string{`"k-old"`}, body, http.StatusCreated, "new", ""},
		{"empty key", l.api, []string{`""`}, body, http.StatusBadRequest, "", "Idempotency-Key"},
		{"two keys", l.api, []string{`"a"`, `"b"`}, body, http.StatusBadRequest, "", "Idempotency-Key"},
		{"key too long", l.api, []string{strings.Repeat("x", 256)}, body, http.StatusBadRequest, "", "Idempotency-Key"},
		{"idempotency in the body", l.api, nil, `{"start_urls":["https://a.test/"],"idempotency":{"key":"k","request_sha256":"` + strings.Repeat("0", 64) + `"}}`, http.StatusBadRequest, "", "idempotency"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, id, field := postKeyed(t, tc.base, tc.keys, tc.body)
			if code != tc.wantCode || field != tc.wantField {
				t.Errorf("POST with keys %q = %d field %q, want %d field %q", tc.keys, code, field, tc.wantCode, tc.wantField)
			}
			switch {
			case tc.wantID == "new" && (id == "" || id == first || id == "old-crawl"):
				t.Errorf("POST with keys %q made crawl %q, want a new one", tc.keys, id)
			case tc.wantID != "" && tc.wantID != "new" && id != tc.wantID:
				t.Errorf("POST with keys %q answered crawl %q, want %q", tc.keys, id, tc.wantID)
			}
		})
	}

	// A duplicate while the first request is still being answered.
	if !l.m.startCreating("k-busy") {
		t.Fatal("startCreating of a new key = false")
	}
	code, _, field := postKeyed(t, l.api, []string{`"k-busy"`}, body)
	l.m.doneCreating("k-busy")
	if code != http.StatusConflict || field != "Idempotency-Key" {
		t.Errorf("concurrent duplicate POST = %d field %q, want 409 Idempotency-Key", code, field)
	}
	if code, id, _ := postKeyed(t, l.api, []string{`"k-busy"`}, body); code != http.StatusCreated || id == "" {
		t.Errorf("POST after the first finished = %d %q, want 201", code, id)
	}
	// first, no key, k-2, k-old's new one, k-busy, and old-crawl itself.
	if cs, err := l.set.Profiles.List(t.Context()); err != nil || len(cs) != 6 {
		t.Errorf("stored crawls = %d (%v), want 6", len(cs), err)
	}
}
