package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/hcf/hcftest"
)

// The HCF API benchmarks run over HTTP on loopback, parsing and encoding
// included. Run them with:
//
//	go test -run '^$' -bench HCF -benchtime 1s ./services/internal/mcp/
//
// and with GRIDCRAWL_ES_URL set for the Elasticsearch store too.

// benchBackends are the embedded store, and Elasticsearch when
// GRIDCRAWL_ES_URL is set.
func benchBackends() []hcfBackend {
	all := hcfBackends()
	if os.Getenv("GRIDCRAWL_ES_URL") == "" {
		return all[:1]
	}
	return all
}

// ingestBody returns n JSON lines of requests with fingerprints from
// first on, as a crawler posts them.
func ingestBody(first, n int) string {
	var sb strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&sb, "{\"fp\":\"https://host.example/section/%d/page-%09d.html\",\"qdata\":{\"depth\":3,\"ref\":\"https://host.example/\"},\"p\":%d}\n", i%97, i, i%4)
	}
	return sb.String()
}

func benchPost(b *testing.B, u, body string) {
	res, err := http.Post(u, "application/x-jsonlines", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		b.Fatalf("POST %s = %d", u, res.StatusCode)
	}
}

// BenchmarkHCFIngest posts 1,000 requests per POST of which half were seen
// before (the previous POST's second half), and reports fingerprints
// ingested per second (seen and new) and new requests enqueued per second.
func BenchmarkHCFIngest(b *testing.B) {
	const lines = 1000
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			u := hcfServer(b, be.new(b, hcftest.Clock()), "") + "/hcf/bench/f/s/host.example"
			benchPost(b, u, ingestBody(0, lines/2))
			bodies := make([]string, 0, 64)
			b.ResetTimer()
			for i := range b.N {
				if i%64 == 0 {
					b.StopTimer()
					bodies = bodies[:0]
					for j := i; j < i+64; j++ {
						bodies = append(bodies, ingestBody(j*lines/2, lines))
					}
					b.StartTimer()
				}
				benchPost(b, u, bodies[i%64])
			}
			b.StopTimer()
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*lines)/s, "fps/s")
			b.ReportMetric(float64(b.N*lines/2)/s, "new/s")
		})
	}
}

// BenchmarkHCFIngestParallel is BenchmarkHCFIngest from 8 clients at
// once, each posting to a slot of its own.
func BenchmarkHCFIngestParallel(b *testing.B) {
	const lines, clients = 1000, 8
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			base := hcfServer(b, be.new(b, hcftest.Clock()), "") + "/hcf/bench/f/s/host"
			var slot atomic.Int64
			b.SetParallelism(clients / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				u := fmt.Sprint(base, slot.Add(1))
				for i := 0; pb.Next(); i++ {
					benchPost(b, u, ingestBody(i*lines/2, lines))
				}
			})
			b.StopTimer()
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*lines)/s, "fps/s")
		})
	}
}

// BenchmarkHCFRead reads a queue of 10,000 requests (100 batches) with GET
// q and reports requests read per second.
func BenchmarkHCFRead(b *testing.B) {
	const total = 10000
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			u := hcfServer(b, be.new(b, hcftest.Clock()), "") + "/hcf/bench/f/s/host.example"
			for i := 0; i < total; i += 1000 {
				benchPost(b, u, strings.ReplaceAll(ingestBody(i, 1000), `,"p":`, `,"x":`))
			}
			b.ResetTimer()
			for range b.N {
				res, err := http.Get(u + "/q")
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || n < total*50 {
					b.Fatalf("GET q = %d, %d bytes", res.StatusCode, n)
				}
			}
			b.ReportMetric(float64(b.N*total)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}

// BenchmarkHCFConsume runs a scheduler's cycle over a queue of 1,000 new
// requests (10 batches): POST them, GET q, POST q/deleted with the ids read.
// It reports requests consumed per second.
func BenchmarkHCFConsume(b *testing.B) {
	const n = 1000
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			u := hcfServer(b, be.new(b, hcftest.Clock()), "") + "/hcf/bench/f/s/host.example"
			body := strings.ReplaceAll(ingestBody(0, n), `,"p":`, `,"x":`)
			for i := range b.N {
				benchPost(b, u, strings.ReplaceAll(body, "page-", fmt.Sprintf("page%d-", i)))
				res, err := http.Get(u + "/q")
				if err != nil {
					b.Fatal(err)
				}
				var ids strings.Builder
				dec := json.NewDecoder(res.Body)
				for {
					var batch struct {
						ID string `json:"id"`
					}
					if err := dec.Decode(&batch); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					fmt.Fprintf(&ids, "%q\n", batch.ID)
				}
				res.Body.Close()
				if got := strings.Count(ids.String(), "\n"); got != n/100 {
					b.Fatalf("GET q = %d batches, want %d", got, n/100)
				}
				benchPost(b, u+"/q/deleted", ids.String())
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
