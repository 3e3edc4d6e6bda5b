package grid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"

	"github.com/gridcrawl/gridcrawl/services/internal/mcp"
)

// exportUsage is the part of the usage text for export.
const exportUsage = `  export  [--data DIR] [--api URL] cdxj CRAWL_ID
                                                print the crawl's CDXJ index (pywb's format), merged and sorted
          [--data DIR] [--api URL] docs CRAWL_ID
                                                print the crawl's indexed documents, one JSON object a line
          [--data DIR] [--api URL] [--json] [--out DIR] segments CRAWL_ID
                                                list the crawl's WARC segments; with --out, download them and
                                                the crawl's CDXJ (DIR/index.cdxj), ready for a pywb collection
`

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "[flags] cdxj|docs|segments CRAWL_ID", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	asJSON := fs.Bool("json", false, "segments: print JSON")
	out := fs.String("out", "", "segments: download the segments and the crawl's index.cdxj into this directory")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError{errors.New("want WHAT CRAWL_ID; WHAT is cdxj, docs or segments")}
	}
	what, id := pos[0], pos[1]
	base := "/api/v1/crawls/" + url.PathEscape(id)
	var path string
	switch what {
	case "cdxj":
		path = base + "/cdxj"
	case "docs":
		path = base + "/documents"
	case "segments":
	default:
		return usageError{fmt.Errorf("unknown export %q; one of cdxj, docs, segments", what)}
	}
	c, release, err := exportClient(*api, *data)
	if err != nil {
		return err
	}
	defer release()
	if what == "segments" {
		return exportSegments(ctx, c, base, *out, *asJSON, stdout)
	}
	return c.raw(ctx, http.MethodGet, path, func(res *http.Response) error {
		if err := apiStatus(res, path); err != nil {
			return err
		}
		if _, err := io.Copy(stdout, res.Body); err != nil {
			return fmt.Errorf("export %s of %s: %w", what, id, err)
		}
		return nil
	})
}

// apiStatus turns an error answer into an apiError.
func apiStatus(res *http.Response, path string) error {
	if res.StatusCode < 300 {
		return nil
	}
	ae := &apiError{method: http.MethodGet, path: path, status: res.StatusCode, msg: res.Status}
	var e struct {
		Error string `json:"error"`
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		ae.msg = fmt.Sprintf("%s (%d)", e.Error, res.StatusCode)
	}
	return ae
}

// exportSegments lists a crawl's segments or downloads them with the
// crawl's CDXJ into dir.
func exportSegments(ctx context.Context, c *client, base, dir string, asJSON bool, stdout io.Writer) error {
	var list mcp.SegmentList
	if err := c.do(ctx, http.MethodGet, base+"/segments", nil, &list); err != nil {
		return err
	}
	if dir == "" {
		if asJSON {
			return json.NewEncoder(stdout).Encode(list)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEGMENT\tSIZE\tRECORDS\tURL")
		for _, s := range list.Segments {
			size := "-"
			if s.Size != nil {
				size = fmt.Sprint(*s.Size)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.Name, size, s.Records, s.URL)
		}
		fmt.Fprintf(tw, "%d segments\t%d\t\t\n", len(list.Segments), list.TotalSize)
		return tw.Flush()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, s := range list.Segments {
		if err := download(ctx, c, s.URL, filepath.Join(dir, s.Name)); err != nil {
			return err
		}
		fmt.Fprintln(stdout, filepath.Join(dir, s.Name))
	}
	index := filepath.Join(dir, "index.cdxj")
	if err := download(ctx, c, base+"/cdxj", index); err != nil {
		return err
	}
	fmt.Fprintln(stdout, index)
	return nil
}

// download writes what path answers to file, through a temporary file
// renamed when complete.
func download(ctx context.Context, c *client, path, file string) error {
	return c.raw(ctx, http.MethodGet, path, func(res *http.Response) error {
		if err := apiStatus(res, path); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(file), ".download-*")
		if err != nil {
			return fmt.Errorf("download %s: %w", path, err)
		}
		defer os.Remove(tmp.Name())
		if _, err := io.Copy(tmp, res.Body); err != nil {
			tmp.Close()
			return fmt.Errorf("download %s: %w", path, err)
		}
		if err := tmp.Close(); err != nil {
			return fmt.Errorf("download %s: %w", path, err)
		}
		if err := os.Rename(tmp.Name(), file); err != nil {
			return fmt.Errorf("download %s: %w", path, err)
		}
		return nil
	})
}

// exportClient is apiClient whose in-process MCP streams its answers,
// which an export may not hold in memory whole.
func exportClient(api, data string) (*client, func(), error) {
	c, release, err := apiClient(api, data)
	if err != nil {
		return nil, nil, err
	}
	if ip, ok := c.http.Transport.(inProcess); ok {
		c.http.Transport = streamingInProcess(ip)
	}
	return c, release, nil
}

// streamingInProcess serves requests with a handler, as from loopback,
// handing the body on through a pipe as the handler writes it.
type streamingInProcess struct{ h http.Handler }

func (p streamingInProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.RemoteAddr = "127.0.0.1:1"
	req.RequestURI = req.URL.RequestURI()
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
		Header: w.sent, Body: pr, Request: req, ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
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
