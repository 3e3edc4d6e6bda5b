package httpbody

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"

	"github.com/gridcrawl/gridcrawl/pkg/bytebudget"
)

func encode(t *testing.T, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zlib":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		w, _ = flate.NewWriter(&buf, flate.BestSpeed)
	case "br":
		w = brotli.NewWriter(&buf)
	default:
		t.Fatalf("unknown coding %s", coding)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecode(t *testing.T) {
	var words strings.Builder
	for i := range 3000 {
		words.WriteString(strings.Repeat("w", i%13+1) + string(rune('a'+i%26)) + " ")
	}
	page := []byte("<html><title>encoded</title><body>" + words.String() + "</body></html>")
	gz := encode(t, "gzip", page)
	bomb := bytes.Repeat([]byte{0}, 10<<20)
	tests := []struct {
		name     string
		encoding []string // Content-Encoding header values
		body     []byte
		limit    int64
		want     []byte
		err      string
	}{
		{"identity", nil, page, 1 << 20, page, ""},
		{"identity named", []string{"identity"}, page, 1 << 20, page, ""},
		{"gzip", []string{"gzip"}, encode(t, "gzip", page), 1 << 20, page, ""},
		{"x-gzip", []string{"x-gzip"}, encode(t, "gzip", page), 1 << 20, page, ""},
		{"deflate (zlib)", []string{"deflate"}, encode(t, "zlib", page), 1 << 20, page, ""},
		{"deflate (raw)", []string{"Deflate"}, encode(t, "raw-deflate", page), 1 << 20, page, ""},
		{"br", []string{"br"}, encode(t, "br", page), 1 << 20, page, ""},
		{"two codings, last applied first", []string{"gzip, br"}, encode(t, "br", encode(t, "gzip", page)), 1 << 20, page, ""},
		{"two header lines", []string{"gzip", "br"}, encode(t, "br", encode(t, "gzip", page)), 1 << 20, page, ""},
		{"bomb cut at the limit", []string{"br"}, encode(t, "br", bomb), 1000, bomb[:1000], ""},
		{"gzip bomb cut at the limit", []string{"gzip"}, encode(t, "gzip", bomb), 1000, bomb[:1000], ""},
		{"cut short (loader cap) keeps what decoded", []string{"gzip"}, gz[:len(gz)/2], 1 << 20, nil, ""},
		{"unknown coding", []string{"compress"}, page, 1 << 20, nil, "content encoding compress: not supported"},
		{"br that is not br", []string{"br"}, page, 1 << 20, nil, "content encoding br"},
		{"gzip that is not gzip", []string{"gzip"}, page, 1 << 20, nil, "content encoding gzip"},
		{"too many codings", []string{"gzip, gzip, gzip, gzip, gzip"}, page, 1 << 20, nil, "more than 4 codings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.encoding {
				h.Add("Content-Encoding", v)
			}
			got, err := Decode(h, tt.body, tt.limit)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Decode error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if tt.want == nil { // a prefix of the page
				if len(got) == 0 || !bytes.HasPrefix(page, got) {
					t.Fatalf("Decode = %d bytes, want a non-empty prefix of the page", len(got))
				}
				return
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Decode = %d bytes, want %d", len(got), len(tt.want))
			}
		})
	}
}

// TestDecodeMemory: decoding a bomb cut at the limit, or a page that
// decodes to the limit, allocates less than twice the limit (io.ReadAll's
// growth allocated about four times), besides the decompressor's own state.
func TestDecodeMemory(t *testing.T) {
	const limit = 8 << 20
	page := bytes.Repeat([]byte("<p>some words of an ordinary page</p>\n"), limit/38)
	bomb := make([]byte, 64<<20)
	tests := []struct {
		name, coding, enc string
		plain             []byte
		state             uint64 // the decompressor's window and tables
	}{
		{"gzip bomb", "gzip", "gzip", bomb, 1 << 20},
		{"deflate bomb", "deflate", "zlib", bomb, 1 << 20},
		{"brotli bomb", "br", "br", bomb, 6 << 20}, // a 4 MiB window
		{"gzip page at the limit", "gzip", "gzip", page, 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := encode(t, tc.enc, tc.plain)
			h := http.Header{"Content-Encoding": {tc.coding}}
			if _, err := Decode(h, body, limit); err != nil { // warm up the decoders' pools
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			dec, err := Decode(h, body, limit)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.plain[:min(len(tc.plain), limit)]; !bytes.Equal(dec, want) {
				t.Fatalf("Decode returned %d bytes, want the first %d decoded", len(dec), len(want))
			}
			if alloc, most := after.TotalAlloc-before.TotalAlloc, 2*limit+tc.state; alloc > most {
				t.Errorf("Decode allocated %d bytes for %d decoded, want at most %d", alloc, len(dec), most)
			}
		})
	}
}

// TestDecodeWithBudget: with a budget reader as wrap, the room a decoded
// body is read into is reserved from the budget, not only the bytes read.
func TestDecodeWithBudget(t *testing.T) {
	const limit, free = 8 << 20, 256 << 10
	b := bytebudget.New(16<<20, free)
	var br *bytebudget.Reader
	wrap := func(r io.Reader) io.Reader {
		br = b.Reader(t.Context(), r)
		return br
	}
	body := encode(t, "gzip", make([]byte, 3<<20+100))
	dec, err := DecodeWith(http.Header{"Content-Encoding": {"gzip"}}, body, limit, wrap)
	if err != nil {
		t.Fatal(err)
	}
	if held := br.Held(); held < int64(cap(dec))-free {
		t.Errorf("the decode holds %d bytes of the budget for a %d-byte room, want at least %d", held, cap(dec), int64(cap(dec))-free)
	}
	br.Release()
}
