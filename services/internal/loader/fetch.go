package loader

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// exchange is one HTTP request and its raw response, as it goes into WARC.
type exchange struct {
	date        time.Time
	ip          string
	request     []byte // request line and headers as sent
	response    []byte // status line, headers and raw (still encoded) body
	truncated   bool
	status      int
	contentType string
	retryAfter  string // the Retry-After header, for the politeness scheduler
}

// fetch GETs u once, without following redirects, and keeps at most
// MaxBodyBytes of the body exactly as the server sent it.
func (l *Loader) fetch(ctx context.Context, t *task, u *url.URL) (*exchange, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.FetchTimeout)
	defer cancel()
	ex := &exchange{}
	trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		if a, ok := ci.Conn.RemoteAddr().(*net.TCPAddr); ok {
			ex.ip = a.IP.String()
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", t.profile.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8")
	req.Header.Set("Accept-Encoding", "gzip")
	ex.date = time.Now().UTC()
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, l.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > l.cfg.MaxBodyBytes {
		body, ex.truncated = body[:l.cfg.MaxBodyBytes], true
	}
	ex.status = resp.StatusCode
	ex.contentType = resp.Header.Get("Content-Type")
	ex.retryAfter = resp.Header.Get("Retry-After")
	ex.request = dumpRequest(req)
	ex.response = dumpResponse(resp, body)
	return ex, nil
}

func dumpRequest(req *http.Request) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", req.URL.RequestURI(), req.URL.Host)
	_ = req.Header.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

func dumpResponse(resp *http.Response, body []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(body) + 512)
	fmt.Fprintf(&b, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
	h := resp.Header.Clone()
	// The body is stored as received, so the framing headers must describe it.
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

const maxRobotsBytes = 500 << 10

func fetchRobots(ctx context.Context, c *http.Client, robotsURL string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, robotsURL, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("build robots request: %w", err)
	}
	req.Header.Set("User-Agent", contracts.DefaultUserAgent)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRobotsBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("read robots.txt: %w", err)
	}
	return resp.StatusCode, body, nil
}
