package grid

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/txindex/txindextest"
)

// failingSite is a loopback site whose URLs fail in known ways: the oracle
// of the crawl log test. want maps each URL that must end failed to a part
// of its reason.
type failingSite struct {
	start string
	// want maps the URLs that must fail to a part of their true reason.
	want map[string]string
	// ok lists the URLs that must be indexed, with their media type.
	ok      map[string]string
	resolve string
}

func newFailingSite(t *testing.T) failingSite {
	t.Helper()
	// A port nothing listens on: its connections are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	base := fmt.Sprintf("http://site.test:%d", port)
	refused := fmt.Sprintf("http://refused.test:%d/page.html", refusedPort)
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "User-agent: *\nDisallow: /private/\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<html><head><title>start</title></head><body>
				<a href="/a.html">a</a> <a href="/b.html">b</a> <a href="/notes.txt">notes</a>
				<a href="/missing.html">missing</a> <a href="/gone.html">gone</a>
				<a href="/private/secret.html">secret</a> <a href="%s">refused</a></body></html>`, refused)
		case "/a.html", "/b.html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><head><title>%s</title></head><body>page %s</body></html>", r.URL.Path, r.URL.Path)
		case "/notes.txt":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "plain notes")
		case "/gone.html":
			http.Error(w, "gone", http.StatusGone)
		default:
			http.NotFound(w, r)
		}
	})
	return failingSite{
		start: base + "/",
		want: map[string]string{
			base + "/missing.html":        "http 404",
			base + "/gone.html":           "http 410",
			base + "/private/secret.html": "robots.txt disallowed",
			refused:                       "connection refused",
		},
		ok: map[string]string{
			base + "/": "text/html", base + "/a.html": "text/html", base + "/b.html": "text/html",
			base + "/notes.txt": "text/plain",
		},
		resolve: "site.test=127.0.0.1,refused.test=127.0.0.1",
	}
}

// TestCrawlLogFailures crawls a site whose URLs fail in known ways and
// reads the failures with their true reasons through the API
// (/urls?status=failed) and the command line (grid urls --failed), one URL
// through ?url=, its WARC record, the reports against the transaction
// index's records, and the timeline.
func TestCrawlLogFailures(t *testing.T) {
	site := newFailingSite(t)
	t.Setenv("GRIDCRAWL_TIMELINE_INTERVAL", "50ms")
	cfg := testConfig(t, t.TempDir(), site.resolve)
	g, api := startGrid(t, cfg)
	profile := contracts.Profile{
		StartURLs: []string{site.start}, MaxDepth: 2, Scope: contracts.ScopeAny,
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey},
		Collection: e2eCollections,
	}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", profile, &created); code != http.StatusCreated {
		t.Fatalf("POST /api/v1/crawls = %d", code)
	}
	id := created.CrawlID
	st := waitFinished(t, api, id, 2*time.Minute)
	if st.State != contracts.CrawlFinished {
		t.Fatalf("crawl state = %s, want finished", st.State)
	}

	// The API, in pages of 1 to follow the cursor.
	got := map[string]string{}
	q := url.Values{"status": {"failed"}, "limit": {"1"}}
	for page := 0; ; page++ {
		if page > 20 {
			t.Fatal("the failed listing does not end")
		}
		var log contracts.CrawlLog
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/urls?"+q.Encode(), nil, &log); code != http.StatusOK {
			t.Fatalf("GET urls?%s = %d", q.Encode(), code)
		}
		for _, r := range log.URLs {
			if r.Status != contracts.Failed || r.Reason == nil {
				t.Errorf("failed listing has %s in %s with reason %v", r.URL, r.Status, r.Reason)
				continue
			}
			if _, dup := got[r.URL]; dup {
				t.Errorf("%s listed twice", r.URL)
			}
			got[r.URL] = *r.Reason
		}
		if log.NextCursor == nil {
			break
		}
		q.Set("cursor", *log.NextCursor)
	}
	checkReasons(t, "GET /urls?status=failed", site.want, got)

	// The command line.
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"urls", id, "--failed", "--api", api}, &out, &errOut); code != 0 {
		t.Fatalf("grid urls --failed = exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "STATUS") {
		t.Fatalf("grid urls --failed printed no table header:\n%s", out.String())
	}
	got = map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != string(contracts.Failed) {
			t.Errorf("grid urls --failed line %q: want status, http status, reason, url", l)
			continue
		}
		got[f[len(f)-1]] = strings.Join(f[2:len(f)-1], " ")
	}
	checkReasons(t, "grid urls --failed", site.want, got)

	// One URL, with its history and WARC record.
	for u, mt := range site.ok {
		var rec contracts.URLRecord
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/urls?url="+url.QueryEscape(u), nil, &rec); code != http.StatusOK {
			t.Fatalf("GET urls?url=%s = %d", u, code)
		}
		if rec.Status != contracts.Indexed || rec.MIMEType == nil || *rec.MIMEType != mt || rec.Bytes == nil || *rec.Bytes == 0 {
			t.Errorf("record of %s = %s, mime %v, bytes %v; want indexed %s with its size", u, rec.Status, rec.MIMEType, rec.Bytes, mt)
		}
		var hist []contracts.Status
		for _, e := range rec.History {
			hist = append(hist, e.Status)
		}
		want := []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed, contracts.ToBeIndexed, contracts.Indexed}
		if diff := cmp.Diff(want, hist); diff != "" {
			t.Errorf("history of %s (-want +got):\n%s", u, diff)
		}
		if rec.WARC == nil {
			t.Errorf("record of %s has no WARC record", u)
			continue
		}
		resp, err := http.Get(api + rec.WARC.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/warc" ||
			!bytes.HasPrefix(body, []byte("WARC/1.")) || !bytes.Contains(body, []byte("WARC-Target-URI: "+u)) {
			t.Errorf("GET %s = %d %s, %q...; want the WARC response record of %s", rec.WARC.URL, resp.StatusCode,
				resp.Header.Get("Content-Type"), body[:min(len(body), 200)], u)
		}
	}
	var e contracts.ErrorResponse
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/urls?url="+url.QueryEscape(site.start+"never.html"), nil, &e); code != http.StatusNotFound {
		t.Errorf("GET urls?url= of an unknown URL = %d, want 404", code)
	}
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/nosuchcrawl/urls", nil, &e); code != http.StatusNotFound {
		t.Errorf("GET urls of an unknown crawl = %d, want 404", code)
	}

	checkReports(t, func(path string, out any) int { return apiDo(t, http.MethodGet, api+path, nil, out) }, id, g.Backends.Tx)
	if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/reports/nosuch", nil, &e); code != http.StatusNotFound ||
		!strings.Contains(e.Error, "failure-reasons") {
		t.Errorf("GET reports/nosuch = %d %q, want 404 naming the reports", code, e.Error)
	}
	out.Reset()
	if code := Main(t.Context(), []string{"report", "failure-reasons", id, "--api", api}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "robots.txt disallowed") {
		t.Errorf("grid report failure-reasons = exit %d:\n%s%s", code, out.String(), errOut.String())
	}

	// The timeline ends with the crawl's final counts.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var tl contracts.Timeline
		if code := apiDo(t, http.MethodGet, api+"/api/v1/crawls/"+id+"/timeline", nil, &tl); code != http.StatusOK {
			t.Fatalf("GET timeline = %d", code)
		}
		final := map[string]int64{}
		for s, n := range st.Counts {
			if n != 0 {
				final[string(s)] = n
			}
		}
		if n := len(tl.Points); n > 0 && cmp.Equal(final, tl.Points[n-1].Counts, cmpopts.EquateEmpty()) {
			if tl.IntervalMS != 50 {
				t.Errorf("timeline interval = %d ms, want 50", tl.IntervalMS)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeline = %+v, want it to end with the final counts %v", tl.Points, final)
		}
	}
}

func checkReasons(t *testing.T, where string, want, got map[string]string) {
	t.Helper()
	for u, part := range want {
		r, ok := got[u]
		switch {
		case !ok:
			t.Errorf("%s: %s missing, want failed with %q", where, u, part)
		case !strings.Contains(r, part):
			t.Errorf("%s: %s failed with %q, want %q", where, u, r, part)
		}
	}
	for u, r := range got {
		if _, ok := want[u]; !ok {
			t.Errorf("%s: %s failed (%q), want it not failed", where, u, r)
		}
	}
}

// checkReports compares every report of the API with the reports computed
// in Go from a full listing of the transaction index.
func checkReports(t *testing.T, get func(path string, out any) int, id string, tx txindex.Index) {
	t.Helper()
	var all []txindex.Record
	for after := ""; ; {
		rs, err := tx.Find(t.Context(), id, txindex.Filter{}, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rs...)
		if len(rs) < 500 {
			break
		}
		after = rs[len(rs)-1].Key
	}
	want := txindextest.Expected(all)
	report := func(name string, rows any) {
		t.Helper()
		body := struct {
			CrawlID string `json:"crawl_id"`
			Report  string `json:"report"`
			Rows    any    `json:"rows"`
		}{Rows: rows}
		if code := get("/api/v1/crawls/"+id+"/reports/"+name, &body); code != http.StatusOK {
			t.Fatalf("GET reports/%s = %d", name, code)
		}
		if body.CrawlID != id || body.Report != name {
			t.Errorf("GET reports/%s names crawl %q, report %q", name, body.CrawlID, body.Report)
		}
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var hosts []contracts.HostReportRow
	report("hosts", &hosts)
	var wantHosts []contracts.HostReportRow
	for _, h := range want.Hosts {
		codes := map[string]int64{}
		for c, n := range h.StatusCodes {
			codes[strconv.Itoa(c)] = n
		}
		wantHosts = append(wantHosts, contracts.HostReportRow{Host: h.Host, URLs: h.URLs, Fetched: h.Fetched, Failed: h.Failed, Bytes: h.Bytes, StatusCodes: codes})
	}
	if diff := cmp.Diff(wantHosts, hosts, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("hosts report (-want +got):\n%s", diff)
	}
	var mimes []contracts.MIMEReportRow
	report("mime-types", &mimes)
	var wantMIMEs []contracts.MIMEReportRow
	for _, m := range want.MIMETypes {
		wantMIMEs = append(wantMIMEs, contracts.MIMEReportRow{MIMEType: str(m.MIMEType), Count: m.Count, Bytes: m.Bytes})
	}
	if diff := cmp.Diff(wantMIMEs, mimes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("mime-types report (-want +got):\n%s", diff)
	}
	var codes []contracts.StatusCodeReportRow
	report("status-codes", &codes)
	var wantCodes []contracts.StatusCodeReportRow
	for _, c := range want.StatusCodes {
		row := contracts.StatusCodeReportRow{Count: c.Count}
		if c.StatusCode != 0 {
			row.StatusCode = &c.StatusCode
		}
		wantCodes = append(wantCodes, row)
	}
	if diff := cmp.Diff(wantCodes, codes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status-codes report (-want +got):\n%s", diff)
	}
	var reasons []contracts.ReasonReportRow
	report("failure-reasons", &reasons)
	var wantReasons []contracts.ReasonReportRow
	for _, r := range want.FailureReasons {
		wantReasons = append(wantReasons, contracts.ReasonReportRow{Reason: str(r.Reason), Count: r.Count, SampleURLs: r.SampleURLs})
	}
	if diff := cmp.Diff(wantReasons, reasons, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("failure-reasons report (-want +got):\n%s", diff)
	}
	// Independently of the index: the test crawl's own numbers.
	var fetched int64
	for _, h := range hosts {
		fetched += h.Fetched
	}
	if len(all) == 0 || fetched == 0 || !slices.ContainsFunc(mimes, func(m contracts.MIMEReportRow) bool { return m.MIMEType != nil && *m.MIMEType == "text/plain" }) {
		t.Errorf("reports show %d records, %d fetched, mime types %v; want the crawl's", len(all), fetched, mimes)
	}
}

// TestGridModeCrawlLog is TestCrawlLogFailures' check of the failures and
// the reports on the real backends (Elasticsearch's aggregations), with
// MCP, loader and crawler as processes.
func TestGridModeCrawlLog(t *testing.T) {
	env := realBackends(t)
	site := newFailingSite(t)
	c := newCluster(t, env, site.resolve)
	c.startAll()
	p := contracts.Profile{StartURLs: []string{site.start}, MaxDepth: 2, Scope: contracts.ScopeAny,
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey},
		Collection: e2eCollections}
	var created contracts.CreateCrawlResponse
	if code := c.do(http.MethodPost, "/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	id := created.CrawlID
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var st contracts.CrawlStatus
		c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
		if st.State == contracts.CrawlFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished: %v", st.Counts)
		}
	}
	got := map[string]string{}
	q := url.Values{"status": {"failed"}, "limit": {"2"}}
	for page := 0; ; page++ {
		if page > 20 {
			t.Fatal("the failed listing does not end")
		}
		var log contracts.CrawlLog
		if code := c.do(http.MethodGet, "/api/v1/crawls/"+id+"/urls?"+q.Encode(), nil, &log); code != http.StatusOK {
			t.Fatalf("GET urls?%s = %d", q.Encode(), code)
		}
		for _, r := range log.URLs {
			if r.Reason != nil {
				got[r.URL] = *r.Reason
			}
		}
		if log.NextCursor == nil {
			break
		}
		q.Set("cursor", *log.NextCursor)
	}
	checkReasons(t, "grid mode GET /urls?status=failed", site.want, got)
	set := c.openBackends(t)
	checkReports(t, func(path string, out any) int { return c.do(http.MethodGet, path, nil, out) }, id, set.Tx)
}
