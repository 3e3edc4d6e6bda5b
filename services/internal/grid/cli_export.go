package grid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/gridcrawl/gridcrawl/services/internal/apiclient"
)

// exportUsage is the part of the usage text for export.
const exportUsage = `  export  [--data DIR] [--api URL] cdxj CRAWL_ID
                                                print the crawl's CDXJ index (pywb's format), merged and sorted
          [--data DIR] [--api URL] docs CRAWL_ID
                                                print the crawl's indexed documents, one JSON object a line
          [--data DIR] [--api URL] [--json] [--out DIR] segments CRAWL_ID
                                                list the crawl's WARC segments; with --out, download them and
                                                the crawl's CDXJ (DIR/index.cdxj), ready for a pywb collection
          [--data DIR] [--api URL] --wet|--wat [--out DIR] CRAWL_ID
                                                list each segment's Common Crawl WET (page text) or WAT
                                                (record metadata) file; with --out, download them into DIR
          [--data DIR] [--api URL] --wacz [--text] [--out FILE] CRAWL_ID
                                                write the crawl as one WACZ file (for ReplayWeb.page, Browsertrix)
                                                to FILE or standard output; --text adds the pages' text
          [--data DIR] [--api URL] --wacz --collection [--text] [--out FILE] NAME
                                                the same for every crawl of the collection NAME
`

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "[flags] cdxj|docs|segments CRAWL_ID, or --wacz [--text] [--out FILE] CRAWL_ID", stderr)
	data := fs.String("data", "", "data directory (default $GRIDCRAWL_DATA or ./data)")
	api := fs.String("api", "", "MCP base URL")
	asJSON := fs.Bool("json", false, "segments: print JSON")
	out := fs.String("out", "", "segments: download the segments and the crawl's index.cdxj into this directory; --wet, --wat: download the files into it; --wacz: write the WACZ to this file")
	wet := fs.Bool("wet", false, "list (or, with --out, download) each segment's WET file: export --wet CRAWL_ID")
	wat := fs.Bool("wat", false, "list (or, with --out, download) each segment's WAT file: export --wat CRAWL_ID")
	asWACZ := fs.Bool("wacz", false, "write the crawl as one WACZ file")
	text := fs.Bool("text", false, "--wacz: put each page's text in pages/pages.jsonl")
	collection := fs.Bool("collection", false, "--wacz: the argument is a collection: write every crawl of it as one WACZ file")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *asWACZ && (*wet || *wat) {
		return usageError{errors.New("--wacz is one file: give it alone, not with --wet or --wat")}
	}
	if *wet || *wat {
		return exportDerived(ctx, *api, *data, *out, *wet, *wat, pos, stdout)
	}
	if *collection && !*asWACZ {
		return usageError{errors.New("--collection goes with --wacz")}
	}
	if *asWACZ {
		if len(pos) != 1 {
			return usageError{errors.New("want --wacz CRAWL_ID, or --wacz --collection NAME")}
		}
		c, err := openAPI(*api, *data)
		if err != nil {
			return err
		}
		defer c.close()
		return exportWACZ(ctx, c.Client, pos[0], *collection, *text, *out, stdout)
	}
	if len(pos) != 2 {
		return usageError{errors.New("want WHAT CRAWL_ID; WHAT is cdxj, docs or segments")}
	}
	what, id := pos[0], pos[1]
	if what != "cdxj" && what != "docs" && what != "segments" {
		return usageError{fmt.Errorf("unknown export %q; one of cdxj, docs, segments", what)}
	}
	c, err := openAPI(*api, *data)
	if err != nil {
		return err
	}
	defer c.close()
	var body io.ReadCloser
	switch what {
	case "segments":
		return exportSegments(ctx, c.Client, id, *out, *asJSON, stdout)
	case "cdxj":
		body, err = c.CDXJ(ctx, id)
	default:
		body, err = c.Documents(ctx, id)
	}
	if err != nil {
		return err
	}
	defer body.Close()
	if _, err := io.Copy(stdout, body); err != nil {
		return fmt.Errorf("export %s of %s: %w", what, id, err)
	}
	return nil
}

// exportSegments lists crawl id's segments or downloads them with the
// crawl's CDXJ into dir.
func exportSegments(ctx context.Context, c *apiclient.Client, id, dir string, asJSON bool, stdout io.Writer) error {
	list, err := c.Segments(ctx, id)
	if err != nil {
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
		fmt.Fprintf(tw, "%s\t%d\t\t\n", plural(len(list.Segments), "segment"), list.TotalSize)
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
	if err := download(ctx, c, "/api/v1/crawls/"+url.PathEscape(id)+"/cdxj", index); err != nil {
		return err
	}
	fmt.Fprintln(stdout, index)
	return nil
}

// exportWACZ writes crawl id (or, with collection, every crawl of the
// collection id) as one WACZ file to file (through a temporary file renamed
// when complete) or, when file is "", to stdout.
func exportWACZ(ctx context.Context, c *apiclient.Client, id string, collection, text bool, file string, stdout io.Writer) error {
	open := c.WACZ
	if collection {
		open = c.CollectionWACZ
	}
	body, err := open(ctx, id, text)
	if err != nil {
		return err
	}
	defer body.Close()
	if file == "" {
		if _, err := io.Copy(stdout, body); err != nil {
			return fmt.Errorf("export wacz of %s: %w", id, err)
		}
		return nil
	}
	return saveFile(body, file)
}

// saveFile writes r to file through a temporary file renamed when complete.
func saveFile(r io.Reader, file string) error {
	tmp, err := createTemp(filepath.Dir(file))
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

// createTemp creates a new file in dir for a download, with the mode the
// umask leaves of 0666, as any file a user's command writes: the exports
// are the user's files, not the data directory's (os.CreateTemp would
// make them 0600).
func createTemp(dir string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, ".download-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("create a temporary file in %s: %w", dir, fs.ErrExist)
}

// download writes what path, relative to the API, answers to file, through
// a temporary file renamed when complete.
func download(ctx context.Context, c *apiclient.Client, path, file string) error {
	body, err := c.Open(ctx, path)
	if err != nil {
		return err
	}
	defer body.Close()
	tmp, err := createTemp(filepath.Dir(file))
	if err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, body); err != nil {
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
}
