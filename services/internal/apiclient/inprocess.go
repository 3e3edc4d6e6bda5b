package apiclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// InProcess returns a RoundTripper that serves each request with h in this
// process, as if it came from the loopback address 127.0.0.1: MCP's API
// then answers as it answers a local client. The answer's body is handed
// on through a pipe as h writes it, so that a long export is never held in
// memory whole; h runs until it returns, which the caller ensures by
// closing the body (h's writes then fail) or cancelling the request.
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.RemoteAddr = "127.0.0.1:1"
	req.RequestURI = req.URL.RequestURI()
	if req.Host == "" {
		req.Host = req.URL.Host // what the Host header would say
	}
	if req.Body == nil {
		req.Body = http.NoBody // a server's request always has a body
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			v := recover()
			w.start(http.StatusOK)
			switch {
			case v == nil:
				pw.Close()
			case v == http.ErrAbortHandler:
				pw.CloseWithError(errors.New("the server cut the answer short"))
			default:
				pw.CloseWithError(fmt.Errorf("handler panic: %v", v))
			}
		}()
		p.h.ServeHTTP(w, req)
	}()
	<-w.started
	return &http.Response{StatusCode: w.code, Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)),
		Header: w.sent, Body: pr, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
}

// pipeResponse is an http.ResponseWriter writing into a pipe.
type pipeResponse struct {
	header  http.Header
	sent    http.Header // header as of the status
	pw      *io.PipeWriter
	once    sync.Once
	code    int
	started chan struct{}
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) start(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.started)
	})
}

func (w *pipeResponse) WriteHeader(code int) { w.start(code) }

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(b)
}

// Flush does nothing: every Write reaches the reader.
func (w *pipeResponse) Flush() {}
