package grid

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// segmentObject is what the object store says of one stored segment.
type segmentObject struct {
	size     int64
	etag     string
	modified time.Time
}

// warcObjects lists the cluster's WARC segment objects straight from MinIO.
func (c *gridCluster) warcObjects(t *testing.T) map[string]segmentObject {
	t.Helper()
	mc, err := minio.New(c.envValue("GRIDCRAWL_S3_ENDPOINT"), &minio.Options{
		Creds: credentials.NewStaticV4(c.envValue("GRIDCRAWL_S3_ACCESS_KEY"), c.envValue("GRIDCRAWL_S3_SECRET_KEY"), ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]segmentObject{}
	for o := range mc.ListObjects(t.Context(), c.envValue("GRIDCRAWL_S3_BUCKET"), minio.ListObjectsOptions{Prefix: "warc/", Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list segments: %v", o.Err)
		}
		out[o.Key] = segmentObject{o.Size, o.ETag, o.LastModified}
	}
	return out
}

// TestGridModeFixedLoaderIDRestart restarts a loader with a fixed
// GRIDCRAWL_LOADER_ID twice mid-crawl (SIGKILL, then SIGTERM) on MinIO. No
// segment object may be written twice, and every indexed record's asset
// reference must read back as the WARC response record of that record's URL.
func TestGridModeFixedLoaderIDRestart(t *testing.T) {
	env := realBackends(t)
	env, _ = ownVhost(t, env)
	web, starts, want := startWeb(t, websim.WebConfig{Hosts: 6, PagesPerHost: 30, LinksPerPage: 5, CrossHostLinks: 2, Seed: 13}, 3)

	c := newCluster(t, env, web.Resolve())
	c.env = append(c.env, "GRIDCRAWL_WARC_SEGMENT_BYTES=65536") // many segments
	c.start("mcp", "mcp")
	c.startLoaderWithID("loader-1", "fixed-loader")
	c.start("crawler-1", "crawler")
	p := contracts.Profile{StartURLs: starts, MaxDepth: contracts.MaxDepthLimit, Scope: contracts.ScopeDomain, Sitemaps: new(bool), // the oracle is the link graph
		Politeness: contracts.Politeness{MinDelayMS: 150, MaxDelayMS: 150, DelayFactor: 1}}
	id := c.startCrawl(p)

	seen := map[string]segmentObject{}
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		st := c.waitFetched(id, int64(len(want)*(i+1)/5), fmt.Sprintf("restart %d", i+1))
		if st.Counts[contracts.ToBeLoaded] == 0 {
			t.Fatalf("nothing left to load at restart %d; make the web slower", i+1)
		}
		c.stop("loader-1", sig)
		objs := c.warcObjects(t)
		t.Logf("loader stopped with %v at %v: %d segments", sig, st.Counts, len(objs))
		for k, o := range objs {
			seen[k] = o
		}
		c.startLoaderWithID("loader-1", "fixed-loader")
	}
	var st contracts.CrawlStatus
	for deadline := time.Now().Add(2 * time.Minute); st.State != contracts.CrawlFinished; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished after the restarts: %s %v", st.State, st.Counts)
		}
		c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
	}

	final := c.warcObjects(t)
	for k, before := range seen {
		after, ok := final[k]
		switch {
		case !ok:
			t.Errorf("segment %s vanished", k)
		case after != before:
			t.Errorf("segment %s written again: size %d etag %s at %v, then size %d etag %s at %v", k, before.size, before.etag, before.modified, after.size, after.etag, after.modified)
		}
	}

	set := c.openBackends(t)
	ctx := t.Context()
	indexed := 0
	indexes := map[string]map[int64]warc.CDXJ{} // segment key → its index lines by offset
	for _, r := range crawlRecords(t, set.Tx, id, "") {
		if r.Status != contracts.Indexed {
			t.Errorf("record %s = %s (%s), want indexed", r.URL, r.Status, r.Error)
			continue
		}
		indexed++
		if _, ok := final[r.Asset.Key]; !ok {
			t.Errorf("record %s refers to segment %q, which is not stored", r.URL, r.Asset.Key)
			continue
		}
		rc, err := set.Assets.Get(ctx, r.Asset.Key, r.Asset.Offset, r.Asset.Length)
		if err != nil {
			t.Errorf("WARC record of %s at %+v: %v", r.URL, r.Asset, err)
			continue
		}
		rec, err := warc.ReadRecord(rc, 64<<20)
		rc.Close()
		// A page fetched again after a kill finds its first fetch's
		// payload in the crawl's digest index (profile dedupe): a revisit
		// of that response.
		typ := rec.Header.Get("WARC-Type")
		revisitOfItself := typ == warc.TypeRevisit && rec.Header.Get(warc.FieldRefersToTargetURI) == r.URL
		if err != nil || typ != "response" && !revisitOfItself || rec.Header.Get("WARC-Target-URI") != r.URL {
			t.Errorf("WARC record of %s at %+v: type %q uri %q refers to %q err %v", r.URL, r.Asset, typ, rec.Header.Get("WARC-Target-URI"),
				rec.Header.Get(warc.FieldRefersToTargetURI), err)
			continue
		}
		if code, _, _, err := warc.ParseHTTPResponse(rec.Block); err != nil || code != http.StatusOK {
			t.Errorf("HTTP response in the WARC record of %s: %d, %v", r.URL, code, err)
		}
		// The segment's CDXJ index, stored beside it, has the record.
		lines, ok := indexes[r.Asset.Key]
		if !ok {
			lines = map[int64]warc.CDXJ{}
			if rc, err := set.Assets.Get(ctx, assets.CDXJKey(r.Asset.Key), 0, -1); err == nil {
				body, _ := io.ReadAll(rc)
				rc.Close()
				for l := range bytes.Lines(body) {
					if c, err := warc.ParseCDXJ(l); err == nil {
						lines[c.Offset] = c
					}
				}
			}
			indexes[r.Asset.Key] = lines
		}
		if c := lines[r.Asset.Offset]; c.URL != r.URL || c.Length != r.Asset.Length || c.Crawl != id {
			t.Errorf("CDXJ index of %s at offset %d: %+v, want the line of %s (length %d, crawl %s)", r.Asset.Key, r.Asset.Offset, c, r.URL, r.Asset.Length, id)
		}
	}
	if indexed != len(want) {
		t.Errorf("indexed records = %d, want %d", indexed, len(want))
	}
	// The API lists the segments the records point into, with MinIO's sizes.
	var list contracts.SegmentList
	if code := c.do(http.MethodGet, "/api/v1/crawls/"+id+"/segments", nil, &list); code != http.StatusOK {
		t.Fatalf("GET segments = %d", code)
	}
	if len(list.Segments) != len(indexes) {
		t.Errorf("GET segments listed %d segments, the records point into %d", len(list.Segments), len(indexes))
	}
	for _, s := range list.Segments {
		if s.Size == nil || *s.Size != final[s.Key].size {
			t.Errorf("segment %s listed with size %v, MinIO has %d", s.Key, s.Size, final[s.Key].size)
		}
	}
	t.Logf("%d segments, %d of them stored before a restart", len(final), len(seen))
}
