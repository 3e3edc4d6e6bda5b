package warc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var fixedDate = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

const (
	reqID  = "<urn:uuid:11111111-2222-4333-8444-555555555555>"
	respID = "<urn:uuid:66666666-7777-4888-9999-aaaaaaaaaaaa>"
	infoID = "<urn:uuid:bbbbbbbb-cccc-4ddd-8eee-ffffffffffff>"
)

const httpRequest = "GET /page?x=1 HTTP/1.1\r\nHost: example.test\r\nUser-Agent: gridcrawl/1.0\r\nAccept-Encoding: gzip\r\n\r\n"

const httpResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 45\r\n\r\n" +
	"<html><body><p>hello, world</p></body></html>"

// exchange returns the request and response records of one fetch with fixed
// ids and dates, as the loader writes them.
func exchange() (req, resp Record) {
	req = NewRequestRecord("http://example.test/page?x=1", fixedDate, []byte(httpRequest))
	req.Header.Set(FieldRecordID, reqID)
	req.Header.Set(FieldWarcinfoID, infoID)
	resp = NewResponseRecord("http://example.test/page?x=1", fixedDate, "93.184.216.34", []byte(httpResponse), false, reqID)
	resp.Header.Set(FieldRecordID, respID)
	resp.Header.Set(FieldWarcinfoID, infoID)
	return req, resp
}

func TestGolden(t *testing.T) {
	seg := NewSegment(false)
	info := NewWarcinfoRecord(fixedDate, map[string]string{"software": "gridcrawl/1.0", "format": "WARC File Format 1.1"})
	info.Header.Set(FieldRecordID, infoID)
	req, resp := exchange()
	for _, r := range []Record{info, req, resp} {
		if _, _, err := seg.Append(r); err != nil {
			t.Fatalf("Append(%s): %v", RecordID(r), err)
		}
	}
	golden := filepath.Join("testdata", "exchange.warc")
	if *update {
		if err := os.WriteFile(golden, seg.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(seg.Bytes())); diff != "" {
		t.Errorf("segment differs from %s (-want +got):\n%s", golden, diff)
	}
	// The golden file is the spec's layout: check its invariants directly,
	// so that a careless -update cannot bless a broken file.
	if !bytes.HasPrefix(want, []byte("WARC/1.1\r\nWARC-Type: warcinfo\r\n")) || !bytes.HasSuffix(want, []byte("</html>\r\n\r\n")) {
		t.Errorf("golden file does not start with a WARC/1.1 warcinfo record or end with a trailer")
	}
	if bytes.Contains(bytes.ReplaceAll(want, []byte("\r\n"), nil), []byte("\n")) {
		t.Errorf("golden file has bare LF line ends in its headers")
	}
}

func TestExchangeFields(t *testing.T) {
	req, resp := exchange()
	seg := NewSegment(false)
	for _, r := range []Record{req, resp} {
		if _, _, err := seg.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	rd := NewReader(bytes.NewReader(seg.Bytes()))
	gotReq, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	gotResp, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	body := httpResponse[strings.Index(httpResponse, "\r\n\r\n")+4:]
	tests := []struct {
		rec         Record
		field, want string
	}{
		{gotReq, FieldType, "request"},
		{gotReq, FieldRecordID, reqID},
		{gotReq, FieldDate, "2025-03-14T15:09:26.535897Z"},
		{gotReq, FieldTargetURI, "http://example.test/page?x=1"},
		{gotReq, FieldContentType, "application/http;msgtype=request"},
		{gotReq, FieldContentLength, fmt.Sprint(len(httpRequest))},
		{gotReq, FieldBlockDigest, Digest([]byte(httpRequest))},
		{gotReq, FieldWarcinfoID, infoID},
		{gotResp, FieldType, "response"},
		{gotResp, FieldRecordID, respID},
		{gotResp, FieldConcurrentTo, reqID},
		{gotResp, FieldIPAddress, "93.184.216.34"},
		{gotResp, FieldContentType, "application/http;msgtype=response"},
		{gotResp, FieldContentLength, fmt.Sprint(len(httpResponse))},
		{gotResp, FieldBlockDigest, Digest([]byte(httpResponse))},
		{gotResp, FieldPayloadDigest, Digest([]byte(body))},
		{gotResp, FieldTruncated, ""},
	}
	for _, tc := range tests {
		if got := tc.rec.Header.Get(tc.field); got != tc.want {
			t.Errorf("%s record: Get(%q) = %q, want %q", tc.rec.Header.Get(FieldType), tc.field, got, tc.want)
		}
	}
}

func TestDigest(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"},
		{"abc", "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5"},
		{"hello world", "sha1:FKXGYNOJJ7H3IFO35FPUBC445EPOQRXN"},
	}
	for _, tc := range tests {
		if got := Digest([]byte(tc.in)); got != tc.want {
			t.Errorf("Digest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	resp := NewResponseRecord("http://a.test/", fixedDate, "", []byte("HTTP/1.1 200 OK\r\nX: y\r\n\r\nabc"), false, "")
	if got := resp.Header.Get(FieldPayloadDigest); got != "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5" {
		t.Errorf("payload digest of body %q = %q, want the digest of %q", "abc", got, "abc")
	}
	empty := NewResponseRecord("http://a.test/", fixedDate, "", []byte("HTTP/1.1 204 No Content\n\n"), false, "")
	if got := empty.Header.Get(FieldPayloadDigest); got != "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ" {
		t.Errorf("payload digest of an empty body = %q", got)
	}
	headless := NewResponseRecord("http://a.test/", fixedDate, "", []byte("HTTP/1.1 200 OK\r\nX: cut off"), true, "")
	if got := headless.Header.Get(FieldPayloadDigest); got != "" {
		t.Errorf("payload digest without a header end = %q, want none", got)
	}
}

func TestTruncated(t *testing.T) {
	tests := []struct {
		truncated bool
		want      string
	}{{true, "length"}, {false, ""}}
	for _, tc := range tests {
		r := NewResponseRecord("http://a.test/", fixedDate, "", []byte(httpResponse[:len(httpResponse)-10]), tc.truncated, "")
		seg := NewSegment(true)
		if _, _, err := seg.Append(r); err != nil {
			t.Fatal(err)
		}
		got, err := ReadRecord(bytes.NewReader(seg.Bytes()), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if v := got.Header.Get(FieldTruncated); v != tc.want {
			t.Errorf("truncated=%v: WARC-Truncated = %q, want %q", tc.truncated, v, tc.want)
		}
	}
}

// randomRecords returns n records of varied types and sizes, blocks
// included (empty, binary, CR/LF-laden and large).
func randomRecords(n int) []Record {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]Record, 0, n)
	for i := range n {
		size := []int{0, 1, 2, 100, 4000, 70000}[i%6] + rng.IntN(50)
		block := make([]byte, size)
		for j := range block {
			block[j] = "ab\r\n\x00\xff<>"[rng.IntN(8)]
		}
		var r Record
		switch i % 3 {
		case 0:
			r = NewRequestRecord(fmt.Sprintf("http://h%d.test/p/%d", i%7, i), fixedDate.Add(time.Duration(i)*time.Second), block)
		case 1:
			r = NewResponseRecord(fmt.Sprintf("http://h%d.test/p/%d", i%7, i), fixedDate, "2001:db8::1", block, i%2 == 0, NewRecordID())
		default:
			r = NewWarcinfoRecord(fixedDate, map[string]string{"n": fmt.Sprint(i)})
			r.Block = block
		}
		recs = append(recs, r)
	}
	return recs
}

// written returns r as Append writes it, with the fields it fills.
func written(r Record) Record {
	h := append(Header(nil), r.Header...)
	h = append(h, Field{FieldBlockDigest, Digest(r.Block)}, Field{FieldContentLength, fmt.Sprint(len(r.Block))})
	return Record{Header: h, Block: r.Block}
}

// diffRecord diffs headers with go-cmp and compares blocks bytewise (go-cmp
// is slow on large byte slices).
func diffRecord(want, got Record) string {
	if diff := cmp.Diff(want.Header, got.Header); diff != "" {
		return diff
	}
	if !bytes.Equal(want.Block, got.Block) {
		return fmt.Sprintf("blocks differ: want %d bytes %q..., got %d bytes %q...", len(want.Block), truncate(want.Block), len(got.Block), truncate(got.Block))
	}
	return ""
}

func TestRoundTrip(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			recs := randomRecords(60)
			seg := NewSegment(compress)
			type span struct{ off, n int64 }
			var spans []span
			for _, r := range recs {
				off, n, err := seg.Append(r)
				if err != nil {
					t.Fatalf("Append(%s): %v", RecordID(r), err)
				}
				if off != seg.Len()-n {
					t.Fatalf("Append returned offset %d length %d, segment length %d", off, n, seg.Len())
				}
				spans = append(spans, span{off, n})
			}
			if seg.Count() != len(recs) {
				t.Errorf("Count() = %d, want %d", seg.Count(), len(recs))
			}
			if compress && !bytes.HasPrefix(seg.Bytes(), gzipMagic) {
				t.Errorf("compressed segment does not start with a gzip member")
			}

			rd := NewReader(bytes.NewReader(seg.Bytes()))
			for i, r := range recs {
				got, err := rd.Next()
				if err != nil {
					t.Fatalf("Next() #%d: %v", i, err)
				}
				if diff := diffRecord(written(r), got); diff != "" {
					t.Fatalf("Next() #%d mismatch (-want +got):\n%s", i, diff)
				}
			}
			if _, err := rd.Next(); err != io.EOF {
				t.Errorf("Next() after the last record = %v, want io.EOF", err)
			}

			for i, r := range recs {
				sp := spans[i]
				got, err := ReadRecord(bytes.NewReader(seg.Bytes()[sp.off:sp.off+sp.n]), 1<<20)
				if err != nil {
					t.Fatalf("ReadRecord(offset %d, length %d): %v", sp.off, sp.n, err)
				}
				if diff := diffRecord(written(r), got); diff != "" {
					t.Fatalf("ReadRecord #%d mismatch (-want +got):\n%s", i, diff)
				}
				if got.Header.Get(FieldBlockDigest) != Digest(got.Block) {
					t.Fatalf("ReadRecord #%d: block digest does not match block", i)
				}
			}

			seg.Reset()
			if seg.Len() != 0 || seg.Count() != 0 {
				t.Errorf("after Reset: Len() = %d, Count() = %d, want 0, 0", seg.Len(), seg.Count())
			}
			if off, _, err := seg.Append(recs[0]); err != nil || off != 0 {
				t.Errorf("Append after Reset = offset %d, %v; want 0, nil", off, err)
			}
		})
	}
}

func TestAppendKeepsGivenFields(t *testing.T) {
	r := NewRequestRecord("http://a.test/", fixedDate, []byte("abc"))
	r.Header.Set(FieldContentLength, "3")
	r.Header.Set(FieldBlockDigest, "sha1:GIVEN")
	before := append(Header(nil), r.Header...)
	seg := NewSegment(false)
	if _, _, err := seg.Append(r); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, r.Header); diff != "" {
		t.Errorf("Append modified the record's header (-before +after):\n%s", diff)
	}
	got, err := ReadRecord(bytes.NewReader(seg.Bytes()), 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, got.Header); diff != "" {
		t.Errorf("written header mismatch (-want +got):\n%s", diff)
	}
}

func TestAppendInvalid(t *testing.T) {
	valid := func() Record { return NewRequestRecord("http://a.test/", fixedDate, []byte("abc")) }
	tests := []struct {
		name   string
		modify func(r *Record)
	}{
		{"missing type", func(r *Record) { r.Header.Del(FieldType) }},
		{"missing id", func(r *Record) { r.Header.Del(FieldRecordID) }},
		{"missing date", func(r *Record) { r.Header.Set(FieldDate, "") }},
		{"wrong length", func(r *Record) { r.Header.Set(FieldContentLength, "4") }},
		{"bad length", func(r *Record) { r.Header.Set(FieldContentLength, "three") }},
		{"line break in value", func(r *Record) { r.Header.Set(FieldTargetURI, "http://a.test/\r\nWARC-Type: evil") }},
		{"colon in name", func(r *Record) { r.Header = append(r.Header, Field{"X:Y", "z"}) }},
		{"space in name", func(r *Record) { r.Header = append(r.Header, Field{"X Y", "z"}) }},
		{"empty name", func(r *Record) { r.Header = append(r.Header, Field{"", "z"}) }},
	}
	for _, compress := range []bool{false, true} {
		for _, tc := range tests {
			seg := NewSegment(compress)
			if _, _, err := seg.Append(valid()); err != nil {
				t.Fatal(err)
			}
			size := seg.Len()
			r := valid()
			tc.modify(&r)
			if _, _, err := seg.Append(r); !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("%s (compress=%v): Append = %v, want ErrInvalidRecord", tc.name, compress, err)
			}
			if seg.Len() != size || seg.Count() != 1 {
				t.Errorf("%s: failed Append changed the segment", tc.name)
			}
		}
	}
}

func TestHeader(t *testing.T) {
	h := Header{{"A", "1"}, {"b", "2"}, {"a", "3"}}
	if got := h.Get("a"); got != "1" {
		t.Errorf("Get(%q) = %q, want %q", "a", got, "1")
	}
	if got := h.Get("missing"); got != "" {
		t.Errorf("Get(%q) = %q, want empty", "missing", got)
	}
	h.Set("A", "4")
	if diff := cmp.Diff(Header{{"A", "4"}, {"b", "2"}}, h); diff != "" {
		t.Errorf("after Set (-want +got):\n%s", diff)
	}
	h.Set("c", "5")
	h.Del("B")
	if diff := cmp.Diff(Header{{"A", "4"}, {"c", "5"}}, h); diff != "" {
		t.Errorf("after Set and Del (-want +got):\n%s", diff)
	}
}

func TestFormatDate(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "2025-01-02T03:04:05Z"},
		{time.Date(2025, 1, 2, 3, 4, 5, 500000000, time.UTC), "2025-01-02T03:04:05.5Z"},
		{time.Date(2025, 1, 2, 4, 4, 5, 123456789, time.FixedZone("x", 3600)), "2025-01-02T03:04:05.123456Z"},
	}
	for _, tc := range tests {
		if got := FormatDate(tc.in); got != tc.want {
			t.Errorf("FormatDate(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if id := NewRecordID(); !strings.HasPrefix(id, "<urn:uuid:") || !strings.HasSuffix(id, ">") || len(id) != len(reqID) || id == NewRecordID() {
		t.Errorf("NewRecordID() = %q, want a fresh <urn:uuid:...>", id)
	}
}

func gzipped(t testing.TB, parts ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, p := range parts {
		zw := gzip.NewWriter(&b)
		if _, err := io.WriteString(zw, p); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

const plainRecord = "WARC/1.1\r\nWARC-Type: resource\r\nWARC-Record-ID: <urn:uuid:x>\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n"

func TestReadRecordErrors(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		max   int64
		want  error
	}{
		{"too large plain", []byte(plainRecord), 4, ErrTooLarge},
		{"too large gzip", gzipped(t, plainRecord), 4, ErrTooLarge},
		{"huge content-length", []byte("WARC/1.1\r\nContent-Length: 99999999999999\r\n\r\n"), 1 << 20, ErrTooLarge},
		{"endless header", append([]byte("WARC/1.1\r\nX: "), bytes.Repeat([]byte("a"), MaxHeaderSize+10)...), 1 << 20, ErrTooLarge},
		{"endless header gzip", gzipped(t, "WARC/1.1\r\nX: "+strings.Repeat("a", MaxHeaderSize+10)), 1 << 20, ErrTooLarge},
		{"endless continuation", append([]byte("WARC/1.1\r\nX: a\r\n"), bytes.Repeat([]byte(" b\r\n"), MaxHeaderSize/4)...), 1 << 20, ErrTooLarge},
		{"no version line", []byte("HTTP/1.1 200 OK\r\n\r\n"), 100, ErrMalformed},
		{"no content-length", []byte("WARC/1.1\r\nWARC-Type: x\r\n\r\n"), 100, ErrMalformed},
		{"negative content-length", []byte("WARC/1.1\r\nContent-Length: -1\r\n\r\n"), 100, ErrMalformed},
		{"field without colon", []byte("WARC/1.1\r\nbroken\r\n\r\n"), 100, ErrMalformed},
		{"short block", []byte(plainRecord[:len(plainRecord)-8]), 100, io.ErrUnexpectedEOF},
		{"cut header", []byte(plainRecord[:20]), 100, io.ErrUnexpectedEOF},
		{"empty", nil, 100, io.ErrUnexpectedEOF},
		{"cut gzip", gzipped(t, plainRecord)[:30], 100, io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadRecord(bytes.NewReader(tc.input), tc.max)
			if !errors.Is(err, tc.want) {
				t.Errorf("ReadRecord(%q...) = %v, want %v", truncate(tc.input), err, tc.want)
			}
		})
	}
}

// TestReadRecordGzipBomb checks that a small member that inflates far past
// the limit is not inflated entirely.
func TestReadRecordGzipBomb(t *testing.T) {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	io.WriteString(zw, "WARC/1.1\r\nContent-Length: 1000\r\n\r\n")
	zeros := make([]byte, 1<<20)
	for range 16 { // 16 MiB of zeros after the record
		zw.Write(zeros)
	}
	zw.Close()
	counter := &countingReader{r: bytes.NewReader(b.Bytes())}
	rec, err := ReadRecord(counter, 1000)
	if err != nil {
		t.Fatalf("ReadRecord: %v", err)
	}
	if len(rec.Block) != 1000 {
		t.Errorf("block length = %d, want 1000", len(rec.Block))
	}
	if counter.n > 64<<10 {
		t.Errorf("ReadRecord consumed %d compressed bytes for a 1000-byte record", counter.n)
	}
}

// TestReadRecordMemory: a large block (a body at the loader's cap) is read
// with less than twice its size of allocation, plain or compressed, and
// exactly: bytes.Buffer's growth allocated about four times.
func TestReadRecordMemory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		compress bool
		block    int
	}{
		{"plain, 8 MiB", false, 8<<20 + 300},
		{"gzip, 8 MiB", true, 8<<20 + 300},
		{"gzip, just over the eager size", true, eagerAlloc + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			block := bytes.Repeat([]byte("HTTP/1.1 200 OK\r\n\r\n some text of a page."), tc.block/40+1)[:tc.block]
			seg := NewSegment(tc.compress)
			off, n, err := seg.Append(NewResponseRecord("http://example.com/", time.Now(), "", block, false, ""))
			if err != nil {
				t.Fatal(err)
			}
			data := seg.Bytes()[off : off+n]
			if _, err := ReadRecord(bytes.NewReader(data), 16<<20); err != nil { // warm up the decompressor pool
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rec, err := ReadRecord(bytes.NewReader(data), 16<<20)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.Block, block) {
				t.Fatalf("ReadRecord block of %d bytes differs from the %d written", len(rec.Block), len(block))
			}
			if alloc, most := after.TotalAlloc-before.TotalAlloc, uint64(2*tc.block+64<<10); alloc > most {
				t.Errorf("ReadRecord allocated %d bytes for a %d-byte block, want at most %d", alloc, tc.block, most)
			}
		})
	}
}

// reservingReader notes the room read into it is reserved for.
type reservingReader struct {
	io.Reader
	reserved int64
}

func (r *reservingReader) Reserve(n int64) error {
	r.reserved = max(r.reserved, n)
	return nil
}

// TestReadRecordWith: a block over 1 MiB is read through wrap, which can
// reserve its room (a memory budget); a small block is not.
func TestReadRecordWith(t *testing.T) {
	for _, size := range []int{100, eagerAlloc + 1, 8 << 20} {
		block := append([]byte("HTTP/1.1 200 OK\r\n\r\n"), make([]byte, size)...)
		seg := NewSegment(true)
		off, n, err := seg.Append(NewResponseRecord("http://example.com/", time.Now(), "", block, false, ""))
		if err != nil {
			t.Fatal(err)
		}
		var rr *reservingReader
		wrap := func(r io.Reader) io.Reader {
			rr = &reservingReader{Reader: r}
			return rr
		}
		rec, err := ReadRecordWith(bytes.NewReader(seg.Bytes()[off:off+n]), 16<<20, wrap)
		if err != nil || !bytes.Equal(rec.Block, block) {
			t.Fatalf("ReadRecordWith of a %d-byte block = %d bytes, %v", len(block), len(rec.Block), err)
		}
		switch {
		case len(block) <= eagerAlloc && rr != nil:
			t.Errorf("a %d-byte block was read through wrap", len(block))
		case len(block) > eagerAlloc && (rr == nil || rr.reserved < int64(len(block))):
			t.Errorf("a %d-byte block was read through wrap %v, want its room reserved", len(block), rr)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReader(t *testing.T) {
	two := plainRecord + strings.Replace(plainRecord, "hello", "world", 1)
	tests := []struct {
		name      string
		input     []byte
		wantN     int
		wantErr   error // after wantN records; io.EOF for a clean end
		maxBlock  int64
		lastBlock string
	}{
		{name: "empty", input: nil, wantN: 0, wantErr: io.EOF},
		{name: "plain", input: []byte(two), wantN: 2, wantErr: io.EOF, lastBlock: "world"},
		{name: "plain lf trailer", input: []byte(strings.ReplaceAll(two, "\r\n\r\nWARC", "\n\nWARC")), wantN: 2, wantErr: io.EOF, lastBlock: "world"},
		{name: "plain without final trailer", input: []byte(strings.TrimSuffix(two, "\r\n\r\n")), wantN: 2, wantErr: io.EOF, lastBlock: "world"},
		{name: "one member many records", input: gzipped(t, two), wantN: 2, wantErr: io.EOF, lastBlock: "world"},
		{name: "many members", input: gzipped(t, plainRecord, two, plainRecord), wantN: 4, wantErr: io.EOF, lastBlock: "hello"},
		{name: "garbage after", input: []byte(plainRecord + "junk\r\n"), wantN: 1, wantErr: ErrMalformed},
		{name: "garbage after gzip", input: append(gzipped(t, plainRecord), "junk after the last member"...), wantN: 1, wantErr: gzip.ErrHeader},
		{name: "block limit", input: []byte(two), maxBlock: 4, wantN: 0, wantErr: ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd := NewReader(bytes.NewReader(tc.input))
			rd.MaxBlock = tc.maxBlock
			var last Record
			for i := range tc.wantN {
				rec, err := rd.Next()
				if err != nil {
					t.Fatalf("Next() #%d: %v", i, err)
				}
				last = rec
			}
			if tc.lastBlock != "" && string(last.Block) != tc.lastBlock {
				t.Errorf("last block = %q, want %q", last.Block, tc.lastBlock)
			}
			_, err := rd.Next()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Next() #%d = %v, want %v", tc.wantN, err, tc.wantErr)
			}
			if _, again := rd.Next(); !errors.Is(again, tc.wantErr) {
				t.Errorf("Next() after the end = %v, want %v again", again, tc.wantErr)
			}
		})
	}
}

func TestParseHTTPResponse(t *testing.T) {
	tests := []struct {
		name       string
		block      string
		wantStatus int
		wantHeader http.Header
		wantBody   string
		wantErr    error
	}{
		{
			name:       "plain",
			block:      httpResponse,
			wantStatus: 200,
			wantHeader: http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Content-Length": {"45"}},
			wantBody:   "<html><body><p>hello, world</p></body></html>",
		},
		{
			name:       "bare lf and no reason",
			block:      "HTTP/1.0 404\nserver: x\n\nnot found",
			wantStatus: 404,
			wantHeader: http.Header{"Server": {"x"}},
			wantBody:   "not found",
		},
		{
			name:       "truncated body is returned as is",
			block:      "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc",
			wantStatus: 200,
			wantHeader: http.Header{"Content-Length": {"100"}},
			wantBody:   "abc",
		},
		{
			name:       "chunked",
			block:      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
			wantStatus: 200,
			wantHeader: http.Header{"Transfer-Encoding": {"chunked"}},
			wantBody:   "hello world",
		},
		{
			name:       "truncated chunked",
			block:      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n wo",
			wantStatus: 200,
			wantHeader: http.Header{"Transfer-Encoding": {"chunked"}},
			wantBody:   "hello wo",
		},
		{
			name:       "malformed chunked kept raw",
			block:      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello",
			wantStatus: 200,
			wantHeader: http.Header{"Transfer-Encoding": {"chunked"}},
			wantBody:   "zz\r\nhello",
		},
		{
			name:       "interim response skipped",
			block:      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n",
			wantStatus: 302,
			wantHeader: http.Header{"Location": {"/x"}},
			wantBody:   "",
		},
		{name: "no header end", block: "HTTP/1.1 200 OK\r\nX: y", wantErr: ErrMalformed},
		{name: "not http", block: "SSH-2.0-OpenSSH\r\n\r\n", wantErr: ErrMalformed},
		{name: "bad status", block: "HTTP/1.1 2000 OK\r\n\r\n", wantErr: ErrMalformed},
		{name: "only interim", block: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 20), wantErr: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, header, body, err := ParseHTTPResponse([]byte(tc.block))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseHTTPResponse(%q) error = %v, want %v", tc.block, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHTTPResponse(%q): %v", tc.block, err)
			}
			if status != tc.wantStatus || string(body) != tc.wantBody {
				t.Errorf("ParseHTTPResponse(%q) = %d, body %q; want %d, %q", tc.block, status, body, tc.wantStatus, tc.wantBody)
			}
			if diff := cmp.Diff(tc.wantHeader, header); diff != "" {
				t.Errorf("ParseHTTPResponse(%q) header mismatch (-want +got):\n%s", tc.block, diff)
			}
		})
	}
}

func FuzzReadRecord(f *testing.F) {
	req, resp := exchange()
	for _, compress := range []bool{false, true} {
		seg := NewSegment(compress)
		seg.Append(req)
		seg.Append(resp)
		f.Add(seg.Bytes())
	}
	f.Add([]byte(plainRecord))
	f.Add([]byte("WARC/1.0\nA: b\n c\nContent-Length: 0\n\n"))
	f.Add([]byte("\r\n\r\nWARC/1.1\r\nContent-Length: 3\r\n\r\nab"))
	f.Add(gzipped(f, "WARC/1.1\r\nContent-Length: 70000\r\n\r\n"))
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ReadRecord(bytes.NewReader(data), max)
		if err == nil {
			if len(rec.Block) > max {
				t.Fatalf("ReadRecord returned a %d-byte block over the %d limit", len(rec.Block), max)
			}
			// What was read must survive being written and read again.
			seg := NewSegment(len(data) > 0 && data[0] == 0x1f)
			if _, _, err := seg.Append(rec); err == nil {
				again, err := ReadRecord(bytes.NewReader(seg.Bytes()), max)
				if err != nil {
					t.Fatalf("re-reading a written record: %v", err)
				}
				if !bytes.Equal(again.Block, rec.Block) || len(again.Header) < len(rec.Header) ||
					!cmp.Equal(again.Header[:len(rec.Header)], rec.Header) {
					t.Fatalf("record changed through a write and read:\n%v\n%v", rec, again)
				}
			}
		}
		rd := NewReader(bytes.NewReader(data))
		rd.MaxBlock = max
		for range 100 {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
		ParseHTTPResponse(data)
	})
}

// benchmarkResponse returns a ~15 KB HTML response.
func benchmarkResponse() []byte {
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nServer: nginx\r\nDate: Fri, 14 Mar 2025 15:09:26 GMT\r\n\r\n<html><body>")
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the crawler fetched a page about gardens and grids with links to other pages and images")
	for i := 0; b.Len() < 15000; i++ {
		if i%12 == 0 {
			fmt.Fprintf(&b, "<p><a href=\"/page/%d\">", rng.IntN(100000))
		}
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
		if i%12 == 11 {
			b.WriteString("</a></p>\n")
		}
	}
	b.WriteString("</body></html>")
	return b.Bytes()
}

func BenchmarkAppend(b *testing.B) {
	body := benchmarkResponse()
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compress=%v", compress), func(b *testing.B) {
			rec := NewResponseRecord("http://example.test/page", fixedDate, "93.184.216.34", body, false, reqID)
			seg := NewSegment(compress)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if seg.Len() > 64<<20 {
					seg.Reset()
				}
				if _, _, err := seg.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadRecord(b *testing.B) {
	seg := NewSegment(true)
	if _, _, err := seg.Append(NewResponseRecord("http://example.test/page", fixedDate, "", benchmarkResponse(), false, "")); err != nil {
		b.Fatal(err)
	}
	data := seg.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadRecord(bytes.NewReader(data), 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

func TestContinuationLines(t *testing.T) {
	rec, err := ReadRecord(strings.NewReader("WARC/1.1\r\nX: a\r\n b \r\n\tc\r\nContent-Length: 0\r\n\r\n"), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Header.Get("X"); got != "a b c" {
		t.Errorf("Get(%q) = %q, want %q", "X", got, "a b c")
	}
	// Many continuation lines within the header limit: must be read in
	// linear time (a quadratic join would take minutes here).
	const n = MaxHeaderSize / 6
	input := "WARC/1.1\r\nX: a\r\n" + strings.Repeat(" bb\r\n", n) + "Content-Length: 0\r\n\r\n"
	rec, err = ReadRecord(strings.NewReader(input), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rec.Header.Get("X")); got != 1+3*n {
		t.Errorf("len(Get(%q)) = %d, want %d", "X", got, 1+3*n)
	}
}
