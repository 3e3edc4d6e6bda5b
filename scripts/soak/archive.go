package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/minio/minio-go/v7"
)

// archiveResult is what the archive check found: every WARC segment in the
// run's bucket through warcio check, and every line of each crawl's CDXJ
// read back from MinIO as the record it names.
type archiveResult struct {
	segments int   // segment objects in the bucket, all passed to warcio check
	bytes    int64 // their size
	lines    int   // CDXJ lines of the crawls
	readBack int   // lines whose record read back and matched
	covered  int   // reachable pages with a CDXJ line
	wanted   int   // reachable pages
	problems []string
}

// problem records a failure; the first few of each check are kept
// verbatim, the rest counted.
func (a *archiveResult) problem(format string, args ...any) {
	const keep = 20
	if len(a.problems) < keep {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	} else if len(a.problems) == keep {
		a.problems = append(a.problems, "(further archive problems left out)")
	}
}

// crawlOracle is a crawl and its reachable pages.
type crawlOracle struct {
	id   string
	want []string
}

// checkArchive runs the archive check of the run's bucket and crawls.
func checkArchive(ctx context.Context, cl *cluster, warcio, bucket string, crawls []crawlOracle) (archiveResult, error) {
	var r archiveResult
	mc, err := minioClient()
	if err != nil {
		return r, err
	}
	var keys []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "warc/", Recursive: true}) {
		if o.Err != nil {
			return r, fmt.Errorf("list bucket %s: %w", bucket, o.Err)
		}
		if strings.HasSuffix(o.Key, ".warc.gz") || strings.HasSuffix(o.Key, ".warc") {
			keys = append(keys, o.Key)
			r.bytes += o.Size
		}
	}
	r.segments = len(keys)
	if err := warcioCheck(ctx, mc, warcio, bucket, keys, &r); err != nil {
		return r, err
	}
	inBucket := make(map[string]bool, len(keys))
	for _, k := range keys {
		inBucket[k] = true
	}
	for _, c := range crawls {
		if err := checkCDXJ(ctx, cl, mc, bucket, c, inBucket, &r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// warcioCheck downloads the segments in batches and runs warcio check on
// each batch; a batch that fails is checked file by file to name the
// segments at fault.
func warcioCheck(ctx context.Context, mc *minio.Client, warcio, bucket string, keys []string, r *archiveResult) error {
	dir, err := os.MkdirTemp("", "gridcrawl-soak-warc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	const batch = 32
	for len(keys) > 0 {
		n := min(batch, len(keys))
		var files []string
		byFile := map[string]string{}
		for i, k := range keys[:n] {
			f := filepath.Join(dir, fmt.Sprintf("%03d-%s", i, filepath.Base(k)))
			if err := mc.FGetObject(ctx, bucket, k, f, minio.GetObjectOptions{}); err != nil {
				r.problem("segment %s does not read back from MinIO: %v", k, err)
				continue
			}
			if _, err := walkSegment(f); err != nil {
				r.problem("segment %s is not whole: %v", k, err)
			}
			files = append(files, f)
			byFile[f] = k
		}
		keys = keys[n:]
		if len(files) == 0 {
			continue
		}
		if _, err := runWarcio(ctx, warcio, files...); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, f := range files {
				if out, err := runWarcio(ctx, warcio, f); err != nil {
					r.problem("warcio check fails on segment %s: %v: %s", byFile[f], err, lastLines(out, 3))
				}
			}
		}
		for _, f := range files {
			os.Remove(f)
		}
	}
	return nil
}

// runWarcio runs warcio check on files and returns what it printed.
func runWarcio(ctx context.Context, warcio string, files ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, warcio, append([]string{"check"}, files...)...).CombinedOutput()
	return string(out), err
}

// cdxjLine is what the check reads of a CDXJ line.
type cdxjLine struct {
	URL      string `json:"url"`
	Offset   string `json:"offset"`
	Length   string `json:"length"`
	Filename string `json:"filename"`
}

// checkCDXJ reads the crawl's segments and CDXJ through MCP's API and reads
// the record of every line back from MinIO.
func checkCDXJ(ctx context.Context, cl *cluster, mc *minio.Client, bucket string, c crawlOracle, inBucket map[string]bool, r *archiveResult) error {
	var segs contracts.SegmentList
	if code, err := cl.call(http.MethodGet, "/api/v1/crawls/"+c.id+"/segments", nil, &segs); err != nil || code != http.StatusOK {
		return fmt.Errorf("list the segments of crawl %s: %d %v", c.id, code, err)
	}
	keyOf := map[string]string{}
	for _, s := range segs.Segments {
		keyOf[s.Name] = s.Key
		if !inBucket[s.Key] {
			r.problem("crawl %s lists segment %s, which is not in bucket %s", c.id, s.Key, bucket)
		}
	}
	body, err := cl.get("/api/v1/crawls/" + c.id + "/cdxj")
	if err != nil {
		return fmt.Errorf("read the CDXJ of crawl %s: %w", c.id, err)
	}
	wanted := make(map[string]bool, len(c.want))
	for _, u := range c.want {
		wanted[u] = true
	}
	r.wanted += len(c.want)
	seen := map[string]bool{}
	type job struct {
		line cdxjLine
		key  string
		raw  string
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				err := readRecord(ctx, mc, bucket, j.key, j.line)
				mu.Lock()
				if err != nil {
					r.problem("CDXJ line of %s does not read back: %v (line %s)", j.line.URL, err, j.raw)
				} else {
					r.readBack++
				}
				mu.Unlock()
			}
		}()
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		if strings.TrimSpace(raw) == "" {
			continue
		}
		mu.Lock()
		r.lines++
		mu.Unlock()
		var l cdxjLine
		parts := strings.SplitN(raw, " ", 3)
		if len(parts) < 3 || json.Unmarshal([]byte(parts[2]), &l) != nil {
			mu.Lock()
			r.problem("crawl %s: unparsable CDXJ line %q", c.id, raw)
			mu.Unlock()
			continue
		}
		key := keyOf[l.Filename]
		if key == "" {
			mu.Lock()
			r.problem("crawl %s: CDXJ line of %s names segment %q, which the crawl's segment list lacks", c.id, l.URL, l.Filename)
			mu.Unlock()
			continue
		}
		if wanted[l.URL] && !seen[l.URL] {
			seen[l.URL] = true
			mu.Lock()
			r.covered++
			mu.Unlock()
		}
		jobs <- job{l, key, raw}
	}
	close(jobs)
	wg.Wait()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the CDXJ of crawl %s: %w", c.id, err)
	}
	var missing []string
	for _, u := range c.want {
		if !seen[u] {
			missing = append(missing, u)
		}
	}
	if len(missing) > 0 {
		r.problem("crawl %s: %d reachable pages have no CDXJ line, such as %s", c.id, len(missing), strings.Join(missing[:min(3, len(missing))], " "))
	}
	return nil
}

// readRecord reads the byte range of the line's record from the segment
// object and checks that it is one whole record (for .warc.gz: one gzip
// member, its checksum right, nothing after it) of type response, revisit
// or resource whose target URI is the line's URL.
func readRecord(ctx context.Context, mc *minio.Client, bucket, key string, l cdxjLine) error {
	off, err1 := strconv.ParseInt(l.Offset, 10, 64)
	n, err2 := strconv.ParseInt(l.Length, 10, 64)
	if err1 != nil || err2 != nil || off < 0 || n <= 0 {
		return fmt.Errorf("offset %q, length %q", l.Offset, l.Length)
	}
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(off, off+n-1); err != nil {
		return err
	}
	obj, err := mc.GetObject(ctx, bucket, key, opts)
	if err != nil {
		return fmt.Errorf("get %s bytes %d-%d: %w", key, off, off+n-1, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return fmt.Errorf("get %s bytes %d-%d: %w", key, off, off+n-1, err)
	}
	if int64(len(b)) != n {
		return fmt.Errorf("%s bytes %d-%d: got %d bytes", key, off, off+n-1, len(b))
	}
	return parseRecord(b, strings.HasSuffix(key, ".gz"), l.URL)
}

// parseRecord checks that b is exactly one WARC record (gzipped: one gzip
// member) of type response, revisit or resource for url.
func parseRecord(b []byte, gzipped bool, url string) error {
	br := bufio.NewReader(bytes.NewReader(b))
	var h textproto.MIMEHeader
	if gzipped {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("not a gzip member: %w", err)
		}
		if h, err = memberRecord(gz, br); err != nil {
			return err
		}
	} else {
		var err error
		if h, err = oneRecord(br); err != nil {
			return err
		}
	}
	if _, err := br.Peek(1); err != io.EOF {
		return errors.New("bytes after the record: the length is wrong")
	}
	switch t := h.Get("WARC-Type"); t {
	case "response", "revisit", "resource":
	default:
		return fmt.Errorf("a %q record, not a response, revisit or resource", t)
	}
	if got := strings.Trim(h.Get("WARC-Target-URI"), "<>"); got != url {
		return fmt.Errorf("a record of %s", got)
	}
	return nil
}

// memberRecord reads one gzip member from gz (reading from src) and checks
// that it holds exactly one whole WARC record; gz is left at the member's
// end, its checksum verified.
func memberRecord(gz *gzip.Reader, src *bufio.Reader) (textproto.MIMEHeader, error) {
	gz.Multistream(false)
	rb := bufio.NewReader(gz)
	h, err := oneRecord(rb)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, rb)
	switch {
	case err != nil:
		return nil, fmt.Errorf("gzip member: %w", err)
	case n > 0:
		return nil, fmt.Errorf("%d bytes after the record in its gzip member", n)
	}
	return h, nil
}

// oneRecord reads one WARC record from r: the version line, the header, a
// block of Content-Length bytes and the two CRLFs that end it.
func oneRecord(r *bufio.Reader) (textproto.MIMEHeader, error) {
	tp := textproto.NewReader(r)
	version, err := tp.ReadLine()
	if err != nil || !strings.HasPrefix(version, "WARC/1.") {
		return nil, fmt.Errorf("no WARC record here (first line %q, %v)", version, err)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, fmt.Errorf("WARC header: %w", err)
	}
	cl, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil || cl < 0 {
		return nil, fmt.Errorf("Content-Length %q", h.Get("Content-Length"))
	}
	if got, err := io.CopyN(io.Discard, r, cl); err != nil {
		return nil, fmt.Errorf("block of %d bytes, Content-Length says %d: %w", got, cl, err)
	}
	end := make([]byte, 4)
	if _, err := io.ReadFull(r, end); err != nil || string(end) != "\r\n\r\n" {
		return nil, fmt.Errorf("the record does not end in CRLF CRLF after its block (%q, %v)", end, err)
	}
	return h, nil
}

// walkSegment reads the whole segment file record by record (for
// .warc.gz: one gzip member a record, each checksum verified) and returns
// how many records it holds. warcio check verifies digests, but a segment
// whose last member is cut short passes it.
func walkSegment(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	gzipped := strings.HasSuffix(path, ".gz")
	var gz *gzip.Reader
	for n := 0; ; n++ {
		if _, err := br.Peek(1); err == io.EOF {
			return n, nil
		}
		if !gzipped {
			if _, err := oneRecord(br); err != nil {
				return n, fmt.Errorf("record %d: %w", n+1, err)
			}
			continue
		}
		if gz == nil {
			gz, err = gzip.NewReader(br)
		} else {
			err = gz.Reset(br)
		}
		if err == nil {
			_, err = memberRecord(gz, br)
		}
		if err != nil {
			return n, fmt.Errorf("record %d: %w", n+1, err)
		}
	}
}
