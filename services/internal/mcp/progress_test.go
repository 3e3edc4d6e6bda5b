package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// slowStore is an embedded asset store whose objects are read slowly: a
// chunk of them every delay, as from a busy disk or a far MinIO.
type slowStore struct {
	assets.Store
	delay time.Duration
	chunk int
}

func (s slowStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return &slowReader{ReadCloser: rc, s: s}, nil
}

func (s slowStore) Stat(ctx context.Context, key string) (assets.Info, error) {
	return s.Store.(assets.Stater).Stat(ctx, key)
}

type slowReader struct {
	io.ReadCloser
	s slowStore
}

func (r *slowReader) Read(p []byte) (int, error) {
	time.Sleep(r.s.delay)
	return r.ReadCloser.Read(p[:min(len(p), r.s.chunk)])
}

// slowIndex is an embedded search index whose export pages come slowly.
type slowIndex struct {
	search.Index
	delay time.Duration
}

func (s slowIndex) Documents(ctx context.Context, crawlID, after string, limit int) ([]contracts.Document, error) {
	time.Sleep(s.delay)
	return s.Index.Documents(ctx, crawlID, after, limit)
}

// TestDownloadsOutlastWriteTimeout: through the MCP's handler, behind a
// server whose WriteTimeout is shorter than the whole response, a segment
// (whole and a range of it), a segment's index and the crawl's documents
// come whole when they are slow but make progress: the WriteTimeout does
// not cut a download that goes on.
func TestDownloadsOutlastWriteTimeout(t *testing.T) {
	ctx := t.Context()
	set, err := wire.Open(ctx, wire.Backends{DataDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	const id = "slowcrawl"
	if err := set.Profiles.Put(ctx, profiles.Crawl{ID: id, Profile: contracts.Profile{Name: "slow"}.WithDefaults(),
		State: contracts.CrawlRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const name = "gridcrawl-20261123195000123-00001-l1-abc.warc.gz"
	key := segmentKey(name)
	seg := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	if err := set.Assets.Put(ctx, key, bytes.NewReader(seg), int64(len(seg)), "application/warc"); err != nil {
		t.Fatal(err)
	}
	var index []byte
	for i := range 200 {
		c := warc.CDXJ{Key: fmt.Sprintf("test,a)/%04d", i), Time: time.Date(2026, 11, 23, 19, 50, 0, 0, time.UTC),
			URL: fmt.Sprintf("http://a.test/%04d", i), MIME: "text/html", Status: 200, Length: 10, Offset: int64(i) * 10,
			Filename: name, Crawl: id}
		index = c.AppendLine(index)
	}
	if err := set.Assets.Put(ctx, assets.CDXJKey(key), bytes.NewReader(index), int64(len(index)), "application/x-cdxj"); err != nil {
		t.Fatal(err)
	}
	docs := make([]contracts.Document, search.MaxExportPage*2+1) // three pages
	for i := range docs {
		docs[i] = contracts.Document{ID: fmt.Sprintf("doc%05d", i), CrawlID: id, URL: fmt.Sprintf("http://a.test/%05d", i),
			LoadDate: time.Now().UTC(), Title: []string{"page"}, Host: "a.test", Text: strings.Repeat("word ", 20)}
	}
	if err := set.Search.Upsert(ctx, docs); err != nil {
		t.Fatal(err)
	}

	m := New(Config{}, Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles,
		Search:   slowIndex{Index: set.Search, delay: 250 * time.Millisecond}, // 750 ms for three pages
		Assets:   slowStore{Store: set.Assets, delay: 50 * time.Millisecond, chunk: 4096},
		Embedded: true, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewUnstartedServer(m.Handler())
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	base := srv.URL + "/api/v1/crawls/" + id

	for _, tc := range []struct {
		name, path, rng string
		want            func(body []byte) bool
	}{
		// 16 reads of 4 KiB, 50 ms each: 800 ms.
		{"segment", "/segments/" + name, "", func(b []byte) bool { return bytes.Equal(b, seg) }},
		{"segment range", "/segments/" + name, "bytes=4096-", func(b []byte) bool { return bytes.Equal(b, seg[4096:]) }},
		{"segment index", "/segments/" + name + ".cdxj", "", func(b []byte) bool { return bytes.Equal(b, index) }},
		{"documents", "/documents", "", func(b []byte) bool { return bytes.Count(b, []byte("\n")) == len(docs) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", tc.path, err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("GET %s: read %d bytes, then %v", tc.path, len(body), err)
			}
			if res.StatusCode/100 != 2 || !tc.want(body) {
				t.Errorf("GET %s: %s, %d bytes, not the whole download", tc.path, res.Status, len(body))
			}
		})
	}
}
