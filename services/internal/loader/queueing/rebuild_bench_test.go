package queueing

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/frontier"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// BenchmarkRebuild times a new owner's rebuild of one shard's frontier from
// the transaction index (rebuildShard: Owners.Waiting pages filed into a
// Pebble store) for a shard of GRIDCRAWL_BENCH_REBUILD_RECORDS to-be-loaded
// records (100,000 by default) over 100 groups, among as many records of
// another shard. On SQLite always, on Elasticsearch when GRIDCRAWL_ES_URL is
// set. The records are written first, untimed:
//
//	GRIDCRAWL_BENCH_REBUILD_RECORDS=1000000 go test -run '^$' -bench Rebuild -benchtime 1x ./services/internal/loader/queueing
func BenchmarkRebuild(b *testing.B) {
	n := 100000
	if v := os.Getenv("GRIDCRAWL_BENCH_REBUILD_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("sqlite", func(b *testing.B) {
		x, err := sqlitestore.OpenTxIndex(filepath.Join(b.TempDir(), "tx.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { x.Close() })
		benchRebuild(b, x, n)
	})
	if url := os.Getenv("GRIDCRAWL_ES_URL"); url != "" {
		b.Run("elasticsearch", func(b *testing.B) {
			prefix := fmt.Sprintf("bench-rebuild-%d", time.Now().UnixNano())
			c, err := esindex.Open(b.Context(), esindex.Options{URL: url, Prefix: prefix, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				_ = c.DeleteIndices(b.Context())
				c.Close()
			})
			benchRebuild(b, c.TxIndex(), n)
		})
	}
}

func benchRebuild(b *testing.B, x txindex.Index, n int) {
	const shards = 2
	now := time.Now().UTC()
	batch := make([]txindex.Record, 0, 5000)
	for i := range 2 * n {
		shard := i % shards
		group := fmt.Sprintf("h%d-%d.test", shard, i/shards%100)
		u := fmt.Sprintf("http://%s/p/%d", group, i)
		batch = append(batch, txindex.Record{Key: txindex.Key("c", u), CrawlID: "c", URL: u, Host: group, Group: group,
			Shard: txindex.ShardID(shard, shards), Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now})
		if len(batch) == cap(batch) || i == 2*n-1 {
			if _, err := x.Create(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	l := &Frontier{shards: shards, own: &owners{tx: x}}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		store, err := frontier.Open(b.Context(), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		got, err := l.rebuildShard(b.Context(), 0, store)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		b.StopTimer()
		if got != n {
			b.Fatalf("rebuilt %d URLs, want %d", got, n)
		}
		if q := store.Queues(); len(q) != 100 || !strings.HasPrefix(q[0].Group, "h0-") {
			b.Fatalf("rebuilt queues = %d (%v), want the 100 groups of shard 0", len(q), q[:min(len(q), 2)])
		}
		b.ReportMetric(float64(d.Microseconds())/float64(n), "µs/url")
		b.ReportMetric(d.Seconds(), "s/rebuild")
		_ = store.Close()
		b.StartTimer()
	}
}
