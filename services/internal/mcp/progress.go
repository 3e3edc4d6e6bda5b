package mcp

import (
	"io"
	"net/http"
	"time"
)

// downloadWriteGrace is how long a streamed download (a segment, an index,
// the documents, a WACZ) may make no progress (the client reads nothing)
// before its connection is cut.
const downloadWriteGrace = time.Minute

// progressWriter lifts the write deadline of w, which the server's
// WriteTimeout sets for the whole response and which the download of a
// large crawl outlasts, and returns a writer to w that sets it to
// downloadWriteGrace from now as it writes: a download is cut only when it
// makes no progress. Call it before the work that precedes the first byte.
func progressWriter(w http.ResponseWriter) io.Writer {
	ctl := http.NewResponseController(w)
	_ = ctl.SetWriteDeadline(time.Time{}) // ErrNotSupported: the server's own deadline holds
	return &deadlineWriter{w: w, ctl: ctl}
}

// deadlineWriter moves the response's write deadline to downloadWriteGrace
// from now as it writes (at most every quarter of it).
type deadlineWriter struct {
	w    io.Writer
	ctl  *http.ResponseController
	next time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); !now.Before(d.next) {
		_ = d.ctl.SetWriteDeadline(now.Add(downloadWriteGrace))
		d.next = now.Add(downloadWriteGrace / 4)
	}
	return d.w.Write(p)
}
