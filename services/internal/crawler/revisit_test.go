package crawler

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/digests"
	"github.com/gridcrawl/gridcrawl/pkg/fsassets"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// TestLoadRevisit: a page stored as a revisit record is parsed from its
// original: through the original's ref its contract carries, or, for a
// contract that names none (a page parsed again from its transaction
// record), through the digest index entry of its payload, which must be
// the record the revisit refers to.
func TestLoadRevisit(t *testing.T) {
	dir := t.TempDir()
	store, err := fsassets.Open(filepath.Join(dir, "assets"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	idx, err := sqlitestore.OpenDigests(filepath.Join(dir, "digests.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })

	const body = "<html><body><p>the payload</p><a href=\"/next\">next</a></body></html>"
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body)
	then := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	orig := warc.NewResponseRecord("http://a.test/old", then, "127.0.0.1", resp, false, "")
	digest := warc.PayloadDigest(resp)
	rv, err := warc.NewRevisitRecord(warc.Revisit{TargetURI: "http://a.test/new", Date: then.Add(720 * time.Hour), Profile: warc.ProfileIdenticalPayloadDigest,
		HTTPResponse: resp, PayloadDigest: digest, RefersToTargetURI: "http://a.test/old", RefersToDate: then, RefersTo: warc.RecordID(orig)})
	if err != nil {
		t.Fatal(err)
	}
	seg := warc.NewSegment(true)
	oOff, oLen, _ := seg.Append(orig)
	rOff, rLen, _ := seg.Append(rv)
	const key = "warc/2026/10/01/test.warc.gz"
	if err := store.Put(t.Context(), key, bytes.NewReader(seg.Bytes()), seg.Len(), "application/warc+gzip"); err != nil {
		t.Fatal(err)
	}
	origRef := contracts.AssetRef{Key: key, Offset: oOff, Length: oLen}
	rvRef := contracts.AssetRef{Key: key, Offset: rOff, Length: rLen}
	const scope = "collection:monthly"
	if _, err := idx.Add(t.Context(), []digests.Entry{{Ref: digests.Ref{Scope: scope, Digest: digest}, URI: "http://a.test/old", Date: then,
		RecordID: warc.RecordID(orig), Key: key, Offset: oOff, Length: oLen}}); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Workers: 1, Prefetch: 1, MaxBodyBytes: 1 << 20, DecodeBudget: 16 << 20, MaxTextBytes: 1 << 20, MaxLinks: 100},
		Deps{Assets: store, Digests: idx})

	// The contract names the original: it is read, not the revisit.
	page := contracts.CrawlerPage{URL: "http://a.test/new", Asset: rvRef, Original: &origRef}
	if got := readRef(page, nil); got != origRef {
		t.Errorf("readRef of a page with its original = %v, want %v", got, origRef)
	}
	handed := map[contracts.AssetRef]handedResponse{rvRef: {response: resp}}
	if got := readRef(page, handed); got != rvRef {
		t.Errorf("readRef of a handed page = %v, want its own %v", got, rvRef)
	}

	// A contract that names none: the revisit is found and resolved.
	_, _, _, _, _, err = c.load(t.Context(), rvRef, nil, nil, c.cfg.MaxBodyBytes)
	var re *revisitError
	if !errors.As(err, &re) || re.digest != digest || re.refersTo != warc.RecordID(orig) {
		t.Fatalf("load of a revisit record = %v, want a revisit error of %s", err, digest)
	}
	ref, err := c.resolveRevisit(t.Context(), scope, re)
	if err != nil || ref != origRef {
		t.Fatalf("resolveRevisit = %v, %v; want %v", ref, err, origRef)
	}
	status, _, _, got, release, err := c.load(t.Context(), ref, nil, nil, c.cfg.MaxBodyBytes)
	release()
	if err != nil || status != 200 || string(got) != body {
		t.Fatalf("load of the original = %d, %q, %v; want 200 and the payload", status, got, err)
	}

	// Revisits that cannot be resolved are bad records, not errors to retry.
	for name, tc := range map[string]struct {
		c     *Crawler
		scope string
		rv    revisitError
	}{
		"another scope":         {c, "collection:other", *re},
		"another original":      {c, scope, revisitError{digest: digest, refersTo: "<urn:uuid:00000000-0000-4000-8000-000000000000>"}},
		"no digest index":       {New(Config{MaxBodyBytes: 1 << 20}, Deps{Assets: store}), scope, *re},
		"dedupe off (no scope)": {c, "", *re},
	} {
		var bad *badRecordError
		if _, err := tc.c.resolveRevisit(t.Context(), tc.scope, &tc.rv); !errors.As(err, &bad) {
			t.Errorf("%s: resolveRevisit = %v, want a bad record", name, err)
		}
	}
}
