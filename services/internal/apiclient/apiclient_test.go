package apiclient_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/services/internal/apiclient"
)

// seen is what the API side saw of one request.
type seen struct {
	Method, URI, Auth, ContentType, Body, RemoteHost string
}

// recorder answers every request with answer and records what it saw.
func recorder(answer string, got *seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		host, _, _ := strings.Cut(r.RemoteAddr, ":")
		*got = seen{Method: r.Method, URI: r.RequestURI, Auth: r.Header.Get("Authorization"),
			ContentType: r.Header.Get("Content-Type"), Body: string(b), RemoteHost: host}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	})
}

// transports runs f with a client of h over loopback HTTP and with one
// serving h in process: the client behaves the same over both.
func transports(t *testing.T, token string, h http.Handler, f func(t *testing.T, c *apiclient.Client)) {
	t.Run("http", func(t *testing.T) {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		f(t, apiclient.New(srv.URL, token, srv.Client()))
	})
	t.Run("in process", func(t *testing.T) {
		f(t, apiclient.New("http://localhost", token, &http.Client{Transport: apiclient.InProcess(h)}))
	})
}

// TestRequests checks the request each method sends (method, path and
// query, token, body) and that it decodes the answer.
func TestRequests(t *testing.T) {
	p := contracts.Profile{StartURLs: []string{"http://a.test/"}, MaxDepth: 2}
	profileJSON, _ := json.Marshal(p)
	tests := []struct {
		name   string
		answer string
		call   func(t *testing.T, c *apiclient.Client) any
		want   seen
		result any
	}{
		{"create crawl", `{"v":1,"crawl_id":"c1","state":"running"}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.CreateCrawl(t.Context(), p)
				check(t, err)
				return r
			},
			seen{Method: "POST", URI: "/api/v1/crawls", ContentType: "application/json", Body: string(profileJSON)},
			contracts.CreateCrawlResponse{V: 1, CrawlID: "c1", State: contracts.CrawlRunning}},
		{"crawl", `{"v":1,"crawl_id":"a/b","state":"paused","total":3}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.Crawl(t.Context(), "a/b")
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/crawls/a%2Fb"},
			contracts.CrawlStatus{V: 1, CrawlID: "a/b", State: contracts.CrawlPaused, Total: 3}},
		{"crawls", `{"v":1,"crawls":[{"crawl_id":"c1","state":"finished"}]}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.Crawls(t.Context())
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/crawls"},
			contracts.CrawlList{V: 1, Crawls: []contracts.CrawlStatus{{CrawlID: "c1", State: contracts.CrawlFinished}}}},
		{"search", `{"v":1,"query":"a b","total":1,"offset":3,"hits":[{"url":"http://a.test/"}]}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.Search(t.Context(), apiclient.SearchQuery{Q: "a b", Crawl: "c1", Limit: 5, Offset: 3})
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/search?crawl=c1&limit=5&offset=3&q=a+b"},
			contracts.SearchResponse{V: 1, Query: "a b", Total: 1, Offset: 3, Hits: []contracts.SearchHit{{URL: "http://a.test/"}}}},
		{"search defaults", `{"v":1,"query":"a","hits":[]}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.Search(t.Context(), apiclient.SearchQuery{Q: "a"})
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/search?q=a"},
			contracts.SearchResponse{V: 1, Query: "a", Hits: []contracts.SearchHit{}}},
		{"crawl log", `{"crawl_id":"c1","urls":[{"key":"k","url":"http://a.test/","status":"failed","http_status":404}],"next_cursor":"n"}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.CrawlLog(t.Context(), "c1", apiclient.LogQuery{Status: contracts.Failed, Host: "a.test", Reason: "http 404", Limit: 2, Cursor: "x"})
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/crawls/c1/urls?cursor=x&host=a.test&limit=2&reason=http+404&status=failed"},
			contracts.CrawlLog{CrawlID: "c1", URLs: []contracts.URLRecord{{Key: "k", URL: "http://a.test/", Status: contracts.Failed, HTTPStatus: ptr(404)}}, NextCursor: ptr("n")}},
		{"crawl log unfiltered", `{"crawl_id":"c1","urls":[],"next_cursor":null}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.CrawlLog(t.Context(), "c1", apiclient.LogQuery{})
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/crawls/c1/urls"},
			contracts.CrawlLog{CrawlID: "c1", URLs: []contracts.URLRecord{}}},
		{"failure reasons", `{"crawl_id":"c1","report":"failure-reasons","rows":[{"reason":"http 404","count":2,"sample_urls":["http://a.test/x"]}]}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.FailureReasons(t.Context(), "c1", 11)
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/crawls/c1/reports/failure-reasons?limit=11"},
			[]contracts.ReasonReportRow{{Reason: ptr("http 404"), Count: 2, SampleURLs: []string{"http://a.test/x"}}}},
		{"hosts report", `{"crawl_id":"c1","report":"hosts","rows":[{"host":"a.test","urls":2,"fetched":1,"failed":1,"bytes":7,"status_codes":{"200":1}}]}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.Report(t.Context(), "c1", contracts.ReportHosts, 0)
				check(t, err)
				rows, err := apiclient.DecodeRows[contracts.HostReportRow](r.Rows)
				check(t, err)
				return rows
			},
			seen{Method: "GET", URI: "/api/v1/crawls/c1/reports/hosts"},
			[]contracts.HostReportRow{{Host: "a.test", URLs: 2, Fetched: 1, Failed: 1, Bytes: 7, StatusCodes: map[string]int64{"200": 1}}}},
		{"segments", `{"crawl_id":"c1","segments":[{"name":"s.warc.gz","key":"warc/s.warc.gz","size":null,"modified":null,"records":2,"url":"/u","cdxj_url":"/u.cdxj"}],"total_size":0}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.Segments(t.Context(), "c1")
				check(t, err)
				return r
			},
			seen{Method: "GET", URI: "/api/v1/crawls/c1/segments"},
			contracts.SegmentList{CrawlID: "c1", Segments: []contracts.Segment{{Name: "s.warc.gz", Key: "warc/s.warc.gz", Records: 2, URL: "/u", CDXJURL: "/u.cdxj"}}}},
		{"cdxj", "line 1\nline 2\n",
			func(t *testing.T, c *apiclient.Client) any {
				rc, err := c.CDXJ(t.Context(), "c1")
				check(t, err)
				defer rc.Close()
				b, err := io.ReadAll(rc)
				check(t, err)
				return string(b)
			},
			seen{Method: "GET", URI: "/api/v1/crawls/c1/cdxj"},
			"line 1\nline 2\n"},
		{"documents", "{}\n",
			func(t *testing.T, c *apiclient.Client) any {
				rc, err := c.Documents(t.Context(), "c1")
				check(t, err)
				defer rc.Close()
				b, err := io.ReadAll(rc)
				check(t, err)
				return string(b)
			},
			seen{Method: "GET", URI: "/api/v1/crawls/c1/documents"},
			"{}\n"},
		{"readiness", `{"status":"unready","failing":["disk"],"backends":{"disk":"full"}}`,
			func(t *testing.T, c *apiclient.Client) any {
				r, err := c.Readiness(t.Context())
				check(t, err)
				return r.Backends["disk"]
			},
			seen{Method: "GET", URI: "/readyz"},
			"full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got seen
			transports(t, "tok", recorder(tt.answer, &got), func(t *testing.T, c *apiclient.Client) {
				res := tt.call(t, c)
				want := tt.want
				want.Auth, want.RemoteHost = "Bearer tok", "127.0.0.1"
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.result, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestErrors: an error answer is an *Error with the API's message and
// field, or the status line when the answer has no error body, for JSON
// and streamed endpoints alike; no token, no Authorization header.
func TestErrors(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("Authorization %q sent without a token", r.Header.Get("Authorization"))
		}
		switch r.URL.Path {
		case "/api/v1/crawls/x/urls":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"unknown status","field":"status"}`)
		case "/api/v1/crawls/x/cdxj":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"no such crawl"}`)
		default:
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}
	})
	transports(t, "", h, func(t *testing.T, c *apiclient.Client) {
		_, err := c.CrawlLog(t.Context(), "x", apiclient.LogQuery{Status: "nope"})
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Message != "unknown status" || ae.Field != "status" ||
			err.Error() != "GET /api/v1/crawls/x/urls?status=nope: unknown status (400)" {
			t.Errorf("CrawlLog error = %#v (%v)", err, err)
		}
		if apiclient.IsNotFound(err) {
			t.Errorf("IsNotFound(%v) = true", err)
		}
		_, err = c.CDXJ(t.Context(), "x")
		if !apiclient.IsNotFound(err) || err.Error() != "GET /api/v1/crawls/x/cdxj: no such crawl (404)" {
			t.Errorf("CDXJ error = %v, want the 404 with its message", err)
		}
		_, err = c.Crawls(t.Context())
		if !errors.As(err, &ae) || err.Error() != "GET /api/v1/crawls: 502 Bad Gateway" {
			t.Errorf("Crawls error = %v, want the status line", err)
		}
		if c.Healthy(t.Context()) {
			t.Errorf("Healthy() = true for a 502")
		}
		if _, err := c.Readiness(t.Context()); err == nil || err.Error() != "GET /readyz: 502 Bad Gateway" {
			t.Errorf("Readiness error = %v", err)
		}
	})
}

// TestInProcessStreams: the in-process transport hands the status, the
// headers as of the status and the body on while the handler still
// writes, and reports a handler that panics as a broken body.
func TestInProcessStreams(t *testing.T) {
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Before", "1")
		w.WriteHeader(http.StatusAccepted)
		w.Header().Set("X-After", "1")
		io.WriteString(w, "first\n")
		<-next // the client reads the first line before the handler goes on
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		io.WriteString(w, "second\n")
	})
	c := &http.Client{Transport: apiclient.InProcess(h)}
	for _, tt := range []struct {
		path    string
		wantErr bool
	}{{"/ok", false}, {"/panic", true}} {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := c.Get("http://localhost" + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Before") != "1" || resp.Header.Get("X-After") != "" {
				t.Errorf("status %d, header %v; want 202 with the headers set before it", resp.StatusCode, resp.Header)
			}
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); line != "first\n" || err != nil {
				t.Fatalf("first line = %q, %v", line, err)
			}
			next <- struct{}{}
			rest, err := io.ReadAll(br)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "boom") {
					t.Errorf("body after a panic: %q, %v; want an error naming the panic", rest, err)
				}
				return
			}
			if string(rest) != "second\n" || err != nil {
				t.Errorf("rest = %q, %v", rest, err)
			}
		})
	}
}
