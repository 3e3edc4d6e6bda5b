package warc

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSelection(t *testing.T) {
	// Ranges out of order, overlapping, adjacent and empty.
	s := NewSelection([]Range{{100, 10}, {0, 5}, {105, 10}, {115, 5}, {50, 0}, {200, 1}})
	if diff := cmp.Diff([]Range{{0, 5}, {100, 20}, {200, 1}}, s.Ranges()); diff != "" {
		t.Errorf("NewSelection ranges (-want +got):\n%s", diff)
	}
	if s.Size() != 26 {
		t.Errorf("Size() = %d, want 26", s.Size())
	}
	for _, tc := range []struct {
		offset, want int64
		ok           bool
	}{
		{0, 0, true}, {4, 4, true}, {5, 0, false}, {99, 0, false}, {100, 5, true}, {119, 24, true},
		{120, 0, false}, {200, 25, true}, {201, 0, false}, {-1, 0, false},
	} {
		if got, ok := s.Map(tc.offset); got != tc.want || ok != tc.ok {
			t.Errorf("Map(%d) = %d, %v; want %d, %v", tc.offset, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		name           string
		offset, length int64
		want           []Range
	}{
		{"all", 0, -1, []Range{{0, 5}, {100, 20}, {200, 1}}},
		{"inside one", 6, 3, []Range{{101, 3}}},
		{"across two", 3, 4, []Range{{3, 2}, {100, 2}}},
		{"to the end", 24, -1, []Range{{119, 1}, {200, 1}}},
		{"past the end", 25, 100, []Range{{200, 1}}},
		{"at the end", 26, 5, nil},
	} {
		if diff := cmp.Diff(tc.want, s.Part(tc.offset, tc.length)); diff != "" {
			t.Errorf("%s: Part(%d, %d) (-want +got):\n%s", tc.name, tc.offset, tc.length, diff)
		}
	}
}

// TestSelectRecords: of a segment holding two crawls' exchanges, rendered
// and not, compressed and not, a crawl's records are its indexed records,
// the request before each, its rendered DOM and metadata records, and the
// warcinfo record; a record held alone comes without its request.
func TestSelectRecords(t *testing.T) {
	for _, compress := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip=%v", compress), func(t *testing.T) {
			date := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
			seg := NewSegment(compress)
			at := map[string]Range{}
			add := func(name string, r Record) {
				off, n, err := seg.Append(r)
				if err != nil {
					t.Fatal(err)
				}
				at[name] = Range{off, n}
			}
			add("info", NewWarcinfoRecord(date, map[string]string{"software": "test"}))
			ids := map[string]string{}
			exchange := func(name, url string) {
				req := NewRequestRecord(url, date, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
				add(name+"-req", req)
				resp := NewResponseRecord(url, date, "", []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>"+name), false, RecordID(req))
				ids[name] = RecordID(resp)
				add(name, resp)
			}
			exchange("a1", "http://a.test/")
			exchange("b1", "http://b.test/")
			dom := NewConversionRecord("http://a.test/", date, ids["a1"], "text/html", []byte("<p>dom"))
			add("a1-dom", dom)
			add("a1-meta", NewMetadataRecord("http://a.test/", date, RecordID(dom), "render-reason", "always"))
			exchange("b2", "http://b.test/2")
			exchange("a2", "http://a.test/2")
			member := map[int64]bool{at["a1"].Offset: true, at["a2"].Offset: true}
			alone := map[int64]bool{at["b2"].Offset: true}
			var want []Range
			for _, n := range []string{"info", "a1-req", "a1", "a1-dom", "a1-meta", "b2", "a2-req", "a2"} {
				want = append(want, at[n])
			}
			// With the index's lengths of the other crawls' records, those
			// are passed over (compressed files only): the same part.
			indexed := map[int64]int64{}
			for _, n := range []string{"b1", "b2"} {
				indexed[at[n].Offset] = at[n].Length
			}
			for _, spans := range []func(int64) (int64, bool){nil, func(o int64) (int64, bool) { n, ok := indexed[o]; return n, ok }} {
				got, err := SelectRecords(bytes.NewReader(seg.Bytes()), 0, func(o int64) bool { return member[o] }, func(o int64) bool { return alone[o] }, spans)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("SelectRecords (spans %v) (-want +got):\n%s", spans != nil, diff)
				}
			}
			if compress {
				// An index that gives a wrong length fails the scan.
				wrong := func(o int64) (int64, bool) {
					if o == at["b1"].Offset {
						return at["b1"].Length - 1, true
					}
					return 0, false
				}
				if _, err := SelectRecords(bytes.NewReader(seg.Bytes()), 0, func(o int64) bool { return member[o] }, nil, wrong); err == nil {
					t.Error("SelectRecords with a wrong index length = no error, want one")
				}
				long := func(o int64) (int64, bool) {
					if o == at["a2"].Offset {
						return int64(seg.Len()), true
					}
					return 0, false
				}
				if _, err := SelectRecords(bytes.NewReader(seg.Bytes()), 0, func(o int64) bool { return false }, nil, long); err == nil {
					t.Error("SelectRecords with a wrong index span = no error, want one")
				}
			}
		})
	}
}
