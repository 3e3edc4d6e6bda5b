package extract

import (
	"bytes"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// maxMediaTypeBytes bounds the media type MediaType returns: no real one is
// longer (RFC 6838: 127 + 1 + 127).
const maxMediaTypeBytes = 255

// MediaType returns the media type of a Content-Type value, without
// parameters, lower case; "" when there is none or it is not valid.
func MediaType(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	if len(mt) > maxMediaTypeBytes {
		return ""
	}
	return mt
}

// Page extracts a fetched page's decoded body by its media type mt (see
// MediaType) and Content-Type contentType, as gridcrawl indexes pages: HTML
// (text/html, application/xhtml+xml, or no type and a body that sniffs as
// HTML) with HTMLWithContentType, other text/* types with Text. It reports
// false for other media, which are indexed by their metadata only (an
// empty Result).
func Page(mt, contentType string, body []byte, pageURL *url.URL, lim Limits) (Result, bool, error) {
	switch {
	case IsHTML(mt, body):
		res, err := HTMLWithContentType(bytes.NewReader(body), contentType, pageURL, lim)
		return res, true, err
	case strings.HasPrefix(mt, "text/"):
		res, err := Text(bytes.NewReader(body), lim)
		return res, true, err
	}
	return Result{}, false, nil
}

// IsHTML reports whether Page reads a body of media type mt as HTML.
func IsHTML(mt string, body []byte) bool {
	return mt == "text/html" || mt == "application/xhtml+xml" ||
		mt == "" && http.DetectContentType(body) == "text/html; charset=utf-8"
}
