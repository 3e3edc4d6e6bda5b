package browser

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gridcrawl/gridcrawl/pkg/proctree"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// BenchmarkRenderScriptPage renders item pages of a ScriptSite (a shell
// whose script fetches JSON and builds the page) one at a time, and reports
// the browser's CPU per page (all its processes, the renderers that exited
// included) and the wall time per page. BENCH_PATH=/static renders a static
// page instead; BENCH_IDLE sets the network idle wait (default 500ms).
//
//	go test ./pkg/browser -run '^$' -bench RenderScriptPage -benchtime 100x
func BenchmarkRenderScriptPage(b *testing.B) {
	br := newBrowser(b, Config{})
	site := websim.NewScriptSite(1000)
	srv := httptest.NewServer(site)
	defer srv.Close()
	f := &fetcher{}
	page := func(i int) Page {
		u := srv.URL + "/app/item/" + strconv.Itoa(1+i%1000)
		if os.Getenv("BENCH_PATH") == "/static" {
			u = srv.URL + "/static/a.html"
		}
		resp, err := http.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return Page{URL: u, Main: &Response{Status: 200, Header: resp.Header, Body: body}, Fetch: f.fetch, Timeout: 10 * time.Second, IdleWait: idleWait()}
	}
	ctx := context.Background()
	if _, err := br.Render(ctx, page(0)); err != nil { // starts the browser
		b.Fatal(err)
	}
	br.mu.Lock()
	pid := chromedp.FromContext(br.cur.ctx).Browser.Process().Pid
	br.mu.Unlock()
	cpu0 := proctree.TreeCPU(pid)
	b.ResetTimer()
	for i := range b.N {
		res, err := br.Render(ctx, page(i+1))
		if err != nil || len(res.DOM) == 0 {
			b.Fatalf("render: %v", err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((proctree.TreeCPU(pid)-cpu0).Milliseconds())/float64(b.N), "browser-CPU-ms/page")
}

func idleWait() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("BENCH_IDLE"))
	return d
}
