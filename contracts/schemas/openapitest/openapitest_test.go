package openapitest

import (
	"net/http"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	d, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	jsonHeader := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	status := `{"v":1,"crawl_id":"c","state":"running","profile":{"start_urls":["http://a/"]},"counts":{},"total":0,"pending":0,"retired":0,"documents":0,"created_at":"2026-01-01T00:00:00Z"}`
	tests := []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		wantErr            string // "" for valid
	}{
		{"crawl status", "GET", "/api/v1/crawls/c-1", 200, jsonHeader(), status, ""},
		{"crawl status as HEAD", "HEAD", "/api/v1/crawls/c-1", 200, jsonHeader(), status, ""},
		{"crawl status missing field", "GET", "/api/v1/crawls/c-1", 200, jsonHeader(), `{"v":1}`, "body"},
		{"literal path wins over template", "POST", "/api/v1/crawls/c-1/pause", 200, jsonHeader(), status, ""},
		{"error body", "GET", "/api/v1/crawls/c-1", 404, jsonHeader(), `{"error":"no such crawl"}`, ""},
		{"error body with empty field", "POST", "/api/v1/crawls", 400, jsonHeader(), `{"error":"invalid : empty body","field":""}`, "body"},
		{"error body with a Go type", "POST", "/api/v1/crawls", 400, jsonHeader(), `{"error":"x","code":1}`, "body"},
		{"401 without WWW-Authenticate", "GET", "/api/v1/crawls", 401, jsonHeader(), `{"error":"no token"}`, "WWW-Authenticate"},
		{"401 with WWW-Authenticate", "GET", "/api/v1/crawls", 401, jsonHeader("WWW-Authenticate", "Bearer"), `{"error":"no token"}`, ""},
		{"405 without Allow", "PUT", "/api/v1/crawls", 405, jsonHeader(), `{"error":"no"}`, "Allow"},
		{"405 with Allow", "POST", "/api/v1/frontier", 405, jsonHeader("Allow", "GET, HEAD"), `{"error":"no"}`, ""},
		{"405 of a text body", "POST", "/api/v1/frontier", 405, http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Allow": {"GET"}}, "Method Not Allowed", "content type"},
		{"undescribed status", "GET", "/api/v1/frontier", 418, jsonHeader(), `{"error":"teapot"}`, "status 418"},
		{"unknown path", "GET", "/nothing/here", 200, jsonHeader(), `{}`, "no path"},
		{"404 of an unknown path", "GET", "/nothing/here", 404, jsonHeader(), `{"error":"no endpoint"}`, ""},
		{"404 of an unknown path as text", "GET", "/nothing/here", 404, http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, "404 page not found", "content type"},
		{"401 on an unknown path", "GET", "/nothing/here", 401, jsonHeader("WWW-Authenticate", "Bearer"), `{"error":"no token"}`, ""},
		{"405 in the path's own format", "PUT", "/yacy/grid/crawler/crawlStart.json", 405, jsonHeader("Allow", "GET, POST"), `{"success":false,"comment":"use GET or POST","error":"use GET or POST"}`, ""},
		{"405 in the API's format where the path has its own", "PUT", "/yacy/grid/crawler/crawlStart.json", 405, jsonHeader("Allow", "GET, POST"), `{"error":"use GET or POST"}`, "body"},
		{"error without a body", "GET", "/api/v1/crawls/c-1", 404, http.Header{}, "", "content type"},
		{"redirect without a body", "POST", "/logout", 303, http.Header{"Location": {"/login"}}, "", ""},
		{"redirect without Location", "POST", "/logout", 303, http.Header{}, "", "Location"},
		{"healthz text", "GET", "/healthz", 200, http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, "ok\n", ""},
		{"empty 200", "DELETE", "/hcf/p/f/s/s1", 200, http.Header{}, "", ""},
		{"no content where the document says 200", "DELETE", "/hcf/p/f/s/s1", 204, http.Header{}, "", "204"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Validate(tt.method, tt.path, tt.status, tt.header, []byte(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
