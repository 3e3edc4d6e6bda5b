package warc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
)

// maxInterim bounds the interim (1xx) responses skipped before the final one.
const maxInterim = 8

// ParseHTTPResponse splits the HTTP/1.x response stored in a response
// record's block into its status code, header and body. Interim 1xx
// responses before the final one are skipped. A chunked body is de-chunked
// (as far as it goes, when truncated; left as is when the chunking is
// malformed); other bodies are returned as stored, aliasing block, with no
// content decoding.
func ParseHTTPResponse(block []byte) (status int, header http.Header, body []byte, err error) {
	for range maxInterim + 1 {
		end := httpHeaderEnd(block)
		if end < 0 {
			return 0, nil, nil, fmt.Errorf("parse http response: no end of header: %w", ErrMalformed)
		}
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(block[:end])))
		line, err := tp.ReadLine()
		if err != nil {
			return 0, nil, nil, fmt.Errorf("parse http response: status line: %w", err)
		}
		status, err = parseStatusLine(line)
		if err != nil {
			return 0, nil, nil, err
		}
		mh, err := tp.ReadMIMEHeader()
		if err != nil && !(errors.Is(err, io.EOF) && mh != nil) {
			return 0, nil, nil, fmt.Errorf("parse http response: header: %w", err)
		}
		body = block[end:]
		if status >= 100 && status <= 199 && status != http.StatusSwitchingProtocols {
			block = body
			continue
		}
		header = http.Header(mh)
		if chunked(header) {
			decoded, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(body)))
			if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
				body = decoded
			}
		}
		return status, header, body, nil
	}
	return 0, nil, nil, fmt.Errorf("parse http response: more than %d interim responses: %w", maxInterim, ErrMalformed)
}

// parseStatusLine parses "HTTP/1.1 200 OK" (the reason is optional).
func parseStatusLine(line string) (int, error) {
	proto, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/") {
		return 0, fmt.Errorf("parse http response: status line %q: %w", truncate([]byte(line)), ErrMalformed)
	}
	code, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	status, err := strconv.Atoi(code)
	if err != nil || len(code) != 3 || status < 100 {
		return 0, fmt.Errorf("parse http response: status code %q: %w", truncate([]byte(code)), ErrMalformed)
	}
	return status, nil
}

func chunked(h http.Header) bool {
	for _, v := range h.Values("Transfer-Encoding") {
		for te := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(te), "chunked") {
				return true
			}
		}
	}
	return false
}
