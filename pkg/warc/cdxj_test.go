package warc

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The wants are what Python's surt 0.3.1 (the library pywb keys its indexes
// with) answers for each URL.
func TestSURT(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://www.Example.com/A/b/?B=2&a=1#x", "com,example)/a/b?a=1&b=2"},
		{"http://127.0.0.1:8080/x/", "1,0,0,127:8080)/x"},
		{"https://example.com:443/", "com,example)/"},
		{"http://example.com", "com,example)/"},
		{"http://example.com/%7Efoo%20bar?q=%41", "com,example)/~foo%20bar?q=a"},
		{"http://www2.example.com/p?PHPSESSID=0123456789abcdef0123456789abcdef&x=1", "com,example)/p?x=1"},
		{"http://a.example:80/%C3%A9", "example,a)/%c3%a9"},
		{"http://example.com/?", "com,example)/"},
		{"http://user:pw@example.com/", "com,example)/"},
		{"http://example.com/a/./b/../c//d", "com,example)/a/c/d"},
		{"http://example.com/x?b&a=&a", "com,example)/x?a&a=&b"},
		{"http://example.com/%2541", "com,example)/a"},
		{"https://host-3.websim.test:8443/page/7.html", "test,websim,host-3:8443)/page/7.html"},
		{"http://example.com/a%20b?c%20d=e+f", "com,example)/a%20b?c%20d=e+f"},
		{"http://WWW.example.com:8080/Index.HTML?Z=1&y=2&x", "com,example:8080)/index.html?x&y=2&z=1"},
	} {
		got, err := SURT(tc.url)
		if err != nil || got != tc.want {
			t.Errorf("SURT(%q) = %q, %v, want %q", tc.url, got, err, tc.want)
		}
	}
	if _, err := SURT("/relative"); err == nil {
		t.Error("SURT of a relative URL: no error")
	}
}

func TestCDXJLine(t *testing.T) {
	c := CDXJ{Key: "test,example)/page?x=1", Time: fixedDate, URL: "http://example.test/page?x=1", MIME: "text/html",
		Status: 200, Digest: "sha1:KOLZLYRR76CT75D6L77JXXDHV32L5JT6", Length: 665, Offset: 791, Filename: "exchange.warc"}
	// What pywb 2.9.1's cdx-indexer -j writes for testdata/exchange.warc.
	const want = `test,example)/page?x=1 20250314150926 {"url": "http://example.test/page?x=1", "mime": "text/html", "status": "200", "digest": "KOLZLYRR76CT75D6L77JXXDHV32L5JT6", "length": "665", "offset": "791", "filename": "exchange.warc"}` + "\n"
	if got := string(c.AppendLine(nil)); got != want {
		t.Errorf("AppendLine =\n%s want\n%s", got, want)
	}
	c.Crawl = "c1"
	line := c.AppendLine(nil)
	if !bytes.HasSuffix(line, []byte(`, "crawl": "c1"}`+"\n")) {
		t.Errorf("AppendLine with crawl = %s", line)
	}
	back, err := ParseCDXJ(line)
	c.Time = c.Time.Truncate(time.Second)
	if err != nil || !cmp.Equal(back, c) {
		t.Errorf("ParseCDXJ(AppendLine) = %+v, %v, want %+v", back, err, c)
	}
	uni := CDXJ{Key: "k", Time: fixedDate, URL: "http://x.test/a&b\"é😀\n"}
	if got, want := string(uni.AppendLine(nil)), `k 20250314150926 {"url": "http://x.test/a&b\"\u00e9\ud83d\ude00\n", "mime": "-", "length": "0", "offset": "0", "filename": ""}`+"\n"; got != want {
		t.Errorf("AppendLine =\n%s want (as Python's json.dumps)\n%s", got, want)
	}
	for _, bad := range []string{"", "key", "key 2025", "key 20250314150926 {", "key 2025x {}", `key 20250314150926 {"length": "x"}`} {
		if _, err := ParseCDXJ([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseCDXJ(%q) error = %v, want ErrMalformed", bad, err)
		}
	}
}

// TestIndexWARCGolden indexes the golden WARC as pywb does.
func TestIndexWARCGolden(t *testing.T) {
	f, err := os.Open("testdata/exchange.warc")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := IndexWARC(f, "exchange.warc", 0)
	if err != nil {
		t.Fatal(err)
	}
	const want = `test,example)/page?x=1 20250314150926 {"url": "http://example.test/page?x=1", "mime": "text/html", "status": "200", "digest": "KOLZLYRR76CT75D6L77JXXDHV32L5JT6", "length": "665", "offset": "791", "filename": "exchange.warc"}` + "\n"
	if got := string(bytes.Join(lines, nil)); got != want {
		t.Errorf("IndexWARC =\n%s want\n%s", got, want)
	}
}

// TestIndexWARCSegment checks that IndexWARC finds every indexed record of a
// segment where Segment.Append put it, compressed or not.
func TestIndexWARCSegment(t *testing.T) {
	for _, compress := range []bool{false, true} {
		seg := NewSegment(compress)
		seg.Append(NewWarcinfoRecord(fixedDate, map[string]string{"software": "test"}))
		var want [][]byte
		for i, u := range []string{"http://b.test/2", "http://a.test/1", "http://a.test/1?z=1&a=2"} {
			date := fixedDate.Add(time.Duration(i) * time.Hour)
			req := NewRequestRecord(u, date, []byte(httpRequest))
			resp := NewResponseRecord(u, date, "", []byte(httpResponse), false, RecordID(req))
			seg.Append(req)
			off, n, err := seg.Append(resp)
			if err != nil {
				t.Fatal(err)
			}
			c, ok := seg.CDXJOf(resp, 0, off, n, "seg")
			if !ok {
				t.Fatalf("CDXJOf(response) not indexed")
			}
			want = append(want, c.AppendLine(nil))
		}
		rv, err := NewRevisitRecord(Revisit{TargetURI: "http://a.test/1", Date: fixedDate.Add(24 * time.Hour),
			Profile: ProfileServerNotModified, HTTPResponse: []byte("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"),
			PayloadDigest: PayloadDigest([]byte(httpResponse)), RefersToTargetURI: "http://a.test/1", RefersToDate: fixedDate.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		off, n, _ := seg.Append(rv)
		c, _ := seg.CDXJOf(rv, 0, off, n, "seg")
		if c.MIME != MIMERevisit || c.Status != 0 {
			t.Errorf("CDXJOf(revisit) mime %q status %d, want %q and no status, as pywb indexes it", c.MIME, c.Status, MIMERevisit)
		}
		want = SortCDXJ(append(want, c.AppendLine(nil)))
		got, err := IndexWARC(bytes.NewReader(seg.Bytes()), "seg", 0)
		if err != nil {
			t.Fatalf("IndexWARC(compress=%v): %v", compress, err)
		}
		if diff := cmp.Diff(lineStrings(want), lineStrings(got)); diff != "" {
			t.Errorf("IndexWARC(compress=%v) (-want +got):\n%s", compress, diff)
		}
		if !strings.HasPrefix(string(got[0]), "test,a)/1 ") {
			t.Errorf("IndexWARC first line %q, want the sorted first key", got[0])
		}
	}
}

func lineStrings(lines [][]byte) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l)
	}
	return out
}

func TestNewRevisitRecord(t *testing.T) {
	orig := fixedDate
	body := []byte(httpResponse)
	for _, tc := range []struct {
		name    string
		v       Revisit
		wantErr bool
		block   string
	}{{
		name: "server-not-modified",
		v: Revisit{TargetURI: "http://example.test/page?x=1", Date: orig.Add(time.Hour), IP: "192.0.2.1", Profile: ProfileServerNotModified,
			HTTPResponse: []byte("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"), PayloadDigest: PayloadDigest(body),
			RefersToTargetURI: "http://example.test/page?x=1", RefersToDate: orig, RefersTo: respID, ConcurrentTo: reqID},
		block: "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n",
	}, {
		name: "identical-payload-digest drops the body",
		v: Revisit{TargetURI: "http://example.test/page?x=1", Date: orig.Add(time.Hour), Profile: ProfileIdenticalPayloadDigest,
			HTTPResponse: body, PayloadDigest: PayloadDigest(body), RefersToTargetURI: "http://example.test/page?x=1", RefersToDate: orig},
		block: "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 45\r\n\r\n",
	}, {
		name: "server-not-modified freshening the original header",
		v: Revisit{TargetURI: "http://example.test/page?x=1", Date: orig.Add(time.Hour), Profile: ProfileServerNotModified,
			HTTPResponse:   []byte("HTTP/1.1 304 Not Modified\r\nETag: \"v2\"\r\nContent-Length: 0\r\nCache-Control: max-age=60\r\n\r\n"),
			OriginalHeader: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: \"v1\"\r\nContent-Length: 45\r\n\r\nbody"),
			PayloadDigest:  PayloadDigest(body), RefersToTargetURI: "http://example.test/page?x=1", RefersToDate: orig},
		block: "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 45\r\nETag: \"v2\"\r\nCache-Control: max-age=60\r\n\r\n",
	}, {
		name: "unknown profile", wantErr: true,
		v: Revisit{TargetURI: "u", Date: orig, Profile: "x", HTTPResponse: body, PayloadDigest: "d", RefersToTargetURI: "u", RefersToDate: orig},
	}, {
		name: "no original date", wantErr: true,
		v: Revisit{TargetURI: "u", Date: orig, Profile: ProfileServerNotModified, HTTPResponse: body, RefersToTargetURI: "u"},
	}, {
		name: "identical-payload-digest without digest", wantErr: true,
		v: Revisit{TargetURI: "u", Date: orig, Profile: ProfileIdenticalPayloadDigest, HTTPResponse: body, RefersToTargetURI: "u", RefersToDate: orig},
	}, {
		name: "no status line", wantErr: true,
		v: Revisit{TargetURI: "u", Date: orig, Profile: ProfileServerNotModified, HTTPResponse: []byte("hello\r\n\r\n"), RefersToTargetURI: "u", RefersToDate: orig},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := NewRevisitRecord(tc.v)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidRecord) {
					t.Fatalf("NewRevisitRecord = %v, want ErrInvalidRecord", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(rec.Block) != tc.block {
				t.Errorf("block = %q, want %q", rec.Block, tc.block)
			}
			for name, want := range map[string]string{
				FieldType: TypeRevisit, FieldProfile: tc.v.Profile, FieldPayloadDigest: tc.v.PayloadDigest,
				FieldRefersToTargetURI: tc.v.RefersToTargetURI, FieldRefersToDate: FormatDate(tc.v.RefersToDate),
				FieldRefersTo: tc.v.RefersTo, FieldConcurrentTo: tc.v.ConcurrentTo, FieldIPAddress: tc.v.IP,
				FieldContentType: ContentTypeResponse, FieldTargetURI: tc.v.TargetURI, FieldDate: FormatDate(tc.v.Date),
			} {
				if got := rec.Header.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			// It survives a write and a read.
			seg := NewSegment(true)
			off, n, err := seg.Append(rec)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ReadRecord(bytes.NewReader(seg.Bytes()[off:off+n]), 1<<20)
			if err != nil || string(back.Block) != tc.block || back.Header.Get(FieldProfile) != tc.v.Profile {
				t.Errorf("read back = %v, %v", back.Header, err)
			}
		})
	}
}

func TestPayloadDigest(t *testing.T) {
	_, resp := exchange()
	if got, want := PayloadDigest([]byte(httpResponse)), resp.Header.Get(FieldPayloadDigest); got != want {
		t.Errorf("PayloadDigest = %q, want the response record's %q", got, want)
	}
	if got := PayloadDigest([]byte("HTTP/1.1 200 OK\r\n")); got != "" {
		t.Errorf("PayloadDigest(no header end) = %q, want empty", got)
	}
}

// BenchmarkCDXJOf is what the loader adds per fetched page: the CDXJ line
// of a response record (SURT, header parse) and its formatting.
func BenchmarkCDXJOf(b *testing.B) {
	seg := NewSegment(true)
	resp := NewResponseRecord("https://www.example.com/Some/Path/page.html?b=2&a=1", fixedDate, "", []byte(httpResponse), false, "")
	off, n, _ := seg.Append(resp)
	var line []byte
	b.ReportAllocs()
	for b.Loop() {
		c, _ := seg.CDXJOf(resp, 0, off, n, "gridcrawl-20261123195000123-00001-l1-abc.warc.gz")
		c.Crawl = "20261123t195000-a333788f"
		line = c.AppendLine(line[:0])
	}
}
