package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCapacitySeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`# HELP gridcrawl_queue_published_total Contracts published.
# TYPE gridcrawl_queue_published_total counter
gridcrawl_queue_published_total{queue="crawler_pending"} 12
gridcrawl_queue_published_total{queue="loader_pending"} 3.5e+02
gridcrawl_queue_published_totalx{queue="loader_pending"} 99
gridcrawl_loader_warc_bytes_total 1048576
gridcrawl_backend_operation_duration_seconds_bucket{backend="txindex",operation="get",le="0.1"} 7
gridcrawl_backend_operation_duration_seconds_count{backend="txindex",operation="get"} 9
go_goroutines 42
`))
	}))
	defer srv.Close()
	got, err := capacitySeries(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`gridcrawl_queue_published_total{queue="crawler_pending"}`:                              12,
		`gridcrawl_queue_published_total{queue="loader_pending"}`:                               350,
		`gridcrawl_loader_warc_bytes_total`:                                                     1048576,
		`gridcrawl_backend_operation_duration_seconds_count{backend="txindex",operation="get"}`: 9,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series %v, want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestLoaderQueueBytes(t *testing.T) {
	out := `loader_pending.00	3	1200
loader_pending.00.delay.1s	2	800
loader_pending.00.dead	5	9999
loader_pending.15	0	0
crawler_pending	7	70000
index_pending	1	500
loader_pending.03	x	1
loader_pending.04	4
`
	m, b := loaderQueueBytes(out)
	if m != 9 || b != 2000 {
		t.Errorf("loaderQueueBytes = %d messages, %d bytes; want 9, 2000 (shards and delay queues, no dead-letter or other queues; a queue without message_bytes counts its messages)", m, b)
	}
}
