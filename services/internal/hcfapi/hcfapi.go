// Package hcfapi serves the Hub Crawl Frontier API
// (https://doc.scrapinghub.com/hcf.html, as python-hubstorage and
// python-scrapinghub speak it) under /hcf/ on MCP's router, over an
// hcf.Store. It needs nothing else of MCP.
package hcfapi

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gridcrawl/gridcrawl/pkg/hcf"
	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// Limits of the Hub Crawl Frontier API.
const (
	// MaxBody bounds a request body, also after gzip decompression.
	MaxBody = 16 << 20
	// hcfWriteBuffer is the buffer of streamed answers.
	hcfWriteBuffer = 64 << 10
	// jsonLines is the content type of JSON lines answers.
	jsonLines = "application/x-jsonlines"
)

// hcfLimits bound the lines of request bodies.
var hcfLimits = hcf.Limits{MaxLineBytes: hcf.DefaultMaxLineBytes, MaxLines: hcf.DefaultMaxLines}

// errBodyTooLarge is the error of a body over MaxBody.
var errBodyTooLarge = fmt.Errorf("body larger than %d bytes", MaxBody)

// API serves the Hub Crawl Frontier API.
type API struct {
	store hcf.Store
	log   *slog.Logger
}

// New returns the API over store; a nil store answers 503.
func New(store hcf.Store, log *slog.Logger) *API {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &API{store: store, log: log}
}

// Routes registers the Hub Crawl Frontier API on mux, under /hcf/:
//
//	POST   /hcf/{project}/{frontier}/s/{slot}            JSON lines of requests → {"newcount":N}
//	GET    /hcf/{project}/{frontier}/s/{slot}/q          JSON lines of batches; ?mincount=N
//	POST   /hcf/{project}/{frontier}/s/{slot}/q/deleted  JSON lines of batch ids or arrays of them
//	GET    /hcf/{project}/{frontier}/s/{slot}/f          JSON lines of fingerprints, sorted
//	DELETE /hcf/{project}/{frontier}/s/{slot}[/]         deletes the slot
//	GET    /hcf/{project}/list                           one line: JSON array of frontier names
//	GET    /hcf/{project}/{frontier}/list                one line: JSON array of slot names
//
// The lists are one JSON array on one line because that is how clients of
// this API read them (python-scrapinghub's Frontiers.list takes the first
// JSON line of the answer). Request bodies may be gzip-compressed
// (Content-Encoding: gzip). A body with a bad line is refused whole with a
// 400 naming the line; nothing of it is applied.
func (m *API) Routes(mux interface {
	HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request))
}) {
	for pattern, h := range map[string]http.HandlerFunc{
		"POST /hcf/{project}/{frontier}/s/{slot}":           m.hcfAdd,
		"DELETE /hcf/{project}/{frontier}/s/{slot}":         m.hcfDeleteSlot,
		"DELETE /hcf/{project}/{frontier}/s/{slot}/{$}":     m.hcfDeleteSlot,
		"GET /hcf/{project}/{frontier}/s/{slot}/q":          m.hcfBatches,
		"POST /hcf/{project}/{frontier}/s/{slot}/q/deleted": m.hcfDeleteBatches,
		"GET /hcf/{project}/{frontier}/s/{slot}/f":          m.hcfFingerprints,
		"GET /hcf/{project}/list":                           m.hcfFrontiers,
		"GET /hcf/{project}/{frontier}/list":                m.hcfSlots,
	} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if m.store == nil {
				jsonapi.Error(w, http.StatusServiceUnavailable, "the frontier API has no store", "")
				return
			}
			h(w, r)
		})
	}
}

// hcfSlot returns the slot named by the path, or writes a 400.
func hcfSlot(w http.ResponseWriter, r *http.Request) (hcf.Slot, bool) {
	s := hcf.Slot{Project: r.PathValue("project"), Frontier: r.PathValue("frontier"), Name: r.PathValue("slot")}
	if err := s.Validate(); err != nil {
		jsonapi.Error(w, http.StatusBadRequest, err.Error(), "")
		return s, false
	}
	return s, true
}

// hcfBody returns the request body, decompressed, bounded by MaxBody.
func hcfBody(w http.ResponseWriter, r *http.Request) (io.Reader, error) {
	body := http.MaxBytesReader(w, r.Body, MaxBody)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		return body, nil
	case "gzip":
		gz, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("invalid gzip body: %w", err)
		}
		return &maxReader{r: gz, left: MaxBody}, nil
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
}

// maxReader fails with errBodyTooLarge after left bytes.
type maxReader struct {
	r    io.Reader
	left int64
}

func (m *maxReader) Read(p []byte) (int, error) {
	if m.left <= 0 {
		// One byte more tells a body of exactly the limit from a larger one.
		var b [1]byte
		n, err := m.r.Read(b[:])
		if n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > m.left {
		p = p[:m.left]
	}
	n, err := m.r.Read(p)
	m.left -= int64(n)
	return n, err
}

// writeBodyError answers a request whose body could not be read or parsed.
func writeBodyError(w http.ResponseWriter, err error) {
	var le *hcf.LineError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &le):
		jsonapi.Error(w, http.StatusBadRequest, le.Error(), "")
	case errors.As(err, &mbe), errors.Is(err, errBodyTooLarge):
		jsonapi.Error(w, http.StatusBadRequest, errBodyTooLarge.Error(), "")
	default:
		jsonapi.Error(w, http.StatusBadRequest, err.Error(), "")
	}
}

// writeStoreError answers a request the store failed.
func (m *API) writeStoreError(w http.ResponseWriter, action string, slot string, err error) {
	if errors.Is(err, hcf.ErrInvalid) {
		jsonapi.Error(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	m.log.Error("hcf "+action, "slot", slot, "err", err)
	jsonapi.Error(w, http.StatusInternalServerError, "could not "+action, "")
}

func (m *API) hcfAdd(w http.ResponseWriter, r *http.Request) {
	slot, ok := hcfSlot(w, r)
	if !ok {
		return
	}
	body, err := hcfBody(w, r)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	// Every line is checked before anything is written: a bad line refuses
	// the whole body.
	reqs, err := hcf.ParseRequests(body, hcfLimits)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	n, err := m.store.Add(r.Context(), slot, reqs)
	if err != nil {
		m.writeStoreError(w, "add requests", slot.String(), err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"newcount":`+strconv.Itoa(n)+"}\n")
}

func (m *API) hcfDeleteBatches(w http.ResponseWriter, r *http.Request) {
	slot, ok := hcfSlot(w, r)
	if !ok {
		return
	}
	body, err := hcfBody(w, r)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	ids, err := hcf.ParseIDs(body, hcfLimits)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	if err := m.store.DeleteBatches(r.Context(), slot, ids); err != nil {
		m.writeStoreError(w, "delete batches", slot.String(), err)
		return
	}
	writeEmptyOK(w)
}

func (m *API) hcfDeleteSlot(w http.ResponseWriter, r *http.Request) {
	slot, ok := hcfSlot(w, r)
	if !ok {
		return
	}
	if err := m.store.DeleteSlot(r.Context(), slot); err != nil {
		m.writeStoreError(w, "delete slot", slot.String(), err)
		return
	}
	writeEmptyOK(w)
}

// writeEmptyOK answers 200 with an empty body, as the hosted Hub Crawl
// Frontier answered deletions (not 204: clients compare the status).
func writeEmptyOK(w http.ResponseWriter) {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// lineWriter streams JSON lines through a buffer and remembers whether
// anything reached the client, after which an error can no longer become
// an error status.
type lineWriter struct {
	w    http.ResponseWriter
	bw   *bufio.Writer
	buf  []byte
	sent bool
}

func newLineWriter(w http.ResponseWriter) *lineWriter {
	lw := &lineWriter{w: w}
	lw.bw = bufio.NewWriterSize(writerFunc(func(p []byte) (int, error) {
		if !lw.sent {
			lw.sent = true
			w.Header().Set("Content-Type", jsonLines)
		}
		return w.Write(p)
	}), hcfWriteBuffer)
	return lw
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// line writes one line made by appendFn.
func (lw *lineWriter) line(appendFn func([]byte) []byte) error {
	lw.buf = append(appendFn(lw.buf[:0]), '\n')
	_, err := lw.bw.Write(lw.buf)
	return err
}

// finishLines flushes the lines, or answers err when nothing was sent yet.
func (m *API) finishLines(lw *lineWriter, action, slot string, err error) {
	if err != nil {
		if !lw.sent {
			m.writeStoreError(lw.w, action, slot, err)
			return
		}
		m.log.Warn("hcf "+action+" aborted", "slot", slot, "err", err)
		// Part of the answer is out and the status was 200: ending the
		// response normally would let the client take a truncated list as
		// complete. Abort it, so the client sees the connection break.
		_ = lw.bw.Flush()
		panic(http.ErrAbortHandler)
	}
	if !lw.sent {
		lw.w.Header().Set("Content-Type", jsonLines)
	}
	if err := lw.bw.Flush(); err != nil {
		m.log.Warn("hcf "+action+" aborted", "slot", slot, "err", err)
	}
}

func (m *API) hcfBatches(w http.ResponseWriter, r *http.Request) {
	slot, ok := hcfSlot(w, r)
	if !ok {
		return
	}
	mincount := 0
	if s, present := r.URL.Query()["mincount"]; present {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 0 {
			jsonapi.Error(w, http.StatusBadRequest, fmt.Sprintf("mincount %q must be a non-negative integer", s[0]), "mincount")
			return
		}
		mincount = n
	}
	lw := newLineWriter(w)
	err := m.store.Batches(r.Context(), slot, mincount, func(b hcf.Batch) error {
		return lw.line(func(dst []byte) []byte { return hcf.AppendBatch(dst, b) })
	})
	m.finishLines(lw, "read batches", slot.String(), err)
}

func (m *API) hcfFingerprints(w http.ResponseWriter, r *http.Request) {
	slot, ok := hcfSlot(w, r)
	if !ok {
		return
	}
	lw := newLineWriter(w)
	err := m.store.Fingerprints(r.Context(), slot, func(f hcf.Fingerprint) error {
		return lw.line(func(dst []byte) []byte { return hcf.AppendFingerprint(dst, f) })
	})
	m.finishLines(lw, "read fingerprints", slot.String(), err)
}

// writeNames answers names as one JSON line: an array of strings.
func writeNames(w http.ResponseWriter, names []string) {
	b := []byte{'['}
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = hcf.AppendString(b, n)
	}
	b = append(b, ']', '\n')
	w.Header().Set("Content-Type", jsonLines)
	_, _ = w.Write(b)
}

func (m *API) hcfFrontiers(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("project")
	names, err := m.store.Frontiers(r.Context(), project)
	if err != nil {
		m.writeStoreError(w, "list frontiers", project, err)
		return
	}
	writeNames(w, names)
}

func (m *API) hcfSlots(w http.ResponseWriter, r *http.Request) {
	project, frontier := r.PathValue("project"), r.PathValue("frontier")
	names, err := m.store.Slots(r.Context(), project, frontier)
	if err != nil {
		m.writeStoreError(w, "list slots", project+"/"+frontier, err)
		return
	}
	writeNames(w, names)
}
