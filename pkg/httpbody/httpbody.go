// Package httpbody undoes the content codings of HTTP response bodies that
// the loaders offer in Accept-Encoding, within a size limit.
package httpbody

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"

	"github.com/gridcrawl/gridcrawl/pkg/growbuf"
)

// AcceptEncoding is what loaders offer in Accept-Encoding: every coding
// Decode can undo.
const AcceptEncoding = "gzip, deflate, br"

// maxCodings bounds the codings of one response ("gzip, gzip, gzip, …").
const maxCodings = 4

// Decode undoes the response's Content-Encoding, last coding first, and
// returns at most limit bytes of the result (a bomb is cut there). A coding
// it does not know, or bytes that do not decode, are an error: the page is
// never parsed and indexed as compressed bytes.
func Decode(header http.Header, body []byte, limit int64) ([]byte, error) {
	return DecodeWith(header, body, limit, nil)
}

// DecodeWith is Decode reading every decoder's output through wrap (when not
// nil): a caller can bound the memory of concurrent decodes
// (pkg/bytebudget).
func DecodeWith(header http.Header, body []byte, limit int64, wrap func(io.Reader) io.Reader) ([]byte, error) {
	var codings []string
	for _, v := range header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) == 0 {
		return body, nil
	}
	if len(codings) > maxCodings {
		return nil, fmt.Errorf("content encoding %q: more than %d codings", strings.Join(codings, ", "), maxCodings)
	}
	for i := len(codings) - 1; i >= 0; i-- {
		dec, err := decodeOne(codings[i], body, limit, wrap)
		if err != nil {
			return nil, fmt.Errorf("content encoding %s: %w", codings[i], err)
		}
		body = dec
	}
	return body, nil
}

func decodeOne(coding string, body []byte, limit int64, wrap func(io.Reader) io.Reader) ([]byte, error) {
	var r io.Reader
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r = zr
	case "deflate":
		// RFC 9110 says zlib; some servers send a raw DEFLATE stream.
		if zr, err := zlib.NewReader(bytes.NewReader(body)); err == nil {
			r = zr
		} else {
			r = flate.NewReader(bytes.NewReader(body))
		}
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	default:
		return nil, errors.New("not supported")
	}
	r = io.LimitReader(r, limit+1)
	if wrap != nil {
		r = wrap(r) // outermost: a budget reader reserves the room growbuf allocates
	}
	// Decoded bodies are read into a slice that grows to the limit, not
	// past it (io.ReadAll's growth allocates several times a body at the
	// limit), starting from a guess of a few times the coded size.
	dec, err := growbuf.ReadAll(nil, r, min(max(4*int64(len(body)), 32<<10), limit+1), limit+1, false)
	// A body cut by the loader's size cap ends early: keep what decoded.
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	if len(dec) == 0 && len(body) > 0 {
		return nil, errors.New("no decodable bytes")
	}
	if int64(len(dec)) > limit {
		dec = dec[:limit]
	}
	return dec, nil
}
