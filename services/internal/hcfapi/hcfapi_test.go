package hcfapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridcrawl/gridcrawl/pkg/hcf"
)

// TestHCFListAbortsOnLateError: when the store fails after part of a /q or /f
// answer went out, the response must break off (the client sees an error),
// not end cleanly as if the truncated list were complete.
func TestHCFListAbortsOnLateError(t *testing.T) {
	m := &API{log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lw := newLineWriter(w)
		for i := range 20000 { // more than the line writer buffers: the status goes out
			if err := lw.line(func(b []byte) []byte { return fmt.Appendf(b, `{"fp":"%d"}`, i) }); err != nil {
				return
			}
		}
		m.finishLines(lw, "list fingerprints", "p/f/s", fmt.Errorf("store: connection lost"))
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200 (the answer had begun)", resp.StatusCode)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("reading the truncated answer succeeded, want an error")
	}
}

// FuzzHCFGzipBody: a gzip-encoded HCF body of any bytes is either refused or
// parsed exactly as its decompressed lines would be when sent plain.
func FuzzHCFGzipBody(f *testing.F) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	good := gz("{\"fp\":\"/\"}\n{\"fp\":\"page1.html\",\"p\":1,\"qdata\":{\"depth\":1}}\n")
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(gz("{\"fp\":\"\\ud800\"}"))
	f.Add(gz(strings.Repeat("\n", 1000)))
	f.Add(append(gz("{\"fp\":\"a\"}\n"), gz("{\"fp\":\"b\"}\n")...)) // two members
	f.Add([]byte("not gzip at all"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/hcf/p/f/s/s", bytes.NewReader(body))
		r.Header.Set("Content-Encoding", "gzip")
		rd, err := hcfBody(httptest.NewRecorder(), r)
		if err != nil {
			return
		}
		reqs, err := hcf.ParseRequests(rd, hcfLimits)
		if err != nil {
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("hcfBody accepted a body gzip refuses: %v", err)
		}
		plain, err := io.ReadAll(io.LimitReader(zr, MaxBody+1))
		if err != nil || len(plain) > MaxBody {
			t.Fatalf("parsed a body that does not decompress within the limit: %d bytes, %v", len(plain), err)
		}
		again, err := hcf.ParseRequests(bytes.NewReader(plain), hcfLimits)
		if err != nil {
			t.Fatalf("the same lines sent plain: %v", err)
		}
		if diff := cmp.Diff(again, reqs); diff != "" {
			t.Fatalf("gzip and plain parse differently (-plain +gzip):\n%s", diff)
		}
	})
}
