package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// hostileConfig is what -hostile measures: the same generated web crawled
// plain and with one page in every of each host hostile (websim's
// HostileEvery), in turn, rounds times.
type hostileConfig struct {
	hosts, pages, links, cross, bytes int
	depth, delay, every, rounds       int
	latency                           time.Duration
	maxRatio                          float64
	gridMode                          bool
	gridBin, binDir                   string
	loaders, crawlers                 int
}

// hostileRun is one crawl of -hostile.
type hostileRun struct {
	hostile  bool
	webPages int   // pages the web serves (the same for both webs)
	pages    int64 // pages fetched: indexed, failed or redirected
	records  int64 // URLs the crawl recorded
	indexed  int64
	failed   int64
	wall     time.Duration
	cpu      float64          // seconds, every service of ours
	rssMiB   map[string]int64 // peak resident memory by service (grid; mcp, loader, crawler)
	stored   map[string]int64 // bytes stored when the crawl ended, by part
	load     [2]string        // load average before and after
}

func (r hostileRun) name() string {
	if r.hostile {
		return "hostile"
	}
	return "ordinary"
}

func (r hostileRun) storedTotal() int64 {
	var n int64
	for _, b := range r.stored {
		n += b
	}
	return n
}

// hostileBench crawls the ordinary web and the hostile web in turn and
// prints what each cost and the ratios; it fails when a ratio that must stay
// within maxRatio (peak memory of each service, stored bytes per page) does
// not.
func hostileBench(c hostileConfig) error {
	mode := "embedded (bin/grid crawl, one process)"
	if c.gridMode {
		mode = fmt.Sprintf("grid mode (mcp, %d loaders, %d crawlers on RabbitMQ, Elasticsearch and MinIO)", c.loaders, c.crawlers)
	}
	probe := websim.NewWeb(websim.WebConfig{Hosts: c.hosts, PagesPerHost: c.pages, HostileEvery: c.every})
	kinds := probe.HostilePages()
	nHostile := 0
	for _, n := range kinds {
		nHostile += n
	}
	fmt.Printf("hostile-web benchmark, %s\n", mode)
	fmt.Printf("web: %d hosts x %d pages of %d B, %d links/page (%d cross-host), min delay %d ms, depth %d\n",
		c.hosts, c.pages, c.bytes, c.links, c.cross, c.delay, c.depth)
	fmt.Printf("hostile web: the same with %d of its %d pages hostile (one in %d of each host), %d kinds:\n",
		nHostile, probe.Pages(), c.every, len(kinds))
	names := websim.HostileKinds()
	for i := 0; i < len(names); i += 6 {
		var parts []string
		for _, k := range names[i:min(i+6, len(names))] {
			parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
		}
		fmt.Printf("  %s\n", strings.Join(parts, ", "))
	}
	if missing := len(names) - len(kinds); missing > 0 {
		fmt.Printf("  (%d kinds have no page: give the web more hosts or pages)\n", missing)
	}
	var runs []hostileRun
	for round := range c.rounds {
		for _, hostile := range []bool{false, true} {
			r, err := hostileCrawl(c, hostile)
			if err != nil {
				return fmt.Errorf("round %d, %s web: %w", round+1, map[bool]string{false: "ordinary", true: "hostile"}[hostile], err)
			}
			runs = append(runs, r)
			printHostileRun(r)
		}
	}
	return hostileTable(runs, c.maxRatio)
}

// hostileCrawl crawls the ordinary or the hostile web once.
func hostileCrawl(c hostileConfig, hostile bool) (hostileRun, error) {
	cfg := websim.WebConfig{Hosts: c.hosts, PagesPerHost: c.pages, LinksPerPage: c.links, CrossHostLinks: c.cross,
		PageBytes: c.bytes, Latency: c.latency, Seed: 1}
	if hostile {
		cfg.HostileEvery = c.every
	}
	web := websim.NewWeb(cfg)
	if err := web.Start(); err != nil {
		return hostileRun{}, fmt.Errorf("start simulated web: %w", err)
	}
	defer web.Close()
	r := hostileRun{hostile: hostile, webPages: web.Pages(), rssMiB: map[string]int64{}}
	r.load[0] = loadAverage()
	if c.gridMode {
		var res gridResult
		if err := gridBench(web, c.depth, c.delay, c.loaders, c.crawlers, c.binDir, nil, &res, gridOptions{}); err != nil {
			return hostileRun{}, err
		}
		r.pages, r.wall, r.cpu = res.pages, res.wall, res.cpu
		r.records, r.indexed, r.failed = res.status.Total, res.status.Counts[contracts.Indexed], res.status.Counts[contracts.Failed]
		for _, s := range res.services {
			role, _, _ := strings.Cut(s.name, "-")
			r.rssMiB[role] = max(r.rssMiB[role], s.rssMiB)
		}
		stored, err := gridStored(res.prefix, res.bucket)
		if err != nil {
			return hostileRun{}, err
		}
		r.stored = stored
	} else {
		g, err := gridCrawl(web.StartURLs(), web.Resolve(), c.depth, c.delay, c.gridBin)
		if err != nil {
			return hostileRun{}, err
		}
		r.pages, r.wall, r.cpu = g.fetched(), g.wall, tv(g.rusage.Utime)+tv(g.rusage.Stime)
		r.records, r.indexed, r.failed = g.status.Total, g.status.Counts[contracts.Indexed], g.status.Counts[contracts.Failed]
		r.rssMiB["grid"] = g.rusage.Maxrss / 1024
		r.stored = g.stored
	}
	r.load[1] = loadAverage()
	if r.pages == 0 {
		return hostileRun{}, errors.New("the crawl fetched nothing")
	}
	return r, nil
}

func printHostileRun(r hostileRun) {
	fmt.Printf("\n%s web: %d pages fetched (%d indexed, %d failed), %d URLs recorded, wall %.1fs, load average %s -> %s\n",
		r.name(), r.pages, r.indexed, r.failed, r.records, r.wall.Seconds(), r.load[0], r.load[1])
	fmt.Printf("  cpu-ms/page %.3f", 1000*r.cpu/float64(r.pages))
	for _, role := range sortedKeys(r.rssMiB) {
		fmt.Printf("  peak rss %s %d MiB", role, r.rssMiB[role])
	}
	fmt.Printf("\n  stored %.1f MiB = %.0f B/page fetched, %.0f B/page of the web:", float64(r.storedTotal())/(1<<20),
		float64(r.storedTotal())/float64(r.pages), float64(r.storedTotal())/float64(r.webPages))
	for _, part := range sortedKeys(r.stored) {
		fmt.Printf(" %s %.0f", part, float64(r.stored[part])/float64(r.pages))
	}
	fmt.Println(" (B/page fetched)")
}

// hostileTable prints the mean of each figure over the runs of each web
// and the ratio hostile/ordinary, and returns an error when a bounded ratio
// exceeds maxRatio.
func hostileTable(runs []hostileRun, maxRatio float64) error {
	type figure struct {
		name    string
		of      func(hostileRun) float64
		bounded bool
	}
	var figs []figure
	for _, role := range sortedKeys(runs[0].rssMiB) {
		figs = append(figs, figure{"peak RSS " + role + " (MiB)", func(r hostileRun) float64 { return float64(r.rssMiB[role]) }, true})
	}
	figs = append(figs,
		figure{"stored bytes per page fetched", func(r hostileRun) float64 { return float64(r.storedTotal()) / float64(r.pages) }, true},
		figure{"stored bytes per page of the web", func(r hostileRun) float64 { return float64(r.storedTotal()) / float64(r.webPages) }, true},
	)
	parts := map[string]bool{}
	for _, r := range runs {
		for p := range r.stored {
			parts[p] = true
		}
	}
	for _, part := range sortedKeys(parts) {
		figs = append(figs, figure{"  of which " + part, func(r hostileRun) float64 { return float64(r.stored[part]) / float64(r.pages) }, false})
	}
	figs = append(figs,
		figure{"CPU ms per page fetched", func(r hostileRun) float64 { return 1000 * r.cpu / float64(r.pages) }, false},
		figure{"pages fetched", func(r hostileRun) float64 { return float64(r.pages) }, false},
		figure{"URLs recorded", func(r hostileRun) float64 { return float64(r.records) }, false},
		figure{"wall seconds", func(r hostileRun) float64 { return r.wall.Seconds() }, false},
	)
	mean := func(hostile bool, of func(hostileRun) float64) float64 {
		var sum float64
		n := 0
		for _, r := range runs {
			if r.hostile == hostile {
				sum += of(r)
				n++
			}
		}
		return sum / float64(n)
	}
	fmt.Printf("\n| figure | ordinary web | hostile web | ratio |\n|---|---|---|---|\n")
	var over []string
	for _, f := range figs {
		o, h := mean(false, f.of), mean(true, f.of)
		ratio := h / o
		mark := ""
		if f.bounded && ratio > maxRatio {
			mark = fmt.Sprintf(" **over %.2g**", maxRatio)
			over = append(over, fmt.Sprintf("%s %.2f", strings.TrimSpace(f.name), ratio))
		}
		fmt.Printf("| %s | %s | %s | %.2f%s |\n", f.name, num(o), num(h), ratio, mark)
	}
	if len(over) > 0 {
		return fmt.Errorf("hostile/ordinary over %.2g: %s", maxRatio, strings.Join(over, "; "))
	}
	fmt.Printf("\nevery bounded ratio (peak RSS of each service, stored bytes per page) is within %.2g\n", maxRatio)
	return nil
}

// num formats a figure with the precision its size needs.
func num(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3f", x)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// loadAverage returns the 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// dataBytes returns the bytes of an embedded grid's data directory by
// part: warc (the assets directory), queue, transactions, search, and other
// (profiles, HCF, locks...).
func dataBytes(dir string) (map[string]int64, error) {
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		part := "other"
		switch first, _, _ := strings.Cut(filepath.ToSlash(rel), "/"); {
		case first == "assets":
			part = "warc"
		case strings.HasPrefix(first, "queue.db"):
			part = "queue"
		case strings.HasPrefix(first, "transactions.db"):
			part = "transactions"
		case strings.HasPrefix(first, "search.db"):
			part = "search"
		case strings.HasPrefix(first, "digests.db"):
			part = "digests"
		}
		out[part] += info.Size()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("measure data directory: %w", err)
	}
	return out, nil
}

// gridStored returns the bytes a grid-mode crawl stored, by part: each
// Elasticsearch index of prefix (primaries, merged to one segment so the
// figure does not depend on when merges ran) and the WARC objects of
// bucket. It then deletes the indices and the bucket: the local
// Elasticsearch holds at most 1,000 shards. The broker's queues are empty
// once a crawl has finished, so they are not counted.
func gridStored(prefix, bucket string) (map[string]int64, error) {
	es := os.Getenv("GRIDCRAWL_ES_URL")
	post := func(path string) error {
		resp, err := http.Post(es+"/"+prefix+"-*/"+path, "application/json", nil)
		if err != nil {
			return fmt.Errorf("elasticsearch %s: %w", path, err)
		}
		resp.Body.Close()
		return nil
	}
	if err := post("_refresh"); err != nil {
		return nil, err
	}
	if err := post("_forcemerge?max_num_segments=1"); err != nil {
		return nil, err
	}
	resp, err := http.Get(es + "/" + prefix + "-*/_stats/store")
	if err != nil {
		return nil, fmt.Errorf("elasticsearch store stats: %w", err)
	}
	var s struct {
		Indices map[string]struct {
			Primaries struct {
				Store struct {
					Size int64 `json:"size_in_bytes"`
				} `json:"store"`
			} `json:"primaries"`
		} `json:"indices"`
	}
	err = json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("decode elasticsearch store stats: %w", err)
	}
	out := map[string]int64{}
	for name, x := range s.Indices {
		out["es "+strings.TrimPrefix(name, prefix+"-")] = x.Primaries.Store.Size
	}
	ctx := context.Background()
	mc, err := minio.New(os.Getenv("GRIDCRAWL_S3_ENDPOINT"), &minio.Options{
		Creds: credentials.NewStaticV4(os.Getenv("GRIDCRAWL_S3_ACCESS_KEY"), os.Getenv("GRIDCRAWL_S3_SECRET_KEY"), "")})
	if err != nil {
		return nil, fmt.Errorf("minio client: %w", err)
	}
	objs := make(chan minio.ObjectInfo)
	var listErr error // set before objs closes, read after RemoveObjects ends
	go func() {
		defer close(objs)
		for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err != nil {
				listErr = o.Err
				continue
			}
			out["warc"] += o.Size
			objs <- o
		}
	}()
	for e := range mc.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		fmt.Fprintf(os.Stderr, "warning: remove %s/%s: %v\n", bucket, e.ObjectName, e.Err)
	}
	if listErr != nil {
		return nil, fmt.Errorf("list bucket %s: %w", bucket, listErr)
	}
	if err := mc.RemoveBucket(ctx, bucket); err != nil {
		fmt.Fprintf(os.Stderr, "warning: remove bucket %s: %v\n", bucket, err)
	}
	// By name: Elasticsearch refuses wildcard deletions by default.
	req, _ := http.NewRequest(http.MethodDelete, es+"/"+strings.Join(sortedKeys(s.Indices), ","), nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		fmt.Fprintf(os.Stderr, "warning: delete indices %s-*: %v\n", prefix, err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "warning: delete indices %s-*: %s\n", prefix, resp.Status)
		}
	}
	fmt.Printf("(measured, then deleted: indices %s-*, bucket %s)\n", prefix, bucket)
	return out, nil
}
