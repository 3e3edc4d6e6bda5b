package mcp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/pkg/hcf/hcftest"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/testenv"
	"github.com/gridcrawl/gridcrawl/services/internal/hcfapi"
)

// hcfBackend makes fresh frontier stores of one kind.
type hcfBackend struct {
	name string
	new  func(t testing.TB, now func() time.Time) hcf.Store
}

// hcfBackends are the embedded store, and the Elasticsearch one when
// GRIDCRAWL_ES_URL is set (required in CI and with
// GRIDCRAWL_REQUIRE_BACKENDS=1).
func hcfBackends() []hcfBackend {
	return []hcfBackend{
		{"embedded", func(t testing.TB, now func() time.Time) hcf.Store {
			t.Helper()
			s, err := sqlitestore.OpenHCFClock(filepath.Join(t.TempDir(), "hcf.db"), now)
			if err != nil {
				t.Fatalf("OpenHCFClock: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"elasticsearch", func(t testing.TB, now func() time.Time) hcf.Store {
			t.Helper()
			c, err := esindex.Open(context.Background(), esindex.Options{URL: testESURL(t),
				Prefix: "gctest-" + strings.ToLower(rand.Text()[:12]), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("open elasticsearch: %v", err)
			}
			s := c.HCFClock(now)
			t.Cleanup(func() {
				if err := s.DeleteIndices(context.Background()); err != nil {
					t.Errorf("delete hcf indices: %v", err)
				}
				if err := c.DeleteIndices(context.Background()); err != nil {
					t.Errorf("delete indices: %v", err)
				}
				c.Close()
			})
			return s
		}},
	}
}

// testESURL returns GRIDCRAWL_ES_URL; without it the test is skipped, or
// fails in CI and when GRIDCRAWL_REQUIRE_BACKENDS=1.
func testESURL(t testing.TB) string {
	t.Helper()
	return testenv.LoopbackURL(t, "GRIDCRAWL_ES_URL")
}

// hcfServer serves MCP's API over store; token "" means embedded mode
// without a token, which loopback clients may use.
func hcfServer(t testing.TB, store hcf.Store, token string) string {
	t.Helper()
	m := New(Config{Token: token}, Deps{HCF: store, Embedded: token == ""})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

type answer struct {
	status int
	body   string
	header http.Header
}

// call sends one request; hdr holds header pairs.
func call(t *testing.T, method, u string, body io.Reader, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatalf("NewRequest(%s %s): %v", method, u, err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, u, err)
	}
	return answer{status: res.StatusCode, body: string(b), header: res.Header}
}

// want checks a request's status and exact body.
func want(t *testing.T, a answer, status int, body string, what string) {
	t.Helper()
	if a.status != status || a.body != body {
		t.Fatalf("%s = %d %q, want %d %q", what, a.status, a.body, status, body)
	}
}

func TestHCFAPI(t *testing.T) {
	tests := []struct {
		name string
		f    func(*testing.T, hcfBackend)
	}{
		{"DocumentedExamples", testHCFDocumented},
		{"OrderingAndMinCount", testHCFOrdering},
		{"MultiLineDeletes", testHCFDeletes},
		{"SlotDeletionAndLists", testHCFSlots},
		{"BadInput", testHCFBadInput},
		{"Gzip", testHCFGzip},
		{"Auth", testHCFAuth},
	}
	for _, b := range hcfBackends() {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.f(t, b) })
			}
		})
	}
}

// testHCFDocumented runs every example of the HCF documentation, with the clock that made its
// batch ids, and compares the answers byte for byte.
func testHCFDocumented(t *testing.T, b hcfBackend) {
	// The first example, on a frontier of its own.
	base := hcfServer(t, b.new(t, hcftest.Clock(hcftest.ExampleMillis...)), "")
	want(t, call(t, "POST", base+"/hcf/78/test/s/example.com", strings.NewReader(`{"fp":"/some/path.html"}`)),
		200, "{\"newcount\":1}\n", "first example")

	base = hcfServer(t, b.new(t, hcftest.Clock(hcftest.ExampleMillis...)), "")
	slot := base + "/hcf/78/test/s/example.com"
	want(t, call(t, "POST", slot, strings.NewReader("{\"fp\":\"/\"}\n{\"fp\":\"page1.html\", \"p\": 1, \"qdata\": {\"depth\": 1}}")),
		200, "{\"newcount\":2}\n", "POST of two requests")
	const both = `{"id":"00013967d8af7b0001","requests":[["/",null]]}` + "\n" +
		`{"id":"01013967d8af7e0001","requests":[["page1.html",{"depth":1}]]}` + "\n"
	a := call(t, "GET", slot+"/q", nil)
	want(t, a, 200, both, "GET q")
	if ct := a.header.Get("Content-Type"); ct != "application/x-jsonlines" {
		t.Errorf("GET q Content-Type = %q, want %q", ct, "application/x-jsonlines")
	}
	want(t, call(t, "GET", slot+"/q", nil), 200, both, "GET q again (reading deletes nothing)")
	want(t, call(t, "POST", slot+"/q/deleted", strings.NewReader(`"00013967d8af7b0001"`)), 200, "", "POST q/deleted")
	want(t, call(t, "GET", slot+"/q", nil), 200,
		`{"id":"01013967d8af7e0001","requests":[["page1.html",{"depth":1}]]}`+"\n", "GET q after delete")
	want(t, call(t, "GET", slot+"/f", nil), 200, "{\"fp\":\"/\"}\n{\"fp\":\"page1.html\"}\n", "GET f")
	want(t, call(t, "DELETE", slot+"/", nil), 200, "", "DELETE slot/")
	want(t, call(t, "GET", slot+"/q", nil), 200, "", "GET q after slot deletion")
	want(t, call(t, "GET", slot+"/f", nil), 200, "", "GET f after slot deletion")
}

// post sends JSON lines and returns the newcount.
func post(t *testing.T, u string, lines []string) int {
	t.Helper()
	a := call(t, "POST", u, strings.NewReader(strings.Join(lines, "\n")))
	var res struct {
		NewCount *int `json:"newcount"`
	}
	if a.status != 200 || json.Unmarshal([]byte(a.body), &res) != nil || res.NewCount == nil {
		t.Fatalf("POST %s = %d %q, want 200 {\"newcount\":N}", u, a.status, a.body)
	}
	return *res.NewCount
}

type wireBatch struct {
	ID       string               `json:"id"`
	Requests [][2]json.RawMessage `json:"requests"`
}

// readQueue GETs the queue at u and decodes its lines.
func readQueue(t *testing.T, u string) []wireBatch {
	t.Helper()
	a := call(t, "GET", u, nil)
	if a.status != 200 {
		t.Fatalf("GET %s = %d %q", u, a.status, a.body)
	}
	var out []wireBatch
	for line := range strings.Lines(a.body) {
		var b wireBatch
		if err := json.Unmarshal([]byte(line), &b); err != nil {
			t.Fatalf("GET %s: line %q: %v", u, line, err)
		}
		out = append(out, b)
	}
	return out
}

func batchFPs(bs []wireBatch) [][]string {
	var out [][]string
	for _, b := range bs {
		var fps []string
		for _, r := range b.Requests {
			var fp string
			_ = json.Unmarshal(r[0], &fp)
			fps = append(fps, fp)
		}
		out = append(out, fps)
	}
	return out
}

func fpLines(prefix string, n, p int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"fp":"%s%03d","p":%d}`, prefix, i, p)
	}
	return out
}

func testHCFOrdering(t *testing.T, b hcfBackend) {
	base := hcfServer(t, b.new(t, hcftest.Clock()), "")
	slot := base + "/hcf/p1/f/s/host.example"
	if n := post(t, slot, []string{`{"fp":"c1","p":2}`, `{"fp":"a1"}`, `{"fp":"b1","p":1}`, `{"fp":"a2","p":0}`, `{"fp":"a1","p":2}`}); n != 4 {
		t.Errorf("newcount = %d, want 4", n)
	}
	if n := post(t, slot, []string{`{"fp":"a3"}`, `{"fp":"b1"}`, `{"fp":"b2","p":1}`}); n != 2 {
		t.Errorf("newcount with a seen fingerprint = %d, want 2", n)
	}
	wantFPs := [][]string{{"a1", "a2"}, {"a3"}, {"b1"}, {"b2"}, {"c1"}}
	if diff := cmp.Diff(wantFPs, batchFPs(readQueue(t, slot+"/q"))); diff != "" {
		t.Errorf("queue order (-want +got):\n%s", diff)
	}

	big := base + "/hcf/p1/f/s/big.example"
	if n := post(t, big, fpLines("x", 250, 0)); n != 250 {
		t.Fatalf("newcount = %d, want 250", n)
	}
	post(t, big, fpLines("y", 10, 0))
	for _, tc := range []struct {
		query string
		sizes []int
	}{
		{"", []int{100, 100, 50, 10}},
		{"?mincount=0", []int{100, 100, 50, 10}},
		{"?mincount=1", []int{100}},
		{"?mincount=100", []int{100}},
		{"?mincount=101", []int{100, 100}},
		{"?mincount=251", []int{100, 100, 50, 10}},
		{"?mincount=100000", []int{100, 100, 50, 10}},
	} {
		var sizes []int
		for _, fps := range batchFPs(readQueue(t, big+"/q"+tc.query)) {
			sizes = append(sizes, len(fps))
		}
		if diff := cmp.Diff(tc.sizes, sizes); diff != "" {
			t.Errorf("GET q%s batch sizes (-want +got):\n%s", tc.query, diff)
		}
	}
}

func testHCFDeletes(t *testing.T, b hcfBackend) {
	base := hcfServer(t, b.new(t, hcftest.Clock()), "")
	slot := base + "/hcf/p/f/s/s"
	for i := range 6 {
		post(t, slot, []string{fmt.Sprintf(`{"fp":"u%d"}`, i)})
	}
	bs := readQueue(t, slot+"/q")
	if len(bs) != 6 {
		t.Fatalf("GET q = %d batches, want 6", len(bs))
	}
	body := fmt.Sprintf("[%q, %q]\n%q\r\n\n[\"ff0000000000000001\", \"junk\", %q]\n[]\n", bs[0].ID, bs[1].ID, bs[2].ID, bs[4].ID)
	want(t, call(t, "POST", slot+"/q/deleted", strings.NewReader(body)), 200, "", "POST q/deleted of several lines")
	var got []string
	for _, b := range readQueue(t, slot+"/q") {
		got = append(got, b.ID)
	}
	if diff := cmp.Diff([]string{bs[3].ID, bs[5].ID}, got); diff != "" {
		t.Errorf("ids left (-want +got):\n%s", diff)
	}
	// The fingerprints stay: adding them again enqueues nothing.
	if n := post(t, slot, []string{`{"fp":"u0"}`, `{"fp":"u1"}`}); n != 0 {
		t.Errorf("newcount of deleted batches' fingerprints = %d, want 0", n)
	}
}

func testHCFSlots(t *testing.T, b hcfBackend) {
	base := hcfServer(t, b.new(t, hcftest.Clock()), "")
	want(t, call(t, "GET", base+"/hcf/78/list", nil), 200, "[]\n", "GET frontiers of an empty project")
	for _, s := range []string{"/hcf/78/test/s/b.example", "/hcf/78/test/s/a.example", "/hcf/78/other/s/c.example", "/hcf/79/x/s/y"} {
		post(t, base+s, []string{`{"fp":"/","fdata":{"seen":true}}`, `{"fp":"/a"}`})
	}
	want(t, call(t, "GET", base+"/hcf/78/list", nil), 200, "[\"other\",\"test\"]\n", "GET frontiers")
	want(t, call(t, "GET", base+"/hcf/78/test/list", nil), 200, "[\"a.example\",\"b.example\"]\n", "GET slots")
	want(t, call(t, "GET", base+"/hcf/78/test/s/a.example/f", nil), 200,
		"{\"fp\":\"/\",\"fdata\":{\"seen\":true}}\n{\"fp\":\"/a\"}\n", "GET f with fdata")
	// Without the trailing slash too.
	want(t, call(t, "DELETE", base+"/hcf/78/test/s/a.example", nil), 200, "", "DELETE slot")
	want(t, call(t, "GET", base+"/hcf/78/test/list", nil), 200, "[\"b.example\"]\n", "GET slots after delete")
	want(t, call(t, "GET", base+"/hcf/78/test/s/a.example/f", nil), 200, "", "GET f of deleted slot")
	want(t, call(t, "GET", base+"/hcf/78/test/s/a.example/q", nil), 200, "", "GET q of deleted slot")
	want(t, call(t, "DELETE", base+"/hcf/78/test/s/b.example/", nil), 200, "", "DELETE slot/")
	want(t, call(t, "GET", base+"/hcf/78/list", nil), 200, "[\"other\"]\n", "GET frontiers after deletes")
	// Fingerprints of a deleted slot are new again.
	if n := post(t, base+"/hcf/78/test/s/a.example", []string{`{"fp":"/"}`}); n != 1 {
		t.Errorf("newcount after slot deletion = %d, want 1", n)
	}
	// An escaped slash belongs to the slot name.
	post(t, base+"/hcf/78/test/s/a%2Fb", []string{`{"fp":"/"}`})
	want(t, call(t, "GET", base+"/hcf/78/test/list", nil), 200, "[\"a.example\",\"a/b\"]\n", "GET slots with a/b")
	if a := call(t, "PUT", base+"/hcf/78/test/s/a.example", nil); a.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT slot = %d, want 405", a.status)
	}
}

// errorOf decodes the message of an error answer.
func errorOf(t *testing.T, a answer) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Fatalf("error body %q: %v", a.body, err)
	}
	return e.Error
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testHCFBadInput(t *testing.T, b hcfBackend) {
	base := hcfServer(t, b.new(t, hcftest.Clock()), "")
	slot := base + "/hcf/p/f/s/s"
	post(t, slot, []string{`{"fp":"kept"}`})
	queueBefore := call(t, "GET", slot+"/q", nil).body
	long := `{"fp":"` + strings.Repeat("x", hcf.DefaultMaxLineBytes) + `"}`
	var huge strings.Builder
	for i := 0; huge.Len() <= hcfapi.MaxBody; i++ {
		fmt.Fprintf(&huge, "{\"fp\":\"%d\",\"qdata\":\"%s\"}\n", i, strings.Repeat("q", 1000))
	}
	manyLines := strings.Repeat("{\"fp\":\"x\"}\n", hcf.DefaultMaxLines+1)
	bomb := gzipped(t, []byte(huge.String()))
	// path is added to the slot's URL, or replaces it when it starts /hcf/.
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		msg              string
	}{
		{"malformed line", "", "{\"fp\":\"a\"}\n{\"fp\":\"b\"", nil,
			"line 2: invalid JSON at byte 9: unexpected end of JSON input"},
		{"malformed JSON", "", "{\"fp\":\"a\"}\n\n{\"fp\" \"b\"}", nil,
			"line 3: invalid JSON at byte 7: invalid character '\"' after object key"},
		{"missing fp", "", "{\"fp\":\"a\"}\n{\"fp\":\"b\"}\n{\"qdata\":{}}", nil, "line 3: fp is missing"},
		{"number fp", "", "{\"fp\":\"a\"}\n{\"fp\":12}", nil, "line 2: fp must be a string"},
		{"null fp", "", "{\"fp\":null}", nil, "line 1: fp must be a string"},
		{"empty fp", "", "{\"fp\":\"\"}", nil, "line 1: fp is empty"},
		{"non-numeric p", "", "{\"fp\":\"a\"}\n{\"fp\":\"b\",\"p\":\"high\"}", nil, "line 2: p must be a number"},
		{"fractional p", "", "{\"fp\":\"b\",\"p\":1.5}", nil, "line 1: p must be an integer"},
		{"p too large", "", "{\"fp\":\"b\",\"p\":256}", nil, "line 1: p must be between 0 and 255"},
		{"not an object", "", "{\"fp\":\"a\"}\n[\"b\"]", nil, "line 2: want a JSON object"},
		{"line too long", "", "{\"fp\":\"a\"}\n" + long, nil, "line 2: longer than 1048576 bytes"},
		{"too many lines", "", manyLines, nil, "line 100001: more than 100000 lines"},
		{"body too large", "", huge.String(), nil, "body larger than 16777216 bytes"},
		{"gzip too large", "", string(bomb), []string{"Content-Encoding", "gzip"}, "body larger than 16777216 bytes"},
		{"not gzip", "", "{\"fp\":\"a\"}", []string{"Content-Encoding", "gzip"}, "invalid gzip body: gzip: invalid header"},
		{"unknown encoding", "", "{\"fp\":\"a\"}", []string{"Content-Encoding", "br"}, "unsupported Content-Encoding \"br\""},
		{"delete: object line", "/q/deleted", "[\"00013967d8af7b0001\"]\n{\"id\":\"x\"}", nil,
			"line 2: want a batch id string or an array of them"},
		{"delete: number in array", "/q/deleted", "\"x\"\n[\"a\", 1]", nil, "line 2: element 1 is not a string"},
		{"delete: bad string", "/q/deleted", "\"abc", nil, "line 1: invalid JSON string: unexpected end of JSON input"},
		{"long slot name", "/hcf/p/f/s/" + strings.Repeat("s", hcf.MaxNameBytes+1), "{\"fp\":\"a\"}", nil,
			"invalid argument: slot name is longer than 512 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := slot + tc.path
			if strings.HasPrefix(tc.path, "/hcf/") {
				u = base + tc.path
			}
			a := call(t, "POST", u, strings.NewReader(tc.body), tc.hdr...)
			if a.status != http.StatusBadRequest {
				t.Fatalf("POST %s = %d %q, want 400", tc.name, a.status, a.body)
			}
			if got := errorOf(t, a); got != tc.msg {
				t.Errorf("POST %s error = %q, want %q", tc.name, got, tc.msg)
			}
			// Nothing of the request was applied.
			want(t, call(t, "GET", slot+"/q", nil), 200, queueBefore, "GET q after "+tc.name)
			want(t, call(t, "GET", slot+"/f", nil), 200, "{\"fp\":\"kept\"}\n", "GET f after "+tc.name)
		})
	}
	a := call(t, "GET", slot+"/q?mincount=x", nil)
	if a.status != http.StatusBadRequest || errorOf(t, a) != `mincount "x" must be a non-negative integer` {
		t.Errorf("GET q?mincount=x = %d %q, want 400 naming mincount", a.status, a.body)
	}
}

func testHCFGzip(t *testing.T, b hcfBackend) {
	base := hcfServer(t, b.new(t, hcftest.Clock()), "")
	slot := base + "/hcf/p/f/s/s"
	body := gzipped(t, []byte("{\"fp\":\"a\"}\n{\"fp\":\"b\"}\n"))
	want(t, call(t, "POST", slot, bytes.NewReader(body), "Content-Encoding", "gzip"), 200, "{\"newcount\":2}\n", "gzipped POST")
}

func testHCFAuth(t *testing.T, b hcfBackend) {
	const token = "s3cret-token"
	base := hcfServer(t, b.new(t, hcftest.Clock()), token)
	slot := base + "/hcf/p/f/s/s"
	basic := func(user string) string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, "")
		return req.Header.Get("Authorization")
	}
	for _, tc := range []struct {
		name   string
		hdr    []string
		status int
	}{
		{"no credentials", nil, http.StatusUnauthorized},
		{"wrong bearer", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"bearer", []string{"Authorization", "Bearer " + token}, http.StatusOK},
		{"token as basic-auth user", []string{"Authorization", basic(token)}, http.StatusOK},
		{"wrong basic-auth user", []string{"Authorization", basic("someone")}, http.StatusUnauthorized},
	} {
		a := call(t, "POST", slot, strings.NewReader(`{"fp":"x"}`), tc.hdr...)
		if a.status != tc.status {
			t.Errorf("POST with %s = %d %q, want %d", tc.name, a.status, a.body, tc.status)
		}
	}
	a := call(t, "GET", slot+"/f", nil, "Authorization", basic(token))
	want(t, a, 200, "{\"fp\":\"x\"}\n", "GET f with the token as basic-auth user")
}
