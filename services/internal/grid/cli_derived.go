package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"text/tabwriter"
)

// exportDerived serves export --wet and --wat: it lists each segment's
// WET and/or WAT file of the crawl pos names, or downloads them into dir.
func exportDerived(ctx context.Context, api, data, dir string, wet, wat bool, pos []string, stdout io.Writer) error {
	if len(pos) != 1 {
		return usageError{errors.New("want --wet or --wat and CRAWL_ID")}
	}
	id := pos[0]
	c, err := openAPI(api, data)
	if err != nil {
		return err
	}
	defer c.close()
	list, err := c.Segments(ctx, id)
	if err != nil {
		return err
	}
	var urls []string
	for _, s := range list.Segments {
		if wet {
			urls = append(urls, s.WETURL)
		}
		if wat {
			urls = append(urls, s.WATURL)
		}
	}
	if dir == "" {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tURL")
		for _, u := range urls {
			fmt.Fprintf(tw, "%s\t%s\n", path.Base(u), u)
		}
		return tw.Flush()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, u := range urls {
		file := filepath.Join(dir, path.Base(u))
		if err := download(ctx, c.Client, u, file); err != nil {
			return err
		}
		fmt.Fprintln(stdout, file)
	}
	return nil
}
