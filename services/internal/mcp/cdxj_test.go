package mcp

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// TestCrawlCDXJSortsInRuns: /cdxj and a segment's .cdxj, sorted in many
// runs spilled to disk and merged, are byte for byte what warc.SortCDXJ
// makes of the same lines in memory: the crawl's lines (named for it, or
// unnamed at an offset its records point to) of all its segments, sorted,
// exact duplicates dropped; a segment's .cdxj holds every line of it (the
// segments hold only the crawl's records: which records are a crawl's is
// TestSharedSegment's). The runs are removed once sent.
func TestCrawlCDXJSortsInRuns(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx := t.Context()
	set, err := wire.Open(ctx, wire.Backends{DataDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	const id = "crawla"
	for _, c := range []string{id} {
		if err := set.Profiles.Put(ctx, profiles.Crawl{ID: c, Profile: contracts.Profile{Name: c}.WithDefaults(),
			State: contracts.CrawlRunning, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"gridcrawl-20261123195000123-00001-l1-abc.warc.gz", "gridcrawl-20261124080000000-00002-l1-abc.warc.gz"}
	var want, segWant [][]byte // the crawl's lines; the first segment's lines
	var recs []txindex.Record
	for si, name := range names {
		key := segmentKey(name)
		var index []byte
		for i := range 400 {
			c := warc.CDXJ{Key: fmt.Sprintf("test,a)/%d", (i*7919)%251), Time: time.Date(2026, 11, 23, 19, 50, i%60, 0, time.UTC),
				URL: fmt.Sprintf("http://a.test/%d", (i*7919)%251), MIME: "text/html", Status: 200, Length: 100,
				Offset: int64(i) * 100, Filename: name}
			if i%4 != 3 { // else unnamed: the crawl's as a record of it points there
				c.Crawl = id
			}
			if c.Crawl == "" || i%50 == 0 {
				recs = append(recs, txindex.Record{Key: txindex.Key(id, fmt.Sprintf("http://a.test/r%d-%d", si, i)), CrawlID: id,
					URL: fmt.Sprintf("http://a.test/r%d-%d", si, i), Status: contracts.Indexed,
					Asset: contracts.AssetRef{Key: key, Offset: c.Offset, Length: 100}})
			}
			line := c.AppendLine(nil)
			index = append(index, line...)
			if i%9 == 0 {
				index = append(index, line...) // indexed twice
			}
			if si == 0 {
				segWant = append(segWant, line)
			}
			want = append(want, line)
		}
		body := make([]byte, 400*100)
		if err := set.Assets.Put(ctx, key, bytes.NewReader(body), int64(len(body)), "application/warc"); err != nil {
			t.Fatal(err)
		}
		if err := set.Assets.Put(ctx, assets.CDXJKey(key), bytes.NewReader(index), int64(len(index)), "application/x-cdxj"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := set.Tx.Create(ctx, recs); err != nil {
		t.Fatal(err)
	}
	m := New(Config{}, Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets,
		Embedded: true, Logger: slog.New(slog.DiscardHandler)})
	m.cdxjRunBytes = 3000 // about 8 lines a run: many runs
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path string
		want [][]byte
	}{
		{"/cdxj", want},
		{"/segments/" + names[0] + ".cdxj", segWant},
	} {
		res, err := srv.Client().Get(srv.URL + "/api/v1/crawls/" + id + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s, %v", tc.path, res.Status, err)
		}
		sorted := bytes.Join(warc.SortCDXJ(tc.want), nil)
		if !bytes.Equal(body, sorted) {
			t.Errorf("GET %s: %d bytes, %d lines; want SortCDXJ's %d bytes, %d lines", tc.path, len(body), bytes.Count(body, []byte("\n")),
				len(sorted), bytes.Count(sorted, []byte("\n")))
		}
		if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
			t.Errorf("GET %s: %d files left in the temporary directory (%v)", tc.path, len(entries), err)
		}
	}
}
