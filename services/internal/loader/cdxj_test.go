package loader

import (
	"bytes"
	"io"
	"path"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// putOnly hides the Appender of a store, as an S3 store has none.
type putOnly struct{ assets.Store }

// TestSegmentIndex: every stored WARC segment has its CDXJ index beside it,
// sorted once the loader stops, with one line for every response record
// (the pages and robots.txt) that points at that record, names the crawl and
// matches the record's own fields, on a store that appends (many flushes to
// one segment) and on one that does not (one object per flush), compressed
// or not.
func TestSegmentIndex(t *testing.T) {
	for _, tc := range []struct {
		name    string
		putOnly bool
		gzip    bool
	}{
		{"appending store, gzip", false, true},
		{"appending store, plain", false, false},
		{"put-only store, gzip", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t, "User-agent: *\nAllow: /\n")
			urls := s.pages(30)
			b := newBackends(t)
			if tc.putOnly {
				b.assets = putOnly{b.assets}
			}
			b.submit(t, "c", contracts.CrawlRunning, profile(urls...), urls...)
			_, stop := b.runLoader(t, config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "5ms",
				"GRIDCRAWL_WARC_GZIP": strconv.FormatBool(tc.gzip)}))
			b.waitLoaded(t, "c", urls...)
			stop()

			wantURLs := append(slices.Clone(urls), s.URL+"/robots.txt")
			var gotURLs []string
			segs := b.warcObjects(t)
			for key, body := range segs {
				rc, err := b.assets.Get(t.Context(), assets.CDXJKey(key), 0, -1)
				if err != nil {
					t.Fatalf("index of %s: %v", key, err)
				}
				index, _ := io.ReadAll(rc)
				rc.Close()
				lines := slices.Collect(bytes.Lines(index))
				if !slices.IsSortedFunc(lines, bytes.Compare) {
					t.Errorf("index of %s is not sorted:\n%s", key, index)
				}
				var fromIndex, fromSegment []warc.CDXJ
				for _, l := range lines {
					c, err := warc.ParseCDXJ(l)
					if err != nil {
						t.Fatal(err)
					}
					if c.Crawl != "c" || c.Filename != path.Base(key) {
						t.Errorf("line %s: crawl %q, file %q; want c, %s", l, c.Crawl, c.Filename, path.Base(key))
					}
					rec, err := warc.ReadRecord(bytes.NewReader(body[c.Offset:c.Offset+c.Length]), 1<<20)
					if err != nil || rec.Header.Get(warc.FieldTargetURI) != c.URL || rec.Header.Get(warc.FieldType) != warc.TypeResponse {
						t.Errorf("line %s: record there is %v, %v", l, rec.Header, err)
					}
					c.Crawl = ""
					fromIndex = append(fromIndex, c)
					gotURLs = append(gotURLs, c.URL)
				}
				reindex, err := warc.IndexWARC(bytes.NewReader(body), path.Base(key), 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range reindex {
					c, _ := warc.ParseCDXJ(l)
					fromSegment = append(fromSegment, c)
				}
				if diff := cmp.Diff(fromSegment, fromIndex); diff != "" {
					t.Errorf("index of %s differs from the segment's records (-segment +index):\n%s", key, diff)
				}
			}
			slices.Sort(wantURLs)
			slices.Sort(gotURLs)
			if diff := cmp.Diff(wantURLs, gotURLs); diff != "" {
				t.Errorf("indexed URLs (-want +got):\n%s", diff)
			}
			for _, u := range urls {
				a := b.record(t, "c", u).Asset
				if !bytes.Contains(indexOf(t, b, a.Key), []byte(`"length": "`+strconv.FormatInt(a.Length-plainTrailer(tc.gzip), 10)+`", "offset": "`+strconv.FormatInt(a.Offset, 10)+`"`)) {
					t.Errorf("index of %s has no line for %s at %d+%d", a.Key, u, a.Offset, a.Length)
				}
			}
		})
	}
}

func plainTrailer(gzip bool) int64 {
	if gzip {
		return 0
	}
	return 4
}

func indexOf(t *testing.T, b *backends, key string) []byte {
	t.Helper()
	rc, err := b.assets.Get(t.Context(), assets.CDXJKey(key), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	body, _ := io.ReadAll(rc)
	return body
}
