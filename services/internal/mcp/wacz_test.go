package mcp

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestProgressWriterOutlastsWriteTimeout: a response written through
// progressWriter goes on past the server's WriteTimeout as long as it makes
// progress, where the same response written plainly is cut.
func TestProgressWriterOutlastsWriteTimeout(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), 1000)
	const chunks = 6
	for _, tc := range []struct {
		name     string
		progress bool
	}{{"plain", false}, {"progress", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var out io.Writer = w
				if tc.progress {
					out = progressWriter(w)
				}
				for range chunks {
					time.Sleep(100 * time.Millisecond) // 600 ms in all, twice the WriteTimeout
					if _, err := out.Write(chunk); err != nil {
						return
					}
					http.NewResponseController(w).Flush()
				}
			}))
			srv.Config.WriteTimeout = 300 * time.Millisecond
			srv.Start()
			defer srv.Close()
			res, err := http.Get(srv.URL)
			var n int
			if err == nil {
				var body []byte
				body, err = io.ReadAll(res.Body)
				res.Body.Close()
				n = len(body)
			}
			complete := err == nil && n == chunks*len(chunk)
			if complete != tc.progress {
				t.Errorf("read %d of %d bytes (%v); want complete = %v", n, chunks*len(chunk), err, tc.progress)
			}
		})
	}
}
