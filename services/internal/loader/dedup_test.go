package loader

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// TestDedupConcurrentLoadersNeverReferToNothing: two loaders store pages
// of two crawls of one collection at once, every page with the same
// payload. Whichever stores it first, every revisit record refers to a
// response record that is stored, with the same payload digest; each
// page's transaction record points at its own record (the response, or
// the revisit); and far fewer responses than pages are stored.
func TestDedupConcurrentLoadersNeverReferToNothing(t *testing.T) {
	b := newBackends(t)
	idx, err := sqlitestore.OpenDigests(filepath.Join(t.TempDir(), "digests.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	s := newSite(t, "")
	s.body = func(string) string { return "<html><body><p>one payload at every url</p></body></html>" }
	cfg := config(t, map[string]string{"GRIDCRAWL_WARC_FLUSH_INTERVAL": "20ms", "GRIDCRAWL_DEDUP_CHECK_TTL": "0"})
	for i := range 2 {
		c := cfg
		c.ID = fmt.Sprintf("loader-%d", i)
		b.runLoaderWith(t, c, func(d *Deps) { d.Digests = idx })
	}
	const n = 20
	urls := s.pages(n)
	var wg sync.WaitGroup
	for i := range 2 {
		p := profile(urls...)
		p.Politeness.MinDelayMS, p.Politeness.MaxDelayMS = 1, 1
		p.Collection = []string{"race"}
		id := fmt.Sprintf("crawl-%d", i)
		wg.Go(func() { b.submit(t, id, contracts.CrawlRunning, p, urls...) })
	}
	wg.Wait()
	for i := range 2 {
		b.waitLoaded(t, fmt.Sprintf("crawl-%d", i), urls...)
	}

	responses := map[string]string{} // record id → payload digest
	var revisits []warc.Record
	for _, rec := range records(t, b.warcObjects(t)) {
		switch rec.Header.Get(warc.FieldType) {
		case warc.TypeResponse:
			if rec.Header.Get(warc.FieldTargetURI) != "" && !isRobots(rec) {
				responses[rec.Header.Get(warc.FieldRecordID)] = rec.Header.Get(warc.FieldPayloadDigest)
			}
		case warc.TypeRevisit:
			revisits = append(revisits, rec)
		}
	}
	t.Logf("%d pages: %d responses, %d revisits", 2*n, len(responses), len(revisits))
	for _, rv := range revisits {
		refers := rv.Header.Get(warc.FieldRefersTo)
		digest, ok := responses[refers]
		if !ok {
			t.Errorf("revisit of %s refers to %s, which is not a stored response", rv.Header.Get(warc.FieldTargetURI), refers)
		} else if digest != rv.Header.Get(warc.FieldPayloadDigest) {
			t.Errorf("revisit of %s: payload %s, its original's %s", rv.Header.Get(warc.FieldTargetURI), rv.Header.Get(warc.FieldPayloadDigest), digest)
		}
	}
	if len(responses)+len(revisits) != 2*n || len(responses) == 0 || len(responses) >= n {
		t.Errorf("%d responses and %d revisits of %d pages: want one record each, far fewer responses than pages", len(responses), len(revisits), 2*n)
	}
	for i := range 2 {
		id := fmt.Sprintf("crawl-%d", i)
		for _, u := range urls {
			r := b.record(t, id, u)
			if r.Status != contracts.ToBeParsed {
				t.Errorf("%s %s: %s, want to-be-parsed (a revisit is parsed as a new page)", id, u, r.Status)
				continue
			}
			rec, err := b.readAsset(t, r.Asset)
			if err != nil || rec.Header.Get(warc.FieldTargetURI) != u {
				t.Errorf("%s %s: its asset holds a record of %q (%v), want its own", id, u, rec.Header.Get(warc.FieldTargetURI), err)
			}
		}
	}
}

// isRobots reports whether rec is a robots.txt response.
func isRobots(rec warc.Record) bool {
	u := rec.Header.Get(warc.FieldTargetURI)
	return len(u) > 11 && u[len(u)-11:] == "/robots.txt"
}
