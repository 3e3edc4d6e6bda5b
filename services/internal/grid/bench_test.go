package grid

import (
	"net/http"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// BenchmarkCrawlWeb crawls a simulated web of 200 hosts in-process on the
// embedded grid; one op is one whole crawl. It reports pages/s.
func BenchmarkCrawlWeb(b *testing.B) {
	web := websim.NewWeb(websim.WebConfig{Hosts: 1000, PagesPerHost: 20, LinksPerPage: 8, CrossHostLinks: 2, Seed: 1})
	if err := web.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(web.Close)
	pages := 0
	start := time.Now()
	for b.Loop() {
		b.StopTimer()
		cfg := testConfig(b, b.TempDir(), web.Resolve())
		_, api := startGrid(b, cfg)
		b.StartTimer()
		p := contracts.Profile{StartURLs: web.StartURLs(), MaxDepth: 20, Scope: contracts.ScopeDomain,
			Politeness: contracts.Politeness{MinDelayMS: 100, MaxDelayMS: 100, DelayFactor: 1}}
		var created contracts.CreateCrawlResponse
		if code := apiDo(b, http.MethodPost, api+"/api/v1/crawls", p, &created); code != http.StatusCreated {
			b.Fatalf("POST crawl = %d", code)
		}
		for {
			var st contracts.CrawlStatus
			apiDo(b, http.MethodGet, api+"/api/v1/crawls/"+created.CrawlID, nil, &st)
			if st.State != contracts.CrawlRunning {
				pages += int(st.Total)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.ReportMetric(float64(pages)/time.Since(start).Seconds(), "pages/s")
}
