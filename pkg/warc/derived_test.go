package warc

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
)

// testSegment returns a segment of a warcinfo, request, response and
// metadata record, compressed or not, with where Append put each.
func testSegment(t *testing.T, compress bool) (seg []byte, recs []Record, offsets, lengths []int64) {
	t.Helper()
	s := NewSegment(compress)
	info := NewWarcinfoRecord(fixedDate, map[string]string{"software": "gridcrawl", "format": "WARC File Format 1.1"})
	req, resp := exchange()
	meta := NewMetadataRecord("http://example.test/page?x=1", fixedDate, respID, "render-reason", "always", "render-cut", "requests")
	for _, r := range []Record{info, req, resp, meta} {
		off, n, err := s.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		recs, offsets, lengths = append(recs, r), append(offsets, off), append(lengths, n)
	}
	return bytes.Clone(s.Bytes()), recs, offsets, lengths
}

func TestScanner(t *testing.T) {
	for _, compress := range []bool{true, false} {
		seg, recs, offsets, lengths := testSegment(t, compress)
		sc := NewScanner(bytes.NewReader(seg), 0)
		for i, want := range recs {
			got, err := sc.Next()
			if err != nil {
				t.Fatalf("compress=%v: Next %d: %v", compress, i, err)
			}
			head, _ := appendHeader(nil, want)
			if got.Offset != offsets[i] || got.Length != lengths[i] || got.Compressed != compress ||
				got.HeaderLength != int64(len(head)) || got.SlopLength != 4 || !bytes.Equal(got.Block, want.Block) {
				t.Errorf("compress=%v: record %d at %d+%d header %d slop %d, want %d+%d header %d slop 4",
					compress, i, got.Offset, got.Length, got.HeaderLength, got.SlopLength, offsets[i], lengths[i], len(head))
			}
			if !compress {
				continue
			}
			member := seg[got.Offset : got.Offset+got.Length]
			zr, err := gzip.NewReader(bytes.NewReader(member))
			if err != nil {
				t.Fatal(err)
			}
			inflated, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if got.Gzip.InflatedLength != int64(len(inflated)) || got.Gzip.InflatedCRC != crc32.ChecksumIEEE(inflated) ||
				got.Gzip.HeaderLength != 10 || got.Gzip.FooterLength != 8 {
				t.Errorf("record %d gzip %+v, want inflated %d crc %d header 10 footer 8", i, got.Gzip, len(inflated), crc32.ChecksumIEEE(inflated))
			}
		}
		if _, err := sc.Next(); err != io.EOF {
			t.Errorf("compress=%v: Next after the last = %v, want io.EOF", compress, err)
		}
	}
}

func TestScannerErrors(t *testing.T) {
	seg, _, offsets, _ := testSegment(t, true)
	cut := seg[:offsets[2]+20] // inside the response's member
	sc := NewScanner(bytes.NewReader(cut), 0)
	var err error
	for range 5 {
		if _, err = sc.Next(); err != nil {
			break
		}
	}
	if err == nil || err == io.EOF {
		t.Fatalf("a cut segment scanned to %v, want an error", err)
	}
	if _, again := sc.Next(); again == nil || again.Error() != err.Error() {
		t.Errorf("Next after an error = %v, want %v again", again, err)
	}
	big, _, _, _ := testSegment(t, true)
	sc = NewScanner(bytes.NewReader(big), 10)
	if _, err := sc.Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a block over maxBlock: %v, want ErrTooLarge", err)
	}
}

// readAll reads every record of a derived file, checking that each is its
// own gzip member.
func readAll(t *testing.T, file []byte) []Scanned {
	t.Helper()
	var out []Scanned
	sc := NewScanner(bytes.NewReader(file), 0)
	for {
		s, err := sc.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !s.Compressed {
			t.Fatalf("record %d is not a gzip member of its own", len(out))
		}
		out = append(out, s)
	}
}

func TestWETWriter(t *testing.T) {
	write := func() []byte {
		var b bytes.Buffer
		w, err := NewWETWriter(&b, "seg.warc.wet.gz", fixedDate, map[string]string{"software": "gridcrawl"})
		if err != nil {
			t.Fatal(err)
		}
		pages := []WETPage{
			{TargetURI: "http://example.test/a", Date: "2025-03-14T15:09:26Z", RecordID: respID, Title: "Page A", Text: "Hello, world. Grüße"},
			{TargetURI: "http://example.test/b", Date: "2025-03-14T15:09:27Z", RecordID: reqID, Title: "two\nlines", Text: ""},
		}
		for _, p := range pages {
			if err := w.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		if w.Count() != 3 {
			t.Errorf("Count = %d, want 3", w.Count())
		}
		return b.Bytes()
	}
	file := write()
	if again := write(); !bytes.Equal(file, again) {
		t.Error("the same pages made two different WET files (record ids must derive from the pages)")
	}
	recs := readAll(t, file)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	if typ := recs[0].Header.Get(FieldType); typ != TypeWarcinfo || recs[0].Header.Get(FieldFilename) != "seg.warc.wet.gz" {
		t.Errorf("first record %s named %q, want warcinfo of seg.warc.wet.gz", typ, recs[0].Header.Get(FieldFilename))
	}
	want := []struct{ uri, refersTo, block string }{
		{"http://example.test/a", respID, "Page A\nHello, world. Grüße"},
		{"http://example.test/b", reqID, "two lines\n"},
	}
	for i, w := range want {
		r := recs[i+1]
		h := r.Header
		if h.Get(FieldType) != TypeConversion || h.Get(FieldTargetURI) != w.uri || h.Get(FieldRefersTo) != w.refersTo ||
			h.Get(FieldContentType) != "text/plain" || string(r.Block) != w.block {
			t.Errorf("record %d = %v %q, want conversion of %s referring to %s with %q", i+1, h, r.Block, w.uri, w.refersTo, w.block)
		}
		if h.Get(FieldBlockDigest) != Digest(r.Block) {
			t.Errorf("record %d block digest %s, want %s", i+1, h.Get(FieldBlockDigest), Digest(r.Block))
		}
		if id := h.Get(FieldRecordID); id == w.refersTo || !strings.HasPrefix(id, "<urn:uuid:") {
			t.Errorf("record %d id %q", i+1, id)
		}
	}
}

// envelopeOf writes the WAT of the scanned records and returns the parsed
// JSON of each metadata record (the warcinfo record's block as nil).
func envelopesOf(t *testing.T, source []Scanned, html map[int]any) ([]Scanned, []map[string]any) {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWATWriter(&b, "seg.warc.wat.gz", "seg.warc.gz", fixedDate, map[string]string{"software": "gridcrawl"})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range source {
		if err := w.Write(s, html[i]); err != nil {
			t.Fatal(err)
		}
	}
	recs := readAll(t, b.Bytes())
	if len(recs) != len(source)+1 {
		t.Fatalf("%d WAT records for %d, want one more (warcinfo)", len(recs), len(source))
	}
	envs := []map[string]any{nil}
	for i, r := range recs[1:] {
		h := r.Header
		if h.Get(FieldType) != TypeMetadata || h.Get(FieldContentType) != "application/json" ||
			h.Get(FieldRefersTo) != RecordID(source[i].Record) || h.Get(FieldBlockDigest) != Digest(r.Block) {
			t.Errorf("WAT record %d header %v", i+1, h)
		}
		var env map[string]any
		if err := json.Unmarshal(r.Block, &env); err != nil {
			t.Fatalf("WAT record %d: %v", i+1, err)
		}
		envs = append(envs, env)
	}
	return recs, envs
}

// at walks a parsed JSON object by keys.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestWATEnvelope(t *testing.T) {
	seg, recs, offsets, lengths := testSegment(t, true)
	var source []Scanned
	sc := NewScanner(bytes.NewReader(seg), 0)
	for range recs {
		s, err := sc.Next()
		if err != nil {
			t.Fatal(err)
		}
		source = append(source, s)
	}
	html := map[string]any{"Head": map[string]any{"Title": "hello"}}
	_, envs := envelopesOf(t, source, map[int]any{2: html})
	for i, env := range envs[1:] {
		checks := map[string]any{
			"Container.Filename":                           "seg.warc.gz",
			"Container.Compressed":                         true,
			"Container.Offset":                             itoa(offsets[i]),
			"Container.Gzip-Metadata.Deflate-Length":       itoa(lengths[i]),
			"Container.Gzip-Metadata.Inflated-Length":      itoa(source[i].Gzip.InflatedLength),
			"Envelope.Format":                              "WARC",
			"Envelope.Block-Digest":                        Digest(recs[i].Block),
			"Envelope.Actual-Content-Length":               itoa(int64(len(recs[i].Block))),
			"Envelope.WARC-Header-Length":                  itoa(source[i].HeaderLength),
			"Envelope.WARC-Header-Metadata.WARC-Type":      recs[i].Header.Get(FieldType),
			"Envelope.WARC-Header-Metadata.WARC-Record-ID": RecordID(recs[i]),
		}
		for path, want := range checks {
			if got := at(env, strings.Split(path, ".")...); got != want {
				t.Errorf("record %d %s = %v, want %v", i, path, got, want)
			}
		}
	}
	pm := func(i int, keys ...string) any {
		return at(envs[i+1], append([]string{"Envelope", "Payload-Metadata"}, keys...)...)
	}
	if got := pm(0, "WARC-Info-Metadata", "software"); got != "gridcrawl" {
		t.Errorf("warcinfo software = %v", got)
	}
	if got := pm(1, "HTTP-Request-Metadata", "Request-Message", "Path"); got != "/page?x=1" {
		t.Errorf("request path = %v", got)
	}
	if got := pm(1, "HTTP-Request-Metadata", "Headers", "Host"); got != "example.test" {
		t.Errorf("request Host = %v", got)
	}
	body := httpResponse[strings.Index(httpResponse, "\r\n\r\n")+4:]
	for keys, want := range map[string]any{
		"Response-Message.Status": "200", "Response-Message.Version": "HTTP/1.1", "Response-Message.Reason": "OK",
		"Headers.Content-Type": "text/html; charset=utf-8", "Entity-Length": itoa(int64(len(body))),
		"Entity-Digest": Digest([]byte(body)), "Headers-Length": itoa(int64(len(httpResponse) - len(body))),
		"HTML-Metadata.Head.Title": "hello",
	} {
		if got := pm(2, append([]string{"HTTP-Response-Metadata"}, strings.Split(keys, ".")...)...); got != want {
			t.Errorf("response %s = %v, want %v", keys, got, want)
		}
	}
	if got := pm(2, "Actual-Content-Type"); got != ContentTypeResponse {
		t.Errorf("response Actual-Content-Type = %v", got)
	}
	mr, _ := pm(3, "WARC-Metadata-Metadata", "Metadata-Records").([]any)
	if len(mr) != 2 || at(mr[1], "Name") != "render-cut" || at(mr[1], "Value") != "requests" {
		t.Errorf("metadata records = %v", mr)
	}
}

// A hostile record (thousands of headers, a huge value) makes an envelope
// of bounded size.
func TestWATEnvelopeBounded(t *testing.T) {
	var resp bytes.Buffer
	resp.WriteString("HTTP/1.1 200 OK\r\n")
	for i := range 5000 {
		resp.WriteString("X-H" + itoa(int64(i)) + ": v\r\n")
	}
	resp.WriteString("X-Huge: " + strings.Repeat("a", 1<<20) + "\r\n\r\nbody")
	r := NewResponseRecord("http://example.test/", fixedDate, "", resp.Bytes(), false, "")
	for range 3000 {
		r.Header = append(r.Header, Field{"X-Field", strings.Repeat("b", 100)})
	}
	s := Scanned{Record: r}
	env := Envelope(s, "seg.warc.gz", nil)
	hdrs, _ := at(toJSON(t, env), "Envelope", "Payload-Metadata", "HTTP-Response-Metadata", "Headers").(map[string]any)
	if len(hdrs) > MaxWATFields || len(hdrs) == 0 {
		t.Errorf("%d HTTP headers in the envelope, want 1 to %d", len(hdrs), MaxWATFields)
	}
	b, _ := json.Marshal(env)
	if len(b) > 3*MaxWATFields*MaxWATValue {
		t.Errorf("envelope of %d bytes", len(b))
	}
	for k, v := range hdrs {
		if len(v.(string)) > MaxWATValue {
			t.Errorf("header %s kept %d bytes", k, len(v.(string)))
		}
	}
}

func toJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDerivedName(t *testing.T) {
	for _, c := range []struct{ in, suffix, want string }{
		{"x.warc.gz", WETSuffix, "x.warc.wet.gz"},
		{"x.warc", WATSuffix, "x.warc.wat.gz"},
	} {
		if got := DerivedName(c.in, c.suffix); got != c.want {
			t.Errorf("DerivedName(%q, %q) = %q, want %q", c.in, c.suffix, got, c.want)
		}
	}
}
