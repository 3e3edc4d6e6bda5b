package mcp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/contracts/schemas/openapitest"
	"github.com/gridcrawl/gridcrawl/services/internal/yacy"
)

// goWords are traces of Go in an error text: type names, package
// qualifiers and encoding/json's own phrasing.
var goWords = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|bool|struct|string\]|time\.Duration)\b|\[\]|map\[|contracts\.|\bGo (struct|value)|json: |invalid : `)

// TestRequestErrors sends wrong requests and checks the JSON error bodies:
// the status, the field as a JSON path (never empty), a text in JSON's words
// (never a Go type name), the Allow header of a 405, WWW-Authenticate on a
// 401, and that each answer is one the OpenAPI document describes.
func TestRequestErrors(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	l := newLifecycleMCP(t, lifecycleConfig())
	base := strings.TrimSuffix(l.api, "/api/v1/crawls")
	id := l.create(t, contracts.Profile{})
	secured := httptest.NewServer(New(Config{Token: "s3cret"}, Deps{}).Handler())
	t.Cleanup(secured.Close)
	const ok = `{"start_urls":["http://a.test/"]`

	tests := []struct {
		name         string
		server       string // base URL; "" is the embedded MCP without a token
		method, path string
		body         string
		wantStatus   int
		wantField    string // "" wants no field
		wantError    string // a part of the error text
		wantHeader   [2]string
	}{
		{"empty profile body", "", "POST", "/api/v1/crawls", "", 400, "", "request body is empty", [2]string{}},
		{"blank profile body", "", "POST", "/api/v1/crawls", " \n", 400, "", "request body is empty", [2]string{}},
		{"profile not an object", "", "POST", "/api/v1/crawls", `[1]`, 400, "", "request body must be a JSON object, not an array", [2]string{}},
		{"profile a string", "", "POST", "/api/v1/crawls", `"x"`, 400, "", "request body must be a JSON object, not a string", [2]string{}},
		{"start_urls a string", "", "POST", "/api/v1/crawls", `{"start_urls":"http://a.test/"}`, 400, "start_urls", "must be an array of strings, not a string", [2]string{}},
		{"start_urls element a number", "", "POST", "/api/v1/crawls", `{"start_urls":["http://a.test/",1]}`, 400, "start_urls[1]", "must be a string, not a number", [2]string{}},
		{"start url words", "", "POST", "/api/v1/crawls", `{"start_urls":["http://a.test/","foo bar"]}`, 400, "start_urls[1]", `invalid start_urls[1]: "foo bar" is not a URL: it has white space inside`, [2]string{}},
		{"start url bad escape", "", "POST", "/api/v1/crawls", `{"start_urls":["a%zz.test"]}`, 400, "start_urls[0]", `"https://a%zz.test" is not a URL: invalid URL escape`, [2]string{}},
		{"max_depth a string", "", "POST", "/api/v1/crawls", ok + `,"max_depth":"3"}`, 400, "max_depth", "must be an integer, not a string", [2]string{}},
		{"max_depth a fraction", "", "POST", "/api/v1/crawls", ok + `,"max_depth":1.5}`, 400, "max_depth", "invalid max_depth: must be a whole number, not 1.5", [2]string{}},
		{"max_depth a fraction with exponent", "", "POST", "/api/v1/crawls", ok + `,"max_depth":2.55e1}`, 400, "max_depth", "must be a whole number, not 2.55e1", [2]string{}},
		{"max_pages too large", "", "POST", "/api/v1/crawls", ok + `,"max_pages":99999999999999999999}`, 400, "max_pages", "invalid max_pages: 99999999999999999999 is out of range: at most 9223372036854775807", [2]string{}},
		{"max_pages too large as exponent", "", "POST", "/api/v1/crawls", ok + `,"max_pages":1e400}`, 400, "max_pages", "1e400 is out of range: at most 9223372036854775807", [2]string{}},
		{"total budget too small", "", "POST", "/api/v1/crawls", ok + `,"budget":{"overrides":[{"domain":"a.test","total_budget":-99999999999999999999}]}}`, 400, "budget.overrides[0].total_budget", "-99999999999999999999 is out of range: at least -9223372036854775808", [2]string{}},
		{"max_pages whole but a second field a fraction", "", "POST", "/api/v1/crawls", ok + `,"max_pages":1e6,"priority":0.5}`, 400, "priority", "must be a whole number, not 0.5", [2]string{}},
		{"politeness a number", "", "POST", "/api/v1/crawls", ok + `,"politeness":5}`, 400, "politeness", "must be an object, not a number", [2]string{}},
		{"politeness delay a string", "", "POST", "/api/v1/crawls", ok + `,"politeness":{"min_delay_ms":"3"}}`, 400, "politeness.min_delay_ms", "must be an integer, not a string", [2]string{}},
		{"politeness factor a string", "", "POST", "/api/v1/crawls", ok + `,"politeness":{"delay_factor":"2"}}`, 400, "politeness.delay_factor", "must be a number, not a string", [2]string{}},
		{"budget flag a string", "", "POST", "/api/v1/crawls", ok + `,"budget":{"hold_queues":"yes"}}`, 400, "budget.hold_queues", "must be true or false, not a string", [2]string{}},
		{"override budget a string", "", "POST", "/api/v1/crawls", ok + `,"budget":{"overrides":[{"domain":"a.test"},{"domain":"b.test","total_budget":"9"}]}}`, 400, "budget.overrides[1].total_budget", "must be an integer, not a string", [2]string{}},
		{"start_urls nested array", "", "POST", "/api/v1/crawls", `{"start_urls":["http://a.test/",["http://b.test/"]]}`, 400, "start_urls[1]", "must be a string, not an array", [2]string{}},
		{"collection not an array", "", "POST", "/api/v1/crawls", ok + `,"collection":{"a":1}}`, 400, "collection", "must be an array of strings, not an object", [2]string{}},
		{"unknown top field", "", "POST", "/api/v1/crawls", ok + `,"depth":3}`, 400, "depth", "unknown field; known fields here are budget, collection, crawl_must_match", [2]string{}},
		{"unknown politeness field", "", "POST", "/api/v1/crawls", ok + `,"politeness":{"min_delay":3}}`, 400, "politeness.min_delay", "known fields here are delay_factor, max_delay_ms, min_delay_ms, robots", [2]string{}},
		{"unknown empty field name", "", "POST", "/api/v1/crawls", ok + `,"":1}`, 400, `[""]`, "unknown field", [2]string{}},
		{"unknown dotted field name", "", "POST", "/api/v1/crawls", ok + `,"politeness":{"a.b":1}}`, 400, `politeness["a.b"]`, "unknown field", [2]string{}},
		{"unknown override field", "", "POST", "/api/v1/crawls", ok + `,"budget":{"overrides":[{"domain":"a.test"},{"host":"b"}]}}`, 400, "budget.overrides[1].host", "unknown field", [2]string{}},
		{"syntax error", "", "POST", "/api/v1/crawls", "{\n\"start_urls\": [\"http://a.test/\"],\n}", 400, "", "request body is not valid JSON: invalid character '}' looking for beginning of object key string at line 3, column 1", [2]string{}},
		{"truncated", "", "POST", "/api/v1/crawls", ok, 400, "", "request body ends in the middle of its JSON value", [2]string{}},
		{"trailing data", "", "POST", "/api/v1/crawls", ok + `} {}`, 400, "", "request body has data after its JSON value", [2]string{}},
		{"too large", "", "POST", "/api/v1/crawls", ok + `,"name":"` + strings.Repeat("x", maxProfileBytes) + `"}`, 400, "", "request body is larger than 4 MiB", [2]string{}},
		{"invalid profile value", "", "POST", "/api/v1/crawls", ok + `,"max_depth":101}`, 400, "max_depth", "invalid max_depth: must be between 0 and 100", [2]string{}},
		{"render unknown", "", "POST", "/api/v1/crawls", ok + `,"render":"headless"}`, 400, "render", `invalid render: must be "never", "always" or "auto"`, [2]string{}},
		{"render override domain with a port", "", "POST", "/api/v1/crawls", ok + `,"render_overrides":[{"domain":"a.test","render":"auto"},{"domain":"b.test:80","render":"auto"}]}`, 400, "render_overrides[1].domain", "must be a host or domain name", [2]string{}},
		{"render override without render", "", "POST", "/api/v1/crawls", ok + `,"render_overrides":[{"domain":"a.test"}]}`, 400, "render_overrides[0].render", "", [2]string{}},
		{"render robots unknown", "", "POST", "/api/v1/crawls", ok + `,"render_robots":"none"}`, 400, "render_robots", `must be "pages" or "all"`, [2]string{}},
		{"render a boolean", "", "POST", "/api/v1/crawls", ok + `,"render":true}`, 400, "render", "must be a string, not true", [2]string{}},
		{"empty patch body", "", "PATCH", "/api/v1/crawls/" + id, "", 400, "", "request body is empty", [2]string{}},
		{"patch delay a string", "", "PATCH", "/api/v1/crawls/" + id, `{"politeness":{"min_delay_ms":"x"}}`, 400, "politeness.min_delay_ms", "must be an integer, not a string", [2]string{}},
		{"patch delay a fraction", "", "PATCH", "/api/v1/crawls/" + id, `{"politeness":{"min_delay_ms":1.5}}`, 400, "politeness.min_delay_ms", "must be a whole number, not 1.5", [2]string{}},
		{"patch delay too large", "", "PATCH", "/api/v1/crawls/" + id, `{"politeness":{"min_delay_ms":1e19}}`, 400, "politeness.min_delay_ms", "1e19 is out of range: at most 9223372036854775807", [2]string{}},
		{"patch trailing data", "", "PATCH", "/api/v1/crawls/" + id, `{"politeness":{"min_delay_ms":700}} {"x":1}`, 400, "", "request body has data after its JSON value", [2]string{}},
		{"patch unknown field", "", "PATCH", "/api/v1/crawls/" + id, `{"max_depth":3}`, 400, "max_depth", "unknown field; known fields here are budget, dedupe, politeness", [2]string{}},
		{"patch unknown budget field", "", "PATCH", "/api/v1/crawls/" + id, `{"budget":{"max_cost":1}}`, 400, "budget.max_cost", "unknown field", [2]string{}},
		{"patch render unknown", "", "PATCH", "/api/v1/crawls/" + id, `{"render":"sometimes"}`, 400, "render", "invalid render", [2]string{}},
		{"patch render override twice", "", "PATCH", "/api/v1/crawls/" + id, `{"render_overrides":[{"domain":"a.test","render":"auto"},{"domain":"A.test","render":"never"}]}`, 400, "render_overrides[1].domain", "already render_overrides[0]", [2]string{}},
		{"patch render robots unknown", "", "PATCH", "/api/v1/crawls/" + id, `{"render_robots":"some"}`, 400, "render_robots", "invalid render_robots", [2]string{}},
		{"dedupe unknown", "", "POST", "/api/v1/crawls", ok + `,"dedupe":"url"}`, 400, "dedupe", `invalid dedupe: must be "off", "crawl" or "collection"`, [2]string{}},
		{"patch dedupe unknown", "", "PATCH", "/api/v1/crawls/" + id, `{"dedupe":"always"}`, 400, "dedupe", "invalid dedupe", [2]string{}},
		{"patch of nothing", "", "PATCH", "/api/v1/crawls/" + id, `{}`, 400, "", "nothing to change", [2]string{}},
		{"patch of an unknown crawl", "", "PATCH", "/api/v1/crawls/nope", `{"budget":{}}`, 404, "", "no such crawl", [2]string{}},
		{"unknown crawl", "", "GET", "/api/v1/crawls/nope", "", 404, "", "no such crawl", [2]string{}},
		{"search without q", "", "GET", "/api/v1/search", "", 400, "q", "query parameter q is required", [2]string{}},
		{"crawl log of an unknown crawl", "", "GET", "/api/v1/crawls/nope/urls", "", 404, "", "no such crawl", [2]string{}},
		{"crawl log bad status", "", "GET", "/api/v1/crawls/" + id + "/urls?status=done", "", 400, "status", "", [2]string{}},
		{"crawl log bad limit", "", "GET", "/api/v1/crawls/" + id + "/urls?limit=x", "", 400, "limit", "", [2]string{}},
		{"crawl log bad cursor", "", "GET", "/api/v1/crawls/" + id + "/urls?cursor=%25%25", "", 400, "cursor", "", [2]string{}},
		{"unknown url", "", "GET", "/api/v1/crawls/" + id + "/urls?url=http://z.test/", "", 404, "url", "", [2]string{}},
		{"unknown report", "", "GET", "/api/v1/crawls/" + id + "/reports/domains", "", 404, "name", "failure-reasons", [2]string{}},
		{"warc without key", "", "GET", "/api/v1/crawls/" + id + "/warc", "", 400, "key", "", [2]string{}},
		{"timeline of an unknown crawl", "", "GET", "/api/v1/crawls/nope/timeline", "", 404, "", "no such crawl", [2]string{}},
		{"unknown path", "", "GET", "/api/v1/nothing", "", 404, "", "no endpoint at /api/v1/nothing", [2]string{}},
		{"unknown root path", "", "GET", "/favicon.ico", "", 404, "", "no endpoint at /favicon.ico", [2]string{}},
		{"unknown hcf path", "", "GET", "/hcf/p/f/s/s1/zz", "", 404, "", "no endpoint at /hcf/p/f/s/s1/zz", [2]string{}},
		{"wrong method on a crawl", "", "PUT", "/api/v1/crawls/" + id, "{}", 405, "", "method PUT is not allowed on /api/v1/crawls/" + id + ": use DELETE, GET, HEAD, PATCH", [2]string{"Allow", "DELETE, GET, HEAD, PATCH"}},
		{"wrong method on the frontier", "", "POST", "/api/v1/frontier", "", 405, "", "use GET, HEAD", [2]string{"Allow", "GET, HEAD"}},
		{"wrong method on crawls", "", "DELETE", "/api/v1/crawls", "", 405, "", "use GET, HEAD, POST", [2]string{"Allow", "GET, HEAD, POST"}},
		{"wrong method on hcf", "", "PUT", "/hcf/p/f/list", "", 405, "", "use GET, HEAD", [2]string{"Allow", "GET, HEAD"}},
		{"no token", secured.URL, "GET", "/api/v1/crawls", "", 401, "", "missing or wrong API token", [2]string{"WWW-Authenticate", `Bearer realm="gridcrawl"`}},
		{"no token on an unknown path", secured.URL, "GET", "/nothing", "", 401, "", "missing or wrong API token", [2]string{"WWW-Authenticate", `Basic realm="gridcrawl"`}},
		{"no token for the document", secured.URL, "GET", openAPIPath, "", 401, "", "missing or wrong API token", [2]string{"WWW-Authenticate", "Bearer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.server
			if srv == "" {
				srv = base
			}
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("%s %s = %d, want %d: %s", tt.method, tt.path, resp.StatusCode, tt.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q is not JSON: %v", body, err)
			}
			msg, _ := got["error"].(string)
			if !strings.Contains(msg, tt.wantError) {
				t.Errorf("error = %q, want it to contain %q", msg, tt.wantError)
			}
			if w := goWords.FindString(msg); w != "" {
				t.Errorf("error %q speaks Go (%q)", msg, w)
			}
			field, hasField := got["field"]
			switch {
			case tt.wantField == "" && hasField:
				t.Errorf("field = %q, want none", field)
			case tt.wantField != "" && field != tt.wantField:
				t.Errorf("field = %v, want %q", field, tt.wantField)
			}
			if name := tt.wantHeader[0]; name != "" && !strings.Contains(resp.Header.Get(name), tt.wantHeader[1]) {
				t.Errorf("%s = %q, want it to contain %q", name, resp.Header.Get(name), tt.wantHeader[1])
			}
			if err := doc.Validate(tt.method, req.URL.Path, resp.StatusCode, resp.Header, body); err != nil {
				t.Errorf("the OpenAPI document does not describe the answer: %v", err)
			}
		})
	}
}

// TestCompatibleErrorsKeepTheirFormats checks that the YaCy-compatible
// crawl start keeps YaCy Grid's error shape, also for a wrong method, and
// that its answers are what the OpenAPI document says.
func TestCompatibleErrorsKeepTheirFormats(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	l := newLifecycleMCP(t, lifecycleConfig())
	base := strings.TrimSuffix(l.api, "/api/v1/crawls")
	tests := []struct {
		name, method, query string
		wantStatus          int
		wantKeys            []string
	}{
		{"wrong method", "PUT", "", 405, []string{"success", "comment", "error"}},
		{"bad depth", "GET", "?crawlingURL=http://a.test/&crawlingDepth=x", 400, []string{"success", "comment", "error", "field"}},
		{"started", "GET", "?crawlingURL=http://a.test/", 200, []string{"success", "crawl_id", "unsupported"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, base+yacy.CrawlStartPath+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s = %d, want %d: %s", tt.method, resp.StatusCode, tt.wantStatus, body)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			for _, k := range tt.wantKeys {
				if _, ok := got[k]; !ok {
					t.Errorf("answer %s has no %q", body, k)
				}
			}
			if err := doc.Validate(tt.method, yacy.CrawlStartPath, resp.StatusCode, resp.Header, body); err != nil {
				t.Errorf("the OpenAPI document does not describe the answer: %v", err)
			}
		})
	}
}

// FuzzDecodeBody checks that decoding any profile or patch body fails, if
// it fails, with a *contracts.FieldError in JSON's words: never a Go type
// name, never an empty field name in the text.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{``, `{}`, `[1]`, `{"start_urls":"x"}`, `{"start_urls":[1,"a"]}`, `{"politeness":{"min_delay_ms":"3"}}`,
		`{"budget":{"overrides":[{"domain":1}]}}`, `{"max_depth":1e99}`, `{"a":`, `{"collection":[[1]]}`, `{"politeness":5}`, `null`, `"x"`} {
		f.Add([]byte(s))
	}
	check := func(t *testing.T, err error) {
		if err == nil {
			return
		}
		var fe *contracts.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v (%T) is not a *contracts.FieldError", err, err)
		}
		if w := goWords.FindString(err.Error()); w != "" {
			t.Errorf("error %q speaks Go (%q)", err, w)
		}
		if fe.Field == "" && !strings.HasPrefix(fe.Reason, "request body") && !strings.HasPrefix(fe.Reason, "could not read") {
			t.Errorf("error %q without a field does not say it is about the request body", err)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := decodeBody[contracts.Profile](strings.NewReader(string(body)), maxProfileBytes)
		check(t, err)
		_, err = decodeBody[contracts.ProfilePatch](strings.NewReader(string(body)), maxPatchBytes)
		check(t, err)
	})
}
